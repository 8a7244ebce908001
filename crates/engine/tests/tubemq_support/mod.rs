//! An encoder of TubeMQ frames independent of the core: the messages are encoded by prost-reflect over the
//! .proto contract (proto/tubemq/*.proto) compiled here by protox, the frame is laid out by hand from the
//! wire facts (shared/reference/protocol-and-anchors.md §2.1: `[0xFF7FF4FE][serial u32][list size u32]` then
//! `[length u32][data]` blocks, all big-endian; the block bytes joined are three `writeDelimitedTo`
//! messages), and the message checksum is a bitwise CRC-32 written here (not crc32fast, which the core uses).
#![allow(dead_code)]

use std::sync::OnceLock;

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, ReflectMessage, Value as Pv};

pub const TOKEN: [u8; 4] = [0xFF, 0x7F, 0xF4, 0xFE];

/// The three TubeMQ .proto files, compiled once.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/tubemq");
        let mut compiler = protox::Compiler::new([dir]).expect("the include directory");
        compiler
            .open_files(["RPC.proto", "MasterService.proto", "BrokerService.proto"])
            .expect("the contract compiles");
        compiler.descriptor_pool()
    })
}

/// A message of type `name` with these fields set (a field of the wrong type panics: a test bug).
pub fn msg(name: &str, fields: Vec<(&str, Pv)>) -> DynamicMessage {
    let descriptor = pool().get_message_by_name(name).unwrap_or_else(|| panic!("{name} is in the contract"));
    let mut message = DynamicMessage::new(descriptor);
    for (field, value) in fields {
        assert!(message.descriptor().get_field_by_name(field).is_some(), "{name}.{field} is in the contract");
        message.set_field_by_name(field, value);
    }
    message
}

pub fn enc(name: &str, fields: Vec<(&str, Pv)>) -> Vec<u8> {
    msg(name, fields).encode_to_vec()
}

pub fn i32v(v: i32) -> Pv {
    Pv::I32(v)
}
pub fn i64v(v: i64) -> Pv {
    Pv::I64(v)
}
pub fn s(v: &str) -> Pv {
    Pv::String(v.to_owned())
}
pub fn b(v: &[u8]) -> Pv {
    Pv::Bytes(prost::bytes::Bytes::copy_from_slice(v))
}
pub fn strs(v: &[&str]) -> Pv {
    Pv::List(v.iter().map(|x| s(x)).collect())
}
pub fn m(v: DynamicMessage) -> Pv {
    Pv::Message(v)
}

/// A message written as `writeDelimitedTo` writes it: its varint length, then its bytes.
pub fn delimited(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// The frame of these blocks.
pub fn frame_of_blocks(serial: u32, blocks: &[&[u8]]) -> Vec<u8> {
    let mut out = TOKEN.to_vec();
    out.extend_from_slice(&serial.to_be_bytes());
    out.extend_from_slice(&(blocks.len() as u32).to_be_bytes());
    for block in blocks {
        out.extend_from_slice(&(block.len() as u32).to_be_bytes());
        out.extend_from_slice(block);
    }
    out
}

/// The frame of `data` in blocks of `block` bytes (the last one shorter), as the reference clients write it
/// with their 8 KiB buffers when `block` is 8192.
pub fn frame(serial: u32, data: &[u8], block: usize) -> Vec<u8> {
    let blocks: Vec<&[u8]> = data.chunks(block.max(1)).collect();
    frame_of_blocks(serial, &blocks)
}

/// The envelope of a request: RpcConnHeader (flag 0), RequestHeader, RequestBody with the method's message.
pub fn request_data(service_type: i32, method: i32, message: &[u8]) -> Vec<u8> {
    let mut data = delimited(&enc("RpcConnHeader", vec![("flag", i32v(0))]));
    data.extend(delimited(&enc("RequestHeader", vec![("serviceType", i32v(service_type)), ("protocolVer", i32v(3))])));
    data.extend(delimited(&enc(
        "RequestBody",
        vec![("method", i32v(method)), ("timeout", i64v(10_000)), ("request", b(message))],
    )));
    data
}

/// The envelope of a successful response: RpcConnHeader (flag 1), ResponseHeader SUCCESS, RspResponseBody.
pub fn response_data(method: i32, message: &[u8]) -> Vec<u8> {
    let mut data = delimited(&enc("RpcConnHeader", vec![("flag", i32v(1))]));
    data.extend(delimited(&enc("ResponseHeader", vec![("status", Pv::EnumNumber(0)), ("protocolVer", i32v(3))])));
    data.extend(delimited(&enc("RspResponseBody", vec![("method", i32v(method)), ("data", b(message))])));
    data
}

/// The envelope of a failed response: status `status` (1 ERROR, 2 FATAL) and an exception.
pub fn exception_data(status: i32, name: &str, trace: &str) -> Vec<u8> {
    let mut data = delimited(&enc("RpcConnHeader", vec![("flag", i32v(1))]));
    data.extend(delimited(&enc("ResponseHeader", vec![("status", Pv::EnumNumber(status)), ("protocolVer", i32v(3))])));
    data.extend(delimited(&enc("RspExceptionBody", vec![("exceptionName", s(name)), ("stackTrace", s(trace))])));
    data
}

pub fn request(serial: u32, service_type: i32, method: i32, message: &[u8]) -> Vec<u8> {
    frame(serial, &request_data(service_type, method, message), 8192)
}

pub fn response(serial: u32, method: i32, message: &[u8]) -> Vec<u8> {
    frame(serial, &response_data(method, message), 8192)
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), bit by bit: java.util.zip.CRC32.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// TubeMQ's message checksum (CheckSum.crc32): the CRC-32 masked to a non-negative int.
pub fn tube_checksum(data: &[u8]) -> i32 {
    (crc32(data) & 0x7FFF_FFFF) as i32
}

/// A message's data with attributes (flag bit 0): `[attrLen i32 BE][attributes][payload]`.
pub fn with_attributes(attributes: &str, payload: &[u8]) -> Vec<u8> {
    let mut data = (attributes.len() as i32).to_be_bytes().to_vec();
    data.extend_from_slice(attributes.as_bytes());
    data.extend_from_slice(payload);
    data
}

/// A small deterministic generator for the hostile-input tests (xorshift64*).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

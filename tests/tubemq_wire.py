"""TubeMQ (Apache InLong) wire encoder for the tests: frames, message data and whole capture files.

Written from the protocol facts, independently of the decoder: it imports nothing from ``dissector``,
``dissector._core`` or code generated from ``proto/tubemq``, and writes protobuf by hand (varints, tags,
length-delimited fields) from the field-number tables below. A mistake shared by the decoder and the .proto
files therefore shows up as a test failure instead of agreeing with itself.

Facts and where they come from (apache/inlong, ``inlong-tubemq/tubemq-core/src/main``):

* ``proto/{RPC,MasterService,BrokerService}.proto``: message and field names, numbers, types, labels.
* ``corerpc/RpcConstants.java``: begin token 0xFF7FF4FE, flags (0 request, 1 response), service types, method
  ids, the 8192-byte block size.
* ``corerpc/netty/NettyProtocolEncoder.java``, ``ByteBufferOutputStream.java``, ``NettyClient.java``,
  ``NettyRequestContext.java``: a frame is ``[token][serialNo][listSize]`` then listSize blocks
  ``[len][bytes]``, all 4-byte big-endian; the block bytes are RpcConnHeader, RequestHeader|ResponseHeader,
  RequestBody|RspResponseBody|RspExceptionBody, each written with ``writeDelimitedTo`` (varint size prefix);
  every block but the last is 8192 bytes; a response header holds only status and protocolVer.
* ``corebase/utils/{MessageFlagUtils,CheckSum,DataConverterUtil}.java``: message data is
  ``[attrLen i32 BE][attribute][payload]`` when ``flag & 1``; checksum ``CRC32(data) & 0x7FFFFFFF``
  (java.util.zip.CRC32), -1 from producers; consumers drop a message whose checksum does not match.
* ``corerpc/protocol/RpcProtocol.java``: a failed call answers status ERROR with the exception's class name
  and message (``StandbyException`` from a master that is not the active one).
* Go client ``tubemq-client-twins/tubemq-client-go/codec/tubemq_codec.go``: the same framing, executable.

``python tests/tubemq_wire.py OUTDIR`` writes every scenario's pcap and manifest (JSON) into OUTDIR.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcapgen  # noqa: E402  (tests/pcapgen.py: pcap writer and TCP/IP packet builders)

# ------------------------------------------------------------------------------------------- protocol constants
BEGIN_TOKEN = 0xFF7FF4FE         # RpcConstants.RPC_PROTOCOL_BEGIN_TOKEN (as a signed Java int: -8391426)
MAX_BLOCK_SIZE = 8192            # RpcConstants.RPC_MAX_BUFFER_SIZE: ByteBufferOutputStream's buffer size
MAX_LIST_SIZE = 3584             # the server's limit: (20 MiB + 8 MiB) / 8192 blocks
FRAME_HEADER = struct.Struct(">III")   # token, serialNo, listSize
BLOCK_LENGTH = struct.Struct(">I")

FLAG_REQUEST = 0                 # RpcConstants.RPC_FLAG_MSG_TYPE_REQUEST (RpcConnHeader.flag)
FLAG_RESPONSE = 1                # RpcConstants.RPC_FLAG_MSG_TYPE_RESPONSE

SERVICE_MASTER = 1               # RpcConstants.RPC_SERVICE_TYPE_MASTER_SERVICE
SERVICE_BROKER_READ = 2          # RPC_SERVICE_TYPE_BROKER_READ_SERVICE (consumers)
SERVICE_BROKER_WRITE = 3         # RPC_SERVICE_TYPE_BROKER_WRITE_SERVICE (producers)

PROTOCOL_VERSION = 3             # RpcProtocol.RPC_PROTOCOL_VERSION (org.apache.inlong packages)

STATUS_SUCCESS, STATUS_ERROR, STATUS_FATAL = 0, 1, 2   # RPC.proto ResponseHeader.Status
STATUS_NAMES = {STATUS_SUCCESS: "SUCCESS", STATUS_ERROR: "ERROR", STATUS_FATAL: "FATAL"}

FLAG_HAS_ATTRIBUTE = 0x1         # MessageFlagUtils.hasAttribute: flag & 1
CHECKSUM_NOT_SUPPLIED = -1       # what the Java producer puts in SendMessageRequestP2B.checkSum

OP_REGISTER, OP_UNREGISTER = 31, 32   # RegisterRequestC2B.opType (RpcConstants.MSG_OPTYPE_REGISTER / UNREGISTER)

# EventProto.opType / .status values (corebase/balance/EventType.java, EventStatus.java)
EVENT_CONNECT, EVENT_DISCONNECT, EVENT_ONLY_CONNECT, EVENT_ONLY_DISCONNECT = 1, 2, 10, 20
EVENT_TODO, EVENT_PROCESSING, EVENT_DONE = 0, 1, 2

ERR_SUCCESS, ERR_NOT_FOUND, ERR_PARTITION_UNPUBLISHABLE = 200, 404, 423   # TErrCodeConstants

MASTER_PORT = 8715               # TBaseConstants.META_DEFAULT_MASTER_PORT
BROKER_PORT = 8123               # TBaseConstants.META_DEFAULT_BROKER_PORT

STANDBY_EXCEPTION = "org.apache.inlong.tubemq.corerpc.exception.StandbyException"

# ------------------------------------------------------------------------------------------ protobuf by hand
WIRE_VARINT = 0
WIRE_LENGTH_DELIMITED = 2

INT32, INT64, BOOL, ENUM, STRING, BYTES = "int32", "int64", "bool", "enum", "string", "bytes"
REQUIRED, OPTIONAL, REPEATED = "required", "optional", "repeated"

_INT_RANGES = {INT32: (-(1 << 31), 1 << 31), INT64: (-(1 << 63), 1 << 63), ENUM: (-(1 << 31), 1 << 31)}


def varint(value: int) -> bytes:
    """Base-128 varint, low group first. A negative number goes out as its 64-bit two's complement (ten
    bytes), which is what protobuf does for negative int32 and int64 alike."""
    if value < 0:
        value += 1 << 64
    if not 0 <= value < 1 << 64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while True:
        group = value & 0x7F
        value >>= 7
        if value:
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


def field_key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def length_delimited(data: bytes) -> bytes:
    """``writeDelimitedTo``: the size as a varint, then the bytes."""
    return varint(len(data)) + data


@dataclass(frozen=True)
class Field:
    name: str
    number: int
    kind: object                 # one of INT32 ... BYTES, or the Message of a nested message
    label: str


class Message:
    """One protobuf message type: its upstream name and field table; ``encode`` turns a dict into bytes."""

    def __init__(self, name: str, fields: list[Field]) -> None:
        self.name = name
        self.fields = fields
        self.by_name = {f.name: f for f in fields}

    def encode(self, values: dict, check_required: bool = True) -> bytes:
        """Fields in number order, as protobuf serialisers write them; a key the table lacks is an error (a
        typo would otherwise silently drop a field); a missing required field too, unless told otherwise."""
        unknown = set(values) - set(self.by_name)
        if unknown:
            raise KeyError(f"{self.name} has no field {sorted(unknown)}")
        out = []
        for f in self.fields:
            value = values.get(f.name)
            if value is None:
                if f.label == REQUIRED and check_required:
                    raise ValueError(f"{self.name}.{f.name} is required")
                continue
            if f.label == REPEATED:
                if not isinstance(value, (list, tuple)):
                    raise TypeError(f"{self.name}.{f.name} is repeated: give a list")
                out.extend(_encode_field(self, f, item) for item in value)
            else:
                out.append(_encode_field(self, f, value))
        return b"".join(out)


def _encode_field(message: Message, f: Field, value) -> bytes:
    where = f"{message.name}.{f.name}"
    if isinstance(f.kind, Message):
        body = value if isinstance(value, (bytes, bytearray)) else f.kind.encode(value)
        return field_key(f.number, WIRE_LENGTH_DELIMITED) + length_delimited(bytes(body))
    if f.kind == STRING:
        if not isinstance(value, str):
            raise TypeError(f"{where} is a string")
        return field_key(f.number, WIRE_LENGTH_DELIMITED) + length_delimited(value.encode("utf-8"))
    if f.kind == BYTES:
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"{where} is bytes")
        return field_key(f.number, WIRE_LENGTH_DELIMITED) + length_delimited(bytes(value))
    if f.kind == BOOL:
        if not isinstance(value, bool):
            raise TypeError(f"{where} is a bool")
        return field_key(f.number, WIRE_VARINT) + varint(int(value))
    low, high = _INT_RANGES[f.kind]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise ValueError(f"{where} is {f.kind}: {value!r}")
    return field_key(f.number, WIRE_VARINT) + varint(value)


# ------------------------------------------------------------------------------- field-number tables (upstream)
# One row per upstream field: Field(name, number, type, label); the comment names the upstream message.field.
RPC_CONN_HEADER = Message("RpcConnHeader", [
    Field("flag", 1, INT32, REQUIRED),                                  # RpcConnHeader.flag
    Field("traceId", 2, INT64, OPTIONAL),                               # RpcConnHeader.traceId
    Field("spanId", 3, INT64, OPTIONAL),                                # RpcConnHeader.spanId
    Field("parentId", 4, INT64, OPTIONAL),                              # RpcConnHeader.parentId
])

REQUEST_HEADER = Message("RequestHeader", [
    Field("serviceType", 1, INT32, OPTIONAL),                           # RequestHeader.serviceType
    Field("protocolVer", 2, INT32, OPTIONAL),                           # RequestHeader.protocolVer
])

REQUEST_BODY = Message("RequestBody", [
    Field("method", 1, INT32, REQUIRED),                                # RequestBody.method
    Field("timeout", 2, INT64, OPTIONAL),                               # RequestBody.timeout
    Field("request", 3, BYTES, OPTIONAL),                               # RequestBody.request
])

RESPONSE_HEADER = Message("ResponseHeader", [
    Field("status", 1, ENUM, REQUIRED),                                 # ResponseHeader.status
    Field("serviceType", 2, INT32, OPTIONAL),                           # ResponseHeader.serviceType
    Field("protocolVer", 3, INT32, OPTIONAL),                           # ResponseHeader.protocolVer
])

RSP_EXCEPTION_BODY = Message("RspExceptionBody", [
    Field("exceptionName", 1, STRING, REQUIRED),                        # RspExceptionBody.exceptionName
    Field("stackTrace", 2, STRING, OPTIONAL),                           # RspExceptionBody.stackTrace
])

RSP_RESPONSE_BODY = Message("RspResponseBody", [
    Field("method", 1, INT32, REQUIRED),                                # RspResponseBody.method
    Field("data", 2, BYTES, REQUIRED),                                  # RspResponseBody.data
])

EVENT_PROTO = Message("EventProto", [
    Field("rebalanceId", 1, INT64, OPTIONAL),                           # EventProto.rebalanceId
    Field("opType", 2, INT32, OPTIONAL),                                # EventProto.opType
    Field("status", 3, INT32, OPTIONAL),                                # EventProto.status
    Field("subscribeInfo", 4, STRING, REPEATED),                        # EventProto.subscribeInfo
])

AUTHENTICATE_INFO = Message("AuthenticateInfo", [
    Field("userName", 1, STRING, REQUIRED),                             # AuthenticateInfo.userName
    Field("timestamp", 2, INT64, REQUIRED),                             # AuthenticateInfo.timestamp
    Field("nonce", 3, INT32, REQUIRED),                                 # AuthenticateInfo.nonce
    Field("othParams", 4, STRING, REQUIRED),                            # AuthenticateInfo.othParams
    Field("signature", 5, STRING, REQUIRED),                            # AuthenticateInfo.signature
])

MASTER_CERTIFICATE_INFO = Message("MasterCertificateInfo", [
    Field("authInfo", 1, AUTHENTICATE_INFO, OPTIONAL),                  # MasterCertificateInfo.authInfo
    Field("authorizedToken", 2, STRING, OPTIONAL),                      # MasterCertificateInfo.authorizedToken
])

MASTER_AUTHORIZED_INFO = Message("MasterAuthorizedInfo", [
    Field("visitAuthorizedToken", 1, INT64, REQUIRED),                  # MasterAuthorizedInfo.visitAuthorizedToken
    Field("authAuthorizedToken", 2, STRING, OPTIONAL),                  # MasterAuthorizedInfo.authAuthorizedToken
])

APPROVED_CLIENT_CONFIG = Message("ApprovedClientConfig", [
    Field("configId", 1, INT64, REQUIRED),                              # ApprovedClientConfig.configId
    Field("maxMsgSize", 2, INT32, OPTIONAL),                            # ApprovedClientConfig.maxMsgSize
])

REGISTER_REQUEST_P2M = Message("RegisterRequestP2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # RegisterRequestP2M.clientId
    Field("topicList", 2, STRING, REPEATED),                            # RegisterRequestP2M.topicList
    Field("brokerCheckSum", 3, INT64, REQUIRED),                        # RegisterRequestP2M.brokerCheckSum
    Field("hostName", 4, STRING, REQUIRED),                             # RegisterRequestP2M.hostName
    Field("authInfo", 5, MASTER_CERTIFICATE_INFO, OPTIONAL),            # RegisterRequestP2M.authInfo
    Field("jdkVersion", 6, STRING, OPTIONAL),                           # RegisterRequestP2M.jdkVersion
    Field("appdConfig", 7, APPROVED_CLIENT_CONFIG, OPTIONAL),           # RegisterRequestP2M.appdConfig
])

REGISTER_RESPONSE_M2P = Message("RegisterResponseM2P", [
    Field("success", 1, BOOL, REQUIRED),                                # RegisterResponseM2P.success
    Field("errCode", 2, INT32, REQUIRED),                               # RegisterResponseM2P.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # RegisterResponseM2P.errMsg
    Field("brokerCheckSum", 4, INT64, REQUIRED),                        # RegisterResponseM2P.brokerCheckSum
    Field("brokerInfos", 5, STRING, REPEATED),                          # RegisterResponseM2P.brokerInfos
    Field("authorizedInfo", 6, MASTER_AUTHORIZED_INFO, OPTIONAL),       # RegisterResponseM2P.authorizedInfo
    Field("appdConfig", 7, APPROVED_CLIENT_CONFIG, OPTIONAL),           # RegisterResponseM2P.appdConfig
])

HEART_REQUEST_P2M = Message("HeartRequestP2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # HeartRequestP2M.clientId
    Field("brokerCheckSum", 2, INT64, REQUIRED),                        # HeartRequestP2M.brokerCheckSum
    Field("hostName", 3, STRING, REQUIRED),                             # HeartRequestP2M.hostName
    Field("topicList", 4, STRING, REPEATED),                            # HeartRequestP2M.topicList
    Field("authInfo", 5, MASTER_CERTIFICATE_INFO, OPTIONAL),            # HeartRequestP2M.authInfo
    Field("appdConfig", 6, APPROVED_CLIENT_CONFIG, OPTIONAL),           # HeartRequestP2M.appdConfig
])

HEART_RESPONSE_M2P = Message("HeartResponseM2P", [
    Field("success", 1, BOOL, REQUIRED),                                # HeartResponseM2P.success
    Field("errCode", 2, INT32, REQUIRED),                               # HeartResponseM2P.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # HeartResponseM2P.errMsg
    Field("brokerCheckSum", 4, INT64, REQUIRED),                        # HeartResponseM2P.brokerCheckSum
    Field("topicInfos", 5, STRING, REPEATED),                           # HeartResponseM2P.topicInfos
    Field("brokerInfos", 6, STRING, REPEATED),                          # HeartResponseM2P.brokerInfos
    Field("requireAuth", 7, BOOL, OPTIONAL),                            # HeartResponseM2P.requireAuth
    Field("authorizedInfo", 8, MASTER_AUTHORIZED_INFO, OPTIONAL),       # HeartResponseM2P.authorizedInfo
    Field("appdConfig", 9, APPROVED_CLIENT_CONFIG, OPTIONAL),           # HeartResponseM2P.appdConfig
])

CLOSE_REQUEST_P2M = Message("CloseRequestP2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # CloseRequestP2M.clientId
    Field("authInfo", 2, MASTER_CERTIFICATE_INFO, OPTIONAL),            # CloseRequestP2M.authInfo
])

CLOSE_RESPONSE_M2P = Message("CloseResponseM2P", [
    Field("success", 1, BOOL, REQUIRED),                                # CloseResponseM2P.success
    Field("errCode", 2, INT32, REQUIRED),                               # CloseResponseM2P.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # CloseResponseM2P.errMsg
])

REGISTER_REQUEST_C2M = Message("RegisterRequestC2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # RegisterRequestC2M.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # RegisterRequestC2M.groupName
    Field("hostName", 3, STRING, REQUIRED),                             # RegisterRequestC2M.hostName
    Field("topicList", 4, STRING, REPEATED),                            # RegisterRequestC2M.topicList
    Field("subscribeInfo", 5, STRING, REPEATED),                        # RegisterRequestC2M.subscribeInfo
    Field("topicCondition", 6, STRING, REPEATED),                       # RegisterRequestC2M.topicCondition
    Field("requireBound", 7, BOOL, OPTIONAL),                           # RegisterRequestC2M.requireBound
    Field("sessionTime", 8, INT64, OPTIONAL),                           # RegisterRequestC2M.sessionTime
    Field("sessionKey", 9, STRING, OPTIONAL),                           # RegisterRequestC2M.sessionKey
    Field("totalCount", 10, INT32, OPTIONAL),                           # RegisterRequestC2M.totalCount
    Field("requiredPartition", 11, STRING, OPTIONAL),                   # RegisterRequestC2M.requiredPartition
    Field("notAllocated", 12, BOOL, OPTIONAL),                          # RegisterRequestC2M.notAllocated
    Field("selectBig", 13, BOOL, OPTIONAL),                             # RegisterRequestC2M.selectBig
    Field("groupFlowCheckId", 14, INT64, OPTIONAL),                     # RegisterRequestC2M.groupFlowCheckId
    Field("defFlowCheckId", 15, INT64, OPTIONAL),                       # RegisterRequestC2M.defFlowCheckId
    Field("ssdStoreId", 16, INT64, OPTIONAL),                           # RegisterRequestC2M.ssdStoreId
    Field("qryPriorityId", 17, INT32, OPTIONAL),                        # RegisterRequestC2M.qryPriorityId
    Field("authInfo", 18, MASTER_CERTIFICATE_INFO, OPTIONAL),           # RegisterRequestC2M.authInfo
    Field("jdkVersion", 19, STRING, OPTIONAL),                          # RegisterRequestC2M.jdkVersion
])

REGISTER_RESPONSE_M2C = Message("RegisterResponseM2C", [
    Field("success", 1, BOOL, REQUIRED),                                # RegisterResponseM2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # RegisterResponseM2C.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # RegisterResponseM2C.errMsg
    Field("topicInfo", 4, STRING, REPEATED),                            # RegisterResponseM2C.topicInfo
    Field("notAllocated", 5, BOOL, OPTIONAL),                           # RegisterResponseM2C.notAllocated
    Field("defFlowCheckId", 6, INT64, OPTIONAL),                        # RegisterResponseM2C.defFlowCheckId
    Field("defFlowControlInfo", 7, STRING, OPTIONAL),                   # RegisterResponseM2C.defFlowControlInfo
    Field("groupFlowCheckId", 8, INT64, OPTIONAL),                      # RegisterResponseM2C.groupFlowCheckId
    Field("groupFlowControlInfo", 9, STRING, OPTIONAL),                 # RegisterResponseM2C.groupFlowControlInfo
    Field("ssdStoreId", 10, INT64, OPTIONAL),                           # RegisterResponseM2C.ssdStoreId
    Field("qryPriorityId", 11, INT32, OPTIONAL),                        # RegisterResponseM2C.qryPriorityId
    Field("authorizedInfo", 12, MASTER_AUTHORIZED_INFO, OPTIONAL),      # RegisterResponseM2C.authorizedInfo
])

HEART_REQUEST_C2M = Message("HeartRequestC2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # HeartRequestC2M.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # HeartRequestC2M.groupName
    Field("subscribeInfo", 3, STRING, REPEATED),                        # HeartRequestC2M.subscribeInfo
    Field("reportSubscribeInfo", 4, BOOL, REQUIRED),                    # HeartRequestC2M.reportSubscribeInfo
    Field("event", 5, EVENT_PROTO, OPTIONAL),                           # HeartRequestC2M.event
    Field("defFlowCheckId", 6, INT64, OPTIONAL),                        # HeartRequestC2M.defFlowCheckId
    Field("groupFlowCheckId", 7, INT64, OPTIONAL),                      # HeartRequestC2M.groupFlowCheckId
    Field("ssdStoreId", 8, INT64, OPTIONAL),                            # HeartRequestC2M.ssdStoreId
    Field("qryPriorityId", 9, INT32, OPTIONAL),                         # HeartRequestC2M.qryPriorityId
    Field("authInfo", 10, MASTER_CERTIFICATE_INFO, OPTIONAL),           # HeartRequestC2M.authInfo
])

HEART_RESPONSE_M2C = Message("HeartResponseM2C", [
    Field("success", 1, BOOL, REQUIRED),                                # HeartResponseM2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # HeartResponseM2C.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # HeartResponseM2C.errMsg
    Field("event", 4, EVENT_PROTO, OPTIONAL),                           # HeartResponseM2C.event
    Field("notAllocated", 5, BOOL, OPTIONAL),                           # HeartResponseM2C.notAllocated
    Field("defFlowCheckId", 6, INT64, OPTIONAL),                        # HeartResponseM2C.defFlowCheckId
    Field("defFlowControlInfo", 7, STRING, OPTIONAL),                   # HeartResponseM2C.defFlowControlInfo
    Field("groupFlowCheckId", 8, INT64, OPTIONAL),                      # HeartResponseM2C.groupFlowCheckId
    Field("groupFlowControlInfo", 9, STRING, OPTIONAL),                 # HeartResponseM2C.groupFlowControlInfo
    Field("ssdStoreId", 10, INT64, OPTIONAL),                           # HeartResponseM2C.ssdStoreId
    Field("qryPriorityId", 11, INT32, OPTIONAL),                        # HeartResponseM2C.qryPriorityId
    Field("requireAuth", 12, BOOL, OPTIONAL),                           # HeartResponseM2C.requireAuth
    Field("authorizedInfo", 13, MASTER_AUTHORIZED_INFO, OPTIONAL),      # HeartResponseM2C.authorizedInfo
])

CLOSE_REQUEST_C2M = Message("CloseRequestC2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # CloseRequestC2M.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # CloseRequestC2M.groupName
    Field("authInfo", 3, MASTER_CERTIFICATE_INFO, OPTIONAL),            # CloseRequestC2M.authInfo
])

CLOSE_RESPONSE_M2C = Message("CloseResponseM2C", [
    Field("success", 1, BOOL, REQUIRED),                                # CloseResponseM2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # CloseResponseM2C.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # CloseResponseM2C.errMsg
])

TRANSFERED_MESSAGE = Message("TransferedMessage", [
    Field("messageId", 1, INT64, REQUIRED),                             # TransferedMessage.messageId
    Field("checkSum", 2, INT32, REQUIRED),                              # TransferedMessage.checkSum
    Field("payLoadData", 3, BYTES, REQUIRED),                           # TransferedMessage.payLoadData
    Field("flag", 4, INT32, REQUIRED),                                  # TransferedMessage.flag
])

AUTHORIZED_INFO = Message("AuthorizedInfo", [
    Field("visitAuthorizedToken", 1, INT64, REQUIRED),                  # AuthorizedInfo.visitAuthorizedToken
    Field("authAuthorizedToken", 2, STRING, OPTIONAL),                  # AuthorizedInfo.authAuthorizedToken
])

SEND_MESSAGE_REQUEST_P2B = Message("SendMessageRequestP2B", [
    Field("clientId", 1, STRING, REQUIRED),                             # SendMessageRequestP2B.clientId
    Field("topicName", 2, STRING, REQUIRED),                            # SendMessageRequestP2B.topicName
    Field("partitionId", 3, INT32, REQUIRED),                           # SendMessageRequestP2B.partitionId
    Field("data", 4, BYTES, REQUIRED),                                  # SendMessageRequestP2B.data
    Field("flag", 5, INT32, REQUIRED),                                  # SendMessageRequestP2B.flag
    Field("checkSum", 6, INT32, REQUIRED),                              # SendMessageRequestP2B.checkSum
    Field("sentAddr", 7, INT32, REQUIRED),                              # SendMessageRequestP2B.sentAddr
    Field("msgType", 8, STRING, OPTIONAL),                              # SendMessageRequestP2B.msgType
    Field("msgTime", 9, STRING, OPTIONAL),                              # SendMessageRequestP2B.msgTime
    Field("authInfo", 10, AUTHORIZED_INFO, OPTIONAL),                   # SendMessageRequestP2B.authInfo
])

SEND_MESSAGE_RESPONSE_B2P = Message("SendMessageResponseB2P", [
    Field("success", 1, BOOL, REQUIRED),                                # SendMessageResponseB2P.success
    Field("errCode", 2, INT32, REQUIRED),                               # SendMessageResponseB2P.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # SendMessageResponseB2P.errMsg
    Field("requireAuth", 4, BOOL, OPTIONAL),                            # SendMessageResponseB2P.requireAuth
    Field("messageId", 5, INT64, OPTIONAL),                             # SendMessageResponseB2P.messageId
    Field("appendTime", 6, INT64, OPTIONAL),                            # SendMessageResponseB2P.appendTime
    Field("appendOffset", 7, INT64, OPTIONAL),                          # SendMessageResponseB2P.appendOffset
])

REGISTER_REQUEST_C2B = Message("RegisterRequestC2B", [
    Field("opType", 1, INT32, REQUIRED),                                # RegisterRequestC2B.opType
    Field("clientId", 2, STRING, REQUIRED),                             # RegisterRequestC2B.clientId
    Field("groupName", 3, STRING, REQUIRED),                            # RegisterRequestC2B.groupName
    Field("topicName", 4, STRING, REQUIRED),                            # RegisterRequestC2B.topicName
    Field("partitionId", 5, INT32, REQUIRED),                           # RegisterRequestC2B.partitionId
    Field("readStatus", 6, INT32, REQUIRED),                            # RegisterRequestC2B.readStatus
    Field("filterCondStr", 7, STRING, REPEATED),                        # RegisterRequestC2B.filterCondStr
    Field("currOffset", 8, INT64, OPTIONAL),                            # RegisterRequestC2B.currOffset
    Field("sessionKey", 9, STRING, OPTIONAL),                           # RegisterRequestC2B.sessionKey
    Field("sessionTime", 10, INT64, OPTIONAL),                          # RegisterRequestC2B.sessionTime
    Field("ssdStoreId", 11, INT64, OPTIONAL),                           # RegisterRequestC2B.ssdStoreId
    Field("qryPriorityId", 12, INT32, OPTIONAL),                        # RegisterRequestC2B.qryPriorityId
    Field("authInfo", 13, AUTHORIZED_INFO, OPTIONAL),                   # RegisterRequestC2B.authInfo
])

REGISTER_RESPONSE_B2C = Message("RegisterResponseB2C", [
    Field("success", 1, BOOL, REQUIRED),                                # RegisterResponseB2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # RegisterResponseB2C.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # RegisterResponseB2C.errMsg
    Field("currOffset", 4, INT64, OPTIONAL),                            # RegisterResponseB2C.currOffset
    Field("maxOffset", 5, INT64, OPTIONAL),                             # RegisterResponseB2C.maxOffset
])

HEART_BEAT_REQUEST_C2B = Message("HeartBeatRequestC2B", [
    Field("clientId", 1, STRING, REQUIRED),                             # HeartBeatRequestC2B.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # HeartBeatRequestC2B.groupName
    Field("readStatus", 3, INT32, REQUIRED),                            # HeartBeatRequestC2B.readStatus
    Field("partitionInfo", 4, STRING, REPEATED),                        # HeartBeatRequestC2B.partitionInfo
    Field("ssdStoreId", 5, INT64, OPTIONAL),                            # HeartBeatRequestC2B.ssdStoreId
    Field("qryPriorityId", 6, INT32, OPTIONAL),                         # HeartBeatRequestC2B.qryPriorityId
    Field("authInfo", 7, AUTHORIZED_INFO, OPTIONAL),                    # HeartBeatRequestC2B.authInfo
])

HEART_BEAT_RESPONSE_B2C = Message("HeartBeatResponseB2C", [
    Field("success", 1, BOOL, REQUIRED),                                # HeartBeatResponseB2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # HeartBeatResponseB2C.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # HeartBeatResponseB2C.errMsg
    Field("hasPartFailure", 4, BOOL, OPTIONAL),                         # HeartBeatResponseB2C.hasPartFailure
    Field("failureInfo", 5, STRING, REPEATED),                          # HeartBeatResponseB2C.failureInfo
    Field("requireAuth", 6, BOOL, OPTIONAL),                            # HeartBeatResponseB2C.requireAuth
])

GET_MESSAGE_REQUEST_C2B = Message("GetMessageRequestC2B", [
    Field("clientId", 1, STRING, REQUIRED),                             # GetMessageRequestC2B.clientId
    Field("partitionId", 2, INT32, REQUIRED),                           # GetMessageRequestC2B.partitionId
    Field("groupName", 3, STRING, REQUIRED),                            # GetMessageRequestC2B.groupName
    Field("topicName", 4, STRING, REQUIRED),                            # GetMessageRequestC2B.topicName
    Field("lastPackConsumed", 5, BOOL, OPTIONAL),                       # GetMessageRequestC2B.lastPackConsumed
    Field("manualCommitOffset", 6, BOOL, OPTIONAL),                     # GetMessageRequestC2B.manualCommitOffset
    Field("escFlowCtrl", 7, BOOL, OPTIONAL),                            # GetMessageRequestC2B.escFlowCtrl
])

GET_MESSAGE_RESPONSE_B2C = Message("GetMessageResponseB2C", [
    Field("success", 1, BOOL, REQUIRED),                                # GetMessageResponseB2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # GetMessageResponseB2C.errCode
    Field("errMsg", 3, STRING, OPTIONAL),                               # GetMessageResponseB2C.errMsg
    Field("messages", 4, TRANSFERED_MESSAGE, REPEATED),                 # GetMessageResponseB2C.messages
    Field("currOffset", 5, INT64, OPTIONAL),                            # GetMessageResponseB2C.currOffset
    Field("minLimitTime", 6, INT32, OPTIONAL),                          # GetMessageResponseB2C.minLimitTime
    Field("escFlowCtrl", 7, BOOL, OPTIONAL),                            # GetMessageResponseB2C.escFlowCtrl
    Field("currDataDlt", 8, INT64, OPTIONAL),                           # GetMessageResponseB2C.currDataDlt
    Field("requireSlow", 9, BOOL, OPTIONAL),                            # GetMessageResponseB2C.requireSlow
    Field("maxOffset", 10, INT64, OPTIONAL),                            # GetMessageResponseB2C.maxOffset
])

COMMIT_OFFSET_REQUEST_C2B = Message("CommitOffsetRequestC2B", [
    Field("clientId", 1, STRING, REQUIRED),                             # CommitOffsetRequestC2B.clientId
    Field("topicName", 2, STRING, REQUIRED),                            # CommitOffsetRequestC2B.topicName
    Field("partitionId", 3, INT32, REQUIRED),                           # CommitOffsetRequestC2B.partitionId
    Field("groupName", 4, STRING, REQUIRED),                            # CommitOffsetRequestC2B.groupName
    Field("lastPackConsumed", 5, BOOL, OPTIONAL),                       # CommitOffsetRequestC2B.lastPackConsumed
])

COMMIT_OFFSET_RESPONSE_B2C = Message("CommitOffsetResponseB2C", [
    Field("success", 1, BOOL, REQUIRED),                                # CommitOffsetResponseB2C.success
    Field("errCode", 2, INT32, REQUIRED),                               # CommitOffsetResponseB2C.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # CommitOffsetResponseB2C.errMsg
    Field("currOffset", 4, INT64, OPTIONAL),                            # CommitOffsetResponseB2C.currOffset
    Field("maxOffset", 5, INT64, OPTIONAL),                             # CommitOffsetResponseB2C.maxOffset
])

ENABLE_BROKER_FUN_INFO = Message("EnableBrokerFunInfo", [
    Field("enableConsumeAuthenticate", 1, BOOL, REQUIRED),              # EnableBrokerFunInfo.enableConsumeAuthenticate
    Field("enableConsumeAuthorize", 2, BOOL, REQUIRED),                 # EnableBrokerFunInfo.enableConsumeAuthorize
    Field("enableProduceAuthenticate", 3, BOOL, REQUIRED),              # EnableBrokerFunInfo.enableProduceAuthenticate
    Field("enableProduceAuthorize", 4, BOOL, REQUIRED),                 # EnableBrokerFunInfo.enableProduceAuthorize
    Field("enableVisitTokenCheck", 5, BOOL, OPTIONAL),                  # EnableBrokerFunInfo.enableVisitTokenCheck
])

MASTER_BROKER_AUTHORIZED_INFO = Message("MasterBrokerAuthorizedInfo", [
    Field("visitAuthorizedToken", 1, STRING, REQUIRED),                 # MasterBrokerAuthorizedInfo.visitAuthorizedToken
    Field("authAuthorizedToken", 2, STRING, OPTIONAL),                  # MasterBrokerAuthorizedInfo.authAuthorizedToken
])

CLUSTER_CONFIG = Message("ClusterConfig", [
    Field("configId", 1, INT64, REQUIRED),                              # ClusterConfig.configId
    Field("maxMsgSize", 2, INT32, OPTIONAL),                            # ClusterConfig.maxMsgSize
])

REGISTER_REQUEST_B2M = Message("RegisterRequestB2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # RegisterRequestB2M.clientId
    Field("brokerOnline", 2, BOOL, REQUIRED),                           # RegisterRequestB2M.brokerOnline
    Field("enableTls", 3, BOOL, REQUIRED),                              # RegisterRequestB2M.enableTls
    Field("readStatusRpt", 4, INT32, REQUIRED),                         # RegisterRequestB2M.readStatusRpt
    Field("writeStatusRpt", 5, INT32, REQUIRED),                        # RegisterRequestB2M.writeStatusRpt
    Field("curBrokerConfId", 6, INT64, REQUIRED),                       # RegisterRequestB2M.curBrokerConfId
    Field("confCheckSumId", 7, INT32, REQUIRED),                        # RegisterRequestB2M.confCheckSumId
    Field("brokerDefaultConfInfo", 8, STRING, REQUIRED),                # RegisterRequestB2M.brokerDefaultConfInfo
    Field("brokerTopicSetConfInfo", 9, STRING, REPEATED),               # RegisterRequestB2M.brokerTopicSetConfInfo
    Field("ssdStoreId", 10, INT64, OPTIONAL),                           # RegisterRequestB2M.ssdStoreId
    Field("flowCheckId", 11, INT64, OPTIONAL),                          # RegisterRequestB2M.flowCheckId
    Field("qryPriorityId", 12, INT32, OPTIONAL),                        # RegisterRequestB2M.qryPriorityId
    Field("tlsPort", 13, INT32, OPTIONAL),                              # RegisterRequestB2M.tlsPort
    Field("authInfo", 14, MASTER_CERTIFICATE_INFO, OPTIONAL),           # RegisterRequestB2M.authInfo
    Field("clsConfig", 15, CLUSTER_CONFIG, OPTIONAL),                   # RegisterRequestB2M.clsConfig
])

REGISTER_RESPONSE_M2B = Message("RegisterResponseM2B", [
    Field("success", 1, BOOL, REQUIRED),                                # RegisterResponseM2B.success
    Field("errCode", 2, INT32, REQUIRED),                               # RegisterResponseM2B.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # RegisterResponseM2B.errMsg
    Field("stopRead", 4, BOOL, REQUIRED),                               # RegisterResponseM2B.stopRead
    Field("stopWrite", 5, BOOL, REQUIRED),                              # RegisterResponseM2B.stopWrite
    Field("takeConfInfo", 6, BOOL, REQUIRED),                           # RegisterResponseM2B.takeConfInfo
    Field("enableBrokerInfo", 7, ENABLE_BROKER_FUN_INFO, OPTIONAL),     # RegisterResponseM2B.enableBrokerInfo
    Field("curBrokerConfId", 8, INT64, OPTIONAL),                       # RegisterResponseM2B.curBrokerConfId
    Field("confCheckSumId", 9, INT32, OPTIONAL),                        # RegisterResponseM2B.confCheckSumId
    Field("brokerDefaultConfInfo", 10, STRING, OPTIONAL),               # RegisterResponseM2B.brokerDefaultConfInfo
    Field("brokerTopicSetConfInfo", 11, STRING, REPEATED),              # RegisterResponseM2B.brokerTopicSetConfInfo
    Field("ssdStoreId", 12, INT64, OPTIONAL),                           # RegisterResponseM2B.ssdStoreId
    Field("flowCheckId", 13, INT64, OPTIONAL),                          # RegisterResponseM2B.flowCheckId
    Field("flowControlInfo", 14, STRING, OPTIONAL),                     # RegisterResponseM2B.flowControlInfo
    Field("qryPriorityId", 15, INT32, OPTIONAL),                        # RegisterResponseM2B.qryPriorityId
    Field("authorizedInfo", 16, MASTER_AUTHORIZED_INFO, OPTIONAL),      # RegisterResponseM2B.authorizedInfo
    Field("brokerAuthorizedInfo", 17, MASTER_BROKER_AUTHORIZED_INFO, OPTIONAL),  # RegisterResponseM2B.brokerAuthorizedInfo
    Field("clsConfig", 18, CLUSTER_CONFIG, OPTIONAL),                   # RegisterResponseM2B.clsConfig
])

HEART_REQUEST_B2M = Message("HeartRequestB2M", [
    Field("brokerId", 1, STRING, REQUIRED),                             # HeartRequestB2M.brokerId
    Field("brokerOnline", 2, BOOL, REQUIRED),                           # HeartRequestB2M.brokerOnline
    Field("readStatusRpt", 3, INT32, REQUIRED),                         # HeartRequestB2M.readStatusRpt
    Field("writeStatusRpt", 4, INT32, REQUIRED),                        # HeartRequestB2M.writeStatusRpt
    Field("curBrokerConfId", 5, INT64, REQUIRED),                       # HeartRequestB2M.curBrokerConfId
    Field("confCheckSumId", 6, INT32, REQUIRED),                        # HeartRequestB2M.confCheckSumId
    Field("takeConfInfo", 7, BOOL, REQUIRED),                           # HeartRequestB2M.takeConfInfo
    Field("takeRemovedTopicInfo", 8, BOOL, REQUIRED),                   # HeartRequestB2M.takeRemovedTopicInfo
    Field("brokerDefaultConfInfo", 9, STRING, OPTIONAL),                # HeartRequestB2M.brokerDefaultConfInfo
    Field("brokerTopicSetConfInfo", 10, STRING, REPEATED),              # HeartRequestB2M.brokerTopicSetConfInfo
    Field("removedTopicsInfo", 11, STRING, REPEATED),                   # HeartRequestB2M.removedTopicsInfo
    Field("ssdStoreId", 12, INT64, OPTIONAL),                           # HeartRequestB2M.ssdStoreId
    Field("flowCheckId", 13, INT64, OPTIONAL),                          # HeartRequestB2M.flowCheckId
    Field("qryPriorityId", 14, INT32, OPTIONAL),                        # HeartRequestB2M.qryPriorityId
    Field("authInfo", 15, MASTER_CERTIFICATE_INFO, OPTIONAL),           # HeartRequestB2M.authInfo
    Field("clsConfig", 16, CLUSTER_CONFIG, OPTIONAL),                   # HeartRequestB2M.clsConfig
])

HEART_RESPONSE_M2B = Message("HeartResponseM2B", [
    Field("success", 1, BOOL, REQUIRED),                                # HeartResponseM2B.success
    Field("errCode", 2, INT32, REQUIRED),                               # HeartResponseM2B.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # HeartResponseM2B.errMsg
    Field("stopRead", 4, BOOL, REQUIRED),                               # HeartResponseM2B.stopRead
    Field("stopWrite", 5, BOOL, REQUIRED),                              # HeartResponseM2B.stopWrite
    Field("curBrokerConfId", 6, INT64, REQUIRED),                       # HeartResponseM2B.curBrokerConfId
    Field("confCheckSumId", 7, INT32, REQUIRED),                        # HeartResponseM2B.confCheckSumId
    Field("needReportData", 8, BOOL, REQUIRED),                         # HeartResponseM2B.needReportData
    Field("takeConfInfo", 9, BOOL, REQUIRED),                           # HeartResponseM2B.takeConfInfo
    Field("takeRemoveTopicInfo", 10, BOOL, REQUIRED),                   # HeartResponseM2B.takeRemoveTopicInfo
    Field("brokerDefaultConfInfo", 11, STRING, OPTIONAL),               # HeartResponseM2B.brokerDefaultConfInfo
    Field("brokerTopicSetConfInfo", 12, STRING, REPEATED),              # HeartResponseM2B.brokerTopicSetConfInfo
    Field("removeTopicConfInfo", 13, STRING, REPEATED),                 # HeartResponseM2B.removeTopicConfInfo
    Field("ssdStoreId", 14, INT64, OPTIONAL),                           # HeartResponseM2B.ssdStoreId
    Field("flowCheckId", 15, INT64, OPTIONAL),                          # HeartResponseM2B.flowCheckId
    Field("flowControlInfo", 16, STRING, OPTIONAL),                     # HeartResponseM2B.flowControlInfo
    Field("qryPriorityId", 17, INT32, OPTIONAL),                        # HeartResponseM2B.qryPriorityId
    Field("authorizedInfo", 18, MASTER_AUTHORIZED_INFO, OPTIONAL),      # HeartResponseM2B.authorizedInfo
    Field("brokerAuthorizedInfo", 19, MASTER_BROKER_AUTHORIZED_INFO, OPTIONAL),# HeartResponseM2B.brokerAuthorizedInfo
    Field("clsConfig", 20, CLUSTER_CONFIG, OPTIONAL),                   # HeartResponseM2B.clsConfig
])

CLOSE_REQUEST_B2M = Message("CloseRequestB2M", [
    Field("brokerId", 1, STRING, REQUIRED),                             # CloseRequestB2M.brokerId
    Field("authInfo", 2, MASTER_CERTIFICATE_INFO, OPTIONAL),            # CloseRequestB2M.authInfo
])

CLOSE_RESPONSE_M2B = Message("CloseResponseM2B", [
    Field("success", 1, BOOL, REQUIRED),                                # CloseResponseM2B.success
    Field("errCode", 2, INT32, REQUIRED),                               # CloseResponseM2B.errCode
    Field("errMsg", 3, STRING, REQUIRED),                               # CloseResponseM2B.errMsg
])

CLIENT_SUB_REP_INFO = Message("ClientSubRepInfo", [
    Field("brokerConfigId", 1, INT64, REQUIRED),                        # ClientSubRepInfo.brokerConfigId
    Field("topicMetaInfoId", 2, INT64, REQUIRED),                       # ClientSubRepInfo.topicMetaInfoId
    Field("lstAssignedTime", 3, INT64, OPTIONAL),                       # ClientSubRepInfo.lstAssignedTime
    Field("reportSubInfo", 4, BOOL, OPTIONAL),                          # ClientSubRepInfo.reportSubInfo
    Field("partSubInfo", 5, STRING, REPEATED),                          # ClientSubRepInfo.partSubInfo
])

OPS_TASK_INFO = Message("OpsTaskInfo", [
    Field("groupFlowCheckId", 1, INT64, OPTIONAL),                      # OpsTaskInfo.groupFlowCheckId
    Field("defFlowCheckId", 2, INT64, OPTIONAL),                        # OpsTaskInfo.defFlowCheckId
    Field("qryPriorityId", 3, INT32, OPTIONAL),                         # OpsTaskInfo.qryPriorityId
    Field("csmFrmMaxOffsetCtrlId", 4, INT64, OPTIONAL),                 # OpsTaskInfo.csmFrmMaxOffsetCtrlId
    Field("requireAuth", 5, BOOL, OPTIONAL),                            # OpsTaskInfo.requireAuth
    Field("defFlowControlInfo", 6, STRING, OPTIONAL),                   # OpsTaskInfo.defFlowControlInfo
    Field("groupFlowControlInfo", 7, STRING, OPTIONAL),                 # OpsTaskInfo.groupFlowControlInfo
])

REGISTER_REQUEST_C2MV2 = Message("RegisterRequestC2MV2", [
    Field("clientId", 1, STRING, REQUIRED),                             # RegisterRequestC2MV2.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # RegisterRequestC2MV2.groupName
    Field("hostName", 3, STRING, REQUIRED),                             # RegisterRequestC2MV2.hostName
    Field("sourceCount", 4, INT32, REQUIRED),                           # RegisterRequestC2MV2.sourceCount
    Field("nodeId", 5, INT32, REQUIRED),                                # RegisterRequestC2MV2.nodeId
    Field("topicList", 6, STRING, REPEATED),                            # RegisterRequestC2MV2.topicList
    Field("topicCondition", 7, STRING, REPEATED),                       # RegisterRequestC2MV2.topicCondition
    Field("subRepInfo", 8, CLIENT_SUB_REP_INFO, OPTIONAL),              # RegisterRequestC2MV2.subRepInfo
    Field("opsTaskInfo", 9, OPS_TASK_INFO, OPTIONAL),                   # RegisterRequestC2MV2.opsTaskInfo
    Field("authInfo", 10, MASTER_CERTIFICATE_INFO, OPTIONAL),           # RegisterRequestC2MV2.authInfo
    Field("jdkVersion", 11, STRING, OPTIONAL),                          # RegisterRequestC2MV2.jdkVersion
])

REGISTER_RESPONSE_M2CV2 = Message("RegisterResponseM2CV2", [
    Field("errCode", 1, INT32, REQUIRED),                               # RegisterResponseM2CV2.errCode
    Field("errMsg", 2, STRING, REQUIRED),                               # RegisterResponseM2CV2.errMsg
    Field("brokerConfigId", 3, INT64, OPTIONAL),                        # RegisterResponseM2CV2.brokerConfigId
    Field("brokerConfigList", 4, STRING, REPEATED),                     # RegisterResponseM2CV2.brokerConfigList
    Field("opsTaskInfo", 5, OPS_TASK_INFO, OPTIONAL),                   # RegisterResponseM2CV2.opsTaskInfo
    Field("authorizedInfo", 6, MASTER_AUTHORIZED_INFO, OPTIONAL),       # RegisterResponseM2CV2.authorizedInfo
])

HEART_REQUEST_C2MV2 = Message("HeartRequestC2MV2", [
    Field("clientId", 1, STRING, REQUIRED),                             # HeartRequestC2MV2.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # HeartRequestC2MV2.groupName
    Field("subRepInfo", 3, CLIENT_SUB_REP_INFO, OPTIONAL),              # HeartRequestC2MV2.subRepInfo
    Field("opsTaskInfo", 4, OPS_TASK_INFO, OPTIONAL),                   # HeartRequestC2MV2.opsTaskInfo
    Field("authInfo", 5, MASTER_CERTIFICATE_INFO, OPTIONAL),            # HeartRequestC2MV2.authInfo
])

HEART_RESPONSE_M2CV2 = Message("HeartResponseM2CV2", [
    Field("errCode", 1, INT32, REQUIRED),                               # HeartResponseM2CV2.errCode
    Field("errMsg", 2, STRING, REQUIRED),                               # HeartResponseM2CV2.errMsg
    Field("brokerConfigId", 3, INT64, OPTIONAL),                        # HeartResponseM2CV2.brokerConfigId
    Field("brokerConfigList", 4, STRING, REPEATED),                     # HeartResponseM2CV2.brokerConfigList
    Field("topicMetaInfoId", 5, INT64, OPTIONAL),                       # HeartResponseM2CV2.topicMetaInfoId
    Field("topicMetaInfoList", 6, STRING, REPEATED),                    # HeartResponseM2CV2.topicMetaInfoList
    Field("opsTaskInfo", 7, OPS_TASK_INFO, OPTIONAL),                   # HeartResponseM2CV2.opsTaskInfo
    Field("authorizedInfo", 8, MASTER_AUTHORIZED_INFO, OPTIONAL),       # HeartResponseM2CV2.authorizedInfo
])

GET_PART_META_REQUEST_C2M = Message("GetPartMetaRequestC2M", [
    Field("clientId", 1, STRING, REQUIRED),                             # GetPartMetaRequestC2M.clientId
    Field("groupName", 2, STRING, REQUIRED),                            # GetPartMetaRequestC2M.groupName
    Field("brokerConfigId", 3, INT64, REQUIRED),                        # GetPartMetaRequestC2M.brokerConfigId
    Field("topicMetaInfoId", 4, INT64, REQUIRED),                       # GetPartMetaRequestC2M.topicMetaInfoId
    Field("authInfo", 5, MASTER_CERTIFICATE_INFO, OPTIONAL),            # GetPartMetaRequestC2M.authInfo
])

GET_PART_META_RESPONSE_M2C = Message("GetPartMetaResponseM2C", [
    Field("errCode", 1, INT32, REQUIRED),                               # GetPartMetaResponseM2C.errCode
    Field("errMsg", 2, STRING, REQUIRED),                               # GetPartMetaResponseM2C.errMsg
    Field("brokerConfigId", 3, INT64, OPTIONAL),                        # GetPartMetaResponseM2C.brokerConfigId
    Field("topicMetaInfoId", 4, INT64, OPTIONAL),                       # GetPartMetaResponseM2C.topicMetaInfoId
    Field("topicMetaInfoList", 5, STRING, REPEATED),                    # GetPartMetaResponseM2C.topicMetaInfoList
    Field("brokerConfigList", 6, STRING, REPEATED),                     # GetPartMetaResponseM2C.brokerConfigList
])


# --------------------------------------------------------------------------------------------- method table
@dataclass(frozen=True)
class Method:
    method_id: int
    constant: str                # the RpcConstants name
    service_type: int            # the service a client calls it on (PbEnDecoder.isValidServiceTypeAndMethod)
    request: Message
    response: Message


METHODS = {m.method_id: m for m in [
    Method(1, "RPC_MSG_MASTER_PRODUCER_REGISTER", SERVICE_MASTER, REGISTER_REQUEST_P2M, REGISTER_RESPONSE_M2P),
    Method(2, "RPC_MSG_MASTER_PRODUCER_HEARTBEAT", SERVICE_MASTER, HEART_REQUEST_P2M, HEART_RESPONSE_M2P),
    Method(3, "RPC_MSG_MASTER_PRODUCER_CLOSECLIENT", SERVICE_MASTER, CLOSE_REQUEST_P2M, CLOSE_RESPONSE_M2P),
    Method(4, "RPC_MSG_MASTER_CONSUMER_REGISTER", SERVICE_MASTER, REGISTER_REQUEST_C2M, REGISTER_RESPONSE_M2C),
    Method(5, "RPC_MSG_MASTER_CONSUMER_HEARTBEAT", SERVICE_MASTER, HEART_REQUEST_C2M, HEART_RESPONSE_M2C),
    Method(6, "RPC_MSG_MASTER_CONSUMER_CLOSECLIENT", SERVICE_MASTER, CLOSE_REQUEST_C2M, CLOSE_RESPONSE_M2C),
    Method(7, "RPC_MSG_MASTER_BROKER_REGISTER", SERVICE_MASTER, REGISTER_REQUEST_B2M, REGISTER_RESPONSE_M2B),
    Method(8, "RPC_MSG_MASTER_BROKER_HEARTBEAT", SERVICE_MASTER, HEART_REQUEST_B2M, HEART_RESPONSE_M2B),
    Method(9, "RPC_MSG_MASTER_BROKER_CLOSECLIENT", SERVICE_MASTER, CLOSE_REQUEST_B2M, CLOSE_RESPONSE_M2B),
    Method(13, "RPC_MSG_BROKER_PRODUCER_SENDMESSAGE", SERVICE_BROKER_WRITE,
           SEND_MESSAGE_REQUEST_P2B, SEND_MESSAGE_RESPONSE_B2P),
    Method(15, "RPC_MSG_BROKER_CONSUMER_REGISTER", SERVICE_BROKER_READ, REGISTER_REQUEST_C2B, REGISTER_RESPONSE_B2C),
    Method(16, "RPC_MSG_BROKER_CONSUMER_HEARTBEAT", SERVICE_BROKER_READ,
           HEART_BEAT_REQUEST_C2B, HEART_BEAT_RESPONSE_B2C),
    Method(17, "RPC_MSG_BROKER_CONSUMER_GETMESSAGE", SERVICE_BROKER_READ,
           GET_MESSAGE_REQUEST_C2B, GET_MESSAGE_RESPONSE_B2C),
    Method(18, "RPC_MSG_BROKER_CONSUMER_COMMIT", SERVICE_BROKER_READ,
           COMMIT_OFFSET_REQUEST_C2B, COMMIT_OFFSET_RESPONSE_B2C),
    Method(20, "RPC_MSG_MASTER_CONSUMER_REGISTER_V2", SERVICE_MASTER, REGISTER_REQUEST_C2MV2, REGISTER_RESPONSE_M2CV2),
    Method(21, "RPC_MSG_MASTER_CONSUMER_HEARTBEAT_V2", SERVICE_MASTER, HEART_REQUEST_C2MV2, HEART_RESPONSE_M2CV2),
    Method(22, "RPC_MSG_MASTER_CONSUMER_GET_PART_META", SERVICE_MASTER,
           GET_PART_META_REQUEST_C2M, GET_PART_META_RESPONSE_M2C),
]}

# Ids RpcConstants declares but no message type belongs to (PbEnDecoder throws on them).
DECLARED_WITHOUT_MESSAGES = {
    11: "RPC_MSG_BROKER_PRODUCER_REGISTER",
    12: "RPC_MSG_BROKER_PRODUCER_HEARTBEAT",
    14: "RPC_MSG_BROKER_PRODUCER_CLOSE",
    19: "RPC_MSG_BROKER_CONSUMER_CLOSE",
}


def method_constant(method_id: int) -> str | None:
    if method_id in METHODS:
        return METHODS[method_id].constant
    return DECLARED_WITHOUT_MESSAGES.get(method_id)


# -------------------------------------------------------------------------------------------- message data
def message_data(payload: bytes, attribute: str | None) -> tuple[bytes, int]:
    """(SendMessageRequestP2B.data / TransferedMessage.payLoadData, flag): with an attribute (even an empty
    one) the data is [attrLen i32 BE][attribute UTF-8][payload] and flag bit 0 is set."""
    if attribute is None:
        return payload, 0
    encoded = attribute.encode("utf-8")
    return struct.pack(">i", len(encoded)) + encoded + payload, FLAG_HAS_ATTRIBUTE


def message_checksum(data: bytes) -> int:
    """CheckSum.crc32: java.util.zip.CRC32 (zlib's polynomial, not CRC32C) of the whole data, attribute
    prefix included, masked to 31 bits."""
    return zlib.crc32(data) & 0x7FFFFFFF


def pattern_bytes(size: int, label: str) -> bytes:
    """Reproducible filler that does not compress or repeat (SHA-256 in counter mode)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{label}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


@dataclass
class CarriedMessage:
    """One message in a SendMessageRequestP2B or a TransferedMessage, with what the manifest says of it."""
    payload: bytes
    attribute: str | None = None
    message_id: int | None = None        # TransferedMessage.messageId; a producer's request has none
    checksum: int | None = None          # None: the correct one (brokers) or -1 (producers); else sent as is

    def data_and_flag(self) -> tuple[bytes, int]:
        return message_data(self.payload, self.attribute)

    def transfered(self) -> dict:
        """TransferedMessage fields."""
        data, flag = self.data_and_flag()
        checksum = message_checksum(data) if self.checksum is None else self.checksum
        return {"messageId": self.message_id, "checkSum": checksum, "payLoadData": data, "flag": flag}

    def describe(self, checksum_sent: int, topic: str | None) -> dict:
        data, flag = self.data_and_flag()
        expected = message_checksum(data)
        return {
            "message_id": self.message_id,
            "topic": topic,
            "flag": flag,
            "attributes": self.attribute,
            "payload_size": len(self.payload),
            "payload_sha256": hashlib.sha256(self.payload).hexdigest(),
            "data_size": len(data),                 # the whole field: attribute prefix + payload
            "data_sha256": hashlib.sha256(data).hexdigest(),
            "checksum_sent": checksum_sent,
            "checksum_expected": expected,
            # -1 means the sender supplied none: nothing to verify
            "checksum_valid": None if checksum_sent == CHECKSUM_NOT_SUPPLIED else checksum_sent == expected,
        }


# ---------------------------------------------------------------------------------------------- RPC frames
@dataclass
class RpcContent:
    """What a frame's blocks carry: three length-delimited messages, kept apart so a test can aim a block
    boundary at one of them."""
    conn_header: bytes
    header: bytes
    body: bytes

    @property
    def data(self) -> bytes:
        return self.conn_header + self.header + self.body


def request_content(service_type: int, method_id: int, request: bytes, protocol_ver: int = PROTOCOL_VERSION,
                    timeout_ms: int | None = 15000) -> RpcContent:
    """As NettyClient.call writes a request: flag, then service type and protocol version, then the body."""
    return RpcContent(
        length_delimited(RPC_CONN_HEADER.encode({"flag": FLAG_REQUEST})),
        length_delimited(REQUEST_HEADER.encode({"serviceType": service_type, "protocolVer": protocol_ver})),
        length_delimited(REQUEST_BODY.encode({"method": method_id, "timeout": timeout_ms, "request": request})),
    )


def response_content(method_id: int, data: bytes, protocol_ver: int = PROTOCOL_VERSION) -> RpcContent:
    """As NettyRequestContext.prepareResponse writes a success: the header holds only status and version."""
    return RpcContent(
        length_delimited(RPC_CONN_HEADER.encode({"flag": FLAG_RESPONSE})),
        length_delimited(RESPONSE_HEADER.encode({"status": STATUS_SUCCESS, "protocolVer": protocol_ver})),
        length_delimited(RSP_RESPONSE_BODY.encode({"method": method_id, "data": data})),
    )


def exception_content(exception_name: str, stack_trace: str | None, status: int = STATUS_ERROR,
                      protocol_ver: int = PROTOCOL_VERSION) -> RpcContent:
    """A failed call: status ERROR (or FATAL) and the exception's class name and text, no method id."""
    return RpcContent(
        length_delimited(RPC_CONN_HEADER.encode({"flag": FLAG_RESPONSE})),
        length_delimited(RESPONSE_HEADER.encode({"status": status, "protocolVer": protocol_ver})),
        length_delimited(RSP_EXCEPTION_BODY.encode({"exceptionName": exception_name, "stackTrace": stack_trace})),
    )


def split_into_blocks(data: bytes, block_sizes=None) -> list[bytes]:
    """The frame's blocks. None: MAX_BLOCK_SIZE-byte blocks, the last one shorter (ByteBufferOutputStream).
    An int: blocks of that size. A list: blocks of those sizes first (0 makes an empty block), the rest in
    MAX_BLOCK_SIZE-byte blocks. Empty data still makes one empty block, as the Java stream always holds one
    buffer."""
    if isinstance(block_sizes, int):
        if block_sizes <= 0:
            raise ValueError("a repeated block size must be positive")
        leading, rest_size = [], block_sizes
    else:
        leading, rest_size = list(block_sizes or ()), MAX_BLOCK_SIZE
    if sum(leading) > len(data) or any(size < 0 for size in leading):
        raise ValueError(f"block sizes {leading} do not fit {len(data)} bytes")
    blocks, pos = [], 0
    for size in leading:
        blocks.append(data[pos:pos + size])
        pos += size
    while pos < len(data):
        blocks.append(data[pos:pos + rest_size])
        pos += rest_size
    return blocks or [b""]


def frame_bytes(serial: int, blocks: list[bytes]) -> bytes:
    """[token][serialNo][listSize] then [len][bytes] per block, all 4-byte big-endian (NettyProtocolEncoder)."""
    out = [FRAME_HEADER.pack(BEGIN_TOKEN, serial & 0xFFFFFFFF, len(blocks))]
    for block in blocks:
        out.append(BLOCK_LENGTH.pack(len(block)))
        out.append(block)
    return b"".join(out)


def encode_frame(serial: int, content: RpcContent | bytes, block_sizes=None) -> bytes:
    data = content.data if isinstance(content, RpcContent) else content
    return frame_bytes(serial, split_into_blocks(data, block_sizes))


# ------------------------------------------------------------------------------------------- TCP and pcap
START_TIME = 1_763_866_800.0     # 2025-11-23 03:00:00 UTC: fixed, so the files come out byte for byte the same
PACKET_GAP = 0.00005             # between consecutive packets
DEFAULT_SEGMENT_SIZE = 1448      # a usual MSS: frames bigger than this span several packets
TO_SERVER, TO_CLIENT = "to_server", "to_client"
TCP_FIN, TCP_SYN, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x08, 0x10


class Capture:
    """Packets in capture order with a clock; written as an Ethernet pcap."""

    def __init__(self, start: float = START_TIME) -> None:
        self.packets: list[tuple[float, bytes]] = []
        self.now = start

    def wait(self, seconds: float) -> None:
        self.now += seconds

    def add(self, ip_packet: bytes) -> int:
        """Append a packet; returns its number in the file (1-based, as Wireshark counts)."""
        self.now += PACKET_GAP
        self.packets.append((round(self.now, 6), pcapgen.ether(ip_packet)))
        return len(self.packets)

    def time_of(self, packet_number: int) -> float:
        return self.packets[packet_number - 1][0]

    def write(self, path) -> None:
        pcapgen.write_pcap(path, self.packets)


def cut_into_segments(data: bytes, segment_sizes=None, max_segment: int = DEFAULT_SEGMENT_SIZE) -> list[bytes]:
    """TCP segments: the given sizes first (as far as the data goes: the last one may be shorter), then
    max_segment-byte segments for the rest."""
    sizes = list(segment_sizes or ())
    if any(size <= 0 for size in sizes):
        raise ValueError(f"segment sizes must be positive: {sizes}")
    segments, pos = [], 0
    for size in sizes:
        if pos >= len(data):
            break
        segments.append(data[pos:pos + size])
        pos += size
    while pos < len(data):
        segments.append(data[pos:pos + max_segment])
        pos += max_segment
    return segments


class TcpConnection:
    """One IPv4 TCP connection, both sequence spaces tracked, packets appended to a Capture."""

    def __init__(self, capture: Capture, client: tuple[str, int], server: tuple[str, int],
                 handshake: bool = True, client_isn: int = 1_000_000, server_isn: int = 7_000_000) -> None:
        self.capture, self.client, self.server = capture, client, server
        self.next_seq = {TO_SERVER: client_isn, TO_CLIENT: server_isn}
        if handshake:
            self._packet(TO_SERVER, TCP_SYN, b"", ack=0)
            self.next_seq[TO_SERVER] += 1
            self._packet(TO_CLIENT, TCP_SYN | TCP_ACK, b"")
            self.next_seq[TO_CLIENT] += 1
            self._packet(TO_SERVER, TCP_ACK, b"")
        else:
            # as if the SYNs had gone by before the capture started
            self.next_seq[TO_SERVER] += 1
            self.next_seq[TO_CLIENT] += 1

    def _packet(self, direction: str, flags: int, payload: bytes, ack: int | None = None) -> int:
        src, dst = (self.client, self.server) if direction == TO_SERVER else (self.server, self.client)
        other = TO_CLIENT if direction == TO_SERVER else TO_SERVER
        ip = pcapgen.ipv4_tcp(src[0], dst[0], src[1], dst[1], seq=self.next_seq[direction] & 0xFFFFFFFF,
                              ack=(self.next_seq[other] if ack is None else ack) & 0xFFFFFFFF,
                              flags=flags, payload=payload)
        return self.capture.add(ip)

    def send(self, direction: str, data: bytes, segment_sizes=None, uncaptured: int = 0,
             max_segment: int = DEFAULT_SEGMENT_SIZE) -> list[tuple[int, int, int]]:
        """Data in PSH/ACK segments; returns (packet number, start, end) per segment, offsets into ``data``.
        The first ``uncaptured`` bytes advance the sequence number without any packet: they went by before
        the capture started."""
        uncaptured = min(uncaptured, len(data))
        self.next_seq[direction] += uncaptured
        sent, start = [], uncaptured
        for segment in cut_into_segments(data[uncaptured:], segment_sizes, max_segment):
            sent.append((self._packet(direction, TCP_PSH | TCP_ACK, segment), start, start + len(segment)))
            self.next_seq[direction] += len(segment)
            start += len(segment)
        return sent

    def close(self, initiator: str = TO_SERVER) -> None:
        """FIN from the initiator, FIN from the other side, last ACK."""
        other = TO_CLIENT if initiator == TO_SERVER else TO_SERVER
        self._packet(initiator, TCP_FIN | TCP_ACK, b"")
        self.next_seq[initiator] += 1
        self._packet(other, TCP_FIN | TCP_ACK, b"")
        self.next_seq[other] += 1
        self._packet(initiator, TCP_ACK, b"")


def conversation_packets(exchanges, client: tuple[str, int], server: tuple[str, int], segment_sizes=None,
                         skip_first_bytes: int = 0, handshake: bool = True, capture: Capture | None = None,
                         close: bool = True) -> list[tuple[float, bytes]]:
    """Packets (timestamp, Ethernet frame) of one TCP connection carrying ``exchanges``, a list of (TO_SERVER
    or TO_CLIENT, bytes). ``segment_sizes`` cuts each exchange (the list starts again for each one);
    ``skip_first_bytes`` leaves out the first bytes of the conversation (both directions, in order), as a
    capture started mid-connection; set handshake=False with it to have no SYN either."""
    capture = capture or Capture()
    connection = TcpConnection(capture, client, server, handshake=handshake)
    to_skip = skip_first_bytes
    for direction, data in exchanges:
        skipped = min(to_skip, len(data))
        to_skip -= skipped
        connection.send(direction, data, segment_sizes=segment_sizes, uncaptured=skipped)
    if close:
        connection.close()
    return capture.packets


# --------------------------------------------------------------------------------- TubeMQ connections, manifest
def message_json(message: Message, values: dict) -> dict:
    """A message's fields as the project's JSON shows protobuf: upstream field names, integers as integers,
    bytes as base64 text, nested messages as objects; only the fields present."""
    out = {}
    for f in message.fields:
        value = values.get(f.name)
        if value is None or (f.label == REPEATED and not value):   # an empty list puts nothing on the wire
            continue
        items = value if f.label == REPEATED else [value]
        converted = [_json_value(f.kind, item) for item in items]
        out[f.name] = converted if f.label == REPEATED else converted[0]
    return out


def _json_value(kind, value):
    if isinstance(kind, Message):
        return message_json(kind, value) if isinstance(value, dict) else base64.b64encode(value).decode("ascii")
    if kind == BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


# Fields worth naming in a frame's record without digging into its command.
KEY_FIELDS = ("clientId", "groupName", "topicName", "topicList", "brokerId", "partitionId", "opType",
              "errCode", "errMsg")


@dataclass
class Frame:
    """A frame built, not yet sent: its bytes and the manifest record that sending completes."""
    data: bytes
    record: dict


class TubeConnection:
    """A TubeMQ client's TCP connection to a master or a broker. Builds frames, sends them and records each
    one in the scenario's manifest."""

    def __init__(self, scenario: "Scenario", client: tuple[str, int], server: tuple[str, int], client_role: str,
                 server_role: str, handshake: bool = True, first_serial: int = 1) -> None:
        self.scenario = scenario
        self.tcp = TcpConnection(scenario.capture, client, server, handshake=handshake,
                                 client_isn=1_000_000 + 100_000 * len(scenario.connections))
        self.id = len(scenario.connections)
        self.next_serial = first_serial     # NettyClient: one counter per client connection
        self.bytes_sent = {TO_SERVER: 0, TO_CLIENT: 0}
        self.first_captured_byte = {TO_SERVER: None, TO_CLIENT: None}
        scenario.connections.append({
            "id": self.id, "client": f"{client[0]}:{client[1]}", "server": f"{server[0]}:{server[1]}",
            "client_role": client_role, "server_role": server_role, "handshake_captured": handshake,
        })

    # --- building
    def build_request(self, method_id: int, body: dict | None = None, serial: int | None = None,
                      service_type: int | None = None, raw_request: bytes | None = None, block_sizes=None,
                      message: CarriedMessage | None = None, protocol_ver: int = PROTOCOL_VERSION) -> Frame:
        """A request frame. ``message`` fills SendMessageRequestP2B's data, flag and checkSum (-1 unless the
        message says otherwise). ``raw_request`` sends bytes as RequestBody.request instead of ``body``, for
        method ids without a message type."""
        if serial is None:
            serial = self.next_serial
            self.next_serial += 1
        method = METHODS.get(method_id)
        body = dict(body or {})
        carried = []
        if message is not None:
            data, flag = message.data_and_flag()
            sent = CHECKSUM_NOT_SUPPLIED if message.checksum is None else message.checksum
            body.update(data=data, flag=flag, checkSum=sent)
            carried.append(message.describe(sent, body.get("topicName")))
        if raw_request is not None:
            request, command, type_name = raw_request, None, None
        else:
            request, command, type_name = method.request.encode(body), message_json(method.request, body), \
                method.request.name
        if service_type is None:
            service_type = method.service_type if method else SERVICE_MASTER
        content = request_content(service_type, method_id, request, protocol_ver=protocol_ver)
        record = {
            "flag": "request", "service_type": service_type, "protocol_version": protocol_ver,
            "method": method_id, "method_constant": method_constant(method_id), "type": type_name,
            "request_size": len(request), "command": command, "messages": carried,
        }
        return self._frame(TO_SERVER, serial, content, block_sizes, record, body)

    def build_response(self, serial: int, method_id: int, body: dict, block_sizes=None,
                       messages: list[CarriedMessage] | None = None, topic: str | None = None) -> Frame:
        """A success response. ``messages`` become GetMessageResponseB2C's TransferedMessage list (``topic``,
        from the request, only goes into the manifest)."""
        method = METHODS[method_id]
        body = dict(body)
        carried = []
        if messages:
            body["messages"] = [m.transfered() for m in messages]
            carried = [m.describe(t["checkSum"], topic) for m, t in zip(messages, body["messages"])]
        data = method.response.encode(body)
        record = {
            "flag": "response", "service_type": None, "status": "SUCCESS", "protocol_version": PROTOCOL_VERSION,
            "method": method_id, "method_constant": method.constant, "type": method.response.name,
            "response_size": len(data), "command": message_json(method.response, body), "messages": carried,
        }
        return self._frame(TO_CLIENT, serial, response_content(method_id, data), block_sizes, record, body)

    def build_exception(self, serial: int, exception_name: str, stack_trace: str | None,
                        status: int = STATUS_ERROR, block_sizes=None) -> Frame:
        """A failed call: RspExceptionBody, no method id (RpcProtocol answers so when the handler throws)."""
        fields = {"exceptionName": exception_name, "stackTrace": stack_trace}
        record = {
            "flag": "response", "service_type": None, "status": STATUS_NAMES[status],
            "protocol_version": PROTOCOL_VERSION, "method": None, "method_constant": None,
            "type": RSP_EXCEPTION_BODY.name, "command": message_json(RSP_EXCEPTION_BODY, fields), "messages": [],
            "exception": {"name": exception_name, "short_name": exception_name.rsplit(".", 1)[-1],
                          "stack_trace": stack_trace},
        }
        return self._frame(TO_CLIENT, serial, exception_content(exception_name, stack_trace, status), block_sizes,
                           record, fields)

    def _frame(self, direction: str, serial: int, content: RpcContent, block_sizes, record: dict,
               body: dict) -> Frame:
        blocks = split_into_blocks(content.data, block_sizes)
        data = frame_bytes(serial, blocks)
        record.update({
            "connection": self.id, "direction": direction, "serial": serial,
            "key_fields": {k: body[k] for k in KEY_FIELDS if body.get(k) is not None},
            "list_size": len(blocks), "block_sizes": [len(b) for b in blocks],
            "content_size": len(content.data), "frame_size": len(data),
            # where the three delimited messages start in the block bytes (their size prefix)
            "part_offsets": [0, len(content.conn_header), len(content.conn_header) + len(content.header)],
        })
        return Frame(data, record)

    # --- sending
    def send(self, *frames: Frame, segment_sizes=None, uncaptured: int = 0,
             max_segment: int = DEFAULT_SEGMENT_SIZE) -> None:
        """Send frames back to back (one write, so TCP may cut anywhere, several frames in one segment).
        ``uncaptured``: that many leading bytes went by before the capture started."""
        directions = {f.record["direction"] for f in frames}
        if len(directions) != 1:
            raise ValueError("frames sent together go the same way")
        direction = directions.pop()
        data = b"".join(f.data for f in frames)
        if uncaptured and self.first_captured_byte[direction] is not None:
            raise ValueError("a capture starts once: only bytes before the first captured ones can be missing")
        base = self.bytes_sent[direction]
        if self.first_captured_byte[direction] is None and uncaptured < len(data):
            self.first_captured_byte[direction] = base + uncaptured
        self.bytes_sent[direction] += len(data)
        segments = self.tcp.send(direction, data, segment_sizes, uncaptured, max_segment)
        start = 0
        for f in frames:
            end = start + len(f.data)
            captured_from = max(start, uncaptured)
            # where the frame's captured bytes start in this direction's captured byte stream
            f.record["stream_offset"] = (None if end <= uncaptured
                                         else base + captured_from - self.first_captured_byte[direction])
            packets = [n for n, s, e in segments if s < end and e > captured_from]
            f.record["captured"] = "none" if end <= uncaptured else "partial" if start < uncaptured else "complete"
            f.record["captured_bytes"] = max(0, end - captured_from)
            f.record["packets"] = [packets[0], packets[-1]] if packets else None
            f.record["first_ts"] = self.scenario.capture.time_of(packets[0]) if packets else None
            f.record["last_ts"] = self.scenario.capture.time_of(packets[-1]) if packets else None
            self.scenario.frames.append(f.record)
            start = end

    def request(self, method_id: int, body: dict | None = None, segment_sizes=None, uncaptured: int = 0,
                **build) -> int:
        frame = self.build_request(method_id, body, **build)
        self.send(frame, segment_sizes=segment_sizes, uncaptured=uncaptured)
        return frame.record["serial"]

    def respond(self, serial: int, method_id: int, body: dict, segment_sizes=None, uncaptured: int = 0,
                **build) -> None:
        self.send(self.build_response(serial, method_id, body, **build), segment_sizes=segment_sizes,
                  uncaptured=uncaptured)

    def call(self, method_id: int, request_body: dict, response_body: dict, latency: float = 0.0025,
             request_build: dict | None = None, response_build: dict | None = None) -> int:
        """A request, ``latency`` seconds of server time, its response."""
        serial = self.request(method_id, request_body, **(request_build or {}))
        self.scenario.capture.wait(latency)
        self.respond(serial, method_id, response_body, **(response_build or {}))
        self.scenario.capture.wait(0.001)
        return serial

    def close(self, initiator: str = TO_SERVER) -> None:
        self.tcp.close(initiator)


class Scenario:
    """One capture file: its connections, the frames they carried and what a decoder should find."""

    def __init__(self, name: str, description: str) -> None:
        self.name, self.description = name, description
        self.capture = Capture()
        self.connections: list[dict] = []
        self.frames: list[dict] = []

    def connect(self, client: tuple[str, int], server: tuple[str, int], client_role: str, server_role: str,
                handshake: bool = True, first_serial: int = 1) -> TubeConnection:
        """A connection from a producer, consumer or broker (client_role) to a master or broker."""
        return TubeConnection(self, client, server, client_role, server_role, handshake, first_serial)

    def manifest(self) -> dict:
        """The records with pairing worked out the way the issue asks: by serial per connection, the oldest
        waiting request first; only complete frames count (a cut one cannot be decoded)."""
        frames = [dict(r) for r in self.frames]
        number = 0
        for r in frames:
            r["expected_problems"] = []
            r["number"] = None
            r["answers"] = r["answered_by"] = r["latency_ms"] = None
            if r["captured"] == "complete":
                number += 1
                r["number"] = number   # position among the decodable frames, in capture order
        waiting: dict[tuple[int, int], list[dict]] = {}
        for r in frames:
            if r["number"] is None:
                continue
            key = (r["connection"], r["serial"])
            if r["flag"] == "request":
                if waiting.get(key):
                    r["expected_problems"].append("duplicate_serial")
                waiting.setdefault(key, []).append(r)
            else:
                if waiting.get(key):
                    request = waiting[key].pop(0)
                    r["answers"] = request["number"]
                    request["answered_by"] = r["number"]
                    r["latency_ms"] = round((r["last_ts"] - request["last_ts"]) * 1000, 3)
                else:
                    r["expected_problems"].append("response_without_request")
                if r.get("exception"):
                    r["expected_problems"].append("exception")
                errcode = (r["command"] or {}).get("errCode")
                if errcode is not None and errcode != ERR_SUCCESS:
                    r["expected_problems"].append("error_code")
            if any(m["checksum_valid"] is False for m in r["messages"]):
                r["expected_problems"].append("bad_checksum")
        for pending in waiting.values():
            for r in pending:
                r["expected_problems"].append("unanswered")
        complete = [r for r in frames if r["number"] is not None]
        return {
            "scenario": self.name,
            "description": self.description,
            "pcap": f"{self.name}.pcap",
            "packets": len(self.capture.packets),
            "latency_measured_from": "last packet of the request to last packet of the response",
            "connections": self.connections,
            "frames": frames,
            "summary": {
                "frames_complete": len(complete),
                "frames_cut": sum(1 for r in frames if r["captured"] == "partial"),
                "requests": sum(1 for r in complete if r["flag"] == "request"),
                "responses": sum(1 for r in complete if r["flag"] == "response"),
                "messages": sum(len(r["messages"]) for r in complete),
                "unanswered": [[r["connection"], r["serial"]] for r in complete
                               if "unanswered" in r["expected_problems"]],
                "responses_without_request": [[r["connection"], r["serial"]] for r in complete
                                              if "response_without_request" in r["expected_problems"]],
                "duplicate_serials": [[r["connection"], r["serial"]] for r in complete
                                      if "duplicate_serial" in r["expected_problems"]],
                "bad_checksums": [m["message_id"] for r in complete for m in r["messages"]
                                  if m["checksum_valid"] is False],
                "exceptions": [r["exception"]["name"] for r in complete if r.get("exception")],
                "error_codes": [r["command"]["errCode"] for r in complete
                                if "error_code" in r["expected_problems"]],
            },
        }

    def write(self, outdir) -> dict:
        outdir = Path(outdir)
        outdir.mkdir(parents=True, exist_ok=True)
        self.capture.write(outdir / f"{self.name}.pcap")
        manifest = self.manifest()
        (outdir / f"{self.name}.json").write_text(json.dumps(manifest, indent=1) + "\n")
        return manifest


# ------------------------------------------------------------------------------------------------ scenarios
MASTER = ("192.168.7.10", MASTER_PORT)
STANDBY_MASTER = ("192.168.7.12", MASTER_PORT)
BROKER = ("192.168.7.11", BROKER_PORT)
BROKER_INFO = "1:192.168.7.11:8123"               # brokerId:host:port, as masters list brokers
PRODUCER_HOST, CONSUMER_HOST, BROKER_HOST = "192.168.7.21", "192.168.7.31", "192.168.7.11"
PRODUCER_ID = "192.168.7.21-28164-1763866800012-1-Pure-2.1.0"
CONSUMER_ID = "billing_192.168.7.31-28301-1763866800345-1-Pull-2.1.0"
GROUP = "billing"
TOPIC = "orders"
OK = {"success": True, "errCode": ERR_SUCCESS, "errMsg": "OK"}


def ip_as_int32(ip: str) -> int:
    """AddressUtils.ipToInt: the four bytes as a big-endian signed int (negative from 128.0.0.0 on)."""
    return struct.unpack(">i", socket.inet_aton(ip))[0]


def subscribe_info(partition: int) -> str:
    """consumerId@group#brokerId:host:port#topic:partitionId (EventProto / HeartRequestC2M subscribeInfo), as
    SubscribeInfo.toString writes it and its constructor splits it (the .proto comments' '-' form is older)."""
    return f"{CONSUMER_ID}@{GROUP}#{BROKER_INFO}#{TOPIC}:{partition}"


def send_request(topic: str = TOPIC, partition: int = 0, **extra) -> dict:
    """SendMessageRequestP2B fields but the message data, flag and checkSum (build_request fills those)."""
    return {"clientId": PRODUCER_ID, "topicName": topic, "partitionId": partition,
            "sentAddr": ip_as_int32(PRODUCER_HOST), **extra}


def produce(c: TubeConnection, message: CarriedMessage, response: dict, topic: str = TOPIC, partition: int = 0,
            request_build: dict | None = None, response_build: dict | None = None, **extra) -> int:
    """A SendMessageRequestP2B carrying ``message`` and its SendMessageResponseB2P."""
    return c.call(13, send_request(topic, partition, **extra), response,
                  request_build={"message": message, **(request_build or {})}, response_build=response_build)


def producer_master() -> Scenario:
    s = Scenario("tubemq_producer_master", "A producer registers with the master, sends two heartbeats (the "
                 "second answer carries topic placement) and closes; SYN to FIN.")
    c = s.connect((PRODUCER_HOST, 40312), MASTER, "producer", "master")
    c.call(1, {"clientId": PRODUCER_ID, "topicList": [TOPIC, "audit"], "brokerCheckSum": -1,
               "hostName": PRODUCER_HOST, "jdkVersion": "17.0.13"},
           {**OK, "brokerCheckSum": 1763866790001, "brokerInfos": [BROKER_INFO, "2:192.168.7.13:8123"],
            "authorizedInfo": {"visitAuthorizedToken": 1763866800777},
            "appdConfig": {"configId": 3, "maxMsgSize": 1048576}})
    s.capture.wait(0.5)
    c.call(2, {"clientId": PRODUCER_ID, "brokerCheckSum": 1763866790001, "hostName": PRODUCER_HOST,
               "topicList": [TOPIC, "audit"]},
           {**OK, "brokerCheckSum": 1763866790001})
    s.capture.wait(0.5)
    c.call(2, {"clientId": PRODUCER_ID, "brokerCheckSum": 1763866790001, "hostName": PRODUCER_HOST,
               "topicList": [TOPIC, "audit"], "appdConfig": {"configId": 3}},
           {**OK, "brokerCheckSum": 1763866795002, "topicInfos": [f"{TOPIC}#1:3:1,2:3:1", "audit#1:1:1#524288"],
            "brokerInfos": [BROKER_INFO, "2:192.168.7.13:8123"], "requireAuth": False})
    c.call(3, {"clientId": PRODUCER_ID}, OK)
    c.close()
    return s


def producer_broker() -> Scenario:
    s = Scenario("tubemq_producer_broker", "A producer sends four messages to a broker (service type 3): one "
                 "plain, one with attributes, one of 20 KiB with attributes spanning three 8 KiB blocks and "
                 "several TCP segments, one refused with errCode 423.")
    c = s.connect((PRODUCER_HOST, 40318), BROKER, "producer", "broker")
    produce(c, CarriedMessage(b"order 1001 created"),
            {**OK, "messageId": 4_294_967_296_001, "appendTime": 1763866801123, "appendOffset": 0})
    attrs = "$msgType$=order,$msgTime$=202511230300,region=eu-west"
    produce(c, CarriedMessage(b'{"order":1002,"state":"paid"}', attrs),
            {**OK, "messageId": 4_294_967_296_002, "appendTime": 1763866801130, "appendOffset": 70},
            partition=1, msgType="order", msgTime="202511230300")
    produce(c, CarriedMessage(pattern_bytes(20 * 1024, "big-order"), "$msgType$=bulk"),
            {**OK, "messageId": 4_294_967_296_003, "appendTime": 1763866801190, "appendOffset": 140},
            partition=2, msgType="bulk")
    produce(c, CarriedMessage(b"ledger entry 7"),
            {"success": False, "errCode": ERR_PARTITION_UNPUBLISHABLE,
             "errMsg": "Partition[ledger:0] not publishable now", "requireAuth": False}, topic="ledger")
    c.close()
    return s


def consumer_master() -> Scenario:
    s = Scenario("tubemq_consumer_master", "A consumer registers with the master; a heartbeat answer carries a "
                 "rebalance event (EventProto ONLY_CONNECT, three partitions); the next heartbeat reports it "
                 "done; the consumer closes.")
    c = s.connect((CONSUMER_HOST, 51744), MASTER, "consumer", "master")
    c.call(4, {"clientId": CONSUMER_ID, "groupName": GROUP, "hostName": CONSUMER_HOST, "topicList": [TOPIC],
               "topicCondition": [], "requireBound": False, "qryPriorityId": 301, "jdkVersion": "17.0.13"},
           {**OK, "topicInfo": [f"{TOPIC}#1:3:1"], "notAllocated": True, "defFlowCheckId": 10,
            "groupFlowCheckId": 11, "qryPriorityId": 301,
            "authorizedInfo": {"visitAuthorizedToken": 1763866800888}})
    s.capture.wait(0.2)
    partitions = [subscribe_info(p) for p in range(3)]
    c.call(5, {"clientId": CONSUMER_ID, "groupName": GROUP, "reportSubscribeInfo": False,
               "defFlowCheckId": 10, "groupFlowCheckId": 11},
           {**OK, "event": {"rebalanceId": 17638668001, "opType": EVENT_ONLY_CONNECT, "status": EVENT_TODO,
                            "subscribeInfo": partitions},
            "notAllocated": False})
    s.capture.wait(0.2)
    c.call(5, {"clientId": CONSUMER_ID, "groupName": GROUP, "subscribeInfo": partitions,
               "reportSubscribeInfo": True,
               "event": {"rebalanceId": 17638668001, "opType": EVENT_ONLY_CONNECT, "status": EVENT_DONE,
                         "subscribeInfo": partitions}},
           {**OK, "requireAuth": False})
    c.call(6, {"clientId": CONSUMER_ID, "groupName": GROUP}, OK)
    c.close()
    return s


BROKER_CLIENT_ID = "1:192.168.7.11:8123:2.1.0"   # TubeBroker.generateBrokerClientId: id:host:port:version
# defaultPartNum:acceptPublish:acceptSubscribe:unflushThreshold:unflushInterval:deleteWhen:deletePolicy
BROKER_DEFAULT_CONF = "3:true:true:1000:10000:0 0 6,18 * * ?:delete,168h"
TOPIC_CONF = f"{TOPIC}:3:true:true:1000:10000:0 0 6,18 * * ?:delete,168h:-2:1:"


def broker_master() -> Scenario:
    s = Scenario("tubemq_broker_master", "A broker registers with the master (7) with its default and topic "
                 "configuration, sends a heartbeat (8) and goes offline (9).")
    c = s.connect((BROKER_HOST, 35012), MASTER, "broker", "master")
    c.call(7, {"clientId": BROKER_CLIENT_ID, "brokerOnline": True, "enableTls": False, "readStatusRpt": 0,
               "writeStatusRpt": 0, "curBrokerConfId": 12, "confCheckSumId": 305419896,
               "brokerDefaultConfInfo": BROKER_DEFAULT_CONF, "brokerTopicSetConfInfo": [TOPIC_CONF],
               "flowCheckId": 7, "qryPriorityId": 301, "tlsPort": 8124,
               "clsConfig": {"configId": 3, "maxMsgSize": 1048576}},
           {**OK, "stopRead": False, "stopWrite": False, "takeConfInfo": False,
            "enableBrokerInfo": {"enableConsumeAuthenticate": False, "enableConsumeAuthorize": False,
                                 "enableProduceAuthenticate": False, "enableProduceAuthorize": False},
            "curBrokerConfId": 12, "confCheckSumId": 305419896, "flowCheckId": 7,
            "brokerAuthorizedInfo": {"visitAuthorizedToken": "1763866800999"},
            "clsConfig": {"configId": 3, "maxMsgSize": 1048576}})
    s.capture.wait(0.3)
    c.call(8, {"brokerId": "1", "brokerOnline": True, "readStatusRpt": 0, "writeStatusRpt": 0,
               "curBrokerConfId": 12, "confCheckSumId": 305419896, "takeConfInfo": False,
               "takeRemovedTopicInfo": False},
           {**OK, "stopRead": False, "stopWrite": False, "curBrokerConfId": 13, "confCheckSumId": 305419897,
            "needReportData": True, "takeConfInfo": True, "takeRemoveTopicInfo": False,
            "brokerDefaultConfInfo": BROKER_DEFAULT_CONF,
            "brokerTopicSetConfInfo": [TOPIC_CONF, "audit:1:true:true:1000:10000:0 0 6,18 * * ?:delete,168h:-2:1:"]})
    c.call(9, {"brokerId": "1"}, OK)
    c.close()
    return s


def consumer_v2_master() -> Scenario:
    s = Scenario("tubemq_consumer_v2_master", "A client-balancing (V2) consumer registers with the master (20), "
                 "heartbeats (21) and asks for partition metadata (22).")
    c = s.connect((CONSUMER_HOST, 51770), MASTER, "consumer", "master")
    brokers = [BROKER_INFO, "2:192.168.7.13:8123"]
    ops = {"groupFlowCheckId": 11, "defFlowCheckId": 10, "qryPriorityId": 301, "csmFrmMaxOffsetCtrlId": -1,
           "requireAuth": False}
    c.call(20, {"clientId": CONSUMER_ID, "groupName": GROUP, "hostName": CONSUMER_HOST, "sourceCount": 2,
                "nodeId": 0, "topicList": [TOPIC], "subRepInfo": {"brokerConfigId": -2, "topicMetaInfoId": -2},
                "opsTaskInfo": {"groupFlowCheckId": -2, "defFlowCheckId": -2}, "jdkVersion": "17.0.13"},
           {"errCode": ERR_SUCCESS, "errMsg": "OK", "brokerConfigId": 12, "brokerConfigList": brokers,
            "opsTaskInfo": ops})
    s.capture.wait(0.2)
    c.call(21, {"clientId": CONSUMER_ID, "groupName": GROUP,
                "subRepInfo": {"brokerConfigId": 12, "topicMetaInfoId": -2, "lstAssignedTime": 1763866800500,
                               "reportSubInfo": True, "partSubInfo": [f"{BROKER_INFO}:{TOPIC}:0"]}},
           {"errCode": ERR_SUCCESS, "errMsg": "OK", "brokerConfigId": 12, "topicMetaInfoId": 6,
            "topicMetaInfoList": [f"{TOPIC}#1:3:1,2:3:1"], "opsTaskInfo": ops})
    c.call(22, {"clientId": CONSUMER_ID, "groupName": GROUP, "brokerConfigId": 12, "topicMetaInfoId": 6},
           {"errCode": ERR_SUCCESS, "errMsg": "OK", "brokerConfigId": 12, "topicMetaInfoId": 6,
            "topicMetaInfoList": [f"{TOPIC}#1:3:1,2:3:1"], "brokerConfigList": brokers})
    c.close()
    return s


def fetched_messages() -> list[CarriedMessage]:
    """Four stored messages; id 1002 carries a checksum that does not match its data."""
    return [
        CarriedMessage(b"order 1001 created", message_id=1001),
        CarriedMessage(b'{"order":1002,"state":"paid"}', "$msgType$=order,region=eu-west", message_id=1002,
                       checksum=message_checksum(b"something else")),
        CarriedMessage(pattern_bytes(3000, "fetched-1003"), "", message_id=1003),   # empty attribute: flag 1
        CarriedMessage(b"order 1004 shipped", "$msgType$=order", message_id=1004),
    ]


def consumer_broker() -> Scenario:
    s = Scenario("tubemq_consumer_broker", "A consumer registers on a partition at the broker (opType 31), "
                 "pulls four messages (one with a wrong checksum), heartbeats, commits, pulls nothing (errCode "
                 "404) and unregisters (opType 32).")
    c = s.connect((CONSUMER_HOST, 51750), BROKER, "consumer", "broker")
    c.call(15, {"opType": OP_REGISTER, "clientId": CONSUMER_ID, "groupName": GROUP, "topicName": TOPIC,
                "partitionId": 0, "readStatus": 0, "qryPriorityId": 301,
                "authInfo": {"visitAuthorizedToken": 1763866800888}},
           {**OK, "currOffset": 0, "maxOffset": 4096})
    c.call(17, {"clientId": CONSUMER_ID, "partitionId": 0, "groupName": GROUP, "topicName": TOPIC,
                "lastPackConsumed": False, "manualCommitOffset": False, "escFlowCtrl": False},
           {**OK, "currOffset": 4, "minLimitTime": 0, "escFlowCtrl": False, "currDataDlt": 4092,
            "requireSlow": False, "maxOffset": 4096},
           response_build={"messages": fetched_messages(), "topic": TOPIC})
    c.call(16, {"clientId": CONSUMER_ID, "groupName": GROUP, "readStatus": 0,
                "partitionInfo": [f"{BROKER_INFO}:{TOPIC}:0:0"]},
           {**OK, "hasPartFailure": False, "requireAuth": False})
    c.call(18, {"clientId": CONSUMER_ID, "topicName": TOPIC, "partitionId": 0, "groupName": GROUP,
                "lastPackConsumed": True},
           {**OK, "currOffset": 4, "maxOffset": 4096})
    c.call(17, {"clientId": CONSUMER_ID, "partitionId": 0, "groupName": GROUP, "topicName": TOPIC,
                "lastPackConsumed": True},
           {"success": False, "errCode": ERR_NOT_FOUND, "errMsg": "no message to consume", "currOffset": 4,
            "maxOffset": 4})
    c.call(15, {"opType": OP_UNREGISTER, "clientId": CONSUMER_ID, "groupName": GROUP, "topicName": TOPIC,
                "partitionId": 0, "readStatus": 0},
           OK)
    c.close()
    return s


def standby_master() -> Scenario:
    s = Scenario("tubemq_standby_master", "A producer asks a standby master to register it and gets a "
                 "StandbyException (ResponseHeader status ERROR, RspExceptionBody); it then registers with the "
                 "active master on a second connection.")
    standby = s.connect((PRODUCER_HOST, 40320), STANDBY_MASTER, "producer", "master")
    register = {"clientId": PRODUCER_ID, "topicList": [TOPIC], "brokerCheckSum": -1, "hostName": PRODUCER_HOST}
    serial = standby.request(1, register)
    s.capture.wait(0.0015)
    standby.send(standby.build_exception(
        serial, STANDBY_EXCEPTION,
        f"{STANDBY_MASTER[0]}:{STANDBY_MASTER[1]} is not master now. the connecting client id is {PRODUCER_ID}"))
    standby.close()
    s.capture.wait(0.01)
    active = s.connect((PRODUCER_HOST, 40322), MASTER, "producer", "master")
    active.call(1, register, {**OK, "brokerCheckSum": 1763866790001, "brokerInfos": [BROKER_INFO]})
    active.close()
    return s


def unknown_methods() -> Scenario:
    s = Scenario("tubemq_unknown_methods", "Method ids without a message type: 12 (declared in RpcConstants, "
                 "no message) and 99 (not declared); the broker answers each with an exception, the second "
                 "one with status FATAL.")
    c = s.connect((PRODUCER_HOST, 40330), BROKER, "producer", "broker")
    # some protobuf bytes (a clientId string as field 1), opaque to a decoder that has no type for them
    opaque = field_key(1, WIRE_LENGTH_DELIMITED) + length_delimited(PRODUCER_ID.encode())
    serial = c.request(12, raw_request=opaque, service_type=SERVICE_BROKER_WRITE)
    s.capture.wait(0.001)
    c.send(c.build_exception(serial, "java.lang.Exception", "No method 12 in service 3 found on the server"))
    serial = c.request(99, raw_request=opaque, service_type=SERVICE_BROKER_WRITE)
    s.capture.wait(0.001)
    c.send(c.build_exception(serial, "java.lang.Exception", "No method 99 in service 3 found on the server",
                             status=STATUS_FATAL))
    c.close()
    return s


def pairing_anomalies() -> Scenario:
    s = Scenario("tubemq_pairing_anomalies", "Serial-number pairing trouble on one producer-master connection: "
                 "a response whose serial (77) was never requested, a request sent twice under serial 3 and "
                 "answered once, and a heartbeat (serial 4) still unanswered when the connection closes.")
    c = s.connect((PRODUCER_HOST, 40340), MASTER, "producer", "master")
    heartbeat = {"clientId": PRODUCER_ID, "brokerCheckSum": 1763866790001, "hostName": PRODUCER_HOST}
    c.call(1, {"clientId": PRODUCER_ID, "topicList": [TOPIC], "brokerCheckSum": -1, "hostName": PRODUCER_HOST},
           {**OK, "brokerCheckSum": 1763866790001, "brokerInfos": [BROKER_INFO]})
    c.respond(77, 2, {**OK, "brokerCheckSum": 1763866790001})
    c.call(2, heartbeat, {**OK, "brokerCheckSum": 1763866790001})
    c.request(2, heartbeat, serial=3)
    s.capture.wait(0.001)
    c.request(2, heartbeat, serial=3)
    s.capture.wait(0.002)
    c.respond(3, 2, {**OK, "brokerCheckSum": 1763866790001})
    s.capture.wait(0.5)
    c.request(2, heartbeat, serial=4)
    s.capture.wait(3.0)
    c.close()
    return s


def segmented() -> Scenario:
    s = Scenario("tubemq_segmented", "Frames cut by TCP anywhere: a request in segments of 1, 2, 9 and 4 bytes "
                 "(token, serial and list size split); a response header split every 3 bytes; two pipelined "
                 "requests whose boundary falls inside a segment (the second one's header split across two); "
                 "two responses in one segment; a 20 KiB request whose second block length is split across "
                 "segments.")
    c = s.connect((PRODUCER_HOST, 40350), BROKER, "producer", "broker")
    first = c.request(13, send_request(), message=CarriedMessage(pattern_bytes(300, "seg-1"), "k=v"),
                      segment_sizes=[1, 2, 9, 4])
    s.capture.wait(0.002)
    c.respond(first, 13, {**OK, "messageId": 9001}, segment_sizes=[3, 3, 3, 3])
    second = c.build_request(13, send_request(), message=CarriedMessage(b"pipelined one"))
    third = c.build_request(13, send_request(), message=CarriedMessage(b"pipelined two", "a=1"))
    # segment 2 holds the last 10 bytes of the second frame and the first 6 of the third one's header
    c.send(second, third, segment_sizes=[len(second.data) - 10, 16])
    s.capture.wait(0.002)
    c.send(c.build_response(second.record["serial"], 13, {**OK, "messageId": 9002}),
           c.build_response(third.record["serial"], 13, {**OK, "messageId": 9003}))
    big = c.build_request(13, send_request(), message=CarriedMessage(pattern_bytes(20 * 1024, "seg-big")))
    # 12-byte header, 4-byte length, 8192 bytes, then 2 of the 4 bytes of the second block's length
    c.send(big, segment_sizes=[12 + 4 + MAX_BLOCK_SIZE + 2])
    s.capture.wait(0.002)
    c.respond(big.record["serial"], 13, {**OK, "messageId": 9004})
    c.close()
    return s


def checksum_varint_offset(content: bytes) -> int:
    """Where SendMessageRequestP2B.checkSum = -1 sits in a request's block bytes: the key of field 6 followed
    by the ten-byte varint of -1."""
    needle = field_key(6, WIRE_VARINT) + varint(CHECKSUM_NOT_SUPPLIED)
    pos = content.find(needle)
    if pos < 0 or content.find(needle, pos + 1) >= 0:
        raise ValueError("checkSum varint not found exactly once")
    return pos + 1


def block_splits() -> Scenario:
    s = Scenario("tubemq_block_splits", "Frames whose blocks cut protobufs and varints: a request in 1-byte "
                 "blocks, its response in 3-byte blocks, a request with block boundaries aimed inside the "
                 "two-byte size prefix of RequestBody and inside the ten-byte varint of checkSum -1 plus an "
                 "empty block, its response in 7-byte blocks.")
    c = s.connect((PRODUCER_HOST, 40360), BROKER, "producer", "broker")
    produce(c, CarriedMessage(pattern_bytes(40, "tiny"), "k=v"), {**OK, "messageId": 9101},
            request_build={"block_sizes": 1}, response_build={"block_sizes": 3})
    aimed = CarriedMessage(pattern_bytes(400, "aimed"), "$msgType$=aimed")
    # the same bytes as the frame sent below, built first to find the offsets to aim at
    probe = c.build_request(13, send_request(), message=aimed, serial=0)
    content_size = probe.record["content_size"]
    content = b"".join(_blocks_of(probe.data))
    body_prefix = probe.record["part_offsets"][2]            # RequestBody's size prefix: two bytes (> 127)
    checksum_at = checksum_varint_offset(content)
    cuts = [body_prefix + 1, checksum_at + 5]
    sizes = [cuts[0], 0, cuts[1] - cuts[0], content_size - cuts[1]]
    frame = c.build_request(13, send_request(), message=aimed, block_sizes=sizes)
    frame.record["aimed_splits"] = [
        {"offset": cuts[0], "inside": "size prefix of RequestBody (2-byte varint)"},
        {"offset": cuts[1], "inside": "SendMessageRequestP2B.checkSum = -1 (10-byte varint), after 4 bytes"},
    ]
    c.send(frame)
    s.capture.wait(0.002)
    c.respond(frame.record["serial"], 13, {**OK, "messageId": 9102}, block_sizes=7)
    c.close()
    return s


def _blocks_of(frame: bytes) -> list[bytes]:
    """The blocks of a frame this module built (the encoder reading its own output, for aiming splits)."""
    _token, _serial, count = FRAME_HEADER.unpack_from(frame)
    pos, blocks = FRAME_HEADER.size, []
    for _ in range(count):
        (size,) = BLOCK_LENGTH.unpack_from(frame, pos)
        blocks.append(frame[pos + 4:pos + 4 + size])
        pos += 4 + size
    return blocks


def _midstream(name: str, description: str, payload_of_cut_frame: bytes) -> Scenario:
    s = Scenario(name, description)
    c = s.connect((CONSUMER_HOST, 51760), BROKER, "consumer", "broker", handshake=False, first_serial=41)
    # the consumer's heartbeat whose first 5 bytes (token and a byte of serial) went by before the capture
    c.request(16, {"clientId": CONSUMER_ID, "groupName": GROUP, "readStatus": 0,
                   "partitionInfo": [f"{BROKER_INFO}:{TOPIC}:0:0"]}, uncaptured=5)
    s.capture.wait(0.001)
    # the answer to an earlier pull (serial 40), its first 700 bytes not captured
    cut = c.build_response(40, 17, {**OK, "currOffset": 2, "maxOffset": 4096},
                           messages=[CarriedMessage(payload_of_cut_frame, message_id=2001),
                                     CarriedMessage(pattern_bytes(1200, "mid-2002"), "k=v", message_id=2002)],
                           topic=TOPIC)
    c.send(cut, uncaptured=700)
    c.respond(41, 16, {**OK, "hasPartFailure": False})
    c.call(17, {"clientId": CONSUMER_ID, "partitionId": 0, "groupName": GROUP, "topicName": TOPIC,
                "lastPackConsumed": True},
           {**OK, "currOffset": 4, "maxOffset": 4096},
           response_build={"messages": [CarriedMessage(b"order 2003 created", message_id=2003),
                                        CarriedMessage(b"order 2004 created", "$msgType$=order",
                                                       message_id=2004)], "topic": TOPIC})
    c.call(18, {"clientId": CONSUMER_ID, "topicName": TOPIC, "partitionId": 0, "groupName": GROUP},
           {**OK, "currOffset": 4, "maxOffset": 4096})
    c.close()
    return s


def midstream() -> Scenario:
    return _midstream("tubemq_midstream", "A consumer-broker connection captured from the middle: no SYN, the "
                      "first client packet starts 5 bytes into a heartbeat request, the first server packets "
                      "start 700 bytes into a GetMessageResponseB2C; a decoder must find the next begin token "
                      "in each direction.", pattern_bytes(2000, "mid-2001"))


def midstream_false_token() -> Scenario:
    # inside the captured part of the cut frame: the begin token, a serial and a list size far beyond the
    # 3584 a server accepts; a resynchronising decoder must reject this false start and keep looking
    fake = FRAME_HEADER.pack(BEGIN_TOKEN, 5, 0x7FFFFFF0) + BLOCK_LENGTH.pack(0x7FFFFFF0)
    payload = pattern_bytes(1000, "false-a") + fake + pattern_bytes(984, "false-b")
    return _midstream("tubemq_midstream_false_token", "As tubemq_midstream, but the captured part of the cut "
                      "GetMessageResponseB2C holds the begin token followed by a list size of 2147483632: a "
                      "false frame start to reject while resynchronising.", payload)


SCENARIOS = {f.__name__: f for f in [
    producer_master, producer_broker, consumer_master, consumer_broker, broker_master, consumer_v2_master,
    standby_master, unknown_methods, pairing_anomalies, segmented, block_splits, midstream,
    midstream_false_token,
]}


def write_scenario(name: str, outdir) -> dict:
    """Write one scenario's pcap and manifest into outdir; returns the manifest."""
    return SCENARIOS[name]().write(outdir)


def write_all(outdir) -> dict[str, dict]:
    return {name: write_scenario(name, outdir) for name in SCENARIOS}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/tubemq_wire.py OUTDIR", file=sys.stderr)
        return 2
    for name, manifest in write_all(argv[0]).items():
        summary = manifest["summary"]
        print(f"{manifest['pcap']}: {manifest['packets']} packets, {summary['frames_complete']} frames, "
              f"{summary['messages']} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

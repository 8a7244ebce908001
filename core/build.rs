//! Compiles the .proto files of ../proto (the contract) into a descriptor set the core embeds: the schema
//! the decoder walks is the same one the Python side generates its modules from.
use prost::Message;
use std::path::PathBuf;

fn main() {
    let proto_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("proto");
    let files = ["PulsarApi.proto", "PulsarMarkers.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={}", proto_dir.join(f).display());
    }
    let set = protox::compile(files, [&proto_dir]).expect("the .proto files compile");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("pulsar_descriptor.bin");
    std::fs::write(out, set.encode_to_vec()).unwrap();
}

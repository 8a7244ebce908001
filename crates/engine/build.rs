//! Compiles the .proto files of ../proto (the contract) into one descriptor set per protocol, which the core
//! embeds: the schema the decoder walks is the same one the Python side generates its modules from.
use prost::Message;
use std::path::PathBuf;

fn compile(proto_dir: &std::path::Path, protocol: &str, files: &[&str]) {
    let dir = proto_dir.join(protocol);
    for f in files {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
    }
    let set = protox::compile(files, [&dir]).expect("the .proto files compile");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join(format!("{protocol}_descriptor.bin"));
    std::fs::write(out, set.encode_to_vec()).unwrap();
}

fn main() {
    let proto_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("proto");
    compile(&proto_dir, "pulsar", &["PulsarApi.proto", "PulsarMarkers.proto"]);
    compile(&proto_dir, "tubemq", &["RPC.proto", "MasterService.proto", "BrokerService.proto"]);
}

//! Compiles `airlock/v1/*.proto` with protox, a pure-Rust protobuf compiler, so that building
//! the workspace never needs a `protoc` binary on the machine.

use std::path::PathBuf;

const PROTO_ROOT: &str = ".";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = std::fs::read_dir("airlock/v1")?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<PathBuf>, _>>()?
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "proto"))
        .collect::<Vec<_>>();
    for proto in &protos {
        println!("cargo:rerun-if-changed={}", proto.display());
    }
    println!("cargo:rerun-if-changed=airlock/v1");

    let descriptors = protox::compile(&protos, [PROTO_ROOT])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("airlock_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

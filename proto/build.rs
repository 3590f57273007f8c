//! Compiles `airlock/v1/*.proto`, and the OTLP subset under `otlp/` (traces, metrics, logs), with protox, a
//! pure-Rust protobuf compiler, so that building the workspace never needs a `protoc` binary
//! on the machine.

use std::path::{Path, PathBuf};

const PROTO_ROOT: &str = ".";

/// Root of the OTLP protos: their imports name files relative to it
/// (`opentelemetry/proto/common/v1/common.proto`), as the official ones do.
const OTLP_ROOT: &str = "otlp";

/// The OTLP files, in dependency order; the generated modules are exposed as `otlp::…`.
const OTLP_PROTOS: &[&str] = &[
    "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry/proto/trace/v1/trace.proto",
    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
    "opentelemetry/proto/metrics/v1/metrics.proto",
    "opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
    "opentelemetry/proto/logs/v1/logs.proto",
    "opentelemetry/proto/collector/logs/v1/logs_service.proto",
];

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

    compile_otlp()
}

/// The OTLP subset is compiled on its own, so that the `airlock.v1` descriptor set served
/// through reflection holds only airlock's API.
fn compile_otlp() -> Result<(), Box<dyn std::error::Error>> {
    let files = OTLP_PROTOS
        .iter()
        .map(|file| Path::new(OTLP_ROOT).join(file))
        .collect::<Vec<_>>();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    println!("cargo:rerun-if-changed={OTLP_ROOT}");
    let descriptors = protox::compile(&files, [OTLP_ROOT])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

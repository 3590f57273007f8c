//! The `airlock.v1` API as Rust types: messages, the tonic client and server for every service,
//! and the encoded file descriptor set that the daemon serves through gRPC reflection.
//!
//! The `.proto` files under `proto/airlock/v1` are the contract; this crate only compiles them.

#![allow(clippy::doc_lazy_continuation, clippy::large_enum_variant)]

/// Generated from `proto/airlock/v1`.
pub mod v1 {
    tonic::include_proto!("airlock.v1");

    /// The encoded `FileDescriptorSet` of every `airlock.v1` file, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/airlock_descriptor.bin"));
}

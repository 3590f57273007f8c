//! Output policies: the hard cap on what a tool may write while it runs, and the shaping of
//! its result into what a caller sees (head, tail or both ends of an oversized result).

mod capture;
mod policy;

pub use capture::{CaptureSummary, ChunkSink, OutputCapture, OutputChunk, StreamKind};
pub use policy::{OutputPolicy, Shaped, TruncateMode, shape};

//! Output policies: the hard cap on what a tool may write while it runs, the shaping of its
//! result into what a caller sees (head, tail or both ends of an oversized result), and the
//! full outputs kept when a caller saw only part.

mod capture;
mod kept;
mod policy;

pub use capture::{CaptureSummary, OutputCapture, OutputChunk, StreamKind};
pub use kept::{KeptError, KeptLimits, KeptOutputs, MAX_PAGE_BYTES};
pub use policy::{OutputPolicy, Shaped, TruncateMode, shape};

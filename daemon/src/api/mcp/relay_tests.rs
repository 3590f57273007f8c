//! Parked calls' states: only the very call's retry, by its tenant, unchanged and once,
//! finds its call.

use super::*;

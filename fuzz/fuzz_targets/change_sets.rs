//! The sandbox-to-host boundary of change sets: the input decodes to a hostile workspace, a
//! hostile upper layer (byte names, every file type and mode bit, hard links, symlinks out,
//! sparse files), bounds, and a person's edits racing the apply; the case is captured and
//! applied as a call's changes are, and the host checked after
//! ([`airlock_daemon::testing::change_boundary`] says what is checked). Runs as root.
//!
//! Its corpus, `corpus/change_sets`, is replayed by the daemon's own tests on stable
//! (`changes::boundary_tests::the_fuzz_corpus_finds_no_break`): what fuzzing finds is kept
//! there and stays checked in CI.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    airlock_daemon::testing::change_boundary(data);
});

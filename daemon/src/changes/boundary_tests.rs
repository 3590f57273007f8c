//! The change-set boundary under attack: the attacks issue 45 found, each as an example
//! through a real overlay, and the search of `boundary.rs` over random and corpus cases.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::tests::merged;
use super::*;

/// How many random cases the search runs (`AIRLOCK_BOUNDARY_CASES`; `.ci/run` sets it).
const DEFAULT_CASES: u64 = 200;

fn setup() -> (tempfile::TempDir, PathBuf, Changes) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::write(ws.join("src/lib.rs"), "fn main() {}\n").expect("write");
    let state = dir.path().join("state");
    let changes = Changes::open(&state, &state, 1 << 30).expect("open");
    (dir, ws, changes)
}

/// A hosted server's overlay over `ws`, made a tick after whatever the test wrote there: a
/// file changed at the overlay's own tick counts as changed under its lookups (`sync.rs`).
fn server_overlay(changes: &Changes, ws: &Path) -> Overlay {
    std::thread::sleep(std::time::Duration::from_millis(20));
    changes.overlay(ws, "server").expect("overlay")
}

fn rules(rules: ChangeRules) -> CallRules {
    CallRules {
        exclusions: Exclusions::none(),
        modes: Modes::Tool,
        rules,
        deadline: Deadline::none(),
    }
}

fn mode(path: &Path) -> u32 {
    path.symlink_metadata().expect("meta").mode() & 0o7777
}

#[test]
fn setuid_and_setgid_never_land_and_the_record_says_so() {
    let (_dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "suid").expect("overlay");
    let m = merged(&overlay);
    std::fs::copy("/bin/sh", m.join("suid_sh")).expect("copy");
    std::fs::set_permissions(m.join("suid_sh"), PermissionsExt::from_mode(0o4755)).expect("chmod");
    std::fs::write(m.join("sgid"), "x").expect("write");
    std::fs::set_permissions(m.join("sgid"), PermissionsExt::from_mode(0o2777)).expect("chmod");
    std::fs::create_dir(m.join("shared")).expect("mkdir");
    std::fs::set_permissions(m.join("shared"), PermissionsExt::from_mode(0o3777)).expect("chmod");
    let set = changes.commit(overlay, &rules(ChangeRules::default()));
    assert_eq!(set.not_applied, None, "{set:?}");
    assert_eq!(mode(&ws.join("suid_sh")), 0o755);
    assert_eq!(mode(&ws.join("sgid")), 0o755);
    assert_eq!(mode(&ws.join("shared")), 0o755);
    for path in ["suid_sh", "sgid", "shared"] {
        assert!(
            set.skipped
                .iter()
                .any(|note| note.starts_with(path) && note.contains("bit dropped")),
            "{path}: {:?}",
            set.skipped
        );
    }
}

#[test]
fn fifos_and_sockets_are_refused_and_recorded() {
    let (_dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "fifo").expect("overlay");
    let m = merged(&overlay);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        m.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    let _socket = std::os::unix::net::UnixListener::bind(m.join("sock")).expect("bind");
    std::fs::write(m.join("plain"), "ok").expect("write");
    let set = changes.commit(overlay, &rules(ChangeRules::default()));
    assert_eq!(set.not_applied, None, "{set:?}");
    assert!(ws.join("plain").is_file());
    assert!(ws.join("pipe").symlink_metadata().is_err());
    assert!(ws.join("sock").symlink_metadata().is_err());
    assert!(
        set.skipped
            .iter()
            .any(|note| note == "pipe (refused: a fifo, not a file, symlink or directory)"),
        "{:?}",
        set.skipped
    );
    assert!(
        set.skipped
            .iter()
            .any(|note| note.starts_with("sock (refused: a socket"))
    );
}

#[test]
fn names_are_bytes_end_to_end_and_lookalikes_stay_apart() {
    let (_dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "names").expect("overlay");
    let m = merged(&overlay);
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(m.join(latin1), "latin-1").expect("write");
    std::fs::write(m.join("caf\u{fffd}.txt"), "replacement").expect("write");
    std::fs::write(m.join("caf\u{e9}.txt"), "nfc").expect("write");
    std::fs::write(m.join("cafe\u{301}.txt"), "nfd").expect("write");
    let set = changes.commit(overlay, &rules(ChangeRules::default()));
    assert_eq!(set.not_applied, None, "{set:?}");
    assert_eq!(set.changes.len(), 4, "{set:?}");
    assert_eq!(std::fs::read(ws.join(latin1)).expect("read"), b"latin-1");
    assert_eq!(
        std::fs::read(ws.join("caf\u{fffd}.txt")).expect("read"),
        b"replacement"
    );
    assert_eq!(
        std::fs::read(ws.join("caf\u{e9}.txt")).expect("read"),
        b"nfc"
    );
    assert_eq!(
        std::fs::read(ws.join("cafe\u{301}.txt")).expect("read"),
        b"nfd"
    );

    // Through the wire and back, as the store keeps it: the same bytes.
    let wire = crate::wire::change_set(&set);
    let latin = wire
        .changes
        .iter()
        .find(|change| change.path_bytes == b"caf\xe9.txt")
        .expect("the raw name travels as bytes");
    assert_eq!(latin.path, "caf\u{fffd}.txt");
    let utf8 = wire
        .changes
        .iter()
        .find(|change| change.path == "caf\u{fffd}.txt" && change.path_bytes.is_empty())
        .expect("a UTF-8 name travels as text");
    assert!(utf8.path_bytes.is_empty());
    let back = crate::wire::change_set_from(&wire);
    assert_eq!(back.changes, set.changes);

    // And undone by those bytes.
    RevertPlan::new([&set])
        .execute_at(&ws, changes.blobs(), false)
        .expect("revert");
    assert!(ws.join(latin1).symlink_metadata().is_err());
    assert!(ws.join("caf\u{fffd}.txt").symlink_metadata().is_err());
}

#[test]
fn a_stored_path_that_climbs_out_reads_as_not_applied() {
    let mut wire = crate::wire::change_set(&ChangeSet {
        changes: vec![Change {
            path: RelPath::from("ok"),
            kind: Kind::Added,
            from: None,
            before: None,
            after: None,
            digest_only: None,
            applied: true,
        }],
        ..ChangeSet::default()
    });
    for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", ""] {
        wire.changes[0].path = bad.into();
        let back = crate::wire::change_set_from(&wire);
        assert!(!back.changes[0].applied, "{bad}");
    }
}

#[test]
fn a_call_over_its_bounds_lands_nothing_and_keeps_nothing() {
    let (dir, ws, changes) = setup();
    let tight = ChangeRules {
        max_bytes: 1 << 20,
        max_file_bytes: 1 << 20,
        max_files: 10,
        ..ChangeRules::default()
    };
    // A sparse gigabyte costs the tool nothing: counted by its apparent size.
    let overlay = changes.overlay(&ws, "sparse").expect("overlay");
    let m = merged(&overlay);
    std::fs::write(m.join("small"), "x").expect("write");
    let file = std::fs::File::create(m.join("huge")).expect("create");
    file.set_len(1 << 30).expect("sparse");
    drop(file);
    let set = changes.commit(overlay, &rules(tight));
    assert_eq!(set.refusal, Some(Refusal::Limit), "{set:?}");
    assert!(
        set.not_applied
            .as_deref()
            .is_some_and(|why| why.contains("huge is 1073741824 bytes (apparent size)")),
        "{set:?}"
    );
    assert!(set.changes.is_empty());
    assert!(!ws.join("small").exists() && !ws.join("huge").exists());
    let blobs = dir.path().join("state/changes/blobs");
    assert_eq!(
        std::fs::read_dir(&blobs).expect("blobs").count(),
        0,
        "nothing was copied into the blob store"
    );

    // Too many paths.
    let overlay = changes.overlay(&ws, "many").expect("overlay");
    let m = merged(&overlay);
    for n in 0..11 {
        std::fs::write(m.join(format!("f{n}")), "x").expect("write");
    }
    let set = changes.commit(overlay, &rules(tight));
    assert_eq!(set.refusal, Some(Refusal::Limit), "{set:?}");
    assert!(!ws.join("f0").exists());

    // One whiteout stands for a whole tree of the workspace: its paths count.
    std::fs::create_dir(ws.join("tree")).expect("mkdir");
    for n in 0..20 {
        std::fs::write(ws.join(format!("tree/{n}")), "x").expect("write");
    }
    let overlay = changes.overlay(&ws, "rm-tree").expect("overlay");
    std::fs::remove_dir_all(merged(&overlay).join("tree")).expect("rm -rf");
    let set = changes.commit(overlay, &rules(tight));
    assert_eq!(set.refusal, Some(Refusal::Limit), "{set:?}");
    assert_eq!(
        std::fs::read_dir(ws.join("tree")).expect("kept").count(),
        20
    );
    std::fs::remove_dir_all(ws.join("tree")).expect("clean up");

    // Deleting content that must be kept to undo it counts too.
    std::fs::write(ws.join("big"), vec![7u8; 2 << 20]).expect("write");
    let overlay = changes.overlay(&ws, "delete").expect("overlay");
    std::fs::remove_file(merged(&overlay).join("big")).expect("rm");
    let set = changes.commit(overlay, &rules(tight));
    assert_eq!(set.refusal, Some(Refusal::Limit), "{set:?}");
    assert!(ws.join("big").exists());
}

#[test]
fn a_tree_deeper_than_the_bound_is_refused_whole() {
    let (_dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "deep").expect("overlay");
    let mut path = merged(&overlay);
    for _ in 0..=bounds::MAX_DEPTH {
        path.push("d");
        std::fs::create_dir(&path).expect("mkdir");
    }
    std::fs::write(path.join("f"), "x").expect("write");
    let set = changes.commit(overlay, &rules(ChangeRules::default()));
    assert_eq!(set.refusal, Some(Refusal::Limit), "{set:?}");
    assert!(!ws.join("d").exists());
}

#[test]
fn a_sparse_file_lands_sparse_and_its_blob_is_written_once() {
    let (dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "sparse").expect("overlay");
    let m = merged(&overlay);
    for name in ["one", "two"] {
        let file = std::fs::File::create(m.join(name)).expect("create");
        file.set_len(256 << 20).expect("sparse");
    }
    let set = changes.commit(overlay, &rules(ChangeRules::default()));
    assert_eq!(set.not_applied, None, "{set:?}");
    for name in ["one", "two"] {
        let meta = ws.join(name).metadata().expect("meta");
        assert_eq!(meta.len(), 256 << 20);
        assert!(
            meta.blocks() < 1024,
            "{name} landed sparse: {} blocks",
            meta.blocks()
        );
    }
    let mut blobs = 0;
    let mut allocated = 0;
    for shard in std::fs::read_dir(dir.path().join("state/changes/blobs")).expect("blobs") {
        for blob in std::fs::read_dir(shard.expect("shard").path()).expect("shard") {
            blobs += 1;
            allocated += blob.expect("blob").metadata().expect("meta").blocks();
        }
    }
    assert_eq!(blobs, 1, "the same content is kept once");
    assert!(
        allocated < 1024,
        "the blob is sparse too: {allocated} blocks"
    );
}

#[test]
fn hard_links_land_as_separate_files() {
    let (_dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "links").expect("overlay");
    let m = merged(&overlay);
    std::fs::write(m.join("a"), "shared").expect("write");
    std::fs::hard_link(m.join("a"), m.join("b")).expect("link");
    std::fs::hard_link(m.join("src/lib.rs"), m.join("lib-link")).expect("link a workspace file");
    let set = changes.commit(overlay, &rules(ChangeRules::default()));
    assert_eq!(set.not_applied, None, "{set:?}");
    for name in ["a", "b", "lib-link", "src/lib.rs"] {
        assert_eq!(ws.join(name).metadata().expect("meta").nlink(), 1, "{name}");
    }
    assert_eq!(std::fs::read(ws.join("b")).expect("read"), b"shared");
}

#[test]
fn a_person_s_edit_during_the_call_stops_the_whole_set_and_is_kept() {
    let (_dir, ws, changes) = setup();
    std::fs::write(ws.join("notes.txt"), "before\n").expect("write");
    let overlay = changes.overlay(&ws, "race").expect("overlay");
    let m = merged(&overlay);
    std::fs::write(m.join("new.txt"), "the call's\n").expect("write");
    std::fs::write(m.join("notes.txt"), "the call's notes\n").expect("write");
    std::fs::remove_file(m.join("src/lib.rs")).expect("rm");
    let call = rules(ChangeRules::default());
    let (upper, set) = changes.capture(overlay, &call).expect("captured");
    // The person saves while the call's changes wait to be applied.
    std::fs::write(ws.join("notes.txt"), "the person's\n").expect("edit");
    let set = changes.apply(&upper, set, Deadline::none());
    assert_eq!(set.refusal, Some(Refusal::Failed), "{set:?}");
    assert!(
        set.not_applied
            .as_deref()
            .is_some_and(|why| why.starts_with("cannot apply the call's changes to the workspace: notes.txt was changed in the workspace during the call")),
        "{set:?}"
    );
    assert!(set.changes.iter().all(|change| !change.applied));
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "the person's\n"
    );
    assert!(!ws.join("new.txt").exists(), "all or nothing");
    assert!(ws.join("src/lib.rs").exists(), "the removal was undone");
    let left: Vec<_> = std::fs::read_dir(&ws)
        .expect("ws")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert!(
        left.iter()
            .all(|name| !name.as_bytes().starts_with(b".airlock")),
        "{left:?}"
    );
}

#[test]
fn capture_stops_at_the_deadline_and_lands_nothing() {
    let (_dir, ws, changes) = setup();
    let overlay = changes.overlay(&ws, "late").expect("overlay");
    std::fs::write(merged(&overlay).join("late.txt"), "x").expect("write");
    let call = CallRules {
        deadline: Deadline(Some(std::time::Instant::now())),
        ..rules(ChangeRules::default())
    };
    let set = changes.commit(overlay, &call);
    assert_eq!(set.refusal, Some(Refusal::Deadline), "{set:?}");
    assert!(!ws.join("late.txt").exists());
}

/// The boundary search over seeded random cases. Its seed is random unless
/// `AIRLOCK_BOUNDARY_SEED` is set; a failing case prints its seed and its input, which
/// `fuzz/corpus/change_sets` then keeps.
#[test]
fn the_search_finds_no_break_in_random_cases() {
    let cases = std::env::var("AIRLOCK_BOUNDARY_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let seed = std::env::var("AIRLOCK_BOUNDARY_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    for case in 0..cases {
        let len = rng.usize(0..1024);
        let data: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(len).collect();
        if let Err(panic) = std::panic::catch_unwind(|| boundary::check(&data)) {
            eprintln!(
                "case {case} of seed {seed} (AIRLOCK_BOUNDARY_SEED={seed}) broke the boundary; its input, hex: {}",
                hex::encode(&data)
            );
            std::panic::resume_unwind(panic);
        }
    }
}

/// The fuzz target's committed corpus, replayed: what fuzzing found stays found.
#[test]
fn the_fuzz_corpus_finds_no_break() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/change_sets");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&corpus).expect("the change_sets corpus") {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("read");
        if let Err(panic) = std::panic::catch_unwind(|| boundary::check(&data)) {
            eprintln!("{} broke the boundary", path.display());
            std::panic::resume_unwind(panic);
        }
        replayed += 1;
    }
    assert!(replayed >= 8, "the corpus has {replayed} inputs");
}

/// A set of 100,000 changes, or of 10,000 with 255-byte names, is recorded in events and
/// results by its first changes within the summary's budget, and says how many there are.
#[test]
fn a_huge_set_s_record_fits_every_message() {
    for (count, name_len) in [(100_000usize, 12usize), (10_000, 255)] {
        let set = ChangeSet {
            changes: (0..count)
                .map(|n| Change {
                    path: RelPath::from(format!("{n:0>width$}", width = name_len).as_str()),
                    kind: Kind::Added,
                    from: None,
                    before: None,
                    after: Some(State {
                        node: Node::File,
                        digest: Some("0".repeat(64)),
                        mode: 0o644,
                        size: 1,
                    }),
                    digest_only: None,
                    applied: true,
                })
                .collect(),
            skipped: (0..count)
                .map(|n| format!("f{n} (refused: a fifo)"))
                .collect(),
            ..ChangeSet::default()
        };
        let summary = crate::wire::change_set_summary(&set);
        let encoded = prost::Message::encoded_len(&summary);
        assert!(
            encoded <= crate::wire::CHANGE_SUMMARY_BYTES + 16 * 1024,
            "{count} changes of {name_len}-byte names: {encoded} bytes"
        );
        assert_eq!(summary.total_changes, count as u64);
        assert!(!summary.changes.is_empty() && summary.changes.len() < count);
        assert_eq!(summary.skipped.len(), crate::wire::MAX_SKIPPED_NOTES);
        assert!(
            summary
                .skipped
                .last()
                .is_some_and(|note| note.contains("more"))
        );
        // Read back (a resumed run's result) and summarised again, it still says so.
        let again = crate::wire::change_set_summary(&crate::wire::change_set_from(&summary));
        assert_eq!(again.total_changes, count as u64);
    }
}

/// A hosted server writes through one overlay call after call while a person edits the
/// workspace: each sync holds only what that call wrote, and the person's work is never
/// overwritten — a path both changed is a conflict, the person's version kept.
#[test]
fn a_writing_server_never_undoes_a_person() {
    let (_dir, ws, changes) = setup();
    std::fs::write(ws.join("notes.txt"), "v0\n").expect("write");
    std::fs::write(ws.join("gone.txt"), "bye\n").expect("write");
    let overlay = server_overlay(&changes, &ws);
    let m = merged(&overlay);
    let call = rules(ChangeRules::default());
    let writes = ServerWrites::default();
    let paths = |set: &ChangeSet| -> Vec<String> {
        set.changes
            .iter()
            .map(|change| change.path.to_string())
            .collect()
    };

    // Call 1: the server writes notes.txt and removes gone.txt.
    std::fs::write(m.join("notes.txt"), "server 1\n").expect("server write");
    std::fs::remove_file(m.join("gone.txt")).expect("server rm");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(
        (paths(&set), set.not_applied.clone()),
        (vec!["gone.txt".into(), "notes.txt".into()], None)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "server 1\n"
    );

    // The person edits notes.txt and brings gone.txt back.
    std::fs::write(ws.join("notes.txt"), "the person's\n").expect("edit");
    std::fs::write(ws.join("gone.txt"), "back\n").expect("recreate");

    // Call 2 writes something else: its set is that alone, and the person's work stays.
    std::fs::write(m.join("other.txt"), "server 2\n").expect("server write");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(
        (paths(&set), set.not_applied.clone()),
        (vec!["other.txt".into()], None)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "the person's\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("gone.txt")).expect("read"),
        "back\n"
    );

    // Call 3 writes notes.txt again, over a version it never saw: a conflict.
    std::fs::write(m.join("notes.txt"), "server 3\n").expect("server write");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.refusal, Some(Refusal::Failed), "{set:?}");
    assert!(
        set.not_applied
            .as_deref()
            .is_some_and(|why| why.contains("notes.txt which changed on the host")),
        "{set:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "the person's\n"
    );
}

/// Before each call the server is shown the workspace as it is: a person's edits to what the
/// server wrote, files a person brought back or removed, a directory the server replaced and
/// a person added to, a file a person turned into a directory. Then its next writes build on
/// the person's versions and land without a conflict.
#[test]
fn a_writing_server_is_shown_the_workspace_as_it_is_before_each_call() {
    let (_dir, ws, changes) = setup();
    std::fs::write(ws.join("notes.txt"), "v0\n").expect("write");
    std::fs::write(ws.join("gone.txt"), "bye\n").expect("write");
    std::fs::write(ws.join("kept.txt"), "kept\n").expect("write");
    std::fs::create_dir_all(ws.join("cache/old")).expect("mkdir");
    std::fs::write(ws.join("cache/old/a"), "a\n").expect("write");
    let overlay = server_overlay(&changes, &ws);
    let m = merged(&overlay);
    let call = rules(ChangeRules::default());
    let writes = ServerWrites::default();
    let read = |path: &Path| std::fs::read_to_string(path).ok();
    // What the workspace held before is not a change made during the first call.
    std::thread::sleep(std::time::Duration::from_millis(50));

    // Call 1: the server appends to notes.txt, removes gone.txt, replaces cache/ with a new
    // directory (opaque in its upper layer), makes log/ and opens kept.txt for writing only.
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    std::fs::write(m.join("notes.txt"), "v0\nserver 1\n").expect("server write");
    std::fs::remove_file(m.join("gone.txt")).expect("server rm");
    std::fs::remove_dir_all(m.join("cache")).expect("server rm -r");
    std::fs::create_dir(m.join("cache")).expect("server mkdir");
    std::fs::write(m.join("cache/new"), "n\n").expect("server write");
    std::fs::create_dir(m.join("log")).expect("server mkdir");
    std::fs::write(m.join("log/1"), "1\n").expect("server write");
    drop(
        std::fs::OpenOptions::new()
            .append(true)
            .open(m.join("kept.txt"))
            .expect("copy-up"),
    );
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.not_applied, None, "{set:?}");
    assert_eq!(read(&ws.join("cache/new")).as_deref(), Some("n\n"));

    // The person edits notes.txt, brings gone.txt back, adds to cache/, turns log/ into a
    // file and edits kept.txt, which the server holds an untouched copy of.
    std::fs::write(ws.join("notes.txt"), "v0\nserver 1\nthe person's\n").expect("edit");
    std::fs::write(ws.join("gone.txt"), "back\n").expect("recreate");
    std::fs::write(ws.join("cache/theirs"), "t\n").expect("add");
    std::fs::remove_dir_all(ws.join("log")).expect("rm");
    std::fs::write(ws.join("log"), "a file now\n").expect("replace");
    std::fs::write(ws.join("kept.txt"), "kept, edited\n").expect("edit");
    std::thread::sleep(std::time::Duration::from_millis(50));

    // Call 2 sees every one of them.
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        read(&m.join("notes.txt")).as_deref(),
        Some("v0\nserver 1\nthe person's\n")
    );
    assert_eq!(read(&m.join("gone.txt")).as_deref(), Some("back\n"));
    assert_eq!(read(&m.join("cache/theirs")).as_deref(), Some("t\n"));
    assert_eq!(read(&m.join("log")).as_deref(), Some("a file now\n"));
    assert_eq!(read(&m.join("kept.txt")).as_deref(), Some("kept, edited\n"));
    // Being shown them is no change of the server's.
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(
        (set.changes.len(), set.not_applied.clone()),
        (0, None),
        "{set:?}"
    );

    // Its next write builds on the person's version and lands, no conflict.
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    let mut notes = read(&m.join("notes.txt")).expect("read");
    notes.push_str("server 3\n");
    std::fs::write(m.join("notes.txt"), &notes).expect("server write");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.not_applied, None, "{set:?}");
    assert_eq!(
        set.changes
            .iter()
            .map(|change| change.path.to_string())
            .collect::<Vec<_>>(),
        ["notes.txt"]
    );
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("v0\nserver 1\nthe person's\nserver 3\n")
    );
    for (path, content) in [
        ("gone.txt", "back\n"),
        ("cache/theirs", "t\n"),
        ("log", "a file now\n"),
        ("kept.txt", "kept, edited\n"),
    ] {
        assert_eq!(read(&ws.join(path)).as_deref(), Some(content), "{path}");
    }

    // A person's edit made while a call runs, to a path the server writes too, is a
    // conflict: the person's version stays, and the server is shown it next.
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    std::fs::write(m.join("notes.txt"), "server 4\n").expect("server write");
    std::fs::write(ws.join("notes.txt"), "the person's, during\n").expect("edit");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.refusal, Some(Refusal::Failed), "{set:?}");
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("the person's, during\n")
    );
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        read(&m.join("notes.txt")).as_deref(),
        Some("the person's, during\n")
    );
}

/// Showing the server the workspace copies into its upper layer, and so counts against the
/// profile's bounds: a person's huge addition refuses the call rather than filling the disk.
#[test]
fn showing_a_server_the_workspace_is_bounded() {
    let (_dir, ws, changes) = setup();
    let overlay = server_overlay(&changes, &ws);
    let m = merged(&overlay);
    let call = rules(ChangeRules {
        max_files: 5,
        ..ChangeRules::default()
    });
    let writes = ServerWrites::default();
    std::fs::remove_dir_all(m.join("src")).ok();
    std::fs::create_dir(m.join("src")).expect("server mkdir");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.not_applied, None, "{set:?}");
    for n in 0..10 {
        std::fs::write(ws.join(format!("src/{n}")), "x").expect("person write");
    }
    let err = writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect_err("over the bound");
    assert!(
        err.to_string().contains("since the server's last call"),
        "{err}"
    );
}

/// A file the server read, then a person replaced by renaming over it while the call ran:
/// the overlay keeps its first lookup, so the server changes the replaced version. That
/// change is a conflict (the workspace's file changed during the call), never applied over
/// the person's; and the server is shown the person's version at its next call.
#[test]
fn a_server_s_change_to_a_file_replaced_during_its_call_is_a_conflict() {
    let (_dir, ws, changes) = setup();
    std::fs::write(ws.join("notes.txt"), "v0\n").expect("write");
    let overlay = server_overlay(&changes, &ws);
    let m = merged(&overlay);
    let call = rules(ChangeRules::default());
    let writes = ServerWrites::default();
    let append = |path: &Path| {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .expect("open");
        std::io::Write::write_all(&mut file, b"server\n").expect("append");
    };

    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        std::fs::read_to_string(m.join("notes.txt")).expect("read"),
        "v0\n"
    );
    // The person saves as editors do: a new file renamed over the old.
    std::fs::write(ws.join(".notes.txt.swp"), "the person's\n").expect("write");
    std::fs::rename(ws.join(".notes.txt.swp"), ws.join("notes.txt")).expect("rename");
    append(&m.join("notes.txt"));
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.refusal, Some(Refusal::Failed), "{set:?}");
    assert!(
        set.not_applied
            .as_deref()
            .is_some_and(|why| why.contains("notes.txt which changed on the host")),
        "{set:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "the person's\n"
    );
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        std::fs::read_to_string(m.join("notes.txt")).expect("read"),
        "the person's\n"
    );

    // A file the person removes while the server changes it: no re-creation behind their
    // back, a conflict.
    std::fs::write(ws.join("doomed.txt"), "d\n").expect("write");
    std::thread::sleep(std::time::Duration::from_millis(50));
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    append(&m.join("doomed.txt"));
    std::fs::remove_file(ws.join("doomed.txt")).expect("person rm");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert!(
        set.not_applied
            .as_deref()
            .is_some_and(|why| why.contains("doomed.txt which changed on the host")),
        "{set:?}"
    );
    assert!(!ws.join("doomed.txt").exists());

    // A file the host left alone during the call lands as ever.
    std::fs::write(ws.join("other.txt"), "o\n").expect("write");
    std::thread::sleep(std::time::Duration::from_millis(50));
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    append(&m.join("other.txt"));
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.not_applied, None, "{set:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("other.txt")).expect("read"),
        "o\nserver\n"
    );
}

/// Another call's set lands by renames, which a server's overlay would not see for a file it
/// had looked up: the daemon tells the server's record, and its next call is shown the file
/// as the set left it. So is a revert's work.
#[test]
fn a_server_is_shown_what_another_call_landed_in_its_workspace() {
    let (_dir, ws, changes) = setup();
    std::fs::write(ws.join("notes.txt"), "v0\n").expect("write");
    let overlay = server_overlay(&changes, &ws);
    let m = merged(&overlay);
    let call = rules(ChangeRules::default());
    let writes = std::sync::Arc::new(ServerWrites::default());
    changes.views().watch(
        std::os::fd::AsFd::as_fd(&overlay.upper().workspace),
        &writes,
    );

    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        std::fs::read_to_string(m.join("notes.txt")).expect("read"),
        "v0\n"
    );
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!((set.changes.len(), set.not_applied.clone()), (0, None));

    // A process tool's call rewrites notes.txt and adds a file; its set lands by renames.
    let tool = changes.overlay(&ws, "tool").expect("overlay");
    std::fs::write(merged(&tool).join("notes.txt"), "by the tool\n").expect("write");
    std::fs::write(merged(&tool).join("new.txt"), "new\n").expect("write");
    let landed = changes.commit(tool, &call);
    assert_eq!(landed.not_applied, None, "{landed:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "by the tool\n"
    );

    std::thread::sleep(std::time::Duration::from_millis(50));
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        std::fs::read_to_string(m.join("notes.txt")).expect("read"),
        "by the tool\n"
    );
    assert_eq!(
        std::fs::read_to_string(m.join("new.txt")).expect("read"),
        "new\n"
    );
    // Being shown it is no change of the server's; its edit of it builds on it and lands.
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(
        (set.changes.len(), set.not_applied.clone()),
        (0, None),
        "{set:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(50));
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    std::fs::write(m.join("notes.txt"), "by the tool\nand the server\n").expect("write");
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.not_applied, None, "{set:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "by the tool\nand the server\n"
    );
}

/// A file the server read, then a person replaced by renaming over it *between* calls: the
/// overlay keeps its first lookup and the server changes the replaced version. Its copy
/// records no origin (the file it copied was no longer linked) and the workspace's file
/// changed since the overlay was made: a conflict, never applied over the person's version.
#[test]
fn a_server_s_change_to_a_file_replaced_under_its_kept_lookup_is_a_conflict() {
    let (_dir, ws, changes) = setup();
    std::fs::write(ws.join("notes.txt"), "v0\n").expect("write");
    let overlay = server_overlay(&changes, &ws);
    let m = merged(&overlay);
    let call = rules(ChangeRules::default());
    let writes = ServerWrites::default();
    // A server looks its workspace up no sooner than a tick after its overlay is made.
    std::thread::sleep(std::time::Duration::from_millis(20));

    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        std::fs::read_to_string(m.join("notes.txt")).expect("read"),
        "v0\n"
    );
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!((set.changes.len(), set.not_applied.clone()), (0, None));

    std::fs::write(ws.join(".notes.txt.swp"), "the person's\n").expect("write");
    std::fs::rename(ws.join(".notes.txt.swp"), ws.join("notes.txt")).expect("rename");
    std::thread::sleep(std::time::Duration::from_millis(50));

    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(m.join("notes.txt"))
        .expect("open");
    std::io::Write::write_all(&mut file, b"server\n").expect("append");
    drop(file);
    let set = changes.sync(&overlay, &call, &writes, Deadline::none());
    assert_eq!(set.refusal, Some(Refusal::Failed), "{set:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        "the person's\n"
    );
    // Now a copy in its upper layer, the file is shown as the person left it.
    writes
        .refresh(&overlay, &call.rules, Deadline::none())
        .expect("refresh");
    assert_eq!(
        std::fs::read_to_string(m.join("notes.txt")).expect("read"),
        "the person's\n"
    );
}

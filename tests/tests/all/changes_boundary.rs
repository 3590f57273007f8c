//! What a `run_command` leaves behind, as an attacker leaves it, taken in by a real daemon:
//! the attacks of issue 45 end to end (the change-set search in the daemon's own tests looks
//! for the ones nobody thought of).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use airlock_proto::v1::ToolStatus;
use airlock_tests::{DaemonOptions, TestDaemon, repo_root};
use serde_json::json;

async fn first_party() -> TestDaemon {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    daemon
}

/// A setuid copy of a shell, a setgid directory, a fifo and a hard link: the call succeeds,
/// and what lands in the (root-owned) workspace is plain data.
#[tokio::test]
async fn nothing_setuid_setgid_or_special_lands_from_a_command() {
    let daemon = first_party().await;
    let workspace = daemon.workspace("suid");
    let ran = daemon
        .exec(
            "run_command",
            json!({
                "command": "cp /bin/sh suid_sh && chmod 4755 suid_sh && mkdir shared && chmod 2777 shared && mkfifo pipe && echo x > a && ln a b && printf 'caf\\351' > \"$(printf 'caf\\351.txt')\"",
                "workdir": "."
            }),
            Some(&workspace),
        )
        .await;
    let result = ran.assert_status(ToolStatus::Ok).result().clone();
    let mode = |name: &str| {
        std::fs::symlink_metadata(workspace.join(name))
            .unwrap()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("suid_sh"), 0o755);
    assert_eq!(
        std::fs::metadata(workspace.join("suid_sh")).unwrap().uid(),
        0
    );
    assert_eq!(mode("shared"), 0o755);
    assert!(workspace.join("pipe").symlink_metadata().is_err());
    for name in ["a", "b"] {
        assert_eq!(std::fs::metadata(workspace.join(name)).unwrap().nlink(), 1);
    }
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    assert_eq!(std::fs::read(workspace.join(latin1)).unwrap(), b"caf\xe9");
    let set = result.changes.expect("a change set");
    assert!(
        set.changes
            .iter()
            .any(|change| change.path_bytes == b"caf\xe9.txt" && change.applied),
        "{set:?}"
    );
    for note in [
        "suid_sh (setuid bit dropped)",
        "shared (setgid bit dropped)",
    ] {
        assert!(
            set.skipped.iter().any(|s| s == note),
            "{note}: {:?}",
            set.skipped
        );
    }
    assert!(
        set.skipped
            .iter()
            .any(|s| s.starts_with("pipe (refused: a fifo")),
        "{:?}",
        set.skipped
    );
    // Nothing the daemon staged is left.
    for entry in std::fs::read_dir(&workspace).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(!name.to_string_lossy().starts_with(".airlock"), "{name:?}");
    }
}

/// Sparse files of a gigabyte each cost the tool nothing; past the profile's byte bound the
/// call is stopped while it runs, LIMIT_EXCEEDED, and nothing it wrote is applied.
#[tokio::test]
async fn a_command_writing_past_its_bound_is_stopped_and_lands_nothing() {
    let daemon = first_party().await;
    let workspace = daemon.workspace("sparse");
    let ran = daemon
        .exec(
            "run_command",
            json!({
                "command": "echo x > small; for f in 1 2; do truncate -s 1000M big$f; printf x >> big$f; done; sleep 60",
                "workdir": "."
            }),
            Some(&workspace),
        )
        .await;
    let result = ran
        .assert_status(ToolStatus::LimitExceeded)
        .result()
        .clone();
    assert!(
        result
            .error_message
            .contains("(apparent size; changes.max_bytes)")
            && result
                .error_message
                .contains("the call was stopped and nothing it wrote was applied"),
        "stopped while it ran, not after its minute of sleep: {}",
        result.error_message
    );
    assert_eq!(
        std::fs::read_dir(&workspace).unwrap().count(),
        0,
        "nothing landed"
    );
}

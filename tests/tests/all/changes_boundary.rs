//! What a `run_command` leaves behind, as an attacker leaves it, taken in by a real daemon:
//! the attacks of issue 45 end to end (the change-set search in the daemon's own tests looks
//! for the ones nobody thought of).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use airlock_proto::v1 as pb;
use airlock_proto::v1::ToolStatus;
use airlock_tests::{DaemonOptions, RunStream, TestDaemon, repo_root, scripted_run};
use serde_json::json;

use super::changes::first_party;
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

/// A call that makes 100,000 files, and one that makes 10,000 with 255-byte names: the run's
/// stream reaches its end, attaching and watching from the start read every event, the
/// `changes` events
/// carry the first changes and the count, ListChanges pages through all of them, and a revert
/// takes them all back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_makes_a_hundred_thousand_files_stays_readable_and_revertible() {
    let daemon = first_party().await;
    let workspace = daemon.workspace("many");
    let call = |command: &str| json!({"name": "run_command", "arguments": {"command": command, "workdir": "."}});
    let script = json!({"turns": [
        {"tool_calls": [call("mkdir many && cd many && seq 100000 | xargs touch")]},
        {"tool_calls": [call("mkdir long && cd long && python3 -c \"[open('%0255d' % i, 'w').close() for i in range(10000)]\"")]},
        {"final": "made them"}
    ]});
    let mut start = scripted_run(&workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Auto as i32;
    let mut run = daemon.start_run(start).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    let totals: Vec<(u64, usize)> = run.of(|event| match event {
        pb::run_event::Event::Changes(changes) => {
            let set = changes.change_set.as_ref()?;
            Some((set.total_changes, set.changes.len()))
        }
        _ => None,
    });
    assert_eq!(totals.len(), 2, "{totals:?}");
    assert_eq!(totals[0].0, 100_001);
    assert_eq!(totals[1].0, 10_001);
    assert!(
        totals
            .iter()
            .all(|(total, shown)| *shown > 0 && (*shown as u64) < *total)
    );
    let run_id = run.run_id().to_owned();

    let mut attached = daemon
        .open_run(pb::run_request::Request::Attach(pb::AttachRun {
            run_id: run_id.clone(),
            after_seq: 0,
        }))
        .await
        .unwrap();
    assert_eq!(
        attached.finished().await.reason,
        pb::StopReason::Final as i32
    );
    // A watcher (the console's way in) reads every event too.
    let mut agent = daemon.agent().await;
    let mut watched = agent
        .watch_run(pb::AttachRun {
            run_id: run_id.clone(),
            after_seq: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut changes_events = 0;
    loop {
        let event = watched
            .message()
            .await
            .unwrap()
            .expect("the watch reaches the end");
        match event.event {
            Some(pb::run_event::Event::Changes(_)) => changes_events += 1,
            Some(pb::run_event::Event::RunFinished(_)) => break,
            _ => {}
        }
    }
    assert_eq!(changes_events, 2);

    let (mut offset, mut listed, mut pages) = (0, 0u64, 0);
    loop {
        let page = agent
            .list_changes(pb::ListChangesRequest {
                run_id: run_id.clone(),
                offset,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.total_changes, 110_002);
        for step in &page.steps {
            let set = step.change_set.as_ref().unwrap();
            let unapplied = set.changes.iter().find(|change| !change.applied);
            assert!(
                unapplied.is_none(),
                "{unapplied:?} in {} of {:?}",
                step.step,
                set.not_applied
            );
            listed += set.changes.len() as u64;
        }
        pages += 1;
        if page.next_offset == 0 {
            break;
        }
        offset = page.next_offset;
    }
    assert_eq!((listed, pages), (110_002, 12));
    assert_eq!(
        std::fs::read_dir(workspace.join("many")).unwrap().count(),
        100_000
    );

    // The console opens the run: the count of all of them, the first page of changes, each
    // `changes` event naming its first paths and how many more, and more pages on request.
    let browser = crate::console_browser::console_at(&daemon, &format!("#/runs/{run_id}")).await;
    browser
        .wait_for("[data-testid=changes][data-total=\"110002\"][data-read=\"1000\"]")
        .await;
    let summaries = browser
        .eval(
            "return [...document.querySelectorAll('[data-testid=event][data-kind=changes] .event-summary')].map((e) => e.textContent);",
        )
        .await;
    let summaries: Vec<String> = serde_json::from_value(summaries).unwrap();
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(
        summaries[0].contains("and 99,996 more") && summaries[1].contains("and 9,996 more"),
        "{summaries:?}"
    );
    browser
        .wait_for("[data-testid=changes-more][data-total=\"100001\"]")
        .await;
    browser
        .wait_for("[data-testid=more-changes]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("[data-testid=changes][data-read=\"2000\"]")
        .await;
    // What was read is drawn, and no more.
    let drawn = browser
        .eval("return document.querySelectorAll('[data-testid=changes] ul.changes > li').length;")
        .await;
    assert_eq!(drawn.as_u64(), Some(2000), "{drawn}");
    browser.save_screenshot("run-110k-changes").await;
    browser.close().await;

    let reverted = agent
        .revert_run(pb::RevertRunRequest {
            run_id,
            to_step: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reverted.removed.len(), 110_002);
    assert_eq!(std::fs::read_dir(&workspace).unwrap().count(), 0);
}

/// A run whose workspace is a root itself forks with a copy only where its caller may work:
/// beside it is outside every root, so that is refused before anything is made, and
/// `copy_into` names a place inside one.
#[tokio::test]
async fn a_fork_copy_of_a_root_goes_where_the_caller_may_work_or_nowhere() {
    let other_root = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        extra_workspace_roots: vec![other_root.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    let root = daemon.workspace_root.path().to_owned();
    let run_id = write_a_file(&daemon.agent().await, &root).await;
    let beside = root.parent().unwrap().to_owned();
    let forks_beside = || airlock_tests::fork_copies_in(&beside);
    let before = forks_beside();
    let mut agent = daemon.agent().await;
    let refused = agent
        .fork_run(pb::ForkRunRequest {
            run_id: run_id.clone(),
            copy_workspace: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(refused.message().contains("copy_into"), "{refused:?}");
    assert_eq!(forks_beside(), before, "nothing was made beside the root");

    let inside = agent
        .fork_run(pb::ForkRunRequest {
            run_id: run_id.clone(),
            copy_workspace: true,
            copy_into: root.join("sub").to_str().unwrap().into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        inside.code(),
        tonic::Code::InvalidArgument,
        "inside the workspace it copies"
    );

    let forked = agent
        .fork_run(pb::ForkRunRequest {
            run_id,
            copy_workspace: true,
            copy_into: other_root.path().to_str().unwrap().into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let copy = std::path::PathBuf::from(&forked.workspace);
    assert_eq!(copy.parent(), Some(other_root.path()));
    assert_eq!(std::fs::read(copy.join("out.txt")).unwrap(), b"x\n");
}

/// A tenant with its own roots forks with a copy (its copy was once checked before it
/// existed, and always refused), and never into another tenant's.
#[tokio::test]
async fn a_tenant_with_its_own_roots_forks_with_a_copy_inside_them() {
    use super::auth::{BOB, TwoTenants};
    let tenants = TwoTenants::start().await;
    let bobs = tenants.workspace("bob").join("project");
    std::fs::create_dir(&bobs).unwrap();
    let mut agent = tenants.agent(BOB).await;
    let run_id = write_a_file(&agent, &bobs).await;
    let alices = tenants.workspace("alice");
    let refused = agent
        .fork_run(pb::ForkRunRequest {
            run_id: run_id.clone(),
            copy_workspace: true,
            copy_into: alices.to_str().unwrap().into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert_eq!(
        std::fs::read_dir(&alices).unwrap().count(),
        1,
        "only alice's notes"
    );

    let forked = agent
        .fork_run(pb::ForkRunRequest {
            run_id,
            copy_workspace: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let copy = std::path::PathBuf::from(&forked.workspace);
    assert_eq!(copy.parent(), bobs.parent());
    assert_eq!(std::fs::read(copy.join("out.txt")).unwrap(), b"x\n");
}

/// Runs `write_file` once in `workspace` (no approval asked) and returns the run's id.
async fn write_a_file(
    agent: &pb::agent_client::AgentClient<airlock_tests::AuthedChannel>,
    workspace: &std::path::Path,
) -> String {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        {"final": "done"}
    ]});
    let mut start = scripted_run(workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Auto as i32;
    let mut run = RunStream::open(agent.clone(), pb::run_request::Request::Start(start))
        .await
        .unwrap();
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    run.run_id().to_owned()
}

//! The process engine's seccomp allow-list, from inside real sandboxes: the hostile program
//! (tests/process/hostile.py) issues a corpus of system calls and reports the errno each got,
//! and real toolchains (Python, Node.js, git, a C compiler, make) run under the shipped
//! `toolchains` profile, so that a list too narrow for real programs fails here rather than
//! in a user's build.
//!
//! The filter denies by default with ENOSYS (what a kernel without the call answers, so that
//! callers probe and fall back), refuses long-known dangerous calls with EPERM, and kills the
//! process for a foreign architecture's call or an x32 number. The corpus's arguments make the
//! kernel itself answer otherwise wherever it can (see `seccomp_corpus` in hostile.py), so an
//! expected errno is the filter's and not the kernel's. The tests need what process_sandbox.rs
//! needs: root, user namespaces, Landlock and seccomp.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use airlock_proto::v1::ToolStatus;
use airlock_tests::{DaemonOptions, TestDaemon, repo_root};
use serde_json::{Value, json};

use super::process_sandbox::{hostile, profile, report, start};

/// Refused with EPERM under every profile: changing the file system view or the namespaces,
/// the keyring, large attack surfaces, other processes, the kernel and the machine.
const EPERM_CALLS: &str = "\
    mount umount2 pivot_root chroot fsopen fsconfig fsmount fspick move_mount open_tree \
    mount_setattr unshare setns keyctl add_key request_key bpf userfaultfd \
    perf_event_open io_uring_setup io_uring_enter io_uring_register ptrace \
    process_vm_readv process_vm_writev kcmp pidfd_getfd kexec_load kexec_file_load \
    init_module finit_module delete_module open_by_handle_at reboot swapon swapoff acct \
    syslog settimeofday clock_settime clone_newns clone_newcgroup clone_newuts \
    clone_newipc clone_newuser clone_newpid clone_newnet socket_af_vsock ioctl_tiocsti";

/// IP sockets: refused with EPERM under `network = "none"`; a profile with an allow-list
/// needs them, since its tool reaches the egress proxy over TCP.
const INET_SOCKETS: &str = "socket_af_inet socket_af_inet6";

/// Not on the allow-list, so ENOSYS: newer calls that libraries probe for and fall back from
/// (clone3 to clone, whose flags the filter can read), and a number no kernel has.
const ENOSYS_CALLS: &str = "\
    listmount statmount cachestat lsm_get_self_attr lsm_set_self_attr lsm_list_modules \
    clone3 syscall_1000";

/// On the allow-list: they succeed.
const ALLOWED_CALLS: &str = "getpid socket_af_unix";

/// What each corpus call must get: its errno, 0 for success.
fn expected(network_allowed: bool) -> BTreeMap<String, i32> {
    let inet = if network_allowed { 0 } else { libc::EPERM };
    let groups = [
        (EPERM_CALLS, libc::EPERM),
        (INET_SOCKETS, inet),
        (ENOSYS_CALLS, libc::ENOSYS),
        (ALLOWED_CALLS, 0),
    ];
    groups
        .iter()
        .flat_map(|(names, errno)| {
            names
                .split_whitespace()
                .map(move |name| (name.to_owned(), *errno))
        })
        .collect()
}

/// Asserts the corpus `report` ({name: errno}) against `expected`, listing every call that
/// differs (a whole-map diff of sixty entries hides the one that matters).
#[track_caller]
fn assert_corpus(report: &Value, expected: &BTreeMap<String, i32>) {
    let got: BTreeMap<String, i32> =
        serde_json::from_value(report.clone()).expect("the corpus reports errnos by name");
    let names: BTreeSet<&String> = expected.keys().chain(got.keys()).collect();
    let wrong: Vec<String> = names
        .into_iter()
        .filter(|name| expected.get(*name) != got.get(*name))
        .map(|name| {
            format!(
                "{name}: expected {}, got {}",
                describe(expected.get(name)),
                describe(got.get(name))
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "the filter answered these calls wrongly:\n{}",
        wrong.join("\n")
    );
}

fn describe(errno: Option<&i32>) -> String {
    match errno {
        None => "nothing (not in the corpus)".to_owned(),
        Some(0) => "success".to_owned(),
        Some(errno) => std::io::Error::from_raw_os_error(*errno).to_string(),
    }
}

#[tokio::test]
async fn the_allow_list_refuses_the_corpus() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let corpus = report(
        &fixture
            .exec("hostile", json!({"attack": "syscall_corpus"}), None)
            .await,
    );
    assert_corpus(&corpus, &expected(false));
}

#[tokio::test]
async fn a_network_allow_list_adds_ip_sockets_and_nothing_else() {
    // The test profile with an allow-list in place of `network = "none"`, as
    // sandbox-profiles/process-network.toml has. Nothing is contacted: creating a socket is
    // all the corpus does with it.
    let online = profile(&[], &[], &[]).replace(
        "network = \"none\"",
        "network = { allow = [\"example.com:443\"] }",
    );
    assert!(
        online.contains("allow = "),
        "the network line moved: {online}"
    );
    let (name, manifest) = hostile("online", "online");
    let manifest = manifest.replace("risk = \"read_only\"", "risk = \"network\"");
    let fixture = start(&[(name, manifest)], &[("online", online)]).await;
    let corpus = report(
        &fixture
            .exec("online", json!({"attack": "syscall_corpus"}), None)
            .await,
    );
    assert_corpus(&corpus, &expected(true));
}

/// Each probe runs in a child of the tool, so the report survives the kill. Only x86_64 has
/// both a 32-bit entry point (`int 0x80`) and x32 numbers.
#[cfg(target_arch = "x86_64")]
#[tokio::test]
async fn foreign_architecture_and_x32_calls_kill_the_process() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let kills = report(
        &fixture
            .exec("hostile", json!({"attack": "syscall_kills"}), None)
            .await,
    );
    let killed = json!({"signal": libc::SIGSYS});
    assert_eq!(
        kills,
        json!({"x32": killed, "i386": killed}),
        "each probe must die of SIGSYS; {{\"exit\": N}} means the call was answered instead \
         (N its errno, 0 if it ran). A host without IA32 emulation answers `int 0x80` with \
         SIGSEGV"
    );
}

/// Where the `toolchains` profile's PATH looks.
const TOOLCHAIN_PATH: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];

/// Fails the test, naming `program`, if the sandbox's PATH cannot find it on this host.
fn require(program: &str) {
    assert!(
        TOOLCHAIN_PATH
            .iter()
            .any(|dir| Path::new(dir).join(program).is_file()),
        "{program} is missing from {TOOLCHAIN_PATH:?}: the toolchains test needs python3, node, \
         git, cc and make (scripts/test.sh installs them: AIRLOCK_APT_PACKAGES in \
         scripts/common.sh)"
    );
}

/// Threads, a subprocess, a temporary file and an event loop (whose self-pipe is a unix
/// socket pair).
const PYTHON_PROBE: &str = r#"import asyncio, json, subprocess, sys, tempfile, threading

squares = []
lock = threading.Lock()

def square(n):
    with lock:
        squares.append(n * n)

threads = [threading.Thread(target=square, args=(n,)) for n in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
with tempfile.NamedTemporaryFile("w+") as temp:
    temp.write("kept in /tmp")
    temp.flush()
    temp.seek(0)
    kept = temp.read()

async def later():
    await asyncio.sleep(0.01)
    return "awaited"

print(json.dumps({"squares": sorted(squares), "child": child.stdout.strip(), "temp": kept, "loop": asyncio.run(later())}))
"#;

/// A timer, a child process, synchronous and asynchronous file I/O (libuv's thread pool, or
/// io_uring where libuv finds it) and a worker thread.
const NODE_PROBE: &str = r#"const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { Worker } = require("node:worker_threads");

async function main() {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "probe-")), "note.txt");
  fs.writeFileSync(file, "written by node");
  const child = execFileSync("/bin/sh", ["-c", "echo from a child"], { encoding: "utf8" }).trim();
  await new Promise((resolve) => setTimeout(resolve, 10));
  const again = await fs.promises.readFile(file, "utf8");
  const worker = await new Promise((resolve, reject) => {
    const thread = new Worker("require('node:worker_threads').parentPort.postMessage(6 * 7)", { eval: true });
    thread.once("message", resolve);
    thread.once("error", reject);
  });
  console.log(JSON.stringify({ read: fs.readFileSync(file, "utf8"), again, child, worker }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
"#;

/// fork, wait and stdio: a C program's everyday calls.
const HELLO_C: &str = r#"#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    pid_t child = fork();
    if (child == 0)
        _exit(3);
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 1;
    printf("hello from C; the child exited with %d\n", WEXITSTATUS(status));
    return 0;
}
"#;

const SUM_C: &str = r#"#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    printf("%ld\n", strtol(argv[1], NULL, 10) + strtol(argv[2], NULL, 10));
    return 0;
}
"#;

/// Compiles and links in separate steps, run in parallel (make's jobserver).
const MAKEFILE: &str = ".PHONY: check\ncheck: sum\n\t./sum 2 3\nsum: sum.o\n\t$(CC) -o $@ sum.o\nsum.o: sum.c\n\t$(CC) -c -o $@ sum.c\n";

/// Runs `command` through the first-party `run_command` in `workdir` of `workspace` and
/// returns its output (stdout and stderr merged), failing the test unless it succeeded.
async fn run(daemon: &TestDaemon, workspace: &Path, workdir: &str, command: &str) -> String {
    let ran = daemon
        .exec(
            "run_command",
            json!({"command": command, "workdir": workdir}),
            Some(workspace),
        )
        .await;
    assert_eq!(
        ran.status(),
        ToolStatus::Ok,
        "`{command}` failed under the allow-list: {:#?}",
        ran.result()
    );
    ran.result().content.clone()
}

/// The one JSON line a probe printed.
#[track_caller]
fn json_output(output: &str) -> Value {
    serde_json::from_str(output.trim())
        .unwrap_or_else(|err| panic!("not one JSON line ({err}): {output}"))
}

/// The shipped `run_command` tool under the shipped `toolchains` profile: what a coding
/// agent's commands really run as.
#[tokio::test]
async fn real_programs_run_under_the_allow_list() {
    for program in ["python3", "node", "git", "cc", "make"] {
        require(program);
    }
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins/run_command")],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let ws = daemon.workspace("programs");
    for (path, content) in [
        ("probe.py", PYTHON_PROBE),
        ("probe.js", NODE_PROBE),
        ("hello.c", HELLO_C),
        ("build/sum.c", SUM_C),
        ("build/Makefile", MAKEFILE),
        ("repo/README", "a repository made in the sandbox\n"),
    ] {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create a directory");
        std::fs::write(path, content).expect("write a workspace file");
    }

    let python = run(&daemon, &ws, ".", "python3 probe.py").await;
    assert_eq!(
        json_output(&python),
        json!({"squares": [0, 1, 4, 9], "child": "42", "temp": "kept in /tmp", "loop": "awaited"})
    );

    let node = run(&daemon, &ws, ".", "node probe.js").await;
    assert_eq!(
        json_output(&node),
        json!({"read": "written by node", "again": "written by node", "child": "from a child", "worker": 42})
    );

    let git = run(
        &daemon,
        &ws,
        "repo",
        "git -c init.defaultBranch=main init -q && git add README \
         && git -c user.email=a@b -c user.name=a commit -q -m 'first commit' \
         && git status --short --branch && git log --format=%s",
    )
    .await;
    assert_eq!(git, "## main\nfirst commit\n");

    let c = run(
        &daemon,
        &ws,
        ".",
        "cc -Wall -Werror -o hello hello.c && ./hello",
    )
    .await;
    assert_eq!(c, "hello from C; the child exited with 3\n");

    let make = run(&daemon, &ws, "build", "make -s -j2").await;
    assert_eq!(make, "5\n");
}

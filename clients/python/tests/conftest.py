"""Real daemons for the tests: airlockd as the Rust build made it (``$AIRLOCKD``, else
``target/debug/airlockd`` of this checkout), each on a free loopback port or a Unix socket of
its own, with a fresh state dir and workspace, stopped with SIGTERM at the end of the session
(and checked to have stopped cleanly)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
AIRLOCKD = pathlib.Path(
    os.environ.get("AIRLOCKD")
    or pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "debug" / "airlockd"
)
# A daemon writes its token file as it starts; a debug build on a busy 2-core machine takes
# a few seconds to compile its tools first.
START_TIMEOUT_S = 60.0


@dataclasses.dataclass
class Daemon:
    endpoint: str
    token: str
    workspace: pathlib.Path
    state: pathlib.Path
    process: subprocess.Popen[bytes]
    log: pathlib.Path
    args: list[str]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        return self.process.returncode

    def kill(self) -> None:
        """Kills the daemon as a crash would (SIGKILL), leaving its state as it is."""
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Starts the daemon again on the same address, state and workspace, and waits until
        it serves (the log's earlier lines say it served before)."""
        served_before = self.log_text().count("airlockd serving")
        self.process = _spawn(self.args, self.log, append=True)
        _wait_serving(self, served_before)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _spawn(args: list[str], log: pathlib.Path, append: bool = False) -> subprocess.Popen[bytes]:
    if not AIRLOCKD.is_file():
        pytest.fail(f"{AIRLOCKD} is missing: build it with `cargo build --bins` first")
    with open(log, "ab" if append else "wb") as out:
        return subprocess.Popen([str(AIRLOCKD), *args], cwd=REPO, stdout=out, stderr=out)


def _wait_serving(daemon: Daemon, served_before: int = 0) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if daemon.process.poll() is not None:
            pytest.fail(f"airlockd exited with {daemon.process.returncode}:\n{daemon.log_text()}")
        if daemon.log_text().count("airlockd serving") > served_before:
            return
        time.sleep(0.05)
    pytest.fail(f"airlockd did not start serving in {START_TIMEOUT_S} s:\n{daemon.log_text()}")


def start_daemon(root: pathlib.Path, name: str, listen: str | None = None, extra: tuple[str, ...] = ()) -> Daemon:
    """A daemon under ``root/name``: its state dir, its workspace ``project`` (the only
    workspace root it allows) and its log."""
    base = root / name
    workspace = base / "root" / "project"
    workspace.mkdir(parents=True)
    state = base / "state"
    if listen is None:
        listen = f"127.0.0.1:{free_port()}"
    args = [
        "--listen",
        listen,
        "--state-dir",
        str(state),
        "--workspace-root",
        str(workspace.parent),
        *extra,
    ]
    log = base / "airlockd.log"
    daemon = Daemon(
        endpoint=listen if listen.startswith("unix:") else f"http://{listen}",
        token="",
        workspace=workspace,
        state=state,
        process=_spawn(args, log),
        log=log,
        args=args,
    )
    _wait_serving(daemon)
    daemon.token = (state / "token").read_text().strip()
    return daemon


@pytest.fixture(scope="session")
def scratch() -> Iterator[pathlib.Path]:
    with tempfile.TemporaryDirectory(prefix="airlock-client-") as tmp:
        yield pathlib.Path(tmp)


# A tool whose output is longer than it may show: `seq 1 30000` (168,894 bytes) cut to 4 KiB,
# head and tail, the whole kept for paging.
COUNT_TOOL = """
name = "count"
version = "0.1.0"
description = "Counts from 1 to 30000, one number a line."
risk = "read_only"
engine = "process"
command = ["/usr/bin/seq", "1", "30000"]
abi = "argv"
profile = "process-readonly"
input_schema = { type = "object" }

[output]
max_bytes = 4096
truncate = "head_tail"
"""


@pytest.fixture(scope="session")
def daemon(scratch: pathlib.Path) -> Iterator[Daemon]:
    """The daemon most tests share, on TCP, with the shipped tools and `count`."""
    tools = scratch / "tools"
    (tools / "count").mkdir(parents=True)
    (tools / "count" / "tool.toml").write_text(COUNT_TOOL)
    started = start_daemon(scratch, "tcp", extra=("--tools-dir", str(tools)))
    yield started
    status = started.stop()
    assert status == 0, f"airlockd exited with {status}:\n{started.log_text()}"
    assert "airlockd stopped" in started.log_text()


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, scratch: pathlib.Path) -> None:
    """No test finds a token or a server in the environment of whoever runs them."""
    for name in ("AIRLOCK_TOKEN", "AIRLOCK_SERVER", "AIRLOCK_TLS_CA", "AIRLOCK_TLS_CERT", "AIRLOCK_TLS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(scratch / "no-state-home"))

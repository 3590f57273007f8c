#!/usr/bin/env python3
"""Runs the wordstats vectors (vectors.json) through a real airlockd against built tools.

    sdk/wordstats/run-vectors.py [--state-dir DIR] TOOLS_DIR [TOOL ...]

TOOLS_DIR holds one folder per tool (each with its tool.toml and built module), as
`airlockd --tools-dir` reads it; the named tools (default: every folder) are each called
with every vector's arguments on a copy of workspace/, and their results compared with
the vector's `ok` value (as JSON, so key order and spacing do not matter), `error`
message or `status`. Uses target/debug/airlockd and airlock unless AIRLOCK_BIN_DIR names
another folder; --state-dir gives the daemon a state dir (and so a module cache) of the
caller's, else it gets a fresh one. Exits 1 when any vector fails, printing what differed.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_daemon(bin_dir: str, tools_dir: str, work: str, state: str):
    port = free_port()
    log = open(os.path.join(work, "airlockd.log"), "wb")
    daemon = subprocess.Popen(
        [os.path.join(bin_dir, "airlockd"), "--listen", f"127.0.0.1:{port}",
         "--state-dir", state, "--workspace-root", os.path.join(work, "root"),
         "--tools-dir", tools_dir, "--profiles-dir", os.path.join(REPO, "sandbox-profiles")],
        stderr=log, cwd=work)
    token = os.path.join(state, "token")
    deadline = time.monotonic() + 120
    while not os.path.exists(token) or os.path.getsize(token) == 0:
        if daemon.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"airlockd did not start; its log: {log.name}")
        time.sleep(0.1)
    return daemon, f"http://127.0.0.1:{port}", open(token).read().strip()


def main() -> int:
    args = sys.argv[1:]
    state = None
    if args[:1] == ["--state-dir"] and len(args) > 1:
        state, args = os.path.abspath(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    tools_dir = os.path.abspath(args[0])
    names = args[1:] or sorted(
        entry for entry in os.listdir(tools_dir)
        if os.path.exists(os.path.join(tools_dir, entry, "tool.toml")))
    bin_dir = os.environ.get("AIRLOCK_BIN_DIR", os.path.join(REPO, "target", "debug"))
    with open(os.path.join(HERE, "vectors.json")) as file:
        vectors = json.load(file)["vectors"]
    work = tempfile.mkdtemp(prefix="airlock-vectors-")
    workspace = os.path.join(work, "root", "workspace")
    shutil.copytree(os.path.join(HERE, "workspace"), workspace)
    daemon, server, token = start_daemon(bin_dir, tools_dir, work, state or os.path.join(work, "state"))
    env = dict(os.environ, AIRLOCK_TOKEN=token)
    failures = 0
    try:
        for name in names:
            for vector in vectors:
                started = time.monotonic()
                # The first call may wait for the daemon to compile the tool.
                while True:
                    run = subprocess.run(
                        [os.path.join(bin_dir, "airlock"), "--server", server, "tools", "exec", name,
                         "--json", "--workspace", workspace, "--args", json.dumps(vector["arguments"])],
                        capture_output=True, text=True, env=env)
                    if run.returncode != 69 or time.monotonic() - started > 300:
                        break
                    time.sleep(0.5)
                problem = judge(vector, run)
                if problem:
                    failures += 1
                    print(f"FAIL {name}: {vector['name']}: {problem}", flush=True)
                else:
                    print(f"ok   {name}: {vector['name']}", flush=True)
    finally:
        daemon.terminate()
        daemon.wait()
    if failures:
        print(f"{failures} vector(s) failed; the daemon's log: {work}/airlockd.log", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


def judge(vector: dict, run: subprocess.CompletedProcess):
    """What is wrong with the call's result, or None."""
    try:
        result = json.loads(run.stdout)
    except json.JSONDecodeError:
        return f"airlock exited {run.returncode}: {run.stderr.strip() or run.stdout.strip()}"
    status = result.get("status")
    if "ok" in vector:
        if status != "OK":
            return f"status {status}: {result.get('error_message')}"
        try:
            content = json.loads(result["content"])
        except json.JSONDecodeError as err:
            return f"the result is not JSON ({err}): {result['content']!r}"
        if content != vector["ok"]:
            return f"got {json.dumps(content, sort_keys=True)}, want {json.dumps(vector['ok'], sort_keys=True)}"
    elif "error" in vector:
        if status != "TOOL_ERROR" or result.get("error_message") != vector["error"]:
            return f"got {status} {result.get('error_message')!r}, want TOOL_ERROR {vector['error']!r}"
    elif status != vector["status"]:
        return f"got {status} {result.get('error_message')!r}, want {vector['status']}"
    return None


if __name__ == "__main__":
    sys.exit(main())

"""The README's example runs as a person would run it: a script, a daemon, answers typed on
standard input."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from .conftest import Daemon
from .test_runs import write_script

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "approve.py"


def run_example(daemon: Daemon, tmp_path: pathlib.Path, target: str, answer: str) -> str:
    script = tmp_path / f"{target}.json"
    script.write_text(write_script(target, "typed yes\n"))
    env = dict(
        os.environ,
        AIRLOCK_SERVER=daemon.endpoint,
        AIRLOCK_TOKEN=daemon.token,
        AIRLOCK_MODEL="scripted",
        AIRLOCK_SCRIPT=str(script),
    )
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(daemon.workspace), f"write {target}"],
        input=answer,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_example_approves_what_the_person_types_yes_to(daemon: Daemon, tmp_path: pathlib.Path) -> None:
    out = run_example(daemon, tmp_path, "example-yes.txt", "y\n")
    assert "write_file wants to run:" in out
    assert "+typed yes" in out
    assert out.rstrip().endswith("[written]"), out
    assert (daemon.workspace / "example-yes.txt").read_text() == "typed yes\n"


def test_the_example_denies_anything_else(daemon: Daemon, tmp_path: pathlib.Path) -> None:
    out = run_example(daemon, tmp_path, "example-no.txt", "n\n")
    assert out.rstrip().endswith("[something else happened]"), out
    assert not (daemon.workspace / "example-no.txt").exists()

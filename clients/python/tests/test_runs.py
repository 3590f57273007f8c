"""Agent runs through both clients, with the scripted model: approvals answered on the run's
stream, by an auto-approver and by DecideApproval; input, cancel, re-attach from a seq and
by itself after the daemon was killed; sessions; changes, revert, fork and cassettes."""

from __future__ import annotations

import asyncio
import json
import pathlib
import threading

import pytest

import airlock_client
from airlock.v1 import agent_pb2, approval_pb2, changes_pb2, run_event_pb2
from airlock_client import aio

from .conftest import Daemon, start_daemon


def write_script(path: str, content: str) -> str:
    """A scripted model that writes ``content`` to ``path``, then says how that went."""
    return json.dumps(
        {
            "turns": [
                {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]},
                {
                    "alternatives": [
                        {"when": {"status": "OK"}, "final": "written"},
                        {"when": {"contains": "not today"}, "final": "the approver said no"},
                        {"final": "something else happened"},
                    ]
                },
            ]
        }
    )


@pytest.fixture(scope="module")
def client(daemon: Daemon) -> airlock_client.Client:
    with airlock_client.connect(daemon.endpoint, token=daemon.token) as c:
        yield c  # type: ignore[misc]


def kind(event: run_event_pb2.RunEvent) -> str:
    return event.WhichOneof("event") or ""


def test_a_run_asks_and_is_approved_on_its_own_stream(client: airlock_client.Client, daemon: Daemon) -> None:
    target = daemon.workspace / "approved.txt"
    run = client.start_run(
        "write the file",
        workspace=daemon.workspace,
        script=write_script("approved.txt", "from python\n"),
        approval_policy="risky",
    )
    assert run.run_id.startswith("run_")
    seen = []
    with run:
        for event in run:
            seen.append(event)
            if kind(event) == "approval_requested":
                request = event.approval_requested.request
                assert request.tool == "write_file"
                assert "+from python" in request.preview.text
                assert not target.exists(), "asking wrote the file"
                run.approve(request)
    assert run.finished is not None
    assert run.finished.reason == run_event_pb2.STOP_REASON_FINAL
    assert run.finished.final_text == "written"
    assert target.read_text() == "from python\n"
    committed = [e.seq for e in seen if not e.delta]
    assert committed == list(range(1, len(committed) + 1)), "committed seqs are gap-free from 1"
    assert run.last_seq == committed[-1]
    info = client.get_run(run.run_id)
    assert info.state == agent_pb2.RUN_STATE_FINISHED
    assert info.final_text == "written"
    assert run.run_id in [r.run_id for r in client.iter_runs()]

    # What the run changed, undone; its cassette; a fork of it.
    changes = client.list_changes(run.run_id)
    paths = [c.path for step in changes.steps for c in step.change_set.changes]
    assert paths == ["approved.txt"], changes
    reverted = client.revert_run(run.run_id, 1)
    assert list(reverted.removed) == ["approved.txt"], reverted
    assert not target.exists()
    cassette = json.loads(client.get_cassette(run.run_id))
    assert cassette, "a finished scripted run has a cassette"
    fork = client.fork_run(changes_pb2.ForkRunRequest(run_id=run.run_id, at_step=1, input="again"))
    assert fork.run_id.startswith("run_") and fork.run_id != run.run_id
    with client.attach_run(fork.run_id) as forked:
        for event in forked:
            if kind(event) == "approval_requested":
                forked.deny(event.approval_requested.request, "not today")
    assert forked.finished is not None
    assert forked.finished.final_text == "the approver said no"


def test_an_auto_approver_denies_what_its_predicate_refuses(client: airlock_client.Client, daemon: Daemon) -> None:
    with client.auto_approve(lambda request: request.tool != "write_file", deny_reason="not today") as approver:
        run = client.start_run(
            "write the file", workspace=daemon.workspace, script=write_script("denied.txt", "no\n")
        )
        finished = run.wait()
    assert finished.final_text == "the approver said no", finished
    assert [(r.tool, ok) for r, ok in approver.decided] == [("write_file", False)]
    assert approver.error is None
    assert not (daemon.workspace / "denied.txt").exists()


def test_input_and_cancel_on_the_stream_and_a_late_cancel_refused(client: airlock_client.Client, daemon: Daemon) -> None:
    run = client.start_run("write the file", workspace=daemon.workspace, script=write_script("never.txt", "x\n"))
    kinds = []
    for event in run:
        kinds.append(kind(event))
        if kind(event) == "approval_requested":
            run.cancel("changed my mind")
    assert run.finished is not None
    assert run.finished.reason == run_event_pb2.STOP_REASON_CANCELLED
    assert "changed my mind" in run.finished.detail
    assert not (daemon.workspace / "never.txt").exists()
    with pytest.raises(airlock_client.FailedPreconditionError) as late:
        client.cancel_run(run.run_id)
    assert late.value.field == "run_id"
    # Attaching again replays the stored events, from any point; past the end is refused.
    replayed = client.attach_run(run.run_id, after_seq=2)
    assert [e.seq for e in replayed.committed()] == list(range(3, run.last_seq + 1))
    with pytest.raises(airlock_client.OutOfRangeError):
        client.attach_run(run.run_id, after_seq=run.last_seq + 5)


def test_input_sent_while_a_run_waits_is_read_before_its_next_model_call(
    client: airlock_client.Client, daemon: Daemon
) -> None:
    run = client.start_run("write the file", workspace=daemon.workspace, script=write_script("input.txt", "x\n"))
    kinds = []
    for event in run:
        kinds.append(kind(event))
        if kind(event) == "approval_requested":
            run.send_input("and then stop")
            run.approve(event.approval_requested.request)
    assert "user_input" in kinds, kinds
    assert kinds.index("user_input") < kinds.index("run_finished")


def test_sessions_carry_settings_to_their_runs(client: airlock_client.Client, daemon: Daemon) -> None:
    settings = agent_pb2.SessionSettings(
        model=agent_pb2.ModelConfig(model="scripted", script=write_script("session.txt", "s\n")),
        approval_policy=run_event_pb2.APPROVAL_POLICY_NEVER,
    )
    session = client.create_session(daemon.workspace, settings=settings, labels={"by": "python"})
    assert session.session_id.startswith("ses_")
    finished = client.start_run("write the file", session_id=session.session_id).wait()
    # Nobody may be asked under NEVER: the write is denied, and the model told.
    assert finished.final_text == "something else happened", finished
    again = client.get_session(session.session_id)
    assert again.runs == 1 and again.labels["by"] == "python"
    assert session.session_id in [s.session_id for s in client.iter_sessions()]
    with pytest.raises(airlock_client.NotFoundError):
        client.get_session("ses_" + "0" * 32)


def test_decide_approval_answers_what_watch_approvals_shows(client: airlock_client.Client, daemon: Daemon) -> None:
    run = client.start_run("write the file", workspace=daemon.workspace, script=write_script("watched.txt", "w\n"))
    for event in run:
        if kind(event) == "approval_requested":
            break
    watched = next(
        r for r in client.watch_approvals(run.run_id) if r.state == approval_pb2.APPROVAL_STATE_PENDING
    )
    forged = approval_pb2.ApprovalRequest()
    forged.CopyFrom(watched)
    forged.digest = "0" * 64
    with pytest.raises(airlock_client.FailedPreconditionError):
        client.decide(forged, approve=True)
    client.decide(watched, approve=True)
    assert run.wait().final_text == "written"
    with pytest.raises(airlock_client.NotFoundError):
        client.decide(watched, approve=True)
    assert (daemon.workspace / "watched.txt").read_text() == "w\n"


def test_the_asyncio_client_streams_text_and_approves(daemon: Daemon) -> None:
    async def main() -> tuple[list[str], run_event_pb2.RunFinished]:
        async with await aio.connect(daemon.endpoint, token=daemon.token) as client:
            async with client.auto_approve(lambda r: r.tool == "write_file"):
                run = await client.start_run(
                    "write the file", workspace=daemon.workspace, script=write_script("async.txt", "a\n")
                )
                pieces = [piece async for piece in run.text()]
                assert run.finished is not None
                return pieces, run.finished

    pieces, finished = asyncio.run(main())
    assert "".join(pieces).endswith("written"), pieces
    assert finished.final_text == "written"
    assert (daemon.workspace / "async.txt").read_text() == "a\n"


def test_a_run_is_followed_across_a_daemon_crash(scratch: pathlib.Path) -> None:
    crashing = start_daemon(scratch, "crash")
    try:
        with airlock_client.connect(crashing.endpoint, token=crashing.token) as client:
            run = client.start_run(
                "write the file", workspace=crashing.workspace, script=write_script("crash.txt", "c\n")
            )
            asked: list[approval_pb2.ApprovalRequest] = []
            for event in run:
                if kind(event) == "approval_requested":
                    asked.append(event.approval_requested.request)
                    # The daemon dies while the run waits; it comes back on the same state.
                    crashing.kill()
                    restart = threading.Thread(target=crashing.restart, daemon=True)
                    restart.start()
                elif kind(event) == "run_resumed":
                    # The resumed run still waits on the request asked before the crash.
                    run.approve(asked[0])
            assert len(asked) == 1
            restart.join(60)
            assert run.reattached >= 1
            assert run.finished is not None and run.finished.final_text == "written", run.finished
        assert (crashing.workspace / "crash.txt").read_text() == "c\n"
    finally:
        assert crashing.stop() == 0, crashing.log_text()

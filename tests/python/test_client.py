"""A plain grpcio client of airlockd: list the tools, run WebAssembly and process tools,
check the refusals, and drive agent runs whose approvals it answers.

Usage: test_client.py HOST:PORT WORKSPACE STATE_DIR

Every call but health carries the access token the daemon created in STATE_DIR/token.
"""

import collections
import json
import os
import queue
import sys
import threading
import time
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from airlock.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    approval_pb2,
    run_event_pb2,
    tool_pb2,
    tools_pb2,
    tools_pb2_grpc,
)

ADDRESS, WORKSPACE, STATE_DIR = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(STATE_DIR, "token")) as token_file:
    TOKEN = token_file.read().strip()
FIRST_PARTY = {"read_file", "list_dir", "grep", "write_file", "wc"}


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Sends `authorization: Bearer <token>` with every call."""

    def __init__(self, token):
        self._header = ("authorization", f"Bearer {token}")

    def _details(self, details):
        metadata = list(details.metadata or []) + [self._header]
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


def authed_channel():
    return grpc.intercept_channel(grpc.insecure_channel(ADDRESS), BearerToken(TOKEN))


def wait_until_serving(channel, deadline_s=30.0):
    health = health_pb2_grpc.HealthStub(channel)
    end = time.monotonic() + deadline_s
    while True:
        try:
            reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        if time.monotonic() > end:
            raise TimeoutError(f"airlockd at {ADDRESS} did not start serving")
        time.sleep(0.1)


class AccessTest(unittest.TestCase):
    def test_without_a_token_only_health_answers(self):
        channel = grpc.insecure_channel(ADDRESS)
        wait_until_serving(channel)
        tools = tools_pb2_grpc.ToolsStub(channel)
        with self.assertRaises(grpc.RpcError) as refused:
            tools.ListTools(tools_pb2.ListToolsRequest())
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        wrong = grpc.intercept_channel(channel, BearerToken("not-the-token"))
        with self.assertRaises(grpc.RpcError) as refused:
            tools_pb2_grpc.ToolsStub(wrong).ListTools(tools_pb2.ListToolsRequest())
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)


class ToolsServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = authed_channel()
        wait_until_serving(cls.channel)
        cls.tools = tools_pb2_grpc.ToolsStub(cls.channel)
        with open(os.path.join(WORKSPACE, "hello.txt"), "w") as f:
            f.write("hello from python\nsecond line\n")

    def execute(self, tool, arguments, workspace=WORKSPACE):
        events = list(
            self.tools.ExecuteTool(
                tools_pb2.ExecuteToolRequest(
                    tool=tool, arguments_json=json.dumps(arguments), workspace=workspace
                ),
                timeout=60,
            )
        )
        self.assertEqual(events[-1].WhichOneof("event"), "finished", events)
        return events

    def test_lists_the_first_party_tools_with_schemas_and_digests(self):
        reply = self.tools.ListTools(tools_pb2.ListToolsRequest(), timeout=10)
        by_name = {tool.name: tool for tool in reply.tools}
        self.assertTrue(FIRST_PARTY <= set(by_name), sorted(by_name))
        read_file = by_name["read_file"]
        schema = json.loads(read_file.input_schema_json)
        self.assertEqual(schema["type"], "object")
        self.assertIn("path", schema["properties"])
        self.assertEqual(len(read_file.module_digest), 64)
        self.assertEqual(read_file.engine, "wasm")
        self.assertEqual(read_file.risk, tool_pb2.RISK_READ_ONLY)
        self.assertEqual(by_name["write_file"].risk, tool_pb2.RISK_WRITE)

    def test_runs_read_file(self):
        events = self.execute("read_file", {"path": "hello.txt"})
        self.assertEqual(events[0].WhichOneof("event"), "started")
        result = events[-1].finished
        self.assertEqual(result.status, tool_pb2.TOOL_STATUS_OK, result)
        content = json.loads(result.content)
        self.assertIn("hello from python", json.dumps(content))
        self.assertEqual(result.execution_id, events[0].started.execution_id)
        self.assertEqual(result.metadata.engine, "wasm")

    def test_schema_violations_name_the_field(self):
        events = self.execute("read_file", {"path": 7})
        self.assertEqual(len(events), 1)
        result = events[0].finished
        self.assertEqual(result.status, tool_pb2.TOOL_STATUS_INVALID_ARGUMENTS)
        self.assertIn("/path", result.error_message)

    def test_unknown_tools_and_foreign_workspaces_are_refused(self):
        with self.assertRaises(grpc.RpcError) as unknown:
            self.execute("no_such_tool", {})
        self.assertEqual(unknown.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as outside:
            self.execute("read_file", {"path": "x"}, workspace="/etc")
        self.assertEqual(outside.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_runs_the_process_tools(self):
        os.makedirs(os.path.join(WORKSPACE, "pkg"), exist_ok=True)
        with open(os.path.join(WORKSPACE, "pkg", "shapes.py"), "w") as f:
            f.write("class Square:\n    def area(self) -> int:\n        return 4\n")
        found = self.execute("workspace_grep", {"pattern": "def +area"})[-1].finished
        self.assertEqual(found.status, tool_pb2.TOOL_STATUS_OK, found)
        self.assertIn("./pkg/shapes.py:2:", found.content)
        self.assertEqual(found.metadata.engine, "process")
        outline = self.execute("py_outline", {"path": "pkg/shapes.py"})[-1].finished
        self.assertEqual(outline.status, tool_pb2.TOOL_STATUS_OK, outline)
        names = [symbol["name"] for symbol in json.loads(outline.content)["symbols"]]
        self.assertIn("Square", names)
        self.assertTrue(any("area" in name for name in names), names)


class Run:
    """One `Agent.Run` stream: requests go through a queue, events come back in order."""

    def __init__(self, agent, start):
        self.requests = queue.Queue()
        self.requests.put(agent_pb2.RunRequest(start=start))
        self.events = agent.Run(iter(self.requests.get, None), timeout=120)
        self.seen = []

    def until(self, kind):
        for event in self.events:
            self.seen.append(event)
            if event.WhichOneof("event") == kind:
                return getattr(event, kind)
        raise AssertionError(f"the run ended before {kind}: {self.seen}")

    def send(self, **request):
        self.requests.put(agent_pb2.RunRequest(**request))

    def close(self):
        self.requests.put(None)


def write_script(path, content):
    """A scripted model that writes `content` to `path`, then reports how that went."""
    return json.dumps({"turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]},
        {"alternatives": [
            {"when": {"status": "OK"}, "final": "written"},
            {"when": {"contains": "not in python"}, "final": "the approver said no"},
            {"final": "something else happened"},
        ]},
    ]})


class AgentServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = authed_channel()
        wait_until_serving(cls.channel)
        cls.agent = agent_pb2_grpc.AgentStub(cls.channel)

    def start(self, script):
        return agent_pb2.StartRun(
            workspace=WORKSPACE,
            input="write the file",
            model=agent_pb2.ModelConfig(model="scripted", script=script),
            approval_policy=run_event_pb2.APPROVAL_POLICY_RISKY,
        )

    def test_drives_a_run_and_approves_its_write_on_the_run_stream(self):
        target = os.path.join(WORKSPACE, "approved.txt")
        run = Run(self.agent, self.start(write_script("approved.txt", "from python\n")))
        try:
            request = run.until("approval_requested").request
            self.assertEqual(request.tool, "write_file")
            self.assertEqual(request.risk, tool_pb2.RISK_WRITE)
            self.assertEqual(request.preview.kind, "diff", request.preview)
            self.assertIn("+from python", request.preview.text)
            self.assertFalse(os.path.exists(target), "asking wrote the file")
            run.send(decision=approval_pb2.ApprovalDecision(
                approval_id=request.approval_id,
                decision=approval_pb2.DECISION_APPROVE_ONCE,
                digest=request.digest,
            ))
            finished = run.until("run_finished")
        finally:
            run.close()
        self.assertEqual(finished.reason, run_event_pb2.STOP_REASON_FINAL, finished)
        self.assertEqual(finished.final_text, "written")
        with open(target) as f:
            self.assertEqual(f.read(), "from python\n")
        seqs = [event.seq for event in run.seen]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)), "seq is gap-free from 1")
        info = self.agent.GetRun(agent_pb2.GetRunRequest(run_id=run.seen[0].run_id), timeout=10)
        self.assertEqual(info.state, agent_pb2.RUN_STATE_FINISHED)
        self.assertEqual(info.final_text, "written")

    def test_an_approver_on_the_approvals_stream_denies_with_a_reason(self):
        decisions = queue.Queue()
        requests = self.agent.Approvals(iter(decisions.get, None), timeout=120)
        asked = queue.Queue()

        def approver():
            for request in requests:
                asked.put(request)
                decisions.put(approval_pb2.ApprovalDecision(
                    approval_id=request.approval_id,
                    decision=approval_pb2.DECISION_DENY,
                    reason="not in python",
                    digest=request.digest,
                ))
                return

        thread = threading.Thread(target=approver, daemon=True)
        thread.start()
        run = Run(self.agent, self.start(write_script("denied.txt", "no\n")))
        try:
            finished = run.until("run_finished")
        finally:
            run.close()
            decisions.put(None)
        thread.join(timeout=30)
        self.assertEqual(asked.get(timeout=1).tool, "write_file")
        self.assertEqual(finished.final_text, "the approver said no", finished)
        self.assertFalse(os.path.exists(os.path.join(WORKSPACE, "denied.txt")))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)

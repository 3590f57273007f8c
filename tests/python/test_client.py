"""A plain grpcio client of airlockd: list the tools, run read_file, check the refusals.

Usage: test_client.py HOST:PORT WORKSPACE
"""

import json
import os
import sys
import time
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from airlock.v1 import tool_pb2, tools_pb2, tools_pb2_grpc

ADDRESS, WORKSPACE = sys.argv[1], sys.argv[2]
FIRST_PARTY = {"read_file", "list_dir", "grep", "write_file", "wc"}


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


class ToolsServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = grpc.insecure_channel(ADDRESS)
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


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)

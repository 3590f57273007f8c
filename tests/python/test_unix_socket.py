"""airlockd over its Unix socket, from a stock grpcio client with its default settings.

grpc-core sends the percent-encoded socket path as the HTTP/2 :authority
(`tmp%2Fairlock.sock`), which the daemon must accept as it accepts any other. Unary,
server-streaming and bidirectional calls each cross the socket once.

Usage: test_unix_socket.py SOCKET_PATH WORKSPACE STATE_DIR
"""

import json
import os
import sys
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from airlock.v1 import agent_pb2, agent_pb2_grpc, tools_pb2, tools_pb2_grpc

SOCKET, WORKSPACE, STATE_DIR = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(STATE_DIR, "token")) as token_file:
    METADATA = [("authorization", f"Bearer {token_file.read().strip()}")]


class UnixSocketTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # No options: the authority is whatever grpc-core makes of the path.
        cls.channel = grpc.insecure_channel(f"unix:{SOCKET}")
        with open(os.path.join(WORKSPACE, "unix.txt"), "w") as f:
            f.write("over the socket\n")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def test_health_answers(self):
        reply = health_pb2_grpc.HealthStub(self.channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
        self.assertEqual(reply.status, health_pb2.HealthCheckResponse.SERVING)

    def test_a_unary_call_and_a_streamed_tool_call(self):
        tools = tools_pb2_grpc.ToolsStub(self.channel)
        names = {t.name for t in tools.ListTools(tools_pb2.ListToolsRequest(), metadata=METADATA, timeout=10).tools}
        self.assertIn("read_file", names)
        events = list(
            tools.ExecuteTool(
                tools_pb2.ExecuteToolRequest(
                    tool="read_file",
                    arguments_json=json.dumps({"path": "unix.txt"}),
                    workspace=WORKSPACE,
                ),
                metadata=METADATA,
                timeout=60,
            )
        )
        finished = events[-1].finished
        self.assertIn("over the socket", json.dumps(json.loads(finished.content)))

    def test_a_bidirectional_run(self):
        start = agent_pb2.RunRequest(
            start=agent_pb2.StartRun(
                workspace=WORKSPACE,
                input="read it",
                model=agent_pb2.ModelConfig(
                    model="scripted",
                    script=json.dumps({"turns": [{"final": "read"}]}),
                ),
            )
        )
        events = list(
            agent_pb2_grpc.AgentStub(self.channel).Run(iter([start]), metadata=METADATA, timeout=60)
        )
        self.assertEqual(events[-1].WhichOneof("event"), "run_finished")
        self.assertEqual(events[-1].run_finished.final_text, "read")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])

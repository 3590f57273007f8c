#!/usr/bin/env python3
"""An MCP server that breaks the protocol, written without any SDK so that it can: JSON-RPC
over stdio by hand, correct for `initialize` and `tools/list`, and wrong on purpose in each
tool's answer. airlock's tests check that each is bounded and leaves the daemon unharmed.

- `garbage`: answers with lines that are not JSON-RPC, then never with a result;
- `oversize`: answers with one 10 MiB line;
- `wrong_id`: answers a request id nobody asked;
- `flood`: sends 20,000 log notifications, then answers properly;
- `fine`: answers properly.
"""

import json
import sys

TOOLS = ["garbage", "oversize", "wrong_id", "flood", "fine"]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id, value):
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(value):
    return {"content": [{"type": "text", "text": value}]}


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    method = request.get("method")
    request_id = request.get("id")
    if method == "initialize":
        result(request_id, {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        })
    elif method == "tools/list":
        result(request_id, {"tools": [
            {"name": name, "description": f"misbehaves: {name}",
             "inputSchema": {"type": "object"}} for name in TOOLS
        ]})
    elif method == "tools/call":
        name = request["params"]["name"]
        if name == "garbage":
            sys.stdout.write("this is not json\n{\"jsonrpc\": \"2.0\", \"id\": \n[1, 2, 3]\n")
            sys.stdout.flush()
        elif name == "oversize":
            result(request_id, text("x" * (10 << 20)))
        elif name == "wrong_id":
            result(987654321, text("for someone else"))
        elif name == "flood":
            for index in range(20_000):
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "data": f"line {index}"}})
            result(request_id, text("flooded"))
        else:
            result(request_id, text("fine"))
    elif request_id is not None:
        result(request_id, {})

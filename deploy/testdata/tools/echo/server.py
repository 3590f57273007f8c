#!/usr/bin/env python3
"""A hosted MCP server for deploy/test.sh, with the standard library only (no SDK to
install): JSON-RPC over stdio with one tool, `echo`, which answers with its `text`. It gives
the metrics test calls of the `mcp` engine and a running instance (airlock_mcp_instances)."""

import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    method = request.get("method")
    request_id = request.get("id")
    if request_id is None:
        continue  # a notification: nothing to answer
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "echo", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{
            "name": "echo",
            "description": "Answers with its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                            "required": ["text"]},
            "annotations": {"readOnlyHint": True},
        }]}
    elif method == "tools/call":
        text = str(request["params"].get("arguments", {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": request_id, "result": result})

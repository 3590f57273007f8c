#!/usr/bin/env python3
"""Drives airlock's MCP server with the official MCP Python SDK's client, as an IDE would.

    client.py stdio AIRLOCK WORKSPACE   # `airlock mcp --workspace WORKSPACE` over stdio
    client.py http URL                  # airlockd's Streamable HTTP endpoint

AIRLOCK_TOKEN in the environment is the daemon's token (and AIRLOCK_SERVER its gRPC address,
for `airlock mcp`). Lists the tools, reads
a file with a read-only tool, then calls a write tool three times: once accepted at the
elicitation (it runs), once declined (DENIED, nothing written), and once from a client
without elicitation (it waits for an approver console, which the test runs); finally it
gives up on a slow call after a second and checks, still connected, that its process
(`sleep $SLOW_MARKER`) stopped. Prints one JSON document of what it saw.
"""

import asyncio
import json
import logging

import anyio
import os
import sys

from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def answering(action):
    async def callback(context, params):
        answering.asked.append(params.message)
        return types.ElicitResult(action=action)

    return callback


answering.asked = []


async def session(target, elicitation, body):
    if target[0] == "stdio":
        _, airlock, workspace = target
        params = StdioServerParameters(
            command=airlock, args=["mcp", "--workspace", workspace], env=dict(os.environ)
        )
        transport = stdio_client(params)
    else:
        headers = {"Authorization": "Bearer " + os.environ["AIRLOCK_TOKEN"]}
        transport = streamable_http_client(
            target[1], http_client=create_mcp_http_client(headers=headers)
        )
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, elicitation_callback=elicitation) as client:
            await client.initialize()
            return await body(client)


async def gone(marker, limit=10.0):
    """Whether the `sleep MARKER` process is gone (or goes within `limit` seconds)."""
    wanted = f"/bin/sleep\0{marker}\0".encode()
    for _ in range(int(limit / 0.05)):
        running = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    running = running or file.read() == wanted
            except OSError:
                pass
        if not running:
            return True
        await anyio.sleep(0.05)
    return False


def text(result):
    return {
        "error": bool(result.is_error),
        "text": "".join(block.text for block in result.content if block.type == "text"),
    }


async def main(target):
    seen = {}

    async def first(client):
        listed = await client.list_tools()
        seen["tools"] = {
            tool.name: tool.annotations.model_dump(exclude_none=True) if tool.annotations else {}
            for tool in listed.tools
        }
        seen["read"] = text(await client.call_tool("read_file", {"path": "README.md"}))
        seen["accepted"] = text(
            await client.call_tool("write_file", {"path": "accepted.txt", "content": "yes"})
        )

    await session(target, answering("accept"), first)

    async def declined(client):
        seen["declined"] = text(
            await client.call_tool("write_file", {"path": "declined.txt", "content": "no"})
        )

    await session(target, answering("decline"), declined)

    async def console(client):
        seen["console"] = text(
            await client.call_tool("write_file", {"path": "console.txt", "content": "ok"})
        )

    await session(target, None, console)

    async def cancelled(client):
        # Given up on after a second: the SDK sends `notifications/cancelled`, and airlock
        # must stop the tool while this client stays connected.
        with anyio.move_on_after(1.0):
            await client.call_tool("slow", {})
        seen["stopped_while_connected"] = await gone(os.environ["SLOW_MARKER"])

    await session(target, None, cancelled)
    seen["asked"] = answering.asked
    print(json.dumps(seen))


if __name__ == "__main__":
    # The SDK's warnings on stderr, where the test reads them (a refused session close is one).
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1:]))

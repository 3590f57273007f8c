#!/usr/bin/env python3
"""Drives `airlock mcp` with the official MCP Python SDK's client over stdio, as an IDE would.

    stdio_client.py AIRLOCK WORKSPACE

AIRLOCK_SERVER and AIRLOCK_TOKEN in the environment name the daemon. Lists the tools, reads
a file with a read-only tool, then calls a write tool three times: once accepted at the
elicitation (it runs), once declined (DENIED, nothing written), and once from a client
without elicitation (it waits for an approver console, which the test runs). Prints one
JSON document of what it saw.
"""

import asyncio
import json
import os
import sys

from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def answering(action):
    async def callback(context, params):
        answering.asked.append(params.message)
        return types.ElicitResult(action=action)

    return callback


answering.asked = []


async def session(airlock, workspace, elicitation, body):
    params = StdioServerParameters(
        command=airlock, args=["mcp", "--workspace", workspace], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicitation) as client:
            await client.initialize()
            return await body(client)


def text(result):
    return {
        "error": bool(result.is_error),
        "text": "".join(block.text for block in result.content if block.type == "text"),
    }


async def main(airlock, workspace):
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

    await session(airlock, workspace, answering("accept"), first)

    async def declined(client):
        seen["declined"] = text(
            await client.call_tool("write_file", {"path": "declined.txt", "content": "no"})
        )

    await session(airlock, workspace, answering("decline"), declined)

    async def console(client):
        seen["console"] = text(
            await client.call_tool("write_file", {"path": "console.txt", "content": "ok"})
        )

    await session(airlock, workspace, None, console)
    seen["asked"] = answering.asked
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

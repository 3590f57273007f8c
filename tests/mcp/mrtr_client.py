#!/usr/bin/env python3
"""Drives airlockd's Streamable HTTP endpoint with the official MCP Python SDK's client on the
2026-07-28 revision (`Client(mode="2026-07-28")`: no handshake, no session), whose risky calls
are asked about in-band: the SDK answers the input-required result's elicitation with the
callback below and retries the call itself.

    mrtr_client.py URL

AIRLOCK_TOKEN in the environment is the tenant's token. Lists the tools, then calls
`write_file` twice: accepted at the elicitation (it runs), then declined (DENIED). Prints one
JSON document of what it saw.
"""

import asyncio
import json
import logging
import os
import sys

from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

asked = []


def answering(action):
    async def callback(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=action)

    return callback


def text(result):
    return {
        "error": bool(result.is_error),
        "text": "".join(block.text for block in result.content if block.type == "text"),
    }


async def call(url, action, body):
    headers = {"Authorization": "Bearer " + os.environ["AIRLOCK_TOKEN"]}
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    async with Client(transport, mode="2026-07-28", elicitation_callback=answering(action)) as client:
        return await body(client)


async def main(url):
    seen = {}

    async def accepted(client):
        seen["version"] = client.protocol_version
        listed = await client.list_tools()
        seen["tools"] = sorted(tool.name for tool in listed.tools)
        seen["accepted"] = text(
            await client.call_tool("write_file", {"path": "accepted.txt", "content": "yes\n"})
        )

    await call(url, "accept", accepted)

    async def declined(client):
        seen["declined"] = text(
            await client.call_tool("write_file", {"path": "declined.txt", "content": "no\n"})
        )

    await call(url, "decline", declined)
    seen["asked"] = asked
    print(json.dumps(seen))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1]))

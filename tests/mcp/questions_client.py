#!/usr/bin/env python3
"""Calls a hosted server's tool that asks its user something, through airlockd's Streamable
HTTP endpoint, with the official MCP Python SDK's client on one revision, answering the
question as a person at the client would.

    questions_client.py URL MODE TOOL ARGUMENTS_JSON

MODE is `legacy` (2025-11-25: the question arrives as a request of the server's on the
call's stream) or `2026-07-28` (it arrives as an input_required result, and the SDK retries
the call with the answer). The answer accepts the form with `proceed` false, which no
default of the form says: the server's result shows whose answer it got. AIRLOCK_TOKEN in
the environment is the tenant's token. Prints one JSON document: the questions it was
asked, and the call's result.
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


async def answer(context, params):
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"proceed": False})


async def main(url, mode, tool, arguments):
    headers = {"Authorization": "Bearer " + os.environ["AIRLOCK_TOKEN"]}
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    async with Client(transport, mode=mode, elicitation_callback=answer) as client:
        result = await client.call_tool(tool, arguments)
    print(
        json.dumps(
            {
                "asked": asked,
                "error": bool(result.is_error),
                "text": "".join(block.text for block in result.content if block.type == "text"),
            }
        )
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))

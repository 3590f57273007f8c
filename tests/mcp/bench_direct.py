#!/usr/bin/env python3
"""The peer of airlock's MCP benchmark: the official Python SDK's client calling
servers/echo_server.py directly over stdio, with no sandbox and no daemon in between.

    bench_direct.py WARMUP RUNS

Prints {"latencies_ns": [...]}: one `tools/call` each, after WARMUP unmeasured ones.
"""

import asyncio
import json
import os
import sys
import time

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = os.path.dirname(os.path.abspath(__file__))


async def main(warmup, runs):
    params = StdioServerParameters(
        command=sys.executable, args=[os.path.join(HERE, "servers", "echo_server.py")]
    )
    latencies = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            for index in range(warmup + runs):
                started = time.perf_counter_ns()
                result = await client.call_tool("echo", {"text": "ping"})
                elapsed = time.perf_counter_ns() - started
                assert not result.is_error and result.content[0].text == "ping", result
                if index >= warmup:
                    latencies.append(elapsed)
    print(json.dumps({"latencies_ns": latencies}))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))

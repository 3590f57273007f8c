#!/usr/bin/env python3
"""An MCP server whose calls use measurable resources, with the official Python SDK: `work`
holds memory and burns CPU, `fetch` reaches a URL through the egress proxy its sandbox
names, `rest` does nothing. The tests read what airlock accounts each call."""

import time
import urllib.error
import urllib.request

from mcp.server.mcpserver import MCPServer

server = MCPServer("usage")


@server.tool(description="Holds `mib` MiB (every page written) while burning `ms` ms of CPU.")
def work(mib: int, ms: int) -> str:
    held = b"\x01" * (mib << 20)
    started = time.process_time()
    spins = 0
    while time.process_time() - started < ms / 1000:
        spins += 1
    size = len(held)
    del held
    return f"held {size} bytes, spun {spins} times"


@server.tool(description="Fetches `url` (through the proxy the environment names).")
def fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return f"status {answer.status}: {answer.read().decode(errors='replace')}"
    except urllib.error.HTTPError as refused:
        return f"status {refused.code}: {refused.read().decode(errors='replace')}"
    except OSError as err:
        return f"failed: {err}"


@server.tool(description="Does nothing.")
def rest() -> str:
    return "rested"


if __name__ == "__main__":
    server.run()

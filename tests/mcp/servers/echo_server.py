#!/usr/bin/env python3
"""The smallest useful MCP server, with the official Python SDK: one `echo` tool. The
benchmarks call it hosted in airlock's sandbox and directly, to measure what airlock adds;
the tests also run it as a remote server (`echo_server.py --http PORT`: Streamable HTTP on
127.0.0.1:PORT/mcp), reached through airlock's egress gate."""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool(description="Answers with its text.")
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

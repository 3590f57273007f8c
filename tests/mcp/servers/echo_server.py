#!/usr/bin/env python3
"""The smallest useful MCP server, with the official Python SDK: one `echo` tool. The
benchmarks call it hosted in airlock's sandbox and directly, to measure what airlock adds."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool(description="Answers with its text.")
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    server.run()

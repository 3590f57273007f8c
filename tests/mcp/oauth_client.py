#!/usr/bin/env python3
"""The official MCP Python SDK's OAuth client against airlock's MCP endpoint, as a machine
client deploys it: no token at first; the SDK reads the endpoint's 401 challenge, its
protected-resource metadata and the issuer's metadata, gets a token with the client
credentials grant, and then lists the tools.

    oauth_client.py URL ISSUER CLIENT_ID CLIENT_SECRET

Prints one JSON document: the tool names it was shown.
"""

import asyncio
import json
import sys

from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


async def main():
    url, issuer, client_id, secret = sys.argv[1:5]
    provider = ClientCredentialsOAuthProvider(
        server_url=url, storage=Memory(), client_id=client_id, client_secret=secret, issuer=issuer
    )
    async with create_mcp_http_client(auth=provider) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed = await session.list_tools()
    print(json.dumps({"tools": sorted(tool.name for tool in listed.tools)}))


asyncio.run(main())

#!/usr/bin/env python3
"""A remote MCP server protected by OAuth, and its authorization server, on one loopback
port: what `tests/tests/all/mcp_oauth.rs` reaches airlock's remote servers with.

    oauth_remote_server.py PORT STATE_FILE

- `POST /token`: the client credentials grant (RFC 6749 §4.4) for client `airlock` with
  secret `airlock-client-secret-5e1f` by HTTP Basic, for resource `http://127.0.0.1:PORT/mcp`;
  it issues random tokens that live `LIFETIME` seconds.
- `GET /.well-known/oauth-authorization-server`: RFC 8414 metadata naming that endpoint, for
  issuer `http://127.0.0.1:PORT`.
- `GET /.well-known/oauth-protected-resource/mcp`: RFC 9728 metadata of `/mcp`, naming that
  issuer; `…/oauth-protected-resource/mismatch` is metadata that claims another resource.
- `/mcp`: Streamable HTTP, refused with 401 and a `WWW-Authenticate` challenge unless the
  request carries a live token. Tools: `echo`, and `leak`, which answers with the last
  `Authorization` header the server saw (a server that tries to hand its token to a model).
- `POST /revoke`: forgets every issued token (the next request with one gets a 401).
- `POST /break`: from then on, `/token` answers 200 with an HTML page instead of a token.

After every request it writes STATE_FILE: the tokens it issued, how many token requests it
had, and how many 401s it sent, as JSON.
"""

import base64
import json
import secrets
import sys
import time
import urllib.parse

from mcp.server.mcpserver import MCPServer

CLIENT_ID = "airlock"
CLIENT_SECRET = "airlock-client-secret-5e1f"
LIFETIME = 3

PORT = int(sys.argv[1])
STATE_FILE = sys.argv[2]
RESOURCE = f"http://127.0.0.1:{PORT}/mcp"
ISSUER = f"http://127.0.0.1:{PORT}"

state = {"issued": [], "token_requests": 0, "unauthorized": 0, "last_authorization": ""}
broken = []
live = {}  # token -> expiry (monotonic)

server = MCPServer("oauth-echo")


@server.tool(description="Answers with its text.")
def echo(text: str) -> str:
    return text


@server.tool(description="Answers with the Authorization header the server last saw.")
def leak() -> str:
    return f"you sent me: {state['last_authorization']}"


def save():
    with open(STATE_FILE + ".tmp", "w") as f:
        json.dump(state, f)
    import os

    os.replace(STATE_FILE + ".tmp", STATE_FILE)


async def read_body(receive):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def respond(send, status, document, headers=()):
    body = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")] + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": body})


def token_error(error, description):
    return {"error": error, "error_description": description}


async def token(scope, receive, send):
    state["token_requests"] += 1
    if broken:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        return await send({"type": "http.response.body", "body": b"<html>maintenance</html>"})
    headers = dict(scope["headers"])
    form = urllib.parse.parse_qs((await read_body(receive)).decode())
    authorization = headers.get(b"authorization", b"").decode()
    if not authorization.startswith("Basic "):
        return await respond(send, 401, token_error("invalid_client", "use HTTP Basic"))
    client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
    client_id, secret = urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)
    if client_id != CLIENT_ID or secret != CLIENT_SECRET:
        return await respond(
            send,
            401,
            token_error("invalid_client", "client authentication failed"),
            [(b"www-authenticate", b'Basic realm="test"')],
        )
    if form.get("grant_type") != ["client_credentials"]:
        return await respond(send, 400, token_error("unsupported_grant_type", "client credentials only"))
    if form.get("resource") != [RESOURCE]:
        return await respond(send, 400, token_error("invalid_target", f"not a resource here: {form.get('resource')}"))
    value = secrets.token_urlsafe(24)
    live[value] = time.monotonic() + LIFETIME
    state["issued"].append(value)
    await respond(
        send,
        200,
        {"access_token": value, "token_type": "Bearer", "expires_in": LIFETIME, "scope": "tools"},
        [(b"cache-control", b"no-store")],
    )


def protect(app):
    async def guarded(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        path = scope["path"]
        try:
            if path == "/token" and scope["method"] == "POST":
                return await token(scope, receive, send)
            if path == "/.well-known/oauth-authorization-server":
                return await respond(
                    send,
                    200,
                    {
                        "issuer": ISSUER,
                        "token_endpoint": f"{ISSUER}/token",
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    },
                )
            if path == "/.well-known/oauth-protected-resource/mcp":
                return await respond(send, 200, {"resource": RESOURCE, "authorization_servers": [ISSUER]})
            if path == "/.well-known/oauth-protected-resource/mismatch":
                return await respond(
                    send, 200, {"resource": f"{ISSUER}/elsewhere", "authorization_servers": [ISSUER]}
                )
            if path == "/break" and scope["method"] == "POST":
                broken.append(True)
                return await respond(send, 200, {})
            if path == "/revoke" and scope["method"] == "POST":
                live.clear()
                return await respond(send, 200, {})
            authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
            presented = authorization[7:] if authorization.startswith("Bearer ") else ""
            if live.get(presented, 0) <= time.monotonic():
                state["unauthorized"] += 1
                return await respond(
                    send,
                    401,
                    {"error": "invalid_token"},
                    [(b"www-authenticate", b'Bearer error="invalid_token"')],
                )
            state["last_authorization"] = authorization
            return await app(scope, receive, send)
        finally:
            save()

    return guarded


if __name__ == "__main__":
    import uvicorn

    save()
    app = protect(server.streamable_http_app(host="127.0.0.1"))
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")

#!/usr/bin/env python3
"""An OAuth 2.1 authorization server on loopback, for airlock's OAuth tests: keys made here
(RSA, with `cryptography`), tokens signed with PyJWT — both installed with the MCP Python SDK.

    oauth_issuer.py RESOURCE

Prints its issuer URL on the first line of stdout, then serves until killed:

- GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
- GET  /jwks                                      the published keys
- POST /token                                     client_credentials (client_secret_basic or
       _post); client `acme-agent` / `acme-secret` gets scope `airlock:acme`, `beta-agent` /
       `beta-secret` gets `airlock:beta`; the audience is the `resource` parameter (RFC 8707)
       or RESOURCE
- POST /mint     the test's own tokens: a JSON object of claims to set (`null` removes one),
       with `_alg` ("none" for an unsigned one) and `_key` ("old" for the rotated-out key)
- POST /rotate   a new current key; the old one is no longer published
"""

import base64
import json
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

RESOURCE = sys.argv[1]
CLIENTS = {"acme-agent": ("acme-secret", "airlock:acme"), "beta-agent": ("beta-secret", "airlock:beta")}


def new_key():
    return {"kid": uuid.uuid4().hex[:12], "key": rsa.generate_private_key(public_exponent=65537, key_size=2048)}


keys = {"current": new_key(), "old": None}
issuer = ""


def jwk(entry):
    numbers = entry["key"].public_key().public_numbers()

    def b64(number):
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": entry["kid"], "n": b64(numbers.n), "e": b64(numbers.e)}


def sign(claims, key="current", alg="RS256"):
    if alg == "none":
        header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
        body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        return f"{header}.{body}."
    entry = keys[key]
    return jwt.encode(claims, entry["key"], algorithm=alg, headers={"kid": entry["kid"]})


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, document):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
            self.reply(
                200,
                {
                    "issuer": issuer,
                    # Required by RFC 8414 (and the SDK) though no flow here uses it.
                    "authorization_endpoint": issuer + "/authorize",
                    "token_endpoint": issuer + "/token",
                    "jwks_uri": issuer + "/jwks",
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                    "scopes_supported": ["airlock:acme", "airlock:beta"],
                },
            )
        elif self.path == "/jwks":
            self.reply(200, {"keys": [jwk(keys["current"])]})
        else:
            self.reply(404, {"error": "not_found"})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0") or "0"))
        if self.path == "/token":
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            client_id, secret = form.get("client_id"), form.get("client_secret")
            basic = self.headers.get("Authorization", "")
            if basic.startswith("Basic "):
                client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            known = CLIENTS.get(client_id or "")
            if form.get("grant_type") != "client_credentials":
                return self.reply(400, {"error": "unsupported_grant_type"})
            if known is None or known[0] != secret:
                return self.reply(401, {"error": "invalid_client"})
            now = int(time.time())
            claims = {
                "iss": issuer,
                "sub": client_id,
                "aud": form.get("resource") or RESOURCE,
                "iat": now,
                "exp": now + 300,
                "scope": known[1],
                "client_id": client_id,
            }
            return self.reply(
                200, {"access_token": sign(claims), "token_type": "Bearer", "expires_in": 300, "scope": known[1]}
            )
        if self.path == "/mint":
            wanted = json.loads(raw or b"{}")
            now = int(time.time())
            claims = {"iss": issuer, "sub": "minted", "aud": RESOURCE, "iat": now, "exp": now + 300, "scope": "airlock:acme"}
            for name, value in wanted.items():
                if name.startswith("_"):
                    continue
                if value is None:
                    claims.pop(name, None)
                else:
                    claims[name] = value
            token = sign(claims, key=wanted.get("_key", "current"), alg=wanted.get("_alg", "RS256"))
            return self.reply(200, {"token": token})
        if self.path == "/rotate":
            keys["old"], keys["current"] = keys["current"], new_key()
            return self.reply(200, {"kid": keys["current"]["kid"]})
        self.reply(404, {"error": "not_found"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
issuer = f"http://127.0.0.1:{server.server_address[1]}"
print(issuer, flush=True)
server.serve_forever()

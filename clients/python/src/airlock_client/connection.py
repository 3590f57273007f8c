"""Where the daemon is and how to prove who this client is: the address, TLS, and the token.

The same rules as the ``airlock`` CLI (``client/src/client/auth.rs``): a token given wins,
else ``$AIRLOCK_TOKEN``, else the token file of a daemon on this host with the default state
dir (``$XDG_STATE_HOME/airlock/token``, else ``~/.local/state/airlock/token``). Addresses are
``http://host:port``, ``https://host:port``, ``unix:/path``, or a bare ``host:port``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import pathlib
import re

import grpc
import grpc.aio

from .errors import AirlockError

__all__ = ["DEFAULT_ENDPOINT", "TOKEN_ENV", "Endpoint", "Token", "discover_token"]

#: Where airlockd listens unless configured otherwise.
DEFAULT_ENDPOINT = "http://127.0.0.1:7411"
#: The environment variable a token is read from.
TOKEN_ENV = "AIRLOCK_TOKEN"

# A PEM file (a CA bundle, a chain, a key) or a token is a few kilobytes; a bound keeps a
# mistyped path (a log, a device) from being read whole.
_MAX_FILE_BYTES = 1024 * 1024
# The largest message the daemon sends (a page of kept output, a blob, a long run's trace:
# `MAX_ENCODING_MESSAGE_BYTES` in daemon/src/api/limits.rs). A larger reply is refused from its
# length prefix, before it is read, so a hostile server cannot make this client hold more.
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
# The largest message the daemon reads (`MAX_DECODING_MESSAGE_BYTES`): a larger request would
# be refused there anyway.
MAX_SEND_BYTES = 4 * 1024 * 1024
# What a file name a person types looks like: no spaces, and a dot in its last part (`ca.pem`,
# `/etc/airlock/client.key`). Base64 key material has no dot.
_FILE_NAME = re.compile(r"[\w./~+-]*\.[\w-]+")
# A token is printable ASCII without spaces (a header value the daemon compares whole).
_TOKEN = re.compile(r"^[\x21-\x7e]+$")


@dataclasses.dataclass(frozen=True)
class Token:
    """The token sent with every call, and where it came from (for error messages). Its
    value is never part of its repr: a traceback with locals, a log of ``%r`` or a debugger
    shows where it came from, not what it is."""

    value: str | None = dataclasses.field(repr=False)
    source: str


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A parsed daemon address."""

    url: str
    target: str
    tls: bool

    @classmethod
    def parse(cls, raw: str) -> Endpoint:
        raw = raw.strip()
        if raw.startswith("unix:"):
            if not raw[len("unix:") :].lstrip("/"):
                raise AirlockError(f"invalid server address {raw!r}: unix: needs a socket path")
            return cls(url=raw, target=raw, tls=False)
        scheme, sep, rest = raw.partition("://")
        if not sep:
            scheme, rest = "http", raw
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise AirlockError(
                f"invalid server address {raw!r}: unsupported scheme {scheme!r}; airlockd "
                "speaks http://, https:// and unix:"
            )
        host = rest.rstrip("/")
        if not host or "/" in host or "@" in host or any(c.isspace() for c in host):
            raise AirlockError(f"invalid server address {raw!r}: expected host:port")
        return cls(url=f"{scheme}://{host}", target=host, tls=scheme == "https")


    def is_local(self) -> bool:
        """Whether the daemon is on this host: a Unix socket or a loopback address."""
        if self.target.startswith("unix:"):
            return True
        host = self.target
        if host.startswith("["):
            host = host[1 : host.find("]")] if "]" in host else host
        else:
            host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        if host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def default_state_dir() -> pathlib.Path:
    """The daemon's default state dir, by the daemon's own rule."""
    state = os.environ.get("XDG_STATE_HOME")
    if state:
        return pathlib.Path(state) / "airlock"
    home = os.environ.get("HOME")
    if home:
        return pathlib.Path(home) / ".local" / "state" / "airlock"
    return pathlib.Path(".airlock")


def discover_token(given: str | None = None, endpoint: Endpoint | None = None) -> Token:
    """The token to send: ``given``, else ``$AIRLOCK_TOKEN``, else the default state dir's
    token file; none when there is none anywhere (the daemon then answers UNAUTHENTICATED and
    the error says where this client looked).

    The token file is the local daemon's: it is sent only to a daemon on this host (a Unix
    socket or a loopback address), never to ``endpoint`` elsewhere, where a mistyped or
    hostile address would receive it."""
    if given is not None and given.strip():
        return _checked(Token(given.strip(), "given"))
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return _checked(Token(env, f"${TOKEN_ENV}"))
    path = default_state_dir() / "token"
    if endpoint is not None and not endpoint.is_local():
        return Token(
            None,
            f"none: the token file {path} is only sent to a daemon on this host, not to "
            f"{endpoint.url}; pass token=... or set ${TOKEN_ENV}",
        )
    try:
        text = _read_small(path, "token file")
    except FileNotFoundError:
        return Token(None, f"none: no token given, no ${TOKEN_ENV}, no {path}")
    token = text.decode("utf-8", "replace").strip()
    if not token:
        return Token(None, f"none: {path} is empty")
    return _checked(Token(token, str(path)))


def _checked(token: Token) -> Token:
    if token.value is not None and not _TOKEN.match(token.value):
        raise AirlockError(f"the token ({token.source}) is not printable ASCII without spaces")
    return token


def _read_small(path: pathlib.Path, what: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > _MAX_FILE_BYTES:
            raise AirlockError(f"cannot read the {what} {path}: larger than {_MAX_FILE_BYTES} bytes")
        return path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise AirlockError(f"cannot read the {what} {path}: {err.strerror or err}") from err


def read_pem(value: str | os.PathLike[str] | bytes, what: str) -> bytes:
    """A PEM document: given inline (text with a ``-----BEGIN`` line), else read from the file
    it names (at most 1 MiB). Key material passed where a path was expected is never echoed,
    in the message or in a chained exception: the value is named only when it is a
    ``PathLike`` or looks like a file name (no spaces, an extension)."""
    if isinstance(value, bytes):
        return value
    text = os.fspath(value)
    if "-----BEGIN" in text:
        return text.encode()
    looks_like_a_path = isinstance(value, os.PathLike) or (
        len(text) < 256 and _FILE_NAME.fullmatch(text) is not None
    )
    shown = text if looks_like_a_path else "(the value given, which is neither PEM text nor a file name)"
    try:
        size = os.stat(text).st_size
        if size > _MAX_FILE_BYTES:
            raise AirlockError(f"cannot read the {what} {shown}: larger than {_MAX_FILE_BYTES} bytes")
        with open(text, "rb") as file:
            return file.read()
    except FileNotFoundError:
        pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise AirlockError(f"cannot read the {what} {shown}: {reason}") from None
    raise AirlockError(f"cannot read the {what} {shown}: no such file") from None


def open_channel(
    endpoint: Endpoint,
    *,
    ca_cert: str | os.PathLike[str] | bytes | None,
    client_cert: str | os.PathLike[str] | bytes | None,
    client_key: str | os.PathLike[str] | bytes | None,
) -> grpc.aio.Channel:
    """An asyncio channel to the daemon: plaintext, TLS (the daemon's certificate must chain
    to ``ca_cert``, or to the system's roots when none is given), mutual TLS, or the Unix
    socket."""
    options = [
        ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
        ("grpc.max_send_message_length", MAX_SEND_BYTES),
        # A connection that went silent (a host gone, a freezing middlebox) is found within a
        # minute while a call is open, rather than never: an HTTP/2 PING every 30 s, 20 s to
        # answer. The daemon allows pings this often.
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.http2.max_pings_without_data", 0),
        # After a drop, try again within a fraction of a second, and never wait more than 2 s
        # between tries: grpc's defaults (1 s, growing to 120 s) would leave a run handle or an
        # auto-approver failing fast long after the daemon is back.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2_000),
        # A client that retries by itself would repeat a decision or an input; this one
        # reports the failure and lets its caller decide.
        ("grpc.enable_retries", 0),
    ]
    if (client_cert is None) != (client_key is None):
        raise AirlockError("a client certificate goes with its key: give both client_cert and client_key")
    if endpoint.is_local():
        # A daemon on this host is reached directly, never through $http_proxy: the local
        # daemon's token goes only to it.
        options.append(("grpc.enable_http_proxy", 0))
    if not endpoint.tls:
        if ca_cert is not None or client_cert is not None:
            raise AirlockError(
                f"TLS files were given for {endpoint.url}, which is not https://: use "
                "https://host:port for a daemon that serves TLS"
            )
        return grpc.aio.insecure_channel(endpoint.target, options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read_pem(ca_cert, "CA") if ca_cert is not None else None,
        private_key=read_pem(client_key, "client key") if client_key is not None else None,
        certificate_chain=read_pem(client_cert, "client certificate")
        if client_cert is not None
        else None,
    )
    return grpc.aio.secure_channel(endpoint.target, credentials, options=options)

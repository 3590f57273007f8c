"""Addresses and tokens, without a daemon: what each address means, and which token goes
where."""

from __future__ import annotations

import pathlib

import pytest

from airlock_client.connection import Endpoint, discover_token
from airlock_client.errors import AirlockError


@pytest.mark.parametrize(
    ("raw", "url", "target", "tls", "local"),
    [
        (" 127.0.0.1:7411 ", "http://127.0.0.1:7411", "127.0.0.1:7411", False, True),
        ("HTTPS://[::1]:7411/", "https://[::1]:7411", "[::1]:7411", True, True),
        ("localhost:1", "http://localhost:1", "localhost:1", False, True),
        ("unix:/run/airlock.sock", "unix:/run/airlock.sock", "unix:/run/airlock.sock", False, True),
        ("https://airlock.example.com:7411", "https://airlock.example.com:7411", "airlock.example.com:7411", True, False),
        ("10.0.0.8:7411", "http://10.0.0.8:7411", "10.0.0.8:7411", False, False),
        ("127.0.0.1.example.com:1", "http://127.0.0.1.example.com:1", "127.0.0.1.example.com:1", False, False),
    ],
)
def test_addresses(raw: str, url: str, target: str, tls: bool, local: bool) -> None:
    endpoint = Endpoint.parse(raw)
    assert (endpoint.url, endpoint.target, endpoint.tls, endpoint.is_local()) == (url, target, tls, local)


@pytest.mark.parametrize("raw", ["ftp://h:1", "http://exa mple:1", "http://h:1/path", "unix:", "http://"])
def test_addresses_refused(raw: str) -> None:
    with pytest.raises(AirlockError, match="invalid server address"):
        Endpoint.parse(raw)


def test_the_local_daemons_token_file_goes_only_to_a_local_daemon(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    (tmp_path / "airlock").mkdir()
    (tmp_path / "airlock" / "token").write_text("local-secret\n")
    assert discover_token(None, Endpoint.parse("127.0.0.1:7411")).value == "local-secret"
    assert discover_token(None, Endpoint.parse("unix:/run/a.sock")).value == "local-secret"
    remote = discover_token(None, Endpoint.parse("https://airlock.example.com:7411"))
    assert remote.value is None
    assert "only sent to a daemon on this host" in remote.source
    assert "local-secret" not in remote.source
    # A token given, or in the environment, is the caller's choice for any daemon.
    assert discover_token("given", Endpoint.parse("https://airlock.example.com:7411")).value == "given"
    monkeypatch.setenv("AIRLOCK_TOKEN", "from-env")
    assert discover_token(None, Endpoint.parse("https://airlock.example.com:7411")).value == "from-env"

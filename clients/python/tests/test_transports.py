"""The transports a daemon serves: its Unix socket, TLS, and mutual TLS with certificates
made here by the openssl command, each driven through both clients."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

import airlock_client
from airlock.v1 import tool_pb2
from airlock_client import aio

from .conftest import Daemon, free_port, start_daemon


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certificates(directory: pathlib.Path) -> dict[str, pathlib.Path]:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    directory.mkdir()
    files = {name: directory / name for name in ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key")}
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=airlock test CA", "-keyout", str(files["ca.key"]), "-out", str(files["ca.pem"]))
    for who, extension in (
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"),
        ("client", "extendedKeyUsage=clientAuth"),
    ):
        csr = directory / f"{who}.csr"
        ext = directory / f"{who}.ext"
        ext.write_text(extension + "\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN=airlock {who}",
                "-keyout", str(files[f"{who}.key"]), "-out", str(csr))
        openssl("x509", "-req", "-in", str(csr), "-CA", str(files["ca.pem"]), "-CAkey", str(files["ca.key"]),
                "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(files[f"{who}.pem"]))
    return files


@pytest.fixture(scope="module")
def certificates(scratch: pathlib.Path) -> dict[str, pathlib.Path]:
    return make_certificates(scratch / "certificates")


@pytest.fixture(scope="module")
def mtls(scratch: pathlib.Path, certificates: dict[str, pathlib.Path]) -> Iterator[Daemon]:
    port = free_port()
    started = start_daemon(
        scratch,
        "mtls",
        listen=f"127.0.0.1:{port}",
        extra=(
            "--tls-cert", str(certificates["server.pem"]),
            "--tls-key", str(certificates["server.key"]),
            "--tls-client-ca", str(certificates["ca.pem"]),
        ),
    )
    started.endpoint = f"https://127.0.0.1:{port}"
    yield started
    assert started.stop() == 0, started.log_text()


def test_the_unix_socket(scratch: pathlib.Path) -> None:
    socket_path = scratch / "airlockd.sock"
    daemon = start_daemon(scratch, "unix", listen=f"unix:{socket_path}")
    try:
        (daemon.workspace / "u.txt").write_text("over the socket\n")
        with airlock_client.connect(f"unix:{socket_path}", token=daemon.token) as client:
            result = client.run_tool("read_file", {"path": "u.txt"}, workspace=daemon.workspace)
            assert result.status == tool_pb2.TOOL_STATUS_OK
            assert "over the socket" in result.content

        async def over_asyncio() -> str:
            async with await aio.connect(f"unix:{socket_path}", token=daemon.token) as client:
                return (await client.run_tool("read_file", {"path": "u.txt"}, workspace=daemon.workspace)).content

        assert "over the socket" in asyncio.run(over_asyncio())
    finally:
        assert daemon.stop() == 0, daemon.log_text()


def test_mutual_tls(mtls: Daemon, certificates: dict[str, pathlib.Path]) -> None:
    with airlock_client.connect(
        mtls.endpoint,
        token=mtls.token,
        ca_cert=certificates["ca.pem"],
        client_cert=certificates["client.pem"],
        client_key=certificates["client.key"],
    ) as client:
        assert client.info.tenant == "default"
        assert any(tool.name == "read_file" for tool in client.list_tools())


def test_tls_refusals_are_clear(mtls: Daemon, certificates: dict[str, pathlib.Path], scratch: pathlib.Path) -> None:
    # No client certificate: the daemon ends the handshake.
    with pytest.raises(airlock_client.UnreachableError) as no_identity:
        airlock_client.connect(mtls.endpoint, token=mtls.token, ca_cert=certificates["ca.pem"], timeout=3)
    assert str(no_identity.value).startswith(f"TLS with airlockd at {mtls.endpoint} failed")
    assert "client_cert" in str(no_identity.value)
    # Plaintext to a daemon that serves TLS.
    with pytest.raises(airlock_client.UnreachableError) as plaintext:
        airlock_client.connect(mtls.endpoint.replace("https://", "http://"), token=mtls.token, timeout=3)
    assert "https://" in str(plaintext.value)
    # A CA that did not sign the daemon's certificate: this client ends it.
    other = make_certificates(scratch / "other-ca")
    with pytest.raises(airlock_client.UnreachableError, match="CERTIFICATE_VERIFY_FAILED"):
        airlock_client.connect(
            mtls.endpoint,
            token=mtls.token,
            ca_cert=other["ca.pem"],
            client_cert=certificates["client.pem"],
            client_key=certificates["client.key"],
            timeout=3,
        )
    # Half an identity, and TLS files for a plaintext address, are refused before connecting.
    with pytest.raises(airlock_client.AirlockError, match="goes with its key"):
        airlock_client.connect(mtls.endpoint, token="t", ca_cert=certificates["ca.pem"], client_cert=certificates["client.pem"])
    with pytest.raises(airlock_client.AirlockError, match="not https://"):
        airlock_client.connect("http://127.0.0.1:1", token="t", ca_cert=certificates["ca.pem"])
    with pytest.raises(airlock_client.AirlockError, match="cannot read the CA"):
        airlock_client.connect(mtls.endpoint, token="t", ca_cert=scratch / "missing.pem")

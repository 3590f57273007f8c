// How the client reaches a daemon: a Unix socket, TLS with the operator's CA, and mutual
// TLS — each against a real airlockd serving that way, with certificates made by openssl —
// and the clear errors when the certificates do not fit.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CredentialsError, ToolStatus, TlsError, UnreachableError, connect } from "../src/index.js";
import { type Certificates, makeCertificates } from "./certs.js";
import { type Daemon, startDaemon } from "./daemon.js";

describe("transports", { timeout: 60_000 }, () => {
  let dir: string;
  let certs: Certificates;
  let unix: Daemon;
  let tls: Daemon;
  let mtls: Daemon;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "airlock-ts-certs-"));
    certs = makeCertificates(dir);
    [unix, tls, mtls] = await Promise.all([
      startDaemon({ unix: true }),
      startDaemon({ tlsCert: certs.serverCert, tlsKey: certs.serverKey }),
      startDaemon({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.ca }),
    ]);
  });

  after(async () => {
    await Promise.all([unix?.dispose(), tls?.dispose(), mtls?.dispose()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("speaks gRPC on a Unix socket", async () => {
    assert.match(unix.endpoint, /^unix:\//);
    const client = await connect(unix.endpoint, { token: unix.token });
    try {
      assert.equal(client.endpoint, unix.endpoint);
      assert.equal(client.info?.tenant, "default");
      writeFileSync(join(unix.workspace, "sock.txt"), "over the socket\n");
      const execution = await client.execute("read_file", { path: "sock.txt" }, { workspace: unix.workspace });
      const result = await execution.result();
      assert.equal(result.status, ToolStatus.OK);
      assert.match(result.content, /over the socket/);
    } finally {
      client.close();
    }
    await assert.rejects(connect(`unix:${join(dir, "nothing.sock")}`, { token: "t" }), (error: unknown) => {
      assert.ok(error instanceof UnreachableError, String(error));
      assert.match(error.message, /no such socket/);
      return true;
    });
  });

  it("speaks TLS with the operator's CA, for the address by IP and by name", async () => {
    for (const endpoint of [tls.endpoint, `https://localhost:${tls.port}`]) {
      const client = await connect(endpoint, { token: tls.token, caCert: certs.ca });
      try {
        assert.ok((await client.listTools()).some((tool) => tool.name === "read_file"), endpoint);
      } finally {
        client.close();
      }
    }
  });

  it("refuses a daemon certificate of another CA, and says so", async () => {
    await assert.rejects(connect(tls.endpoint, { token: tls.token, caCert: certs.otherCa }), (error: unknown) => {
      assert.ok(error instanceof TlsError, String(error));
      assert.match(error.message, /the daemon's certificate is not valid for this client/);
      return true;
    });
  });

  it("says a TLS daemon addressed as plaintext serves TLS", async () => {
    await assert.rejects(connect(`http://127.0.0.1:${tls.port}`, { token: tls.token }), (error: unknown) => {
      assert.ok(error instanceof TlsError, String(error));
      assert.match(error.message, /serves TLS: address it as https:\/\//);
      return true;
    });
  });

  it("shows the client certificate to a daemon that requires one (mutual TLS)", async () => {
    const client = await connect(mtls.endpoint, {
      token: mtls.token,
      caCert: certs.ca,
      clientCert: certs.clientCert,
      clientKey: certs.clientKey,
    });
    try {
      assert.equal(client.info?.tenant, "default");
      const execution = await client.execute("list_dir", { path: "." }, { workspace: mtls.workspace });
      assert.equal((await execution.result()).status, ToolStatus.OK);
    } finally {
      client.close();
    }
  });

  it("without a client certificate, mutual TLS is refused with a clear error", async () => {
    await assert.rejects(connect(mtls.endpoint, { token: mtls.token, caCert: certs.ca }), (error: unknown) => {
      assert.ok(error instanceof TlsError, String(error));
      assert.match(error.message, /the daemon requires a client certificate: give the `clientCert` and `clientKey` options/);
      return true;
    });
  });

  it("a client certificate the daemon's CA did not sign is refused with a clear error", async () => {
    const otherDir = mkdtempSync(join(tmpdir(), "airlock-ts-other-"));
    try {
      const other = makeCertificates(otherDir);
      await assert.rejects(
        connect(mtls.endpoint, { token: mtls.token, caCert: certs.ca, clientCert: other.clientCert, clientKey: other.clientKey }),
        (error: unknown) => {
          assert.ok(error instanceof TlsError, String(error));
          assert.match(error.message, /does not accept this client's certificate/);
          return true;
        },
      );
    } finally {
      rmSync(otherDir, { recursive: true, force: true });
    }
  });

  it("half a client identity, or an unreadable file, is a CredentialsError before connecting", async () => {
    await assert.rejects(
      connect(mtls.endpoint, { token: mtls.token, caCert: certs.ca, clientCert: certs.clientCert }),
      (error: unknown) => error instanceof CredentialsError && /give both `clientCert` and `clientKey`/.test(error.message),
    );
    await assert.rejects(
      connect(mtls.endpoint, { token: mtls.token, caCert: join(dir, "missing.pem") }),
      (error: unknown) => error instanceof CredentialsError && error.message.includes("missing.pem"),
    );
  });

  it("https:// to a plaintext daemon says it does not speak TLS", async () => {
    const plain = await startDaemon();
    try {
      await assert.rejects(connect(`https://127.0.0.1:${plain.port}`, { token: plain.token, caCert: certs.ca }), (error: unknown) => {
        assert.ok(error instanceof TlsError, String(error));
        assert.match(error.message, /does not speak TLS/);
        return true;
      });
    } finally {
      await plain.dispose();
    }
  });
});

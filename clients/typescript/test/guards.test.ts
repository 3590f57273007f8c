// What the client guards against: the local daemon's token file sent to an address elsewhere,
// key material echoed in an error, a server that is not airlockd (oversized messages, bytes
// that do not decode, a stream that just ends, a decision that fails to arrive, another run's
// request), and a connection that goes silent for good.
// The fake server records what the client sent; a real airlockd behind a freezing proxy
// stands for a daemon whose host vanished.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  ApprovalDecisionSchema,
  ApprovalPolicy,
  ApprovalRequestSchema,
  ApprovalState,
  ConnectionLostError,
  CredentialsError,
  DaemonInfoSchema,
  InternalError,
  MAX_MESSAGE_BYTES,
  ResourceExhaustedError,
  StreamClosedError,
  UnauthenticatedError,
  connect,
  discoverToken,
  isLocalEndpoint,
  parseEndpoint,
} from "../src/index.js";
import { readPem } from "../src/endpoint.js";
import { startDaemon, within } from "./daemon.js";
import { type FakeDaemon, envelope, fakeDaemon, refuse, reply, tcpProxy } from "./fake.js";

const UNAUTHENTICATED = 16;

/** An IPv4 address of this host that is not loopback, when it has one. */
function outsideAddress(): string | undefined {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  return undefined;
}

describe("the local daemon's token file goes only to a daemon on this host", () => {
  const names = ["AIRLOCK_TOKEN", "XDG_STATE_HOME"] as const;
  const saved = names.map((name) => [name, process.env[name]] as const);
  let home: string;
  let fake: FakeDaemon;

  before(async () => {
    home = mkdtempSync(join(tmpdir(), "airlock-ts-guard-"));
    mkdirSync(join(home, "airlock"));
    writeFileSync(join(home, "airlock", "token"), "file-secret\n");
    delete process.env["AIRLOCK_TOKEN"];
    process.env["XDG_STATE_HOME"] = home;
    // Every call refused, as a daemon refuses a token it does not know: what matters is
    // what the client sent.
    fake = await fakeDaemon((stream) => refuse(stream, UNAUTHENTICATED, "the access token is not valid for this daemon"));
  });

  after(async () => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it("tells a daemon on this host from one elsewhere", () => {
    for (const local of [
      "unix:/run/airlock.sock",
      "http://127.0.0.1:7411",
      "127.8.0.1:1",
      "https://[::1]:7411",
      "http://LOCALHOST:7411",
      "localhost",
      "http://127.1:7411", // the URL's host, normalised: 127.0.0.1, where the connection goes
    ]) {
      assert.equal(isLocalEndpoint(parseEndpoint(local)), true, local);
    }
    for (const remote of [
      "https://airlock.example.com:7411",
      "http://10.0.0.8:7411",
      "http://127.0.0.1.example.com:1",
      "http://[::2]:7411",
      "http://localhost.example:7411",
      "http://[::ffff:127.0.0.1]:7411",
      "http://0.0.0.0:7411",
    ]) {
      assert.equal(isLocalEndpoint(parseEndpoint(remote)), false, remote);
    }
  });

  it("discoverToken withholds the file from a remote endpoint, never what is given or in the environment", () => {
    const remote = parseEndpoint("http://airlock.example.com:7411");
    const path = join(home, "airlock", "token");
    assert.deepEqual(discoverToken(undefined, process.env, parseEndpoint("unix:/run/a.sock")), {
      token: "file-secret",
      source: { kind: "file", path },
    });
    assert.deepEqual(discoverToken(undefined, process.env, remote), {
      token: undefined,
      source: { kind: "withheld", path, endpoint: "http://airlock.example.com:7411" },
    });
    assert.equal(discoverToken("given", process.env, remote).token, "given");
    assert.equal(discoverToken(undefined, { ...process.env, AIRLOCK_TOKEN: "from-env" }, remote).token, "from-env");
  });

  it("sends the file's token to a loopback address", async () => {
    const before = fake.calls.length;
    await assert.rejects(connect(`http://127.0.0.1:${fake.port}`), UnauthenticatedError);
    assert.equal(fake.calls[before]?.headers["authorization"], "Bearer file-secret");
  });

  it("does not send it to an address elsewhere, and says why", async (t) => {
    const address = outsideAddress();
    if (!address) return t.skip("this host has no address but loopback");
    const endpoint = `http://${address}:${fake.port}`;
    const before = fake.calls.length;
    await assert.rejects(connect(endpoint), (error: unknown) => {
      assert.ok(error instanceof UnauthenticatedError, String(error));
      assert.equal(error.tokenSource.kind, "withheld");
      assert.match(error.message, /is the local daemon's, sent only to a daemon on this host/);
      assert.ok(!error.message.includes("file-secret"));
      return true;
    });
    assert.equal(fake.calls.length, before + 1, "the call reached the server");
    assert.equal(fake.calls[before]?.headers["authorization"], undefined, "no token went elsewhere");
    // A token given, or in AIRLOCK_TOKEN, is the caller's choice: it goes wherever it is told.
    await assert.rejects(connect(endpoint, { token: "given-token" }), UnauthenticatedError);
    assert.equal(fake.calls[before + 1]?.headers["authorization"], "Bearer given-token");
    process.env["AIRLOCK_TOKEN"] = "env-token";
    try {
      await assert.rejects(connect(endpoint), UnauthenticatedError);
      assert.equal(fake.calls[before + 2]?.headers["authorization"], "Bearer env-token");
    } finally {
      delete process.env["AIRLOCK_TOKEN"];
    }
  });
});

describe("key material never ends up in an error", () => {
  const secret = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgTOPSECRETKEYMATERIAL";

  it("takes a PEM with text before its BEGIN line (openssl pkcs12's Bag Attributes) as a PEM", () => {
    const pem = `Bag Attributes\n    localKeyID: 01\n-----BEGIN PRIVATE KEY-----\n${secret}\n-----END PRIVATE KEY-----\n`;
    assert.equal(readPem(pem, "client key"), pem);
  });

  it("names a missing file, but not a value that cannot be a path", () => {
    assert.throws(() => readPem("/nonexistent/client.key", "client key"), (error: unknown) => {
      assert.ok(error instanceof CredentialsError);
      assert.equal(error.message, 'cannot read the client key "/nonexistent/client.key": no such file');
      return true;
    });
    assert.throws(() => readPem("/nonexistent/My Keys/client.key", "client key"), /"\/nonexistent\/My Keys\/client.key": no such file/);
    for (const pasted of [`${secret}\n${secret}\n`, secret, `  ${secret}`]) {
      assert.throws(() => readPem(pasted, "client key"), (error: unknown) => {
        assert.ok(error instanceof CredentialsError);
        assert.ok(!error.message.includes("TOPSECRET"), error.message);
        assert.ok(!String((error as Error).cause ?? "").includes("TOPSECRET"));
        assert.match(error.message, /does not look like a path, and is not shown/);
        return true;
      });
    }
  });

  it("connect() with a key pasted without its BEGIN line fails without showing it", async () => {
    await assert.rejects(
      connect("https://127.0.0.1:1", {
        token: "t",
        clientCert: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        clientKey: `${secret}\n`,
      }),
      (error: unknown) => {
        assert.ok(error instanceof CredentialsError, String(error));
        assert.match(error.message, /^cannot read the client key \(the value given does not look like a path, and is not shown/);
        assert.ok(!error.message.includes("TOPSECRET"));
        return true;
      },
    );
  });
});

describe("a server that pages in a circle", () => {
  it("is refused with the token it repeated, not followed forever", async () => {
    const { ListRunsResponseSchema, RunInfoSchema } = await import("../src/gen/airlock/v1/agent_pb.js");
    const page = toBinary(
      ListRunsResponseSchema,
      create(ListRunsResponseSchema, {
        runs: [create(RunInfoSchema, { runId: `run_${"1".repeat(32)}` })],
        nextPageToken: "again",
      }),
    );
    const circle = await fakeDaemon((stream, path) => {
      if (path.endsWith("/GetInfo")) return reply(stream, [toBinary(DaemonInfoSchema, create(DaemonInfoSchema, { version: "fake" }))]);
      if (path.endsWith("/ListRuns")) return reply(stream, [page]);
      return refuse(stream, 12, "not here");
    }, "127.0.0.1");
    const client = await connect(`http://127.0.0.1:${circle.port}`, { token: "t" });
    try {
      const listed: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const run of client.allRuns()) listed.push(run.runId);
        })(),
        (error: unknown) => {
          assert.ok(error instanceof InternalError, String(error));
          assert.match(error.message, /page token "again" again/);
          return true;
        },
      );
      assert.equal(listed.length, 2, "the first page, and the one the token named");
    } finally {
      client.close();
      await circle.close();
    }
  });
});

describe("a server that is not airlockd", () => {
  let fake: FakeDaemon;
  const info = (version: string) => toBinary(DaemonInfoSchema, create(DaemonInfoSchema, { version, tenant: "default" }));

  before(async () => {
    fake = await fakeDaemon((stream, path) => {
      if (path.endsWith("/GetInfo")) return reply(stream, [info("fake")]);
      if (path.endsWith("/ListTools")) {
        // A length prefix of 64 MiB and a trickle of bytes: refused from the prefix.
        stream.respond({ ":status": 200, "content-type": "application/grpc" });
        stream.write(envelope(new Uint8Array(100), 64 * 1024 * 1024));
        return;
      }
      if (path.endsWith("/ListRuns")) return reply(stream, [new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])]);
      if (path.endsWith("/Approvals")) return reply(stream, []);
      return refuse(stream, 12, "not here");
    }, "127.0.0.1");
  });

  after(async () => {
    await fake?.close();
  });

  it("refuses a message over airlockd's own bound from its length prefix, and says so", async () => {
    const client = await connect(`http://127.0.0.1:${fake.port}`, { token: "t" });
    try {
      const started = Date.now();
      await assert.rejects(client.listTools(), (error: unknown) => {
        assert.ok(error instanceof ResourceExhaustedError, String(error));
        assert.equal(error.retryable, false, "asking again gets the same message");
        assert.match(error.message, new RegExp(`sent a message of ${64 * 1024 * 1024} bytes over this client's limit of ${MAX_MESSAGE_BYTES} bytes`));
        return true;
      });
      assert.ok(Date.now() - started < 5000, "refused at once, not after reading it");
    } finally {
      client.close();
    }
  });

  it("reads a message over 4 MiB and under airlockd's 16 MiB", async () => {
    const big = await fakeDaemon((stream) => reply(stream, [info("v".repeat(6 * 1024 * 1024))]), "127.0.0.1");
    try {
      const client = await connect(`http://127.0.0.1:${big.port}`, { token: "t" });
      assert.equal(client.info?.version.length, 6 * 1024 * 1024);
      client.close();
    } finally {
      await big.close();
    }
  });

  it("a reply that does not decode is an InternalError naming the server", async () => {
    const client = await connect(`http://127.0.0.1:${fake.port}`, { token: "t" });
    try {
      await assert.rejects(client.listRuns(), (error: unknown) => {
        assert.ok(error instanceof InternalError, String(error));
        assert.equal(error.retryable, false);
        assert.match(error.message, /sent a reply this client cannot read \(parse binary: /);
        return true;
      });
    } finally {
      client.close();
    }
  });

  it("an approver console whose stream ended refuses a decision instead of dropping it", async () => {
    const client = await connect(`http://127.0.0.1:${fake.port}`, { token: "t" });
    try {
      const console = await client.approvals();
      assert.equal(await console.next(), undefined);
      assert.throws(
        () => console.decide({ approvalId: "apr_1", digest: "d" } as never, { approve: true }),
        StreamClosedError,
      );
    } finally {
      client.close();
    }
  });
});

describe("autoApprove against a daemon that stumbles", () => {
  it("answers a request again after a decision that failed to arrive, and never another run's", async () => {
    const request = (approvalId: string, runId: string) =>
      toBinary(
        ApprovalRequestSchema,
        create(ApprovalRequestSchema, { approvalId, runId, digest: `digest-of-${approvalId}`, tool: "write_file", state: ApprovalState.PENDING }),
      );
    const decided: string[] = [];
    let decides = 0;
    const fake = await fakeDaemon((stream, path) => {
      if (path.endsWith("/GetInfo")) return reply(stream, [toBinary(DaemonInfoSchema, create(DaemonInfoSchema, { version: "fake" }))]);
      if (path.endsWith("/WatchApprovals")) {
        // Pending: this run's request, and one of another run (which the daemon should have
        // filtered out); the stream stays open, as the daemon's does.
        stream.respond({ ":status": 200, "content-type": "application/grpc" });
        stream.write(envelope(request("apr_mine", "run_mine")));
        stream.write(envelope(request("apr_theirs", "run_theirs")));
        return;
      }
      if (path.endsWith("/DecideApproval")) {
        const chunks: Buffer[] = [];
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        stream.once("end", () => {
          decides++;
          // The first decision is lost to a daemon that cannot answer now.
          if (decides === 1) return refuse(stream, 14, "the store is busy");
          const decision = fromBinary(ApprovalDecisionSchema, Buffer.concat(chunks).subarray(5));
          decided.push(`${decision.approvalId}:${decision.digest}`);
          reply(stream, [new Uint8Array(0)]);
        });
        return;
      }
      refuse(stream, 12, "not here");
    }, "127.0.0.1");
    try {
      const client = await connect(`http://127.0.0.1:${fake.port}`, { token: "t" });
      const controller = new AbortController();
      const approving = client.autoApprove(() => true, {
        runId: "run_mine",
        signal: controller.signal,
        onDecision: () => setTimeout(() => controller.abort(), 300),
      });
      const summary = await within(10_000, "autoApprove", approving);
      client.close();
      assert.deepEqual(decided, ["apr_mine:digest-of-apr_mine"], "decided once it could be, bound to its digest");
      assert.deepEqual(summary.approved.map((r) => r.approvalId), ["apr_mine"]);
      assert.equal(decides, 2);
    } finally {
      await fake.close();
    }
  });
});

describe("a connection that goes silent", { timeout: 60_000 }, () => {
  it("is found dead by keepalive: the run's stream fails instead of waiting forever", async () => {
    const daemon = await startDaemon();
    const proxy = await tcpProxy(daemon.port);
    try {
      const client = await connect(`http://127.0.0.1:${proxy.port}`, { token: daemon.token, keepaliveMs: 500 });
      try {
        const slow = JSON.stringify({ turns: [{ final: "too late", delay_ms: 20_000 }] });
        const run = await client.startRun({
          workspace: daemon.workspace,
          input: "wait",
          model: { model: "scripted", script: slow },
          approvalPolicy: ApprovalPolicy.AUTO,
          reattach: false,
        });
        proxy.freeze();
        await within(10_000, "the silent connection to be found dead", assert.rejects(run.wait(), ConnectionLostError));
      } finally {
        client.close();
      }
    } finally {
      await proxy.close();
      await daemon.dispose();
    }
  });
});

// The Tools, Daemon and Policy services and the client's errors, against a real airlockd:
// listing, running tools directly, cut output read back whole, cancelling, refusals mapped to
// their error classes with the field at fault, and where the token comes from.

import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  type AirlockClient,
  ApprovalPolicy,
  CanceledError,
  CredentialsError,
  Daemon as DaemonService,
  InvalidArgumentError,
  InvalidEndpointError,
  NotFoundError,
  OutOfRangeError,
  PolicyDecision,
  Risk,
  ToolStatus,
  UnauthenticatedError,
  UnimplementedError,
  UnreachableError,
  connect,
  discoverToken,
} from "../src/index.js";
import { type Daemon, freePort, startDaemon, within } from "./daemon.js";

describe("tools, daemon and errors", { timeout: 60_000 }, () => {
  let daemon: Daemon;
  let client: AirlockClient;

  before(async () => {
    daemon = await startDaemon();
    client = await connect(daemon.endpoint, { token: daemon.token });
    writeFileSync(join(daemon.workspace, "hello.txt"), "hello from ts\nsecond line\n");
  });

  after(async () => {
    client?.close();
    await daemon?.dispose();
  });

  it("checks the daemon at connect time and tells its tenant and roots", () => {
    assert.ok(client.info, "connect asked GetInfo");
    assert.equal(client.info.tenant, "default");
    assert.deepEqual(client.info.workspaceRoots, [daemon.root]);
    assert.ok(client.info.limits && client.info.limits.maxArgumentsBytes > 0n);
    assert.deepEqual(client.tokenSource, { kind: "given" });
  });

  it("takes a bare host:port to mean http://", async () => {
    const bare = await connect(`127.0.0.1:${daemon.port}`, { token: daemon.token });
    try {
      assert.equal(bare.endpoint, `http://127.0.0.1:${daemon.port}`);
      assert.equal((await bare.getInfo()).version, client.info?.version);
    } finally {
      bare.close();
    }
  });

  it("lists the first-party tools with their risk", async () => {
    const tools = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ["read_file", "list_dir", "grep", "write_file"]) assert.ok(byName.has(name), name);
    assert.equal(byName.get("write_file")?.risk, Risk.WRITE);
    assert.equal(byName.get("read_file")?.risk, Risk.READ_ONLY);
    const schema = JSON.parse(byName.get("read_file")?.inputSchemaJson ?? "{}") as { properties?: object };
    assert.ok(schema.properties && "path" in schema.properties);
    assert.equal((await client.getTool("write_file")).risk, Risk.WRITE);
  });

  it("getTool of a tool the daemon does not serve is NotFoundError on field tool", async () => {
    await assert.rejects(client.getTool("no_such_tool"), (error: unknown) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.field, "tool");
      return true;
    });
  });

  it("runs read_file on a file of the workspace, events in order", async () => {
    const chunks: Uint8Array[] = [];
    const execution = await client.execute("read_file", { path: "hello.txt" }, { workspace: daemon.workspace });
    execution.onOutput((chunk) => chunks.push(chunk.data));
    const kinds: string[] = [];
    for await (const event of execution) kinds.push(event.case);
    assert.equal(kinds[0], "started");
    assert.equal(kinds[kinds.length - 1], "finished");
    const result = await execution.result();
    assert.equal(result.status, ToolStatus.OK, result.errorMessage);
    const content = JSON.parse(result.content) as { content: string };
    assert.equal(content.content, "hello from ts\nsecond line\n");
    assert.ok(execution.executionId?.startsWith("exe_"));
    assert.equal(result.executionId, execution.executionId);
    assert.equal(result.metadata?.engine, "wasm");
    // The output events carried what the tool wrote: the result's JSON, as it wrote it.
    assert.equal(kinds.filter((k) => k === "output").length, chunks.length);
    assert.ok(Buffer.concat(chunks).toString().includes("hello from ts"));
  });

  it("a schema violation is a result with INVALID_ARGUMENTS, not an error", async () => {
    const execution = await client.execute("read_file", { path: 7 }, { workspace: daemon.workspace });
    const events = [];
    for await (const event of execution) events.push(event);
    assert.equal(events.length, 1, "only `finished`: nothing ran");
    const result = await execution.result();
    assert.equal(result.status, ToolStatus.INVALID_ARGUMENTS);
    assert.match(result.errorMessage, /\/path/);
  });

  it("an unknown tool is NotFoundError naming field tool", async () => {
    await assert.rejects(client.execute("no_such_tool", {}, { workspace: daemon.workspace }), (error: unknown) => {
      assert.ok(error instanceof NotFoundError, String(error));
      assert.equal(error.field, "tool");
      assert.equal(error.codeName, "NOT_FOUND");
      assert.equal(error.retryable, false);
      assert.equal(error.method, "airlock.v1.Tools/ExecuteTool");
      return true;
    });
  });

  it("a workspace outside the roots is InvalidArgumentError naming field workspace", async () => {
    await assert.rejects(client.execute("read_file", { path: "passwd" }, { workspace: "/etc" }), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.field, "workspace");
      assert.match(error.message, /^workspace: /);
      return true;
    });
  });

  it("reads a cut result's whole output back, page by page", async () => {
    const chunks: Uint8Array[] = [];
    const execution = await client.execute(
      "run_command",
      { command: "seq 1 30000", workdir: "." },
      { workspace: daemon.workspace, onOutput: (chunk) => chunks.push(chunk.data) },
    );
    const result = await execution.result();
    assert.equal(result.status, ToolStatus.OK, result.errorMessage);
    assert.equal(result.truncated, true);
    const whole = await client.readAllOutput(result.executionId, { pageBytes: 40_000 });
    assert.equal(BigInt(whole.length), result.originalBytes);
    const expected = Array.from({ length: 30000 }, (_, i) => `${i + 1}\n`).join("");
    assert.equal(Buffer.from(whole).toString(), expected);
    assert.ok(chunks.length > 0, "the output streamed while the command ran");
    const page = await client.readOutput(result.executionId, { offset: result.headBytes, length: 10 });
    assert.equal(Buffer.from(page.data).toString(), expected.slice(Number(result.headBytes), Number(result.headBytes) + 10));
    await assert.rejects(client.readOutput(result.executionId, { offset: 10_000_000 }), (error: unknown) => {
      assert.ok(error instanceof OutOfRangeError, String(error));
      assert.equal(error.field, "offset");
      return true;
    });
  });

  it("cancels a running call: its result is CANCELLED", async () => {
    const execution = await client.execute("run_command", { command: "sleep 30", workdir: "." }, { workspace: daemon.workspace });
    assert.ok(execution.executionId);
    const started = Date.now();
    await execution.cancel();
    const result = await within(15_000, "the cancelled call's result", execution.result());
    assert.equal(result.status, ToolStatus.CANCELLED);
    assert.ok(Date.now() - started < 15_000);
    await assert.rejects(client.cancelExecution("exe_00000000000000000000000000000000"), NotFoundError);
    await assert.rejects(client.cancelExecution("bogus"), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError);
      assert.equal(error.field, "execution_id");
      return true;
    });
  });

  it("a call that requires approval waits for it, and a denial finishes it DENIED", async () => {
    const execution = await client.execute(
      "write_file",
      { path: "asked.txt", content: "x" },
      { workspace: daemon.workspace, requireApproval: true },
    );
    const kinds: string[] = [];
    for await (const event of execution) {
      kinds.push(event.case);
      if (event.case === "approval") {
        assert.equal(event.value.tool, "write_file");
        await client.decideApproval(event.value, { approve: false, reason: "not now" });
      }
    }
    assert.equal(kinds[0], "approval");
    const result = await execution.result();
    assert.equal(result.status, ToolStatus.DENIED);
    assert.match(result.errorMessage, /not now/);
  });

  it("an aborted call is CanceledError", async () => {
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(client.listTools({ signal: controller.signal }), CanceledError);
  });

  it("checks the policy and lists its rules", async () => {
    const verdict = await client.checkPolicy(
      "write_file",
      { path: "a.txt", content: "b" },
      { workspace: daemon.workspace, approvalPolicy: ApprovalPolicy.RISKY },
    );
    assert.equal(verdict.decision, PolicyDecision.ASK);
    const read = await client.checkPolicy("read_file", { path: "a.txt" }, { workspace: daemon.workspace });
    assert.equal(read.decision, PolicyDecision.ALLOW);
    assert.deepEqual(await client.listPolicyRules(), []);
    await assert.rejects(client.checkPolicy("no_such_tool", {}), (error: unknown) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.field, "tool");
      assert.match(error.message, /no_such_tool/);
      return true;
    });
    await assert.rejects(client.checkPolicy("", {}), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError);
      assert.equal(error.field, "tool");
      return true;
    });
  });

  it("collects garbage as the operator, and names the field it needs", async () => {
    const collected = await client.collectGarbage(86_400_000);
    assert.equal(collected.olderThanMs, 86_400_000n);
    assert.equal(collected.runs, 0n);
    await assert.rejects(client.collectGarbage(0), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError);
      assert.equal(error.field, "older_than_ms");
      return true;
    });
  });

  it("an RPC the daemon does not serve is UnimplementedError naming it", async () => {
    const newer = { ...DaemonService.method.getInfo, name: "GetInfoV9" };
    await assert.rejects(client.unary(newer, {}), (error: unknown) => {
      assert.ok(error instanceof UnimplementedError, String(error));
      assert.match(error.message, /does not serve airlock\.v1\.Daemon\/GetInfoV9 — it is older than this client/);
      return true;
    });
  });

  it("a wrong token is UnauthenticatedError saying where the token came from", async () => {
    await assert.rejects(connect(daemon.endpoint, { token: "not-the-token" }), (error: unknown) => {
      assert.ok(error instanceof UnauthenticatedError, String(error));
      assert.deepEqual(error.tokenSource, { kind: "given" });
      assert.match(error.message, /does not accept the access token given with the `token` option/);
      return true;
    });
  });

  describe("token discovery", () => {
    const names = ["AIRLOCK_TOKEN", "XDG_STATE_HOME", "HOME"] as const;
    const saved = names.map((name) => [name, process.env[name]] as const);
    let home: string;
    before(() => {
      home = mkdtempSync(join(tmpdir(), "airlock-ts-home-"));
    });
    after(() => {
      for (const [name, value] of saved) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      rmSync(home, { recursive: true, force: true });
    });

    it("takes AIRLOCK_TOKEN when no token is given", async () => {
      process.env["AIRLOCK_TOKEN"] = daemon.token;
      const viaEnv = await connect(daemon.endpoint);
      assert.deepEqual(viaEnv.tokenSource, { kind: "environment" });
      assert.equal((await viaEnv.listTools()).length > 0, true);
      viaEnv.close();
      delete process.env["AIRLOCK_TOKEN"];
    });

    it("reads the token file of the default state dir ($XDG_STATE_HOME/airlock/token)", async () => {
      delete process.env["AIRLOCK_TOKEN"];
      process.env["XDG_STATE_HOME"] = join(home, "state");
      mkdirSync(join(home, "state", "airlock"), { recursive: true });
      const path = join(home, "state", "airlock", "token");
      writeFileSync(path, `${daemon.token}\n`);
      const viaFile = await connect(daemon.endpoint);
      assert.deepEqual(viaFile.tokenSource, { kind: "file", path });
      viaFile.close();
    });

    it("falls back to ~/.local/state/airlock/token, and says where it looked when it is not there", async () => {
      delete process.env["AIRLOCK_TOKEN"];
      delete process.env["XDG_STATE_HOME"];
      process.env["HOME"] = join(home, "nobody");
      const expected = join(home, "nobody", ".local/state/airlock/token");
      assert.deepEqual(discoverToken().source, { kind: "missing", lookedIn: expected });
      await assert.rejects(connect(daemon.endpoint), (error: unknown) => {
        assert.ok(error instanceof UnauthenticatedError, String(error));
        assert.match(error.message, /needs an access token, and none was given/);
        assert.ok(error.message.includes(expected), error.message);
        return true;
      });
      assert.throws(() => discoverToken("bad\ntoken"), CredentialsError);
    });
  });

  it("nothing listening is UnreachableError at connect time", async () => {
    const port = await freePort();
    await assert.rejects(connect(`127.0.0.1:${port}`, { token: "t" }), (error: unknown) => {
      assert.ok(error instanceof UnreachableError, String(error));
      assert.equal(error.message, `cannot reach airlockd at http://127.0.0.1:${port}: connection refused — is it running?`);
      assert.equal(error.retryable, true);
      return true;
    });
  });

  it("refuses addresses it cannot speak to", async () => {
    await assert.rejects(connect("ftp://example.com", { token: "t" }), InvalidEndpointError);
    await assert.rejects(connect(daemon.endpoint, { token: "t", caCert: "/nonexistent" }), InvalidEndpointError);
  });
});

// The browser entry ("@airlock/client/web") from Node, whose fetch speaks gRPC-Web as a
// browser's does: listing tools, watching a finished run and a live one, answering its
// approval with DecideApproval, and the daemon's refusals (token, another site's Origin).

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { type AirlockClient, ApprovalPolicy, connect } from "@airlock/client";
import {
  ApprovalState,
  type AirlockWebClient,
  PermissionDeniedError,
  Risk,
  StopReason,
  UnauthenticatedError,
  UnreachableError,
  createWebClient,
} from "@airlock/client/web";
import { type Daemon, freePort, startDaemon, within, writeScript } from "./daemon.js";

/** Every module the compiled file at `entry` imports, transitively, and the packages it names. */
function importsOf(entry: string): { files: string[]; packages: Set<string> } {
  const files: string[] = [];
  const packages = new Set<string>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (files.includes(file)) continue;
    files.push(file);
    const source = readFileSync(file, "utf8");
    for (const match of source.matchAll(/(?:^|\n)\s*(?:import|export)[^"']*?from\s*["']([^"']+)["']/g)) {
      const name = match[1] as string;
      if (name.startsWith(".")) pending.push(resolve(dirname(file), name));
      else packages.add(name);
    }
  }
  return { files, packages };
}

describe("gRPC-Web entry", { timeout: 60_000 }, () => {
  let daemon: Daemon;
  let node: AirlockClient;
  let web: AirlockWebClient;

  before(async () => {
    daemon = await startDaemon();
    node = await connect(daemon.endpoint, { token: daemon.token });
    web = createWebClient(daemon.endpoint, { token: daemon.token });
  });

  after(async () => {
    node?.close();
    await daemon?.dispose();
  });

  it("imports nothing of Node, nor the Node transport", () => {
    const web = fileURLToPath(import.meta.resolve("@airlock/client/web"));
    assert.ok(web.endsWith("/dist/src/web.js"), web);
    const { files, packages } = importsOf(web);
    assert.ok(files.length > 5, files.join(", "));
    for (const name of packages) {
      assert.ok(!name.startsWith("node:") && name !== "@connectrpc/connect-node", `web.js pulls in ${name}`);
    }
    assert.ok(packages.has("@connectrpc/connect-web"));
  });

  it("lists tools and tells the daemon's info", async () => {
    const tools = await web.listTools();
    assert.ok(tools.some((tool) => tool.name === "read_file"));
    assert.equal((await web.getTool("write_file")).risk, Risk.WRITE);
    const info = await web.getInfo();
    assert.equal(info.tenant, "default");
    assert.deepEqual(info.workspaceRoots, [daemon.root]);
  });

  it("watches a finished run from the start, and lists and gets it", async () => {
    const run = await node.startRun({
      workspace: daemon.workspace,
      input: "write the file",
      model: { model: "scripted", script: writeScript("web-auto.txt", "auto\n") },
      approvalPolicy: ApprovalPolicy.AUTO,
    });
    const finished = await run.wait();
    const watched = await web.watchRun(run.runId);
    const kinds: string[] = [];
    for await (const event of watched) kinds.push(event.event.case ?? "");
    assert.equal(kinds[0], "runStarted");
    assert.equal(kinds[kinds.length - 1], "runFinished");
    assert.equal(watched.lastSeq, run.lastSeq);
    assert.deepEqual(await watched.wait(), finished);
    const info = await web.getRun(run.runId);
    assert.equal(info.finalText, "written");
    assert.ok((await web.listRuns()).runs.some((r) => r.runId === run.runId));
  });

  it("follows a live run, sees its approval on WatchApprovals and denies it with DecideApproval", async () => {
    const run = await node.startRun({
      workspace: daemon.workspace,
      input: "write the file",
      model: { model: "scripted", script: writeScript("web-denied.txt", "no\n") },
      approvalPolicy: ApprovalPolicy.RISKY,
    });
    const controller = new AbortController();
    const approvals = await web.watchApprovals({ runId: run.runId, signal: controller.signal });
    const pending = await within(20_000, "a pending request", (async () => {
      for await (const request of approvals) if (request.state === ApprovalState.PENDING) return request;
      throw new Error("WatchApprovals ended");
    })());
    controller.abort();
    assert.equal(pending.tool, "write_file");
    const follower = await web.watchRun(run.runId, run.lastSeq);
    await follower.decide(pending, { approve: false, reason: "not in ts" });
    let text = "";
    for await (const piece of follower.text()) text += piece;
    assert.equal(text, "the approver said no");
    assert.equal((await follower.wait()).reason, StopReason.FINAL);
    assert.equal(existsSync(join(daemon.workspace, "web-denied.txt")), false);
  });

  it("approves through autoApprove over gRPC-Web", async () => {
    const controller = new AbortController();
    const approver = web.autoApprove((request) => request.tool === "write_file", { signal: controller.signal });
    try {
      const run = await node.startRun({
        workspace: daemon.workspace,
        input: "write the file",
        model: { model: "scripted", script: writeScript("web-approved.txt", "approved over grpc-web\n") },
        approvalPolicy: ApprovalPolicy.RISKY,
      });
      assert.equal((await within(30_000, "the approved run", run.wait())).finalText, "written");
    } finally {
      controller.abort();
    }
    assert.equal((await approver).approved.length, 1);
    assert.equal(readFileSync(join(daemon.workspace, "web-approved.txt"), "utf8"), "approved over grpc-web\n");
  });

  it("cancels a live run with CancelRun", async () => {
    const slow = JSON.stringify({ turns: [{ final: "too late", delay_ms: 5000 }] });
    const run = await node.startRun({ workspace: daemon.workspace, input: "wait", model: { model: "scripted", script: slow } });
    const follower = await web.watchRun(run.runId);
    await follower.cancel("from the browser");
    const finished = await within(10_000, "the cancelled run", follower.wait());
    assert.equal(finished.reason, StopReason.CANCELLED);
    assert.match(finished.detail, /from the browser/);
  });

  it("maps the daemon's refusals: a wrong token, another site's Origin, nothing listening", async () => {
    await assert.rejects(createWebClient(daemon.endpoint, { token: "wrong" }).listTools(), UnauthenticatedError);
    const otherSite = createWebClient(daemon.endpoint, {
      token: daemon.token,
      fetch: (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set("origin", "http://another-site.example");
        return fetch(input, { ...init, headers });
      },
    });
    await assert.rejects(otherSite.listTools(), PermissionDeniedError);
    const port = await freePort();
    await assert.rejects(createWebClient(`http://127.0.0.1:${port}`, { token: "t" }).listTools(), (error: unknown) => {
      assert.ok(error instanceof UnreachableError, String(error));
      assert.match(error.message, /connection refused/);
      return true;
    });
  });
});

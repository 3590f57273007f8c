// Agent runs against a real airlockd with the scripted model: approvals answered through the
// run's handle, an approver console and autoApprove; re-attaching from a seq; deltas kept
// apart from committed events; cancel and input; sessions, changes, traces and cassettes.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  type AirlockClient,
  type ApprovalRequest,
  ApprovalPolicy,
  ApprovalState,
  ChangeKind,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  OutOfRangeError,
  Risk,
  type RunEvent,
  RunState,
  StopReason,
  connect,
} from "../src/index.js";
import { type Daemon, startDaemon, within, writeScript } from "./daemon.js";

describe("agent runs", { timeout: 90_000 }, () => {
  let daemon: Daemon;
  let client: AirlockClient;

  before(async () => {
    daemon = await startDaemon();
    client = await connect(daemon.endpoint, { token: daemon.token });
  });

  after(async () => {
    client?.close();
    await daemon?.dispose();
  });

  const start = (script: string, extra: { approvalPolicy?: ApprovalPolicy; sessionId?: string } = {}) =>
    client.startRun({
      workspace: extra.sessionId ? "" : daemon.workspace,
      input: "write the file",
      model: { model: "scripted", script },
      approvalPolicy: extra.approvalPolicy ?? ApprovalPolicy.RISKY,
      ...(extra.sessionId ? { sessionId: extra.sessionId } : {}),
    });

  let approvedRunId = "";

  it("drives a run and approves its write through the handle", async () => {
    const target = join(daemon.workspace, "approved.txt");
    const run = await start(writeScript("approved.txt", "from ts\n"));
    assert.match(run.runId, /^run_[0-9a-f]{32}$/);
    const seen: RunEvent[] = [];
    let request: ApprovalRequest | undefined;
    let rejected = "";
    await within(30_000, "the approved run", (async () => {
      for await (const event of run) {
        seen.push(event);
        const e = event.event;
        if (e.case === "approvalRequested" && e.value.request) {
          request = e.value.request;
          assert.equal(existsSync(target), false, "asking wrote the file");
          // A decision bound to another digest does not count: the daemon says so in an event.
          await run.decide({ ...request, digest: "0".repeat(64) }, { approve: true });
        }
        if (e.case === "decisionRejected" && request) {
          rejected = e.value.reason;
          await run.decide(request, { approve: true });
        }
      }
    })());
    assert.ok(request, "the run asked for approval");
    assert.equal(request.tool, "write_file");
    assert.equal(request.risk, Risk.WRITE);
    assert.equal(request.preview?.kind, "diff");
    assert.match(request.preview?.text ?? "", /\+from ts/);
    assert.match(rejected, /digest/);
    const finished = await run.wait();
    assert.equal(finished.reason, StopReason.FINAL);
    assert.equal(finished.finalText, "written");
    assert.equal(readFileSync(target, "utf8"), "from ts\n");
    const seqs = seen.filter((e) => !e.delta).map((e) => e.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => BigInt(i + 1)), "seq is gap-free from 1");
    assert.equal(run.lastSeq, seqs[seqs.length - 1]);
    const info = await run.info();
    assert.equal(info.state, RunState.FINISHED);
    assert.equal(info.finalText, "written");
    assert.equal(info.lastSeq, run.lastSeq);
    approvedRunId = run.runId;
  });

  it("autoApprove denies what its predicate refuses, with the reason; nothing is written", async () => {
    const controller = new AbortController();
    const decided: string[] = [];
    const approver = client.autoApprove((request) => request.tool !== "write_file", {
      signal: controller.signal,
      reason: "not in ts",
      onDecision: (request, approved) => decided.push(`${request.tool}:${approved}`),
    });
    try {
      const run = await start(writeScript("denied.txt", "no\n"));
      const finished = await within(30_000, "the denied run", run.wait());
      assert.equal(finished.finalText, "the approver said no");
      assert.equal(existsSync(join(daemon.workspace, "denied.txt")), false);
      assert.deepEqual(decided, ["write_file:false"]);
    } finally {
      controller.abort();
    }
    const summary = await within(10_000, "autoApprove to stop", approver);
    assert.equal(summary.denied.length, 1);
    assert.equal(summary.approved.length, 0);
  });

  it("an approver console approves a run's request; DecideApproval checks the digest", async () => {
    const approver = await client.approvals();
    try {
      const run = await start(writeScript("console.txt", "via console\n"));
      const states: ApprovalState[] = [];
      await within(30_000, "the console's request", (async () => {
        for await (const request of approver) {
          states.push(request.state);
          if (request.state !== ApprovalState.PENDING || request.runId !== run.runId) continue;
          // The unary call refuses an answer bound to another call's digest.
          await assert.rejects(
            client.decideApproval({ ...request, digest: "f".repeat(64) }, { approve: true }),
            (error: unknown) => {
              assert.ok(error instanceof FailedPreconditionError, String(error));
              assert.equal(error.field, "digest");
              return true;
            },
          );
          approver.decide(request, { approve: true });
          break;
        }
      })());
      const finished = await within(30_000, "the approved run", run.wait());
      assert.equal(finished.finalText, "written");
      assert.equal(readFileSync(join(daemon.workspace, "console.txt"), "utf8"), "via console\n");
      assert.ok(states.includes(ApprovalState.PENDING));
    } finally {
      approver.close();
    }
  });

  it("re-attaches from a seq: attachRun after N yields N+1 and on", async () => {
    assert.ok(approvedRunId);
    const info = await client.getRun(approvedRunId);
    const attached = await client.attachRun(approvedRunId, 4);
    const seqs: bigint[] = [];
    for await (const event of attached) seqs.push(event.seq);
    const expected = [];
    for (let seq = 5n; seq <= info.lastSeq; seq++) expected.push(seq);
    assert.deepEqual(seqs, expected);
    assert.equal((await attached.wait()).finalText, "written");
    // After the last event of a finished run: nothing more, and the handle says how it ended.
    const atEnd = await client.attachRun(approvedRunId, info.lastSeq);
    const none: RunEvent[] = [];
    for await (const event of atEnd) none.push(event);
    assert.deepEqual(none, []);
    assert.equal((await atEnd.wait()).finalText, "written");
    // WatchRun, the server-streaming half, from the start.
    const watched = await client.watchRun(approvedRunId);
    let count = 0n;
    for await (const _ of watched.committed()) count++;
    assert.equal(count, info.lastSeq);
  });

  it("refuses to attach past the end, to an unknown run and to a malformed id", async () => {
    const info = await client.getRun(approvedRunId);
    await assert.rejects(client.attachRun(approvedRunId, info.lastSeq + 10n), (error: unknown) => {
      assert.ok(error instanceof OutOfRangeError, String(error));
      assert.equal(error.field, "attach.after_seq");
      return true;
    });
    await assert.rejects(client.attachRun(`run_${"0".repeat(32)}`), (error: unknown) => {
      assert.ok(error instanceof NotFoundError, String(error));
      assert.equal(error.field, "attach.run_id");
      return true;
    });
    await assert.rejects(client.watchRun("bogus"), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.field, "run_id");
      return true;
    });
  });

  it("keeps streamed deltas apart from committed events", async () => {
    const answer = "a streamed answer, long enough to come in several pieces";
    const script = JSON.stringify({ stream: true, turns: [{ final: answer }] });
    const run = await client.startRun({ workspace: daemon.workspace, input: "say it", model: { model: "scripted", script } });
    const deltas: RunEvent[] = [];
    for await (const event of run.events()) {
      if (event.delta) {
        deltas.push(event);
        // A delta carries the seq of the committed event still to come: it never counts.
        assert.ok(run.lastSeq < event.seq, `lastSeq ${run.lastSeq} moved to a delta's seq ${event.seq}`);
      }
    }
    assert.ok(deltas.length > 1, "the answer streamed in pieces");
    assert.ok(deltas.every((e) => e.event.case === "textDelta"));
    assert.equal((await run.wait()).finalText, answer);
    // A second follower: committed() skips deltas; text() gives the text whole from model_text.
    const replay = await client.attachRun(run.runId, 0);
    let text = "";
    for await (const piece of replay.text()) text += piece;
    assert.equal(text, answer);
    const committed = await client.attachRun(run.runId, 0);
    for await (const event of committed.committed()) assert.equal(event.delta, false);

    const live = await client.startRun({ workspace: daemon.workspace, input: "say it again", model: { model: "scripted", script } });
    const pieces: string[] = [];
    for await (const piece of live.text()) pieces.push(piece);
    assert.ok(pieces.length > 1, "text() yields each delta as it streams");
    assert.equal(pieces.join(""), answer);
  });

  it("cancels a run through its handle; CancelRun on a finished run is FailedPreconditionError", async () => {
    const slow = JSON.stringify({ turns: [{ final: "too late", delay_ms: 5000 }] });
    const run = await client.startRun({ workspace: daemon.workspace, input: "wait", model: { model: "scripted", script: slow } });
    await run.cancel("enough");
    const finished = await within(10_000, "the cancelled run", run.wait());
    assert.equal(finished.reason, StopReason.CANCELLED);
    assert.match(finished.detail, /enough/);
    await assert.rejects(client.cancelRun(run.runId, "again"), (error: unknown) => {
      assert.ok(error instanceof FailedPreconditionError, String(error));
      assert.equal(error.field, "run_id");
      return true;
    });
  });

  it("sends more input mid-run; the run reads it before its next model call", async () => {
    const script = JSON.stringify({
      turns: [{ tool_calls: [{ name: "list_dir", arguments: { path: "." } }], delay_ms: 1500 }, { final: "heard you" }],
    });
    const run = await client.startRun({ workspace: daemon.workspace, input: "look around", model: { model: "scripted", script } });
    await run.sendInput("and then stop");
    const inputs: string[] = [];
    for await (const event of run.committed()) {
      if (event.event.case === "userInput") inputs.push(event.event.value.text);
    }
    assert.ok(inputs.includes("and then stop"), JSON.stringify(inputs));
    assert.equal((await run.wait()).finalText, "heard you");
  });

  it("maps a bad StartRun to the field at fault", async () => {
    await assert.rejects(client.startRun({ workspace: daemon.workspace, input: "x", model: "gpt-7" }), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.field, "start.model.model");
      return true;
    });
    await assert.rejects(client.startRun({ workspace: daemon.workspace, input: "", model: "scripted" }), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.field, "start.input");
      return true;
    });
  });

  it("creates, reads and lists sessions, and continues one", async () => {
    const session = await client.createSession({ workspace: daemon.workspace, labels: { client: "ts" } });
    assert.match(session.sessionId, /^ses_[0-9a-f]{32}$/);
    assert.deepEqual(session.labels, { client: "ts" });
    const run = await start(writeScript("session.txt", "in a session\n"), {
      sessionId: session.sessionId,
      approvalPolicy: ApprovalPolicy.AUTO,
    });
    assert.equal((await run.wait()).finalText, "written");
    const again = await client.getSession(session.sessionId);
    assert.equal(again.runs, 1);
    assert.equal(again.lastRunId, run.runId);
    const listed = [];
    for await (const s of client.allSessions({ pageSize: 1 })) listed.push(s.sessionId);
    assert.ok(listed.includes(session.sessionId));
    await assert.rejects(client.getSession(`ses_${"0".repeat(32)}`), NotFoundError);
  });

  it("lists a run's changes, reads a blob, reverts the run and forks it", async () => {
    const run = await start(writeScript("changed.txt", "changed\n"), { approvalPolicy: ApprovalPolicy.AUTO });
    assert.equal((await run.wait()).finalText, "written");
    const path = join(daemon.workspace, "changed.txt");
    assert.equal(readFileSync(path, "utf8"), "changed\n");
    const changes = await client.listChanges(run.runId);
    assert.equal(changes.workspace, daemon.workspace);
    assert.equal(changes.totalChanges, 1n);
    const change = changes.steps[0]?.changeSet?.changes[0];
    assert.equal(changes.steps[0]?.tool, "write_file");
    assert.equal(change?.path, "changed.txt");
    assert.equal(change?.kind, ChangeKind.ADDED);
    const blob = await client.readBlob(run.runId, change?.after?.digest ?? "");
    assert.equal(Buffer.from(blob).toString(), "changed\n");
    const reverted = await client.revertRun(run.runId, 1);
    assert.deepEqual(reverted.removed, ["changed.txt"]);
    assert.equal(existsSync(path), false);
    const fork = await client.forkRun(run.runId, { atStep: 1 });
    assert.notEqual(fork.runId, run.runId);
    assert.equal(fork.sessionId, (await run.info()).sessionId);
    const forked = await client.attachRun(fork.runId);
    assert.equal((await within(30_000, "the forked run", forked.wait())).finalText, "written");
    assert.equal(readFileSync(path, "utf8"), "changed\n");
  });

  it("lists runs page by page, watches them, and reads a run's trace and cassette", async () => {
    const page = await client.listRuns({ pageSize: 2 });
    assert.equal(page.runs.length, 2);
    assert.notEqual(page.nextPageToken, "");
    const all = [];
    for await (const run of client.allRuns({ pageSize: 2 })) all.push(run.runId);
    assert.ok(all.includes(approvedRunId));
    assert.equal(new Set(all).size, all.length);
    await assert.rejects(client.listRuns({ pageToken: "nope" }), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.field, "page_token");
      return true;
    });
    const controller = new AbortController();
    const watched = await client.watchRuns({ state: RunState.FINISHED, signal: controller.signal });
    const first = await watched.next();
    assert.equal(first.done, false);
    assert.equal(first.value?.state, RunState.FINISHED);
    controller.abort();
    const trace = await client.getTrace(approvedRunId);
    assert.ok(trace.spans.some((span) => span.name === "run"));
    assert.ok(trace.spans.some((span) => span.name === "tool"));
    const cassette = await client.getCassette(approvedRunId);
    assert.equal(cassette.model, "scripted");
    assert.equal(cassette.exchanges, 2);
    assert.ok(JSON.parse(cassette.cassette));
  });
});

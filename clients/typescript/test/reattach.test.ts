// A run outlives its stream: the daemon is stopped while a run waits for approval and started
// again on the same state dir and address; the handles re-attach from their last committed
// event by themselves (the Run stream, with a decision sent while it was down, and a WatchRun
// follower), and one with re-attaching off reports the lost connection instead.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  type AirlockClient,
  type ApprovalRequest,
  ApprovalPolicy,
  ConnectionLostError,
  type RunEvent,
  type RunHandle,
  StopReason,
  connect,
} from "../src/index.js";
import { type Daemon, startDaemon, within, writeScript } from "./daemon.js";

/** Reads `handle` until an approval is requested; returns the request and the events read. */
async function untilApproval(handle: RunHandle, seen: RunEvent[]): Promise<ApprovalRequest> {
  for await (const event of handle) {
    seen.push(event);
    if (event.event.case === "approvalRequested" && event.event.value.request) return event.event.value.request;
  }
  throw new Error("the run ended before asking for approval");
}

function assertGapFree(events: RunEvent[]): void {
  const seqs = events.filter((e) => !e.delta).map((e) => e.seq);
  assert.deepEqual(seqs, seqs.map((_, i) => BigInt(i + 1)), `seqs ${seqs.join(",")}`);
}

describe("re-attaching after the daemon restarts", { timeout: 90_000 }, () => {
  let first: Daemon;
  let daemon: Daemon;
  let client: AirlockClient;

  before(async () => {
    first = await startDaemon();
    daemon = first;
    client = await connect(daemon.endpoint, { token: daemon.token });
  });

  after(async () => {
    client?.close();
    // The restarted daemon first, then the first one's directories (it made them).
    await daemon?.stop();
    await first?.dispose();
  });

  it("follows the run again from lastSeq, sends the decision made meanwhile, and sees it finish", async () => {
    const run = await client.startRun({
      workspace: daemon.workspace,
      input: "write the file",
      model: { model: "scripted", script: writeScript("reattached.txt", "after a restart\n") },
      approvalPolicy: ApprovalPolicy.RISKY,
    });
    const watcher = await client.watchRun(run.runId);
    const fragile = await client.attachRun(run.runId, 0, { reattach: false });

    const seen: RunEvent[] = [];
    const watched: RunEvent[] = [];
    const request = await within(20_000, "the approval request", untilApproval(run, seen));
    await within(20_000, "the watcher's approval request", untilApproval(watcher, watched));
    await within(20_000, "the fragile handle's approval request", untilApproval(fragile, []));
    const askedAt = run.lastSeq;
    assert.equal(fragile.lastSeq, askedAt);

    await daemon.stop("SIGTERM");
    daemon = await startDaemon({ stateDir: daemon.stateDir, root: daemon.root, listen: daemon.listen });

    // Decided while the stream is down: sent again once the handle has re-attached.
    await run.decide(request, { approve: true });
    await within(30_000, "the run to finish after the restart", (async () => {
      for await (const event of run) seen.push(event);
    })());
    const finished = await run.wait();
    assert.equal(finished.reason, StopReason.FINAL);
    assert.equal(finished.finalText, "written");
    assert.ok(run.reattaches >= 1, "the handle re-attached");
    assertGapFree(seen);
    assert.ok(seen.some((e) => e.event.case === "runResumed"), "the daemon resumed the run");
    assert.equal(readFileSync(join(daemon.workspace, "reattached.txt"), "utf8"), "after a restart\n");

    await within(30_000, "the watcher to see the end", (async () => {
      for await (const event of watcher) watched.push(event);
    })());
    assert.ok(watcher.reattaches >= 1);
    assert.equal((await watcher.wait()).finalText, "written");
    assertGapFree(watched);
    assert.equal(watcher.lastSeq, run.lastSeq);

    // With re-attaching off, the dropped stream is an error that says what it is; the handle
    // still knows where to follow the run from.
    await assert.rejects(
      (async () => {
        for await (const _ of fragile) {
          // Nothing arrives on the broken stream.
        }
      })(),
      (error: unknown) => {
        assert.ok(error instanceof ConnectionLostError, String(error));
        assert.equal(error.retryable, true);
        return true;
      },
    );
    assert.equal(fragile.lastSeq, askedAt);
    const resumed = await client.attachRun(fragile.runId, fragile.lastSeq);
    const rest: bigint[] = [];
    for await (const event of resumed) rest.push(event.seq);
    assert.equal(rest[0], askedAt + 1n);
    assert.equal(rest[rest.length - 1], run.lastSeq);
    assert.ok(existsSync(join(daemon.workspace, "reattached.txt")));
  });
});

// Changes: what a run's tool calls changed in its workspace, step by step — the change sets
// (all pages joined), the contents they refer to, putting a workspace back as it was before
// a step, and forking a run from a step. Browser-safe.

import { create } from "@bufbuild/protobuf";
import { type Context, type CallOptions, call } from "./context.js";
import {
  Agent,
  type RunInfo,
} from "./gen/airlock/v1/agent_pb.js";
import {
  type ListChangesResponse,
  ListChangesResponseSchema,
  type RevertRunResponse,
} from "./gen/airlock/v1/changes_pb.js";

export interface ListChangesOptions extends CallOptions {
  /** Only this step (1-based); 0 or unset: every step. */
  step?: number;
  /** File changes per page; unset = the daemon's largest page. */
  pageSize?: number;
}

/**
 * The change sets of a run's tool calls, whole: the daemon's pages read one after another,
 * and a set that spans two pages joined again.
 */
export async function listChanges(
  ctx: Context,
  runId: string,
  options: ListChangesOptions = {},
): Promise<ListChangesResponse> {
  const whole = create(ListChangesResponseSchema, {});
  let offset = 0n;
  for (;;) {
    const page = await call(
      ctx,
      Agent.method.listChanges,
      { runId, step: options.step ?? 0, offset, limit: options.pageSize ?? 0 },
      options,
    );
    whole.workspace = page.workspace;
    whole.totalChanges = page.totalChanges;
    for (const part of page.steps) {
      const last = whole.steps[whole.steps.length - 1];
      if (offset !== 0n && last && last.callId === part.callId && last.changeSet && part.changeSet) {
        last.changeSet.changes.push(...part.changeSet.changes);
      } else {
        whole.steps.push(part);
      }
    }
    if (page.nextOffset === 0n || page.nextOffset <= offset) return whole;
    offset = page.nextOffset;
  }
}

/** A content one of the run's change sets names by digest (before or after a change). */
export async function readBlob(ctx: Context, runId: string, digest: string, options?: CallOptions): Promise<Uint8Array> {
  return (await call(ctx, Agent.method.readBlob, { runId, digest }, options)).content;
}

export interface RevertOptions extends CallOptions {
  /** Revert even paths changed since by something other than the run (their changes are lost). */
  force?: boolean;
}

/** Puts a finished run's workspace back as it was before step `toStep` (1-based). */
export function revertRun(
  ctx: Context,
  runId: string,
  toStep: number,
  options: RevertOptions = {},
): Promise<RevertRunResponse> {
  return call(ctx, Agent.method.revertRun, { runId, toStep, force: options.force ?? false }, options);
}

export interface ForkRunOptions extends CallOptions {
  /** The new run's conversation is the old one's up to the start of this step; 0 = all of it. */
  atStep?: number;
  /** Run in a copy of the workspace as it was before `atStep`, not in the original. */
  copyWorkspace?: boolean;
  /** What the user says next; empty repeats the old run's input. */
  input?: string;
  /** Where to make the copy (inside the caller's roots); empty = next to the original. */
  copyInto?: string;
}

/** Starts a run whose conversation is `runId`'s up to a step; follow it with attachRun. */
export function forkRun(ctx: Context, runId: string, options: ForkRunOptions = {}): Promise<RunInfo> {
  return call(
    ctx,
    Agent.method.forkRun,
    {
      runId,
      atStep: options.atStep ?? 0,
      copyWorkspace: options.copyWorkspace ?? false,
      input: options.input ?? "",
      copyInto: options.copyInto ?? "",
    },
    options,
  );
}

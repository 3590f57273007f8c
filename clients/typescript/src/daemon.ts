// Daemon: what a client needs to know before it asks anything — the daemon's version, the
// caller's tenant, the workspace roots it may name and the limits its requests must keep —
// and the operator's garbage collection. Browser-safe.

import { type Context, type CallOptions, call } from "./context.js";
import { type CollectGarbageResponse, Daemon, type DaemonInfo } from "./gen/airlock/v1/daemon_pb.js";

/** The daemon's version, the caller's tenant, its workspace roots and limits. */
export function getInfo(ctx: Context, options?: CallOptions): Promise<DaemonInfo> {
  return call(ctx, Daemon.method.getInfo, {}, options);
}

/**
 * Deletes finished runs, kept outputs and empty sessions older than `olderThanMs` (0: the
 * daemon's configured retention). Only the default tenant (the operator) may.
 */
export function collectGarbage(ctx: Context, olderThanMs: number | bigint = 0, options?: CallOptions): Promise<CollectGarbageResponse> {
  return call(ctx, Daemon.method.collectGarbage, { olderThanMs: BigInt(olderThanMs) }, options);
}

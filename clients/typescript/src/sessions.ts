// Sessions: a workspace, the settings its runs inherit, and the conversation its runs carry
// on — create one, read one, list them. Browser-safe.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Context, type CallOptions, allPages, call } from "./context.js";
import {
  Agent,
  type CreateSessionRequestSchema,
  type ListSessionsResponse,
  type Session,
} from "./gen/airlock/v1/agent_pb.js";

export type CreateSessionOptions = MessageInitShape<typeof CreateSessionRequestSchema> & CallOptions;

/** Creates a session: its workspace, labels and the settings every run of it inherits. */
export function createSession(ctx: Context, options: CreateSessionOptions = {}): Promise<Session> {
  const { signal, timeoutMs, ...request } = options;
  return call(ctx, Agent.method.createSession, request, { signal, timeoutMs });
}

/** One session of the caller's tenant: settings, runs so far, the latest, whether one is going on. */
export function getSession(ctx: Context, sessionId: string, options?: CallOptions): Promise<Session> {
  return call(ctx, Agent.method.getSession, { sessionId }, options);
}

export interface ListSessionsOptions extends CallOptions {
  /** At most this many; 0 = 50 (never more than 500). */
  pageSize?: number;
  /** A previous page's nextPageToken. */
  pageToken?: string;
}

/** One page of the tenant's sessions, most recently active first. */
export function listSessions(ctx: Context, options: ListSessionsOptions = {}): Promise<ListSessionsResponse> {
  return call(
    ctx,
    Agent.method.listSessions,
    { pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
    options,
  );
}

/** Every session of the tenant, most recently active first, page after page. */
export function allSessions(
  ctx: Context,
  options: ListSessionsOptions = {},
): AsyncGenerator<Session, void, undefined> {
  return allPages(ctx, (pageToken) => listSessions(ctx, { ...options, pageToken }), (page) => page.sessions);
}

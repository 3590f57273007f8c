// The approvals inbox, app-wide: one Agent.WatchApprovals stream while signed in keeps a map
// approvalId → request. Pending requests are the inbox (and the count in the nav); one that
// gets answered or expires stays a moment, marked so, then moves to a short "recent" list.
// The stream reconnects after a failure, backing off, until the user signs out.
//
// A denial's reason is not in the request's update (its detail says only "denied by the
// approver"): the store keeps the reason this tab sent, and reads a reason given elsewhere
// from the run's own ApprovalResolved event.

import { api, enumName, errorMessage, isAbort, isFinalError, Code, errorCode } from "./api.js";
import { createStore } from "./store.js";
import { denialReasonFromEvents, isDenial } from "./undo.js";

/** How long an answered or expired request stays in the inbox, marked so. */
const LINGER_MS = 4000;
const RECENT_MAX = 20;

/** How long a lookup of a denial's reason in its run's events may take. */
const REASON_WAIT_MS = 15_000;

/**
 * items: Map approvalId → { request, phase: "pending" | "answered" | "expired", sent, at,
 * reason, sentReason } — reason: a denial's, once known; sentReason: the one this tab sent.
 * recent: [{ request, phase, at, reason }] newest first; connected, error: the stream's state.
 */
export const approvalsStore = createStore({
  items: new Map(),
  recent: [],
  pending: 0,
  connected: false,
  loaded: false,
  error: "",
});

let controller = null;
const timers = new Map();

function update(mutate) {
  const s = approvalsStore.get();
  const next = { ...s, items: new Map(s.items), recent: s.recent };
  mutate(next);
  next.pending = 0;
  for (const item of next.items.values()) if (item.phase === "pending") next.pending += 1;
  approvalsStore.set(next);
}

function receive(request) {
  const state = enumName("airlock.v1.ApprovalState", request.state);
  const id = request.approvalId;
  update((s) => {
    s.loaded = true;
    const old = s.items.get(id);
    if (state === "PENDING") {
      s.items.set(id, { request, phase: "pending", sent: old?.sent ?? false, at: Date.now(), sentReason: old?.sentReason ?? "" });
    } else if (state === "RESOLVED" || state === "EXPIRED") {
      const phase = state === "RESOLVED" ? "answered" : "expired";
      const denied = phase === "answered" && isDenial(request.detail);
      const reason = denied ? old?.reason || old?.sentReason || "" : "";
      s.items.set(id, { request, phase, sent: false, at: Date.now(), reason });
      if (denied && !reason && request.runId) lookUpReason(request);
      clearTimeout(timers.get(id));
      timers.set(id, setTimeout(() => retire(id), LINGER_MS));
    } else if (state === "DECISION_REJECTED" && old) {
      // A decision was refused; the request is still pending. Say why on its card.
      s.items.set(id, { ...old, sent: false, note: request.detail });
    }
  });
}

function retire(id) {
  timers.delete(id);
  update((s) => {
    const item = s.items.get(id);
    if (!item || item.phase === "pending") return;
    s.items.delete(id);
    s.recent = [{ request: item.request, phase: item.phase, at: item.at, reason: item.reason }, ...s.recent].slice(0, RECENT_MAX);
  });
}

/**
 * Marks a card's decision as sent (buttons disabled until the stream's update arrives);
 * `reason`: a denial's, kept for the recent list.
 */
export function markSent(id, sent, reason = "") {
  update((s) => {
    const item = s.items.get(id);
    if (item) s.items.set(id, { ...item, sent, note: "", sentReason: reason || item.sentReason || "" });
  });
}

/** Sets a denial's reason on the item or recent entry of approval `id`. */
function setReason(id, reason) {
  update((s) => {
    const item = s.items.get(id);
    if (item && !item.reason) s.items.set(id, { ...item, reason });
    s.recent = s.recent.map((r) => (r.request.approvalId === id && !r.reason ? { ...r, reason } : r));
  });
}

// Lookups of denials' reasons, one at a time (each reads a run's events from the start).
let lookups = Promise.resolve();

function lookUpReason(request) {
  const signal = controller?.signal;
  if (!signal) return;
  lookups = lookups.then(async () => {
    if (signal.aborted) return;
    const reason = await reasonFromRun(request.runId, request.approvalId, signal);
    if (reason && !signal.aborted) setReason(request.approvalId, reason);
  });
}

/** The reason of approval `approvalId`'s denial, read from run `runId`'s events; "" if none. */
async function reasonFromRun(runId, approvalId, outer) {
  const lookup = new AbortController();
  const stop = () => lookup.abort();
  outer.addEventListener("abort", stop);
  const timer = setTimeout(stop, REASON_WAIT_MS);
  try {
    for await (const ev of api.agent.watchRun({ runId, afterSeq: 0n }, { signal: lookup.signal })) {
      if (ev.delta) continue;
      if (ev.event.case === "approvalResolved" && ev.event.value.approvalId === approvalId) {
        return denialReasonFromEvents([ev], approvalId);
      }
    }
  } catch {
    // Not readable (gone, another tenant's, timed out): the recent list goes without it.
  } finally {
    clearTimeout(timer);
    outer.removeEventListener("abort", stop);
    lookup.abort();
  }
  return "";
}

/** Starts the stream (idempotent). */
export function startApprovals() {
  if (controller) return;
  controller = new AbortController();
  loop(controller.signal);
}

/** Stops the stream and forgets everything (on sign-out). */
export function stopApprovals() {
  controller?.abort();
  controller = null;
  for (const t of timers.values()) clearTimeout(t);
  timers.clear();
  approvalsStore.set({ items: new Map(), recent: [], pending: 0, connected: false, loaded: false, error: "" });
}

async function loop(signal) {
  let delay = 1000;
  while (!signal.aborted) {
    try {
      const stream = api.agent.watchApprovals({}, { signal });
      update((s) => {
        // What was pending is sent again first: start from a clean inbox.
        for (const [id, item] of s.items) if (item.phase === "pending") s.items.delete(id);
        s.connected = true;
        s.error = "";
        s.loaded = true;
      });
      for await (const request of stream) {
        delay = 1000;
        receive(request);
      }
    } catch (err) {
      if (isAbort(err, signal)) return;
      const final = isFinalError(err) && errorCode(err) !== Code.NotFound;
      update((s) => {
        s.connected = false;
        s.error = final ? errorMessage(err) : `${errorMessage(err)} — reconnecting…`;
      });
      if (final) return;
    }
    if (signal.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 15_000);
  }
}

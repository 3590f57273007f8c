// A trace's spans laid out as a waterfall: tree order (children after their parent, in start
// order), depth, offset and duration in ms from the run span (or, while the run goes on and
// its own span is not recorded yet, from the earliest span), bar position and width in %,
// and the slowest span below the root. "Slowest" compares work: time spent waiting for a
// person (a permission span that asked an approver) is left out of every span it lies in,
// and a wait is never the slowest itself. Pure, for pages/trace.js and the tests.

/** An attribute's value, or undefined. */
function attribute(span, key) {
  return span.attributes?.find((a) => a.key === key)?.value;
}

/**
 * Whether a span is time spent waiting for a person: a permission decision that asked (the
 * daemon's permission span lasts until the approver answers; `decision` is "ask", and an
 * asked call carries `approval_id` / `approved`), or a span named for an approval wait.
 */
export function isWaitSpan(span) {
  if (span.name === "approval" || span.name === "approval_wait") return true;
  if (span.name !== "permission") return false;
  const decision = attribute(span, "decision");
  if (decision === "ask") return true;
  if (decision === "allow" || decision === "deny") return false;
  return attribute(span, "approval_id") !== undefined || attribute(span, "approved") !== undefined || decision === undefined;
}

/** The ms of [start, end) covered by `intervals` (each [start, end), any order, may overlap). */
function covered(intervals, start, end) {
  const clipped = intervals
    .map(([s, e]) => [Math.max(s, start), Math.min(e, end)])
    .filter(([s, e]) => e > s)
    .sort((a, b) => a[0] - b[0]);
  let total = 0;
  let reach = -Infinity;
  for (const [s, e] of clipped) {
    if (e <= reach) continue;
    total += e - Math.max(s, reach);
    reach = e;
  }
  return total;
}

/** Spans with depth, offsets and durations (ms) relative to the run span (or the earliest span). */
export function layoutSpans(spans) {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const root = spans.find((s) => !s.parentSpanId) ?? null;
  let start = null;
  let end = null;
  for (const s of spans) {
    if (start === null || s.startUnixNano < start) start = s.startUnixNano;
    if (end === null || s.endUnixNano > end) end = s.endUnixNano;
  }
  const base = root ? root.startUnixNano : start ?? 0n;
  const last = root && root.endUnixNano >= end ? root.endUnixNano : end ?? 0n;
  const totalMs = Math.max(Number(last - base) / 1e6, 0.001);
  const depthOf = new Map();
  const depth = (s) => {
    if (depthOf.has(s.spanId)) return depthOf.get(s.spanId);
    depthOf.set(s.spanId, 0);
    const parent = s.parentSpanId ? byId.get(s.parentSpanId) : null;
    const dpt = parent ? depth(parent) + 1 : 0;
    depthOf.set(s.spanId, dpt);
    return dpt;
  };
  // Children right after their parents, each group in start order.
  const children = new Map();
  const tops = [];
  for (const s of spans) {
    const parent = s.parentSpanId && byId.has(s.parentSpanId) ? s.parentSpanId : null;
    if (parent) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(s);
    } else tops.push(s);
  }
  const ordered = [];
  const seen = new Set();
  const byStart = (a, b) => (a.startUnixNano < b.startUnixNano ? -1 : a.startUnixNano > b.startUnixNano ? 1 : 0);
  const visit = (s) => {
    if (seen.has(s.spanId)) return;
    seen.add(s.spanId);
    ordered.push(s);
    for (const c of (children.get(s.spanId) ?? []).sort(byStart)) visit(c);
  };
  for (const s of tops.sort(byStart)) visit(s);

  // Each wait, as [start, end) in ms from the base, on itself and every span above it.
  const waitsIn = new Map();
  let waitedMs = 0;
  for (const s of spans) {
    if (!isWaitSpan(s)) continue;
    const interval = [Number(s.startUnixNano - base) / 1e6, Number(s.endUnixNano - base) / 1e6];
    const climbed = new Set();
    for (let at = s; at && !climbed.has(at.spanId); at = at.parentSpanId ? byId.get(at.parentSpanId) : null) {
      climbed.add(at.spanId);
      if (!waitsIn.has(at.spanId)) waitsIn.set(at.spanId, []);
      waitsIn.get(at.spanId).push(interval);
    }
  }

  let slowest = null;
  const rows = ordered.map((s) => {
    const offsetMs = Number(s.startUnixNano - base) / 1e6;
    const durationMs = Math.max(0, Number(s.endUnixNano - s.startUnixNano) / 1e6);
    const waits = waitsIn.get(s.spanId);
    const waitMs = waits ? covered(waits, offsetMs, offsetMs + durationMs) : 0;
    const row = {
      span: s,
      depth: depth(s),
      offsetMs,
      durationMs,
      waitMs,
      workMs: Math.max(0, durationMs - waitMs),
      isWait: isWaitSpan(s),
      left: Math.min(100, Math.max(0, (offsetMs / totalMs) * 100)),
      width: Math.min(100, Math.max(0, (durationMs / totalMs) * 100)),
      isRoot: s === root,
    };
    if (row.isRoot) waitedMs = waitMs;
    if (!row.isRoot && !row.isWait && (!slowest || row.workMs > slowest.workMs)) slowest = row;
    return row;
  });
  if (!root) {
    const all = spans.filter(isWaitSpan).map((s) => [Number(s.startUnixNano - base) / 1e6, Number(s.endUnixNano - base) / 1e6]);
    waitedMs = covered(all, 0, totalMs);
  }
  return { rows, totalMs, root, slowestId: slowest?.span.spanId ?? null, waitedMs };
}

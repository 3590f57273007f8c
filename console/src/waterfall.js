// A trace's spans laid out as a waterfall: tree order (children after their parent, in start
// order), depth, offset and duration in ms from the run span (or, while the run goes on and
// its own span is not recorded yet, from the earliest span), bar position and width in %,
// and the slowest span below the root. Pure, for pages/trace.js and the tests.

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

  let slowest = null;
  const rows = ordered.map((s) => {
    const offsetMs = Number(s.startUnixNano - base) / 1e6;
    const durationMs = Math.max(0, Number(s.endUnixNano - s.startUnixNano) / 1e6);
    const row = {
      span: s,
      depth: depth(s),
      offsetMs,
      durationMs,
      left: Math.min(100, Math.max(0, (offsetMs / totalMs) * 100)),
      width: Math.min(100, Math.max(0, (durationMs / totalMs) * 100)),
      isRoot: s === root,
    };
    if (!row.isRoot && (!slowest || durationMs > slowest.durationMs)) slowest = row;
    return row;
  });
  return { rows, totalMs, root, slowestId: slowest?.span.spanId ?? null };
}

// Virtual list window math: which rows of a long list are in view (plus overscan) and where
// each one sits. Pure, so node's test runner checks it; virtual-list.js renders with it.

/**
 * Rows of one fixed height: the half-open index range [start, end) to render for a list
 * scrolled to `scrollTop` with `viewport` pixels in view, `overscan` extra rows each side.
 */
export function fixedWindow({ count, rowHeight, scrollTop, viewport, overscan = 0 }) {
  if (!(count > 0) || !(rowHeight > 0)) return { start: 0, end: 0 };
  const top = Math.max(0, scrollTop);
  const first = Math.min(count - 1, Math.floor(top / rowHeight));
  const inView = Math.ceil(Math.max(0, viewport) / rowHeight) + 1;
  const start = Math.max(0, first - overscan);
  const end = Math.min(count, first + inView + overscan);
  return { start, end };
}

/**
 * Offsets of rows whose height is `rowHeight` except those in `overrides` (index → px):
 * offsets[i] is row i's top, offsets[count] the total height.
 */
export function buildOffsets(count, rowHeight, overrides) {
  const offsets = new Float64Array(Math.max(0, count) + 1);
  let y = 0;
  for (let i = 0; i < count; i += 1) {
    offsets[i] = y;
    const h = overrides && overrides.size ? overrides.get(i) : undefined;
    y += h === undefined ? rowHeight : h;
  }
  offsets[count] = y;
  return offsets;
}

/** The first index whose row ends below `y` (binary search over `offsets`). */
export function rowAt(offsets, count, y) {
  let lo = 0;
  let hi = count - 1;
  if (count <= 0) return 0;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (offsets[mid + 1] <= y) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Rows of varied heights (see buildOffsets): the range [start, end) to render. */
export function variableWindow({ offsets, count, scrollTop, viewport, overscan = 0 }) {
  if (!(count > 0)) return { start: 0, end: 0 };
  const top = Math.max(0, scrollTop);
  const first = rowAt(offsets, count, top);
  const last = rowAt(offsets, count, top + Math.max(0, viewport));
  return {
    start: Math.max(0, first - overscan),
    end: Math.min(count, last + 1 + overscan),
  };
}

/** Whether a scroller is at (or within `slack` pixels of) its end. */
export function atEnd({ scrollTop, clientHeight, scrollHeight }, slack = 8) {
  return scrollTop + clientHeight >= scrollHeight - slack;
}

// Unit tests of src/waterfall.js: spans to waterfall rows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { layoutSpans } from "../src/waterfall.js";

const ms = 1_000_000n;
const span = (spanId, parentSpanId, name, start, end) => ({ spanId, parentSpanId, name, startUnixNano: 1_700_000_000_000n * ms + BigInt(start) * ms, endUnixNano: 1_700_000_000_000n * ms + BigInt(end) * ms, attributes: [] });

test("rows in tree order with depth, % positions and the slowest non-root span", () => {
  const spans = [
    span("r", "", "run", 0, 200),
    span("s1", "r", "step", 0, 50),
    span("s2", "r", "step", 50, 200),
    span("t2", "s2", "tool", 60, 190),
    span("m1", "s1", "model", 5, 45),
  ];
  const { rows, totalMs, slowestId, root } = layoutSpans(spans);
  assert.equal(root.spanId, "r");
  assert.equal(totalMs, 200);
  assert.deepEqual(rows.map((r) => [r.span.spanId, r.depth]), [["r", 0], ["s1", 1], ["m1", 2], ["s2", 1], ["t2", 2]]);
  const t2 = rows.find((r) => r.span.spanId === "t2");
  assert.equal(t2.left, 30);
  assert.equal(t2.width, 65);
  assert.equal(t2.durationMs, 130);
  assert.equal(slowestId, "s2");
});

test("without the run span (a live run), times count from the earliest span", () => {
  const { rows, totalMs, root } = layoutSpans([span("s1", "r", "step", 100, 150), span("t1", "s1", "tool", 110, 140)]);
  assert.equal(root, null);
  assert.equal(totalMs, 50);
  assert.equal(rows[0].depth, 0);
  assert.equal(rows[1].left, 20);
  assert.equal(rows[1].depth, 1);
});

// Unit tests of src/virtual-window.js: which rows a virtual list renders.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fixedWindow, buildOffsets, variableWindow, rowAt, atEnd } from "../src/virtual-window.js";

test("fixed rows: only those in view plus overscan", () => {
  assert.deepEqual(fixedWindow({ count: 10_000, rowHeight: 40, scrollTop: 0, viewport: 400, overscan: 5 }), { start: 0, end: 16 });
  assert.deepEqual(fixedWindow({ count: 10_000, rowHeight: 40, scrollTop: 4000, viewport: 400, overscan: 5 }), { start: 95, end: 116 });
  assert.deepEqual(fixedWindow({ count: 10_000, rowHeight: 40, scrollTop: 1e9, viewport: 400, overscan: 5 }), { start: 9994, end: 10_000 });
  assert.deepEqual(fixedWindow({ count: 3, rowHeight: 40, scrollTop: 0, viewport: 400, overscan: 5 }), { start: 0, end: 3 });
  assert.deepEqual(fixedWindow({ count: 0, rowHeight: 40, scrollTop: 0, viewport: 400 }), { start: 0, end: 0 });
});

test("varied rows: offsets and the window over them", () => {
  const offsets = buildOffsets(5, 10, new Map([[1, 100]]));
  assert.deepEqual([...offsets], [0, 10, 110, 120, 130, 140]);
  assert.equal(rowAt(offsets, 5, 0), 0);
  assert.equal(rowAt(offsets, 5, 10), 1);
  assert.equal(rowAt(offsets, 5, 109), 1);
  assert.equal(rowAt(offsets, 5, 110), 2);
  assert.equal(rowAt(offsets, 5, 1000), 4);
  assert.deepEqual(variableWindow({ offsets, count: 5, scrollTop: 50, viewport: 65, overscan: 0 }), { start: 1, end: 3 });
  assert.deepEqual(variableWindow({ offsets, count: 5, scrollTop: 50, viewport: 65, overscan: 1 }), { start: 0, end: 4 });
});

test("a list of 10,000 rows renders a screenful", () => {
  const offsets = buildOffsets(10_000, 60, new Map());
  const w = variableWindow({ offsets, count: 10_000, scrollTop: 300_000, viewport: 900, overscan: 4 });
  assert.ok(w.end - w.start <= 24, JSON.stringify(w));
  assert.equal(w.start, 4996);
});

test("at the end within a little slack", () => {
  assert.equal(atEnd({ scrollTop: 592, clientHeight: 400, scrollHeight: 1000 }), true);
  assert.equal(atEnd({ scrollTop: 500, clientHeight: 400, scrollHeight: 1000 }), false);
});

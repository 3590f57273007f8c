// Unit tests of src/change-pages.js: a run's file changes read page by page.
import { test } from "node:test";
import assert from "node:assert/strict";
import { changesRead, mergeChangePages, setCounts } from "../src/change-pages.js";

const change = (path) => ({ path, kind: 1, applied: true });
const page = (steps, nextOffset, totalChanges) => ({ workspace: "/w", steps, nextOffset, totalChanges });

test("a step continued on the next page is one step, its changes in order", () => {
  const first = page([
    { step: 1, tool: "a", changeSet: { changes: [change("x")] } },
    { step: 2, tool: "b", changeSet: { changes: [change("y1"), change("y2")], totalChanges: 4n } },
  ], 3n, 6n);
  const second = page([
    { step: 2, tool: "b", changeSet: { changes: [change("y3"), change("y4")], totalChanges: 4n } },
    { step: 3, tool: "c", changeSet: { changes: [change("z")] } },
  ], 0n, 6n);
  const read = mergeChangePages(mergeChangePages(null, first), second);
  assert.deepEqual(read.steps.map((s) => [s.step, s.changeSet.changes.map((c) => c.path)]), [
    [1, ["x"]],
    [2, ["y1", "y2", "y3", "y4"]],
    [3, ["z"]],
  ]);
  assert.equal(read.nextOffset, 0n);
  assert.equal(changesRead(read), 6);
  // The first page is left as it was.
  assert.equal(first.steps[1].changeSet.changes.length, 2);
});

test("a set carrying its first changes says how many it stands for", () => {
  assert.deepEqual(setCounts({ changes: [change("a")], totalChanges: 100001n }), { carried: 1, total: 100001 });
  // Sets recorded before the count existed carry all of theirs.
  assert.deepEqual(setCounts({ changes: [change("a"), change("b")] }), { carried: 2, total: 2 });
  assert.deepEqual(setCounts(undefined), { carried: 0, total: 0 });
});

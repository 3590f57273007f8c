// Unit tests of src/undo.js: an approval's countdown (clamped to its timeout, rounded down),
// the approvals a run's events leave pending, the sign-in form's token check, what a revert
// would do, and the line diff the run page draws a step's files with.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  approvalCountdown, approvalLeftMs, approvalTimeoutMs, asText, askedTimes, checkToken, codePointName,
  denialReasonFromEvents, describeChar, diffLines, firstOfStep, formatLeft, isDenial, listHead,
  pendingFromEvents, revertPlan, unifiedDiff,
} from "../src/undo.js";
import { parseUnifiedDiff } from "../src/diff.js";

const MIN = 60_000;

test("a countdown never shows more than the approval's timeout", () => {
  const asked = 1_700_000_000_000;
  const deadline = BigInt(asked + 10 * MIN);
  // A browser clock 1.5 s behind the daemon's: the deadline looks 10m 01.5s away.
  const now = asked - 1500;
  assert.equal(approvalCountdown(deadline, now), "10m 01s left", "unclamped, the skew shows");
  const timeout = approvalTimeoutMs(deadline, asked);
  assert.equal(timeout, 10 * MIN);
  assert.equal(approvalLeftMs(deadline, now, timeout), 10 * MIN);
  assert.equal(approvalCountdown(deadline, now, timeout), "10m 00s left");
  // Every moment of the wait: never above the timeout.
  for (let t = now; t < asked + 10 * MIN + 2000; t += 997) {
    assert.ok(approvalLeftMs(deadline, t, timeout) <= timeout);
  }
});

test("a countdown rounds seconds down and ends at the deadline", () => {
  const deadline = 1_000_000n;
  assert.equal(approvalCountdown(deadline, 1_000_000 - 600_000 + 1), "9m 59s left");
  assert.equal(approvalCountdown(deadline, 1_000_000 - 45_999), "45s left");
  assert.equal(approvalCountdown(deadline, 1_000_000 - 999), "0s left");
  assert.equal(approvalCountdown(deadline, 1_000_000), "deadline passed");
  assert.equal(approvalCountdown(deadline, 1_000_001), "deadline passed");
  assert.equal(approvalCountdown(0n, 5), "no deadline");
  assert.equal(formatLeft(2 * 3_600_000 + 5 * MIN + 59_999), "2h 05m left");
  assert.equal(formatLeft(MIN), "1m 00s left");
  assert.equal(approvalLeftMs(deadline, 2_000_000, 0), 0);
});

test("an approval's timeout needs both times, deadline after asking", () => {
  assert.equal(approvalTimeoutMs(5000n, 2000n), 3000);
  assert.equal(approvalTimeoutMs(5000n, 0n), 0);
  assert.equal(approvalTimeoutMs(0n, 2000n), 0);
  assert.equal(approvalTimeoutMs(1000n, 2000n), 0);
});

const requested = (id, timeMs = 10n) => ({ ev: { timeMs, event: { case: "approvalRequested", value: { request: { approvalId: id, deadlineMs: 99n } } } } });
const resolved = (id, reason = "") => ({ ev: { timeMs: 20n, event: { case: "approvalResolved", value: { approvalId: id, reason } } } });
const finished = { ev: { timeMs: 30n, event: { case: "runFinished", value: {} } } };

test("a run's events leave pending the approvals asked and not answered", () => {
  const events = [requested("a", 5n), requested("b", 7n), resolved("a")];
  assert.deepEqual(pendingFromEvents(events).map((p) => [p.request.approvalId, p.askedAtMs]), [["b", 7]]);
  assert.deepEqual(pendingFromEvents([...events, finished]), []);
  assert.deepEqual([...askedTimes(events)], [["a", 5], ["b", 7]]);
  // Raw RunEvents read the same as the page's rows.
  assert.equal(pendingFromEvents([requested("c").ev]).length, 1);
});

test("a denial's reason comes from its ApprovalResolved event", () => {
  const events = [requested("a"), resolved("a", "not today"), requested("b"), resolved("b")];
  assert.equal(denialReasonFromEvents(events, "a"), "not today");
  assert.equal(denialReasonFromEvents(events, "b"), "");
  assert.equal(denialReasonFromEvents(events, "z"), "");
  assert.ok(isDenial("denied by the approver"));
  assert.ok(!isDenial("approved once by the approver"));
  assert.ok(!isDenial(undefined));
});

test("a pasted token is trimmed, and a character no header carries is named with its place", () => {
  assert.deepEqual(checkToken("  abc-DEF_123.~  \n"), { token: "abc-DEF_123.~", error: "" });
  assert.equal(
    checkToken("\u201Cabc\u201D").error,
    "The token contains \u201C (U+201C) at position 1; tokens are plain ASCII — paste it again without quotes",
  );
  assert.match(checkToken("abc\u2019").error, /’ \(U\+2019\) at position 4; .*without quotes/);
  assert.match(checkToken("ab cd").error, /a space \(U\+0020\) at position 3; .*without spaces or line breaks/);
  assert.match(checkToken("ab\tcd").error, /a tab \(U\+0009\) at position 3/);
  assert.match(checkToken("abc\u00e9").error, /é \(U\+00E9\) at position 4; tokens are plain ASCII/);
  // A character beyond the BMP is named whole (one position, its code point).
  assert.match(checkToken("ab\u{1F511}x").error, /\u{1F511} \(U\+1F511\) at position 3/u);
  assert.match(checkToken("x\u00a0y").error, /a no-break space \(U\+00A0\) at position 2/);
  assert.match(checkToken("a\u0007b").error, /contains U\+0007 at position 2/);
  // Whitespace of every kind around it goes silently.
  assert.deepEqual(checkToken("\u00a0\ufefftok\u3000"), { token: "tok", error: "" });
  assert.match(checkToken("   ").error, /Enter the access token/);
  // Visible ASCII, quotes included, is what a header may carry.
  assert.equal(checkToken("!\"#~'`").error, "");
});

test("characters are named in words", () => {
  assert.equal(codePointName(0x201c), "U+201C");
  assert.equal(codePointName(0x1f511), "U+1F511");
  assert.equal(describeChar("\u201c"), "\u201c (U+201C)");
  assert.equal(describeChar("\u200b"), "a zero-width space (U+200B)");
  assert.equal(describeChar("\u2003"), "U+2003");
});

test("a revert's lists are cut to a readable length", () => {
  const many = Array.from({ length: 205 }, (_, i) => `f${i}`);
  const { shown, more } = listHead(many);
  assert.equal(shown.length, 200);
  assert.equal(more, 5);
  assert.deepEqual(listHead(undefined), { shown: [], more: 0 });
});

test("a dry run with conflicts needs force; one without does not", () => {
  const plan = revertPlan({ restored: ["a"], removed: ["b"], unrestorable: [], conflicts: [{ path: "a", reason: "changed since", extra: 1 }] });
  assert.equal(plan.needsForce, true);
  assert.deepEqual(plan.conflicts, [{ path: "a", reason: "changed since" }]);
  assert.equal(plan.nothing, false);
  const clean = revertPlan({ restored: ["a"], removed: [], unrestorable: [], conflicts: [] });
  assert.equal(clean.needsForce, false);
  assert.equal(revertPlan({}).nothing, true);
});

test("a step's actions go on its first change set only", () => {
  assert.deepEqual(firstOfStep([{ step: 1 }, { step: 2 }, { step: 2 }, { step: 4 }]), [true, true, false, true]);
});

test("two versions of a file read as a unified diff that diff.js parses back", () => {
  const before = "def mean(v):\n    return sum(v) / (len(v) - 1)\n";
  const after = "def mean(v):\n    return sum(v) / len(v)\n";
  const text = unifiedDiff(before, after, "calc.py");
  assert.equal(text, "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def mean(v):\n-    return sum(v) / (len(v) - 1)\n+    return sum(v) / len(v)\n");
  const [file] = parseUnifiedDiff(text);
  const line = file.rows.find((r) => r.type === "line" && r.left?.kind === "del");
  assert.equal(line.left.text, "    return sum(v) / (len(v) - 1)");
  assert.equal(line.right.text, "    return sum(v) / len(v)");
  assert.equal(unifiedDiff(before, before, "calc.py"), "");
});

test("added, deleted and newline-less files, and far-apart changes in hunks of their own", () => {
  assert.equal(unifiedDiff("", "x\ny\n", "new.txt", { added: true }), "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  assert.equal(unifiedDiff("x\n", "", "old.txt", { deleted: true }), "--- a/old.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n");
  assert.equal(unifiedDiff("a\nb", "a\nb\n", "f"), "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
  const lines = Array.from({ length: 30 }, (_, i) => `l${i}\n`);
  const before = lines.join("");
  const after = lines.map((l, i) => (i === 2 ? "L2\n" : l)).filter((_, i) => i !== 25).join("");
  const text = unifiedDiff(before, after, "f");
  const hunks = text.split("\n").filter((l) => l.startsWith("@@"));
  assert.deepEqual(hunks, ["@@ -1,6 +1,6 @@", "@@ -23,7 +23,6 @@"]);
  // Every line of each side is accounted for, in order.
  const [file] = parseUnifiedDiff(text);
  const lefts = file.rows.filter((r) => r.type === "line" && r.left).map((r) => r.left.no);
  assert.deepEqual(lefts, [1, 2, 3, 4, 5, 6, 23, 24, 25, 26, 27, 28, 29]);
});

test("the edit script keeps what the sides share and removes before it adds", () => {
  const ops = diffLines(["a", "b", "c", "d"], ["a", "x", "c", "d", "e"]);
  assert.deepEqual(ops.map((o) => `${o.op}${o.line}`), [" a", "-b", "+x", " c", " d", "+e"]);
  // Too big a middle to diff here: no diff rather than a stalled page.
  const big = Array.from({ length: 3000 }, (_, i) => `a${i}`);
  const other = Array.from({ length: 3000 }, (_, i) => `b${i}`);
  assert.equal(diffLines(big, other), null);
  assert.equal(unifiedDiff(`${big.join("\n")}\n`, `${other.join("\n")}\n`, "f"), null);
});

test("bytes read as text only when they are UTF-8 without NUL bytes", () => {
  assert.equal(asText(new TextEncoder().encode("héllo")), "héllo");
  assert.equal(asText(new Uint8Array([0x61, 0, 0x62])), null);
  assert.equal(asText(new Uint8Array([0xff, 0xfe])), null);
  assert.equal(asText(undefined), "");
});

// Pure helpers of the run page's undo and fork, its inline approvals and the sign-in form:
// an approval's countdown (never above its timeout, whole seconds rounded down), which
// approvals a run's events leave pending, the check of a pasted token, what a revert would
// do (lists cut to a readable length) and a line diff of a file's two versions as a unified
// diff for diff-view.js. No DOM, no registry: the tests run them under node.

/** The most paths a revert's list shows; the rest are counted. */
export const MAX_PATHS = 200;

/** The most lines a file may have on either side for the page to diff it. */
export const MAX_DIFF_LINES = 20000;

/** The most cells (lines × lines) the middle of a diff may need; past it, no diff is made. */
const MAX_DIFF_CELLS = 4_000_000;

function toNumber(value) {
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "number") return value;
  return 0;
}

function pad2(n) {
  return String(n).padStart(2, "0");
}

/**
 * Milliseconds left before an approval's deadline as the page should count them: the
 * deadline minus now, never below 0 and, when the approval's timeout is known, never above
 * it (a browser clock behind the daemon's must not add time the approval never had).
 */
export function approvalLeftMs(deadlineMs, nowMs, timeoutMs = 0) {
  const deadline = toNumber(deadlineMs);
  if (!deadline) return Infinity;
  let left = deadline - nowMs;
  const timeout = toNumber(timeoutMs);
  if (timeout > 0) left = Math.min(left, timeout);
  return Math.max(0, left);
}

/** "10m 00s left", "45s left", "1h 05m left", "deadline passed": seconds rounded down. */
export function formatLeft(leftMs) {
  if (leftMs === Infinity) return "no deadline";
  if (!(leftMs > 0)) return "deadline passed";
  const totalS = Math.floor(leftMs / 1000);
  const h = Math.floor(totalS / 3600);
  const m = Math.floor((totalS % 3600) / 60);
  const s = totalS % 60;
  if (h > 0) return `${h}h ${pad2(m)}m left`;
  if (m > 0) return `${m}m ${pad2(s)}s left`;
  return `${s}s left`;
}

/** An approval's countdown text: formatLeft(approvalLeftMs(…)). */
export function approvalCountdown(deadlineMs, nowMs, timeoutMs = 0) {
  return formatLeft(approvalLeftMs(deadlineMs, nowMs, timeoutMs));
}

/**
 * An approval's timeout, from its deadline and the time of the event that asked (both the
 * daemon's clock); 0 when either is unknown.
 */
export function approvalTimeoutMs(deadlineMs, askedAtMs) {
  const deadline = toNumber(deadlineMs);
  const asked = toNumber(askedAtMs);
  return deadline > 0 && asked > 0 && deadline > asked ? deadline - asked : 0;
}

/**
 * The approvals a run's events leave unanswered, in the order asked: each approvalRequested
 * event's request with the time it was asked at, unless an approvalResolved of the same id
 * followed, or the run finished. `events` are the run page's rows ({ ev }, ev a RunEvent).
 * @returns {{ request: object, askedAtMs: number }[]}
 */
export function pendingFromEvents(events) {
  const pending = new Map();
  for (const row of events) {
    const ev = row.ev ?? row;
    const kind = ev?.event?.case;
    const v = ev?.event?.value;
    if (kind === "approvalRequested" && v?.request?.approvalId) {
      pending.set(v.request.approvalId, { request: v.request, askedAtMs: toNumber(ev.timeMs) });
    } else if (kind === "approvalResolved" && v) {
      pending.delete(v.approvalId);
    } else if (kind === "runFinished") {
      pending.clear();
    }
  }
  return [...pending.values()];
}

/** When each approval of a run was asked (its approvalRequested event's time): id → ms. */
export function askedTimes(events) {
  const times = new Map();
  for (const row of events) {
    const ev = row.ev ?? row;
    if (ev?.event?.case === "approvalRequested" && ev.event.value?.request?.approvalId) {
      times.set(ev.event.value.request.approvalId, toNumber(ev.timeMs));
    }
  }
  return times;
}

/** The reason of a denial recorded in a run's events (ApprovalResolved.reason), or "". */
export function denialReasonFromEvents(events, approvalId) {
  for (const row of events) {
    const ev = row.ev ?? row;
    if (ev?.event?.case === "approvalResolved" && ev.event.value.approvalId === approvalId) {
      return ev.event.value.reason || "";
    }
  }
  return "";
}

/** Whether an answered approval's detail ("denied by the approver", …) says it was denied. */
export function isDenial(detail) {
  return /^denied\b/i.test(String(detail ?? ""));
}

const QUOTES = new Set([
  0xab, 0xbb, 0x2018, 0x2019, 0x201a, 0x201b, 0x201c, 0x201d, 0x201e, 0x201f,
  0x2039, 0x203a, 0x2032, 0x2033, 0x300c, 0x300d, 0x300e, 0x300f, 0xff02, 0xff07,
]);

const NAMED = {
  0x09: "a tab",
  0x0a: "a line break",
  0x0d: "a carriage return",
  0x20: "a space",
  0xa0: "a no-break space",
  0x200b: "a zero-width space",
  0x200d: "a zero-width joiner",
  0x2028: "a line separator",
  0xfeff: "a byte order mark",
};

/** "U+201C" for a code point. */
export function codePointName(cp) {
  return `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
}

/** A character as words: "“ (U+201C)", "a space (U+0020)", "U+0007" (unprintable). */
export function describeChar(ch) {
  const cp = ch.codePointAt(0);
  const name = codePointName(cp);
  if (NAMED[cp]) return `${NAMED[cp]} (${name})`;
  // Controls, other spaces and separators, format characters: nothing to see, only a name.
  if (/[\p{C}\p{Z}]/u.test(ch)) return name;
  return `${ch} (${name})`;
}

/**
 * A pasted access token, checked before it is tried: leading and trailing whitespace goes
 * silently; any other character outside visible ASCII (0x21–0x7E, what an HTTP header value
 * may carry) is refused in words naming it and its position (1-based, in characters).
 * @returns {{ token: string, error: string }}
 */
export function checkToken(raw) {
  const token = String(raw ?? "").trim();
  if (!token) return { token, error: "Enter the access token the daemon's operator gave you." };
  let position = 0;
  for (const ch of token) {
    position += 1;
    const cp = ch.codePointAt(0);
    if (cp >= 0x21 && cp <= 0x7e) continue;
    let why = "tokens are plain ASCII — paste it again as plain text";
    if (QUOTES.has(cp)) why = "tokens are plain ASCII — paste it again without quotes";
    else if (/\s/u.test(ch) || NAMED[cp]) why = "tokens are one word of visible ASCII — paste it again without spaces or line breaks";
    return { token, error: `The token contains ${describeChar(ch)} at position ${position}; ${why}` };
  }
  return { token, error: "" };
}

/** The first `max` items of a list and how many more there are. */
export function listHead(items, max = MAX_PATHS) {
  const all = items ?? [];
  return { shown: all.slice(0, max), more: Math.max(0, all.length - max) };
}

/**
 * What a RevertRunResponse says, for the page: the lists (conflicts and unrestorable as
 * { path, reason }), whether there is anything to do, and whether a plain revert is refused.
 */
export function revertPlan(response) {
  const restored = [...(response?.restored ?? [])];
  const removed = [...(response?.removed ?? [])];
  const unrestorable = (response?.unrestorable ?? []).map((c) => ({ path: c.path, reason: c.reason }));
  const conflicts = (response?.conflicts ?? []).map((c) => ({ path: c.path, reason: c.reason }));
  return {
    restored,
    removed,
    unrestorable,
    conflicts,
    nothing: !restored.length && !removed.length && !unrestorable.length && !conflicts.length,
    needsForce: conflicts.length > 0,
  };
}

/** The steps whose first change set is at index i of `steps` (actions go on the first). */
export function firstOfStep(steps) {
  const seen = new Set();
  return (steps ?? []).map((s) => {
    if (seen.has(s.step)) return false;
    seen.add(s.step);
    return true;
  });
}

/** A text's lines, each with its "\n" (the last one may have none). */
function splitLines(text) {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** The edit script between two line lists: [{ op: " " | "-" | "+", line }] or null (too big). */
export function diffLines(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA -= 1;
    endB -= 1;
  }
  const n = endA - start;
  const m = endB - start;
  if ((n + 1) * (m + 1) > MAX_DIFF_CELLS) return null;
  // Longest common subsequence of the middle, from the end: lcs[i][j] for a[i..], b[j..].
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[i * width + j] = a[start + i] === b[start + j]
        ? lcs[(i + 1) * width + j + 1] + 1
        : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
    }
  }
  const ops = [];
  for (let k = 0; k < start; k += 1) ops.push({ op: " ", line: a[k] });
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[start + i] === b[start + j]) {
      ops.push({ op: " ", line: a[start + i] });
      i += 1;
      j += 1;
    } else if (i < n && (j === m || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])) {
      // A removal first whenever it keeps as much in common: removals before additions.
      ops.push({ op: "-", line: a[start + i] });
      i += 1;
    } else {
      ops.push({ op: "+", line: b[start + j] });
      j += 1;
    }
  }
  for (let k = endA; k < a.length; k += 1) ops.push({ op: " ", line: a[k] });
  return ops;
}

/**
 * Two versions of a file (text; "" for a side that does not exist) as a unified diff with
 * `context` lines around each change, named `a/<path>` and `b/<path>`. "" when they are the
 * same; null when either is too long to diff here.
 */
export function unifiedDiff(before, after, path, { context = 3, added = false, deleted = false } = {}) {
  if (before === after) return "";
  const old = splitLines(before);
  const neu = splitLines(after);
  if (old.length > MAX_DIFF_LINES || neu.length > MAX_DIFF_LINES) return null;
  const ops = diffLines(old, neu);
  if (!ops) return null;
  const out = [`--- ${added ? "/dev/null" : `a/${path}`}`, `+++ ${deleted ? "/dev/null" : `b/${path}`}`];
  // Where each op starts on each side (1-based line numbers).
  let oldNo = 1;
  let newNo = 1;
  const positions = ops.map((o) => {
    const at = { oldNo, newNo };
    if (o.op !== "+") oldNo += 1;
    if (o.op !== "-") newNo += 1;
    return at;
  });
  let k = 0;
  while (k < ops.length) {
    if (ops[k].op === " ") {
      k += 1;
      continue;
    }
    // A hunk: `context` lines before this change to `context` after the last change that
    // leaves at most 2 × context unchanged lines after the one before it.
    const from = Math.max(0, k - context);
    let last = k;
    for (let scan = k + 1; scan < ops.length && scan - last <= 2 * context + 1; scan += 1) {
      if (ops[scan].op !== " ") last = scan;
    }
    const to = Math.min(ops.length, last + context + 1);
    const hunk = ops.slice(from, to);
    const oldCount = hunk.filter((o) => o.op !== "+").length;
    const newCount = hunk.filter((o) => o.op !== "-").length;
    // An empty side's start is the line before (0 for an empty file).
    const oldStart = oldCount ? positions[from].oldNo : positions[from].oldNo - 1;
    const newStart = newCount ? positions[from].newNo : positions[from].newNo - 1;
    out.push(`@@ -${oldStart},${oldCount} +${newStart},${newCount} @@`);
    for (const o of hunk) {
      const ended = o.line.endsWith("\n");
      out.push(`${o.op}${ended ? o.line.slice(0, -1) : o.line}`);
      if (!ended) out.push("\\ No newline at end of file");
    }
    k = to;
  }
  return `${out.join("\n")}\n`;
}

/** Whether bytes read as text: valid UTF-8 without NUL bytes. Returns the text or null. */
export function asText(bytes) {
  if (!bytes) return "";
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

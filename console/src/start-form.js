// Starting and continuing work, the pure parts: a workspace path composed from a root and a
// subdirectory (kept inside the root), the task's size in UTF-8 bytes, budgets typed as
// text, the StartRun request the New run form sends, the runs list's task search (the
// daemon's rule: ASCII letters compared without case), and reading a StartRun stream up to
// the run it started. No DOM and no registry, so the tests run them under node.

/** Lowercases A–Z only, as the daemon's search does (`to_ascii_lowercase`). */
export function asciiLower(text) {
  return String(text ?? "").replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}

/** Whether a run's input matches the list's "Task contains" text (empty matches all). */
export function matchesQuery(input, query) {
  if (!query) return true;
  return asciiLower(input).includes(asciiLower(query));
}

/** The most bytes ListRunsRequest.query may be. */
export const MAX_QUERY_BYTES = 200;

/** The length of `text` in UTF-8 bytes. */
export function utf8Length(text) {
  const s = String(text ?? "");
  let n = 0;
  for (let i = 0; i < s.length; i += 1) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i += 1;
    } else n += 3; // the rest of the BMP, and a lone surrogate (sent as U+FFFD)
  }
  return n;
}

function trimSlashes(path) {
  return path.replace(/\/+$/, "");
}

/**
 * The absolute workspace path for `root` (one of DaemonInfo.workspaceRoots) and `sub`, a
 * path inside it as typed ("", "proj", "proj/src/"; an absolute path inside the root is taken
 * too). Returns { path, error }: no `..`, nothing outside the root, no NUL.
 */
export function composeWorkspace(root, sub) {
  const base = trimSlashes(String(root ?? ""));
  let rest = String(sub ?? "").trim();
  if (!root) return { path: "", error: rest ? "Choose a workspace root first." : "" };
  if (rest.includes("\0")) return { path: "", error: "The path cannot contain a NUL character." };
  if (rest.startsWith("/")) {
    if (rest === base || trimSlashes(rest) === base) rest = "";
    else if (rest.startsWith(`${base}/`)) rest = rest.slice(base.length + 1);
    else return { path: "", error: `An absolute path must lie inside ${root}; or type a path relative to it.` };
  }
  const parts = rest.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) return { path: "", error: "The path cannot contain “..”: it must stay inside the root." };
  const path = parts.length ? `${base}/${parts.join("/")}` : base || "/";
  if (path !== (base || "/") && !path.startsWith(`${base}/`)) {
    return { path: "", error: `The path must lie inside ${root}.` };
  }
  return { path, error: "" };
}

/**
 * The root and subdirectory that give `path` back: the longest root it lies in (for a
 * workspace named in the URL). { root: "", sub: "" } when it is in none.
 */
export function splitWorkspace(path, roots) {
  const p = trimSlashes(String(path ?? "").trim());
  let best = null;
  for (const root of roots ?? []) {
    const base = trimSlashes(root);
    if (p === base || p.startsWith(`${base}/`) || (base === "" && p.startsWith("/"))) {
      if (!best || base.length > trimSlashes(best).length) best = root;
    }
  }
  if (best === null) return { root: "", sub: "" };
  const base = trimSlashes(best);
  return { root: best, sub: p.slice(base.length).replace(/^\/+/, "") };
}

/** The last component of a path, for a narrow column: "/a/b/proj/" → "proj". */
export function lastPathComponent(path) {
  const p = trimSlashes(String(path ?? ""));
  if (!p) return String(path ?? "") ? "/" : "";
  return p.slice(p.lastIndexOf("/") + 1);
}

/** A text on one line (whitespace runs made one space), cut to `max` characters. */
export function oneLine(text, max = 160) {
  const s = String(text ?? "").replace(/\s+/g, " ").trim();
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

const UINT32_MAX = 4294967295;

/**
 * A budget typed as text: "" → 0 (the daemon's), digits → the number. `scale` multiplies it
 * (seconds → ms); `wide` gives a bigint (uint64 fields). { value, error }.
 */
export function parseBudget(text, { wide = false, scale = 1 } = {}) {
  const s = String(text ?? "").trim().replaceAll(",", "").replaceAll("_", "");
  if (s === "") return { value: wide ? 0n : 0, error: "" };
  if (!/^\d+$/.test(s)) return { value: wide ? 0n : 0, error: "A whole number, or empty for the daemon's default." };
  if (wide) {
    const value = BigInt(s) * BigInt(scale);
    if (value > 18446744073709551615n) return { value: 0n, error: "Too large." };
    return { value, error: "" };
  }
  const value = Number(s) * scale;
  if (!Number.isSafeInteger(value) || value > UINT32_MAX) return { value: 0, error: `At most ${UINT32_MAX}.` };
  return { value, error: "" };
}

/**
 * The New run form's fields → { request, errors }: `errors` maps a field key (workspace,
 * model, task, maxSteps, maxToolCalls, wallTime) to what is wrong; the request is what
 * Agent.StartRun takes when there is none.
 */
export function buildStartRun(form, { maxInputBytes = 0 } = {}) {
  const errors = {};
  const ws = composeWorkspace(form.root, form.sub);
  if (ws.error) errors.workspace = ws.error;
  const model = String(form.model ?? "").trim();
  if (!model) errors.model = "Name a model, as provider:model (e.g. openai:gpt-4.1).";
  const input = String(form.task ?? "");
  if (!input.trim()) errors.task = "Say what the run should do.";
  else if (maxInputBytes && utf8Length(input) > maxInputBytes) {
    errors.task = `The task is ${utf8Length(input)} bytes; at most ${maxInputBytes} are taken.`;
  }
  const steps = parseBudget(form.maxSteps);
  const calls = parseBudget(form.maxToolCalls);
  const wall = parseBudget(form.wallTime, { wide: true, scale: 1000 });
  if (steps.error) errors.maxSteps = steps.error;
  if (calls.error) errors.maxToolCalls = calls.error;
  if (wall.error) errors.wallTime = wall.error;

  const request = {
    workspace: ws.path,
    input,
    model: { model },
    approvalPolicy: Number(form.policy) || 0,
    tools: [...(form.tools ?? [])],
  };
  if (steps.value || calls.value || wall.value) {
    request.budgets = { maxSteps: steps.value, maxToolCalls: calls.value, maxWallTimeMs: wall.value };
  }
  return { request, errors };
}

/** The form field an INVALID_ARGUMENT message names ("start.model.model: …" → "model"), or "". */
export function fieldOfError(message) {
  const m = /^(?:start\.)?([a-z_]+)(?:\.([a-z_]+))?(?:\[\d+\])?(?:\.[a-z_.]+)?:/.exec(String(message ?? ""));
  if (!m) return "";
  const [, first, second] = m;
  switch (first) {
    case "workspace":
      return "workspace";
    case "model":
      return "model";
    case "input":
      return "task";
    case "tools":
      return "tools";
    case "approval_policy":
      return "policy";
    case "budgets":
      return { max_steps: "maxSteps", max_tool_calls: "maxToolCalls", max_wall_time_ms: "wallTime" }[second] ?? "budgets";
    default:
      return "";
  }
}

/**
 * Reads a StartRun stream until its first event and returns { runId, sessionId } of the run
 * it started (RunStarted carries the session). Throws when the stream ends without one.
 */
export async function firstRun(events) {
  for await (const event of events) {
    if (!event?.runId) continue;
    const started = event.event?.case === "runStarted" ? event.event.value : null;
    return { runId: event.runId, sessionId: started?.sessionId ?? "" };
  }
  throw new Error("The daemon ended the stream without starting a run.");
}

/** Runs oldest first: by created-at, then by id (the session page's order). */
export function oldestFirst(a, b) {
  const ta = Number(a.createdAtMs ?? 0);
  const tb = Number(b.createdAtMs ?? 0);
  if (ta !== tb) return ta - tb;
  return a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0;
}

/** Whether the key event is Ctrl/Cmd+Enter (submit from a textarea). */
export function isSubmitKey(event) {
  return event.key === "Enter" && Boolean(event.ctrlKey || event.metaKey) && !event.isComposing;
}

const BUDGET_WORDS = [
  ["maxSteps", "steps"],
  ["maxToolCalls", "tool calls"],
  ["maxTokens", "tokens"],
  ["maxWallTimeMs", "wall time"],
  ["maxRepeatedErrors", "repeated errors"],
  ["maxRepeatedCalls", "repeated calls"],
  ["maxIdleSteps", "idle steps"],
  ["contextTokens", "context tokens per step"],
];

/** A Budgets message's set ceilings as words ("at most 10 steps", "wall time 5m 00s"); [] when none. */
export function budgetWords(budgets, formatDuration) {
  const out = [];
  for (const [key, words] of BUDGET_WORDS) {
    const v = Number(budgets?.[key] ?? 0);
    if (!v) continue;
    if (key === "maxWallTimeMs") out.push(`wall time ${formatDuration ? formatDuration(v) : `${v} ms`}`);
    else out.push(`${v.toLocaleString("en-US")} ${words}`);
  }
  return out;
}

// The review pages' pure logic: a line diff (LCS) of a hosted MCP server's tool definitions,
// trusted against seen, split into its two sides, with bounds on what is shown and the
// invisible characters a hostile server could hide words with made visible; and the files
// `airlock eval` writes (report.json, `airlock eval compare --json`) read with their shape
// checked, and their rates and differences put in words. No DOM and no registry, so node's
// tests run it.

/** The most of one side of one part of a tool definition the page shows. */
export const MAX_SIDE_CHARS = 20_000;

/** Past this many cells (lines × lines) the diff's middle is shown as removed, then added. */
const MAX_DIFF_CELLS = 4_000_000;

/** The largest eval file the page reads. */
export const MAX_EVAL_BYTES = 20 * 1024 * 1024;

/** The report layout this console reads (eval/src/report.rs: FORMAT). */
export const REPORT_FORMAT = 1;

// ---------------------------------------------------------------------------------------
// Line diff

function splitLines(text) {
  if (text === null || text === undefined) return [];
  return String(text).split("\n");
}

/**
 * The lines of `a` and `b` as a diff: `{ type: "same" | "del" | "add", text, a?, b? }` in
 * order (a change's removed lines before its added ones), `a` / `b` the 1-based line numbers
 * on each side. `null` stands for a side that is not there at all (every line of the other
 * is added or removed).
 */
export function lineDiff(a, b) {
  const x = splitLines(a);
  const y = splitLines(b);
  const ops = [];
  let start = 0;
  while (start < x.length && start < y.length && x[start] === y[start]) {
    ops.push({ type: "same", text: x[start], a: start + 1, b: start + 1 });
    start += 1;
  }
  let endX = x.length;
  let endY = y.length;
  while (endX > start && endY > start && x[endX - 1] === y[endY - 1]) {
    endX -= 1;
    endY -= 1;
  }
  middle(x, y, start, endX, start, endY, ops);
  for (let i = endX, j = endY; i < x.length; i += 1, j += 1) {
    ops.push({ type: "same", text: x[i], a: i + 1, b: j + 1 });
  }
  return ops;
}

/** The longest common subsequence of x[x0..x1) and y[y0..y1), walked into `ops`. */
function middle(x, y, x0, x1, y0, y1, ops) {
  const n = x1 - x0;
  const m = y1 - y0;
  const del = (i) => ops.push({ type: "del", text: x[i], a: i + 1 });
  const add = (j) => ops.push({ type: "add", text: y[j], b: j + 1 });
  if (n === 0 || m === 0 || (n + 1) * (m + 1) > MAX_DIFF_CELLS) {
    for (let i = x0; i < x1; i += 1) del(i);
    for (let j = y0; j < y1; j += 1) add(j);
    return;
  }
  // lcs[i * (m + 1) + j]: the LCS length of x[x0 + i..x1) and y[y0 + j..y1).
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[i * w + j] = x[x0 + i] === y[y0 + j]
        ? lcs[(i + 1) * w + j + 1] + 1
        : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[x0 + i] === y[y0 + j]) {
      ops.push({ type: "same", text: x[x0 + i], a: x0 + i + 1, b: y0 + j + 1 });
      i += 1;
      j += 1;
    } else if (lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
      del(x0 + i);
      i += 1;
    } else {
      add(y0 + j);
      j += 1;
    }
  }
  for (; i < n; i += 1) del(x0 + i);
  for (; j < m; j += 1) add(y0 + j);
}

/** A diff's two columns: the old side (same and removed lines), the new (same and added). */
export function diffSides(ops) {
  return {
    left: ops.filter((op) => op.type !== "add"),
    right: ops.filter((op) => op.type !== "del"),
  };
}

// ---------------------------------------------------------------------------------------
// Hostile text

// Controls (but tab and newline), soft hyphen, bidi marks, embeddings, overrides and
// isolates, zero-width characters, invisible fillers, variation selectors, the BOM,
// interlinear annotations, and the Unicode tag block ("ASCII smuggling").
const INVISIBLE =
  /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u061C\u115F\u1160\u17B4\u17B5\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF9-\uFFFB\u{E0000}-\u{E007F}]/gu;

/** `text` with each invisible or direction-changing character shown as ⟨U+XXXX⟩. */
export function revealInvisible(text) {
  return String(text ?? "").replace(INVISIBLE, (ch) => `⟨U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

/** Whether `text` holds characters revealInvisible shows. */
export function hasInvisible(text) {
  INVISIBLE.lastIndex = 0;
  const found = INVISIBLE.test(String(text ?? ""));
  INVISIBLE.lastIndex = 0;
  return found;
}

/** The first `max` characters of `text` (never half a surrogate pair): `{ text, cut, total }`. */
export function boundText(text, max = MAX_SIDE_CHARS) {
  const s = String(text ?? "");
  if (s.length <= max) return { text: s, cut: false, total: s.length };
  let end = max;
  const code = s.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return { text: s.slice(0, end), cut: true, total: s.length };
}

// ---------------------------------------------------------------------------------------
// MCP tool definitions

/** JSON with every object's keys sorted (as the daemon digests it), two spaces a level. */
export function canonicalJson(value) {
  return JSON.stringify(sortKeys(value), null, 2) ?? "null";
}

// Built with Object.fromEntries, which defines each key as an own property: an assignment
// would make a hostile server's `__proto__` key the copy's prototype instead, and that field
// would vanish from the review while the model still reads it.
function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortKeys(value[key])]));
  }
  return value;
}

const PARTS = [
  { key: "description", label: "Description" },
  { key: "input_schema", label: "Input schema" },
  { key: "annotations", label: "Annotations" },
  { key: "name", label: "Name" },
  { key: "other", label: "Other fields" },
  { key: "definition", label: "Definition" },
];

/**
 * A definition (`McpToolDifference.trusted_json` / `seen_json`: `name`, `description`,
 * `input_schema`, `annotations`) as texts by part; `null` when there is none (empty).
 * Anything that is not such an object is one part, `definition`, as it came.
 */
export function definitionParts(json) {
  if (json === null || json === undefined || json === "") return null;
  let value;
  try {
    value = JSON.parse(json);
  } catch {
    return { definition: String(json) };
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) return { definition: canonicalJson(value) };
  const { name, description, input_schema: schema, annotations, ...rest } = value;
  const parts = {};
  parts.description = typeof description === "string" ? description : description == null ? "" : canonicalJson(description);
  parts.input_schema = schema === undefined ? "" : canonicalJson(schema);
  if (annotations !== undefined && annotations !== null) parts.annotations = canonicalJson(annotations);
  if (name !== undefined) parts.name = typeof name === "string" ? name : canonicalJson(name);
  if (Object.keys(rest).length) parts.other = canonicalJson(rest);
  return parts;
}

/**
 * One differing tool as the review shows it: `change` is "new" (nothing trusted), "removed"
 * (no longer listed) or "changed"; each part has its two sides' lines (`null` for a side
 * that is not there), whether it changed, and whether a side was cut to `max` characters.
 */
export function reviewTool({ tool, trustedJson, seenJson }, max = MAX_SIDE_CHARS) {
  const trusted = definitionParts(trustedJson);
  const seen = definitionParts(seenJson);
  const change = !trusted && !seen ? "unknown" : !trusted ? "new" : !seen ? "removed" : "changed";
  const parts = [];
  for (const { key, label } of PARTS) {
    const a = trusted ? trusted[key] : undefined;
    const b = seen ? seen[key] : undefined;
    if (a === undefined && b === undefined) continue;
    // The name is the heading's: a part only when both sides give it, and differently.
    if (key === "name" && (a === b || !trusted || !seen)) continue;
    const left = trusted ? boundText(a ?? "", max) : null;
    const right = seen ? boundText(b ?? "", max) : null;
    const sides = diffSides(lineDiff(left ? left.text : null, right ? right.text : null));
    parts.push({
      key,
      label,
      // Whether the part differs between two definitions (a new or removed tool has one).
      changed: !!trusted && !!seen && a !== b,
      trusted: left && { lines: sides.left, cut: left.cut, total: left.total },
      seen: right && { lines: sides.right, cut: right.cut, total: right.total },
    });
  }
  return { tool: String(tool ?? ""), change, parts };
}

// ---------------------------------------------------------------------------------------
// Eval files

const KINDS = {
  string: (v) => typeof v === "string",
  number: (v) => typeof v === "number" && Number.isFinite(v),
  boolean: (v) => typeof v === "boolean",
  array: Array.isArray,
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
};

const WORDS = { string: "a string", number: "a number", boolean: "true or false", array: "a list", object: "an object" };

function kindOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "number") return "a number";
  if (typeof value === "string") return "a string";
  if (typeof value === "boolean") return value ? "true" : "false";
  return typeof value === "object" ? "an object" : typeof value;
}

/** A shape mismatch, thrown to the top of a check with where it was found. */
class ShapeError extends Error {}

function at(path, key) {
  return typeof key === "number" ? `${path}[${key}]` : path ? `${path}.${key}` : key;
}

/** Checks `obj[key]` is of `kind` ("number", "number?" for number or null, …); returns it. */
function field(obj, path, key, kind) {
  const optional = kind.endsWith("?");
  const base = optional ? kind.slice(0, -1) : kind;
  const where = at(path, key);
  if (!(key in obj)) {
    if (optional) return null;
    throw new ShapeError(`${where} is missing`);
  }
  const value = obj[key];
  if (value === null && optional) return null;
  if (!KINDS[base](value)) throw new ShapeError(`${where} should be ${WORDS[base]}${optional ? " or null" : ""}, not ${kindOf(value)}`);
  return value;
}

function each(obj, path, key, check) {
  const list = field(obj, path, key, "array");
  list.forEach((item, i) => {
    const where = at(at(path, key), i);
    if (check === "string") {
      if (typeof item !== "string") throw new ShapeError(`${where} should be a string, not ${kindOf(item)}`);
      return;
    }
    if (!KINDS.object(item)) throw new ShapeError(`${where} should be an object, not ${kindOf(item)}`);
    check(item, where);
  });
  return list;
}

function object(obj, path, key, check, optional = false) {
  const value = field(obj, path, key, optional ? "object?" : "object");
  if (value) check(value, at(path, key));
  return value;
}

function checkInterval(v, path) {
  field(v, path, "low", "number");
  field(v, path, "high", "number");
}

function checkRate(v, path) {
  field(v, path, "passed", "number");
  field(v, path, "attempts", "number");
  field(v, path, "rate", "number");
  object(v, path, "ci95", checkInterval);
}

function checkAggregate(v, path) {
  for (const key of ["attempts", "passed", "failed", "unfinished"]) field(v, path, key, "number");
  object(v, path, "pass_rate", checkRate, true);
  for (const key of ["mean_steps", "mean_tokens", "mean_cost_usd", "mean_wall_s"]) field(v, path, key, "number?");
  for (const key of ["input_tokens", "output_tokens", "cost_usd", "cost_unknown", "wall_s"]) field(v, path, key, "number");
  field(v, path, "stop_reasons", "object");
}

const STATUSES = ["passed", "failed", "unfinished"];

function checkStatus(v, path) {
  const status = field(v, path, "status", "string");
  if (!STATUSES.includes(status)) throw new ShapeError(`${at(path, "status")} should be passed, failed or unfinished, not “${status.slice(0, 40)}”`);
}

function checkAttempt(v, path) {
  field(v, path, "task", "string");
  field(v, path, "repeat", "number");
  checkStatus(v, path);
  field(v, path, "run_id", "string");
  field(v, path, "error", "string?");
  object(v, path, "trace", (t, p) => {
    field(t, p, "run_id", "string");
    field(t, p, "trace_id", "string");
  }, true);
  object(v, path, "outcome", (o, p) => {
    field(o, p, "steps", "number");
    field(o, p, "input_tokens", "number");
    field(o, p, "output_tokens", "number");
    field(o, p, "wall_s", "number");
    field(o, p, "stop_reason", "string?");
    if (!(typeof o.cost_usd === "number" || o.cost_usd === "unknown")) {
      throw new ShapeError(`${at(p, "cost_usd")} should be a number or "unknown", not ${kindOf(o.cost_usd)}`);
    }
  });
  each(v, path, "verdicts", (verdict, p) => {
    field(verdict, p, "grader", "string");
    field(verdict, p, "label", "string");
    field(verdict, p, "passed", "boolean");
    field(verdict, p, "detail", "string");
  });
}

function checkTask(v, path) {
  field(v, path, "id", "string");
  field(v, path, "input", "string");
  field(v, path, "model", "string");
  field(v, path, "repeats", "number");
  field(v, path, "nondeterministic", "boolean");
  each(v, path, "nondeterministic_reasons", "string");
  object(v, path, "summary", checkAggregate);
  each(v, path, "attempts", checkAttempt);
}

function checkReport(v) {
  field(v, "", "format", "number");
  for (const key of ["suite", "label", "result_id", "started_at", "finished_at"]) field(v, "", key, "string");
  for (const key of ["description", "endpoint", "suite_file", "variant"]) field(v, "", key, "string?");
  checkStatus(v, "");
  field(v, "", "exit_code", "number");
  each(v, "", "thresholds", (t, p) => {
    field(t, p, "name", "string");
    field(t, p, "limit", "number");
    field(t, p, "actual", "number?");
    field(t, p, "passed", "boolean");
    field(t, p, "detail", "string");
  });
  object(v, "", "totals", checkAggregate);
  each(v, "", "graders", (g, p) => {
    field(g, p, "grader", "string");
    field(g, p, "deterministic", "boolean");
    field(g, p, "passed", "number");
    field(g, p, "failed", "number");
  });
  each(v, "", "tasks", checkTask);
}

function checkSideSummary(v, path) {
  object(v, path, "pass_rate", checkRate, true);
  for (const key of ["mean_steps", "mean_tokens", "mean_cost_usd", "mean_wall_s"]) field(v, path, key, "number?");
  field(v, path, "stop_reasons", "object");
}

function checkTaskComparison(v, path) {
  field(v, path, "id", "string");
  field(v, path, "nondeterministic", "boolean");
  object(v, path, "a", checkSideSummary);
  object(v, path, "b", checkSideSummary);
  object(v, path, "difference", (d, p) => {
    field(d, p, "difference", "number");
    object(d, p, "ci95", checkInterval);
    field(d, p, "significant", "boolean");
  }, true);
  object(v, path, "ratios", (r, p) => {
    for (const key of ["steps", "tokens", "cost_usd", "wall_s"]) field(r, p, key, "number?");
  });
  each(v, path, "stop_reason_changes", "string");
}

function checkComparison(v) {
  field(v, "", "suite", "string");
  for (const side of ["a", "b"]) {
    object(v, "", side, (s, p) => {
      field(s, p, "label", "string");
      field(s, p, "result_id", "string");
      field(s, p, "report", "string?");
      field(s, p, "started_at", "string?");
    });
  }
  each(v, "", "tasks", checkTaskComparison);
  object(v, "", "overall", checkTaskComparison);
  each(v, "", "only_in_a", "string");
  each(v, "", "only_in_b", "string");
}

function looksLikeComparison(v) {
  return "overall" in v && "a" in v && "b" in v && "tasks" in v;
}

/**
 * An eval file's text read: `{ kind: "report", name, report }`, `{ kind: "comparison", name,
 * comparison }`, or `{ kind: "error", name, message }` saying what it is not and why.
 */
export function readEvalText(text, name = "the file") {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { kind: "error", name, message: `${name} is not JSON (${err.message}), so it is not an eval report.` };
  }
  if (!KINDS.object(value)) {
    return { kind: "error", name, message: `${name} is not an eval report: it holds ${kindOf(value)}, not a JSON object.` };
  }
  try {
    if ("format" in value) {
      if (value.format !== REPORT_FORMAT) {
        return {
          kind: "error",
          name,
          message: `${name} is not a report this console reads: its format is ${typeof value.format === "number" ? value.format : kindOf(value.format)}, this console reads format ${REPORT_FORMAT}.`,
        };
      }
      checkReport(value);
      return { kind: "report", name, report: value };
    }
    if (looksLikeComparison(value)) {
      checkComparison(value);
      return { kind: "comparison", name, comparison: value };
    }
  } catch (err) {
    if (!(err instanceof ShapeError)) throw err;
    const what = "format" in value ? "an eval report" : "an eval comparison";
    return { kind: "error", name, message: `${name} is not ${what}: ${err.message}.` };
  }
  return {
    kind: "error",
    name,
    message: `${name} is not an eval report: it has no "format" field (report.json has one), and it is not the comparison \`airlock eval compare --json\` prints.`,
  };
}

/** Why a file is not read for its size, or "" when it is small enough. */
export function sizeRefusal(name, bytes, max = MAX_EVAL_BYTES) {
  if (bytes <= max) return "";
  const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${name} is ${mib(bytes)}: this page reads eval files of up to ${mib(max).replace(".0 ", " ")}.`;
}

/**
 * What to show for the files read: every comparison, every report, and — for exactly two
 * reports of one suite and no comparison — the two side by side (`pair`). `note` says why two
 * reports are not paired.
 */
export function arrange(docs) {
  const reports = docs.filter((d) => d.kind === "report");
  const comparisons = docs.filter((d) => d.kind === "comparison");
  const errors = docs.filter((d) => d.kind === "error");
  let pair = null;
  let note = "";
  if (reports.length === 2 && comparisons.length === 0) {
    const [a, b] = reports;
    if (a.report.suite === b.report.suite) pair = [a, b];
    else note = `The two reports are of different suites (${a.report.suite}, ${b.report.suite}): only reports of one suite are put side by side.`;
  }
  return { reports, comparisons, errors, pair, note };
}

/** The tasks of two reports by id: A's order, then those only B ran. */
export function pairTasks(a, b) {
  const byId = new Map(b.tasks.map((t) => [t.id, t]));
  const rows = a.tasks.map((t) => ({ id: t.id, a: t, b: byId.get(t.id) ?? null }));
  const seen = new Set(a.tasks.map((t) => t.id));
  for (const t of b.tasks) if (!seen.has(t.id)) rows.push({ id: t.id, a: null, b: t });
  return rows;
}

// ---------------------------------------------------------------------------------------
// Words for numbers

function percent(x) {
  return `${Math.round(x * 100)}%`;
}

/** A pass rate with its interval: "72% (95% CI 55–85%)"; "—" for no attempts. */
export function formatRate(rate) {
  if (!rate) return "—";
  return `${percent(rate.rate)} (95% CI ${Math.round(rate.ci95.low * 100)}–${percent(rate.ci95.high)})`;
}

/** "8 of 11 passed". */
export function formatCount(rate) {
  return rate ? `${rate.passed} of ${rate.attempts} passed` : "no attempts";
}

function signedPoints(x) {
  const v = (x * 100).toFixed(1);
  if (Number(v) === 0) return "0.0";
  return x > 0 ? `+${v}` : `−${v.replace("-", "")}`;
}

/** B − A in percentage points with its interval: "+20.0 pp (95% CI +5.2 to +33.4)"; "—" when none. */
export function formatDifference(difference) {
  if (!difference) return "—";
  return `${signedPoints(difference.difference)} pp (95% CI ${signedPoints(difference.ci95.low)} to ${signedPoints(difference.ci95.high)})`;
}

/** A mean with one decimal; "—" when unknown. */
export function formatMean(value, digits = 1) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
}

/** "$0.0123"; "unknown" for none. */
export function formatUsd(value) {
  return typeof value === "number" && Number.isFinite(value) ? `$${value.toFixed(4)}` : "unknown";
}

/** "12.5 s"; "—" for none. */
export function formatSeconds(value) {
  return typeof value === "number" && Number.isFinite(value) ? `${value.toFixed(1)} s` : "—";
}

/** B / A of two means: "0.85×"; "" for none. */
export function formatRatio(value) {
  return typeof value === "number" && Number.isFinite(value) ? `${value.toFixed(2)}×` : "";
}

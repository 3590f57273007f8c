// Unit tests of src/start-form.js: the workspace path kept inside its root, the task's UTF-8
// size, budgets, the StartRun request, refusals mapped to fields, the runs search's matching
// rule, reading a StartRun stream to its run, and small text helpers.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  asciiLower,
  budgetWords,
  buildStartRun,
  composeWorkspace,
  fieldOfError,
  firstRun,
  isSubmitKey,
  lastPathComponent,
  matchesQuery,
  oldestFirst,
  oneLine,
  parseBudget,
  splitWorkspace,
  utf8Length,
} from "../src/start-form.js";

test("a workspace is the root plus a path inside it", () => {
  assert.deepEqual(composeWorkspace("/srv/ws", ""), { path: "/srv/ws", error: "" });
  assert.deepEqual(composeWorkspace("/srv/ws", "proj"), { path: "/srv/ws/proj", error: "" });
  assert.deepEqual(composeWorkspace("/srv/ws/", " proj/src/ "), { path: "/srv/ws/proj/src", error: "" });
  assert.deepEqual(composeWorkspace("/srv/ws", "./a//b/."), { path: "/srv/ws/a/b", error: "" });
  // An absolute path inside the root is taken as it is.
  assert.deepEqual(composeWorkspace("/srv/ws", "/srv/ws/proj"), { path: "/srv/ws/proj", error: "" });
  assert.deepEqual(composeWorkspace("/srv/ws", "/srv/ws"), { path: "/srv/ws", error: "" });
  assert.deepEqual(composeWorkspace("/", "tmp/x"), { path: "/tmp/x", error: "" });
  assert.deepEqual(composeWorkspace("/", ""), { path: "/", error: "" });
});

test("a workspace never leaves its root", () => {
  for (const sub of ["..", "../etc", "a/../../b", "a/..", "proj/../x"]) {
    const { path, error } = composeWorkspace("/srv/ws", sub);
    assert.equal(path, "", sub);
    assert.match(error, /\.\./, sub);
  }
  // A sibling that shares the root's prefix is outside it.
  assert.match(composeWorkspace("/srv/ws", "/srv/ws2/x").error, /inside \/srv\/ws/);
  assert.match(composeWorkspace("/srv/ws", "/etc").error, /inside/);
  assert.match(composeWorkspace("/srv/ws", "a\0b").error, /NUL/);
  assert.equal(composeWorkspace("", "x").path, "");
  assert.notEqual(composeWorkspace("", "x").error, "");
  assert.deepEqual(composeWorkspace("", ""), { path: "", error: "" });
  // Names that only look like "..".
  assert.equal(composeWorkspace("/srv/ws", "..a/b..").path, "/srv/ws/..a/b..");
});

test("a workspace in a URL splits into its root and the rest", () => {
  const roots = ["/srv/ws", "/srv/ws/deep", "/home/me"];
  assert.deepEqual(splitWorkspace("/srv/ws/deep/proj", roots), { root: "/srv/ws/deep", sub: "proj" });
  assert.deepEqual(splitWorkspace("/srv/ws/proj/", roots), { root: "/srv/ws", sub: "proj" });
  assert.deepEqual(splitWorkspace("/home/me", roots), { root: "/home/me", sub: "" });
  assert.deepEqual(splitWorkspace("/srv/wsx", roots), { root: "", sub: "" });
  assert.deepEqual(splitWorkspace("/etc", roots), { root: "", sub: "" });
});

test("sizes are UTF-8 bytes", () => {
  assert.equal(utf8Length(""), 0);
  assert.equal(utf8Length("abc"), 3);
  assert.equal(utf8Length("é"), 2);
  assert.equal(utf8Length("€"), 3);
  assert.equal(utf8Length("😀"), 4);
  assert.equal(utf8Length("a😀é€"), 1 + 4 + 2 + 3);
  for (const s of ["plain", "ünïcödé", "日本語", "mixed 😀 text\n"]) {
    assert.equal(utf8Length(s), new TextEncoder().encode(s).length, s);
  }
});

test("the runs search matches as the daemon does: ASCII letters without case", () => {
  assert.equal(matchesQuery("Fix the MEAN function", "mean"), true);
  assert.equal(matchesQuery("fix the mean", "MEAN"), true);
  assert.equal(matchesQuery("anything", ""), true);
  assert.equal(matchesQuery("fix the mean", "median"), false);
  assert.equal(matchesQuery("", "x"), false);
  // Only A–Z fold: other letters keep their case, as with Rust's to_ascii_lowercase.
  assert.equal(matchesQuery("ÉCOLE", "école"), false);
  assert.equal(matchesQuery("École", "École"), true);
  assert.equal(matchesQuery("STRASSE", "straße"), false);
  assert.equal(asciiLower("ABC xyz ÄÖ İ"), "abc xyz ÄÖ İ");
  assert.equal(matchesQuery("KELVIN", "\u212a"), false); // the Kelvin sign is no K
});

test("budgets are whole numbers, empty for the daemon's", () => {
  assert.deepEqual(parseBudget(""), { value: 0, error: "" });
  assert.deepEqual(parseBudget(" 12 "), { value: 12, error: "" });
  assert.deepEqual(parseBudget("1,000"), { value: 1000, error: "" });
  assert.notEqual(parseBudget("-1").error, "");
  assert.notEqual(parseBudget("1.5").error, "");
  assert.notEqual(parseBudget("ten").error, "");
  assert.notEqual(parseBudget("4294967296").error, "");
  assert.deepEqual(parseBudget("90", { wide: true, scale: 1000 }), { value: 90000n, error: "" });
  assert.deepEqual(parseBudget("", { wide: true }), { value: 0n, error: "" });
});

test("the form becomes a StartRun, or says what is wrong", () => {
  const form = {
    root: "/srv/ws",
    sub: "proj",
    model: " openai:gpt-4.1 ",
    policy: "2",
    tools: ["read_file"],
    maxSteps: "",
    maxToolCalls: "",
    wallTime: "",
    task: "fix the mean",
  };
  const { request, errors } = buildStartRun(form, { maxInputBytes: 100 });
  assert.deepEqual(errors, {});
  assert.deepEqual(request, {
    workspace: "/srv/ws/proj",
    input: "fix the mean",
    model: { model: "openai:gpt-4.1" },
    approvalPolicy: 2,
    tools: ["read_file"],
  });

  const budgeted = buildStartRun({ ...form, maxSteps: "5", wallTime: "60" }).request;
  assert.deepEqual(budgeted.budgets, { maxSteps: 5, maxToolCalls: 0, maxWallTimeMs: 60000n });

  const bad = buildStartRun({ ...form, sub: "../x", model: "", task: "  ", maxToolCalls: "x" }).errors;
  assert.deepEqual(Object.keys(bad).sort(), ["maxToolCalls", "model", "task", "workspace"]);

  const long = buildStartRun({ ...form, task: "é".repeat(51) }, { maxInputBytes: 100 }).errors;
  assert.match(long.task, /102 bytes; at most 100/);
  assert.deepEqual(buildStartRun({ ...form, task: "é".repeat(50) }, { maxInputBytes: 100 }).errors, {});
});

test("a refusal names the field it is about", () => {
  assert.equal(fieldOfError("start.model.model: unknown model `x`"), "model");
  assert.equal(fieldOfError("start.model: unknown model `x`"), "model");
  assert.equal(fieldOfError("start.workspace: outside the workspace roots"), "workspace");
  assert.equal(fieldOfError("start.input: 70000 bytes, over the 65536"), "task");
  assert.equal(fieldOfError("start.budgets.max_steps: over the session's 10"), "maxSteps");
  assert.equal(fieldOfError("start.budgets.max_wall_time_ms: over"), "wallTime");
  assert.equal(fieldOfError("start.budgets.max_tokens: over"), "budgets");
  assert.equal(fieldOfError("start.tools[2]: no tool `x`"), "tools");
  assert.equal(fieldOfError("start.approval_policy: the session's is never"), "policy");
  assert.equal(fieldOfError("the daemon is busy"), "");
  assert.equal(fieldOfError(""), "");
});

async function* stream(events, after) {
  for (const e of events) yield e;
  if (after) throw after;
}

test("a StartRun stream is read up to the run it started", async () => {
  const started = {
    runId: "run_1",
    event: { case: "runStarted", value: { sessionId: "ses_1" } },
  };
  assert.deepEqual(await firstRun(stream([started, { runId: "run_1", event: { case: "stepStarted" } }])), {
    runId: "run_1",
    sessionId: "ses_1",
  });
  // It stops reading at the first event: what comes after (even a failure) is not awaited.
  assert.deepEqual(await firstRun(stream([started], new Error("later"))), { runId: "run_1", sessionId: "ses_1" });
  await assert.rejects(firstRun(stream([])), /without starting a run/);
  await assert.rejects(firstRun(stream([], new Error("start.model.model: unknown model"))), /unknown model/);
});

test("runs sort oldest first, then by id", () => {
  const runs = [
    { runId: "run_c", createdAtMs: 30n },
    { runId: "run_b", createdAtMs: 10n },
    { runId: "run_a", createdAtMs: 10n },
  ];
  assert.deepEqual(runs.sort(oldestFirst).map((r) => r.runId), ["run_a", "run_b", "run_c"]);
});

test("small text helpers", () => {
  assert.equal(lastPathComponent("/srv/ws/proj"), "proj");
  assert.equal(lastPathComponent("/srv/ws/proj/"), "proj");
  assert.equal(lastPathComponent("/"), "/");
  assert.equal(lastPathComponent(""), "");
  assert.equal(oneLine("  fix\n the\tmean  "), "fix the mean");
  assert.equal(oneLine("abcdef", 4), "abc…");
  assert.deepEqual(budgetWords({ maxSteps: 10, maxWallTimeMs: 300000n }, (ms) => `${ms / 1000}s`), ["10 steps", "wall time 300s"]);
  assert.deepEqual(budgetWords(undefined), []);
  assert.equal(isSubmitKey({ key: "Enter", ctrlKey: true }), true);
  assert.equal(isSubmitKey({ key: "Enter", metaKey: true }), true);
  assert.equal(isSubmitKey({ key: "Enter" }), false);
  assert.equal(isSubmitKey({ key: "Enter", ctrlKey: true, isComposing: true }), false);
});

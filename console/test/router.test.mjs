// Unit tests of src/router.js: hashes to routes and back.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseHash, runHref, runsHref, traceHref } from "../src/router.js";

test("hashes name pages", () => {
  assert.equal(parseHash("").page, "runs");
  assert.equal(parseHash("#/runs").page, "runs");
  const filtered = parseHash("#/runs?session=ses_1&state=waiting");
  assert.equal(filtered.page, "runs");
  assert.equal(filtered.query.get("session"), "ses_1");
  assert.equal(filtered.query.get("state"), "waiting");
  assert.deepEqual({ ...parseHash("#/runs/run_abc"), query: undefined }, { page: "run", runId: "run_abc", query: undefined });
  assert.equal(parseHash("#/runs/run_abc/trace").page, "trace");
  assert.equal(parseHash("#/runs/run_abc/trace").runId, "run_abc");
  assert.equal(parseHash("#/approvals").page, "approvals");
  assert.equal(parseHash("#/tools").page, "tools");
  assert.equal(parseHash("#/nowhere").page, "notfound");
  assert.equal(parseHash("#/runs/a%2Fb").runId, "a/b");
});

test("links round-trip", () => {
  assert.equal(parseHash(runHref("run_x")).runId, "run_x");
  assert.equal(parseHash(traceHref("run_x")).page, "trace");
  assert.equal(runsHref({}), "#/runs");
  assert.equal(runsHref({ session: "ses_1", state: "" }), "#/runs?session=ses_1");
  assert.equal(parseHash(runsHref({ state: "finished" })).query.get("state"), "finished");
});

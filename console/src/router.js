// Hash routing (the daemon serves only `/`): #/runs, #/runs?session=…&state=…&q=…,
// #/runs/<id>, #/runs/<id>/trace, #/new, #/sessions/<id>, #/approvals, #/tools, #/policy,
// #/evals.

import { useEffect, useState } from "preact/hooks";

/** Parses a location hash into { page, runId?, query }. */
export function parseHash(hash) {
  const raw = String(hash || "").replace(/^#/, "") || "/runs";
  const q = raw.indexOf("?");
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const query = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : "");
  const parts = path.split("/").filter(Boolean).map(safeDecode);
  const [first, second, third] = parts;
  if (parts.length === 0 || (first === "runs" && parts.length === 1)) return { page: "runs", query };
  if (first === "runs" && parts.length === 2) return { page: "run", runId: second, query };
  if (first === "runs" && parts.length === 3 && third === "trace") return { page: "trace", runId: second, query };
  if (first === "new" && parts.length === 1) return { page: "new", query };
  if (first === "sessions" && parts.length === 2) return { page: "session", sessionId: second, query };
  if (first === "approvals" && parts.length === 1) return { page: "approvals", query };
  if (first === "tools" && parts.length === 1) return { page: "tools", query };
  if (first === "policy" && parts.length === 1) return { page: "policy", query };
  if (first === "evals" && parts.length === 1) return { page: "evals", query };
  return { page: "notfound", query, path };
}

function safeDecode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** The hash of a run's page. */
export function runHref(runId) {
  return `#/runs/${encodeURIComponent(runId)}`;
}

export function traceHref(runId) {
  return `#/runs/${encodeURIComponent(runId)}/trace`;
}

/** The hash of a session's page. */
export function sessionHref(sessionId) {
  return `#/sessions/${encodeURIComponent(sessionId)}`;
}

/** The hash of the runs list with filters (empty ones left out). */
export function runsHref({ session = "", state = "", q = "" } = {}) {
  const query = new URLSearchParams();
  if (session) query.set("session", session);
  if (state) query.set("state", state);
  if (q) query.set("q", q);
  const text = query.toString();
  return text ? `#/runs?${text}` : "#/runs";
}

const listeners = new Set();

/** Goes to `hash`; `replace` keeps the browser history as it is (for filter edits). */
export function navigate(hash, { replace = false } = {}) {
  if (replace) {
    history.replaceState(history.state, "", hash);
    for (const listener of [...listeners]) listener();
  } else {
    location.hash = hash;
  }
}

/** The current route, re-rendering on every change of the hash. */
export function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const update = () => setHash(location.hash);
    window.addEventListener("hashchange", update);
    listeners.add(update);
    // The hash may have changed between the render and this effect (effects run after the
    // paint): that change's `hashchange` had no listener yet, so read it again now.
    update();
    return () => {
      window.removeEventListener("hashchange", update);
      listeners.delete(update);
    };
  }, []);
  return { hash, ...parseHash(hash) };
}

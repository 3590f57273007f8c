// Small pieces shared by the pages: alerts, badges for states and risks (text, not colour
// alone), times, code blocks, a ticking clock, and the page title.

import { useEffect, useRef, useState } from "preact/hooks";
import { enumName, enumTitle, errorMessage } from "./api.js";
import { capitalise, enumWords, localDateTime, relativeTime } from "./format.js";
import { html } from "./html.js";

/** A failure, as the page shows it: the server's status message in a role="alert". */
export function ErrorAlert({ error, testid, children }) {
  if (!error && !children) return null;
  return html`<p role="alert" class="alert" data-testid=${testid}>
    ${error ? errorMessage(error) : null}${children}
  </p>`;
}

export function Loading({ label = "Loading…" }) {
  return html`<p role="status" class="loading">${label}</p>`;
}

const STATE_CLASS = {
  RUNNING: "running",
  WAITING_FOR_APPROVAL: "waiting",
  FINISHED: "finished",
};

/** A run's state as a badge: words, a colour, and `data-state` with the enum name. */
export function StateBadge({ state, stopReason, testid }) {
  const name = enumName("airlock.v1.RunState", state);
  const stop = stopReason ? enumName("airlock.v1.StopReason", stopReason) : "UNSPECIFIED";
  let cls = STATE_CLASS[name] ?? "unknown";
  if (name === "FINISHED" && stop !== "UNSPECIFIED" && stop !== "FINAL") cls = "stopped";
  const label = name === "UNSPECIFIED" ? "Unknown" : capitalise(enumWords(name));
  return html`<span class=${`badge state-${cls}`} data-state=${name} data-testid=${testid}>
    <span class="dot" aria-hidden="true"></span>${label}
  </span>`;
}

const RISK_CLASS = {
  READ_ONLY: "low",
  WRITE: "mid",
  NETWORK: "mid",
  INSTALL: "high",
  EXEC: "high",
  DESTRUCTIVE: "high",
};

/** A tool's risk: its enum name, coloured by how much harm it can do. */
export function RiskBadge({ risk }) {
  const name = enumName("airlock.v1.Risk", risk);
  return html`<span class=${`badge risk-${RISK_CLASS[name] ?? "none"}`} data-risk=${name}>${name}</span>`;
}

/** A tool status (OK, TOOL_ERROR, …). */
export function StatusBadge({ status }) {
  const name = enumName("airlock.v1.ToolStatus", status);
  const cls = name === "OK" ? "ok" : name === "UNSPECIFIED" ? "none" : "error";
  return html`<span class=${`badge status-${cls}`}>${enumTitle("airlock.v1.ToolStatus", status) || "—"}</span>`;
}

/** Re-renders every `ms` milliseconds; returns Date.now(). */
export function useNow(ms = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

/** A time, relative when recent, with the full local time in a title. */
export function Time({ ms, now }) {
  if (!ms) return html`<span class="muted">—</span>`;
  const at = Number(ms);
  return html`<time datetime=${new Date(at).toISOString()} title=${localDateTime(at)}>${relativeTime(at, now ?? Date.now())}</time>`;
}

/**
 * A block of code or output. Long blocks scroll inside (focusable, so the keyboard reaches
 * them: a region with a name).
 */
export function CodeBlock({ text, label, testid, class: cls = "" }) {
  return html`<pre class=${`code ${cls}`} tabindex="0" role="region" aria-label=${label} data-testid=${testid}>${text}</pre>`;
}

/** Sets document.title to "<title> · airlock". */
export function useTitle(title) {
  useEffect(() => {
    document.title = title ? `${title} · airlock` : "airlock";
  }, [title]);
}

/** An em dash for what is not set. */
export function orDash(value) {
  return value === "" || value === undefined || value === null ? html`<span class="muted">—</span>` : value;
}

/**
 * Coalesces many updates into one render: call the returned function after mutating state
 * kept in a ref; the component re-renders once, a moment later.
 */
export function useBatchedRender(delay = 16) {
  const [, setTick] = useState(0);
  const pending = useRef(null);
  useEffect(() => () => clearTimeout(pending.current), []);
  return useCallbackOnce(() => {
    const schedule = () => {
      if (pending.current) return;
      pending.current = setTimeout(() => {
        pending.current = null;
        setTick((n) => n + 1);
      }, delay);
    };
    // Render now (at the next microtask), for a long burst of updates that must show early.
    schedule.now = () => {
      clearTimeout(pending.current);
      pending.current = null;
      setTick((n) => n + 1);
    };
    return schedule;
  });
}

function useCallbackOnce(make) {
  const ref = useRef(null);
  if (!ref.current) ref.current = make();
  return ref.current;
}

/** Whether a media query matches, live. */
export function useMedia(query) {
  const get = () => (typeof matchMedia === "function" ? matchMedia(query).matches : false);
  const [matches, setMatches] = useState(get);
  useEffect(() => {
    const list = matchMedia(query);
    const change = () => setMatches(list.matches);
    list.addEventListener("change", change);
    change();
    return () => list.removeEventListener("change", change);
  }, [query]);
  return matches;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

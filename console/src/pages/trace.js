// A run's trace (#/runs/<id>/trace) as a waterfall: one row per span of Agent.GetTrace,
// indented by its depth in the tree, a bar placed in % of the run span's duration, the
// duration, error spans marked, the slowest span below the root marked "slowest" — by its
// work, the time it waited for a person (an approval) left out — and the waits marked as
// such. Each row's button toggles the span's attributes.

import { useEffect, useState } from "preact/hooks";
import { api, enumName, isAbort } from "../api.js";
import { ErrorAlert, Loading, useTitle } from "../components.js";
import { formatDuration } from "../format.js";
import { html } from "../html.js";
import { runHref } from "../router.js";
import { layoutSpans } from "../waterfall.js";

const QUALIFIER = { step: "index", tool: "tool", validate: "tool", permission: "tool", model: "model" };

/** What tells a span from its siblings: a step's index, the tool, the model. */
function qualifier(span) {
  const key = QUALIFIER[span.name];
  const attr = key && span.attributes.find((a) => a.key === key);
  return attr ? attr.value : "";
}

export function TracePage({ runId }) {
  useTitle(`Trace of ${runId}`);
  const [trace, setTrace] = useState(null);
  const [error, setError] = useState(null);
  const [open, setOpen] = useState(() => new Set());
  const [loading, setLoading] = useState(true);

  const load = (signal) => {
    setLoading(true);
    api.agent
      .getTrace({ runId }, { signal })
      .then((t) => {
        setTrace(t);
        setError(null);
      })
      .catch((err) => {
        if (!isAbort(err, signal)) setError(err);
      })
      .finally(() => setLoading(false));
  };
  useEffect(() => {
    const controller = new AbortController();
    load(controller.signal);
    return () => controller.abort();
  }, [runId]);

  const toggle = (id) => {
    const next = new Set(open);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setOpen(next);
  };

  const layout = trace ? layoutSpans(trace.spans) : null;
  const errors = trace ? trace.spans.filter((s) => enumName("airlock.v1.SpanStatus", s.status) === "ERROR").length : 0;

  return html`
    <div class="page trace-page">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="#/runs">Runs</a><span aria-hidden="true"> / </span><a class="mono" href=${runHref(runId)}>${runId}</a><span aria-hidden="true"> / </span><span aria-current="page">Trace</span>
      </nav>
      <div class="page-head">
        <h1>Trace</h1>
        <div class="actions">
          <a class="button" href=${runHref(runId)}>Run</a>
          <button type="button" onClick=${() => load()} disabled=${loading}>${loading ? "Loading…" : "Reload"}</button>
        </div>
      </div>
      ${error && html`<${ErrorAlert} error=${error} />`}
      ${!trace && !error && html`<${Loading} label="Loading the trace…" />`}
      ${trace && html`
        <p class="trace-facts">
          <span><span class="muted">Trace</span> <code class="break">${trace.traceId || "—"}</code></span>
          <span><span class="muted">Duration</span> ${formatDuration(layout.totalMs)}</span>
          <span><span class="muted">Spans</span> ${trace.spans.length}</span>
          <span><span class="muted">Errors</span> ${errors}</span>
          ${layout.waitedMs > 0 ? html`<span data-testid="trace-waited"><span class="muted">Waiting for people</span> ${formatDuration(layout.waitedMs)}</span>` : null}
        </p>
        ${layout.waitedMs > 0 ? html`<p class="note">Time spent waiting for a person to answer an approval is not counted as work: the span marked “slowest” is the one whose own work took longest.</p>` : null}
        ${!layout.root && trace.spans.length ? html`<p class="note">The run has not ended: its own span is recorded when it does. Times are relative to the first span.</p>` : null}
        ${trace.spans.length === 0 ? html`<p class="muted">No spans recorded yet.</p>` : html`
          <div class="waterfall">
            <div class="axis" aria-hidden="true">
              <span class="axis-name"></span>
              <span class="axis-scale">${[0, 25, 50, 75, 100].map((p) => html`<span class=${`tick t${p}`}>${formatDuration((layout.totalMs * p) / 100)}</span>`)}</span>
            </div>
            <ul class="spans" aria-label="Spans">
              ${layout.rows.map((row) => html`<${SpanRow} row=${row} slowest=${row.span.spanId === layout.slowestId} open=${open.has(row.span.spanId)} onToggle=${toggle} />`)}
            </ul>
          </div>`}
      `}
    </div>
  `;
}

function SpanRow({ row, slowest, open, onToggle }) {
  const s = row.span;
  const status = enumName("airlock.v1.SpanStatus", s.status);
  const isError = status === "ERROR";
  const id = `span-${s.spanId}`;
  const q = qualifier(s);
  const cls = ["span-row", isError ? "error" : "", slowest ? "slowest" : "", row.isRoot ? "root" : "", row.isWait ? "wait" : "", open ? "open" : ""].filter(Boolean).join(" ");
  return html`
    <li class=${cls} data-testid="span" data-span-id=${s.spanId} data-name=${s.name} data-status=${status} data-wait=${row.isWait ? "true" : undefined}>
      <button type="button" class="span-button" aria-expanded=${open ? "true" : "false"} aria-controls=${open ? `${id}-attrs` : undefined}
        onClick=${() => onToggle(s.spanId)}>
        <span class="span-name" style=${{ paddingInlineStart: `${row.depth * 16}px` }}>
          <span class="chevron" aria-hidden="true">${open ? "▾" : "▸"}</span>
          <span class="name">${s.name}</span>${q ? html` <span class="qual">${s.name === "step" ? `#${q}` : q}</span>` : null}
          ${isError ? html` <span class="badge status-error">error</span>` : null}
          ${slowest ? html` <span class="badge slow" title="The longest work below the run, time waiting for a person left out">slowest</span>` : null}
          ${row.isWait ? html` <span class="badge tone-waiting">waited for a person</span>` : null}
        </span>
        <span class="span-track">
          <span class="bar" style=${{ left: `${row.left}%`, width: `${row.width}%` }}></span>
          <span class="span-duration">${formatDuration(row.durationMs)}</span>
        </span>
      </button>
      ${open ? html`
        <dl class="kv span-attrs" id=${`${id}-attrs`} data-testid="span-attrs">
          <div><dt>span</dt><dd class="mono">${s.spanId}</dd></div>
          ${s.parentSpanId ? html`<div><dt>parent</dt><dd class="mono">${s.parentSpanId}</dd></div>` : null}
          <div><dt>start</dt><dd>+${formatDuration(row.offsetMs)}</dd></div>
          <div><dt>duration</dt><dd>${formatDuration(row.durationMs)}</dd></div>
          ${row.waitMs > 0 && !row.isWait ? html`<div><dt>waiting for people</dt><dd>${formatDuration(row.waitMs)}</dd></div>
            <div><dt>work</dt><dd>${formatDuration(row.workMs)}</dd></div>` : null}
          <div><dt>status</dt><dd>${status.toLowerCase()}${s.statusMessage ? `: ${s.statusMessage}` : ""}</dd></div>
          ${s.attributes.map((a) => html`<div><dt>${a.key}</dt><dd class="break">${a.value}</dd></div>`)}
        </dl>` : null}
    </li>`;
}

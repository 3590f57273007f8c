// One run (#/runs/<id>): its summary from Agent.GetRun, kept live by its events; the events
// themselves from Agent.WatchRun (all of them, then live ones, reconnecting from the last
// seq after a failure), with streamed deltas merged into one pending row until the event
// they lead up to is committed; a cancel button while it runs; its change sets.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enumName, enumNumber, enumTitle, errorCode, isAbort, isFinalError, Code } from "../api.js";
import { ErrorAlert, Loading, StateBadge, Time, sleep, useBatchedRender, useMedia, useNow, useTitle } from "../components.js";
import { CHANGES_PAGE, MAX_CHANGES_PAGE, changesRead, mergeChangePages } from "../change-pages.js";
import { ChangeList, describe } from "../events.js";
import { formatDuration, formatInt, localDateTime, num } from "../format.js";
import { html } from "../html.js";
import { runsHref, traceHref } from "../router.js";
import { VirtualList, rowStyle } from "../virtual-list.js";

let eventsMarked = false;

/** A RunState's number, from the descriptor set the daemon serves ("FINISHED" → 3). */
const runState = (name) => enumNumber("airlock.v1.RunState", name);

export function RunPage({ runId }) {
  useTitle(`Run ${runId}`);
  const data = useRef(null);
  if (!data.current) {
    data.current = {
      info: null,
      infoError: null,
      events: [],
      pending: [],
      lastSeq: 0n,
      finished: false,
      streamError: null,
      streamDone: false,
      expanded: new Set(),
      heights: new Map(),
      changes: null,
      changesError: null,
      cancelling: false,
      cancelError: null,
    };
  }
  const d = data.current;
  const render = useBatchedRender();
  const now = useNow(5000);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    let refreshTimer = null;
    let changesTimer = null;

    const loadInfo = async () => {
      try {
        const info = await api.agent.getRun({ runId }, { signal });
        // Keep what live events already told when the answer is older than them.
        d.info = d.finished && info.state !== runState("FINISHED") ? { ...info, state: runState("FINISHED") } : info;
        d.infoError = null;
      } catch (err) {
        if (isAbort(err, signal)) return;
        d.infoError = err;
      }
      render();
    };
    const refresh = () => {
      if (refreshTimer) return;
      refreshTimer = setTimeout(() => {
        refreshTimer = null;
        loadInfo();
      }, 1000);
    };
    const loadChanges = async () => {
      try {
        // As many as have been read: a refresh (a new step's changes) keeps what was shown.
        const limit = Math.min(MAX_CHANGES_PAGE, Math.max(CHANGES_PAGE, changesRead(d.changes)));
        const changes = await api.agent.listChanges({ runId, limit }, { signal });
        // "Show more" read further while this was on its way: its pages must not be lost to
        // an answer asked for fewer, so ask again for as many as are read now.
        if (changesRead(d.changes) > limit && limit < MAX_CHANGES_PAGE) return loadChanges();
        d.changes = changes;
        d.changesError = null;
      } catch (err) {
        if (isAbort(err, signal)) return;
        d.changesError = err;
      }
      render();
    };
    const refreshChanges = () => {
      clearTimeout(changesTimer);
      changesTimer = setTimeout(loadChanges, 500);
    };

    loadInfo();
    loadChanges();
    follow(d, runId, signal, render, { refresh, refreshChanges });
    return () => {
      controller.abort();
      clearTimeout(refreshTimer);
      clearTimeout(changesTimer);
    };
  }, [runId]);

  const cancel = async () => {
    d.cancelling = true;
    d.cancelError = null;
    render();
    try {
      await api.agent.cancelRun({ runId, reason: "cancelled from the console" });
    } catch (err) {
      d.cancelError = err;
      d.cancelling = false;
    }
    render();
  };

  const moreChanges = async () => {
    d.loadingChanges = true;
    render();
    try {
      const next = await api.agent.listChanges({ runId, offset: d.changes.nextOffset, limit: CHANGES_PAGE });
      d.changes = mergeChangePages(d.changes, next);
      d.changesError = null;
    } catch (err) {
      d.changesError = err;
    }
    d.loadingChanges = false;
    render();
  };

  const info = d.info;
  // No such run (or no run of the caller's, or no run id at all): say so once.
  const notFound = !info && d.infoError && [Code.NotFound, Code.InvalidArgument, Code.PermissionDenied].includes(errorCode(d.infoError));

  return html`
    <div class="page run-page">
      <nav class="crumbs" aria-label="Breadcrumb"><a href="#/runs">Runs</a><span aria-hidden="true"> / </span><span class="mono" aria-current="page">${runId}</span></nav>
      <div class="page-head">
        <h1>Run <span class="mono id">${runId}</span></h1>
        <div class="actions">
          <a class="button" href=${traceHref(runId)}>Trace</a>
          ${info && info.state !== runState("FINISHED") && !d.finished
            ? html`<button type="button" class="danger" data-testid="cancel-run" disabled=${d.cancelling} onClick=${cancel}>
                ${d.cancelling ? "Cancelling…" : "Cancel run"}</button>`
            : null}
        </div>
      </div>
      ${d.cancelError && html`<${ErrorAlert} error=${d.cancelError} testid="cancel-error" />`}
      ${d.infoError && !info && html`<${ErrorAlert} error=${d.infoError} />`}
      ${!info && !d.infoError && html`<${Loading} label="Loading the run…" />`}
      ${info && html`<${Summary} info=${info} now=${now} />`}
      ${!notFound && html`<${Events} d=${d} render=${render} />`}
      ${d.changesError && !notFound && html`<${ErrorAlert} error=${d.changesError} />`}
      ${d.changes?.steps?.length ? html`<${Changes} changes=${d.changes} loading=${d.loadingChanges} more=${moreChanges} />` : null}
    </div>
  `;
}

function Summary({ info, now }) {
  const usage = info.usage;
  const tokensIn = num(usage?.inputTokens);
  const tokensOut = num(usage?.outputTokens);
  const stop = enumName("airlock.v1.StopReason", info.stopReason);
  const finishedAt = num(info.finishedAtMs);
  const startedAt = num(info.createdAtMs);
  const duration = finishedAt && startedAt ? formatDuration(finishedAt - startedAt) : "";
  return html`
    <section class="card summary" aria-label="Run summary">
      <dl class="facts">
        <div><dt>State</dt><dd><${StateBadge} state=${info.state} stopReason=${info.stopReason} testid="run-state" /></dd></div>
        <div><dt>Model</dt><dd>${info.model || "—"}</dd></div>
        <div><dt>Steps</dt><dd>${formatInt(info.steps)}</dd></div>
        <div><dt>Tokens</dt><dd>${formatInt(tokensIn + tokensOut)} <span class="muted">(${formatInt(tokensIn)} in, ${formatInt(tokensOut)} out)</span></dd></div>
        <div><dt>Calls</dt><dd>${usage ? `${usage.modelCalls} model, ${usage.toolCalls} tool` : "—"}</dd></div>
        <div><dt>Stop reason</dt><dd data-testid="stop-reason" data-stop-reason=${stop}>
          ${stop === "UNSPECIFIED" ? html`<span class="muted">—</span>` : enumTitle("airlock.v1.StopReason", info.stopReason)}
          ${info.stopDetail ? html`<span class="detail">${info.stopDetail}</span>` : null}</dd></div>
        <div><dt>Started</dt><dd><${Time} ms=${info.createdAtMs} now=${now} /></dd></div>
        <div><dt>${finishedAt ? "Took" : "Finished"}</dt><dd>${finishedAt ? html`<span title=${localDateTime(finishedAt)}>${duration}</span>` : html`<span class="muted">not yet</span>`}</dd></div>
        <div><dt>Session</dt><dd>${info.sessionId ? html`<a class="mono" href=${runsHref({ session: info.sessionId })}>${info.sessionId}</a>` : "—"}</dd></div>
        <div class="wide"><dt>Workspace</dt><dd class="mono break">${info.workspace || "—"}</dd></div>
        <div class="wide"><dt>Trace</dt><dd><a class="mono break" href=${traceHref(info.runId)}>${info.traceId || "trace"}</a></dd></div>
      </dl>
      ${info.state === runState("WAITING_FOR_APPROVAL")
        ? html`<p class="note waiting-note">The run waits for an approval: answer it in <a href="#/approvals">Approvals</a>.</p>`
        : null}
      <div class="texts">
        <div>
          <h2 class="h3">Input</h2>
          <div class="prose boxed" data-testid="run-input">${info.input || html`<span class="muted">—</span>`}</div>
        </div>
        <div>
          <h2 class="h3">Final text</h2>
          ${info.finalText
            ? html`<div class="prose boxed" data-testid="final-text">${info.finalText}</div>`
            : html`<p class="muted boxed">${info.state === runState("FINISHED") ? "No final text." : "Not yet: the run is going on."}</p>`}
        </div>
      </div>
    </section>`;
}

function Changes({ changes, loading, more }) {
  const total = num(changes.totalChanges);
  const read = changesRead(changes);
  return html`
    <section class="card" aria-labelledby="changes-title" data-testid="changes" data-read=${String(read)} data-total=${String(total)}>
      <h2 id="changes-title">Changes</h2>
      <p class="muted">${formatInt(total)} ${total === 1 ? "file change" : "file changes"}${changes.workspace ? html` in <code>${changes.workspace}</code>` : null}</p>
      <ol class="step-changes">
        ${changes.steps.map((s) => html`<li>
          <h3 class="h4">Step ${s.step} · ${s.tool} <span class="muted mono">${s.callId}</span></h3>
          <${ChangeList} changeSet=${s.changeSet} limit=${Infinity} />
        </li>`)}
      </ol>
      ${num(changes.nextOffset) > 0
        ? html`<p><button type="button" data-testid="more-changes" disabled=${loading} onClick=${more}>
            ${loading ? "Loading…" : `Show more changes (${formatInt(read)} of ${formatInt(total)} read)`}</button></p>`
        : null}
    </section>`;
}

/** Rows: committed events then pending deltas. A row's key stays the same while it lives. */
function rowAtIndex(d, i) {
  return i < d.events.length ? d.events[i] : d.pending[i - d.events.length];
}

function Events({ d, render }) {
  const [atEnd, setAtEnd] = useState(true);
  const control = useRef(null);
  const compact = useMedia("(max-width: 720px)");
  const count = d.events.length + d.pending.length;
  const rowHeight = compact ? 64 : 56;

  const toggle = (i, key) => {
    if (d.expanded.has(key)) {
      d.expanded.delete(key);
      d.heights.delete(i);
    } else d.expanded.add(key);
    render();
  };

  const renderRow = (i, pos) => {
    const row = rowAtIndex(d, i);
    const pending = row.pending ? row : null;
    const info = row.view ?? (row.view = describe(row.ev, pending));
    const open = d.expanded.has(row.key) && info.detail;
    const seq = String(row.seq);
    return html`
      <li key=${row.key} class=${`event ev-${info.tone}${open ? " open" : ""}${pending ? " live" : ""}`}
        style=${rowStyle(pos, open)} data-index=${i} data-measure=${open ? "" : undefined}
        data-testid="event" data-seq=${seq} data-kind=${row.kind} data-pending=${pending ? "true" : undefined}
        aria-posinset=${i + 1} aria-setsize=${count}>
        <div class="event-head">
          <span class="seq" title="Event number">${pending ? "…" : `#${seq}`}</span>
          <span class=${`badge tone tone-${info.tone}`}>${info.label}${info.live ? html`<span class="sr-only"> (streaming)</span>` : null}</span>
          ${row.ev?.stepId ? html`<span class="muted step-id mono" title=${`Step ${row.ev.stepId}`}>${row.ev.stepId}</span>` : null}
          <span class="time muted">${row.time}</span>
          ${info.detail
            ? html`<button type="button" class="link-button" aria-expanded=${open ? "true" : "false"} onClick=${() => toggle(i, row.key)}>
                ${open ? "Show less" : "Show more"}<span class="sr-only"> of event ${pending ? "(streaming)" : seq}</span></button>`
            : null}
        </div>
        <div class="event-summary">${info.summary}</div>
        ${open ? html`<div class="event-detail">${info.detail()}</div>` : null}
      </li>`;
  };

  return html`
    <section class="events-section" aria-labelledby="events-title">
      <div class="section-head">
        <h2 id="events-title">Events <span class="muted count">${formatInt(d.events.length)}</span></h2>
        ${!atEnd && count > 0
          ? html`<button type="button" onClick=${() => control.current?.scrollToEnd()}>Jump to latest</button>`
          : html`<span class="muted follow-note">${d.streamDone || d.finished ? "" : "Following live"}</span>`}
      </div>
      ${d.streamError && html`<${ErrorAlert} error=${d.streamError}>${isFinalError(d.streamError) ? "" : " — reconnecting…"}<//>`}
      <${VirtualList}
        count=${count}
        rowHeight=${rowHeight}
        heights=${d.heights}
        overscan=${6}
        follow=${true}
        control=${control}
        renderRow=${renderRow}
        onAtEnd=${setAtEnd}
        onMeasure=${(i, h) => {
          d.heights.set(i, h);
          render();
        }}
        onFirstRows=${() => {
          if (!eventsMarked) {
            eventsMarked = true;
            performance.mark("airlock:events");
          }
        }}
        attrs=${{ class: "vlist events-list", "data-testid": "events", role: "region", "aria-label": "Events of the run", tabindex: "0" }}
        bodyTag="ol"
        bodyAttrs=${{ class: "events-body" }}
      />
      ${count === 0 && (d.streamDone || d.finished) ? html`<p class="muted">No events.</p>` : null}
      ${count === 0 && !d.streamDone && !d.streamError ? html`<${Loading} label="Waiting for events…" />` : null}
    </section>`;
}

let pendingKeys = 0;

function clock(ms) {
  const n = num(ms);
  if (!n) return "";
  const t = new Date(n);
  return `${String(t.getHours()).padStart(2, "0")}:${String(t.getMinutes()).padStart(2, "0")}:${String(t.getSeconds()).padStart(2, "0")}`;
}

/** Takes one streamed event into the run's rows and summary. Returns what to refresh. */
function receive(d, ev) {
  const kind = ev.event.case;
  if (ev.delta) {
    const v = ev.event.value;
    if (kind === "textDelta") {
      let p = d.pending.find((x) => x.kind === "textDelta" && x.seq === ev.seq);
      if (!p) {
        p = { pending: true, kind, seq: ev.seq, key: `p${(pendingKeys += 1)}`, text: "", time: clock(ev.timeMs) };
        d.pending.push(p);
      }
      p.text += v.text;
      p.view = null;
    } else if (kind === "toolCallDelta") {
      let p = d.pending.find((x) => x.kind === "toolCallDelta" && x.seq === ev.seq && x.index === v.index);
      if (!p) {
        p = { pending: true, kind, seq: ev.seq, index: v.index, key: `p${(pendingKeys += 1)}`, tool: "", args: "", providerCallId: "", time: clock(ev.timeMs) };
        d.pending.push(p);
      }
      if (v.tool) p.tool = v.tool;
      if (v.providerCallId) p.providerCallId = v.providerCallId;
      p.args += v.argumentsDelta;
      p.view = null;
    }
    return null;
  }
  if (ev.seq <= d.lastSeq) return null;
  d.lastSeq = ev.seq;

  // The committed event replaces the deltas that led up to it; older deltas are stale.
  const before = d.pending.length;
  if (before) {
    let replacedCall = false;
    d.pending = d.pending.filter((p) => {
      if (p.seq < ev.seq) return false;
      if (p.seq > ev.seq) return true;
      if (kind === "modelText" && p.kind === "textDelta") return false;
      if (kind === "toolCallProposed" && p.kind === "toolCallDelta" && !replacedCall) {
        const v = ev.event.value;
        if (!p.providerCallId || !v.providerCallId || p.providerCallId === v.providerCallId) {
          replacedCall = true;
          return false;
        }
      }
      return true;
    });
    if (d.pending.length !== before) {
      // Measured heights of pending rows no longer match their places.
      for (const i of [...d.heights.keys()]) if (i >= d.events.length) d.heights.delete(i);
    }
  }
  d.events.push({ kind, seq: ev.seq, key: `e${ev.seq}`, ev, time: clock(ev.timeMs) });

  const v = ev.event.value;
  const info = d.info;
  switch (kind) {
    case "runStarted":
      if (info && !info.model) d.info = { ...info, model: v.model, input: info.input || v.input };
      return "info";
    case "stepStarted":
      if (info && info.steps < v.index) d.info = { ...info, steps: v.index };
      return "info";
    case "approvalRequested":
      if (info && info.state !== runState("FINISHED")) d.info = { ...info, state: runState("WAITING_FOR_APPROVAL") };
      return "info";
    case "approvalResolved":
    case "toolStarted":
      if (info && info.state === runState("WAITING_FOR_APPROVAL")) d.info = { ...info, state: runState("RUNNING") };
      return "info";
    case "changes":
      return "changes";
    case "runFinished":
      d.finished = true;
      if (info) {
        d.info = {
          ...info,
          state: runState("FINISHED"),
          stopReason: v.reason,
          finalText: v.finalText,
          usage: v.usage ?? info.usage,
          stopDetail: v.detail,
          steps: v.steps || info.steps,
        };
      }
      return "finished";
    case "toolFinished":
    case "modelText":
      return "info";
    default:
      return null;
  }
}

/** Follows the run's events until it ends, reconnecting from the last seq after failures. */
async function follow(d, runId, signal, render, { refresh, refreshChanges }) {
  while (!signal.aborted) {
    try {
      // A long history arrives in one burst, decoded without a pause: every few dozen
      // milliseconds, show what came so far (the first screenful at once) and let the page breathe.
      let lastPause = performance.now();
      for await (const ev of api.agent.watchRun({ runId, afterSeq: d.lastSeq }, { signal })) {
        if (d.streamError) d.streamError = null;
        const what = receive(d, ev);
        if (what === "info" || what === "finished") refresh();
        if (what === "changes" || what === "finished") refreshChanges();
        render();
        if (performance.now() - lastPause > 40) {
          render.now();
          await new Promise((resolve) => setTimeout(resolve, 0));
          lastPause = performance.now();
        }
      }
      // The stream ends with the run. Deltas never committed are gone.
      d.pending = [];
      if (d.finished) {
        d.streamDone = true;
        render();
        return;
      }
    } catch (err) {
      if (isAbort(err, signal)) return;
      d.streamError = err;
      d.pending = [];
      render();
      if (isFinalError(err)) {
        d.streamDone = true;
        render();
        return;
      }
    }
    await sleep(1000, signal);
  }
}


// The runs list (#/runs?session=…&state=…&q=…): the first page of Agent.ListRuns at once, more
// pages as the user scrolls near the end, and Agent.WatchRuns keeping rows live (a changed
// run updated in place, a new one inserted newest first when it matches the filters). Each
// row: the run, its state, its task, model, workspace, outcome, steps, session (a link to
// the session's page) and when it started; "Task contains" searches the tasks (the daemon's
// `query`). A virtual table: only the rows in view are in the DOM, so ten thousand runs
// scroll as fast as ten.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enumName, enumLabel, enumNumber, isAbort, isFinalError } from "../api.js";
import { ErrorAlert, Loading, StateBadge, Time, sleep, useBatchedRender, useMedia, useNow, useTitle } from "../components.js";
import { formatInt, num, shortId } from "../format.js";
import { html } from "../html.js";
import { navigate, runHref, runsHref, sessionHref } from "../router.js";
import { MAX_QUERY_BYTES, lastPathComponent, matchesQuery, oneLine, utf8Length } from "../start-form.js";
import { VirtualList, rowStyle } from "../virtual-list.js";

const PAGE_SIZE = 100;

/** The `state` filter of the hash, and the RunState it asks ListRuns for (none for Any). */
const STATES = [
  { key: "", label: "Any", state: "" },
  { key: "running", label: "Running", state: "RUNNING" },
  { key: "waiting", label: "Waiting for approval", state: "WAITING_FOR_APPROVAL" },
  { key: "finished", label: "Finished", state: "FINISHED" },
];

const COLUMNS = [
  ["c-id", "Run"],
  ["c-state", "State"],
  ["c-task", "Task"],
  ["c-model", "Model"],
  ["c-ws", "Workspace"],
  ["c-stop", "Outcome"],
  ["c-steps c-num", "Steps"],
  ["c-session", "Session"],
  ["c-started", "Started"],
];

/** How a finished run ended, in words (the Outcome column). */
const OUTCOMES = {
  FINAL: "Answered",
  MAX_STEPS: "Out of steps",
  BUDGET_EXHAUSTED: "Budget spent",
  REPEATED_ERRORS: "Repeated errors",
  CANCELLED: "Cancelled",
  PERMISSION_DENIED: "Denied",
  MODEL_ERROR: "Model error",
  NO_PROGRESS: "No progress",
};

function outcome(info) {
  const name = enumName("airlock.v1.StopReason", info.stopReason);
  if (name === "UNSPECIFIED") return "";
  return OUTCOMES[name] ?? enumLabel("airlock.v1.StopReason", info.stopReason);
}

// performance.mark("airlock:rows") once per page load, when the first rows are in the DOM.
let rowsMarked = false;

export function RunsPage({ query }) {
  useTitle("Runs");
  const session = query.get("session") ?? "";
  const stateKey = STATES.some((s) => s.key === query.get("state")) ? query.get("state") : "";
  const q = query.get("q") ?? "";
  const [sessionText, setSessionText] = useState(session);
  const [qText, setQText] = useState(q);
  const typing = useRef(null);

  useEffect(() => setSessionText(session), [session]);
  useEffect(() => setQText(q), [q]);
  useEffect(() => () => clearTimeout(typing.current), []);

  const apply = (next) => navigate(runsHref({ session, state: stateKey, q, ...next }), { replace: true });
  // Both text filters apply a moment after the typing stops, as one.
  const later = (next) => {
    clearTimeout(typing.current);
    typing.current = setTimeout(() => apply(next), 400);
  };
  const onSessionInput = (event) => {
    const value = event.currentTarget.value;
    setSessionText(value);
    later({ session: value.trim(), q: qText });
  };
  const onQueryInput = (event) => {
    const value = event.currentTarget.value;
    setQText(value);
    later({ session: sessionText.trim(), q: value });
  };
  const onSubmit = (event) => {
    event.preventDefault();
    clearTimeout(typing.current);
    apply({ session: sessionText.trim(), q: qText });
  };
  // The state applies at once, with whatever the text filters hold by then.
  const onStateChange = (event) => {
    clearTimeout(typing.current);
    apply({ state: event.currentTarget.value, session: sessionText.trim(), q: qText });
  };
  const qTooLong = utf8Length(q) > MAX_QUERY_BYTES;

  return html`
    <div class="page runs-page">
      <div class="page-head">
        <div class="runs-title">
          <h1>Runs</h1>
          <a class="button primary" href="#/new" data-testid="new-run-link">New run</a>
        </div>
        <form class="filters" role="search" aria-label="Filter runs" onSubmit=${onSubmit}>
          <div class="field field-q">
            <label for="filter-q">Task contains</label>
            <input id="filter-q" type="search" autocomplete="off" spellcheck="false" maxlength=${MAX_QUERY_BYTES}
              value=${qText} onInput=${onQueryInput} aria-invalid=${qTooLong ? "true" : undefined} />
          </div>
          <div class="field">
            <label for="filter-session">Session</label>
            <input id="filter-session" type="search" placeholder="ses_…" autocomplete="off" spellcheck="false"
              value=${sessionText} onInput=${onSessionInput} />
          </div>
          <div class="field">
            <label for="filter-state">State</label>
            <select id="filter-state" value=${stateKey} onChange=${onStateChange}>
              ${STATES.map((s) => html`<option value=${s.key}>${s.label}</option>`)}
            </select>
          </div>
        </form>
      </div>
      ${qTooLong
        ? html`<p role="alert" class="alert">The search is ${formatInt(utf8Length(q))} bytes long; at most ${MAX_QUERY_BYTES} are searched for.</p>`
        : html`<${RunsTable} key=${`${session}|${stateKey}|${q}`} session=${session} query=${q}
            state=${enumNumber("airlock.v1.RunState", STATES.find((s) => s.key === stateKey).state)} />`}
    </div>
  `;
}

function RunsTable({ session, state, query }) {
  const data = useRef(null);
  if (!data.current) {
    data.current = { rows: [], byId: new Map(), next: "", loaded: false, more: false, error: null, moreError: null, liveError: null };
  }
  const d = data.current;
  const render = useBatchedRender();
  const now = useNow(15_000);
  const compact = useMedia("(max-width: 720px)");
  const signal = useRef(null);

  useEffect(() => {
    const controller = new AbortController();
    signal.current = controller.signal;
    (async () => {
      try {
        const res = await api.agent.listRuns({ sessionId: session, state, query, pageSize: PAGE_SIZE }, { signal: controller.signal });
        addPage(d, res);
      } catch (err) {
        if (isAbort(err, controller.signal)) return;
        d.error = err;
        d.loaded = true;
        render();
        return;
      }
      render();
      watch(d, { session, state, query }, controller.signal, render);
    })();
    return () => controller.abort();
  }, []);

  const loadMore = async () => {
    if (d.more || !d.next) return;
    d.more = true;
    d.moreError = null;
    render();
    try {
      const res = await api.agent.listRuns({ sessionId: session, state, query, pageSize: PAGE_SIZE, pageToken: d.next }, { signal: signal.current });
      addPage(d, res);
    } catch (err) {
      if (isAbort(err, signal.current)) return;
      d.moreError = err;
    }
    d.more = false;
    render();
  };

  const onRange = (start, end, count) => {
    if (end >= count - 30 && d.next && !d.more && !d.moreError) loadMore();
  };

  if (!d.loaded) return html`<${Loading} label="Loading runs…" />`;
  if (d.error) return html`<${ErrorAlert} error=${d.error} />`;

  const count = d.rows.length;
  const rowHeight = compact ? 94 : 40;
  const done = !d.next;

  const header = html`
    <div role="rowgroup" class="vhead">
      <div role="row" class="run-row head" aria-rowindex="1">
        ${COLUMNS.map(([cls, label]) => html`<div role="columnheader" class=${cls}>${label}</div>`)}
      </div>
    </div>`;

  const renderRow = (i, pos) => {
    const info = d.rows[i].info;
    const stateName = enumName("airlock.v1.RunState", info.state);
    const stop = outcome(info);
    const task = oneLine(info.input, 160);
    return html`
      <div role="row" class="run-row" key=${info.runId} aria-rowindex=${i + 2} style=${rowStyle(pos)}
        data-testid="run-row" data-run-id=${info.runId} data-state=${stateName}>
        <div role="cell" class="c-id"><a class="mono" href=${runHref(info.runId)} title=${info.runId}>${shortId(info.runId)}</a></div>
        <div role="cell" class="c-state"><${StateBadge} state=${info.state} stopReason=${info.stopReason} /></div>
        <div role="cell" class="c-task" title=${info.input} data-testid="run-task">${task || "—"}</div>
        <div role="cell" class="c-model" title=${info.model} data-testid="run-model">${info.model || "—"}</div>
        <div role="cell" class="c-ws mono" title=${info.workspace} data-testid="run-workspace">${lastPathComponent(info.workspace) || "—"}</div>
        <div role="cell" class="c-stop" data-testid="run-outcome">${stop || "—"}</div>
        <div role="cell" class="c-steps c-num" data-label="steps">${formatInt(info.steps)}</div>
        <div role="cell" class="c-session">
          ${info.sessionId
            ? html`<a class="mono subtle" href=${sessionHref(info.sessionId)} title=${`The session's page: ${info.sessionId}`}>${shortId(info.sessionId)}</a>`
            : "—"}
        </div>
        <div role="cell" class="c-started"><${Time} ms=${info.createdAtMs} now=${now} /></div>
      </div>`;
  };

  return html`
    ${d.liveError && html`<${ErrorAlert} error=${d.liveError}>${" "}(live updates paused; retrying)<//>`}
    <${VirtualList}
      count=${count}
      rowHeight=${rowHeight}
      overscan=${8}
      header=${header}
      headerHeight=${compact ? 0 : 36}
      fill=${44}
      minHeight=${280}
      renderRow=${renderRow}
      onRange=${onRange}
      onFirstRows=${() => {
        if (!rowsMarked) {
          rowsMarked = true;
          performance.mark("airlock:rows");
        }
      }}
      attrs=${{
        role: "table",
        "aria-label": "Runs",
        "aria-rowcount": done ? count + 1 : -1,
        "data-testid": "runs",
        class: "vlist runs-table",
      }}
      bodyAttrs=${{ role: "rowgroup" }}
    />
    <div class="list-foot">
      <span>${formatInt(count)} ${count === 1 ? "run" : "runs"}${done ? "" : " loaded"}</span>
      ${d.more && html`<span role="status">Loading more…</span>`}
      ${d.moreError && html`<${ErrorAlert} error=${d.moreError} />`}
      ${d.moreError && html`<button type="button" onClick=${() => { d.moreError = null; loadMore(); }}>Retry</button>`}
      ${done && html`<span data-testid="runs-end" class=${count ? "" : "empty"}>${count ? "End of list" : "No runs"}</span>`}
    </div>
  `;
}

function addPage(d, res) {
  for (const info of res.runs) {
    const row = d.byId.get(info.runId);
    if (row) row.info = info;
    else {
      const fresh = { info };
      d.byId.set(info.runId, fresh);
      d.rows.push(fresh);
    }
  }
  d.next = res.nextPageToken;
  d.loaded = true;
}

/** Newest first by created-at, then by id, as the server lists them. */
function before(a, b) {
  const ta = num(a.createdAtMs);
  const tb = num(b.createdAtMs);
  return ta !== tb ? ta > tb : a.runId > b.runId;
}

function upsert(d, info, { state, query }) {
  const row = d.byId.get(info.runId);
  if (row) {
    row.info = info;
    return;
  }
  if (state && info.state !== state) return;
  // The daemon sends changes of runs it matched; a new one joins only if it matches too.
  if (query && !matchesQuery(info.input, query)) return;
  // Older than every loaded run while more pages remain: it comes with a later page.
  const last = d.rows[d.rows.length - 1]?.info;
  if (d.next && last && before(last, info)) return;
  let lo = 0;
  let hi = d.rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (before(d.rows[mid].info, info)) lo = mid + 1;
    else hi = mid;
  }
  const fresh = { info };
  d.byId.set(info.runId, fresh);
  d.rows.splice(lo, 0, fresh);
}

async function watch(d, { session, state, query }, signal, render) {
  while (!signal.aborted) {
    try {
      for await (const info of api.agent.watchRuns({ sessionId: session, state, query, pageSize: 1 }, { signal })) {
        if (d.liveError) d.liveError = null;
        upsert(d, info, { state, query });
        render();
      }
    } catch (err) {
      if (isAbort(err, signal)) return;
      d.liveError = err;
      render();
      if (isFinalError(err)) return;
    }
    await sleep(1000, signal);
  }
}

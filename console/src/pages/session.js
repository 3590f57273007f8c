// A session (#/sessions/<id>): its workspace, labels and settings (Agent.GetSession), its runs
// oldest first (Agent.ListRuns, every page up to 500 runs, earlier ones on demand) kept live
// by Agent.WatchRuns, and a box that continues it: Agent.StartRun with the session and the
// text (the session's model and settings), read up to its RunStarted, then the new run's
// page. The box waits while a run of the session is going on (the daemon refuses a second).

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enumName, enumNumber, enumTitle, isAbort, isFinalError } from "../api.js";
import { CodeBlock, ErrorAlert, Loading, StateBadge, Time, orDash, sleep, useBatchedRender, useNow, useTitle } from "../components.js";
import { formatDuration, formatInt, num } from "../format.js";
import { html } from "../html.js";
import { navigate, runHref, runsHref } from "../router.js";
import { budgetWords, firstRun, isSubmitKey, oldestFirst, oneLine, utf8Length } from "../start-form.js";

const PAGE_SIZE = 100;
/** Runs read at first; earlier ones wait for "Load earlier runs". */
const FIRST_RUNS = 500;

const runState = (name) => enumNumber("airlock.v1.RunState", name);

/** The policy page for a session's grants and rules. */
function policyHref(sessionId) {
  return `#/policy?session=${encodeURIComponent(sessionId)}`;
}

export function SessionPage({ sessionId }) {
  useTitle(`Session ${sessionId}`);
  const data = useRef(null);
  if (!data.current) {
    data.current = {
      session: null,
      sessionError: null,
      maxInputBytes: 0,
      runs: [],
      byId: new Map(),
      next: "",
      loaded: false,
      listError: null,
      more: false,
      moreError: null,
      liveError: null,
    };
  }
  const d = data.current;
  const render = useBatchedRender();
  const now = useNow(15_000);
  const signalRef = useRef(null);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    signalRef.current = signal;
    let refreshTimer = null;

    const loadSession = async () => {
      try {
        d.session = await api.agent.getSession({ sessionId }, { signal });
        d.sessionError = null;
      } catch (err) {
        if (isAbort(err, signal)) return;
        d.sessionError = err;
      }
      render();
    };
    const refresh = () => {
      if (refreshTimer) return;
      refreshTimer = setTimeout(() => {
        refreshTimer = null;
        loadSession();
      }, 1000);
    };

    loadSession();
    api.daemon.getInfo({}, { signal }).then(
      (info) => {
        d.maxInputBytes = num(info.limits?.maxInputBytes);
        render();
      },
      () => {
        // Without the limit the daemon's own check is what tells a too-long text.
      },
    );
    (async () => {
      try {
        while (d.runs.length < FIRST_RUNS) {
          const res = await api.agent.listRuns({ sessionId, pageSize: PAGE_SIZE, pageToken: d.next }, { signal });
          addPage(d, res);
          render();
          if (!d.next) break;
        }
      } catch (err) {
        if (isAbort(err, signal)) return;
        d.listError = err;
        d.loaded = true;
        render();
        return;
      }
      watch(d, sessionId, signal, () => {
        refresh();
        render();
      });
    })();
    return () => {
      controller.abort();
      clearTimeout(refreshTimer);
    };
  }, [sessionId]);

  const loadEarlier = async () => {
    if (d.more || !d.next) return;
    d.more = true;
    d.moreError = null;
    render();
    try {
      const res = await api.agent.listRuns({ sessionId, pageSize: PAGE_SIZE, pageToken: d.next }, { signal: signalRef.current });
      addPage(d, res);
    } catch (err) {
      if (isAbort(err, signalRef.current)) return;
      d.moreError = err;
    }
    d.more = false;
    render();
  };

  const s = d.session;
  const live = d.runs.find((r) => r.state !== runState("FINISHED"));
  const running = Boolean(live) || Boolean(s?.running);

  return html`
    <div class="page session-page">
      <nav class="crumbs" aria-label="Breadcrumb"><a href="#/runs">Runs</a><span aria-hidden="true"> / </span><span>Session </span><span class="mono" aria-current="page">${sessionId}</span></nav>
      <div class="page-head">
        <h1>Session <span class="mono id">${sessionId}</span></h1>
        <div class="actions">
          <a class="button" href=${policyHref(sessionId)} data-testid="session-policy">Policy for this session</a>
          <a class="button" href=${runsHref({ session: sessionId })}>In the runs list</a>
        </div>
      </div>
      ${d.sessionError && html`<${ErrorAlert} error=${d.sessionError} testid="session-error" />`}
      ${!s && !d.sessionError && html`<${Loading} label="Loading the session…" />`}
      ${s && html`<${Summary} session=${s} running=${running} now=${now} />`}
      ${!d.sessionError && html`<${Runs} d=${d} now=${now} loadEarlier=${loadEarlier} />`}
      ${s && html`<${Continue} sessionId=${sessionId} running=${running} live=${live} maxInputBytes=${d.maxInputBytes} />`}
      ${s && html`<${Settings} settings=${s.settings} />`}
    </div>
  `;
}

function Summary({ session: s, running, now }) {
  const labels = Object.entries(s.labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return html`
    <section class="card summary" aria-label="Session summary" data-testid="session-summary">
      <dl class="facts">
        <div><dt>State</dt><dd data-testid="session-state" data-running=${running ? "true" : "false"}>
          ${running
            ? html`<span class="badge state-running"><span class="dot" aria-hidden="true"></span>A run is going on</span>`
            : html`<span class="badge">Idle</span>`}</dd></div>
        <div><dt>Runs</dt><dd>${formatInt(s.runs)}</dd></div>
        <div><dt>Created</dt><dd><${Time} ms=${s.createdAtMs} now=${now} /></dd></div>
        <div><dt>Last active</dt><dd><${Time} ms=${s.lastActiveMs} now=${now} /></dd></div>
        <div><dt>Latest run</dt><dd>${s.lastRunId ? html`<a class="mono break" href=${runHref(s.lastRunId)}>${s.lastRunId}</a>` : orDash("")}</dd></div>
        <div class="wide"><dt>Workspace</dt><dd class="mono break" data-testid="session-workspace">${s.workspace || "—"}</dd></div>
        ${labels.length
          ? html`<div class="wide"><dt>Labels</dt><dd>
              <ul class="labels">${labels.map(([k, v]) => html`<li class="mono"><span>${k}</span>=<span>${v}</span></li>`)}</ul>
            </dd></div>`
          : null}
      </dl>
    </section>`;
}

function Settings({ settings }) {
  const st = settings ?? {};
  const policy = enumName("airlock.v1.ApprovalPolicy", st.approvalPolicy);
  const budgets = budgetWords(st.budgets, formatDuration);
  const timeout = num(st.approvalTimeoutMs);
  return html`
    <section class="card session-settings" aria-labelledby="settings-title" data-testid="session-settings">
      <h2 id="settings-title">Settings</h2>
      <p class="note">What every run of the session inherits; a run may narrow them, never widen them.</p>
      <dl class="kv">
        <div><dt>Model</dt><dd data-testid="session-model">${st.model?.model
          ? html`<span class="mono">${st.model.model}</span>`
          : html`<span class="muted">none set: each run names its own</span>`}</dd></div>
        <div><dt>Approval policy</dt><dd>${policy === "UNSPECIFIED" ? html`<span class="muted">the daemon's default</span>` : enumTitle("airlock.v1.ApprovalPolicy", st.approvalPolicy)}</dd></div>
        <div><dt>Budgets</dt><dd>${budgets.length ? `at most ${budgets.join(", ")}` : html`<span class="muted">the daemon's defaults</span>`}</dd></div>
        <div><dt>Tools</dt><dd>${st.tools?.length ? html`<span class="mono">${st.tools.join(", ")}</span>` : html`<span class="muted">every tool the daemon serves</span>`}</dd></div>
        <div><dt>Approval timeout</dt><dd>${timeout ? formatDuration(timeout) : html`<span class="muted">the daemon's default</span>`}</dd></div>
        <div><dt>Stop on denial</dt><dd>${st.stopOnDenial ? "yes: a denied call ends the run" : "no: the model is told"}</dd></div>
      </dl>
      <h3 class="h4">Instructions</h3>
      ${st.instructions ? html`<${CodeBlock} text=${st.instructions} label="The session's instructions" testid="session-instructions" />` : html`<p class="muted">None.</p>`}
      <h3 class="h4">Rules</h3>
      ${st.rules ? html`<${CodeBlock} text=${st.rules} label="The session's policy rules" testid="session-rules" />` : html`<p class="muted">None.</p>`}
    </section>`;
}

function Continue({ sessionId, running, live, maxInputBytes }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const alive = useRef(true);
  const pending = useRef(null);
  useEffect(
    () => () => {
      alive.current = false;
      pending.current?.abort();
    },
    [],
  );

  const bytes = utf8Length(text);
  const over = maxInputBytes > 0 && bytes > maxInputBytes;
  const empty = !text.trim();

  const submit = async (event) => {
    event.preventDefault();
    if (busy || running) return;
    if (empty || over) {
      setError(empty ? "Say what the next run should do." : `The text is ${formatInt(bytes)} bytes; at most ${formatInt(maxInputBytes)} are taken.`);
      document.getElementById("continue-input")?.focus();
      return;
    }
    setBusy(true);
    setError(null);
    const controller = new AbortController();
    pending.current = controller;
    try {
      // No model: the session's is used, with its settings.
      const { runId } = await firstRun(api.agent.startRun({ sessionId, input: text }, { signal: controller.signal }));
      controller.abort();
      if (alive.current) navigate(runHref(runId));
    } catch (err) {
      controller.abort();
      if (!alive.current) return;
      setBusy(false);
      setError(err);
    }
  };

  const onKey = (event) => {
    if (isSubmitKey(event)) {
      event.preventDefault();
      event.currentTarget.form?.requestSubmit();
    }
  };

  const described = ["continue-count", running ? "continue-busy" : ""].filter(Boolean).join(" ");
  return html`
    <section class="card continue-box" aria-labelledby="continue-title">
      <h2 id="continue-title">Continue the session</h2>
      <form data-testid="continue-form" onSubmit=${submit} novalidate aria-busy=${busy ? "true" : "false"}>
        <div class="field">
          <label for="continue-input">What the next run should do</label>
          <textarea id="continue-input" data-testid="continue-input" rows="3" value=${text}
            onInput=${(e) => {
              setText(e.currentTarget.value);
              if (error && typeof error === "string") setError(null);
            }}
            onKeyDown=${onKey} aria-invalid=${over ? "true" : undefined} aria-describedby=${described}></textarea>
          <p id="continue-count" class=${`counter${over ? " over" : ""}`}>
            ${maxInputBytes ? `${formatInt(bytes)} of ${formatInt(maxInputBytes)} bytes` : `${formatInt(bytes)} bytes`}
            <span class="muted"> · It starts from this session's conversation, with its model and settings. Ctrl+Enter (⌘+Enter) sends it.</span>
          </p>
        </div>
        ${running
          ? html`<p class="note warn-text" id="continue-busy" data-testid="continue-busy" role="status">
              A run of this session is going on${live ? html` (<a class="mono" href=${runHref(live.runId)}>${live.runId}</a>)` : null}: continue once it has ended.
            </p>`
          : null}
        ${error && html`<${ErrorAlert} error=${error} testid="continue-error" />`}
        <div class="buttons">
          <button type="submit" class="primary" data-testid="continue" disabled=${busy || running}>${busy ? "Starting…" : "Continue"}</button>
        </div>
      </form>
    </section>`;
}

function Runs({ d, now, loadEarlier }) {
  const count = d.runs.length;
  return html`
    <section class="session-runs-section" aria-labelledby="session-runs-title">
      <div class="section-head">
        <h2 id="session-runs-title">Runs <span class="muted count">${formatInt(count)}${d.next ? "+" : ""}</span></h2>
        <span class="muted follow-note">Oldest first</span>
      </div>
      ${d.listError && html`<${ErrorAlert} error=${d.listError} />`}
      ${d.liveError && html`<${ErrorAlert} error=${d.liveError}>${" "}(live updates paused; retrying)<//>`}
      ${!d.loaded && !d.listError && html`<${Loading} label="Loading the runs…" />`}
      ${d.next
        ? html`<p class="list-foot">
            <button type="button" data-testid="load-earlier" disabled=${d.more} onClick=${loadEarlier}>${d.more ? "Loading…" : "Load earlier runs"}</button>
            ${d.moreError && html`<${ErrorAlert} error=${d.moreError} />`}
          </p>`
        : null}
      ${d.loaded && !d.listError && count === 0 ? html`<p class="empty-state" data-testid="session-runs-empty">No runs yet</p>` : null}
      ${count > 0 && html`
        <div class="session-runs-wrap">
          <table class="session-runs" data-testid="session-runs">
            <caption class="sr-only">Runs of the session, oldest first</caption>
            <colgroup>
              <col class="w-run" /><col class="w-task" /><col class="w-state" /><col class="w-stop" /><col class="w-steps" /><col class="w-final" /><col class="w-started" />
            </colgroup>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Task</th>
                <th scope="col">State</th>
                <th scope="col">Stop reason</th>
                <th scope="col" class="num">Steps</th>
                <th scope="col">Final text</th>
                <th scope="col">Started</th>
              </tr>
            </thead>
            <tbody>
              ${d.runs.map((info) => html`<${RunRow} key=${info.runId} info=${info} now=${now} />`)}
            </tbody>
          </table>
        </div>`}
    </section>`;
}

function RunRow({ info, now }) {
  const stop = enumTitle("airlock.v1.StopReason", info.stopReason);
  const finished = info.state === runState("FINISHED");
  return html`
    <tr data-testid="session-run" data-run-id=${info.runId} data-state=${enumName("airlock.v1.RunState", info.state)}>
      <td data-label="Run"><a class="mono" href=${runHref(info.runId)}>${info.runId}</a></td>
      <td data-label="Task" class="cut" title=${info.input}>${oneLine(info.input, 200) || html`<span class="muted">—</span>`}</td>
      <td data-label="State"><${StateBadge} state=${info.state} stopReason=${info.stopReason} /></td>
      <td data-label="Stop reason">${orDash(stop)}${info.stopDetail ? html`<span class="muted small"> · ${info.stopDetail}</span>` : null}</td>
      <td data-label="Steps" class="num">${formatInt(info.steps)}</td>
      <td data-label="Final text" class="cut" title=${oneLine(info.finalText, 2000)}>${info.finalText
        ? oneLine(info.finalText, 200)
        : html`<span class="muted">${finished ? "none" : "not yet"}</span>`}</td>
      <td data-label="Started" class="muted"><${Time} ms=${info.createdAtMs} now=${now} /></td>
    </tr>`;
}

/** Adds a page of ListRuns (newest first) to the runs kept oldest first. */
function addPage(d, res) {
  for (const info of res.runs) upsert(d, info, true);
  d.next = res.nextPageToken;
  d.loaded = true;
}

/** Puts a run in its place; `listed` ones come from a page and always belong. */
function upsert(d, info, listed = false) {
  const at = d.byId.get(info.runId);
  if (at !== undefined) {
    const i = d.runs.indexOf(at);
    if (i >= 0) d.runs[i] = info;
    d.byId.set(info.runId, info);
    return;
  }
  // Older than every loaded run while earlier pages remain: it comes with one of them.
  if (!listed && d.next && d.runs.length && oldestFirst(info, d.runs[0]) < 0) return;
  let lo = 0;
  let hi = d.runs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (oldestFirst(d.runs[mid], info) < 0) lo = mid + 1;
    else hi = mid;
  }
  d.runs.splice(lo, 0, info);
  d.byId.set(info.runId, info);
}

async function watch(d, sessionId, signal, changed) {
  while (!signal.aborted) {
    try {
      for await (const info of api.agent.watchRuns({ sessionId, pageSize: 1 }, { signal })) {
        if (d.liveError) d.liveError = null;
        upsert(d, info);
        changed();
      }
    } catch (err) {
      if (isAbort(err, signal)) return;
      d.liveError = err;
      changed();
      if (isFinalError(err)) return;
    }
    await sleep(1000, signal);
  }
}

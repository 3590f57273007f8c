// One run (#/runs/<id>): its summary from Agent.GetRun, kept live by its events; the events
// themselves from Agent.WatchRun (all of them, then live ones, reconnecting from the last
// seq after a failure), with streamed deltas merged into one pending row until the event
// they lead up to is committed; a cancel button while it runs; the approvals it waits for,
// answered in place; its change sets, each step's with its diffs, and once the run has
// finished, a revert to before a step (a dry run first: what it would restore and remove,
// and the conflicts, which only a confirmed forced revert overrides) and a fork at a step.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, enumName, enumNumber, enumTitle, errorCode, errorMessage, isAbort, isFinalError, Code } from "../api.js";
import { approvalsStore } from "../approvals-store.js";
import { ErrorAlert, Loading, StateBadge, Time, sleep, useBatchedRender, useMedia, useNow, useTitle } from "../components.js";
import { CHANGES_PAGE, MAX_CHANGES_PAGE, changesRead, mergeChangePages } from "../change-pages.js";
import { DiffView } from "../diff-view.js";
import { ChangeList, describe } from "../events.js";
import { firstLine, formatDuration, formatInt, localDateTime, num } from "../format.js";
import { html } from "../html.js";
import { navigate, runHref, runsHref, traceHref } from "../router.js";
import { useStore } from "../store.js";
import { ApprovalCard } from "./approvals.js";
import { approvalTimeoutMs, asText, askedTimes, firstOfStep, listHead, pendingFromEvents, revertPlan, unifiedDiff } from "../undo.js";
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
  // The revert or fork dialog open: { kind: "revert" | "fork", step, opener }.
  const [dialog, setDialog] = useState(null);

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
  const finished = d.finished || info?.state === runState("FINISHED");

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
      ${!notFound && html`<${RunApprovals} runId=${runId} events=${d.events} count=${d.events.length} live=${!finished} />`}
      ${!notFound && html`<${Events} d=${d} render=${render} />`}
      ${d.changesError && !notFound && html`<${ErrorAlert} error=${d.changesError} />`}
      ${d.changes?.steps?.length
        ? html`<${Changes} runId=${runId} changes=${d.changes} loading=${d.loadingChanges} more=${moreChanges} finished=${finished && !!info}
            open=${(kind, step, opener) => setDialog({ kind, step, opener })} />`
        : null}
      ${dialog?.kind === "revert" ? html`<${RevertDialog} runId=${runId} step=${dialog.step} opener=${dialog.opener} onClose=${() => setDialog(null)} />` : null}
      ${dialog?.kind === "fork" ? html`<${ForkDialog} runId=${runId} step=${dialog.step} input=${info?.input ?? ""} opener=${dialog.opener} onClose=${() => setDialog(null)} />` : null}
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
        ? html`<p class="note waiting-note">The run waits for an approval: answer it below, or in <a href="#/approvals">Approvals</a>.</p>`
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

function Changes({ runId, changes, loading, more, finished, open }) {
  const total = num(changes.totalChanges);
  const read = changesRead(changes);
  const first = firstOfStep(changes.steps);
  return html`
    <section class="card" aria-labelledby="changes-title" data-testid="changes" data-read=${String(read)} data-total=${String(total)}>
      <h2 id="changes-title">Changes</h2>
      <p class="muted">${formatInt(total)} ${total === 1 ? "file change" : "file changes"}${changes.workspace ? html` in <code>${changes.workspace}</code>` : null}</p>
      ${finished
        ? null
        : html`<p class="note undo-note" data-testid="undo-note">Revert and fork are available once the run has finished.</p>`}
      <ol class="step-changes">
        ${changes.steps.map((s, i) => html`<li data-testid="step-changes" data-step=${String(s.step)}>
          <div class="step-head">
            <h3 class="h4">Step ${s.step} · ${s.tool} <span class="muted mono">${s.callId}</span></h3>
            ${finished && first[i]
              ? html`<div class="step-actions">
                  <button type="button" data-testid="revert-step" data-step=${String(s.step)} onClick=${(e) => open("revert", s.step, e.currentTarget)}>
                    Revert to before step ${s.step}</button>
                  <button type="button" data-testid="fork-step" data-step=${String(s.step)} onClick=${(e) => open("fork", s.step, e.currentTarget)}>
                    Fork at step ${s.step}</button>
                </div>`
              : null}
          </div>
          <${ChangeList} changeSet=${s.changeSet} limit=${Infinity} />
          <${StepDiffs} runId=${runId} changeSet=${s.changeSet} step=${s.step} index=${i} />
        </li>`)}
      </ol>
      ${num(changes.nextOffset) > 0
        ? html`<p><button type="button" data-testid="more-changes" disabled=${loading} onClick=${more}>
            ${loading ? "Loading…" : `Show more changes (${formatInt(read)} of ${formatInt(total)} read)`}</button></p>`
        : null}
    </section>`;
}

/** The most files of a step whose diffs are read at once. */
const MAX_DIFFS = 50;

/** A file's bytes on one side of a change, by digest ("" for a side without a file). */
async function sideText(runId, state, signal) {
  if (!state || enumName("airlock.v1.NodeKind", state.node) !== "FILE" || !state.digest) return "";
  const blob = await api.agent.readBlob({ runId, digest: state.digest }, { signal });
  return asText(blob.content);
}

/** One change's diff: { path, text } or { path, note } when it cannot be shown. */
async function changeDiff(runId, change, signal) {
  const path = change.path;
  if (change.digestOnly) return { path, note: `contents not kept (${change.digestOnly})` };
  const kind = enumName("airlock.v1.ChangeKind", change.kind);
  const nodes = [change.before, change.after].filter(Boolean).map((f) => enumName("airlock.v1.NodeKind", f.node));
  if (nodes.length && nodes.every((n) => n !== "FILE")) return { path, note: nodes.includes("DIR") ? "a directory" : "a symbolic link" };
  if (kind === "RENAMED" && change.before?.digest === change.after?.digest) return { path, note: `renamed from ${change.from}, contents unchanged` };
  try {
    const [before, after] = await Promise.all([sideText(runId, change.before, signal), sideText(runId, change.after, signal)]);
    if (before === null || after === null) return { path, note: "binary contents: no text diff" };
    const text = unifiedDiff(before, after, path, { added: !change.before, deleted: !change.after });
    if (text === null) return { path, note: "too long to diff here" };
    if (text === "") return { path, note: "contents unchanged (mode or type only)" };
    return { path, text };
  } catch (err) {
    if (isAbort(err, signal)) throw err;
    return { path, note: `not readable: ${errorMessage(err)}` };
  }
}

/** A step's diffs, read (ReadBlob, both sides of each file) when asked for. */
function StepDiffs({ runId, changeSet, step, index }) {
  const [state, setState] = useState({ open: false, loading: false, diffs: null });
  const controller = useRef(null);
  useEffect(() => () => controller.current?.abort(), []);
  const changes = changeSet?.changes ?? [];
  if (!changes.length) return null;

  const toggle = async () => {
    if (state.open) {
      controller.current?.abort();
      setState({ open: false, loading: false, diffs: state.diffs });
      return;
    }
    if (state.diffs) {
      setState({ ...state, open: true });
      return;
    }
    const c = new AbortController();
    controller.current = c;
    setState({ open: true, loading: true, diffs: null });
    try {
      const diffs = [];
      for (const change of changes.slice(0, MAX_DIFFS)) diffs.push(await changeDiff(runId, change, c.signal));
      if (!c.signal.aborted) setState({ open: true, loading: false, diffs });
    } catch (err) {
      if (!isAbort(err, c.signal)) setState({ open: true, loading: false, diffs: [{ path: "", note: errorMessage(err) }] });
    }
  };

  const id = `step-diffs-${index}`;
  return html`
    <div class="step-diffs">
      <button type="button" class="link-button" data-testid="step-diffs" data-step=${String(step)} aria-expanded=${state.open ? "true" : "false"}
        aria-controls=${state.open ? id : undefined} onClick=${toggle}>
        ${state.open ? "Hide the diffs" : "Show the diffs"}<span class="sr-only"> of step ${step}</span></button>
      ${state.open
        ? html`<div id=${id} class="step-diffs-body" data-testid="step-diff-list">
            ${state.loading ? html`<${Loading} label="Reading the files…" />` : null}
            ${(state.diffs ?? []).map((f) => f.text
              ? html`<${DiffView} text=${f.text} label=${`Diff of step ${step}`} />`
              : html`<p class="note"><code>${f.path}</code>${f.path ? ": " : ""}${f.note}</p>`)}
            ${changes.length > MAX_DIFFS && !state.loading
              ? html`<p class="note">The first ${formatInt(MAX_DIFFS)} of ${formatInt(changes.length)} files are shown.</p>`
              : null}
          </div>`
        : null}
    </div>`;
}

/** The approvals the run waits for (and ones just answered), each to answer in place. */
function RunApprovals({ runId, events, count, live }) {
  const store = useStore(approvalsStore);
  const now = useNow(1000);
  // The events only grow: read them again when there are more.
  const { pending, asked } = useMemo(() => ({ pending: pendingFromEvents(events), asked: askedTimes(events) }), [events, count]);
  const cards = [];
  const shown = new Set();
  for (const item of store.items.values()) {
    if (item.request.runId !== runId) continue;
    shown.add(item.request.approvalId);
    cards.push(item);
  }
  // Asked in the run's events, not (yet, or any more) in the app-wide inbox.
  if (live) {
    for (const p of pending) {
      if (!shown.has(p.request.approvalId)) cards.push({ request: p.request, phase: "pending", sent: false, local: true });
    }
  }
  if (!cards.length) return null;
  return html`
    <section class="card run-approvals" aria-labelledby="run-approvals-title" data-testid="run-approvals">
      <h2 id="run-approvals-title">Waiting for approval</h2>
      <p class="note">The run waits for an answer to this exact call; the same requests are in <a href="#/approvals">Approvals</a>.</p>
      <div class="cards">
        ${cards.map((item) => html`<${ApprovalCard} key=${item.request.approvalId} item=${item} now=${now} level=${3}
          timeoutMs=${approvalTimeoutMs(item.request.deadlineMs, asked.get(item.request.approvalId))} />`)}
      </div>
    </section>`;
}

/**
 * A modal dialog (the native <dialog>): focus moves to its title as it opens, Escape closes
 * it, and focus goes back to the button that opened it.
 */
function Dialog({ id, title, opener, onClose, testid, children }) {
  const ref = useRef(null);
  const heading = useRef(null);
  const gone = useRef(false);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open && typeof dialog.showModal === "function") dialog.showModal();
    heading.current?.focus();
    return () => {
      gone.current = true;
      // Out of the top layer first: while a modal dialog is open, the page behind it is inert
      // and its buttons cannot take the focus.
      if (dialog?.open) dialog.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  const close = () => {
    if (!gone.current) onClose();
  };
  return html`
    <dialog ref=${ref} class="undo-dialog" aria-labelledby=${`${id}-title`} data-testid=${testid}
      onCancel=${(e) => {
        e.preventDefault();
        close();
      }}
      onClose=${close}>
      <div class="dialog-head">
        <h2 id=${`${id}-title`} tabindex="-1" ref=${heading}>${title}</h2>
        <button type="button" class="quiet" data-testid="dialog-close" onClick=${onClose}>Close</button>
      </div>
      ${children}
    </dialog>`;
}

function PathList({ items, testid, label, conflict = false }) {
  const { shown, more } = listHead(items);
  if (!shown.length) return null;
  return html`
    <h3 class="h4">${label} <span class="muted">(${formatInt(items.length)})</span></h3>
    <ul class=${`plan-list${conflict ? " conflicts" : ""}`} data-testid=${testid}>
      ${shown.map((item) => typeof item === "string"
        ? html`<li><code>${item}</code></li>`
        : html`<li data-path=${item.path}><code>${item.path}</code>${item.reason ? html`<span class="reason">${item.reason}</span>` : null}</li>`)}
    </ul>
    ${more ? html`<p class="muted">and ${formatInt(more)} more</p>` : null}`;
}

/** What a revert would do (dry run) or did: its lists. */
function PlanLists({ plan, done }) {
  return html`
    <${PathList} items=${plan.conflicts} testid="revert-conflicts" label="Conflicts: changed since by something other than the run" conflict=${true} />
    <${PathList} items=${plan.restored} testid="revert-restored" label=${done ? "Restored" : "Would be restored"} />
    <${PathList} items=${plan.removed} testid="revert-removed" label=${done ? "Removed" : "Would be removed"} />
    <${PathList} items=${plan.unrestorable} testid="revert-unrestorable" label="Cannot be put back byte for byte" />`;
}

/**
 * Revert to before a step: a dry run first, shown; then the revert, or — when paths
 * conflict — only a forced revert, after ticking that their changes will be lost.
 */
function RevertDialog({ runId, step, opener, onClose }) {
  const [state, setState] = useState({ phase: "checking", plan: null, error: null, result: null, refused: "" });
  const [understood, setUnderstood] = useState(false);
  const alive = useRef(true);
  const controller = useRef(null);
  const set = (patch) => alive.current && setState((s) => ({ ...s, ...patch }));

  const check = async () => {
    controller.current?.abort();
    const c = new AbortController();
    controller.current = c;
    set({ phase: "checking", error: null });
    setUnderstood(false);
    try {
      const plan = await api.agent.revertRun({ runId, toStep: step, dryRun: true }, { signal: c.signal });
      set({ phase: "ready", plan: revertPlan(plan) });
    } catch (err) {
      if (isAbort(err, c.signal)) return;
      set({ phase: "ready", plan: null, error: err });
    }
  };

  useEffect(() => {
    check();
    return () => {
      alive.current = false;
      controller.current?.abort();
    };
  }, []);

  const revert = async (force) => {
    set({ phase: "reverting", error: null, refused: "" });
    try {
      // Not aborted by closing the dialog: once sent, the daemon decides.
      const result = await api.agent.revertRun({ runId, toStep: step, force });
      set({ phase: "done", result: revertPlan(result) });
    } catch (err) {
      if (errorCode(err) === Code.FailedPrecondition) {
        // Something changed since the dry run: say what the daemon said, and look again.
        set({ refused: errorMessage(err) });
        await check();
      } else {
        set({ phase: "ready", error: err });
      }
    }
  };

  const { phase, plan, result } = state;
  // Keyboard users go on from where the dialog now is: its close button once reverted, the
  // confirmation once a refused revert showed conflicts.
  const closeButton = useRef(null);
  const understand = useRef(null);
  useEffect(() => {
    if (phase === "done") closeButton.current?.focus();
    else if (phase === "ready" && state.refused) understand.current?.focus();
  }, [phase, state.refused]);
  return html`
    <${Dialog} id="revert" title=${`Revert to before step ${step}`} opener=${opener} onClose=${onClose} testid="revert-dialog">
      <p class="muted">Puts the workspace back as it was before step ${step}: every change of this step and the later ones is undone.</p>
      ${state.refused ? html`<p role="alert" class="alert" data-testid="revert-refused">${state.refused}</p>` : null}
      <${ErrorAlert} error=${state.error} testid="revert-error" />
      ${phase === "checking" ? html`<${Loading} label="Checking what a revert would do…" />` : null}
      ${phase === "done" && result
        ? html`<div role="status" data-testid="revert-done">
            <p class="done-note">Reverted to before step ${step}.</p>
            ${result.nothing ? html`<p class="muted">Nothing needed changing.</p>` : html`<${PlanLists} plan=${result} done=${true} />`}
          </div>
          <div class="dialog-buttons"><button type="button" class="primary" data-testid="revert-close" ref=${closeButton} onClick=${onClose}>Close</button></div>`
        : null}
      ${(phase === "ready" || phase === "reverting") && plan
        ? html`<div data-testid="revert-plan" data-conflicts=${String(plan.conflicts.length)}>
            ${plan.nothing ? html`<p class="muted" data-testid="revert-nothing">Nothing to undo: the workspace already is as it was before step ${step}.</p>` : null}
            <${PlanLists} plan=${plan} done=${false} />
          </div>
          ${plan.needsForce
            ? html`<div class="force">
                <p class="warn-text">A revert is refused while these paths conflict: their changes since the run would be overwritten.</p>
                <div class="check">
                  <input type="checkbox" id="revert-understand" data-testid="revert-understand" ref=${understand} checked=${understood}
                    disabled=${phase === "reverting"} onChange=${(e) => setUnderstood(e.currentTarget.checked)} />
                  <label for="revert-understand">I understand the changes listed above will be lost</label>
                </div>
                <div class="dialog-buttons">
                  <button type="button" class="danger" data-testid="revert-force" disabled=${!understood || phase === "reverting"} onClick=${() => revert(true)}>
                    ${phase === "reverting" ? "Reverting…" : "Revert anyway (their changes are lost)"}</button>
                  <button type="button" onClick=${onClose}>Cancel</button>
                </div>
              </div>`
            : html`<div class="dialog-buttons">
                <button type="button" class="primary" data-testid="revert-confirm" disabled=${phase === "reverting"} onClick=${() => revert(false)}>
                  ${phase === "reverting" ? "Reverting…" : "Revert"}</button>
                <button type="button" onClick=${onClose}>Cancel</button>
              </div>`}`
        : null}
      ${phase === "ready" && !plan ? html`<div class="dialog-buttons"><button type="button" onClick=${check}>Try again</button></div>` : null}
    <//>`;
}

/** Fork at a step: a new run from the conversation up to it, then its page. */
function ForkDialog({ runId, step, input, opener, onClose }) {
  const [copy, setCopy] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const text = useRef(null);

  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const info = await api.agent.forkRun({ runId, atStep: step, copyWorkspace: copy, input: text.current.value.trim() });
      navigate(runHref(info.runId));
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return html`
    <${Dialog} id="fork" title=${`Fork at step ${step}`} opener=${opener} onClose=${onClose} testid="fork-dialog">
      <p class="muted">Starts a new run whose conversation is this run's up to the start of step ${step}.</p>
      <form data-testid="fork-form" onSubmit=${submit} novalidate>
        <div class="check">
          <input type="checkbox" id="fork-copy" data-testid="fork-copy" checked=${copy} onChange=${(e) => setCopy(e.currentTarget.checked)} aria-describedby="fork-copy-hint" />
          <label for="fork-copy">In a copy of the workspace</label>
        </div>
        <p class="hint" id="fork-copy-hint">${copy
          ? `A copy of the workspace as it was before step ${step}, made next to it, in a new session; the original stays as it is.`
          : "In this run's session and workspace, as the workspace is now."}</p>
        <div class="field">
          <label for="fork-input">New input <span class="muted">(optional)</span></label>
          <textarea id="fork-input" data-testid="fork-input" rows="3" ref=${text} aria-describedby="fork-input-hint"></textarea>
          <p class="hint" id="fork-input-hint">Empty: the run's own input${input ? html` (“${firstLine(input, 120)}”)` : null}.</p>
        </div>
        <${ErrorAlert} error=${error} testid="fork-error" />
        <div class="dialog-buttons">
          <button type="submit" class="primary" data-testid="fork-submit" disabled=${busy}>${busy ? "Forking…" : "Fork"}</button>
          <button type="button" onClick=${onClose}>Cancel</button>
        </div>
      </form>
    <//>`;
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


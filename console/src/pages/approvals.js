// The approvals inbox (#/approvals): a card per pending request from the app-wide
// WatchApprovals stream (approvals-store.js) — the tool, its run, risk, reason, profile, the
// exact arguments, the preview (a diff side by side), a countdown to the deadline — and
// the three answers. A decision names the approval and digest the card carries in its
// data-approval-id / data-digest attributes when the button is clicked. A card turns expired
// the moment its deadline passes (a timer at the deadline), its buttons disabled. The recent
// list says why a denied call was denied. ApprovalCard is the run page's inline card too.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enumName, enumNumber, errorMessage } from "../api.js";
import { approvalsStore, markSent } from "../approvals-store.js";
import { CodeBlock, RiskBadge, useNow, useTitle } from "../components.js";
import { useStore } from "../store.js";
import { DiffView } from "../diff-view.js";
import { localDateTime, num, prettyJson, relativeTime } from "../format.js";
import { html } from "../html.js";
import { runHref } from "../router.js";
import { approvalCountdown, approvalLeftMs } from "../undo.js";

/** Each button's Decision, by its name in the descriptor set the daemon serves. */
const DECISIONS = { once: "APPROVE_ONCE", session: "APPROVE_SESSION", deny: "DENY" };

/** A DOM id made from an approval id (which is unguessable but may hold any character). */
function domId(approvalId) {
  return `approval-${String(approvalId).replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

export function ApprovalsPage() {
  const store = useStore(approvalsStore);
  const now = useNow(1000);
  // Pending first, soonest deadline first; answered and expired ones (leaving soon) after.
  const items = [...store.items.values()].sort(
    (a, b) => (a.phase === "pending" ? 0 : 1) - (b.phase === "pending" ? 0 : 1) || num(a.request.deadlineMs) - num(b.request.deadlineMs),
  );
  useTitle(store.pending ? `Approvals (${store.pending})` : "Approvals");

  return html`
    <div class="page approvals-page">
      <div class="page-head">
        <h1>Approvals</h1>
        <p class="muted head-note">${store.connected ? "Live: new requests appear here as runs ask." : store.error ? "" : "Connecting…"}</p>
      </div>
      ${store.error && html`<p role="alert" class="alert">${store.error}</p>`}
      ${store.pending === 0 && store.loaded
        ? html`<p class="empty-state" data-testid="approvals-empty">Nothing waits for you</p>`
        : null}
      <div class="cards">
        ${items.map((item) => html`<${ApprovalCard} key=${item.request.approvalId} item=${item} now=${now} />`)}
      </div>
      ${store.recent.length ? html`
        <section class="recent" aria-labelledby="recent-title">
          <h2 id="recent-title">Recent</h2>
          <ul class="recent-list">
            ${store.recent.map((r) => html`<li key=${r.request.approvalId}>
              <span class=${`badge ${r.phase === "answered" ? "status-ok" : "status-error"}`}>${r.phase}</span>
              <strong>${r.request.tool}</strong>
              ${r.request.runId ? html`<a class="mono" href=${runHref(r.request.runId)}>${r.request.runId}</a>` : null}
              ${r.request.detail ? html`<span class="muted">${r.request.detail}</span>` : null}
              ${r.reason ? html`<span class="recent-reason" data-testid="recent-reason">“${r.reason}”</span>` : null}
              <span class="muted" title=${localDateTime(r.at)}>${relativeTime(r.at, now)}</span>
            </li>`)}
          </ul>
        </section>` : null}
    </div>
  `;
}

/** True from the moment `deadlineMs` (the browser's clock) passes: a timer set at it. */
function useDeadlinePassed(deadlineMs) {
  const deadline = num(deadlineMs);
  const [passed, setPassed] = useState(() => deadline > 0 && Date.now() >= deadline);
  useEffect(() => {
    if (!deadline) return undefined;
    const left = deadline - Date.now();
    if (left <= 0) {
      setPassed(true);
      return undefined;
    }
    setPassed(false);
    // setTimeout holds at most 2^31 - 1 ms; a later deadline is looked at again then.
    let timer = setTimeout(function check() {
      const rest = deadline - Date.now();
      if (rest <= 0) setPassed(true);
      else timer = setTimeout(check, Math.min(rest, 2 ** 31 - 1));
    }, Math.min(left, 2 ** 31 - 1));
    return () => clearTimeout(timer);
  }, [deadline]);
  return passed;
}

/**
 * One approval request with its answers. `level`: the heading level of its title (2 in the
 * inbox, 3 inside the run page's section); `timeoutMs`: the approval's timeout when known
 * (the countdown never shows more).
 */
export function ApprovalCard({ item, now, level = 2, timeoutMs = 0 }) {
  const r = item.request;
  const id = domId(r.approvalId);
  const [error, setError] = useState("");
  const [reasonError, setReasonError] = useState("");
  const [busy, setBusy] = useState(false);
  // Sent from this card: for a card the app-wide store does not hold (`item.local`: the run
  // page's, from the run's events), what keeps its buttons disabled until the answer shows.
  const [sentHere, setSentHere] = useState(false);
  const sent = item.local ? sentHere : item.sent;
  const reasonRef = useRef(null);
  const passed = useDeadlinePassed(r.deadlineMs);
  // Expired here as the deadline passes, before the daemon's update says so.
  const phase = item.phase === "pending" && passed ? "expired" : item.phase;
  const locked = busy || sent || phase !== "pending";
  const preview = r.preview;
  const Title = level === 3 ? "h3" : "h2";
  const Sub = level === 3 ? "h4" : "h3";

  useEffect(() => {
    if (!sentHere) return undefined;
    const timer = setTimeout(() => setSentHere(false), 20_000);
    return () => clearTimeout(timer);
  }, [sentHere]);

  const decide = async (event, which) => {
    // What the card says when the button is pressed: the approval and the digest it shows.
    const card = event.currentTarget.closest("article");
    const approvalId = card.getAttribute("data-approval-id") ?? "";
    const digest = card.getAttribute("data-digest") ?? "";
    let reason = "";
    if (which === "deny") {
      reason = reasonRef.current.value.trim();
      if (!reason) {
        setReasonError("Give a reason: the model is told why the call was denied.");
        reasonRef.current.focus();
        return;
      }
    }
    setReasonError("");
    setError("");
    setBusy(true);
    try {
      await api.agent.decideApproval({ approvalId, decision: enumNumber("airlock.v1.Decision", DECISIONS[which]), reason, digest });
      setSentHere(true);
      markSent(r.approvalId, true, reason);
      // Should the stream's update never come, let the card be answered again.
      setTimeout(() => markSent(r.approvalId, false), 20_000);
    } catch (err) {
      setError(errorMessage(err));
    }
    setBusy(false);
  };

  const network = r.network?.host ? `${r.network.host}:${r.network.port}` : "";
  const deadline = num(r.deadlineMs);
  const left = approvalLeftMs(deadline, now, timeoutMs);

  return html`
    <article class=${`card approval phase-${phase}${sent ? " sent" : ""}`} data-testid="approval"
      data-approval-id=${r.approvalId} data-digest=${r.digest} data-state=${enumName("airlock.v1.ApprovalState", r.state)}
      data-phase=${phase} aria-labelledby=${`${id}-title`}>
      <header class="approval-head">
        <${Title} id=${`${id}-title`} class="tool-name">${r.tool}<//>
        <${RiskBadge} risk=${r.risk} />
        ${phase === "pending"
          ? html`<span class=${`deadline${left < 30_000 ? " soon" : ""}`} data-testid="deadline" data-left-ms=${String(Math.round(left))}
              title=${deadline ? `Denied if unanswered by ${localDateTime(deadline)}` : ""}>${approvalCountdown(deadline, now, timeoutMs)}</span>`
          : html`<span class=${`badge ${phase === "answered" ? "status-ok" : "status-error"}`} data-testid="approval-phase">${phase}</span>`}
      </header>
      <dl class="kv approval-facts">
        <div><dt>Run</dt><dd>${r.runId ? html`<a class="mono" href=${runHref(r.runId)}>${r.runId}</a>` : html`<span>direct call${r.tenant ? ` of tenant ${r.tenant}` : ""}</span>`}</dd></div>
        ${r.reason ? html`<div><dt>Reason</dt><dd>${r.reason}</dd></div>` : null}
        <div><dt>Profile</dt><dd>${r.profile || "—"}</dd></div>
        ${network ? html`<div><dt>Network access</dt><dd><code>${network}</code> <span class="muted">(this run only)</span></dd></div>` : null}
        ${r.sessionId ? html`<div><dt>Session</dt><dd class="mono">${r.sessionId}</dd></div>` : null}
        ${phase !== "pending" && (r.detail || phase === "expired")
          ? html`<div><dt>Outcome</dt><dd>${r.detail || "no answer by the deadline"}${item.reason ? html` <span data-testid="denial-reason">“${item.reason}”</span>` : null}</dd></div>`
          : null}
      </dl>
      ${phase === "pending" ? html`<${Sub} class="h4">Arguments<//>
      <${CodeBlock} text=${prettyJson(r.argumentsJson)} label=${`Arguments of ${r.tool}`} testid="arguments" />` : null}
      ${phase === "pending" && preview && (preview.text || preview.error) ? html`
        <${Sub} class="h4">Preview <span class="muted">(${preview.kind || "none"})</span><//>
        ${preview.kind === "diff" && preview.text
          ? html`<${DiffView} text=${preview.text} label="Preview" />`
          : preview.text ? html`<${CodeBlock} text=${preview.text} label=${`Preview (${preview.kind})`} testid="preview" />` : null}
        ${preview.truncated ? html`<p class="note">The preview is cut short: it was too long to show whole.</p>` : null}
        ${preview.error ? html`<p class="note warn-text">No preview: ${preview.error}</p>` : null}` : null}
      ${item.note ? html`<p class="note warn-text">${item.note}</p>` : null}
      <div class="decide">
        <div class="field deny-field">
          <label for=${`${id}-reason`}>Reason for denial</label>
          <textarea id=${`${id}-reason`} data-testid="deny-reason" rows="2" ref=${reasonRef} disabled=${locked}
            aria-invalid=${reasonError ? "true" : undefined} aria-describedby=${reasonError ? `${id}-reason-error` : undefined}
            onInput=${() => reasonError && setReasonError("")}></textarea>
          ${reasonError ? html`<p class="field-error" id=${`${id}-reason-error`}>${reasonError}</p>` : null}
        </div>
        <div class="buttons">
          <button type="button" class="primary" data-testid="approve-once" disabled=${locked} onClick=${(e) => decide(e, "once")}>Approve once</button>
          <button type="button" data-testid="approve-session" disabled=${locked} onClick=${(e) => decide(e, "session")}>Approve for session</button>
          <button type="button" class="danger" data-testid="deny" disabled=${locked} onClick=${(e) => decide(e, "deny")}>Deny</button>
          ${sent && phase === "pending" ? html`<span class="sent-note" role="status">Sent</span>` : null}
          ${busy ? html`<span class="muted" role="status">Sending…</span>` : null}
        </div>
      </div>
      ${error ? html`<p role="alert" class="alert" data-testid="decision-error">${error}</p>` : null}
      <p class="muted ids">approval <code class="break">${r.approvalId}</code> · digest <code class="break" title=${r.digest}>${r.digest}</code></p>
    </article>
  `;
}


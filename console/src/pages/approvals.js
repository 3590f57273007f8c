// The approvals inbox (#/approvals): a card per pending request from the app-wide
// WatchApprovals stream (approvals-store.js) — the tool, its run, risk, reason, profile, the
// exact arguments, the preview (a diff side by side), a countdown to the deadline — and
// the three answers. A decision names the approval and digest the card carries in its
// data-approval-id / data-digest attributes when the button is clicked.

import { useRef, useState } from "preact/hooks";
import { api, enumName, enumNumber, errorMessage } from "../api.js";
import { approvalsStore, markSent } from "../approvals-store.js";
import { CodeBlock, RiskBadge, useNow, useTitle } from "../components.js";
import { useStore } from "../store.js";
import { DiffView } from "../diff-view.js";
import { formatCountdown, localDateTime, num, prettyJson, relativeTime } from "../format.js";
import { html } from "../html.js";
import { runHref } from "../router.js";

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
              <span class="muted" title=${localDateTime(r.at)}>${relativeTime(r.at, now)}</span>
            </li>`)}
          </ul>
        </section>` : null}
    </div>
  `;
}

function ApprovalCard({ item, now }) {
  const r = item.request;
  const id = domId(r.approvalId);
  const [error, setError] = useState("");
  const [reasonError, setReasonError] = useState("");
  const [busy, setBusy] = useState(false);
  const reasonRef = useRef(null);
  const phase = item.phase;
  const locked = busy || item.sent || phase !== "pending";
  const preview = r.preview;

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
      markSent(r.approvalId, true);
      // Should the stream's update never come, let the card be answered again.
      setTimeout(() => markSent(r.approvalId, false), 20_000);
    } catch (err) {
      setError(errorMessage(err));
    }
    setBusy(false);
  };

  const network = r.network?.host ? `${r.network.host}:${r.network.port}` : "";
  const deadline = num(r.deadlineMs);
  const left = deadline - now;

  return html`
    <article class=${`card approval phase-${phase}${item.sent ? " sent" : ""}`} data-testid="approval"
      data-approval-id=${r.approvalId} data-digest=${r.digest} data-state=${enumName("airlock.v1.ApprovalState", r.state)}
      aria-labelledby=${`${id}-title`}>
      <header class="approval-head">
        <h2 id=${`${id}-title`} class="tool-name">${r.tool}</h2>
        <${RiskBadge} risk=${r.risk} />
        ${phase === "pending"
          ? html`<span class=${`deadline${left < 30_000 ? " soon" : ""}`} data-testid="deadline" title=${deadline ? `Denied if unanswered by ${localDateTime(deadline)}` : ""}>${formatCountdown(deadline, now)}</span>`
          : html`<span class=${`badge ${phase === "answered" ? "status-ok" : "status-error"}`} data-testid="approval-phase">${phase}</span>`}
      </header>
      <dl class="kv approval-facts">
        <div><dt>Run</dt><dd>${r.runId ? html`<a class="mono" href=${runHref(r.runId)}>${r.runId}</a>` : html`<span>direct call${r.tenant ? ` of tenant ${r.tenant}` : ""}</span>`}</dd></div>
        ${r.reason ? html`<div><dt>Reason</dt><dd>${r.reason}</dd></div>` : null}
        <div><dt>Profile</dt><dd>${r.profile || "—"}</dd></div>
        ${network ? html`<div><dt>Network access</dt><dd><code>${network}</code> <span class="muted">(this run only)</span></dd></div>` : null}
        ${r.sessionId ? html`<div><dt>Session</dt><dd class="mono">${r.sessionId}</dd></div>` : null}
        ${phase !== "pending" && r.detail ? html`<div><dt>Outcome</dt><dd>${r.detail}</dd></div>` : null}
      </dl>
      ${phase === "pending" ? html`<h3 class="h4">Arguments</h3>
      <${CodeBlock} text=${prettyJson(r.argumentsJson)} label=${`Arguments of ${r.tool}`} testid="arguments" />` : null}
      ${phase === "pending" && preview && (preview.text || preview.error) ? html`
        <h3 class="h4">Preview <span class="muted">(${preview.kind || "none"})</span></h3>
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
          ${item.sent && phase === "pending" ? html`<span class="sent-note" role="status">Sent</span>` : null}
          ${busy ? html`<span class="muted" role="status">Sending…</span>` : null}
        </div>
      </div>
      ${error ? html`<p role="alert" class="alert" data-testid="decision-error">${error}</p>` : null}
      <p class="muted ids">approval <code class="break">${r.approvalId}</code> · digest <code class="break" title=${r.digest}>${r.digest}</code></p>
    </article>
  `;
}


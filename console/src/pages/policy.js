// Policy (#/policy?session=SES): the rules in force for the caller's tenant
// (Policy.ListPolicyRules), layer by layer — the operator's, then, with a session named, its
// own rules and the grants people made in it while answering questions — each with its
// effect (allow, ask, deny), where it was written (file and line) and, for a grant, what it
// covers and when it was made. A grant is revoked (Policy.RevokeGrant) after a confirmation:
// the next call it covered is asked about again.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enumName, errorMessage, isAbort } from "../api.js";
import { ErrorAlert, Loading, Time, useNow, useTitle } from "../components.js";
import { formatInt, num } from "../format.js";
import { html } from "../html.js";
import { navigate, sessionHref } from "../router.js";

/** The hash of this page for a session (none: the operator's rules only). */
function policyHref(sessionId) {
  return sessionId ? `#/policy?session=${encodeURIComponent(sessionId)}` : "#/policy";
}

const LAYERS = [
  { name: "OPERATOR", title: "Operator rules", note: "From the daemon's configuration, for your tenant." },
  { name: "SESSION", title: "Session rules", note: "Added by the session's creator: they may only ask or deny." },
  { name: "RUN", title: "Run rules", note: "Added by a run's starter: they may only ask or deny." },
  { name: "GRANT", title: "Grants", note: "Made by people answering “approve for the session”: each lets the calls it covers run without asking again." },
  { name: "UNSPECIFIED", title: "Other rules", note: "" },
];

const EFFECTS = {
  ALLOW: ["allow", "status-ok"],
  ASK: ["ask", "state-waiting"],
  DENY: ["deny", "status-error"],
};

export function PolicyPage({ query }) {
  useTitle("Policy");
  const session = (query?.get("session") ?? "").trim();
  const [draft, setDraft] = useState(session);
  const [rules, setRules] = useState(null);
  const [error, setError] = useState(null);
  const [loading, setLoading] = useState(false);
  const [notice, setNotice] = useState("");
  const [revokeError, setRevokeError] = useState("");
  const noticeRef = useRef(null);
  const now = useNow(30_000);

  const load = (signal) => {
    setLoading(true);
    return api.policy
      .listPolicyRules({ sessionId: session }, { signal })
      .then((res) => {
        setRules(res.rules);
        setError(null);
      })
      .catch((err) => {
        if (isAbort(err, signal)) return;
        setRules(null);
        setError(err);
      })
      .finally(() => {
        if (!signal?.aborted) setLoading(false);
      });
  };

  useEffect(() => {
    setDraft(session);
    setNotice("");
    setRevokeError("");
    const controller = new AbortController();
    load(controller.signal);
    return () => controller.abort();
  }, [session]);

  const submit = (event) => {
    event.preventDefault();
    const next = draft.trim();
    if (next === session) load();
    else navigate(policyHref(next), { replace: true });
  };

  const revoke = async (rule) => {
    setNotice("");
    setRevokeError("");
    try {
      await api.policy.revokeGrant({ grantId: rule.grantId, sessionId: rule.sessionId || session });
      setNotice(`Revoked the grant for ${rule.covers || rule.name}: the next such call is asked about again.`);
      await load();
      noticeRef.current?.focus();
      return true;
    } catch (err) {
      setRevokeError(errorMessage(err));
      return false;
    }
  };

  const groups = rules ? LAYERS.map((layer) => ({ ...layer, rules: rules.filter((r) => layerName(r) === layer.name) })).filter((g) => g.rules.length) : [];
  const grants = rules ? rules.filter((r) => layerName(r) === "GRANT").length : 0;

  return html`
    <div class="page policy-page">
      <div class="page-head">
        <h1>Policy</h1>
        <form class="filters" aria-label="Session" onSubmit=${submit} data-testid="policy-form">
          <div class="field">
            <label for="policy-session">Session (its own rules and grants)</label>
            <input id="policy-session" data-testid="policy-session" type="text" autocomplete="off" spellcheck="false"
              placeholder="ses_…" value=${draft} onInput=${(e) => setDraft(e.currentTarget.value)} />
          </div>
          <button type="submit" disabled=${loading}>${loading ? "Loading…" : "Show"}</button>
        </form>
      </div>
      <p class="note">Rules narrow layer by layer: deny wins over ask, ask over allow. Where no rule speaks, the session's approval policy decides.</p>
      ${session ? html`<p class="note">Session <a class="mono" href=${sessionHref(session)}>${session}</a>${rules ? ` · ${grants === 1 ? "1 grant" : `${formatInt(grants)} grants`}` : ""}</p>`
        : html`<p class="note">Name a session to see its own rules and the grants people made in it.</p>`}
      ${notice ? html`<p role="status" class="policy-notice" tabindex="-1" ref=${noticeRef} data-testid="revoke-notice">${notice}</p>` : null}
      ${revokeError ? html`<p role="alert" class="alert" data-testid="revoke-error">${revokeError}</p>` : null}
      ${error && html`<${ErrorAlert} error=${error} testid="policy-error" />`}
      ${!rules && !error ? html`<${Loading} label="Loading the rules…" />` : null}
      ${rules && rules.length === 0 ? html`<p class="empty-state" data-testid="policy-empty">No rules${session ? " and no grants" : ""}: the approval policy decides every call.</p>` : null}
      ${groups.map((g) => html`<${RuleGroup} key=${g.name} group=${g} now=${now} onRevoke=${revoke} />`)}
      ${session && rules && grants === 0 && rules.length > 0 ? html`<p class="muted" data-testid="no-grants">No grants in this session.</p>` : null}
    </div>`;
}

function layerName(rule) {
  const name = enumName("airlock.v1.PolicyLayer", rule.layer);
  return LAYERS.some((l) => l.name === name) ? name : "UNSPECIFIED";
}

function RuleGroup({ group, now, onRevoke }) {
  const id = `layer-${group.name.toLowerCase()}`;
  const grants = group.name === "GRANT";
  return html`
    <section class="policy-layer" aria-labelledby=${id} data-testid="policy-layer" data-layer=${group.name}>
      <h2 id=${id}>${group.title} <span class="muted count">${formatInt(group.rules.length)}</span></h2>
      ${group.note ? html`<p class="note">${group.note}</p>` : null}
      <div class="table-wrap">
        <table class="rules-table">
          <caption class="sr-only">${group.title}</caption>
          <thead>
            <tr>
              <th scope="col">${grants ? "Grant" : "Rule"}</th>
              <th scope="col">Effect</th>
              <th scope="col">${grants ? "Covers" : "Written in"}</th>
              ${grants ? html`<th scope="col">Made</th><th scope="col"><span class="sr-only">Revoke</span></th>` : null}
            </tr>
          </thead>
          <tbody>
            ${group.rules.map((rule, i) => html`<${RuleRow} key=${rule.grantId || `${rule.source}:${rule.line}:${i}`} rule=${rule} grants=${grants} now=${now} onRevoke=${onRevoke} />`)}
          </tbody>
        </table>
      </div>
    </section>`;
}

function RuleRow({ rule, grants, now, onRevoke }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const confirmRef = useRef(null);
  const revokeRef = useRef(null);
  const decision = enumName("airlock.v1.PolicyDecision", rule.decision);
  const [word, cls] = EFFECTS[decision] ?? [decision.toLowerCase(), "none"];
  const where = rule.source ? `${rule.source}${rule.line ? `:${rule.line}` : ""}` : "";

  useEffect(() => {
    if (confirming) confirmRef.current?.focus();
  }, [confirming]);

  const cancel = () => {
    setConfirming(false);
    // Back where the person was.
    setTimeout(() => revokeRef.current?.focus(), 0);
  };
  const confirm = async () => {
    setBusy(true);
    const done = await onRevoke(rule);
    setBusy(false);
    if (!done) setConfirming(false);
  };

  return html`
    <tr data-testid="policy-rule" data-layer=${layerName(rule)} data-decision=${decision} data-grant-id=${rule.grantId || undefined}>
      <th scope="row" data-label=${grants ? "Grant" : "Rule"}>
        <span class="rule-name">${rule.name || "—"}</span>
        ${grants && rule.grantId && !rule.name.includes(rule.grantId.slice(0, 16)) ? html`<div class="muted small mono" title=${rule.grantId}>${rule.grantId.slice(0, 16)}</div>` : null}
      </th>
      <td data-label="Effect">
        <span class=${`badge ${cls}`} data-testid="rule-effect">${word}</span>
        ${decision === "ASK" && rule.grantable ? html` <span class="muted small">grantable</span>` : null}
      </td>
      <td data-label=${grants ? "Covers" : "Written in"} class="rule-where">
        ${grants ? html`<span class="break">${rule.covers || "—"}</span>${where ? html`<div class="muted small break">${where}</div>` : null}`
          : where ? html`<code class="break">${where}</code>` : html`<span class="muted">—</span>`}
      </td>
      ${grants ? html`
        <td data-label="Made">${num(rule.createdAtMs) ? html`<${Time} ms=${rule.createdAtMs} now=${now} />` : html`<span class="muted">—</span>`}</td>
        <td class="rule-actions">
          ${confirming
            ? html`<div class="confirm" role="group" aria-label=${`Revoke the grant for ${rule.covers || rule.name}?`}>
                <span class="confirm-q">Revoke this grant? The next such call is asked about again.</span>
                <span class="buttons">
                  <button type="button" class="danger" data-testid="revoke-confirm" ref=${confirmRef} disabled=${busy} onClick=${confirm}>${busy ? "Revoking…" : "Revoke grant"}</button>
                  <button type="button" data-testid="revoke-cancel" disabled=${busy} onClick=${cancel}>Keep it</button>
                </span>
              </div>`
            : html`<button type="button" data-testid="revoke" ref=${revokeRef} onClick=${() => setConfirming(true)}>
                Revoke<span class="sr-only"> the grant for ${rule.covers || rule.name}</span></button>`}
        </td>` : null}
    </tr>`;
}

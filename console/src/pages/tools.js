// The tools the daemon serves (#/tools), from Tools.ListTools: a table of name, description,
// kind, engine, risk, profile, idempotence, timeout, module digest and input schema. Above
// it, for the daemon's operator (Daemon.ListMcpServers answers no other tenant), the hosted
// MCP servers with how many of their tools differ from what is trusted, and a review of each:
// every differing tool's trusted and seen definition side by side — description, input
// schema, annotations — the changed lines marked, then "Trust this listing" or "Refuse",
// both bound to the listing the review showed (Daemon.TrustMcpServer). Definitions are
// written by the server, so they are shown as text, bounded, invisible characters revealed.

import { useEffect, useRef, useState } from "preact/hooks";
import { Code, api, enumLabel, errorCode, errorMessage, isAbort } from "../api.js";
import { ErrorAlert, Loading, RiskBadge, useTitle } from "../components.js";
import { formatBytes, formatDuration, formatInt, num, prettyJson, shortDigest } from "../format.js";
import { html } from "../html.js";
import { MAX_SIDE_CHARS, revealInvisible, reviewTool } from "../review.js";

export function ToolsPage() {
  useTitle("Tools");
  const [tools, setTools] = useState(null);
  const [error, setError] = useState(null);
  const [filter, setFilter] = useState("");

  useEffect(() => {
    const controller = new AbortController();
    api.tools
      .listTools({}, { signal: controller.signal })
      .then((res) => setTools([...res.tools].sort((a, b) => a.name.localeCompare(b.name))))
      .catch((err) => {
        if (!isAbort(err, controller.signal)) setError(err);
      });
    return () => controller.abort();
  }, []);

  const needle = filter.trim().toLowerCase();
  const shown = tools?.filter((t) => !needle || t.name.toLowerCase().includes(needle) || t.description.toLowerCase().includes(needle));

  return html`
    <div class="page tools-page">
      <div class="page-head">
        <h1>Tools</h1>
        ${tools && tools.length > 6 ? html`
          <form class="filters" role="search" aria-label="Filter tools" onSubmit=${(e) => e.preventDefault()}>
            <div class="field">
              <label for="filter-tools">Find</label>
              <input id="filter-tools" type="search" autocomplete="off" value=${filter} onInput=${(e) => setFilter(e.currentTarget.value)} />
            </div>
          </form>` : null}
      </div>
      <${McpServers} />
      ${error && html`<${ErrorAlert} error=${error} />`}
      ${!tools && !error && html`<${Loading} label="Loading tools…" />`}
      ${tools && tools.length === 0 && html`<p class="empty-state">This daemon serves no tools.</p>`}
      ${shown && shown.length > 0 && html`
        <div class="table-wrap">
          <table class="tools-table" data-testid="tools">
            <caption class="sr-only">Tools the daemon serves</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Description</th>
                <th scope="col">Kind</th>
                <th scope="col">Engine</th>
                <th scope="col">Risk</th>
                <th scope="col">Profile</th>
                <th scope="col">Idempotent</th>
                <th scope="col">Timeout</th>
                <th scope="col">Digest</th>
              </tr>
            </thead>
            <tbody>
              ${shown.map((t) => html`<${ToolRow} key=${t.name} tool=${t} />`)}
            </tbody>
          </table>
        </div>`}
      ${shown && tools.length > 0 && shown.length === 0 ? html`<p class="muted">No tool matches “${filter}”.</p>` : null}
    </div>
  `;
}

function ToolRow({ tool: t }) {
  const kind = enumLabel("airlock.v1.ToolKind", t.kind);
  return html`
    <tr data-testid="tool" data-tool-name=${t.name}>
      <th scope="row" data-label="Name">
        <span class="tool-name">${t.name}</span>${t.version ? html` <span class="muted">${t.version}</span>` : null}
        ${t.mcpServer ? html`<div class="muted small">MCP ${t.mcpServer} · ${t.mcpTool}</div>` : null}
      </th>
      <td data-label="Description" class="desc">
        ${t.description || html`<span class="muted">—</span>`}
        <details class="schema">
          <summary>Schema</summary>
          <pre class="code" tabindex="0" aria-label=${`Input schema of ${t.name}`}>${prettyJson(t.inputSchemaJson) || "{}"}</pre>
        </details>
      </td>
      <td data-label="Kind">${kind || "—"}</td>
      <td data-label="Engine">${t.engine || "—"}</td>
      <td data-label="Risk"><${RiskBadge} risk=${t.risk} /></td>
      <td data-label="Profile">${t.profile || "—"}${t.needsWorkspace ? html`<div class="muted small">needs a workspace</div>` : null}</td>
      <td data-label="Idempotent">${t.idempotent ? "yes" : "no"}</td>
      <td data-label="Timeout" class="num">${num(t.timeoutMs) ? formatDuration(t.timeoutMs) : "—"}
        ${t.output && num(t.output.maxBytes) ? html`<div class="muted small">output ≤ ${formatBytes(t.output.maxBytes)}</div>` : null}</td>
      <td data-label="Digest">${t.moduleDigest ? html`<code class="digest" title=${t.moduleDigest}>${t.moduleDigest}</code>` : "—"}</td>
    </tr>`;
}

/** A DOM id made from a server's name (a manifest name, but kept to safe characters). */
function domId(prefix, name) {
  return `${prefix}-${String(name).replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/**
 * The hosted MCP servers, for the operator: nothing but a one-line note for a tenant the
 * daemon does not let list them, nothing at all for a daemon without the call.
 */
function McpServers() {
  const [servers, setServers] = useState(null);
  const [error, setError] = useState(null);
  const [hidden, setHidden] = useState(typeof api.daemon?.listMcpServers === "function" ? "" : "unsupported");
  const [open, setOpen] = useState("");

  const load = (signal) =>
    api.daemon
      .listMcpServers({}, { signal })
      .then((res) => {
        setServers([...res.servers].sort((a, b) => a.server.localeCompare(b.server)));
        setError(null);
      })
      .catch((err) => {
        if (isAbort(err, signal)) return;
        const code = errorCode(err);
        if (code === Code.PermissionDenied) setHidden("operator");
        else if (code === Code.Unimplemented) setHidden("unsupported");
        else setError(err);
      });

  useEffect(() => {
    if (hidden) return undefined;
    const controller = new AbortController();
    load(controller.signal);
    return () => controller.abort();
  }, []);

  if (hidden === "operator") {
    return html`<p class="note" data-testid="mcp-operator-only">Hosted MCP servers' tool listings are reviewed by the daemon's operator.</p>`;
  }
  if (hidden) return null;
  if (!servers && !error) return null;
  if (servers && servers.length === 0) return null;

  const reviewing = servers?.find((s) => s.server === open);
  const close = () => {
    setOpen("");
    // Back to the button that opened it.
    setTimeout(() => document.querySelector(`[data-testid=mcp-server][data-server="${CSS.escape(open)}"] [data-testid=mcp-review]`)?.focus(), 0);
  };
  return html`
    <section class="mcp-servers" aria-labelledby="mcp-title" data-testid="mcp-servers">
      <h2 id="mcp-title">Hosted MCP servers</h2>
      <p class="note">A hosted server's tools are served as they were trusted. A tool whose description, schema or annotations changed since, or that is new, is refused until an operator reviews the listing and trusts it.</p>
      ${error && html`<${ErrorAlert} error=${error} />`}
      ${servers && html`
        <div class="table-wrap">
          <table class="mcp-table">
            <caption class="sr-only">Hosted MCP servers and how many of their tools differ from what is trusted</caption>
            <thead>
              <tr>
                <th scope="col">Server</th>
                <th scope="col">Tools served</th>
                <th scope="col">Differences</th>
                <th scope="col">State</th>
                <th scope="col"><span class="sr-only">Review</span></th>
              </tr>
            </thead>
            <tbody>
              ${servers.map((s) => html`<${McpServerRow} key=${s.server} server=${s} open=${open === s.server}
                onToggle=${() => setOpen(open === s.server ? "" : s.server)} />`)}
            </tbody>
          </table>
        </div>`}
      ${reviewing ? html`<${McpReview} key=${reviewing.server} server=${reviewing.server} onChanged=${() => load()}
        onClose=${close} />` : null}
    </section>`;
}

function McpServerRow({ server: s, open, onToggle }) {
  const state = s.refused
    ? html`<span class="badge status-error">refused</span>`
    : s.differences > 0
      ? html`<span class="badge state-waiting">to review</span>`
      : html`<span class="badge status-ok">trusted</span>`;
  return html`
    <tr data-testid="mcp-server" data-server=${s.server} data-refused=${s.refused ? "true" : "false"} data-differences=${String(s.differences)}>
      <th scope="row" data-label="Server"><span class="tool-name">${revealInvisible(s.server)}</span></th>
      <td data-label="Tools served" class="num">${formatInt(s.toolsServed)}</td>
      <td data-label="Differences" class="num" data-testid="mcp-differences">${formatInt(s.differences)}</td>
      <td data-label="State" data-testid="mcp-state">${state}</td>
      <td>
        <button type="button" data-testid="mcp-review" aria-expanded=${open ? "true" : "false"}
          aria-controls=${open ? domId("mcp-review", s.server) : undefined} onClick=${onToggle}>
          ${open ? "Close review" : "Review"}<span class="sr-only"> of ${s.server}</span>
        </button>
      </td>
    </tr>`;
}

/** One server's review: its differing tools side by side, then trust or refuse. */
function McpReview({ server, onChanged, onClose }) {
  const [review, setReview] = useState(null);
  const [error, setError] = useState(null);
  const [stale, setStale] = useState("");
  const [notice, setNotice] = useState("");
  const [busy, setBusy] = useState("");
  const heading = useRef(null);
  const said = useRef(null);
  const id = domId("mcp-review", server);

  const load = (signal) =>
    api.daemon
      .trustMcpServer({ server, show: true }, { signal })
      .then((res) => {
        setReview(res);
        setError(null);
      })
      .catch((err) => {
        if (!isAbort(err, signal)) setError(err);
      });

  useEffect(() => {
    const controller = new AbortController();
    load(controller.signal);
    heading.current?.focus();
    return () => controller.abort();
  }, [server]);

  const decide = async (refuse) => {
    setBusy(refuse ? "refuse" : "trust");
    setStale("");
    setNotice("");
    setError(null);
    try {
      const res = await api.daemon.trustMcpServer({ server, reviewed: review.listing, refuse });
      setNotice(
        refuse
          ? `Refused this listing of ${server}: its changed and new tools stay refused.`
          : res.accepted.length
            ? `Trusted this listing of ${server}: ${res.accepted.join(", ")} may be called.`
            : `Trusted this listing of ${server}.`,
      );
    } catch (err) {
      if (errorCode(err) === Code.FailedPrecondition) setStale(errorMessage(err));
      else setError(err);
    }
    await load();
    onChanged();
    setBusy("");
    // The buttons may be gone with the differences: the focus goes to what the decision did.
    said.current?.focus();
  };

  const differences = review ? review.differences.map((d) => reviewTool(d)) : [];
  return html`
    <section class="mcp-review card" id=${id} aria-labelledby=${`${id}-title`} data-testid="mcp-review-panel" data-server=${server}
      data-listing=${review?.listing ?? ""} data-refused=${review?.refused ? "true" : "false"}>
      <div class="mcp-review-head">
        <h3 id=${`${id}-title`} tabindex="-1" ref=${heading}>Review of <span class="tool-name">${revealInvisible(server)}</span></h3>
        <button type="button" class="quiet" onClick=${onClose}>Close<span class="sr-only"> the review of ${server}</span></button>
      </div>
      ${stale ? html`<p role="alert" class="alert" data-testid="mcp-stale" tabindex="-1" ref=${said}>${stale}${/[.!?]$/.test(stale) ? "" : "."} The review below is of the listing the server gives now: read it again before deciding.</p>` : null}
      ${notice ? html`<p role="status" class="mcp-notice" data-testid="mcp-notice" tabindex="-1" ref=${said}>${notice}</p>` : null}
      ${error && html`<${ErrorAlert} error=${error} testid="mcp-error" />`}
      ${!review && !error ? html`<${Loading} label="Loading the review…" />` : null}
      ${review ? html`
        <p class="mcp-facts">
          <span><span class="muted">Listing last seen</span> <code title=${review.listing}>${shortDigest(review.listing, 16) || "—"}</code></span>
          <span data-testid="mcp-count">${differences.length === 1 ? "1 tool differs" : `${formatInt(differences.length)} tools differ`} from what is trusted</span>
          ${review.refused ? html`<span class="badge status-error" data-testid="mcp-refused">refused</span>` : null}
        </p>
        ${review.refused ? html`<p class="note">An operator refused exactly this listing: its changed and new tools stay refused until it is trusted or the server lists something else.</p>` : null}
        ${differences.length === 0 ? html`<p class="note" data-testid="mcp-nothing">Nothing differs: the listing last seen is the one trusted.</p>` : null}
        ${differences.map((d, i) => html`<${ToolDifference} key=${`${i}-${d.tool}`} review=${d} id=${`${id}-t${i}`} />`)}
        ${differences.length ? html`
          <div class="mcp-decide">
            <p class="note">Trusting makes the changed and new tools callable as shown here. Refusing keeps them refused and records the refusal. Either holds for this listing only: if the server lists something else meanwhile, nothing is decided and the review shows the new listing.</p>
            <div class="buttons">
              <button type="button" class="primary" data-testid="mcp-trust" disabled=${!!busy} onClick=${() => decide(false)}>
                ${busy === "trust" ? "Trusting…" : "Trust this listing"}</button>
              <button type="button" class="danger" data-testid="mcp-refuse" disabled=${!!busy} onClick=${() => decide(true)}>
                ${busy === "refuse" ? "Refusing…" : "Refuse"}</button>
            </div>
          </div>` : null}` : null}
    </section>`;
}

const CHANGE_WORDS = {
  new: ["new", "Not trusted before: new in this listing, or never reviewed."],
  removed: ["removed", "No longer listed by the server."],
  changed: ["changed", ""],
  unknown: ["unknown", "Neither definition was given."],
};

function ToolDifference({ review, id }) {
  const [word, note] = CHANGE_WORDS[review.change] ?? CHANGE_WORDS.unknown;
  return html`
    <article class="mcp-diff" data-testid="mcp-difference" data-tool=${review.tool} data-change=${review.change} aria-labelledby=${`${id}-name`}>
      <h4 id=${`${id}-name`} class="mcp-diff-title">
        <span class="tool-name">${revealInvisible(review.tool)}</span>
        <span class=${`badge ${review.change === "changed" ? "tone-warn" : review.change === "new" ? "tone-tool" : "status-error"}`}>${word}</span>
      </h4>
      ${note ? html`<p class="note">${note}</p>` : null}
      ${review.parts.map((part) => html`<${DefinitionPart} key=${part.key} part=${part} tool=${review.tool} whole=${review.change !== "changed"} />`)}
    </article>`;
}

function DefinitionPart({ part, tool, whole }) {
  return html`
    <div class="mcp-part" data-part=${part.key} data-changed=${part.changed ? "true" : "false"}>
      <h5 class="mcp-part-title">${part.label}
        ${whole ? null : part.changed ? html` <span class="badge tone-warn">changed</span>` : html` <span class="muted small">unchanged</span>`}</h5>
      <div class="mcp-sides">
        <${Side} side=${part.trusted} which="trusted" title="Trusted" label=${`${part.label} of ${tool} as trusted`}
          absent="Nothing trusted: a new tool." />
        <${Side} side=${part.seen} which="seen" title="Seen now" label=${`${part.label} of ${tool} as last listed`}
          absent="Not listed any more." />
      </div>
    </div>`;
}

const SIGNS = { same: ["", ""], del: ["−", "Removed: "], add: ["+", "Added: "] };

function Side({ side, which, title, label, absent }) {
  return html`
    <div class=${`mcp-side mcp-${which}`} data-side=${which}>
      <p class="mcp-side-title">${title}</p>
      ${side
        ? html`<div class="mcp-lines" role="region" tabindex="0" aria-label=${label}>
            <ol>
              ${side.lines.map((line) => {
                const [sign, words] = SIGNS[line.type];
                return html`<li class=${`ln ${line.type}`}><span class="sign" aria-hidden="true">${sign}</span>${words ? html`<span class="sr-only">${words}</span>` : null}<span class="txt">${revealInvisible(line.text)}</span></li>`;
              })}
            </ol>
          </div>
          ${side.cut ? html`<p class="note" data-testid="mcp-cut">Shown in part: the first ${formatInt(MAX_SIDE_CHARS)} of ${formatInt(side.total)} characters.</p>` : null}`
        : html`<p class="muted small">${absent}</p>`}
    </div>`;
}

// The tools the daemon serves (#/tools), from Tools.ListTools: a table of name, description,
// kind, engine, risk, profile, idempotence, timeout, module digest and input schema.

import { useEffect, useState } from "preact/hooks";
import { api, enumLabel, isAbort } from "../api.js";
import { ErrorAlert, Loading, RiskBadge, useTitle } from "../components.js";
import { formatBytes, formatDuration, num, prettyJson } from "../format.js";
import { html } from "../html.js";

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

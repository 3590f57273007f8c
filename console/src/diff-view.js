// A unified diff shown side by side: one table per file, old on the left and new on the
// right with line numbers, removed lines class "del", added "add", context "ctx", hunk
// headers across the table, the `--- a/x` / `+++ b/x` lines as its caption. Parsing is diff.js.

import { parseUnifiedDiff, diffFileName } from "./diff.js";
import { html } from "./html.js";

export function DiffView({ text, label = "Diff" }) {
  const files = parseUnifiedDiff(text);
  if (!files.length) return html`<p class="muted">The diff is empty: nothing changes.</p>`;
  return html`<div class="diff-files">
    ${files.map((file, i) => html`<${DiffFile} file=${file} label=${label} key=${i} />`)}
  </div>`;
}

function DiffFile({ file, label }) {
  const name = diffFileName(file);
  const caption = [...file.header, file.oldName && `--- ${file.oldName}`, file.newName && `+++ ${file.newName}`].filter(Boolean);
  return html`
    <div class="diff-scroll" tabindex="0" role="region" aria-label=${`${label}${name ? ` of ${name}` : ""}`}>
      <table class="diff" data-testid="diff">
        <caption>${caption.map((line) => html`<code>${line}</code>`)}</caption>
        <colgroup><col class="num" /><col class="side" /><col class="num" /><col class="side" /></colgroup>
        <thead>
          <tr>
            <th scope="col"><span class="sr-only">Old line number</span><span aria-hidden="true">#</span></th>
            <th scope="col">Before</th>
            <th scope="col"><span class="sr-only">New line number</span><span aria-hidden="true">#</span></th>
            <th scope="col">After</th>
          </tr>
        </thead>
        <tbody>
          ${file.rows.map((row) => {
            if (row.type === "hunk") return html`<tr class="hunk"><td colspan="4">${row.text}</td></tr>`;
            if (row.type === "note") return html`<tr class="note"><td colspan="4">${row.text}</td></tr>`;
            return html`<tr>${side(row.left)}${side(row.right)}</tr>`;
          })}
        </tbody>
      </table>
    </div>`;
}

// The -/+ mark is drawn by the stylesheet (td.del::before, td.add::before): visible, so a
// change never shows by colour alone, and not part of the cell's text.
function side(line) {
  if (!line) return html`<td class="num empty"></td><td class="empty"></td>`;
  return html`<td class=${`num n-${line.kind}`}>${line.no}</td><td class=${line.kind}>${line.text}</td>`;
}

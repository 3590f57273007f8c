// How each kind of run event reads in the run page's event list: a label, a tone (colour
// with words), a one-line summary for the collapsed row, and the full detail shown when the
// row is expanded. Kinds are RunEvent's oneof cases (run_event.proto).

import { enumLabel, enumName, enumTitle } from "./api.js";
import { CodeBlock, RiskBadge, StatusBadge } from "./components.js";
import { MAX_LISTED, setCounts } from "./change-pages.js";
import { DiffView } from "./diff-view.js";
import { compactJson, formatBytes, formatDuration, formatInt, num, prettyJson } from "./format.js";
import { html } from "./html.js";
import { runHref } from "./router.js";

const decoder = new TextDecoder();

/** Bytes of tool output as text (invalid UTF-8 shown as replacement characters). */
export function outputText(data) {
  return data ? decoder.decode(data) : "";
}

function plural(n, noun) {
  return `${formatInt(n)} ${noun}${Number(n) === 1 ? "" : "s"}`;
}

function lastLine(text) {
  const lines = String(text).trimEnd().split("\n");
  return lines[lines.length - 1] ?? "";
}

function kv(pairs) {
  const shown = pairs.filter(([, v]) => v !== undefined && v !== null && v !== "" && v !== false);
  if (!shown.length) return null;
  return html`<dl class="kv">${shown.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v === true ? "yes" : v}</dd></div>`)}</dl>`;
}

function usageText(usage) {
  if (!usage) return "";
  const tokens = num(usage.inputTokens) + num(usage.outputTokens);
  return `${formatInt(tokens)} tokens (${formatInt(usage.inputTokens)} in, ${formatInt(usage.outputTokens)} out), ${plural(usage.modelCalls, "model call")}, ${plural(usage.toolCalls, "tool call")}`;
}

function budgetsDetail(b) {
  if (!b) return null;
  return kv([
    ["max steps", b.maxSteps || ""],
    ["max tokens", num(b.maxTokens) ? formatInt(b.maxTokens) : ""],
    ["max wall time", num(b.maxWallTimeMs) ? formatDuration(b.maxWallTimeMs) : ""],
    ["max tool calls", b.maxToolCalls || ""],
    ["max repeated errors", b.maxRepeatedErrors || ""],
    ["context tokens", num(b.contextTokens) ? formatInt(b.contextTokens) : ""],
    ["max repeated calls", b.maxRepeatedCalls || ""],
    ["max idle steps", b.maxIdleSteps || ""],
  ]);
}

function changeLines(changeSet) {
  return (changeSet?.changes ?? []).map((c) => {
    const kind = enumLabel("airlock.v1.ChangeKind", c.kind);
    return { path: c.path, kind, from: c.from, applied: c.applied, digestOnly: c.digestOnly };
  });
}

/** A set's changes, at most `limit` of them drawn (the rest counted). */
export function ChangeList({ changeSet, limit = MAX_LISTED }) {
  const lines = changeLines(changeSet);
  const { total } = setCounts(changeSet);
  const listed = lines.slice(0, limit);
  return html`
    <ul class="changes">
      ${listed.map((c) => html`<li>
        <span class=${`badge change-${c.kind.replace(/ /g, "-")}`}>${c.kind || "changed"}</span>
        <code>${c.path}</code>${c.from ? html` <span class="muted">from</span> <code>${c.from}</code>` : null}
        ${c.digestOnly ? html` <span class="muted">(contents not kept: ${c.digestOnly})</span>` : null}
        ${!c.applied ? html` <span class="badge status-error">not applied</span>` : null}
      </li>`)}
    </ul>
    ${total > listed.length
      ? html`<p class="muted" data-testid="changes-more" data-total=${String(total)}>${formatInt(total)} changes in all; the first ${formatInt(listed.length)} shown.</p>`
      : null}
    ${changeSet?.notApplied ? html`<p class="warn-text">Not applied: ${changeSet.notApplied}</p>` : null}
    ${changeSet?.skipped?.length ? html`<p class="muted">Skipped: ${changeSet.skipped.join(", ")}</p>` : null}`;
}

function resultDetail(result) {
  if (!result) return null;
  const meta = result.metadata;
  const content = result.content ? prettyJson(result.content) : "";
  return html`
    ${kv([
      ["status", html`<${StatusBadge} status=${result.status} />`],
      ["error", result.errorMessage],
      ["duration", formatDuration(result.durationMs)],
      ["exit code", result.exitCode !== undefined ? String(result.exitCode) : ""],
      ["output", result.truncated
        ? `truncated: ${formatBytes(num(result.headBytes) + num(result.tailBytes))} of ${formatBytes(result.originalBytes)} shown`
        : num(result.originalBytes) ? formatBytes(result.originalBytes) : ""],
      ["retryable", result.retryable],
      ["execution", result.executionId],
      ["peak memory", meta && num(meta.peakMemoryBytes) ? formatBytes(meta.peakMemoryBytes) : ""],
      ["CPU time", meta && num(meta.cpuTimeUs) ? formatDuration(num(meta.cpuTimeUs) / 1000) : ""],
      ["engine", meta?.engine],
      ["profile", meta?.profile],
      ["signal", meta?.signal !== undefined ? String(meta.signal) : ""],
      ["network", meta?.network?.length
        ? meta.network.map((n) => `${n.host}:${n.port} (${n.connections} conn, ${formatBytes(n.bytesSent)} out, ${formatBytes(n.bytesReceived)} in${num(n.refused) ? `, ${n.refused} refused: ${n.refusal}` : ""})`).join("; ")
        : ""],
    ])}
    ${content ? html`<${CodeBlock} text=${content} label="Tool output" />` : null}
    ${result.changes?.changes?.length ? html`<${ChangeList} changeSet=${result.changes} />` : null}`;
}

/**
 * { label, tone, summary, detail } — detail is null or a function that renders it (only
 * rows the user expands pay for it) — for a committed event (`ev`: a RunEvent) or a pending
 * delta row (`pending`: { kind, text, tool, args }).
 */
export function describe(ev, pending) {
  if (pending) {
    if (pending.kind === "textDelta") {
      return {
        label: "Model text",
        tone: "model",
        live: true,
        summary: lastLine(pending.text) || "…",
        detail: pending.text.includes("\n") || pending.text.length > 100 ? () => html`<div class="prose">${pending.text}</div>` : null,
      };
    }
    return {
      label: "Tool call",
      tone: "tool",
      live: true,
      summary: `${pending.tool || "…"}(${pending.args})`,
      detail: pending.args.length > 80 ? () => html`<${CodeBlock} text=${pending.args} label="Arguments so far" />` : null,
    };
  }
  const kind = ev.event.case;
  const v = ev.event.value;
  switch (kind) {
    case "runStarted":
      return {
        label: "Run started",
        tone: "info",
        summary: [v.model, `${v.tools.length} tools`, enumLabel("airlock.v1.ApprovalPolicy", v.approvalPolicy) && `approval: ${enumLabel("airlock.v1.ApprovalPolicy", v.approvalPolicy)}`, v.input && `“${v.input}”`].filter(Boolean).join(" · "),
        detail: () => html`
          ${kv([
            ["model", v.model],
            ["session", v.sessionId],
            ["turn", v.turnId],
            ["trace", v.traceId],
            ["workspace", v.workspace],
            ["approval policy", enumLabel("airlock.v1.ApprovalPolicy", v.approvalPolicy) || "daemon default"],
            ["stop on denial", v.stopOnDenial],
            ["continues", v.continuesRunId ? html`<a href=${runHref(v.continuesRunId)} class="mono">${v.continuesRunId}</a>` : ""],
            ["history", v.historyMessages ? `${v.historyMessages} messages` : ""],
            ["project instructions", v.projectInstructions ? "read (as untrusted workspace content)" : ""],
            ["tools", v.tools.join(", ")],
          ])}
          ${budgetsDetail(v.budgets)}
          ${v.input ? html`<h4>Input</h4><div class="prose">${v.input}</div>` : null}`,
      };
    case "stepStarted":
      return { label: "Step started", tone: "step", summary: `Step ${v.index}`, detail: null };
    case "contextBuilt":
      return {
        label: "Context built",
        tone: "info",
        summary: `${formatInt(v.tokens)} of ${formatInt(v.budget)} tokens · ${v.items.length} items · ${v.tokenizer}`,
        detail: v.items.length
          ? () => html`<div class="table-scroll" tabindex="0" role="region" aria-label="Context items"><table class="compact">
              <thead><tr><th scope="col">Kind</th><th scope="col">Source</th><th scope="col" class="num">Tokens</th><th scope="col">Disposition</th><th scope="col">Reason</th></tr></thead>
              <tbody>${v.items.map((item) => html`<tr>
                <td>${item.kind}</td><td class="mono">${item.source}</td><td class="num">${formatInt(item.tokens)}</td>
                <td>${enumLabel("airlock.v1.ContextDisposition", item.disposition)}</td><td>${item.reason}</td></tr>`)}</tbody>
            </table></div>
            ${v.tokenizer === "estimate" ? html`<p class="muted">Calibration ×${v.calibration.toFixed(3)}</p>` : null}`
          : null,
      };
    case "contextCompacted":
      return {
        label: "Context compacted",
        tone: v.fallback ? "warn" : "info",
        summary: `${v.entries} entries: ${formatInt(v.tokensBefore)} → ${formatInt(v.summaryTokens)} tokens${v.fallback ? " (cut mechanically)" : ""}`,
        detail: () => html`${kv([["error", v.error], ["usage", usageText(v.usage)]])}${v.summary ? html`<div class="prose">${v.summary}</div>` : null}`,
      };
    case "modelText":
      return {
        label: "Model text",
        tone: "model",
        summary: v.text,
        detail: v.text.includes("\n") || v.text.length > 100 ? () => html`<div class="prose">${v.text}</div>` : null,
      };
    case "modelRetry":
      return {
        label: "Model retry",
        tone: "warn",
        summary: `attempt ${v.attempt} in ${formatDuration(v.delayMs)}: ${v.error}`,
        detail: v.error.length > 100 ? () => html`<div class="prose">${v.error}</div>` : null,
      };
    case "toolCallProposed":
      return {
        label: "Tool call",
        tone: "tool",
        summary: `${v.tool}(${compactJson(v.argumentsJson)})`,
        detail: () => html`${kv([["call", v.callId], ["provider call", v.providerCallId]])}
          <${CodeBlock} text=${prettyJson(v.argumentsJson)} label=${`Arguments of ${v.tool}`} />`,
      };
    case "toolCallRejected":
      return {
        label: "Call rejected",
        tone: "error",
        summary: `${v.tool}: ${v.reason}`,
        detail: () => html`${kv([["call", v.callId], ["provider call", v.providerCallId]])}<div class="prose">${v.reason}</div>`,
      };
    case "approvalRequested": {
      const r = v.request ?? {};
      const preview = r.preview;
      return {
        label: "Approval requested",
        tone: "waiting",
        summary: [r.tool, enumName("airlock.v1.Risk", r.risk), r.reason, r.network?.host && `${r.network.host}:${r.network.port}`].filter(Boolean).join(" · "),
        detail: () => html`
          ${kv([
            ["tool", r.tool],
            ["risk", html`<${RiskBadge} risk=${r.risk} />`],
            ["reason", r.reason],
            ["profile", r.profile],
            ["network", r.network?.host ? `${r.network.host}:${r.network.port}` : ""],
            ["approval", r.approvalId],
            ["digest", r.digest ? html`<code class="break">${r.digest}</code>` : ""],
            ["state", enumLabel("airlock.v1.ApprovalState", r.state)],
          ])}
          <${CodeBlock} text=${prettyJson(r.argumentsJson)} label="Arguments" />
          ${preview?.kind === "diff" ? html`<${DiffView} text=${preview.text} label="Preview" />`
            : preview?.text ? html`<${CodeBlock} text=${preview.text} label=${`Preview (${preview.kind})`} />` : null}
          ${preview?.error ? html`<p class="warn-text">${preview.error}</p>` : null}`,
      };
    }
    case "approvalResolved": {
      const decision = enumName("airlock.v1.Decision", v.decision);
      return {
        label: "Approval resolved",
        tone: decision === "DENY" ? "error" : "ok",
        summary: [enumTitle("airlock.v1.Decision", v.decision), v.decidedBy && `by ${v.decidedBy}`, v.reason && `“${v.reason}”`, v.network?.host && `${v.network.host}:${v.network.port}`].filter(Boolean).join(" · "),
        detail: null,
        decision,
      };
    }
    case "toolStarted":
      return { label: "Tool started", tone: "tool", summary: `${v.tool} · ${v.executionId}`, detail: null };
    case "toolOutput": {
      const text = outputText(v.data);
      const stream = enumLabel("airlock.v1.OutputStream", v.stream) || "output";
      return {
        label: `Output (${stream})`,
        tone: stream === "stderr" ? "warn" : "out",
        summary: lastLine(text) || formatBytes(v.data.length),
        detail: text.includes("\n") || text.length > 100 ? () => html`<${CodeBlock} text=${text} label=${`Tool ${stream}`} />` : null,
      };
    }
    case "toolFinished": {
      const r = v.result;
      const status = enumName("airlock.v1.ToolStatus", r?.status);
      const bits = [
        v.tool,
        enumTitle("airlock.v1.ToolStatus", r?.status),
        r && formatDuration(r.durationMs),
        r?.truncated ? `truncated (${formatBytes(r.originalBytes)})` : r && num(r.originalBytes) ? formatBytes(r.originalBytes) : "",
        r?.errorMessage,
        !r?.errorMessage && r?.content ? compactJson(r.content) : "",
      ];
      return {
        label: "Tool finished",
        tone: status === "OK" ? "ok" : "error",
        summary: bits.filter(Boolean).join(" · "),
        detail: r ? () => resultDetail(r) : null,
      };
    }
    case "userInput":
      return { label: "User input", tone: "info", summary: v.text, detail: v.text.length > 100 || v.text.includes("\n") ? () => html`<div class="prose">${v.text}</div>` : null };
    case "decisionRejected":
      return { label: "Decision rejected", tone: "error", summary: `${v.approvalId}: ${v.reason}`, detail: null };
    case "runResumed":
      return {
        label: "Run resumed",
        tone: "warn",
        summary: `from checkpoint at event ${v.checkpointSeq}${v.pendingCalls ? ` · ${v.pendingCalls} calls to observe` : ""}`,
        detail: v.checkpointId ? () => kv([["checkpoint", v.checkpointId]]) : null,
      };
    case "changes": {
      const lines = changeLines(v.changeSet);
      const { total } = setCounts(v.changeSet);
      const named = lines.slice(0, 5).map((c) => `${c.path} (${c.kind})`).join(", ");
      const more = total > Math.min(lines.length, 5) ? ` and ${formatInt(total - Math.min(lines.length, 5))} more` : "";
      return {
        label: "Changes",
        tone: "change",
        summary: `${v.tool}: ${named ? named + more : "nothing"}`,
        detail: () => html`<${ChangeList} changeSet=${v.changeSet} />`,
      };
    }
    case "runFinished": {
      const reason = enumName("airlock.v1.StopReason", v.reason);
      return {
        label: "Run finished",
        tone: reason === "FINAL" ? "ok" : "error",
        summary: [enumTitle("airlock.v1.StopReason", v.reason), v.detail, `${v.steps} ${v.steps === 1 ? "step" : "steps"}`, usageText(v.usage)].filter(Boolean).join(" · "),
        detail: () => html`${kv([["detail", v.detail], ["usage", usageText(v.usage)]])}${v.finalText ? html`<h4>Final text</h4><div class="prose">${v.finalText}</div>` : null}`,
      };
    }
    default:
      return { label: kind ?? "Event", tone: "info", summary: "", detail: null };
  }
}

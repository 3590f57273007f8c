// Evals (#/evals): an eval report (report.json) or a comparison (`airlock eval compare
// --json`) opened from a file, rendered with pass rates and their intervals, each attempt
// linked to its run and trace. Files are chosen or dropped here and read by the browser
// (never sent anywhere), at most 20 MiB each, their shape checked (review.js) so that a file
// that is not an eval output is named as such. A report shows its suite, status, totals,
// thresholds, graders and each task with its attempts; a comparison each task's two pass
// rates and the difference with its interval and significance; two reports of one suite
// without a comparison are put side by side, with nothing computed here that the files do
// not hold.

import { useRef, useState } from "preact/hooks";
import { useTitle } from "../components.js";
import { formatInt } from "../format.js";
import { html } from "../html.js";
import { runHref, traceHref } from "../router.js";
import {
  MAX_EVAL_BYTES,
  arrange,
  formatCount,
  formatDifference,
  formatMean,
  formatRate,
  formatRatio,
  formatSeconds,
  formatUsd,
  pairTasks,
  readEvalText,
  sizeRefusal,
} from "../review.js";

/** Reports with at most this many attempts show every task's attempts open. */
const OPEN_ATTEMPTS = 60;

const STATUS = {
  passed: ["Passed", "status-ok"],
  failed: ["Failed", "status-error"],
  unfinished: ["Unfinished", "state-waiting"],
};

async function readFile(file) {
  const refusal = sizeRefusal(file.name, file.size);
  if (refusal) return { kind: "error", name: file.name, message: refusal };
  try {
    return readEvalText(await file.text(), file.name);
  } catch (err) {
    return { kind: "error", name: file.name, message: `${file.name} cannot be read: ${err?.message ?? err}` };
  }
}

export function EvalsPage() {
  useTitle("Evals");
  const [docs, setDocs] = useState([]);
  const [reading, setReading] = useState(false);
  const [dragging, setDragging] = useState(false);
  const input = useRef(null);

  const open = async (fileList) => {
    const files = [...(fileList ?? [])];
    if (!files.length) return;
    setReading(true);
    const read = [];
    for (const file of files) read.push(await readFile(file));
    setDocs(read);
    setReading(false);
  };

  const clear = () => {
    setDocs([]);
    if (input.current) input.current.value = "";
  };

  const shown = arrange(docs);
  const drop = {
    onDragOver: (e) => {
      e.preventDefault();
      setDragging(true);
    },
    onDragLeave: () => setDragging(false),
    onDrop: (e) => {
      e.preventDefault();
      setDragging(false);
      open(e.dataTransfer?.files);
    },
  };

  return html`
    <div class="page evals-page">
      <div class="page-head">
        <h1>Evals</h1>
      </div>
      <div class=${`drop-zone${dragging ? " dragging" : ""}`} ...${drop} data-testid="eval-drop">
        <div class="field">
          <label for="eval-files">Eval files: a report.json, or the comparison <code>airlock eval compare --json</code> prints</label>
          <input id="eval-files" data-testid="eval-files" type="file" accept=".json,application/json" multiple ref=${input}
            aria-describedby="eval-files-note" onChange=${(e) => open(e.currentTarget.files)} />
        </div>
        <p class="note" id="eval-files-note">Or drop them here. Files are read in this browser and never leave it: nothing is sent to the daemon. Up to ${formatInt(MAX_EVAL_BYTES / 1024 / 1024)} MiB each; two reports of one suite are shown side by side.</p>
        ${docs.length ? html`<button type="button" class="quiet" onClick=${clear}>Clear</button>` : null}
      </div>
      <div aria-live="polite" class="eval-status">
        ${reading ? html`<p class="loading">Reading…</p>` : null}
        ${!reading && docs.length ? html`<p class="sr-only" data-testid="eval-read">${docs.length === 1 ? "1 file read" : `${docs.length} files read`}.</p>` : null}
      </div>
      ${shown.errors.map((d) => html`<p role="alert" class="alert" data-testid="eval-error" key=${d.name}>${d.message}</p>`)}
      ${shown.note ? html`<p class="note" data-testid="eval-note">${shown.note}</p>` : null}
      ${shown.comparisons.map((d, i) => html`<${ComparisonView} key=${`c${i}`} doc=${d} index=${i} />`)}
      ${shown.pair ? html`<${ReportPair} a=${shown.pair[0]} b=${shown.pair[1]} />` : null}
      ${shown.reports.map((d, i) => html`<${ReportView} key=${`r${i}`} doc=${d} index=${i} />`)}
    </div>`;
}

function StatusBadge({ status }) {
  const [word, cls] = STATUS[status] ?? [status, "none"];
  return html`<span class=${`badge ${cls}`} data-status=${status}>${word}</span>`;
}

/** A pass rate with its interval and counts, as one cell. */
function Rate({ rate, testid }) {
  if (!rate) return html`<span class="muted">no attempts</span>`;
  return html`<span class="rate" data-testid=${testid}><strong>${formatRate(rate)}</strong> <span class="muted small">${formatCount(rate)}</span></span>`;
}

/** A table that scrolls sideways in its own box (a region the keyboard reaches); `stack`: one that reads as cards on a phone instead. */
function Scroll({ label, stack = false, children }) {
  return html`<div class=${`table-scroll eval-scroll${stack ? " stacked" : ""}`} role="region" tabindex="0" aria-label=${label}>${children}</div>`;
}

function ReportView({ doc, index }) {
  const r = doc.report;
  const id = `report-${index}`;
  const attempts = r.tasks.reduce((n, t) => n + t.attempts.length, 0);
  const totals = r.totals;
  return html`
    <section class="eval-report card" aria-labelledby=${`${id}-title`} data-testid="eval-report" data-suite=${r.suite} data-label=${r.label}>
      <h2 id=${`${id}-title`}>Report: ${r.suite} <span class="muted">· ${r.label}</span></h2>
      <p class="muted small break">${doc.name}</p>
      ${r.description ? html`<p>${r.description}</p>` : null}
      <dl class="eval-facts">
        <div><dt>Status</dt><dd><${StatusBadge} status=${r.status} /> <span class="muted small">exit ${r.exit_code}</span></dd></div>
        <div class="wide"><dt>Pass rate</dt><dd><${Rate} rate=${totals.pass_rate} testid="eval-pass-rate" /></dd></div>
        <div><dt>Attempts</dt><dd>${formatInt(totals.attempts)} <span class="muted small">${totals.passed} passed · ${totals.failed} failed · ${totals.unfinished} unfinished</span></dd></div>
        <div><dt>Mean steps</dt><dd>${formatMean(totals.mean_steps)}</dd></div>
        <div><dt>Mean tokens</dt><dd>${formatMean(totals.mean_tokens, 0)}</dd></div>
        <div><dt>Cost</dt><dd>${formatUsd(totals.cost_usd)}${totals.cost_unknown ? html` <span class="muted small">+ ${totals.cost_unknown} unknown</span>` : null}</dd></div>
        <div><dt>Wall time</dt><dd>${formatSeconds(totals.wall_s)}</dd></div>
        <div><dt>Started</dt><dd>${r.started_at}</dd></div>
        <div><dt>Finished</dt><dd>${r.finished_at}</dd></div>
        <div class="wide"><dt>Result</dt><dd class="mono">${r.result_id}</dd></div>
        ${r.variant ? html`<div class="wide"><dt>Variant</dt><dd class="mono">${r.variant}</dd></div>` : null}
        ${r.endpoint ? html`<div class="wide"><dt>Daemon</dt><dd class="mono">${r.endpoint}</dd></div>` : null}
      </dl>
      <p class="note">Rates come with their 95% Wilson interval: with few attempts a rate says little by itself.</p>
      ${r.thresholds.length ? html`
        <h3>Thresholds</h3>
        <ul class="eval-checks" data-testid="eval-thresholds">
          ${r.thresholds.map((t) => html`<li data-passed=${t.passed ? "true" : "false"}>
            <span class=${`badge ${t.passed ? "status-ok" : "status-error"}`}>${t.passed ? "met" : "missed"}</span>
            <code>${t.name}</code> <span>${t.detail}</span></li>`)}
        </ul>` : null}
      ${r.graders.length ? html`
        <h3>Graders</h3>
        <${Scroll} label=${`Graders of ${r.suite} · ${r.label}`}>
          <table class="compact eval-table">
            <thead><tr><th scope="col">Grader</th><th scope="col" class="num">Passed</th><th scope="col" class="num">Failed</th><th scope="col">Deterministic</th></tr></thead>
            <tbody>${r.graders.map((g) => html`<tr><th scope="row"><code>${g.grader}</code></th><td class="num">${g.passed}</td><td class="num">${g.failed}</td><td>${g.deterministic ? "yes" : "no"}</td></tr>`)}</tbody>
          </table>
        <//>` : null}
      <h3>Tasks</h3>
      <${Scroll} label=${`Tasks of ${r.suite} · ${r.label}`} stack=${true}>
        <table class="compact eval-table stack" data-testid="eval-tasks">
          <thead><tr>
            <th scope="col">Task</th><th scope="col" class="num">Attempts</th><th scope="col" class="num">Passed</th>
            <th scope="col">Pass rate (95% CI)</th><th scope="col" class="num">Mean steps</th><th scope="col" class="num">Mean tokens</th>
            <th scope="col" class="num">Cost</th>
          </tr></thead>
          <tbody>
            ${r.tasks.map((t) => html`<tr data-testid="eval-task" data-task=${t.id}>
              <th scope="row"><code>${t.id}</code>${t.nondeterministic ? html` <span class="badge tone-warn" title=${t.nondeterministic_reasons.join(", ")}>varies</span>` : null}</th>
              <td class="num" data-label="Attempts">${t.summary.attempts}</td><td class="num" data-label="Passed">${t.summary.passed}</td>
              <td data-label="Pass rate">${formatRate(t.summary.pass_rate)}</td>
              <td class="num" data-label="Mean steps">${formatMean(t.summary.mean_steps)}</td><td class="num" data-label="Mean tokens">${formatMean(t.summary.mean_tokens, 0)}</td>
              <td class="num" data-label="Cost">${formatUsd(t.summary.cost_usd)}</td>
            </tr>`)}
          </tbody>
        </table>
      <//>
      ${r.tasks.some((t) => t.nondeterministic) ? html`<p class="note">“varies”: the task's attempts may end differently from run to run (repeats, a judge, a live model): read the interval, not one attempt.</p>` : null}
      ${r.tasks.map((t) => html`<${TaskAttempts} key=${t.id} task=${t} open=${attempts <= OPEN_ATTEMPTS} />`)}
    </section>`;
}

function TaskAttempts({ task, open }) {
  return html`
    <details class="eval-attempts" open=${open} data-testid="eval-attempts" data-task=${task.id}>
      <summary>Attempts of <code>${task.id}</code> (${task.attempts.length})</summary>
      ${task.input ? html`<p class="small"><span class="muted">Task:</span> <span class="prose">${task.input}</span></p>` : null}
      <p class="muted small">Model <code>${task.model}</code>${task.policy ? ` · policy ${task.policy}` : ""}${task.approver ? ` · approver ${task.approver}` : ""}</p>
      <ol class="attempts">
        ${task.attempts.map((a) => html`<${Attempt} key=${a.repeat} attempt=${a} />`)}
      </ol>
    </details>`;
}

function Attempt({ attempt: a }) {
  const o = a.outcome;
  const runId = a.run_id || o.run_id || "";
  const traceRun = a.trace?.run_id || runId;
  return html`
    <li class="attempt" data-testid="eval-attempt" data-status=${a.status} data-run-id=${runId || undefined}>
      <div class="attempt-head">
        <span class="muted">#${a.repeat}</span>
        <${StatusBadge} status=${a.status} />
        ${runId ? html`<a class="mono" href=${runHref(runId)} data-testid="eval-run-link">${runId}</a>` : html`<span class="muted">no run</span>`}
        ${traceRun ? html`<a href=${traceHref(traceRun)} data-testid="eval-trace-link">Trace<span class="sr-only"> of ${traceRun}</span></a>` : null}
        <span class="muted small">${o.steps} steps · ${formatInt(o.input_tokens + o.output_tokens)} tokens · ${formatUsd(typeof o.cost_usd === "number" ? o.cost_usd : null)} · ${formatSeconds(o.wall_s)}${o.stop_reason ? ` · stopped ${o.stop_reason}` : ""}</span>
      </div>
      ${a.error ? html`<p class="note warn-text">${a.error}</p>` : null}
      ${a.verdicts.length ? html`
        <ul class="verdicts">
          ${a.verdicts.map((v) => html`<li data-passed=${v.passed ? "true" : "false"}>
            <span class=${`verdict ${v.passed ? "pass" : "fail"}`}><span aria-hidden="true">${v.passed ? "✓" : "✗"}</span> ${v.passed ? "passed" : "failed"}</span>
            <code>${v.label}</code>${v.detail ? html` <span class="muted">${v.detail}</span>` : null}
          </li>`)}
        </ul>` : null}
    </li>`;
}

function ComparisonView({ doc, index }) {
  const c = doc.comparison;
  const id = `comparison-${index}`;
  const rows = [...c.tasks, c.overall];
  const any = c.tasks.some((t) => t.nondeterministic);
  return html`
    <section class="eval-comparison card" aria-labelledby=${`${id}-title`} data-testid="eval-comparison" data-suite=${c.suite}>
      <h2 id=${`${id}-title`}>Comparison: ${c.suite}</h2>
      <p class="muted small break">${doc.name}</p>
      <dl class="eval-facts">
        <div class="wide"><dt>A (baseline)</dt><dd><strong>${c.a.label}</strong> <span class="muted small mono">${c.a.result_id}</span></dd></div>
        <div class="wide"><dt>B</dt><dd><strong>${c.b.label}</strong> <span class="muted small mono">${c.b.result_id}</span></dd></div>
        <div class="wide"><dt>B − A, all tasks</dt><dd data-testid="eval-overall-difference">${formatDifference(c.overall.difference)}
          ${c.overall.difference ? html` <${Significance} difference=${c.overall.difference} />` : null}</dd></div>
      </dl>
      <${Scroll} label=${`Comparison of ${c.a.label} and ${c.b.label}`} stack=${true}>
        <table class="compact eval-table stack" data-testid="eval-comparison-tasks">
          <thead><tr>
            <th scope="col">Task</th><th scope="col">A pass rate</th><th scope="col">B pass rate</th><th scope="col">B − A</th>
            <th scope="col">Significant</th><th scope="col">Steps A → B</th><th scope="col">Tokens A → B</th><th scope="col">Cost A → B</th>
            <th scope="col">Wall A → B</th>
          </tr></thead>
          <tbody>
            ${rows.map((t, i) => html`<tr data-testid="eval-comparison-task" data-task=${t.id} class=${i === rows.length - 1 ? "overall" : ""}>
              <th scope="row">${i === rows.length - 1 ? "All tasks" : html`<code>${t.id}</code>`}${t.nondeterministic ? html` <span class="badge tone-warn">varies</span>` : null}</th>
              <td data-label="A pass rate">${formatRate(t.a.pass_rate)}</td>
              <td data-label="B pass rate">${formatRate(t.b.pass_rate)}</td>
              <td data-label="B − A" data-testid="eval-difference">${formatDifference(t.difference)}</td>
              <td data-label="Significant">${t.difference ? html`<${Significance} difference=${t.difference} />` : "—"}</td>
              <td data-label="Steps A → B">${arrow(t.a.mean_steps, t.b.mean_steps, t.ratios.steps, formatMean)}</td>
              <td data-label="Tokens A → B">${arrow(t.a.mean_tokens, t.b.mean_tokens, t.ratios.tokens, (v) => formatMean(v, 0))}</td>
              <td data-label="Cost A → B">${arrow(t.a.mean_cost_usd, t.b.mean_cost_usd, t.ratios.cost_usd, formatUsd)}</td>
              <td data-label="Wall A → B">${arrow(t.a.mean_wall_s, t.b.mean_wall_s, t.ratios.wall_s, formatSeconds)}</td>
            </tr>`)}
          </tbody>
        </table>
      <//>
      <p class="note">pp: percentage points. A difference is significant when its 95% interval (Newcombe) leaves out 0.${any ? " “varies”: either side's attempts may end differently from run to run." : ""}</p>
      ${rows.filter((t) => t.stop_reason_changes.length).map((t) => html`<p class="small">Stop reasons of ${t === c.overall ? "all tasks" : html`<code>${t.id}</code>`}: ${t.stop_reason_changes.join(", ")}</p>`)}
      ${c.only_in_a.length ? html`<p class="small">Only in A: ${c.only_in_a.join(", ")}</p>` : null}
      ${c.only_in_b.length ? html`<p class="small">Only in B: ${c.only_in_b.join(", ")}</p>` : null}
    </section>`;
}

function Significance({ difference }) {
  return difference.significant
    ? html`<span class="badge status-ok" data-testid="eval-significant">significant</span>`
    : html`<span class="badge" data-testid="eval-not-significant">not significant</span>`;
}

function arrow(a, b, ratio, show) {
  const r = formatRatio(ratio);
  return `${show(a)} → ${show(b)}${r ? ` (${r})` : ""}`;
}

function ReportPair({ a, b }) {
  const ra = a.report;
  const rb = b.report;
  const rows = pairTasks(ra, rb);
  const cell = (task, pick) => (task ? pick(task) : html`<span class="muted">not run</span>`);
  return html`
    <section class="eval-pair card" aria-labelledby="pair-title" data-testid="eval-pair" data-suite=${ra.suite}>
      <h2 id="pair-title">Side by side: ${ra.suite}</h2>
      <p class="note">A is <strong>${ra.label}</strong> (${a.name}), B is <strong>${rb.label}</strong> (${b.name}). Each side as its report gives it; for the difference and whether it is significant, open the comparison <code>airlock eval compare A B --json</code> prints.</p>
      <${Scroll} label=${`${ra.label} and ${rb.label} side by side`} stack=${true}>
        <table class="compact eval-table stack">
          <thead><tr>
            <th scope="col">Task</th><th scope="col">A: ${ra.label}</th><th scope="col">B: ${rb.label}</th>
            <th scope="col">Steps A → B</th><th scope="col">Tokens A → B</th><th scope="col">Cost A → B</th>
          </tr></thead>
          <tbody>
            ${rows.map((row) => html`<tr data-testid="eval-pair-task" data-task=${row.id}>
              <th scope="row"><code>${row.id}</code></th>
              <td data-label=${`A: ${ra.label}`}>${cell(row.a, (t) => formatRate(t.summary.pass_rate))}</td>
              <td data-label=${`B: ${rb.label}`}>${cell(row.b, (t) => formatRate(t.summary.pass_rate))}</td>
              <td data-label="Steps A → B">${formatMean(row.a?.summary.mean_steps)} → ${formatMean(row.b?.summary.mean_steps)}</td>
              <td data-label="Tokens A → B">${formatMean(row.a?.summary.mean_tokens, 0)} → ${formatMean(row.b?.summary.mean_tokens, 0)}</td>
              <td data-label="Cost A → B">${formatUsd(row.a?.summary.cost_usd)} → ${formatUsd(row.b?.summary.cost_usd)}</td>
            </tr>`)}
            <tr class="overall" data-testid="eval-pair-task" data-task="">
              <th scope="row">All tasks</th>
              <td data-label=${`A: ${ra.label}`}>${formatRate(ra.totals.pass_rate)}</td>
              <td data-label=${`B: ${rb.label}`}>${formatRate(rb.totals.pass_rate)}</td>
              <td data-label="Steps A → B">${formatMean(ra.totals.mean_steps)} → ${formatMean(rb.totals.mean_steps)}</td>
              <td data-label="Tokens A → B">${formatMean(ra.totals.mean_tokens, 0)} → ${formatMean(rb.totals.mean_tokens, 0)}</td>
              <td data-label="Cost A → B">${formatUsd(ra.totals.cost_usd)} → ${formatUsd(rb.totals.cost_usd)}</td>
            </tr>
          </tbody>
        </table>
      <//>
    </section>`;
}

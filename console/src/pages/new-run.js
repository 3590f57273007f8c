// The "New run" form (#/new): the task, a workspace (one of the caller's roots and a path
// inside it), a model (the operator's list, or a name typed), the approval policy, the tools
// (none checked: every tool), budgets, then Agent.StartRun — read up to its RunStarted, the
// stream closed (the run goes on), and the run's page opened. `?task=…&workspace=…&model=…`
// prefill the form. What the daemon refuses is shown beside the form, which keeps what was
// typed.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, Code, enumDesc, enumName, enumTitle, errorCode, errorMessage, isAbort } from "../api.js";
import { ErrorAlert, Loading, RiskBadge, useTitle } from "../components.js";
import { formatInt, num } from "../format.js";
import { html } from "../html.js";
import { navigate, runHref } from "../router.js";
import { buildStartRun, composeWorkspace, fieldOfError, firstRun, isSubmitKey, splitWorkspace, utf8Length } from "../start-form.js";

/** The model select's "type a name" choice (no model name has no colon and these brackets). */
const OTHER = "[other]";

/** What each approval policy does, in words (the enum's names are terse). */
const POLICY_WORDS = {
  ALWAYS: "Always ask — a person approves every call",
  RISKY: "Ask for risky calls — writes, network, installs, commands; reads run",
  NEVER: "Never ask — what would need asking is denied (unattended)",
  AUTO: "Auto — everything the tool's profile allows runs without asking",
};

/** Form field → the id of its control (for focus and aria), in the order they are checked. */
const FIELD_IDS = {
  task: "nr-task",
  workspace: "nr-dir",
  model: "nr-model",
  policy: "nr-policy",
  tools: "nr-tools",
  maxSteps: "nr-max-steps",
  maxToolCalls: "nr-max-tool-calls",
  wallTime: "nr-wall-time",
  budgets: "nr-max-steps",
};

/** The form's keys whose errors are reported under another name. */
const ERROR_KEY = { root: "workspace", sub: "workspace", modelOther: "model" };

/** The approval policies the daemon's descriptor set names: [{ value, label }]. */
function policyOptions() {
  const values = enumDesc("airlock.v1.ApprovalPolicy")?.values ?? [];
  return values
    .filter((v) => v.number !== 0)
    .map((v) => {
      const name = enumName("airlock.v1.ApprovalPolicy", v.number);
      return { value: String(v.number), label: POLICY_WORDS[name] ?? enumTitle("airlock.v1.ApprovalPolicy", v.number) };
    });
}

export function NewRunPage({ query }) {
  useTitle("New run");
  const [info, setInfo] = useState(null);
  const [infoError, setInfoError] = useState(null);
  const [tools, setTools] = useState(null);
  const [toolsError, setToolsError] = useState(null);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    api.daemon.getInfo({}, { signal }).then(setInfo, (err) => {
      if (!isAbort(err, signal)) setInfoError(err);
    });
    api.tools.listTools({}, { signal }).then(
      (res) => setTools([...res.tools].sort((a, b) => a.name.localeCompare(b.name))),
      (err) => {
        if (!isAbort(err, signal)) setToolsError(err);
      },
    );
    return () => controller.abort();
  }, []);

  return html`
    <div class="page new-run-page">
      <nav class="crumbs" aria-label="Breadcrumb"><a href="#/runs">Runs</a><span aria-hidden="true"> / </span><span aria-current="page">New run</span></nav>
      <div class="page-head">
        <h1>New run</h1>
        <p class="muted head-note">A new session: later runs can continue it from its page.</p>
      </div>
      ${infoError && html`<${ErrorAlert} error=${infoError} />`}
      ${!info && !infoError && html`<${Loading} label="Loading what this daemon offers…" />`}
      ${info && html`<${NewRunForm} info=${info} tools=${tools} toolsError=${toolsError} query=${query} />`}
    </div>
  `;
}

function initialForm(info, query) {
  const roots = info.workspaceRoots ?? [];
  const models = info.models ?? [];
  const form = {
    root: roots[0] ?? "",
    sub: "",
    model: models[0] ?? OTHER,
    modelOther: "",
    policy: "0",
    tools: [],
    maxSteps: "",
    maxToolCalls: "",
    wallTime: "",
    task: query?.get("task") ?? "",
  };
  const workspace = query?.get("workspace");
  if (workspace) {
    const split = splitWorkspace(workspace, roots);
    if (split.root) Object.assign(form, split);
  }
  const model = query?.get("model");
  if (model) {
    if (models.includes(model)) form.model = model;
    else Object.assign(form, { model: OTHER, modelOther: model });
  }
  return form;
}

function NewRunForm({ info, tools, toolsError, query }) {
  const roots = info.workspaceRoots ?? [];
  const models = info.models ?? [];
  const maxInputBytes = num(info.limits?.maxInputBytes);
  const [form, setForm] = useState(() => initialForm(info, query));
  const [errors, setErrors] = useState({});
  const [serverError, setServerError] = useState(null);
  const [serverField, setServerField] = useState("");
  const [busy, setBusy] = useState(false);
  const alive = useRef(true);
  const pending = useRef(null);
  const policies = useRef(null);
  if (!policies.current) policies.current = policyOptions();

  useEffect(
    () => () => {
      alive.current = false;
      pending.current?.abort();
    },
    [],
  );

  const typedModel = form.model === OTHER || models.length === 0;
  const model = typedModel ? form.modelOther : form.model;
  const workspace = composeWorkspace(form.root, form.sub);
  const taskBytes = utf8Length(form.task);
  const overLimit = maxInputBytes > 0 && taskBytes > maxInputBytes;

  const set = (key) => (event) => {
    const value = event.currentTarget.value;
    setForm((f) => ({ ...f, [key]: value }));
    // Editing a field takes back what was said about it.
    const field = ERROR_KEY[key] ?? key;
    if (errors[field]) setErrors((e) => ({ ...e, [field]: "" }));
    if (serverField === field) setServerField("");
  };
  const toggleTool = (name) => (event) => {
    const on = event.currentTarget.checked;
    setForm((f) => ({ ...f, tools: on ? [...f.tools, name] : f.tools.filter((t) => t !== name) }));
  };
  const focus = (field) => {
    const id = field === "model" && models.length && typedModel ? "nr-model-other" : FIELD_IDS[field];
    const el = document.getElementById(id ?? "");
    if (!el) return;
    // A field inside the closed tools section: open it first.
    const details = el.closest("details");
    if (details && !details.open) details.open = true;
    el.focus();
  };

  const submit = async (event) => {
    event.preventDefault();
    if (busy) return;
    const built = buildStartRun({ ...form, model }, { maxInputBytes });
    setErrors(built.errors);
    setServerError(null);
    setServerField("");
    const first = Object.keys(FIELD_IDS).find((k) => built.errors[k]);
    if (first) {
      focus(first);
      return;
    }
    setBusy(true);
    const controller = new AbortController();
    pending.current = controller;
    try {
      const { runId } = await firstRun(api.agent.startRun(built.request, { signal: controller.signal }));
      // The run is the daemon's now: closing the stream does not stop it.
      controller.abort();
      if (alive.current) navigate(runHref(runId));
    } catch (err) {
      controller.abort();
      if (!alive.current) return;
      setBusy(false);
      setServerError(err);
      const field = errorCode(err) === Code.InvalidArgument ? fieldOfError(errorMessage(err)) : "";
      setServerField(field);
      if (field) focus(field);
    }
  };

  const onTaskKey = (event) => {
    if (isSubmitKey(event)) {
      event.preventDefault();
      event.currentTarget.form?.requestSubmit();
    }
  };

  // A field is invalid by the form's own check (its message under it), or because the
  // daemon's refusal names it (the message is the alert by the button).
  const invalid = (key) => (errors[key] || serverField === key ? "true" : undefined);
  const describedBy = (...ids) => ids.filter(Boolean).join(" ") || undefined;
  const fieldError = (key) =>
    errors[key] ? html`<p class="field-error" id=${`${FIELD_IDS[key]}-error`} data-testid=${`error-${key}`}>${errors[key]}</p>` : null;
  const errId = (key) => (errors[key] ? `${FIELD_IDS[key]}-error` : serverField === key ? "nr-start-error" : "");

  const chosen = form.tools.length;

  return html`
    <form class="card start-form" data-testid="new-run" onSubmit=${submit} novalidate aria-busy=${busy ? "true" : "false"}>
      <div class="field">
        <label for="nr-task">Task</label>
        <textarea id="nr-task" data-testid="task" rows="6" required spellcheck="true"
          value=${form.task} onInput=${set("task")} onKeyDown=${onTaskKey}
          aria-invalid=${overLimit || invalid("task") ? "true" : undefined}
          aria-describedby=${describedBy("nr-task-count", errId("task"))}></textarea>
        <p id="nr-task-count" class=${`counter${overLimit ? " over" : ""}`} data-testid="task-count">
          ${maxInputBytes
            ? `${formatInt(taskBytes)} of ${formatInt(maxInputBytes)} bytes${overLimit ? ` — ${formatInt(taskBytes - maxInputBytes)} over the limit` : ""}`
            : `${formatInt(taskBytes)} bytes`}
          <span class="muted"> · Ctrl+Enter (⌘+Enter) starts the run</span>
        </p>
        ${fieldError("task")}
      </div>

      <fieldset class="start-group">
        <legend>Workspace</legend>
        ${roots.length === 0
          ? html`<p class="note">This daemon names no workspace roots: the run gets no workspace.</p>`
          : html`
            <div class="start-grid">
              <div class="field">
                <label for="nr-root">Root</label>
                <select id="nr-root" data-testid="root" value=${form.root} onChange=${set("root")}>
                  ${roots.map((r) => html`<option value=${r}>${r}</option>`)}
                </select>
              </div>
              <div class="field">
                <label for="nr-dir">Path inside it</label>
                <input id="nr-dir" data-testid="workspace-dir" type="text" autocomplete="off" spellcheck="false"
                  placeholder="project/sub (empty: the root)" value=${form.sub} onInput=${set("sub")}
                  aria-invalid=${workspace.error || invalid("workspace") ? "true" : undefined}
                  aria-describedby=${describedBy("nr-dir-help", errId("workspace"))} />
              </div>
            </div>
            <p id="nr-dir-help" class="note">
              ${workspace.error
                ? html`<span class="warn-text">${workspace.error}</span>`
                : html`Runs in <code class="break" data-testid="workspace-path">${workspace.path}</code>`}
            </p>
            ${fieldError("workspace")}`}
      </fieldset>

      <div class="start-grid">
        <div class="field">
          <label for="nr-model">Model</label>
          ${models.length
            ? html`<select id="nr-model" data-testid="model" value=${form.model} onChange=${set("model")}
                aria-invalid=${!typedModel ? invalid("model") : undefined} aria-describedby=${describedBy(!typedModel && errId("model"))}>
                ${models.map((m, i) => html`<option value=${m}>${m}${i === 0 ? " (default)" : ""}</option>`)}
                <option value=${OTHER}>Another model…</option>
              </select>`
            : html`<input id="nr-model" data-testid="model" type="text" autocomplete="off" spellcheck="false"
                placeholder="provider:model" value=${form.modelOther} onInput=${set("modelOther")}
                aria-invalid=${invalid("model")} aria-describedby=${describedBy("nr-model-help", errId("model"))} />`}
          ${models.length && typedModel
            ? html`<label for="nr-model-other" class="sub-label">Model name</label>
                <input id="nr-model-other" data-testid="model-other" type="text" autocomplete="off" spellcheck="false"
                  placeholder="provider:model" value=${form.modelOther} onInput=${set("modelOther")}
                  aria-invalid=${invalid("model")} aria-describedby=${describedBy("nr-model-help", errId("model"))} />`
            : null}
          ${typedModel ? html`<p id="nr-model-help" class="note">As provider:model, e.g. openai:gpt-4.1 or anthropic:claude-sonnet-4-5.</p>` : null}
          ${fieldError("model")}
        </div>
        <div class="field">
          <label for="nr-policy">Approval policy</label>
          <select id="nr-policy" data-testid="policy" value=${form.policy} onChange=${set("policy")}
            aria-invalid=${invalid("policy")} aria-describedby=${describedBy(errId("policy"))}>
            <option value="0">The daemon's default</option>
            ${policies.current.map((p) => html`<option value=${p.value}>${p.label}</option>`)}
          </select>
          ${fieldError("policy")}
        </div>
      </div>

      <details class="start-group start-tools">
        <summary data-testid="tools-summary">Tools <span class="muted">(${chosen ? `${chosen} chosen` : "every tool"})</span></summary>
        <fieldset id="nr-tools" tabindex="-1" aria-describedby=${describedBy("nr-tools-help", errId("tools"))}>
          <legend class="sr-only">Tools the run may use</legend>
          <p id="nr-tools-help" class="note">None checked: the run may use every tool the daemon serves.</p>
          ${toolsError && html`<${ErrorAlert} error=${toolsError}>${" "}(the run gets every tool unless you name some)<//>`}
          ${!tools && !toolsError && html`<${Loading} label="Loading tools…" />`}
          ${tools && tools.length === 0 && html`<p class="muted">This daemon serves no tools.</p>`}
          ${tools && tools.length > 0 && html`
            <ul class="tool-choices">
              ${tools.map((t, i) => html`<li key=${t.name}>
                <input type="checkbox" id=${`nr-tool-${i}`} data-testid="tool-choice" value=${t.name}
                  checked=${form.tools.includes(t.name)} onChange=${toggleTool(t.name)} />
                <label for=${`nr-tool-${i}`} title=${t.description}><span class="mono">${t.name}</span></label>
                <${RiskBadge} risk=${t.risk} />
              </li>`)}
            </ul>`}
          ${chosen ? html`<button type="button" class="link-button" onClick=${() => setForm((f) => ({ ...f, tools: [] }))}>Clear the choice</button>` : null}
          ${fieldError("tools")}
        </fieldset>
      </details>

      <fieldset class="start-group">
        <legend>Budgets <span class="muted">(empty: the daemon's)</span></legend>
        <div class="start-grid budgets">
          <${BudgetField} id="nr-max-steps" name="maxSteps" label="Max steps" value=${form.maxSteps} onInput=${set("maxSteps")}
            invalid=${invalid("maxSteps")} describedBy=${errId("maxSteps")} />
          <${BudgetField} id="nr-max-tool-calls" name="maxToolCalls" label="Max tool calls" value=${form.maxToolCalls} onInput=${set("maxToolCalls")}
            invalid=${invalid("maxToolCalls")} describedBy=${errId("maxToolCalls")} />
          <${BudgetField} id="nr-wall-time" name="wallTime" label="Wall time (seconds)" value=${form.wallTime} onInput=${set("wallTime")}
            invalid=${invalid("wallTime")} describedBy=${errId("wallTime")} />
        </div>
        ${fieldError("maxSteps")}
        ${fieldError("maxToolCalls")}
        ${fieldError("wallTime")}
      </fieldset>

      <div id="nr-start-error">${serverError ? html`<${ErrorAlert} error=${serverError} testid="start-error" />` : null}</div>
      <div class="buttons start-actions">
        <button type="submit" class="primary" data-testid="start-run" disabled=${busy}>${busy ? "Starting…" : "Start run"}</button>
        ${busy ? html`<span role="status" class="muted">Starting the run…</span>` : null}
      </div>
    </form>
  `;
}

function BudgetField({ id, name, label, value, onInput, invalid, describedBy }) {
  return html`
    <div class="field">
      <label for=${id}>${label}</label>
      <input id=${id} data-testid=${`budget-${name}`} type="text" inputmode="numeric" autocomplete="off"
        placeholder="default" value=${value} onInput=${onInput} aria-invalid=${invalid} aria-describedby=${describedBy || undefined} />
    </div>`;
}

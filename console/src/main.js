// The console's entry point: loads the API description, then renders the shell — header
// with the main nav (the approvals count kept live app-wide), sign out, and the page the
// hash names — or the sign-in form while no token is held.

import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, init } from "./api.js";
import { approvalsStore, startApprovals, stopApprovals } from "./approvals-store.js";
import { authStore, signOut } from "./auth.js";
import { html } from "./html.js";
import { ApprovalsPage } from "./pages/approvals.js";
import { LoginPage } from "./pages/login.js";
import { RunPage } from "./pages/run.js";
import { RunsPage } from "./pages/runs.js";
import { EvalsPage } from "./pages/evals.js";
import { NewRunPage } from "./pages/new-run.js";
import { PolicyPage } from "./pages/policy.js";
import { SessionPage } from "./pages/session.js";
import { ToolsPage } from "./pages/tools.js";
import { TracePage } from "./pages/trace.js";
import { useRoute } from "./router.js";
import { useStore } from "./store.js";
import { useTitle } from "./components.js";

function Boot() {
  const [state, setState] = useState({ ready: false, error: "" });
  const start = () => {
    setState({ ready: false, error: "" });
    init().then(
      () => setState({ ready: true, error: "" }),
      (err) => setState({ ready: false, error: err.message }),
    );
  };
  useEffect(start, []);
  if (state.ready) return html`<${App} />`;
  return html`
    <main id="main" class="boot">
      <h1>airlock</h1>
      ${state.error
        ? html`<p role="alert" class="alert">${state.error}</p><button type="button" onClick=${start}>Try again</button>`
        : html`<p role="status" class="loading">Loading…</p>`}
    </main>`;
}

function App() {
  const auth = useStore(authStore);
  const [daemon, setDaemon] = useState(null);
  useEffect(() => {
    if (!auth.token) setDaemon(null);
  }, [auth.token]);
  if (!auth.token || auth.checking) {
    return html`<${LoginPage} message=${auth.message} onSignedIn=${setDaemon} />`;
  }
  return html`<${Shell} daemon=${daemon} setDaemon=${setDaemon} />`;
}

function Shell({ daemon, setDaemon }) {
  const route = useRoute();
  const approvals = useStore(approvalsStore);
  const main = useRef(null);
  const firstRoute = useRef(true);

  useEffect(() => {
    startApprovals();
    return stopApprovals;
  }, []);

  useEffect(() => {
    if (daemon) return;
    api.daemon.getInfo({}).then(setDaemon, () => {
      // An UNAUTHENTICATED answer already signed out; anything else only costs the header its info.
    });
  }, [daemon]);

  // After navigating, start keyboard and screen reader users at the new page.
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    main.current?.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  }, [route.page, route.runId]);

  const section = ["run", "trace", "session"].includes(route.page) ? "runs" : route.page;
  const link = (href, name, label, extra = null) => html`
    <a href=${href} class=${section === name ? "active" : ""} aria-current=${section === name ? "page" : undefined}>${label}${extra}</a>`;

  let page;
  switch (route.page) {
    case "runs":
      page = html`<${RunsPage} query=${route.query} />`;
      break;
    case "run":
      page = html`<${RunPage} key=${route.runId} runId=${route.runId} />`;
      break;
    case "trace":
      page = html`<${TracePage} key=${route.runId} runId=${route.runId} />`;
      break;
    case "new":
      page = html`<${NewRunPage} query=${route.query} />`;
      break;
    case "session":
      page = html`<${SessionPage} key=${route.sessionId} sessionId=${route.sessionId} />`;
      break;
    case "approvals":
      page = html`<${ApprovalsPage} />`;
      break;
    case "tools":
      page = html`<${ToolsPage} daemon=${daemon} />`;
      break;
    case "policy":
      page = html`<${PolicyPage} query=${route.query} />`;
      break;
    case "evals":
      page = html`<${EvalsPage} />`;
      break;
    default:
      page = html`<${NotFound} />`;
  }

  return html`
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); main.current?.focus(); }}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/runs"><img src="favicon.svg" alt="" width="22" height="22" /><span>airlock</span></a>
      <nav aria-label="Main">
        ${link("#/runs", "runs", "Runs")}
        ${link("#/approvals", "approvals", "Approvals", html`
          <span class=${`count${approvals.pending ? " hot" : ""}`} data-testid="approvals-count">${approvals.pending}</span><span class="sr-only"> pending</span>`)}
        ${link("#/new", "new", "New run")}
        ${link("#/tools", "tools", "Tools")}
        ${link("#/policy", "policy", "Policy")}
        ${link("#/evals", "evals", "Evals")}
      </nav>
      <div class="who">
        ${daemon ? html`<span class="muted" title=${`airlockd ${daemon.version}`}>${daemon.tenant || "default"} · v${daemon.version}</span>` : null}
        <button type="button" class="quiet" onClick=${() => signOut("")}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1" ref=${main} data-route=${route.hash || "#/runs"}>${page}</main>
  `;
}

function NotFound() {
  useTitle("Not found");
  return html`<div class="page"><h1>Not found</h1><p>No page here. <a href="#/runs">Go to the runs</a>.</p></div>`;
}

// Over plain HTTP a browser keeps at most six connections to one address, and each stream
// holds one. A page kept in the back/forward cache would keep its streams — and so the
// connections — while frozen, and the next page of the console would wait for them. So the
// app is unmounted as the page is hidden (every stream's cleanup aborts it) and mounted again
// if the cache brings the page back.
const root = document.getElementById("app");
const mount = () => render(html`<${Boot} />`, root);
addEventListener("pagehide", () => render(null, root));
addEventListener("pageshow", (event) => {
  if (event.persisted) mount();
});
mount();

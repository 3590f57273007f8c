//! The web console in a real browser: Debian's Chromium, headless, against a real daemon with
//! scripted runs. What a person does there — follow runs, answer approvals with the diff in
//! front of them, cancel, read a trace, sign in — and what they must not be able to do: see
//! another tenant's runs, or have a forged or stale decision count.
//!
//! Each test saves screenshots of the pages it visits (`target/console-screenshots`).

use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::browser::{Browser, Viewport};
use airlock_tests::{RunStream, TestDaemon, scripted_run};
use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::{Value, json};

use crate::agent_approvals::{
    FIXED, daemon, resolutions, start, waiting_write, workspace, write_call,
};
use crate::auth::{ALICE, BOB, TwoTenants};

pub(crate) fn css_attr(value: &str) -> String {
    serde_json::to_string(value).unwrap()
}

fn run_row(run_id: &str, state: &str) -> String {
    format!(
        "[data-testid=run-row][data-run-id={}][data-state={state}]",
        css_attr(run_id)
    )
}

fn approval_card(approval_id: &str) -> String {
    format!(
        "[data-testid=approval][data-approval-id={}]",
        css_attr(approval_id)
    )
}

/// A desktop browser signed in to `daemon`'s console, at `route` (`#/approvals`, ...).
pub(crate) async fn console_at(daemon: &TestDaemon, route: &str) -> Browser {
    let browser = Browser::open(Viewport::DESKTOP).await;
    browser.sign_in(&daemon.endpoint, &daemon.token).await;
    // Signed in (the nav is up) before going anywhere: a route taken while the sign-in is
    // still being checked could be lost to it.
    browser.wait_for("[data-testid=approvals-count]").await;
    if !route.is_empty() {
        browser
            .goto(&format!("{}/{route}", daemon.endpoint))
            .await
            .unwrap();
        // The hash changes at once, the page on the next `hashchange`: until then the
        // previous page (the runs list, unfiltered) is still the one in the DOM.
        browser
            .wait_until(
                &format!("the route {route}"),
                &format!(
                    "return document.querySelector('main#main')?.dataset.route === {route:?};"
                ),
            )
            .await;
    }
    browser
}

pub(crate) async fn text_of(browser: &Browser, css: &str) -> String {
    browser.wait_for(css).await.text().await.unwrap()
}

pub(crate) async fn click(browser: &Browser, css: &str) {
    browser.wait_for(css).await.click().await.unwrap();
}

#[tokio::test]
async fn the_runs_list_follows_runs_as_they_progress_without_a_reload() {
    let daemon = daemon().await;
    let (mut run, request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let browser = console_at(&daemon, "").await;
    browser
        .wait_for(&run_row(run.run_id(), "WAITING_FOR_APPROVAL"))
        .await;
    browser
        .eval("window.__sameDocument = true; return true;")
        .await;

    // Answered elsewhere (a CLI's stream): the row moves on by itself.
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    run.finished().await;
    browser.wait_for(&run_row(run.run_id(), "FINISHED")).await;
    // A run started after the page loaded joins the list.
    let script = json!({"turns": [{"final": "second"}]});
    let mut second = daemon
        .start_run(scripted_run(&daemon.workspace("x"), &script))
        .await;
    second.finished().await;
    browser
        .wait_for(&run_row(second.run_id(), "FINISHED"))
        .await;
    assert_eq!(
        browser.eval("return window.__sameDocument === true;").await,
        Value::Bool(true),
        "the page followed the runs without reloading"
    );
    browser.save_screenshot("runs").await;
    browser.close().await;
}

#[tokio::test]
async fn an_approval_is_given_in_the_inbox_with_its_diff_rendered() {
    let daemon = daemon().await;
    let (mut run, request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let browser = console_at(&daemon, "#/approvals").await;
    let card = approval_card(&request.approval_id);
    browser.wait_for(&card).await;
    assert!(
        text_of(&browser, &card).await.contains("write_file"),
        "the card names the tool"
    );
    // The diff, side by side: the old line on the left, the new one on the right.
    let column = |class: &str| {
        format!(
            "return [...document.querySelectorAll({})].map(e => e.textContent).join('\\n');",
            css_attr(&format!("{card} [data-testid=diff] td.{class}:not(.num)"))
        )
    };
    let removed = browser.eval(&column("del")).await.to_string();
    let added = browser.eval(&column("add")).await.to_string();
    assert!(
        removed.contains("return sum(v) / (len(v) - 1)"),
        "{removed}"
    );
    assert!(added.contains("return sum(v) / len(v)"), "{added}");
    assert!(
        !text_of(&browser, &format!("{card} [data-testid=deadline]"))
            .await
            .is_empty(),
        "the deadline counts down"
    );
    browser.save_screenshot("approvals").await;

    click(&browser, &format!("{card} [data-testid=approve-once]")).await;
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "written");
    assert_eq!(
        std::fs::read_to_string(daemon.workspace("w").join("calc.py")).unwrap(),
        FIXED
    );
    browser.wait_for("[data-testid=approvals-empty]").await;
    browser.close().await;
}

#[tokio::test]
async fn approve_for_the_session_covers_the_same_call_again() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let script = json!({"turns": [
        {"tool_calls": [write_call()]},
        {"tool_calls": [write_call()]},
        {"final": "written twice"}
    ]});
    let mut run = daemon
        .start_run(start(&workspace, &script, pb::ApprovalPolicy::Risky))
        .await;
    let request = run.approval_requested().await;
    let browser = console_at(&daemon, "#/approvals").await;
    click(
        &browser,
        &format!(
            "{} [data-testid=approve-session]",
            approval_card(&request.approval_id)
        ),
    )
    .await;
    assert_eq!(run.finished().await.final_text, "written twice");
    let by: Vec<String> = resolutions(&run)
        .into_iter()
        .map(|resolved| resolved.decided_by)
        .collect();
    assert_eq!(by.len(), 2, "{by:?}");
    assert_eq!(by[1], "session grant", "the second call was not asked");
    browser.close().await;
}

#[tokio::test]
async fn the_runs_list_filters_by_state_and_by_session() {
    let daemon = daemon().await;
    let (_waiting, _request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let script = json!({"turns": [{"final": "done"}]});
    let mut finished = daemon
        .start_run(scripted_run(&daemon.workspace("x"), &script))
        .await;
    finished.finished().await;
    let finished_session = finished.of(|event| match event {
        pb::run_event::Event::RunStarted(started) => Some(started.session_id.clone()),
        _ => None,
    })[0]
        .clone();
    let rows =
        "return [...document.querySelectorAll('[data-testid=run-row]')].map(r => r.dataset.state);";

    let browser = console_at(&daemon, "#/runs?state=waiting").await;
    browser
        .wait_for("[data-testid=run-row][data-state=WAITING_FOR_APPROVAL]")
        .await;
    browser.wait_for("[data-testid=runs-end]").await;
    assert_eq!(browser.eval(rows).await, json!(["WAITING_FOR_APPROVAL"]));
    assert_eq!(
        browser
            .eval("return document.querySelector('#filter-state').selectedOptions[0].textContent;")
            .await,
        json!("Waiting for approval")
    );

    // A session typed into its filter: only that session's run.
    browser
        .goto(&format!("{}/#/runs", daemon.endpoint))
        .await
        .unwrap();
    browser.wait_for_count("[data-testid=run-row]", 2).await;
    browser
        .wait_for("#filter-session")
        .await
        .send_keys(&finished_session)
        .await
        .unwrap();
    browser
        .wait_until(
            "only the session's run",
            &format!(
                "const rows = [...document.querySelectorAll('[data-testid=run-row]')];
                 return rows.length === 1 && rows[0].dataset.runId === {};",
                css_attr(finished.run_id())
            ),
        )
        .await;
    browser.close().await;
}

#[tokio::test]
async fn a_denial_needs_a_reason_and_the_reason_reaches_the_model() {
    let daemon = daemon().await;
    let (mut run, request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let browser = console_at(&daemon, "#/approvals").await;
    let card = approval_card(&request.approval_id);
    click(&browser, &format!("{card} [data-testid=deny]")).await;
    // No reason, no denial: the page asks for one and sends nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        daemon.run_info(run.run_id()).await.state,
        pb::RunState::WaitingForApproval as i32
    );
    browser
        .wait_for(&format!("{card} [data-testid=deny-reason]"))
        .await
        .send_keys("not today")
        .await
        .unwrap();
    click(&browser, &format!("{card} [data-testid=deny]")).await;
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "the approver said not today");
    assert!(
        std::fs::read_to_string(daemon.workspace("w").join("calc.py"))
            .unwrap()
            .contains("len(v) - 1"),
        "nothing was written"
    );
    browser.close().await;
}

#[tokio::test]
async fn forged_and_stale_decisions_are_refused_and_the_page_says_so() {
    let daemon = daemon().await;
    let (_first, answered) = waiting_write(&daemon, &workspace(&daemon, "a")).await;
    let (mut second, pending) = waiting_write(&daemon, &workspace(&daemon, "b")).await;
    let browser = console_at(&daemon, "#/approvals").await;
    let card = approval_card(&pending.approval_id);
    browser.wait_for(&card).await;
    browser
        .wait_for(&approval_card(&answered.approval_id))
        .await;

    // The page reads what it sends from the card; a card altered in place sends what it
    // says. It is marked first, since its id is about to change.
    browser
        .eval(&format!(
            "document.querySelector({}).dataset.underTest = 'yes'; return true;",
            css_attr(&card)
        ))
        .await;
    let card = "[data-testid=approval][data-under-test=yes]";

    // A digest that is not this call's: the daemon is not fooled.
    browser
        .eval(&format!(
            "document.querySelector({}).dataset.digest = '{}'; return true;",
            css_attr(card),
            "0".repeat(64)
        ))
        .await;
    click(&browser, &format!("{card} [data-testid=approve-once]")).await;
    let error = text_of(&browser, &format!("{card} [data-testid=decision-error]")).await;
    assert!(error.contains("digest"), "{error}");

    // A request already answered (elsewhere): nothing is pending under its id.
    daemon
        .agent()
        .await
        .decide_approval(pb::ApprovalDecision {
            approval_id: answered.approval_id.clone(),
            decision: pb::Decision::Deny as i32,
            reason: "answered elsewhere".into(),
            digest: answered.digest.clone(),
            grant_prefix: Vec::new(),
        })
        .await
        .unwrap();
    browser
        .eval(&format!(
            "const card = document.querySelector({});
             card.dataset.approvalId = {}; card.dataset.digest = {};
             return true;",
            css_attr(card),
            css_attr(&answered.approval_id),
            css_attr(&answered.digest)
        ))
        .await;
    click(&browser, &format!("{card} [data-testid=approve-once]")).await;
    browser
        .wait_until(
            "the stale decision's refusal",
            &format!(
                "const e = document.querySelector({});
                 return !!e && /no pending approval/.test(e.textContent);",
                css_attr(&format!("{card} [data-testid=decision-error]"))
            ),
        )
        .await;
    browser.save_screenshot("approvals-refused").await;

    // Neither counted: the run still waits, and its own request can still be answered.
    assert_eq!(
        daemon.run_info(second.run_id()).await.state,
        pb::RunState::WaitingForApproval as i32
    );
    second.decide(&pending.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(second.finished().await.final_text, "written");
    browser.close().await;
}

#[tokio::test]
async fn an_approval_can_be_given_with_the_keyboard_alone() {
    let daemon = daemon().await;
    let (mut run, request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let browser = console_at(&daemon, "#/approvals").await;
    browser.wait_for(&approval_card(&request.approval_id)).await;
    let mut presses = 0;
    while browser.focused().await != "approve-once" {
        presses += 1;
        assert!(presses <= 40, "Tab never reached the approve button");
        browser.press(Key::Tab).await;
    }
    browser.press(Key::Enter).await;
    assert_eq!(run.finished().await.final_text, "written");
    browser.close().await;
}

#[tokio::test]
async fn a_run_is_cancelled_from_its_page() {
    let daemon = daemon().await;
    let (mut run, _request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let browser = console_at(&daemon, &format!("#/runs/{}", run.run_id())).await;
    // The run's events so far, the approval request among them.
    browser
        .wait_for("[data-testid=event][data-kind=approvalRequested]")
        .await;
    browser.save_screenshot("run").await;
    click(&browser, "[data-testid=cancel-run]").await;
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::Cancelled as i32);
    browser
        .wait_for("[data-testid=run-state][data-state=FINISHED]")
        .await;
    browser
        .wait_for("[data-testid=event][data-kind=runFinished]")
        .await;
    browser.close().await;
}

#[tokio::test]
async fn the_trace_waterfall_shows_every_span() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"final": "read it"}
    ]});
    let mut run = daemon
        .start_run(start(&workspace, &script, pb::ApprovalPolicy::Auto))
        .await;
    run.finished().await;
    let trace = daemon
        .agent()
        .await
        .get_trace(pb::GetTraceRequest {
            run_id: run.run_id().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(trace.spans.len() >= 6, "{:?}", trace.spans);

    let browser = console_at(&daemon, &format!("#/runs/{}/trace", run.run_id())).await;
    browser
        .wait_for_count("[data-testid=span]", trace.spans.len())
        .await;
    let shown = browser
        .eval("return [...document.querySelectorAll('[data-testid=span]')].map(s => s.dataset.spanId);")
        .await;
    let shown: Vec<String> = serde_json::from_value(shown).unwrap();
    let mut expected: Vec<String> = trace.spans.iter().map(|s| s.span_id.clone()).collect();
    let mut shown_sorted = shown.clone();
    shown_sorted.sort();
    expected.sort();
    assert_eq!(shown_sorted, expected, "each span once");
    for name in ["run", "step", "model", "tool"] {
        browser
            .wait_for(&format!("[data-testid=span][data-name={name}]"))
            .await;
    }
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('[data-testid=span].slowest').length;")
            .await,
        json!(1),
        "one span stands out as the slowest"
    );
    // A tool span opens onto its attributes.
    click(&browser, "[data-testid=span][data-name=tool] button").await;
    let attributes = text_of(&browser, "[data-testid=span-attrs]").await;
    assert!(attributes.contains("read_file"), "{attributes}");
    browser.save_screenshot("trace").await;
    browser.close().await;
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_right_one_stays_out_of_urls() {
    let daemon = TestDaemon::start(Default::default()).await;
    let browser = Browser::open(Viewport::DESKTOP).await;
    browser.sign_in(&daemon.endpoint, "not-the-token").await;
    let error = text_of(&browser, "[data-testid=login-error]").await;
    assert!(error.contains("not valid"), "{error}");
    browser.save_screenshot("sign-in-refused").await;
    assert_eq!(
        browser
            .eval("return sessionStorage.getItem('airlock.token');")
            .await,
        Value::Null,
        "a refused token is not kept"
    );

    browser.sign_in(&daemon.endpoint, &daemon.token).await;
    browser.wait_for("[data-testid=runs-end]").await;
    let kept = browser
        .eval("return [sessionStorage.getItem('airlock.token'), localStorage.length, document.cookie, location.href];")
        .await;
    assert_eq!(
        kept[0],
        json!(daemon.token),
        "the token is in session storage"
    );
    assert_eq!(kept[1], json!(0), "and nowhere that outlives the tab");
    assert_eq!(kept[2], json!(""));
    assert!(
        !kept[3].as_str().unwrap().contains(&daemon.token),
        "{}",
        kept[3]
    );
    browser.close().await;
}

/// A route taken while the signed-in console is still mounting is the page shown. The hash
/// is changed the moment the nav is in the DOM — a mutation observer runs before the page's
/// effects, which is when a `hashchange` used to find nobody listening (a CI run waited 90 s
/// on `#/evals` that way).
#[tokio::test]
async fn a_route_taken_while_the_console_mounts_is_followed() {
    let daemon = TestDaemon::start(Default::default()).await;
    let browser = Browser::open(Viewport::DESKTOP).await;
    browser
        .goto(&format!("{}/", daemon.endpoint))
        .await
        .expect("the console loads");
    browser.wait_for("#token").await;
    browser
        .eval(
            "new MutationObserver((_, observer) => {
               if (document.querySelector('[data-testid=approvals-count]')) {
                 observer.disconnect();
                 window.airlockMounting = document.querySelector('main#main')?.dataset.route;
                 location.hash = '#/tools';
               }
             }).observe(document.body, { childList: true, subtree: true });
             return true;",
        )
        .await;
    browser
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(&daemon.token)
        .await
        .unwrap();
    click(&browser, "[data-testid=login] button[type=submit]").await;
    browser
        .wait_until(
            "the route #/tools",
            "return document.querySelector('main#main')?.dataset.route === '#/tools';",
        )
        .await;
    // The hash did change before the shell listened: it rendered the runs list first.
    assert_eq!(
        browser.eval("return window.airlockMounting;").await,
        json!("#/runs")
    );
    browser.close().await;
}

#[tokio::test]
async fn a_tenants_console_never_sees_another_tenants_runs_or_approvals() {
    let tenants = TwoTenants::start().await;
    let daemon = &tenants.daemon;
    let start_as = |token: &'static str, tenant: &'static str| {
        let tenants = &tenants;
        async move {
            let mut run = RunStream::open(
                tenants.agent(token).await,
                pb::run_request::Request::Start(start(
                    &tenants.workspace(tenant),
                    &json!({"turns": [
                        {"tool_calls": [{"name": "write_file",
                                         "arguments": {"path": "notes.txt", "content": "x\n"}}]},
                        {"final": "done"}
                    ]}),
                    pb::ApprovalPolicy::Risky,
                )),
            )
            .await
            .unwrap();
            let request = run.approval_requested().await;
            (run, request)
        }
    };
    let (alice_run, alice_request) = start_as(ALICE, "alice").await;
    let (bob_run, bob_request) = start_as(BOB, "bob").await;

    let browser = Browser::open(Viewport::DESKTOP).await;
    browser.sign_in(&daemon.endpoint, ALICE).await;
    browser
        .wait_for(&run_row(alice_run.run_id(), "WAITING_FOR_APPROVAL"))
        .await;
    browser.wait_for("[data-testid=runs-end]").await;
    let rows = browser
        .eval("return [...document.querySelectorAll('[data-testid=run-row]')].map(r => r.dataset.runId);")
        .await;
    assert_eq!(rows, json!([alice_run.run_id()]), "only alice's run");

    browser
        .goto(&format!("{}/#/approvals", daemon.endpoint))
        .await
        .unwrap();
    browser
        .wait_for(&approval_card(&alice_request.approval_id))
        .await;
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('[data-testid=approval]').length;")
            .await,
        json!(1),
        "only alice's request"
    );
    let page = browser.eval("return document.body.textContent;").await;
    assert!(!page.as_str().unwrap().contains(&bob_request.approval_id));

    // Bob's run by its id: not found, and nothing of it shown.
    browser
        .goto(&format!("{}/#/runs/{}", daemon.endpoint, bob_run.run_id()))
        .await
        .unwrap();
    browser
        .wait_until(
            "a not-found message",
            "return [...document.querySelectorAll('[role=alert]')].some(e => /not found|no run/i.test(e.textContent));",
        )
        .await;
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('[data-testid=event]').length;")
            .await,
        json!(0)
    );
    browser.close().await;
}

/// Every page at a desktop's and at a phone's width, light and dark: no serious or critical
/// accessibility violation, nothing wider than the screen, and nothing loaded from anywhere
/// but the daemon.
#[tokio::test]
async fn every_page_is_accessible_fits_a_phone_and_loads_nothing_from_elsewhere() {
    let daemon = daemon().await;
    let (mut run, request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let tools = daemon
        .tools()
        .await
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tools;
    for (viewport, suffix) in [(Viewport::DESKTOP, ""), (Viewport::PHONE, "-phone")] {
        let browser = Browser::open(viewport).await;
        browser
            .goto(&format!("{}/", daemon.endpoint))
            .await
            .unwrap();
        browser.wait_for("[data-testid=login]").await;
        check_page(&browser, &format!("sign-in{suffix}")).await;
        browser.sign_in(&daemon.endpoint, &daemon.token).await;
        let pages = [
            (
                "runs",
                "#/runs".to_owned(),
                run_row(run.run_id(), "WAITING_FOR_APPROVAL"),
            ),
            (
                "run",
                format!("#/runs/{}", run.run_id()),
                "[data-testid=event][data-kind=approvalRequested]".to_owned(),
            ),
            (
                "trace",
                format!("#/runs/{}/trace", run.run_id()),
                "[data-testid=span]".to_owned(),
            ),
            (
                "approvals",
                "#/approvals".to_owned(),
                format!("{} [data-testid=diff]", approval_card(&request.approval_id)),
            ),
            (
                "tools",
                "#/tools".to_owned(),
                "[data-testid=tool][data-tool-name=write_file]".to_owned(),
            ),
        ];
        for (name, route, ready) in pages {
            browser
                .goto(&format!("{}/{route}", daemon.endpoint))
                .await
                .unwrap();
            browser.wait_for(&ready).await;
            check_page(&browser, &format!("{name}{suffix}")).await;
        }
        assert_eq!(
            browser
                .eval("return document.querySelectorAll('[data-testid=tool]').length;")
                .await,
            json!(tools.len()),
            "the catalog lists every tool"
        );
        browser.close().await;
    }
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    run.finished().await;
}

/// Makes the page use its dark palette whatever the browser prefers: each
/// `(prefers-color-scheme: dark)` rule of the console's stylesheet applies to all media
/// (through the CSSOM, which the daemon's CSP allows). Returns whether the page is dark.
const FORCE_DARK: &str = "window.__forcedDark = window.__forcedDark || [];
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      if (rule instanceof CSSMediaRule && /prefers-color-scheme:\\s*dark/.test(rule.media.mediaText)) {
        window.__forcedDark.push([rule, rule.media.mediaText]);
        rule.media.mediaText = 'all';
      }
    }
  }
  document.documentElement.style.colorScheme = 'dark';
  return window.__forcedDark.length > 0 && getComputedStyle(document.body).backgroundColor === 'rgb(15, 18, 23)';";

/// Undoes [`FORCE_DARK`].
const UNFORCE_DARK: &str =
    "for (const [rule, text] of window.__forcedDark || []) rule.media.mediaText = text;
  window.__forcedDark = [];
  document.documentElement.style.colorScheme = '';
  return true;";

/// The page as it is now, in the light palette and then in the dark one: no serious or
/// critical accessibility violation, nothing wider than the screen, nothing loaded from
/// anywhere but the daemon, one main landmark; a screenshot of each (`name`, `name-dark`).
pub(crate) async fn check_page(browser: &Browser, name: &str) {
    check_palette(browser, name).await;
    assert_eq!(
        browser.eval(FORCE_DARK).await,
        Value::Bool(true),
        "{name}: the dark palette applies"
    );
    check_palette(browser, &format!("{name}-dark")).await;
    browser.eval(UNFORCE_DARK).await;
}

async fn check_palette(browser: &Browser, name: &str) {
    let violations = browser.accessibility_violations().await;
    assert!(violations.is_empty(), "{name}: {violations:#?}");
    let fits = browser
        .eval("return document.documentElement.scrollWidth <= window.innerWidth;")
        .await;
    assert_eq!(fits, Value::Bool(true), "{name} scrolls sideways");
    let foreign = browser
        .eval(
            "return performance.getEntriesByType('resource').map(e => e.name)
                .filter(url => !url.startsWith(location.origin));",
        )
        .await;
    assert_eq!(foreign, json!([]), "{name} loaded from elsewhere");
    browser.save_screenshot(name).await;
    // One main landmark per page, whatever the route.
    assert_eq!(
        browser.find_all(Locator::Css("main")).await.unwrap().len(),
        1,
        "{name}"
    );
}

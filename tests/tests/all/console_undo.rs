//! The run page's undo and fork, its inline approvals, and the sign-in form's refusals, in a
//! real browser against a real daemon with scripted runs: revert a finished run to before a
//! step (a dry run first; a conflict shown and overridden only after a confirmation; a
//! conflict that appears between the dry run and the revert refused in words), fork a run at
//! a step into a copy of its workspace, answer a run's approval on its own page with a
//! countdown that never exceeds the timeout, and a token pasted with a typographic quote
//! refused before it is sent. Each result is checked on disk or through the API, not only in
//! the page; the dialogs are checked with axe at a desktop's and a phone's width, light and
//! dark, and for sideways scrolling.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::TestDaemon;
use airlock_tests::browser::{Browser, Viewport};
use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::{Value, json};

use crate::agent_approvals::{FIXED, daemon, resolutions, start, workspace, write_then_react};
use crate::console_browser::{check_page, console_at};

/// calc.py as `workspace` writes it, before any run.
const ORIGINAL: &str = "def mean(v):\n    return sum(v) / (len(v) - 1)\n";
/// calc.py after the second step.
const SECOND: &str = "def mean(v):\n    return sum(v) / max(len(v), 1)\n";

fn css_attr(value: &str) -> String {
    serde_json::to_string(value).unwrap()
}

fn write(content: &str) -> Value {
    json!({"name": "write_file", "arguments": {"path": "calc.py", "content": content}})
}

fn calc(workspace: &Path) -> String {
    std::fs::read_to_string(workspace.join("calc.py")).unwrap()
}

/// A finished run (policy AUTO: nothing asked) that wrote calc.py in two steps, with its
/// workspace and id.
async fn two_writes(daemon: &TestDaemon, name: &str) -> (PathBuf, String) {
    let workspace = workspace(daemon, name);
    let script = json!({"turns": [
        {"tool_calls": [write(FIXED)]},
        {"tool_calls": [write(SECOND)]},
        {"final": "written twice"}
    ]});
    let mut run = daemon
        .start_run(start(&workspace, &script, pb::ApprovalPolicy::Auto))
        .await;
    assert_eq!(run.finished().await.final_text, "written twice");
    assert_eq!(calc(&workspace), SECOND);
    (workspace, run.run_id().to_owned())
}

fn revert_button(step: u32) -> String {
    format!("[data-testid=revert-step][data-step='{step}']")
}

fn fork_button(step: u32) -> String {
    format!("[data-testid=fork-step][data-step='{step}']")
}

async fn click(browser: &Browser, css: &str) {
    browser.wait_for(css).await.click().await.unwrap();
}

async fn text_of(browser: &Browser, css: &str) -> String {
    browser.wait_for(css).await.text().await.unwrap()
}

async fn count(browser: &Browser, css: &str) -> usize {
    browser.find_all(Locator::Css(css)).await.unwrap().len()
}

async fn disabled(browser: &Browser, css: &str) -> bool {
    browser
        .eval(&format!(
            "return document.querySelector({}).disabled;",
            css_attr(css)
        ))
        .await
        == Value::Bool(true)
}

/// Presses Tab until the element with `data-testid` `testid` has the focus.
async fn tab_to(browser: &Browser, testid: &str) {
    let mut presses = 0;
    while browser.focused().await != testid {
        presses += 1;
        assert!(presses <= 40, "Tab never reached {testid}");
        browser.press(Key::Tab).await;
    }
}

/// Opens the revert dialog of `step` and waits for its dry run.
async fn open_revert(browser: &Browser, step: u32) {
    click(browser, &revert_button(step)).await;
    browser.wait_for("[data-testid=revert-plan]").await;
    assert_eq!(
        browser.eval("return document.activeElement.id;").await,
        json!("revert-title"),
        "the focus moved into the dialog"
    );
}

#[tokio::test]
async fn a_finished_run_is_reverted_to_before_a_step_from_its_page() {
    let daemon = daemon().await;
    let (workspace, run_id) = two_writes(&daemon, "w").await;
    let browser = console_at(&daemon, &format!("#/runs/{run_id}")).await;
    // Each step's change set, with its diff on request.
    click(&browser, "[data-testid=step-diffs][data-step='2']").await;
    // The two contents are read (ReadBlob) after the click: the diff shows when they come.
    browser
        .wait_until(
            "step 2's diff, with the line it added",
            "return [...document.querySelectorAll('[data-testid=step-diff-list] [data-testid=diff] td.add:not(.num)')]
               .some(e => e.textContent.includes('max(len(v), 1)'));",
        )
        .await;

    open_revert(&browser, 1).await;
    assert_eq!(
        browser
            .wait_for("[data-testid=revert-plan]")
            .await
            .attr("data-conflicts")
            .await
            .unwrap()
            .as_deref(),
        Some("0")
    );
    let restored = text_of(&browser, "[data-testid=revert-restored]").await;
    assert!(restored.contains("calc.py"), "{restored}");
    assert_eq!(count(&browser, "[data-testid=revert-force]").await, 0);
    // The dry run changed nothing.
    assert_eq!(calc(&workspace), SECOND);
    browser.save_screenshot("undo-revert-plan").await;

    // The revert itself, with the keyboard.
    tab_to(&browser, "revert-confirm").await;
    browser.press(Key::Enter).await;
    let done = text_of(&browser, "[data-testid=revert-done]").await;
    assert!(done.contains("calc.py"), "{done}");
    assert_eq!(
        calc(&workspace),
        ORIGINAL,
        "the file is back as before step 1"
    );

    // Escape closes the dialog and gives the focus back to the button that opened it.
    browser.press(Key::Escape).await;
    browser
        .wait_until(
            "the dialog closed",
            "return !document.querySelector('[data-testid=revert-dialog]');",
        )
        .await;
    assert_eq!(browser.focused().await, "revert-step");
    browser.close().await;
}

#[tokio::test]
async fn a_conflict_is_shown_and_only_a_confirmed_forced_revert_overrides_it() {
    let daemon = daemon().await;
    let (workspace, run_id) = two_writes(&daemon, "w").await;
    let browser = console_at(&daemon, &format!("#/runs/{run_id}")).await;

    // A dry run without conflicts; the file changes on disk before the revert is confirmed:
    // the daemon refuses it, the page says why and looks again.
    open_revert(&browser, 1).await;
    browser
        .wait_for("[data-testid=revert-plan][data-conflicts='0']")
        .await;
    std::fs::write(workspace.join("calc.py"), "edited by hand\n").unwrap();
    click(&browser, "[data-testid=revert-confirm]").await;
    let refused = text_of(&browser, "[data-testid=revert-refused]").await;
    assert!(refused.contains("calc.py"), "{refused}");
    browser
        .wait_for("[data-testid=revert-plan][data-conflicts='1']")
        .await;
    assert_eq!(calc(&workspace), "edited by hand\n", "nothing was reverted");

    // Closed and opened again: the dry run shows the conflict, named and highlighted.
    click(&browser, "[data-testid=dialog-close]").await;
    open_revert(&browser, 1).await;
    let conflicts = text_of(&browser, "[data-testid=revert-conflicts]").await;
    assert!(conflicts.contains("calc.py"), "{conflicts}");
    assert_eq!(
        count(&browser, "[data-testid=revert-confirm]").await,
        0,
        "no plain revert is offered"
    );
    assert!(disabled(&browser, "[data-testid=revert-force]").await);
    browser.save_screenshot("undo-revert-conflict").await;

    click(&browser, "[data-testid=revert-understand]").await;
    assert!(!disabled(&browser, "[data-testid=revert-force]").await);
    click(&browser, "[data-testid=revert-force]").await;
    browser.wait_for("[data-testid=revert-done]").await;
    assert_eq!(calc(&workspace), ORIGINAL, "the forced revert restored it");
    browser.close().await;
}

#[tokio::test]
async fn a_run_is_forked_at_a_step_into_a_copy_and_the_page_follows_the_new_run() {
    let daemon = daemon().await;
    let (workspace, run_id) = two_writes(&daemon, "w").await;
    let browser = console_at(&daemon, &format!("#/runs/{run_id}")).await;
    click(&browser, &fork_button(2)).await;
    browser.wait_for("[data-testid=fork-form]").await;
    if browser
        .eval("return document.querySelector('[data-testid=fork-copy]').checked;")
        .await
        != Value::Bool(true)
    {
        click(&browser, "[data-testid=fork-copy]").await;
    }
    click(&browser, "[data-testid=fork-submit]").await;
    let old_route = format!("#/runs/{run_id}");
    browser
        .wait_until(
            "the new run's page",
            &format!(
                "return location.hash.startsWith('#/runs/') && location.hash !== {};",
                css_attr(&old_route)
            ),
        )
        .await;
    let hash = browser.eval("return location.hash;").await;
    let new_id = hash
        .as_str()
        .unwrap()
        .trim_start_matches("#/runs/")
        .to_owned();

    // A new run, in a workspace of its own.
    let runs = daemon
        .agent()
        .await
        .list_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .runs;
    assert_eq!(runs.len(), 2, "{runs:?}");
    let fork = runs
        .iter()
        .find(|run| run.run_id == new_id)
        .unwrap_or_else(|| panic!("no run {new_id} in {runs:?}"));
    assert_ne!(fork.workspace, workspace.to_str().unwrap());
    assert!(Path::new(&fork.workspace).is_dir(), "{}", fork.workspace);
    // The page is the new run's (not the old one's, still there until the hash's change is
    // taken), and follows it to its end.
    browser
        .wait_until(
            "the new run's page in place",
            &format!(
                "return document.querySelector('main#main')?.dataset.route === {}
                   && !!document.querySelector('[data-testid=run-input]');",
                css_attr(&format!("#/runs/{new_id}"))
            ),
        )
        .await;
    browser
        .wait_for("[data-testid=run-state][data-state=FINISHED]")
        .await;
    browser
        .wait_for("[data-testid=event][data-kind=runFinished]")
        .await;
    assert_eq!(
        daemon.run_info(&new_id).await.state,
        pb::RunState::Finished as i32
    );
    assert_eq!(calc(&workspace), SECOND, "the original was left alone");
    browser.close().await;
}

/// "9m 59s left" → 599.
fn seconds_left(text: &str) -> u64 {
    text.trim()
        .trim_end_matches(" left")
        .split(' ')
        .map(|part| {
            let (n, unit) = part.split_at(part.len() - 1);
            let n: u64 = n
                .parse()
                .unwrap_or_else(|_| panic!("not a countdown: {text:?}"));
            match unit {
                "h" => n * 3600,
                "m" => n * 60,
                "s" => n,
                _ => panic!("not a countdown: {text:?}"),
            }
        })
        .sum()
}

#[tokio::test]
async fn a_runs_approval_is_answered_on_its_page_with_a_countdown_within_its_timeout() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let mut start = start(&workspace, &write_then_react(), pb::ApprovalPolicy::Risky);
    start.approval_timeout_ms = 600_000;
    let mut run = daemon.start_run(start).await;
    let request = run.approval_requested().await;

    // Every countdown text the page ever shows, from its first render on.
    let browser = console_at(&daemon, "").await;
    browser
        .eval(
            "window.__countdowns = [];
             new MutationObserver(() => {
               for (const e of document.querySelectorAll('[data-testid=run-approvals] [data-testid=deadline]'))
                 window.__countdowns.push(e.textContent);
             }).observe(document.body, {subtree: true, childList: true, characterData: true});
             return true;",
        )
        .await;
    let route = format!("#/runs/{}", run.run_id());
    browser
        .eval(&format!(
            "location.hash = {}; return true;",
            css_attr(&route)
        ))
        .await;
    let card = format!(
        "[data-testid=run-approvals] [data-testid=approval][data-approval-id={}]",
        css_attr(&request.approval_id)
    );
    browser.wait_for(&card).await;
    // The diff of the call, on the run's page.
    let added = browser
        .eval(&format!(
            "return [...document.querySelectorAll({})].map(e => e.textContent).join('\\n');",
            css_attr(&format!("{card} [data-testid=diff] td.add:not(.num)"))
        ))
        .await;
    assert!(
        added.as_str().unwrap().contains("return sum(v) / len(v)"),
        "{added}"
    );
    // A few ticks of the countdown.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let shown: Vec<String> =
        serde_json::from_value(browser.eval("return window.__countdowns;").await).unwrap();
    assert!(!shown.is_empty(), "no countdown shown");
    for text in &shown {
        let left = seconds_left(text);
        assert!(left <= 600, "{text:?} is more than the 10 min timeout");
        assert!(left >= 60, "{text:?}: the approval was asked moments ago");
    }
    browser.save_screenshot("undo-inline-approval").await;

    click(&browser, &format!("{card} [data-testid=approve-once]")).await;
    assert_eq!(run.finished().await.final_text, "written");
    assert_eq!(calc(&workspace), FIXED, "exactly the call approved ran");
    let resolved = resolutions(&run);
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].approval_id, request.approval_id);
    assert_eq!(resolved[0].decision, pb::Decision::ApproveOnce as i32);
    browser
        .wait_for("[data-testid=run-state][data-state=FINISHED]")
        .await;
    browser.close().await;
}

#[tokio::test]
async fn the_sign_in_form_says_why_it_asks_and_refuses_a_token_with_a_typographic_quote() {
    let daemon = daemon().await;
    let browser = Browser::open(Viewport::DESKTOP).await;
    browser
        .goto(&format!("{}/", daemon.endpoint))
        .await
        .unwrap();
    browser.wait_for("[data-testid=login]").await;
    // A tab without a token: the form says the token is kept per tab.
    let note = text_of(&browser, "[data-testid=login-note][data-why=new-tab]").await;
    assert!(note.contains("new tab"), "{note}");

    let input = browser.wait_for("#token").await;
    input
        .send_keys(&format!("\u{201c}{}\u{201d}", daemon.token))
        .await
        .unwrap();
    click(&browser, "[data-testid=login] button[type=submit]").await;
    let error = text_of(&browser, "[data-testid=login-error]").await;
    assert!(error.contains("\u{201c} (U+201C) at position 1"), "{error}");
    assert!(error.contains("without quotes"), "{error}");
    assert!(!error.contains("Headers"), "{error}");
    // The form stays, with what was pasted; nothing was kept.
    browser.wait_for("[data-testid=login]").await;
    assert_eq!(
        browser
            .eval("return document.querySelector('#token').value.length;")
            .await,
        json!(daemon.token.chars().count() + 2)
    );
    assert_eq!(
        browser
            .eval("return sessionStorage.getItem('airlock.token');")
            .await,
        Value::Null
    );

    // Whitespace around it goes silently.
    input.clear().await.unwrap();
    input
        .send_keys(&format!("  {}  ", daemon.token))
        .await
        .unwrap();
    click(&browser, "[data-testid=login] button[type=submit]").await;
    browser.wait_for("[data-testid=approvals-count]").await;
    assert_eq!(
        browser
            .eval("return sessionStorage.getItem('airlock.token');")
            .await,
        json!(daemon.token)
    );

    // Signed out on purpose: the form says so, not why a new tab asks.
    click(&browser, "header .who button").await;
    let note = text_of(&browser, "[data-testid=login-note]").await;
    assert_eq!(note.trim(), "Signed out.");
    browser.close().await;
}

#[tokio::test]
async fn the_revert_and_fork_dialogs_are_accessible_and_fit_a_phone_light_and_dark() {
    let daemon = daemon().await;
    let (workspace, run_id) = two_writes(&daemon, "w").await;
    // A conflict, so that its highlighted list and the confirmation are on the page.
    std::fs::write(workspace.join("calc.py"), "edited by hand\n").unwrap();
    for (viewport, suffix) in [(Viewport::DESKTOP, ""), (Viewport::PHONE, "-phone")] {
        let browser = Browser::open(viewport).await;
        browser.sign_in(&daemon.endpoint, &daemon.token).await;
        browser.wait_for("[data-testid=approvals-count]").await;
        browser
            .goto(&format!("{}/#/runs/{run_id}", daemon.endpoint))
            .await
            .unwrap();
        click(&browser, "[data-testid=step-diffs][data-step='1']").await;
        browser
            .wait_for("[data-testid=step-diff-list] [data-testid=diff]")
            .await;
        open_revert(&browser, 1).await;
        browser
            .wait_for("[data-testid=revert-plan][data-conflicts='1']")
            .await;
        check_page(&browser, &format!("undo-revert{suffix}")).await;
        click(&browser, "[data-testid=dialog-close]").await;
        click(&browser, &fork_button(2)).await;
        browser.wait_for("[data-testid=fork-form]").await;
        // Each in the light and the dark palette.
        check_page(&browser, &format!("undo-fork{suffix}")).await;
        browser.press(Key::Escape).await;
        browser
            .wait_until(
                "the fork dialog closed",
                "return !document.querySelector('[data-testid=fork-dialog]');",
            )
            .await;
        browser.close().await;
    }
    assert_eq!(
        calc(&workspace),
        "edited by hand\n",
        "looking changed nothing"
    );
}

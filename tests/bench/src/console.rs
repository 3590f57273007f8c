//! Section 11, the web console (issue 21): how soon a person sees the first screenful of
//! rows of the runs list with 10,000 runs and of a run page with 5,000 events, in headless
//! Chromium, from navigation start to the rows being in the DOM (the mark the page sets then,
//! `airlock:rows` / `airlock:events`); against the same pages of a daemon with 10 runs and a
//! run of a few events, measured in the same run. Then both long lists are scrolled to their
//! end: the runs list must fetch its pages as the scroll reaches them, and neither list may
//! hold more than a screenful's worth of rows in the DOM at once.
//!
//! The runs are real: scripted runs through the daemon's own `Run` stream, each recorded in
//! its store as any other.

use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::browser::{Browser, Viewport};
use anyhow::{Context, bail};
use futures::StreamExt;
use pb::agent_client::AgentClient;
use serde_json::{Value, json};

use crate::Bench;
use crate::daemon::{Airlockd, AuthChannel};
use crate::fixtures::ECHO;
use crate::report::{Check, Report};
use crate::runs::{self, RunStream};
use crate::stats::Samples;

const SECTION: &str = "11 console";

/// The first screenful must be there within this (the bar).
const FIRST_SCREENFUL: Duration = Duration::from_secs(1);

/// Runs seeded at once: enough to keep both cores busy without queueing in the daemon.
const SEEDING_CONCURRENCY: usize = 8;

/// More rows than this in the DOM at once means a list rendered what no one can see: a
/// 900-pixel window shows about 30.
const MAX_ROWS_IN_DOM: u64 = 300;

/// The daemons' ceilings, raised so one run may take the thousand steps that make 5,000
/// events.
const LONG_RUNS: &str = "[runs]\nmax_steps = 5000\nmax_tool_calls = 5000\nmax_idle_steps = 5000\n\
    max_repeated_calls = 5000\nwall_time_ms = 3600000\n";

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let many_runs = bench.count(10_000, 120);
    let many_events = bench.count(5_000, 150) as u64;
    let loads = bench.count(10, 2);

    let mut spec = bench.daemon_spec("console-large-")?;
    spec.config_tables = LONG_RUNS.to_owned();
    let large = Airlockd::start(&spec).await?;
    let mut spec = bench.daemon_spec("console-small-")?;
    spec.config_tables = LONG_RUNS.to_owned();
    let small = Airlockd::start(&spec).await?;

    eprintln!("{SECTION}: seeding {many_runs} runs and a run of {many_events} events");
    let long_run = long_run(bench, &large, many_events).await?;
    seed_runs(bench, &large, many_runs - 1).await?;
    let short_run = run_of_steps(bench, &small, 2).await?;
    seed_runs(bench, &small, 9).await?;

    eprintln!("{SECTION}: {loads} loads of each page in headless Chromium");
    let browser = Browser::open(Viewport::DESKTOP).await;
    let pages = [
        (
            "runs-large",
            format!("runs list, {many_runs} runs: first screenful of rows"),
            &large,
            "#/runs".to_owned(),
            "airlock:rows",
        ),
        (
            "runs-small",
            "runs list, 10 runs: first screenful of rows".to_owned(),
            &small,
            "#/runs".to_owned(),
            "airlock:rows",
        ),
        (
            "run-large",
            format!("run page, {} events: first screenful", long_run.last_seq),
            &large,
            format!("#/runs/{}", long_run.run_id),
            "airlock:events",
        ),
        (
            "run-small",
            format!("run page, {} events: first screenful", short_run.last_seq),
            &small,
            format!("#/runs/{}", short_run.run_id),
            "airlock:events",
        ),
    ];
    let mut signed_in = Vec::new();
    for (key, case, daemon, route, mark) in &pages {
        if !signed_in.contains(&daemon.endpoint) {
            browser.sign_in(&daemon.endpoint, daemon.token()).await;
            browser.wait_for("[data-testid=runs]").await;
            signed_in.push(daemon.endpoint.clone());
        }
        let mut samples = Vec::new();
        for _ in 0..loads {
            samples.push(first_screenful(&browser, &daemon.endpoint, route, mark).await?);
        }
        report.measured(SECTION, key, case, Samples::sequential(samples));
    }
    report.compare("runs-large", "runs-small");
    report.compare("run-large", "run-small");
    report.target(
        "runs list of 10,000 runs: first screenful in under a second",
        Check::Latency {
            ours: "runs-large".into(),
            max: FIRST_SCREENFUL,
        },
    );
    report.target(
        "run page of 5,000 events: first screenful in under a second",
        Check::Latency {
            ours: "run-large".into(),
            max: FIRST_SCREENFUL,
        },
    );

    let runs_scroll = scroll_runs_to_end(&browser, &large.endpoint).await?;
    report.target(
        "runs list scrolls to its end a page at a time, few rows in the DOM",
        Check::Verdict {
            met: runs_scroll.pages > 1 && runs_scroll.most_rows <= MAX_ROWS_IN_DOM,
            measured: format!(
                "{} pages fetched on the way down, at most {} rows in the DOM",
                runs_scroll.pages, runs_scroll.most_rows
            ),
        },
    );
    let most_events = scroll_events_to_end(&browser, &large.endpoint, &long_run).await?;
    report.target(
        "run page scrolls to its last event, few rows in the DOM",
        Check::Verdict {
            met: most_events <= MAX_ROWS_IN_DOM,
            measured: format!(
                "last event (seq {}) reached, at most {most_events} rows in the DOM",
                long_run.last_seq
            ),
        },
    );
    browser.close().await;
    large.stop().await?;
    small.stop().await
}

/// Starts `count` one-step runs, `SEEDING_CONCURRENCY` at a time, each to its end.
async fn seed_runs(bench: &Bench, daemon: &Airlockd, count: usize) -> anyhow::Result<()> {
    let channel = daemon.channel().await?;
    let start = runs::start(&bench.fixtures.workspace, ECHO, 0, pb::ApprovalPolicy::Auto);
    let mut done = 0;
    let mut runs = futures::stream::iter(0..count)
        .map(|_| {
            let channel = channel.clone();
            let start = start.clone();
            async move { RunStream::open(channel, start).await?.follow(1).await }
        })
        .buffer_unordered(SEEDING_CONCURRENCY);
    while let Some(run) = runs.next().await {
        run?;
        done += 1;
        if done % 1000 == 0 {
            eprintln!("  {done} of {count} runs");
        }
    }
    Ok(())
}

/// A finished run and its last event.
struct RecordedRun {
    run_id: String,
    last_seq: u64,
}

/// A run of at least `events` events: a probe run tells how many events a tool step makes.
async fn long_run(bench: &Bench, daemon: &Airlockd, events: u64) -> anyhow::Result<RecordedRun> {
    // Four tool steps and the answer: five steps.
    let probe = run_of_steps(bench, daemon, 4).await?;
    let per_step = (probe.last_seq / 5).max(1);
    let steps = u32::try_from(events.div_ceil(per_step))?;
    let run = run_of_steps(bench, daemon, steps).await?;
    if run.last_seq < events {
        bail!(
            "a run of {steps} tool steps made {} events, not {events}",
            run.last_seq
        );
    }
    Ok(run)
}

async fn run_of_steps(
    bench: &Bench,
    daemon: &Airlockd,
    tool_steps: u32,
) -> anyhow::Result<RecordedRun> {
    let channel = daemon.channel().await?;
    let start = runs::start(
        &bench.fixtures.workspace,
        ECHO,
        tool_steps,
        pb::ApprovalPolicy::Auto,
    );
    let times = RunStream::open(channel.clone(), start)
        .await?
        .follow(tool_steps + 1)
        .await?;
    let info = run_info(&channel, &times.run_id).await?;
    Ok(RecordedRun {
        run_id: times.run_id,
        last_seq: info.last_seq,
    })
}

async fn run_info(channel: &AuthChannel, run_id: &str) -> anyhow::Result<pb::RunInfo> {
    Ok(AgentClient::new(channel.clone())
        .get_run(pb::GetRunRequest {
            run_id: run_id.into(),
        })
        .await?
        .into_inner())
}

/// Loads `route` as a new document and reads when the page marked its first screenful.
async fn first_screenful(
    browser: &Browser,
    base: &str,
    route: &str,
    mark: &str,
) -> anyhow::Result<Duration> {
    // A new document each time: a hash change alone would keep the page (and its data).
    browser.goto("about:blank").await?;
    browser.goto(&format!("{base}/{route}")).await?;
    let script = format!(
        "return performance.getEntriesByName({})[0]?.startTime ?? null;",
        json!(mark)
    );
    let started = std::time::Instant::now();
    loop {
        if let Value::Number(ms) = browser.eval(&script).await {
            let ms = ms.as_f64().context("a time in milliseconds")?;
            return Ok(Duration::from_secs_f64(ms / 1000.0));
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("{route} never marked `{mark}`");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What scrolling the runs list to its end took.
struct Scrolled {
    /// `ListRuns` calls made while scrolling (the first page's excluded).
    pages: u64,
    /// The most rows the DOM held at any point.
    most_rows: u64,
}

/// Scrolls the scrollable ancestor of `list` (or the page) a screen further, and reports how
/// many `rows` the DOM holds then.
const SCROLL_STEP: &str = "
    const [list, rows] = arguments;
    let box = document.querySelector(list);
    while (box && box !== document.body && box.scrollHeight <= box.clientHeight + 1) box = box.parentElement;
    const target = (!box || box === document.body) ? document.scrollingElement : box;
    target.scrollTop = target.scrollTop + target.clientHeight;
    return document.querySelectorAll(rows).length;";

async fn scroll_runs_to_end(browser: &Browser, base: &str) -> anyhow::Result<Scrolled> {
    browser.goto("about:blank").await?;
    browser.goto(&format!("{base}/#/runs")).await?;
    browser.wait_for("[data-testid=run-row]").await;
    let list_calls = "return performance.getEntriesByType('resource')
        .filter(e => e.name.endsWith('/airlock.v1.Agent/ListRuns')).length;";
    let before = browser.eval(list_calls).await.as_u64().unwrap_or(0);
    let most_rows = scroll_until(
        browser,
        "[data-testid=runs]",
        "[data-testid=run-row]",
        "return !!document.querySelector('[data-testid=runs-end]');",
    )
    .await
    .context("the runs list never reached its end")?;
    let after = browser.eval(list_calls).await.as_u64().unwrap_or(0);
    Ok(Scrolled {
        pages: after.saturating_sub(before),
        most_rows,
    })
}

/// Scrolls a run page to its last event; the most rows the DOM held on the way.
async fn scroll_events_to_end(
    browser: &Browser,
    base: &str,
    run: &RecordedRun,
) -> anyhow::Result<u64> {
    browser.goto("about:blank").await?;
    browser
        .goto(&format!("{base}/#/runs/{}", run.run_id))
        .await?;
    browser.wait_for("[data-testid=event]").await;
    let last = format!(
        "return !!document.querySelector('[data-testid=event][data-seq=\"{}\"]');",
        run.last_seq
    );
    scroll_until(
        browser,
        "[data-testid=events]",
        "[data-testid=event]",
        &last,
    )
    .await
    .context("the run page never showed its last event")
}

/// Scrolls `list` a screen at a time until `done` (a script) is true; the most `rows` the
/// DOM held on the way.
async fn scroll_until(
    browser: &Browser,
    list: &str,
    rows: &str,
    done: &str,
) -> anyhow::Result<u64> {
    let mut most_rows = 0;
    let started = std::time::Instant::now();
    loop {
        let shown = browser
            .execute(SCROLL_STEP, vec![json!(list), json!(rows)])
            .await?
            .as_u64()
            .unwrap_or(0);
        most_rows = most_rows.max(shown);
        if browser.eval(done).await == Value::Bool(true) {
            return Ok(most_rows);
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("not there after five minutes of scrolling");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

//! A real browser for the console's tests and benchmark: Debian's `chromium`, headless,
//! driven over WebDriver by its `chromedriver` (`fantoccini`), one fresh profile per browser.
//!
//! Both come from Debian (`scripts/console.sh` installs them); a missing one is a panic that
//! says how to install it, never a skipped test. At most [`MAX_BROWSERS`] run at once, so a
//! 2-core machine running the whole suite is not swamped by renderers — and so a test holds
//! one browser at a time (closing one before it opens the next): a test holding one and
//! waiting for a second would wait for itself.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::elements::Element;
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::repo_root;

/// Browsers alive at once: each is several processes and, while a page renders or axe
/// checks it, a whole core. With two of them (and some 35 browser tests) the rest of the suite
/// on a 2-core machine starved: a fleet test's 5 s database deadline and a page's own wait
/// both ran out in CI. One at a time keeps a core for everything else.
const MAX_BROWSERS: usize = 1;

/// How long a page has to show what a test waits for: a bound on liveness, never a speed
/// check (a passing wait ends as soon as the page shows it). Generous: the suite runs browsers
/// beside daemons, sandboxes and registry installs on two cores, and a console reading a page
/// of 2,000 of a 100,001-change set took over 30 s there once.
const PAGE_WAIT: Duration = Duration::from_secs(90);

static BROWSERS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(MAX_BROWSERS));

/// What the browser's window is.
#[derive(Debug, Clone, Copy)]
pub enum Viewport {
    /// A desktop window.
    Desktop { width: u32, height: u32 },
    /// A phone, emulated by Chromium: this CSS width, touch, a 3× display.
    Phone { width: u32, height: u32 },
}

impl Viewport {
    pub const DESKTOP: Viewport = Viewport::Desktop {
        width: 1280,
        height: 900,
    };
    /// An iPhone 14's CSS viewport.
    pub const PHONE: Viewport = Viewport::Phone {
        width: 390,
        height: 844,
    };
}

/// A headless Chromium session, ended (with its driver) when dropped.
pub struct Browser {
    client: Client,
    driver: Child,
    _profile: TempDir,
    _permit: SemaphorePermit<'static>,
}

impl std::ops::Deref for Browser {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Browser {
    pub async fn open(viewport: Viewport) -> Browser {
        let permit = BROWSERS
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let chromium = installed("/usr/bin/chromium");
        let chromedriver = installed("/usr/bin/chromedriver");
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("a profile dir");
        let mut args = vec![
            "--headless=new".to_owned(),
            // Root cannot use Chromium's own sandbox; the browser only ever loads the test
            // daemon's pages.
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            // Nothing but the daemon on the network: no updates, sync, or field trials.
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-extensions".to_owned(),
            "--no-first-run".to_owned(),
            "--no-default-browser-check".to_owned(),
            "--password-store=basic".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut options = json!({"binary": chromium});
        match viewport {
            Viewport::Desktop { width, height } => {
                args.push(format!("--window-size={width},{height}"));
            }
            Viewport::Phone { width, height } => {
                options["mobileEmulation"] = json!({
                    "deviceMetrics": {"width": width, "height": height, "pixelRatio": 3.0, "touch": true}
                });
            }
        }
        options["args"] = json!(args);
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), options);
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                // chromedriver is still starting.
                Err(_) if started.elapsed() < Duration::from_secs(20) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("chromedriver on {url} gave no session: {err}"),
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
            _permit: permit,
        }
    }

    /// Opens the console at `base` (`http://127.0.0.1:PORT`) and signs in with `token`,
    /// typed into the sign-in form as a person would paste it.
    pub async fn sign_in(&self, base: &str, token: &str) {
        self.goto(&format!("{base}/"))
            .await
            .expect("the console loads");
        let input = self.wait_for("#token").await;
        input.send_keys(token).await.expect("types the token");
        self.find(Locator::Css("[data-testid=login] button[type=submit]"))
            .await
            .expect("a sign-in button")
            .click()
            .await
            .expect("signs in");
    }

    /// The first element matching `css`, once there is one.
    pub async fn wait_for(&self, css: &str) -> Element {
        self.wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|err| panic!("no `{css}` on the page within {PAGE_WAIT:?}: {err}"))
    }

    /// Waits until `script` (a function body; `return` a value) returns true.
    pub async fn wait_until(&self, what: &str, script: &str) {
        let started = Instant::now();
        loop {
            let value = self.execute(script, vec![]).await;
            if matches!(value, Ok(Value::Bool(true))) {
                return;
            }
            assert!(
                started.elapsed() < PAGE_WAIT,
                "the page never showed {what} within {PAGE_WAIT:?} (last: {value:?})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the page has at least `count` elements matching `css`.
    pub async fn wait_for_count(&self, css: &str, count: usize) {
        let script = format!(
            "return document.querySelectorAll({}).length >= {count};",
            json!(css)
        );
        self.wait_until(&format!("{count} × `{css}`"), &script)
            .await;
    }

    /// Presses and releases `key` on whatever has the focus, as a keyboard does.
    pub async fn press(&self, key: Key) {
        let value: char = key.into();
        let actions = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value })
            .then(KeyAction::Up { value });
        self.perform_actions(actions)
            .await
            .expect("the key is pressed");
    }

    /// The `data-testid` of the focused element (empty when it has none).
    pub async fn focused(&self) -> String {
        self.eval("return document.activeElement?.dataset?.testid ?? '';")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A script's value (a function body that `return`s it).
    pub async fn eval(&self, script: &str) -> Value {
        self.execute(script, vec![])
            .await
            .unwrap_or_else(|err| panic!("the script failed: {err}\n{script}"))
    }

    /// The serious and critical accessibility violations axe-core finds on the page as it is
    /// now: `rule: help (nodes)` lines, empty when there are none.
    pub async fn accessibility_violations(&self) -> Vec<String> {
        let axe = repo_root().join("console/node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&axe).unwrap_or_else(|err| {
            panic!(
                "cannot read {}: {err}; install the console's packages with console/build.sh \
                 (scripts/test.sh does)",
                axe.display()
            )
        });
        self.execute(&format!("{source}\nreturn true;"), vec![])
            .await
            .expect("axe-core loads");
        let found = self
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, {resultTypes: ['violations']}).then(result => done(
                   result.violations
                     .filter(v => v.impact === 'serious' || v.impact === 'critical')
                     .map(v => `${v.id} (${v.impact}): ${v.help} — ` +
                        v.nodes.map(n => n.target.join(' ')).join(', '))));",
                vec![],
            )
            .await
            .expect("axe-core runs");
        serde_json::from_value(found).expect("a list of strings")
    }

    /// Saves the page as `target/console-screenshots/<name>.png`, the tests' artifacts.
    pub async fn save_screenshot(&self, name: &str) -> PathBuf {
        let png = self.screenshot().await.expect("a screenshot");
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).expect("the screenshots dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("saves the screenshot");
        path
    }

    /// Ends the session and the driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
    }
}

/// Where the tests leave their screenshots: `<target dir>/console-screenshots`.
fn screenshots_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("console-screenshots")
}

fn installed(path: &str) -> &str {
    assert!(
        std::path::Path::new(path).is_file(),
        "{path} is missing: the console's browser tests need Debian's chromium and \
         chromium-driver (scripts/console.sh --install-only installs them)"
    );
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

//! The release `airlockd` as a separate process: started on an ephemeral loopback port with
//! its own state directory, measured from outside (its resident memory is its own, not the
//! benchmark client's), and killed when dropped.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// How long a daemon may take to serve: compiling every module from an empty cache on a
/// loaded 2-core machine takes seconds, not minutes.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Log lines kept for the error message of a daemon that fails.
const LOG_LINES_KEPT: usize = 40;

/// Where and how to start a daemon.
#[derive(Debug, Clone)]
pub struct DaemonSpec {
    pub binary: PathBuf,
    pub tools_dirs: Vec<PathBuf>,
    pub profiles_dir: PathBuf,
    pub workspace_root: PathBuf,
    /// Its store and the process engine's files; fresh for each daemon.
    pub state_dir: PathBuf,
    /// Compiled modules; shared between daemons to measure a warm start.
    pub module_cache_dir: PathBuf,
    /// TOML tables added to the configuration (section 8's `[providers]`); usually empty.
    pub config_tables: String,
}

/// Runs and executions the bench's tenant may have at once: the scale section keeps ten
/// thousand runs waiting, far above a tenant's default cap.
const BENCH_TENANT_CAP: u32 = 20_000;

/// Where the bench tenant's token is kept, beside the daemon's own state.
fn bench_token_file(spec: &DaemonSpec) -> PathBuf {
    spec.state_dir.join("bench-token")
}

/// Writes a fresh random token, private to its owner as the daemon demands, and returns it.
fn write_bench_token(path: &std::path::Path) -> anyhow::Result<String> {
    use std::io::{Read as _, Write as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(token.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

/// A connection that sends the bench tenant's token with every call.
pub type AuthChannel = InterceptedService<Channel, Bearer>;

/// Adds `authorization: Bearer <token>` to each request.
#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

pub struct Airlockd {
    child: tokio::process::Child,
    pid: u32,
    pub endpoint: String,
    /// The bench tenant's token, as the `authorization` metadata and as itself.
    token: Bearer,
    token_text: String,
    /// When the process was spawned.
    pub spawned: Instant,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Airlockd {
    /// Starts the daemon and waits until it logs that it serves.
    pub async fn start(spec: &DaemonSpec) -> anyhow::Result<Airlockd> {
        std::fs::create_dir_all(&spec.state_dir)?;
        let token = write_bench_token(&bench_token_file(spec))?;
        let config = spec.state_dir.join("airlockd.toml");
        std::fs::write(&config, config_toml(spec)?)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let spawned = Instant::now();
        let mut child = tokio::process::Command::new(&spec.binary)
            .arg("--config")
            .arg(&config)
            .current_dir(&spec.state_dir)
            // Logging as a user's daemon logs: its own default filter.
            .env_remove("AIRLOCK_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", spec.binary.display()))?;
        let pid = child.id().context("the daemon exited at once")?;
        let stderr = child.stderr.take().context("the daemon's stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let keep = |log: &Mutex<VecDeque<String>>, line: String| {
            let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
            if log.len() == LOG_LINES_KEPT {
                log.pop_front();
            }
            log.push_back(line);
        };
        let endpoint = loop {
            let line = tokio::time::timeout(START_TIMEOUT, lines.next_line())
                .await
                .context("airlockd did not serve within two minutes")??;
            let Some(line) = line else {
                bail!("airlockd exited before serving:\n{}", tail(&log));
            };
            let endpoint = serving_address(&line).map(|address| format!("http://{address}"));
            keep(&log, line);
            if let Some(endpoint) = endpoint {
                break endpoint;
            }
        };
        let collected = log.clone();
        // The pipe must be drained for the daemon's whole life, or its logging blocks.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep(&collected, line);
            }
        });
        let bearer = Bearer(
            format!("Bearer {token}")
                .parse()
                .context("the bench token is not ASCII")?,
        );
        Ok(Airlockd {
            child,
            pid,
            endpoint,
            token: bearer,
            token_text: token,
            spawned,
            log,
        })
    }

    /// The bench tenant's access token (what a person pastes into the console).
    pub fn token(&self) -> &str {
        &self.token_text
    }

    /// A new HTTP/2 connection to the daemon.
    pub async fn channel(&self) -> anyhow::Result<AuthChannel> {
        let channel = Endpoint::from_shared(self.endpoint.clone())?
            .tcp_nodelay(true)
            .connect()
            .await
            .with_context(|| format!("cannot connect to airlockd at {}", self.endpoint))?;
        Ok(InterceptedService::new(channel, self.token.clone()))
    }

    /// The daemon's resident memory (VmRSS), in bytes.
    pub fn rss_bytes(&self) -> anyhow::Result<u64> {
        rss_of(&format!("/proc/{}/status", self.pid))
    }

    /// Waits until the daemon has used no tick of CPU time (the kernel counts it in ticks of
    /// 10 ms here) for a tenth of a second, or `longest` has passed: work a section's last
    /// answer left behind (a finished run's last checkpoint is written after its end is told)
    /// is done before the next measurement. Whether it settled.
    pub async fn settle(&self, longest: Duration) -> anyhow::Result<bool> {
        const QUIET: Duration = Duration::from_millis(100);
        let started = Instant::now();
        let mut before = cpu_time_of(self.pid)?;
        while started.elapsed() < longest {
            tokio::time::sleep(QUIET).await;
            let now = cpu_time_of(self.pid)?;
            if now == before {
                return Ok(true);
            }
            before = now;
        }
        Ok(false)
    }

    /// The processes the daemon started and their proportional memory (each shared page
    /// split among its sharers, so a hundred copies of one interpreter are not counted as a
    /// hundred interpreters).
    pub fn descendants(&self) -> anyhow::Result<Descendants> {
        descendants_of(self.pid)
    }

    /// The last lines the daemon logged.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// Kills the daemon and waits until it is gone.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        crate::idle::before_killing(self.pid)?;
        self.child.start_kill().context("cannot kill airlockd")?;
        self.child
            .wait()
            .await
            .context("cannot wait for airlockd")?;
        Ok(())
    }
}

fn tail(log: &Mutex<VecDeque<String>>) -> String {
    let log = log.lock().unwrap_or_else(PoisonError::into_inner);
    log.iter().cloned().collect::<Vec<_>>().join("\n")
}

/// The address in the daemon's `airlockd serving ... listen=Some(ADDR)` line.
fn serving_address(line: &str) -> Option<&str> {
    if !line.contains("airlockd serving") {
        return None;
    }
    line.split("listen=Some(").nth(1)?.split(')').next()
}

/// What [`Airlockd::descendants`] found.
#[derive(Debug, Clone, Default)]
pub struct Descendants {
    /// Every process under the daemon.
    pub pids: std::collections::BTreeSet<i32>,
    /// The summed `Pss` of those running another program than the daemon's, in bytes: the
    /// daemon's own helpers (its deadline keeper shares its memory) are the daemon's.
    pub pss_bytes: u64,
}

fn descendants_of(root: u32) -> anyhow::Result<Descendants> {
    let pids = crate::idle::descendants(root)?;
    let daemon = std::fs::read_link(format!("/proc/{root}/exe"))
        .with_context(|| format!("cannot read the program of process {root}"))?;
    let mut pss_bytes = 0;
    for pid in &pids {
        let read = std::fs::read_link(format!("/proc/{pid}/exe")).and_then(|program| {
            let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
            Ok((program, rollup))
        });
        match read {
            Ok((program, _)) if program == daemon => {}
            Ok((_, rollup)) => {
                pss_bytes += kib_field(&rollup, "Pss:")
                    .with_context(|| format!("process {pid}'s smaps_rollup has no Pss"))?;
            }
            // It ended between the listing and the read.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("cannot read process {pid}")),
        }
    }
    Ok(Descendants {
        pids: pids.into_iter().collect(),
        pss_bytes,
    })
}

/// A `Name:   N kB` field of a `/proc` file, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `VmRSS` of a `/proc/<pid>/status` file, in bytes.
pub fn rss_of(status: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(status).with_context(|| format!("cannot read {status}"))?;
    parse_vm_rss(&text).with_context(|| format!("{status} has no VmRSS line"))
}

/// The CPU time process `pid` has used, its threads' together (utime and stime, which the
/// kernel counts in ticks of its clock, 10 ms here).
fn cpu_time_of(pid: u32) -> anyhow::Result<Duration> {
    let stat = procfs::process::Process::new(i32::try_from(pid)?)?.stat()?;
    let ticks = stat.utime + stat.stime;
    Ok(Duration::from_millis(
        ticks * 1000 / procfs::ticks_per_second().max(1),
    ))
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    kib_field(status, "VmRSS:")
}

fn config_toml(spec: &DaemonSpec) -> anyhow::Result<String> {
    let path = |path: &Path| -> anyhow::Result<String> {
        let text = path
            .to_str()
            .with_context(|| format!("{} is not UTF-8", path.display()))?;
        Ok(serde_json::to_string(text)?)
    };
    let tools = spec
        .tools_dirs
        .iter()
        .map(|dir| path(dir))
        .collect::<anyhow::Result<Vec<_>>>()?
        .join(", ");
    Ok(format!(
        "listen = \"127.0.0.1:0\"\ntools_dirs = [{tools}]\nprofiles_dir = {}\nstate_dir = {}\n\
         module_cache_dir = {}\nworkspace_roots = [{}]\n\
         [[auth.tenants]]\nname = \"bench\"\ntoken_file = {}\napprovals = \"own\"\n\
         max_concurrent_runs = {BENCH_TENANT_CAP}\nmax_concurrent_executions = {BENCH_TENANT_CAP}\n",
        path(&spec.profiles_dir)?,
        path(&spec.state_dir)?,
        path(&spec.module_cache_dir)?,
        path(&spec.workspace_root)?,
        path(&bench_token_file(spec))?,
    ) + &spec.config_tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_serving_address() {
        let line = "2026-01-01T00:00:00Z  INFO airlock_daemon::daemon: airlockd serving \
                    listen=Some(127.0.0.1:40123) tools=4 resumed=0 refused=0 roots=[\"/w\"]";
        assert_eq!(serving_address(line), Some("127.0.0.1:40123"));
        assert_eq!(serving_address("INFO module ready listen=Some(x)"), None);
    }

    #[test]
    fn reads_resident_memory() {
        let status = "Name:\tairlockd\nVmPeak:\t  9000 kB\nVmRSS:\t   12345 kB\nThreads:\t4\n";
        assert_eq!(parse_vm_rss(status), Some(12345 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
        assert!(rss_of("/proc/self/status").is_ok_and(|rss| rss > 0));
    }

    #[test]
    fn finds_a_processs_descendants_and_their_memory() {
        // A shell with a child of its own (not its last command, so not exec'd).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5; :"])
            .spawn()
            .expect("sh runs");
        let pid = child.id();
        let mut found = descendants_of(pid).expect("/proc is readable");
        for _ in 0..100 {
            if !found.pids.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = descendants_of(pid).expect("/proc is readable");
        }
        let mine = descendants_of(std::process::id()).expect("/proc is readable");
        child.kill().expect("sh is killed");
        child.wait().expect("sh is reaped");
        assert_eq!(found.pids.len(), 1, "the sleep under sh: {found:?}");
        assert!(found.pss_bytes > 0, "{found:?}");
        assert!(
            mine.pids.len() >= 2,
            "sh and its sleep under this test: {mine:?}"
        );
    }

    #[test]
    fn the_config_quotes_paths() {
        let spec = DaemonSpec {
            binary: "/bin/airlockd".into(),
            tools_dirs: vec!["/t/a".into(), "/t/b \"q\"".into()],
            profiles_dir: "/p".into(),
            workspace_root: "/w".into(),
            state_dir: "/s".into(),
            module_cache_dir: "/m".into(),
            config_tables: "[providers]\nstream = false\n".into(),
        };
        let toml = config_toml(&spec).expect("UTF-8 paths");
        assert!(toml.contains("tools_dirs = [\"/t/a\", \"/t/b \\\"q\\\"\"]"));
        assert!(toml.contains("module_cache_dir = \"/m\""));
        assert!(toml.ends_with("[providers]\nstream = false\n"), "{toml}");
    }
}

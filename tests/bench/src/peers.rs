//! The peers: programs run once per call the way a user would run them without airlock
//! (`wasmtime run`, a bare spawn, `unshare`, `bwrap`). Each call is a fork/exec from this
//! process, waited for, and checked, so a peer that fails is an error rather than a fast
//! figure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// One way of running a program: argv, working directory, stdin, and what stdout must hold.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
    /// stdout must contain this.
    pub expect: String,
    /// Lines stdout must have; 0 checks nothing beyond `expect`.
    pub lines: usize,
    /// Exit code expected.
    pub exit_code: i32,
}

impl Invocation {
    pub fn new(argv: Vec<String>, cwd: &Path) -> Invocation {
        Invocation {
            argv,
            cwd: cwd.to_owned(),
            env: Vec::new(),
            stdin: Vec::new(),
            expect: String::new(),
            lines: 0,
            exit_code: 0,
        }
    }

    /// Runs once, returning how long it took from spawn to reaped.
    pub fn run_once(&self) -> anyhow::Result<Duration> {
        let (program, args) = self.argv.split_first().context("an empty command line")?;
        let started = Instant::now();
        let mut child = Command::new(program)
            .args(args)
            .current_dir(&self.cwd)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(if self.stdin.is_empty() {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {program}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&self.stdin)?;
        }
        let output = child.wait_with_output()?;
        let elapsed = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let lines_ok = self.lines == 0 || stdout.lines().count() == self.lines;
        if output.status.code() != Some(self.exit_code)
            || !stdout.contains(&self.expect)
            || !lines_ok
        {
            bail!(
                "`{}` ended with {} (expected exit {} and {} lines of stdout containing {:?}); stdout: {}; stderr: {}",
                self.argv.join(" "),
                output.status,
                self.exit_code,
                self.lines,
                self.expect,
                stdout.chars().take(300).collect::<String>(),
                String::from_utf8_lossy(&output.stderr)
                    .chars()
                    .take(600)
                    .collect::<String>()
            );
        }
        Ok(elapsed)
    }

    /// `warmup` unmeasured runs, then `runs` measured ones, one after another.
    pub fn measure(&self, warmup: usize, runs: usize) -> anyhow::Result<Vec<Duration>> {
        for _ in 0..warmup {
            self.run_once()?;
        }
        (0..runs).map(|_| self.run_once()).collect()
    }
}

/// Runs `invocation` on a blocking thread, so the async runtime stays free.
pub async fn measure(
    invocation: Invocation,
    warmup: usize,
    runs: usize,
) -> anyhow::Result<Vec<Duration>> {
    tokio::task::spawn_blocking(move || invocation.measure(warmup, runs)).await?
}

/// Where `program` is on PATH, if it is.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_fails_is_an_error() {
        let ok = Invocation::new(vec!["/bin/true".into()], Path::new("/"));
        assert_eq!(ok.measure(1, 2).expect("true runs").len(), 2);
        let wrong = Invocation::new(vec!["/bin/false".into()], Path::new("/"));
        assert!(wrong.run_once().is_err());
        let mut echo = Invocation::new(vec!["/bin/cat".into()], Path::new("/"));
        echo.stdin = b"{\"ok\":1}".to_vec();
        echo.expect = "\"ok\"".into();
        assert!(echo.run_once().is_ok());
        echo.expect = "nope".into();
        assert!(echo.run_once().is_err());
    }
}

//! The `airlock` CLI as a test runs it: the built binary against a daemon, with nothing of
//! the caller's environment that could change its answer (a server, a token, TLS files, a
//! home holding another daemon's token file).

use std::path::Path;

use crate::cargo_bin;

/// How one `airlock` command ended.
#[derive(Debug)]
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `airlock --server ENDPOINT ARGS…`, as configured by the builder methods, then [`Cli::run`].
pub struct Cli {
    command: tokio::process::Command,
    /// What its standard input reads, then its end; none: it reads nothing (`/dev/null`).
    stdin: Option<Vec<u8>>,
    /// A home with no token file in it, kept until the command has run.
    _home: tempfile::TempDir,
}

impl Cli {
    pub fn new(endpoint: &str, args: &[&str]) -> Cli {
        let home = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new(cargo_bin("airlock"));
        command
            .arg("--server")
            .arg(endpoint)
            .args(args)
            .env("COLUMNS", "200")
            .env("HOME", home.path())
            .env("XDG_STATE_HOME", home.path());
        for var in [
            "AIRLOCK_SERVER",
            "AIRLOCK_TOKEN",
            "AIRLOCK_TLS_CA",
            "AIRLOCK_TLS_CERT",
            "AIRLOCK_TLS_KEY",
            "NO_COLOR",
        ] {
            command.env_remove(var);
        }
        Cli {
            command,
            stdin: None,
            _home: home,
        }
    }

    /// Gives it `input` on its standard input (a pipe, as a script's).
    pub fn stdin(mut self, input: &str) -> Cli {
        self.command.stdin(std::process::Stdio::piped());
        self.stdin = Some(input.as_bytes().to_vec());
        self
    }

    /// Sends `token` (through `AIRLOCK_TOKEN`).
    pub fn token(mut self, token: &str) -> Cli {
        self.command.env("AIRLOCK_TOKEN", token);
        self
    }

    pub fn env(mut self, name: &str, value: &str) -> Cli {
        self.command.env(name, value);
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Cli {
        self.command.current_dir(dir);
        self
    }

    /// Runs it; what it wrote, as bytes.
    pub async fn output(mut self) -> std::process::Output {
        let Some(input) = self.stdin.take() else {
            return self.command.output().await.unwrap();
        };
        use tokio::io::AsyncWriteExt;
        self.command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = self.command.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&input).await.unwrap();
        drop(stdin);
        child.wait_with_output().await.unwrap()
    }

    /// Runs it; what it wrote, as text.
    pub async fn run(self) -> CliRun {
        let output = self.output().await;
        CliRun {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

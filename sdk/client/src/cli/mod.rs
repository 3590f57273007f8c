//! The `airlock` command line: the argument grammar, the errors a command can end with, and
//! the dispatch to one module per subcommand.

mod approvals;
mod ask;
mod attach;
mod author;
mod changes;
mod chat;
mod eval;
mod exec;
mod follow;
mod full_output;
mod gc;
mod hints;
mod info;
mod input;
mod interrupt;
mod mcp;
mod mcp_add;
mod model;
mod output;
mod pages;
mod run;
mod runs;
mod sessions;
mod settings;
mod tools;
mod trace;
mod trust;
mod workspace;

use std::io::{self, Write};
use std::path::PathBuf;

use airlock_client::arguments::ArgumentsError;
use airlock_client::{
    AirlockClient, ClientError, ConnectOptions, DEFAULT_ENDPOINT, connect_with, exit_code,
};
use clap::{Parser, Subcommand};

pub use output::Output;

/// Drive airlockd: list the tools it serves and run them in its sandboxes, run agents, talk
/// with them in sessions and answer their approvals.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    server: Server,

    #[command(subcommand)]
    command: Command,
}

/// The subcommands come in families: `airlock tools …` for everything about tools, `airlock
/// runs …` for everything about runs, `airlock sessions …` for sessions; `airlock run` starts
/// a run, `airlock chat` a conversation.
#[derive(Debug, Subcommand)]
enum Command {
    /// What the daemon is: its version, the workspace roots you may use, its limits.
    Info(info::InfoArgs),
    /// Everything about tools: list them, show one, run one, print a call's whole output.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Run an agent on a task, asking you about the calls the policy puts to you.
    Run(run::RunArgs),
    /// Everything about runs: list them, show one, follow one, show its trace, cancel it.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Talk with an agent in a session: each line you type is a run that carries on from the
    /// ones before; end with /exit or Ctrl-D, continue later with --session.
    Chat(chat::ChatArgs),
    /// Everything about sessions: make one with the settings its runs inherit, list them, show
    /// one.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// An approver console: answer the approval requests of every run.
    Approvals(approvals::ApprovalsArgs),
    /// What a run's tool calls changed in its workspace, step by step (`--diff` for diffs).
    Changes(changes::ChangesArgs),
    /// Put a finished run's workspace back as it was before one of its steps.
    Revert(changes::RevertArgs),
    /// Start a new run from one of a run's steps: its conversation up to there (and, with
    /// --copy-workspace, a copy of its workspace as it was then), then follow it.
    Fork(changes::ForkArgs),
    /// Delete finished runs and kept outputs older than an age (the operator's command).
    Gc(gc::GcArgs),
    /// Serve airlock's tools to an MCP client over stdio (for an IDE's MCP configuration);
    /// `airlock mcp add` hosts an MCP server from PyPI or npm.
    Mcp(mcp::McpArgs),
    /// Evals: run a suite of tasks and grade them, capture a run as a case, compare results.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// `airlock tools exec`, by its older name.
    #[command(hide = true)]
    Exec(exec::ExecArgs),
    /// `airlock runs attach`, by its older name.
    #[command(hide = true)]
    Attach(attach::AttachArgs),
    /// `airlock runs trace`, by its older name.
    #[command(hide = true)]
    Trace(trace::TraceArgs),
    /// `airlock tools output`, by its older name.
    #[command(hide = true)]
    Output(full_output::OutputArgs),
}

impl Cli {
    /// Runs the command and returns the process exit code.
    pub fn run<O: Write, E: Write>(self, out: &mut Output<O, E>) -> Result<u8, CliError> {
        // One thread is plenty for one call at a time, and starts faster than a pool.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(CliError::Runtime)?;
        let result = runtime.block_on(async {
            match self.command {
                Command::Info(args) => info::run(args, &self.server, out).await,
                Command::Tools(command) => tools::run(command, &self.server, out).await,
                Command::Run(args) => run::run(args, &self.server, out).await,
                Command::Runs(command) => runs::run(command, &self.server, out).await,
                Command::Chat(args) => chat::run(args, &self.server, out).await,
                Command::Sessions(command) => sessions::run(command, &self.server, out).await,
                Command::Approvals(args) => approvals::run(args, &self.server, out).await,
                Command::Changes(args) => changes::changes(args, &self.server, out).await,
                Command::Revert(args) => changes::revert(args, &self.server, out).await,
                Command::Fork(args) => changes::fork(args, &self.server, out).await,
                Command::Gc(args) => gc::run(args, &self.server, out).await,
                Command::Mcp(args) => mcp::run(args, &self.server, out).await,
                Command::Eval(command) => eval::run(command, &self.server, out).await,
                Command::Exec(args) => exec::run(args, &self.server, out).await,
                Command::Attach(args) => attach::run(args, &self.server, out).await,
                Command::Trace(args) => trace::run(args, &self.server, out).await,
                Command::Output(args) => full_output::run(args, &self.server, out).await,
            }
        });
        result.map_err(hints::diagnose)
    }
}

/// Which daemon to talk to, and the credentials to show it.
#[derive(Debug, clap::Args)]
pub struct Server {
    /// The airlockd gRPC endpoint: http://host:port, https://host:port or unix:/path.
    #[arg(
        long = "server",
        global = true,
        env = "AIRLOCK_SERVER",
        value_name = "URL",
        default_value = DEFAULT_ENDPOINT
    )]
    endpoint: String,
    /// The access token [default: $AIRLOCK_TOKEN, else the token file in the daemon's
    /// default state dir].
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The CA that an https:// daemon's certificate is signed by (PEM).
    #[arg(
        long = "tls-ca",
        alias = "ca-cert",
        global = true,
        env = "AIRLOCK_TLS_CA",
        value_name = "FILE"
    )]
    tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a daemon that requires client certificates
    /// (mutual TLS); needs --tls-key.
    #[arg(
        long,
        global = true,
        env = "AIRLOCK_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        global = true,
        env = "AIRLOCK_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
}

impl Server {
    pub async fn connect(&self) -> Result<AirlockClient, ClientError> {
        connect_with(
            &self.endpoint,
            &ConnectOptions {
                token: self.token.clone(),
                ca_cert: self.tls_ca.clone(),
                client_cert: self.tls_cert.clone(),
                client_key: self.tls_key.clone(),
            },
        )
        .await
    }
}

/// Why a command failed before it could report a tool's result.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Arguments(#[from] ArgumentsError),
    /// The command line names something that cannot be used; the message says what, and
    /// which flag or command fixes it.
    #[error("{0}")]
    Usage(String),
    /// A file the command line names cannot be read; the message names it.
    #[error("{0}")]
    NoInput(String),
    /// The daemon answered something that cannot be right; the message says what.
    #[error("airlockd broke the protocol: {0}")]
    Protocol(String),
    #[error("cannot write output: {0}")]
    Output(io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(io::Error),
    /// Installing a package failed (`airlock mcp add`); the message holds the installer's.
    #[error("{0}")]
    Install(String),
}

impl CliError {
    /// The exit code: the table in `airlock_client::exit_code`.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Client(error) => error.exit_code(),
            Self::Arguments(ArgumentsError::Read { .. }) | Self::NoInput(_) => exit_code::NO_INPUT,
            Self::Arguments(_) | Self::Usage(_) => exit_code::USAGE,
            Self::Protocol(_) => exit_code::PROTOCOL,
            Self::Output(_) => exit_code::IO_ERROR,
            Self::Runtime(_) => exit_code::SOFTWARE,
            Self::Install(_) => exit_code::UNAVAILABLE,
        }
    }

    /// What to do about it, when the error alone does not say: the command or flag that
    /// shows or fixes what is wrong.
    pub fn hint(&self) -> Option<&'static str> {
        hints::hint(self)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_server_defaults_and_can_follow_the_subcommand() -> anyhow::Result<()> {
        let cli = Cli::try_parse_from(["airlock", "tools", "list"])?;
        // AIRLOCK_SERVER may be set where the tests run; the flag wins over it.
        let expected = std::env::var("AIRLOCK_SERVER").unwrap_or(DEFAULT_ENDPOINT.to_owned());
        assert_eq!(cli.server.endpoint, expected);
        let cli = Cli::try_parse_from(["airlock", "tools", "list", "--server", "http://h:1"])?;
        assert_eq!(cli.server.endpoint, "http://h:1");
        Ok(())
    }

    #[test]
    fn tls_files_come_from_flags_and_a_certificate_needs_its_key() -> anyhow::Result<()> {
        let cli = Cli::try_parse_from([
            "airlock",
            "tools",
            "list",
            "--tls-ca",
            "ca.pem",
            "--tls-cert",
            "client.pem",
            "--tls-key",
            "client.key",
        ])?;
        assert_eq!(cli.server.tls_ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(cli.server.tls_cert, Some(PathBuf::from("client.pem")));
        assert_eq!(cli.server.tls_key, Some(PathBuf::from("client.key")));
        // The flag's first name, kept for scripts that use it.
        let cli = Cli::try_parse_from(["airlock", "--ca-cert", "old.pem", "tools", "list"])?;
        assert_eq!(cli.server.tls_ca, Some(PathBuf::from("old.pem")));
        // AIRLOCK_TLS_KEY may be set where the tests run; only then would this parse.
        if std::env::var_os("AIRLOCK_TLS_KEY").is_none() {
            let error = Cli::try_parse_from(["airlock", "tools", "list", "--tls-cert", "c.pem"])
                .expect_err("a certificate without its key");
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument
            );
        }
        Ok(())
    }

    #[test]
    fn usage_errors_exit_with_ex_usage_and_unreadable_files_with_ex_noinput() {
        let error = CliError::Usage("workspace /nope is not a directory".to_owned());
        assert_eq!(error.exit_code(), exit_code::USAGE);
        let error = CliError::from(ArgumentsError::EmptyFileName);
        assert_eq!(error.exit_code(), exit_code::USAGE);
        let error = CliError::from(ArgumentsError::Read {
            origin: "args.json".to_owned(),
            source: io::Error::from(io::ErrorKind::NotFound),
        });
        assert_eq!(error.exit_code(), exit_code::NO_INPUT);
    }
}

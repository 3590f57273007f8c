//! The `airlock` command line's grammar and the dispatch to one module per subcommand. What
//! the subcommands share lives in modules of its own: the daemon to talk to (`server`), the
//! errors a command can end with (`error`), where output goes (`output`).

use std::io::Write;

use clap::{Parser, Subcommand};

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;
use crate::{
    approvals, attach, audit, changes, chat, eval, exec, full_output, gc, hints, info, mcp, policy,
    run, runs, sessions, tools, trace,
};

/// Drive airlockd: list the tools it serves and run them in its sandboxes, run agents, talk
/// with them in sessions and answer their approvals.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub(crate) server: Server,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands come in families: `airlock tools …` for everything about tools, `airlock
/// runs …` for everything about runs, `airlock sessions …` for sessions; `airlock run` starts
/// a run, `airlock chat` a conversation.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// An approver console: answer the approval requests of every run; `approvals rules`
    /// lists and revokes the grants made while answering.
    Approvals(approvals::ApprovalsArgs),
    /// The policy's rules: what they would decide for a call and why, and which are in force.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// What a run's tool calls changed in its workspace, step by step (`--diff` for diffs).
    Changes(changes::ChangesArgs),
    /// Put a finished run's workspace back as it was before one of its steps.
    Revert(changes::RevertArgs),
    /// Start a new run from one of a run's steps: its conversation up to there (and, with
    /// --copy-workspace, a copy of its workspace as it was then), then follow it.
    Fork(changes::ForkArgs),
    /// Delete finished runs and kept outputs older than an age (the operator's command).
    Gc(gc::GcArgs),
    /// Your tenant's tamper-evident audit log: export it as JSON lines, verify its chain.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
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
                Command::Policy(command) => policy::run(command, &self.server, out).await,
                Command::Changes(args) => changes::changes(args, &self.server, out).await,
                Command::Revert(args) => changes::revert(args, &self.server, out).await,
                Command::Fork(args) => changes::fork(args, &self.server, out).await,
                Command::Gc(args) => gc::run(args, &self.server, out).await,
                Command::Audit(command) => audit::run(command, &self.server, out).await,
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use airlock_client::DEFAULT_ENDPOINT;
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
}

//! `airlock policy`: what the rules would decide for a call and why (`check`), and the rules
//! in force, layer by layer (`rules`). `airlock approvals rules` lists and revokes the grants
//! people made; it is here too, as it speaks the same service.

use std::io::Write;
use std::path::PathBuf;

use airlock_client::exit_code;
use airlock_client::proto::{ApprovalPolicy, CheckPolicyRequest, PolicyLayer};
use airlock_render as render;
use clap::{Args, Subcommand};

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;
use crate::settings::Policy;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// What the policy would decide for a call of TOOL with --args, and every rule (file,
    /// line, layer) or level behind the decision. Runs nothing and asks nobody.
    Check(CheckArgs),
    /// The rules in force for you: the operator's, and with --session the session's own
    /// and the grants made in it.
    Rules(RulesArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The tool the call is of.
    tool: String,
    /// The call's arguments, a JSON object.
    #[arg(long = "args", value_name = "JSON", default_value = "{}")]
    arguments: String,
    /// Judge it as a call of this session's runs: its rules, grants, level and workspace.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Where paths are normalised, when no session names a workspace.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The level no rule speaking falls back to [default: the session's, else risky].
    #[arg(long, value_enum)]
    policy: Option<Policy>,
    /// A run's rule file (ask and deny only) to judge with, as `airlock run --rules` adds it.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Print the decision as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Also the session's own rules and its grants.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Print the rules as a JSON array.
    #[arg(long)]
    json: bool,
}

/// `airlock approvals rules …`: the grants made while answering questions.
#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// The grants of a session: each one's id, when it was made, what it covers.
    List {
        #[arg(long, value_name = "ID")]
        session: String,
        /// Print them as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Withdraw a grant: the next call it covered is asked about again.
    Revoke {
        /// The grant's id (the 16 characters `list` shows will do).
        grant: String,
        #[arg(long, value_name = "ID")]
        session: String,
    },
}

pub async fn run<O: Write, E: Write>(
    command: PolicyCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    match command {
        PolicyCommand::Check(args) => check(args, server, out).await,
        PolicyCommand::Rules(args) => {
            let client = server.connect().await?;
            let rules = client
                .policy_rules(args.session.as_deref().unwrap_or_default())
                .await?;
            if args.json {
                out.stdout(&render::rules_json(&rules.iter().collect::<Vec<_>>()))?;
            } else if rules.is_empty() {
                out.stdout("no rules: every call is decided by its session's level\n")?;
            } else {
                out.stdout(&render::rules_table(&rules, out.width()))?;
            }
            Ok(exit_code::OK)
        }
    }
}

async fn check<O: Write, E: Write>(
    args: CheckArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let workspace = args
        .workspace
        .as_deref()
        .map(crate::workspace::resolve)
        .transpose()?
        .unwrap_or_default();
    let rules = match &args.rules {
        None => String::new(),
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| CliError::Usage(format!("--rules {}: {error}", path.display())))?,
    };
    let client = server.connect().await?;
    let verdict = client
        .check_policy(CheckPolicyRequest {
            tool: args.tool,
            arguments_json: args.arguments,
            session_id: args.session.unwrap_or_default(),
            workspace,
            approval_policy: args
                .policy
                .map_or(ApprovalPolicy::Unspecified, ApprovalPolicy::from)
                as i32,
            rules,
        })
        .await?;
    if args.json {
        out.stdout(&render::verdict_json(&verdict))?;
    } else {
        out.stdout(&(render::verdict_lines(&verdict).join("\n") + "\n"))?;
    }
    Ok(exit_code::OK)
}

pub async fn grants<O: Write, E: Write>(
    command: GrantsCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    match command {
        GrantsCommand::List { session, json } => {
            let rules = client.policy_rules(&session).await?;
            let grants: Vec<_> = rules
                .iter()
                .filter(|rule| rule.layer == PolicyLayer::Grant as i32)
                .collect();
            if json {
                out.stdout(&render::rules_json(&grants))?;
            } else if grants.is_empty() {
                out.stdout(&format!("session {session} has no grants\n"))?;
            } else {
                out.stdout(&render::grants_table(&grants, out.width()))?;
            }
        }
        GrantsCommand::Revoke { grant, session } => {
            client.revoke_grant(&session, &grant).await?;
            out.stdout(&format!("revoked grant {grant} of session {session}\n"))?;
        }
    }
    Ok(exit_code::OK)
}

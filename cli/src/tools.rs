//! `airlock tools …`: everything about tools — `list`, `show NAME`, and the dispatch of
//! `exec` (exec.rs), `output` (full_output.rs) and the author's toolkit (`new`, `build`,
//! `check`, `digest`: author/).

use std::io::Write;

use airlock_client::exit_code;
use airlock_client::proto::ToolInfo;
use airlock_render as render;
use clap::Subcommand;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the tools the daemon serves, sorted by name.
    List {
        /// Print JSON (`{"tools": [...]}`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show every field of one tool, its input schema included.
    Show {
        /// The tool's name.
        name: String,
        /// Print the tool as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool directly, without a model, and print its result.
    Exec(super::exec::ExecArgs),
    /// Print the whole output kept for a call whose result was cut, byte for byte.
    Output(super::full_output::OutputArgs),
    /// Trust a hosted MCP server's tools as the daemon last listed them: its changed and new
    /// tools, refused until then, may be called (the operator's command). Prints what it
    /// trusts, and trusts only that: a listing that changes meanwhile is refused.
    Trust {
        /// The server's manifest name.
        server: String,
        /// Only show how what the server last listed differs from what is trusted (names,
        /// descriptions, schemas, annotations); trust nothing.
        #[arg(long, conflicts_with = "review")]
        show: bool,
        /// Trust the listing an earlier `--show` printed the review digest of, and nothing
        /// else: refused when the server has listed something else since.
        #[arg(long, value_name = "DIGEST")]
        review: Option<String>,
        /// Refuse the listing instead (the reviewed one, with `--review`): its changed and
        /// new tools stay refused, and reviews say so until the server lists anew.
        #[arg(long, conflicts_with = "show")]
        refuse: bool,
    },
    /// Make a new tool project in a language, from its template (no daemon needed).
    New(super::author::NewArgs),
    /// Build a tool project: run its manifest's `[build] command` (no daemon needed).
    Build(super::author::ProjectArgs),
    /// Check a tool before deploying it: manifest, module, digest, imports against its
    /// profile, whether it loads, and its example calls (runs `airlockd check-tool`).
    Check(super::author::CheckArgs),
    /// Print the module's sha256 pin for tool.toml, or `--write` it there.
    Digest(super::author::DigestArgs),
}

pub async fn run<O: Write, E: Write>(
    command: ToolsCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let (name, json) = match command {
        ToolsCommand::New(args) => return super::author::new(args, out),
        ToolsCommand::Build(args) => return super::author::build(args, out),
        ToolsCommand::Check(args) => return super::author::check(args),
        ToolsCommand::Digest(args) => return super::author::digest(args, out),
        ToolsCommand::Exec(args) => return super::exec::run(args, server, out).await,
        ToolsCommand::Output(args) => return super::full_output::run(args, server, out).await,
        ToolsCommand::Trust {
            server: name,
            show,
            review,
            refuse,
        } => {
            let how = match (show, review) {
                (true, _) => super::trust::How::Show,
                (false, Some(digest)) => super::trust::How::Reviewed(digest),
                (false, None) => super::trust::How::ReviewNow,
            };
            return super::trust::run(&name, how, refuse, server, out).await;
        }
        ToolsCommand::List { json } => (None, json),
        ToolsCommand::Show { name, json } => (Some(name), json),
    };
    let client = server.connect().await?;
    let mut tools = client.list_tools().await?;
    // The daemon's order is whatever its registry keeps; a sorted list reads and diffs better.
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    match name {
        None => list(&tools, json, client.endpoint(), out)?,
        Some(name) => show(&tools, &name, json, out)?,
    }
    Ok(exit_code::OK)
}

fn list<O: Write, E: Write>(
    tools: &[ToolInfo],
    json: bool,
    endpoint: &str,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    if json {
        out.stdout(&render::tools_json(tools))
    } else if tools.is_empty() {
        // An empty table would look like a failure; say what it means instead.
        out.line(&format!("airlockd at {endpoint} serves no tools"))
    } else {
        let table = render::tools_table(tools, out.width());
        out.stdout(&table)
    }
}

fn show<O: Write, E: Write>(
    tools: &[ToolInfo],
    name: &str,
    json: bool,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    let Some(tool) = tools.iter().find(|tool| tool.name == name) else {
        return Err(CliError::Usage(super::hints::unknown_tool(name)));
    };
    if json {
        out.stdout(&render::tool_json(tool))
    } else {
        out.stdout(&render::tool_details(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolInfo> {
        ["grep", "read_file"]
            .into_iter()
            .map(|name| ToolInfo {
                name: name.to_owned(),
                input_schema_json: "{}".to_owned(),
                ..ToolInfo::default()
            })
            .collect()
    }

    #[test]
    fn an_empty_list_says_so_on_stderr() -> anyhow::Result<()> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[], false, "http://h:1", &mut out)?;
        let (stdout, stderr) = out.into_inner();
        assert!(stdout.is_empty());
        assert_eq!(stderr, b"airlockd at http://h:1 serves no tools\n");
        Ok(())
    }

    #[test]
    fn an_empty_json_list_is_still_json() -> anyhow::Result<()> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[], true, "http://h:1", &mut out)?;
        let (stdout, stderr) = out.into_inner();
        assert_eq!(stdout, b"{\n  \"tools\": []\n}\n");
        assert!(stderr.is_empty());
        Ok(())
    }

    #[test]
    fn show_finds_the_tool_by_name() -> anyhow::Result<()> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        show(&tools(), "read_file", false, &mut out)?;
        let (stdout, _) = out.into_inner();
        assert!(stdout.starts_with(b"name:         read_file\n"));
        Ok(())
    }

    #[test]
    fn show_of_an_unknown_tool_is_a_usage_error() {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        let Err(error) = show(&tools(), "nope", false, &mut out) else {
            panic!("an unknown tool was shown");
        };
        // Worded as the daemon words it for `exec`, with the same hint.
        assert_eq!(error.to_string(), "tool: no tool named `nope`");
        assert_eq!(
            crate::hints::hint(&error),
            Some("`airlock tools list` shows the tools airlockd serves")
        );
        assert_eq!(error.exit_code(), exit_code::USAGE);
    }
}

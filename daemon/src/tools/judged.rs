//! What the permission policy reads of a call, besides its tool and arguments: the command
//! line it runs — the shell line of a tool that declares one (`[policy] shell`), or the argv
//! a process tool's template makes of the arguments — and the hosts it may reach (its
//! profile's allow-list, a remote MCP server's host).

use serde_json::Value;

use super::Tool;
use crate::engine::{Abi, Code, McpTransport};
use crate::policy::rules::Hosts;
use crate::policy::rules::shell::{self, CommandLine};
use crate::profile::NetworkPolicy;

/// The facts about one call the rules match besides its name, risk and arguments.
pub struct Judged {
    pub command: Option<CommandLine>,
    pub hosts: Hosts,
}

impl Tool {
    /// What the policy needs to know of a call of this tool with `arguments`.
    pub fn judged(&self, arguments: &Value) -> Judged {
        Judged {
            command: self.command_line(arguments),
            hosts: self.hosts(),
        }
    }

    fn command_line(&self, arguments: &Value) -> Option<CommandLine> {
        if let Some(shell) = &self.manifest.shell_argument {
            return Some(match arguments.get(shell).and_then(Value::as_str) {
                Some(line) => shell::parse_line(line),
                None => CommandLine {
                    commands: Vec::new(),
                    unresolved: vec![format!("the command line `{shell}` is missing")],
                },
            });
        }
        match &self.manifest.image.code {
            Code::Command { argv, abi } => {
                let argv = match abi {
                    Abi::Argv => crate::engine::process::render_for_policy(
                        argv,
                        *abi,
                        &self.manifest.image.input_schema,
                        arguments,
                    )?,
                    Abi::JsonStdio => argv.clone(),
                };
                Some(shell::from_argv(&argv))
            }
            Code::Module(_) | Code::Mcp(_) => None,
        }
    }

    fn hosts(&self) -> Hosts {
        let mut hosts = match &self.profile.network {
            NetworkPolicy::None => Hosts::default(),
            NetworkPolicy::AllowList {
                allow,
                ask_for_unlisted,
                ..
            } => Hosts {
                names: allow
                    .iter()
                    .map(|pattern| {
                        let text = pattern.to_string();
                        match text.rsplit_once(':') {
                            Some((host, _port)) => host.trim_matches(['[', ']']).to_owned(),
                            None => text,
                        }
                    })
                    .collect(),
                any: *ask_for_unlisted,
            },
        };
        if let Code::Mcp(server) = &self.manifest.image.code
            && let McpTransport::Http { url, .. } = &server.transport
        {
            match reqwest::Url::parse(url)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
            {
                Some(host) => hosts.names.push(host),
                None => hosts.any = true,
            }
        }
        hosts
    }
}

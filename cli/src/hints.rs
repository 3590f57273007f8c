//! What to do about an error: one hint per kind of mistake, the same whichever subcommand
//! met it, naming the command or flag that shows or fixes what is wrong.
//!
//! The daemon's messages start with the request field at fault (`proto/API.md`), which is
//! what the hints key on; the wording of the mistake itself stays the daemon's, so that one
//! mistake reads the same everywhere.

use std::time::Duration;

use airlock_client::ClientError;
use tonic::Code;

use crate::error::CliError;

/// How long the check for a TLS daemon behind an `http://` address may take: loopback or a
/// LAN answers in milliseconds.
const TLS_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The message of an unknown tool, as the daemon words it (`tool: no tool named `x``).
pub fn unknown_tool(name: &str) -> String {
    format!("tool: no tool named `{name}`")
}

pub fn hint(error: &CliError) -> Option<&'static str> {
    let (code, message) = match error {
        CliError::Client(ClientError::Rpc { status, .. }) => {
            (Some(status.code()), status.message())
        }
        CliError::Usage(message) => (None, message.as_str()),
        CliError::Client(_)
        | CliError::Arguments(_)
        | CliError::NoInput(_)
        | CliError::Protocol(_)
        | CliError::Output(_)
        | CliError::Runtime(_)
        | CliError::Install(_) => return None,
    };
    let field = message.split_once(": ").map(|(field, _)| field);
    match (code, field) {
        (Some(Code::NotFound) | None, Some("tool" | "start.tools"))
            if message.contains("no tool named") =>
        {
            Some("`airlock tools list` shows the tools airlockd serves")
        }
        (Some(Code::NotFound), Some("run_id" | "attach.run_id")) => {
            Some("`airlock runs list` shows your runs")
        }
        (Some(Code::NotFound), Some("execution_id")) => Some(
            "an execution id is in `airlock tools exec --json` and in a run's events; only a \
             result that was cut keeps its whole output",
        ),
        (Some(Code::NotFound), Some("session_id" | "start.session_id")) => {
            Some("`airlock sessions list` shows your sessions")
        }
        (Some(Code::InvalidArgument), Some("older_than_ms")) => {
            Some("`airlock gc --older-than 30d` names the age; 30d, 12h and 90m all work")
        }
        (Some(Code::ResourceExhausted), _) => {
            Some("`airlock runs list --state running` shows what is going; wait, or cancel one")
        }
        _ => None,
    }
}

/// Turns a failure the error alone cannot explain into one that says what to do, when a look
/// at the daemon can tell: a TLS daemon addressed as `http://` fails as a broken HTTP/2
/// connection, which this rewrites into a usage error naming `https://` and `--tls-ca`.
pub fn diagnose(error: CliError) -> CliError {
    let CliError::Client(
        ClientError::ConnectionLost { endpoint, .. } | ClientError::Unreachable { endpoint, .. },
    ) = &error
    else {
        return error;
    };
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return error;
    };
    if airlock_client::speaks_tls(endpoint, TLS_PROBE_TIMEOUT) {
        return CliError::Usage(format!(
            "airlockd at {endpoint} speaks TLS: use https://{rest} with --tls-ca FILE, the CA \
             that signed its certificate"
        ));
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: Code, message: &str) -> CliError {
        CliError::Client(ClientError::Rpc {
            endpoint: "http://h:1".to_owned(),
            status: Box::new(tonic::Status::new(code, message)),
        })
    }

    #[test]
    fn one_mistake_gets_one_hint_whichever_command_met_it() {
        let from_exec = rpc(Code::NotFound, &unknown_tool("nope"));
        let from_show = CliError::Usage(unknown_tool("nope"));
        let from_run = rpc(Code::NotFound, "start.tools: no tool named `nope`");
        for error in [from_exec, from_show, from_run] {
            assert_eq!(
                hint(&error),
                Some("`airlock tools list` shows the tools airlockd serves"),
                "{error}"
            );
        }
        assert_eq!(
            hint(&rpc(Code::NotFound, "run_id: no run `run_0`")),
            Some("`airlock runs list` shows your runs")
        );
        for message in [
            "session_id: no session `ses_0`",
            "start.session_id: no session",
        ] {
            assert_eq!(
                hint(&rpc(Code::NotFound, message)),
                Some("`airlock sessions list` shows your sessions")
            );
        }
        assert_eq!(hint(&rpc(Code::Internal, "database damaged")), None);
    }

    #[test]
    fn a_plaintext_address_of_a_listener_that_is_not_tls_stays_as_it_was() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        // Accept and answer with something that is not TLS.
        let server = std::thread::spawn(move || {
            use std::io::Write;
            if let Ok((mut stream, _)) = listener.accept() {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            }
        });
        let error = CliError::Client(ClientError::ConnectionLost {
            endpoint,
            reason: "h2 protocol error".to_owned(),
        });
        assert!(matches!(diagnose(error), CliError::Client(_)));
        let _ = server.join();
    }
}

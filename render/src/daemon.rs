//! What `airlock info` prints: the daemon's version, the workspace roots the client may use,
//! the models its operator offers, and its limits.

use serde::Serialize;

use super::units::format_bytes;
use super::views::to_json;
use crate::proto::{CollectGarbageResponse, DaemonInfo};

/// `DaemonInfo` as one JSON object. Ends with a newline.
pub fn daemon_info_json(info: &DaemonInfo) -> String {
    #[derive(Serialize)]
    struct View<'a> {
        version: &'a str,
        tenant: &'a str,
        workspace_roots: &'a [String],
        models: &'a [String],
        limits: Option<LimitsView>,
    }
    #[derive(Serialize)]
    struct LimitsView {
        max_arguments_bytes: u64,
        max_input_bytes: u64,
        max_request_bytes: u64,
        max_output_page_bytes: u64,
        max_concurrent_runs: u32,
        max_concurrent_executions: u32,
    }
    to_json(&View {
        version: &info.version,
        tenant: &info.tenant,
        workspace_roots: &info.workspace_roots,
        models: &info.models,
        limits: info.limits.as_ref().map(|limits| LimitsView {
            max_arguments_bytes: limits.max_arguments_bytes,
            max_input_bytes: limits.max_input_bytes,
            max_request_bytes: limits.max_request_bytes,
            max_output_page_bytes: limits.max_output_page_bytes,
            max_concurrent_runs: limits.max_concurrent_runs,
            max_concurrent_executions: limits.max_concurrent_executions,
        }),
    })
}

/// `DaemonInfo` for people, one field a line.
pub fn daemon_info_text(endpoint: &str, info: &DaemonInfo) -> String {
    let mut text = format!(
        "airlockd {} at {endpoint}\ntenant: {}\nworkspace roots: {}\n",
        info.version,
        info.tenant,
        if info.workspace_roots.is_empty() {
            "none".to_owned()
        } else {
            info.workspace_roots.join(", ")
        }
    );
    if !info.models.is_empty() {
        text.push_str(&format!("models offered: {}\n", info.models.join(", ")));
    }
    let limits = info.limits.unwrap_or_default();
    text.push_str(&format!(
        "limits: arguments {}, input {}, request {}, output page {}, {} runs and {} tool calls at once\n",
        format_bytes(limits.max_arguments_bytes),
        format_bytes(limits.max_input_bytes),
        format_bytes(limits.max_request_bytes),
        format_bytes(limits.max_output_page_bytes),
        limits.max_concurrent_runs,
        limits.max_concurrent_executions,
    ));
    text
}

/// What `airlock gc` deleted, for people: `deleted 3 runs, 1 session, 5 kept outputs and 2
/// execution records older than 30 days`.
pub fn garbage_text(swept: &CollectGarbageResponse) -> String {
    let count = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "deleted {}, {}, {} and {} older than {}\n",
        count(swept.runs, "run", "runs"),
        count(swept.sessions, "session", "sessions"),
        count(swept.outputs, "kept output", "kept outputs"),
        count(swept.executions, "execution record", "execution records"),
        format_age(swept.older_than_ms)
    )
}

/// What `airlock gc --json` prints. Ends with a newline.
pub fn garbage_json(swept: &CollectGarbageResponse) -> String {
    #[derive(Serialize)]
    struct View {
        older_than_ms: u64,
        runs: u64,
        sessions: u64,
        outputs: u64,
        executions: u64,
    }
    to_json(&View {
        older_than_ms: swept.older_than_ms,
        runs: swept.runs,
        sessions: swept.sessions,
        outputs: swept.outputs,
        executions: swept.executions,
    })
}

/// An age in the largest unit that divides it: `30 days`, `12 hours`, `90 seconds`, `250 ms`.
fn format_age(millis: u64) -> String {
    const UNITS: [(u64, &str, &str); 4] = [
        (86_400_000, "day", "days"),
        (3_600_000, "hour", "hours"),
        (60_000, "minute", "minutes"),
        (1_000, "second", "seconds"),
    ];
    for (scale, one, many) in UNITS {
        if millis >= scale && millis.is_multiple_of(scale) {
            let n = millis / scale;
            return format!("{n} {}", if n == 1 { one } else { many });
        }
    }
    format!("{millis} ms")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::DaemonLimits;

    fn info() -> DaemonInfo {
        DaemonInfo {
            version: "0.1.0".to_owned(),
            tenant: "default".to_owned(),
            workspace_roots: vec!["/srv/work".to_owned()],
            models: vec!["openai:gpt-4.1".to_owned()],
            limits: Some(DaemonLimits {
                max_arguments_bytes: 1 << 20,
                max_input_bytes: 256 << 10,
                max_request_bytes: 4 << 20,
                max_output_page_bytes: 1 << 20,
                max_concurrent_runs: 64,
                max_concurrent_executions: 64,
            }),
        }
    }

    #[test]
    fn info_reads_as_lines_and_as_json() -> anyhow::Result<()> {
        let text = daemon_info_text("http://127.0.0.1:7411", &info());
        assert_eq!(
            text,
            "airlockd 0.1.0 at http://127.0.0.1:7411\ntenant: default\nworkspace roots: \
             /srv/work\nmodels offered: openai:gpt-4.1\nlimits: arguments 1.0 MiB, input 256.0 KiB, request 4.0 MiB, output \
             page 1.0 MiB, 64 runs and 64 tool calls at once\n"
        );
        let json: serde_json::Value = serde_json::from_str(&daemon_info_json(&info()))?;
        assert_eq!(json["workspace_roots"][0], "/srv/work");
        assert_eq!(json["models"][0], "openai:gpt-4.1");
        assert_eq!(json["limits"]["max_concurrent_runs"], 64);
        Ok(())
    }

    #[test]
    fn garbage_is_counted_in_words() {
        let swept = CollectGarbageResponse {
            older_than_ms: 30 * 86_400_000,
            runs: 3,
            sessions: 1,
            outputs: 0,
            executions: 2,
        };
        assert_eq!(
            garbage_text(&swept),
            "deleted 3 runs, 1 session, 0 kept outputs and 2 execution records older than 30 days\n"
        );
        assert_eq!(format_age(90_000), "90 seconds");
        assert_eq!(format_age(250), "250 ms");
        assert_eq!(format_age(3_600_000), "1 hour");
    }
}

//! `airlock audit`: the caller's tenant's audit log — every token accepted or refused,
//! approval asked and answered, policy rule matched, MCP listing trusted or withheld, egress
//! allowed or refused, configuration loaded, revert and fork — exported as JSON lines, and
//! its hash chain verified.

use std::io::Write;
use std::path::PathBuf;

use airlock_client::exit_code;
use airlock_client::proto as pb;
use clap::{Args, Subcommand};

use crate::duration::parse_duration;
use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

/// Records asked for per page: the daemon's largest.
const PAGE: u32 = 5000;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Write the records as JSON lines, oldest first (one object per record, its chain
    /// fields included, so a copy can be verified elsewhere).
    Export(ExportArgs),
    /// Check the chain: every record's digest, every link, the head. Exits 1 naming the
    /// first bad record when any was edited, removed or reordered, or the end cut off.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Only records from this time on: an age (24h, 7d), a date or time in UTC
    /// (2026-12-01, 2026-12-01T08:00:00Z), or Unix milliseconds.
    #[arg(long, value_name = "WHEN", value_parser = since)]
    since: Option<i64>,
    /// Only records after this sequence number.
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    after: u64,
    /// Write to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// A head digest kept from an earlier `airlock audit verify`: the chain must still
    /// contain it (this is what catches a chain whose end was cut off).
    #[arg(long, value_name = "DIGEST")]
    expect_head: Option<String>,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Unix milliseconds of `text`: an age before now, a UTC date or time, or milliseconds.
fn since(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Some(ms) = utc_millis(text) {
        return Ok(ms);
    }
    if text.len() >= 12 && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map_err(|_| format!("{text:?} is too large"));
    }
    let age = parse_duration(text).map_err(|_| {
        format!("{text:?} is not an age (24h, 7d), a UTC date or time (2026-12-01T08:00:00Z), or Unix milliseconds")
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(i64::try_from(now.saturating_sub(age).as_millis()).unwrap_or(i64::MAX))
}

/// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SSZ` as Unix milliseconds (UTC).
fn utc_millis(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time.strip_suffix('Z')?)),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: i64 = parts.next()?.parse().ok()?;
    let day: i64 = parts.next()?.parse().ok()?;
    if date.len() != 10 || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let seconds = match time {
        None => 0,
        Some(time) => {
            let mut hms = time.splitn(3, ':');
            let h: i64 = hms.next()?.parse().ok()?;
            let m: i64 = hms.next()?.parse().ok()?;
            let s: i64 = hms.next().unwrap_or("0").parse().ok()?;
            if h > 23 || m > 59 || s > 60 {
                return None;
            }
            h * 3600 + m * 60 + s
        }
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + seconds) * 1000)
}

/// One record as a JSON line: its details as JSON (text when they do not parse).
fn line(record: &pb::AuditRecord) -> String {
    let details = serde_json::from_str::<serde_json::Value>(&record.details_json)
        .unwrap_or_else(|_| serde_json::Value::String(record.details_json.clone()));
    let mut line = serde_json::json!({
        "tenant": record.tenant,
        "seq": record.seq,
        "at_ms": record.at_ms,
        "kind": record.kind,
        "actor": record.actor,
        "subject": record.subject,
        "reason": record.reason,
        "details": details,
        "details_json": record.details_json,
        "prev": record.prev,
        "digest": record.digest,
    })
    .to_string();
    line.push('\n');
    line
}

pub async fn run<O: Write, E: Write>(
    command: AuditCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    match command {
        AuditCommand::Export(args) => {
            let mut file = match &args.output {
                Some(path) => Some(std::io::BufWriter::new(
                    std::fs::File::create(path).map_err(CliError::Output)?,
                )),
                None => None,
            };
            let mut after = args.after;
            let mut written = 0u64;
            loop {
                let page = client
                    .audit_records(after, args.since.unwrap_or(0), PAGE)
                    .await?;
                for record in &page.records {
                    let text = line(record);
                    match &mut file {
                        Some(file) => file.write_all(text.as_bytes()).map_err(CliError::Output)?,
                        None => out.stdout(&text)?,
                    }
                    written += 1;
                }
                if page.next_after_seq == 0 {
                    break;
                }
                after = page.next_after_seq;
            }
            if let Some(mut file) = file {
                file.flush().map_err(CliError::Output)?;
                if let Some(path) = &args.output {
                    out.line(&format!("{written} records written to {}", path.display()))?;
                }
            }
            Ok(exit_code::OK)
        }
        AuditCommand::Verify(args) => {
            let verified = client
                .verify_audit(args.expect_head.as_deref().unwrap_or_default())
                .await?;
            if args.json {
                out.stdout(&format!(
                    "{}\n",
                    serde_json::json!({
                        "intact": verified.intact,
                        "records": verified.records,
                        "first_seq": verified.first_seq,
                        "last_seq": verified.last_seq,
                        "head": verified.head,
                        "broken_seq": verified.broken_seq,
                        "problem": verified.problem,
                    })
                ))?;
            } else if verified.intact {
                out.stdout(&format!(
                    "the audit chain is intact: {} records ({} to {})\nhead {}\n",
                    verified.records, verified.first_seq, verified.last_seq, verified.head
                ))?;
            } else {
                out.line(&format!("the audit chain is broken: {}", verified.problem))?;
            }
            Ok(if verified.intact {
                exit_code::OK
            } else {
                exit_code::CHECK_FAILED
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_times_ages_and_millis_are_read() {
        assert_eq!(utc_millis("1970-01-01"), Some(0));
        assert_eq!(utc_millis("2026-12-01T08:00:00Z"), Some(1_796_112_000_000));
        assert_eq!(since("1796112000000"), Ok(1_796_112_000_000));
        let day_ago = since("24h").expect("an age");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis();
        let now = i64::try_from(now).expect("fits");
        assert!((now - 86_400_000 - day_ago).abs() < 5_000);
        for bad in [
            "2026-13-01",
            "2026-12-01T25:00:00Z",
            "yesterday",
            "2026-12-01T08:00:00",
        ] {
            assert!(since(bad).is_err(), "{bad}");
        }
    }
}

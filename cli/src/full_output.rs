//! `airlock output EXECUTION_ID`: the full output the daemon kept for a call whose result its
//! output policy cut, written to stdout byte for byte, page by page as the daemon serves it.
//!
//! The whole output by default; `--offset` and `--length` pick a range. Nothing is added to
//! the bytes, so that the output can be piped to a file or a program as the tool wrote it.

use std::io::Write;

use airlock_client::proto::ReadOutputResponse;
use airlock_client::{AirlockClient, exit_code};
use clap::Args;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

/// Bytes asked for per page: the daemon's largest page, so that a long output takes the fewest
/// round trips. A daemon that serves less answers with a shorter page, and the next page is
/// asked for from where that one ended.
const PAGE_BYTES: u64 = 1 << 20;

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// The call (`exe_…`), as `airlock exec --json`, a run's events and its trace name it.
    execution_id: String,

    /// Start this many bytes into the output.
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: u64,

    /// Print at most this many bytes; everything to the end when not given.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    length: Option<u64>,
}

pub async fn run<O: Write, E: Write>(
    args: OutputArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let mut pages = Daemon {
        client: &client,
        execution_id: &args.execution_id,
    };
    copy(&mut pages, args.offset, args.length, out).await?;
    Ok(exit_code::OK)
}

/// Where the pages come from: the daemon, or a test's stand-in for it.
trait Pages {
    /// Up to `length` bytes from `offset`.
    async fn page(&mut self, offset: u64, length: u64) -> Result<ReadOutputResponse, CliError>;
}

struct Daemon<'a> {
    client: &'a AirlockClient,
    execution_id: &'a str,
}

impl Pages for Daemon<'_> {
    async fn page(&mut self, offset: u64, length: u64) -> Result<ReadOutputResponse, CliError> {
        Ok(self
            .client
            .read_output(self.execution_id, offset, length)
            .await?)
    }
}

/// Writes `length` bytes from `offset` (to the end for `None`) to stdout, a page at a time, so
/// that an output of any size streams through in bounded memory.
///
/// Every page must continue where the last one ended and belong to the same output (the
/// same digest); a daemon that sends an empty page before the end would otherwise be asked
/// for it forever.
async fn copy<P: Pages, O: Write, E: Write>(
    pages: &mut P,
    mut offset: u64,
    length: Option<u64>,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    let mut remaining = length;
    let mut digest: Option<String> = None;
    loop {
        let wanted = remaining.map_or(PAGE_BYTES, |left| left.min(PAGE_BYTES));
        let page = pages.page(offset, wanted).await?;
        let size = page.data.len() as u64;
        if page.offset != offset || size > wanted {
            return Err(CliError::Protocol(format!(
                "asked for {wanted} bytes at {offset} of the output, got {size} at {}",
                page.offset
            )));
        }
        match &digest {
            Some(first) if *first != page.digest => {
                return Err(CliError::Protocol(format!(
                    "the output changed while it was read: sha256 {first}, then {}",
                    page.digest
                )));
            }
            Some(_) => {}
            None => digest = Some(page.digest.clone()),
        }
        out.stdout_bytes(&page.data)?;
        offset += size;
        remaining = remaining.map(|left| left - size);
        if page.eof || remaining == Some(0) {
            return Ok(());
        }
        if size == 0 {
            return Err(CliError::Protocol(format!(
                "an empty page at byte {offset} of an output of {} bytes, before its end",
                page.total_bytes
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest every page of the stand-in's one output carries; its value does not matter.
    const DIGEST: &str = "0123456789abcdef";

    /// A stand-in daemon: serves `output` in pages of at most `max_page` bytes, and records
    /// what it was asked.
    struct Kept {
        output: Vec<u8>,
        max_page: u64,
        asked: Vec<(u64, u64)>,
    }

    impl Kept {
        fn new(size: usize, max_page: u64) -> Self {
            Self {
                output: (0..size).map(|i| (i % 251) as u8).collect(),
                max_page,
                asked: Vec::new(),
            }
        }
    }

    impl Pages for Kept {
        async fn page(&mut self, offset: u64, length: u64) -> Result<ReadOutputResponse, CliError> {
            self.asked.push((offset, length));
            let total = self.output.len() as u64;
            let end = (offset + length.min(self.max_page)).min(total);
            Ok(ReadOutputResponse {
                data: self.output[offset as usize..end as usize].to_vec(),
                offset,
                total_bytes: total,
                eof: end == total,
                digest: DIGEST.to_owned(),
            })
        }
    }

    fn stdout(out: Output<Vec<u8>, Vec<u8>>) -> Vec<u8> {
        out.into_inner().0
    }

    #[tokio::test]
    async fn the_whole_output_streams_page_by_page() -> anyhow::Result<()> {
        let mut kept = Kept::new(2500, 1000);
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        copy(&mut kept, 0, None, &mut out).await?;
        assert_eq!(stdout(out), kept.output);
        assert_eq!(
            kept.asked,
            [(0, PAGE_BYTES), (1000, PAGE_BYTES), (2000, PAGE_BYTES)]
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_range_asks_for_no_more_than_it_prints() -> anyhow::Result<()> {
        let mut kept = Kept::new(2500, 1000);
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        copy(&mut kept, 900, Some(1200), &mut out).await?;
        assert_eq!(stdout(out), kept.output[900..2100]);
        assert_eq!(kept.asked, [(900, 1200), (1900, 200)]);
        Ok(())
    }

    #[tokio::test]
    async fn a_range_past_the_end_stops_at_the_end() -> anyhow::Result<()> {
        let mut kept = Kept::new(2500, 1000);
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        copy(&mut kept, 2400, Some(5000), &mut out).await?;
        assert_eq!(stdout(out), kept.output[2400..]);
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        copy(&mut kept, 2500, None, &mut out).await?;
        assert!(stdout(out).is_empty());
        Ok(())
    }

    /// A daemon that answers with an empty page before the end, or with another output.
    struct Broken {
        empty: bool,
        pages: u64,
    }

    impl Pages for Broken {
        async fn page(&mut self, offset: u64, _: u64) -> Result<ReadOutputResponse, CliError> {
            self.pages += 1;
            let data = if self.empty {
                Vec::new()
            } else {
                vec![b'x'; 10]
            };
            Ok(ReadOutputResponse {
                data,
                offset,
                total_bytes: 100,
                eof: false,
                digest: self.pages.to_string(),
            })
        }
    }

    #[tokio::test]
    async fn a_daemon_that_breaks_the_paging_is_an_error_not_a_loop() {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        let mut empty = Broken {
            empty: true,
            pages: 0,
        };
        let Err(error) = copy(&mut empty, 0, None, &mut out).await else {
            panic!("an empty page was taken for progress");
        };
        assert_eq!(
            error.to_string(),
            "airlockd broke the protocol: an empty page at byte 0 of an output of 100 bytes, \
             before its end"
        );
        assert_eq!(error.exit_code(), exit_code::PROTOCOL);

        let mut changing = Broken {
            empty: false,
            pages: 0,
        };
        let Err(error) = copy(&mut changing, 0, None, &mut out).await else {
            panic!("pages of two outputs were joined");
        };
        assert_eq!(
            error.to_string(),
            "airlockd broke the protocol: the output changed while it was read: sha256 1, then 2"
        );
        assert_eq!(changing.pages, 2);
    }

    #[test]
    fn a_zero_length_is_refused_by_the_grammar() {
        use clap::Parser;
        let parsed =
            crate::cli::Cli::try_parse_from(["airlock", "output", "exe_1", "--length", "0"]);
        assert!(parsed.is_err());
        let parsed = crate::cli::Cli::try_parse_from([
            "airlock", "output", "exe_1", "--offset", "5", "--length", "1",
        ]);
        assert!(parsed.is_ok());
    }
}

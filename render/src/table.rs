//! Aligned tables, such as that of `airlock tools list`: one line per row, columns aligned, the
//! last (free-text) column cut so that each line fits the terminal.
//!
//! Widths are counted in characters. Tool names, versions, profiles, digests and ids are ASCII
//! by the API's rules; a free-text cell with double-width characters may overflow by a few
//! columns, which is preferable to a Unicode-width table in a tool that prints a list.

use std::borrow::Cow;

use super::names::risk_name;
use super::text::{cut, fold_whitespace};
use crate::proto::ToolInfo;

/// Digest characters shown in the table: the length `git` and `docker` use for short ids,
/// ample to tell apart the tools of one daemon. `airlock tools show` prints the whole digest.
pub const SHORT_DIGEST_LEN: usize = 12;

/// The description column (the last column of any table) never gets narrower than this. Below it a cut description says
/// nothing; on a very narrow terminal the line wraps instead.
pub const MIN_DESCRIPTION_WIDTH: usize = 20;

const SEPARATOR: &str = "  ";
const HEADER: [&str; 7] = [
    "NAME",
    "VERSION",
    "RISK",
    "ENGINE",
    "PROFILE",
    "DIGEST",
    "DESCRIPTION",
];

/// The tools as an aligned table with a header line, each line at most `width` characters
/// (unless that would leave the description less than [`MIN_DESCRIPTION_WIDTH`]). Tools are
/// listed in the order given. Lines carry no trailing spaces and end with a newline.
pub fn tools_table(tools: &[ToolInfo], width: usize) -> String {
    aligned_table(HEADER, tools.iter().map(row).collect(), width)
}

/// `rows` under `header`, every column but the last padded to its widest cell, the last cut so
/// that each line is at most `width` characters (but never below [`MIN_DESCRIPTION_WIDTH`]).
/// Lines carry no trailing spaces and end with a newline.
pub(super) fn aligned_table<const N: usize>(
    header: [&str; N],
    rows: Vec<[Cow<'_, str>; N]>,
    width: usize,
) -> String {
    let padded = N.saturating_sub(1);
    let header = header.map(Cow::Borrowed);
    let mut widths = [0usize; N];
    for cells in std::iter::once(&header).chain(&rows) {
        for (column, cell) in cells.iter().take(padded).enumerate() {
            widths[column] = widths[column].max(cell.chars().count());
        }
    }
    let fixed = widths.iter().sum::<usize>() + padded * SEPARATOR.len();
    let last_width = width.saturating_sub(fixed).max(MIN_DESCRIPTION_WIDTH);

    let mut out = String::new();
    for cells in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (cell, width) in cells.iter().zip(widths).take(padded) {
            line.push_str(&format!("{cell:<width$}{SEPARATOR}"));
        }
        if let Some(last) = cells.last() {
            line.push_str(&cut(last, last_width));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn row(tool: &ToolInfo) -> [Cow<'_, str>; 7] {
    let digest = match tool.module_digest.get(..SHORT_DIGEST_LEN) {
        Some(short) => short,
        None => &tool.module_digest,
    };
    [
        or_dash(&tool.name),
        or_dash(&tool.version),
        risk_name(tool.risk),
        or_dash(&tool.engine),
        or_dash(&tool.profile),
        or_dash(digest),
        // A description may span lines in its manifest; a table row may not.
        Cow::Owned(fold_whitespace(&tool.description)),
    ]
}

pub(super) fn or_dash(text: &str) -> Cow<'_, str> {
    Cow::Borrowed(if text.is_empty() { "-" } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Risk;

    fn tool(name: &str, risk: Risk, description: &str) -> ToolInfo {
        ToolInfo {
            name: name.to_owned(),
            version: "0.1.0".to_owned(),
            description: description.to_owned(),
            risk: risk as i32,
            engine: "wasm".to_owned(),
            profile: "readonly".to_owned(),
            module_digest: "0123456789abcdef0123456789abcdef".to_owned(),
            ..ToolInfo::default()
        }
    }

    #[test]
    fn columns_are_aligned_and_lines_unpadded() {
        let tools = [
            tool("read_file", Risk::ReadOnly, "Reads a file."),
            tool("grep", Risk::Destructive, ""),
        ];
        let table = tools_table(&tools, 200);
        assert_eq!(
            table,
            "NAME       VERSION  RISK         ENGINE  PROFILE   DIGEST        DESCRIPTION\n\
             read_file  0.1.0    read_only    wasm    readonly  0123456789ab  Reads a file.\n\
             grep       0.1.0    destructive  wasm    readonly  0123456789ab\n"
        );
    }

    #[test]
    fn long_descriptions_are_cut_to_the_width() {
        let long = "Searches every file of the workspace for a regular expression and reports \
                    each matching line with its number";
        let tools = [tool("grep", Risk::ReadOnly, long)];
        let table = tools_table(&tools, 90);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].chars().count(), 90, "{:?}", lines[1]);
        assert!(lines[1].ends_with('…'), "{:?}", lines[1]);
        let description_start = lines[0].find("DESCRIPTION").unwrap_or(usize::MAX);
        assert_eq!(
            &lines[1][description_start..description_start + 9],
            "Searches "
        );
    }

    #[test]
    fn a_narrow_width_keeps_a_readable_description() {
        let long = "x".repeat(100);
        let tools = [tool("grep", Risk::ReadOnly, &long)];
        let table = tools_table(&tools, 10);
        let Some(row) = table.lines().nth(1) else {
            panic!("no row in {table:?}");
        };
        let description = row.rsplit(SEPARATOR).next().unwrap_or_default();
        assert_eq!(description.chars().count(), MIN_DESCRIPTION_WIDTH);
        assert_eq!(
            description,
            format!("{}…", "x".repeat(MIN_DESCRIPTION_WIDTH - 1))
        );
    }

    #[test]
    fn multi_line_descriptions_fold_into_one_line() {
        let tools = [tool("a", Risk::Write, "first line\n   second\tline\n")];
        let table = tools_table(&tools, 200);
        assert!(table.ends_with("  first line second line\n"), "{table:?}");
    }

    #[test]
    fn missing_fields_show_a_dash_and_short_digests_stay_whole() {
        let tools = [ToolInfo {
            name: "bare".to_owned(),
            module_digest: "abc".to_owned(),
            ..ToolInfo::default()
        }];
        let table = tools_table(&tools, 200);
        let Some(row) = table.lines().nth(1) else {
            panic!("no row in {table:?}");
        };
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells, ["bare", "-", "unspecified", "-", "-", "abc"]);
    }
}

//! What `airlock` prints: tables and detail views of tools, a tool call's result, and the JSON
//! forms of both. Every function here is pure (text in, text out), so that the output is
//! stable and tested; writing it, and knowing the terminal, is the command line's business.

mod names;
mod pretty;
mod result;
mod sanitize;
mod table;
mod tool;
mod units;
mod views;

pub use names::{risk_name, status_name, truncate_mode_name};
pub use pretty::pretty_json;
pub use result::{result_content, result_status_line};
pub use sanitize::escape_control_bytes;
pub use table::{MIN_DESCRIPTION_WIDTH, SHORT_DIGEST_LEN, tools_table};
pub use tool::tool_details;
pub use units::{format_bytes, format_micros, format_millis};
pub use views::{result_json, tool_json, tools_json};

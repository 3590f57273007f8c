//! The one line that shows a tool is still running, redrawn in place on a terminal.

use super::units::{format_bytes, format_millis};

/// The spinner's frames, one per redraw.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// `⠹ grep running, 2.40 s, 12.0 KiB of output`: the tool, how long it has run, and how much
/// it has written (which tells a busy tool from a stuck one). `frame` counts redraws.
pub fn progress_line(tool: &str, elapsed_ms: u64, output_bytes: u64, frame: usize) -> String {
    let spinner = FRAMES[frame % FRAMES.len()];
    let mut line = format!("{spinner} {tool} running, {}", format_millis(elapsed_ms));
    if output_bytes > 0 {
        line.push_str(&format!(", {} of output", format_bytes(output_bytes)));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_tool_its_time_and_its_output() {
        assert_eq!(progress_line("grep", 250, 0, 0), "⠋ grep running, 250 ms");
        assert_eq!(
            progress_line("grep", 2_400, 12_288, 11),
            "⠙ grep running, 2.40 s, 12.0 KiB of output"
        );
    }
}

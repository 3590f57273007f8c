//! Keeping untrusted text from driving the terminal.
//!
//! A tool's output and messages are untrusted data. Written raw to a terminal, an escape
//! sequence in them could retitle the window, rewrite what is on screen, or on some terminals
//! set the clipboard. Control characters are therefore shown as visible escapes when the text
//! goes to a terminal; a pipe or a file gets the bytes as they are.

use std::borrow::Cow;

/// `bytes` with every C0 control character but tab, line feed and carriage return, and DEL,
/// replaced by a visible `\xNN` escape. Works on raw bytes, so a chunk that splits a UTF-8
/// sequence is safe: no byte of a multi-byte sequence is below 0x80.
pub fn escape_control_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    if !bytes.iter().copied().any(is_dangerous) {
        return Cow::Borrowed(bytes);
    }
    let mut escaped = Vec::with_capacity(bytes.len() + 16);
    for &byte in bytes {
        if is_dangerous(byte) {
            escaped.extend_from_slice(format!("\\x{byte:02x}").as_bytes());
        } else {
            escaped.push(byte);
        }
    }
    Cow::Owned(escaped)
}

fn is_dangerous(byte: u8) -> bool {
    // `is_ascii_control` covers DEL as well as C0.
    byte.is_ascii_control() && !matches!(byte, b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_untouched() {
        let text = "line one\n\ttabbed\r\nünïcode ✓".as_bytes();
        assert!(matches!(escape_control_bytes(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn escape_sequences_become_visible() {
        let text = b"\x1b]0;owned\x07red \x1b[31mtext\x7f\x00";
        assert_eq!(
            escape_control_bytes(text).as_ref(),
            b"\\x1b]0;owned\\x07red \\x1b[31mtext\\x7f\\x00"
        );
    }

    #[test]
    fn split_utf8_sequences_pass_through() {
        let check = "✓".as_bytes();
        assert_eq!(escape_control_bytes(&check[..1]).as_ref(), &check[..1]);
        assert_eq!(escape_control_bytes(&check[1..]).as_ref(), &check[1..]);
    }
}

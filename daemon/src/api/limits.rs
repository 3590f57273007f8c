//! Bounds on what a client may send, checked before anything is parsed further or run.

use super::error::ApiError;

/// The largest gRPC message either service decodes. The biggest legitimate requests are a
/// run's input and a tool call's arguments (each bounded below); 4 MiB is tonic's default
/// and leaves room for both with their envelope. A message over it is refused from its length
/// prefix, before it is read, with RESOURCE_EXHAUSTED (`api::message_size`).
pub const MAX_DECODING_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The largest gRPC message either service encodes. Replies carry pages of kept output, run
/// events and traces; a trace of a long run is the largest, and 16 MiB holds thousands of
/// spans while keeping one reply from pinning unbounded memory.
pub const MAX_ENCODING_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The largest `arguments_json` of a direct tool call. Arguments are a JSON document a tool
/// reads on stdin: paths, patterns, a file's new content; 1 MiB covers real edits, and the
/// schema validator walks the whole document, so its size bounds that work too.
pub const MAX_ARGUMENTS_BYTES: usize = 1024 * 1024;

/// The largest header list a client may send (HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE): the
/// authorization token and gRPC's own headers fit in far less; an attacker's megabytes of
/// metadata do not.
pub const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;

/// Refuses arguments over [`MAX_ARGUMENTS_BYTES`], naming the limit.
pub(super) fn check_arguments(arguments_json: &str) -> Result<(), ApiError> {
    if arguments_json.len() > MAX_ARGUMENTS_BYTES {
        return Err(ApiError::invalid(
            "arguments_json",
            format!(
                "{} bytes; the limit is {MAX_ARGUMENTS_BYTES} bytes",
                arguments_json.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_at_the_limit_pass_and_one_byte_more_does_not() {
        assert!(check_arguments(&"x".repeat(MAX_ARGUMENTS_BYTES)).is_ok());
        let err = check_arguments(&"x".repeat(MAX_ARGUMENTS_BYTES + 1)).expect_err("over");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.to_string().starts_with("arguments_json: "), "{err}");
        assert!(err.to_string().contains(&MAX_ARGUMENTS_BYTES.to_string()));
    }
}

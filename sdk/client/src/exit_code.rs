//! The exit codes of `airlock`.
//!
//! A tool call that got an answer exits with the code of its status (0 to 8), so that a script
//! can branch on what happened to the tool. A failure of `airlock` itself exits with one of the
//! BSD `sysexits.h` codes (64 and up), which no tool status uses, so that "the tool failed" is
//! never confused with "airlock could not ask".
//!
//! | code | meaning |
//! | ---: | --- |
//! | 0 | `OK` |
//! | 1 | `TOOL_ERROR` |
//! | 2 | `INVALID_ARGUMENTS` |
//! | 3 | `DENIED` |
//! | 4 | `TIMEOUT` |
//! | 5 | `CANCELLED` |
//! | 6 | `LIMIT_EXCEEDED` |
//! | 7 | `SANDBOX_ERROR` |
//! | 8 | `OUTCOME_UNKNOWN` |
//! | 64 | usage error: bad command line, bad `--args`, bad workspace, unknown tool |
//! | 69 | the daemon is unreachable |
//! | 70 | any other failure of a call: an internal daemon error, a broken protocol |
//! | 74 | the output could not be written |
//! | 130 | interrupted by Ctrl-C (128 + SIGINT, what a shell reports) |

use tonic::Code;

use crate::proto::ToolStatus;

/// The call succeeded (`OK`), or a command that runs no tool succeeded.
pub const OK: u8 = 0;
/// `EX_USAGE`: the command was used incorrectly.
pub const USAGE: u8 = 64;
/// `EX_UNAVAILABLE`: the daemon could not be reached.
pub const UNAVAILABLE: u8 = 69;
/// `EX_SOFTWARE`: the daemon failed the call, or broke the protocol.
pub const SOFTWARE: u8 = 70;
/// `EX_IOERR`: writing the output failed.
pub const IO_ERROR: u8 = 74;
/// The user pressed Ctrl-C: 128 + SIGINT, the code a shell gives a process killed by it.
pub const INTERRUPTED: u8 = 130;

/// The exit code of a finished tool call with this status.
///
/// `UNSPECIFIED` never comes from a correct daemon: a result without a status is a protocol
/// error, [`SOFTWARE`].
pub fn for_status(status: ToolStatus) -> u8 {
    match status {
        ToolStatus::Ok => OK,
        ToolStatus::ToolError => 1,
        ToolStatus::InvalidArguments => 2,
        ToolStatus::Denied => 3,
        ToolStatus::Timeout => 4,
        ToolStatus::Cancelled => 5,
        ToolStatus::LimitExceeded => 6,
        ToolStatus::SandboxError => 7,
        ToolStatus::OutcomeUnknown => 8,
        ToolStatus::Unspecified => SOFTWARE,
    }
}

/// [`for_status`] of the status as it arrives on the wire. A value this client does not know
/// (from a newer daemon) cannot be reported faithfully, so it is [`SOFTWARE`].
pub fn for_raw_status(status: i32) -> u8 {
    ToolStatus::try_from(status).map_or(SOFTWARE, for_status)
}

/// The exit code of a call the daemon answered with a gRPC error status.
///
/// The daemon answers `INVALID_ARGUMENT`, `NOT_FOUND` and `OUT_OF_RANGE` when the request
/// itself is wrong (a workspace outside its roots, an unknown tool, an offset past the end):
/// the user's mistake, [`USAGE`]. `UNAVAILABLE` means the connection is gone.
pub fn for_rpc_code(code: Code) -> u8 {
    match code {
        Code::InvalidArgument | Code::NotFound | Code::OutOfRange => USAGE,
        Code::Unavailable => UNAVAILABLE,
        Code::Ok
        | Code::Cancelled
        | Code::Unknown
        | Code::DeadlineExceeded
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::Aborted
        | Code::Unimplemented
        | Code::Internal
        | Code::DataLoss
        | Code::Unauthenticated => SOFTWARE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_documented_code() {
        let expected = [
            (ToolStatus::Unspecified, 70),
            (ToolStatus::Ok, 0),
            (ToolStatus::ToolError, 1),
            (ToolStatus::InvalidArguments, 2),
            (ToolStatus::Denied, 3),
            (ToolStatus::Timeout, 4),
            (ToolStatus::Cancelled, 5),
            (ToolStatus::LimitExceeded, 6),
            (ToolStatus::SandboxError, 7),
            (ToolStatus::OutcomeUnknown, 8),
        ];
        for (status, code) in expected {
            assert_eq!(for_status(status), code, "{status:?}");
            assert_eq!(
                for_raw_status(status as i32),
                code,
                "{status:?} on the wire"
            );
        }
    }

    #[test]
    fn tool_codes_never_collide_with_client_failures() {
        let client_codes = [USAGE, UNAVAILABLE, SOFTWARE, IO_ERROR, INTERRUPTED];
        for raw in 1..=9 {
            assert!(!client_codes.contains(&for_raw_status(raw)), "status {raw}");
        }
    }

    #[test]
    fn an_unknown_status_is_a_software_error() {
        assert_eq!(for_raw_status(42), SOFTWARE);
        assert_eq!(for_raw_status(-1), SOFTWARE);
    }

    #[test]
    fn rpc_codes_split_into_usage_unavailable_and_software() {
        assert_eq!(for_rpc_code(Code::NotFound), USAGE);
        assert_eq!(for_rpc_code(Code::InvalidArgument), USAGE);
        assert_eq!(for_rpc_code(Code::OutOfRange), USAGE);
        assert_eq!(for_rpc_code(Code::Unavailable), UNAVAILABLE);
        assert_eq!(for_rpc_code(Code::Internal), SOFTWARE);
        assert_eq!(for_rpc_code(Code::PermissionDenied), SOFTWARE);
        assert_eq!(for_rpc_code(Code::Unimplemented), SOFTWARE);
    }
}

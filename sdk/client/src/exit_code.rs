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
//!
//! An agent run (`airlock run`, `airlock attach`) exits with the code of its stop reason, chosen
//! to mean the same as the tool status it resembles:
//!
//! | code | stop reason |
//! | ---: | --- |
//! | 0 | `FINAL` |
//! | 3 | `PERMISSION_DENIED` (as a tool's `DENIED`) |
//! | 6 | `MAX_STEPS`, `BUDGET_EXHAUSTED`, `REPEATED_ERRORS`: the run hit a limit (as `LIMIT_EXCEEDED`) |
//! | 70 | `MODEL_ERROR`: the model provider failed; or a reason this client does not know |
//! | 130 | `CANCELLED`, by Ctrl-C or by any client |

use tonic::Code;

use crate::proto::{StopReason, ToolStatus};

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

/// A denied call ended the run: the code of a tool's `DENIED`.
pub const RUN_DENIED: u8 = 3;
/// The run hit one of its limits (steps, tokens, wall time, tool calls, repeated errors): the
/// code of a tool's `LIMIT_EXCEEDED`.
pub const RUN_LIMIT: u8 = 6;

/// The exit code of a run that ended for `reason`.
///
/// A cancelled run exits like a process stopped by Ctrl-C, whoever cancelled it: the run did
/// not finish, and scripts already treat 130 as "stopped on request". A failing model provider
/// is a failure of the machinery, not of the task, so it shares [`SOFTWARE`].
pub fn for_stop_reason(reason: StopReason) -> u8 {
    match reason {
        StopReason::Final => OK,
        StopReason::PermissionDenied => RUN_DENIED,
        StopReason::MaxSteps | StopReason::BudgetExhausted | StopReason::RepeatedErrors => {
            RUN_LIMIT
        }
        StopReason::Cancelled => INTERRUPTED,
        StopReason::ModelError | StopReason::Unspecified => SOFTWARE,
    }
}

/// [`for_stop_reason`] of the reason as it arrives on the wire; a reason this client does not
/// know (from a newer daemon) is [`SOFTWARE`].
pub fn for_raw_stop_reason(reason: i32) -> u8 {
    StopReason::try_from(reason).map_or(SOFTWARE, for_stop_reason)
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
    fn every_stop_reason_has_its_documented_code() {
        let expected = [
            (StopReason::Unspecified, 70),
            (StopReason::Final, 0),
            (StopReason::MaxSteps, 6),
            (StopReason::BudgetExhausted, 6),
            (StopReason::RepeatedErrors, 6),
            (StopReason::Cancelled, 130),
            (StopReason::PermissionDenied, 3),
            (StopReason::ModelError, 70),
        ];
        for (reason, code) in expected {
            assert_eq!(for_stop_reason(reason), code, "{reason:?}");
            assert_eq!(
                for_raw_stop_reason(reason as i32),
                code,
                "{reason:?} on the wire"
            );
        }
        assert_eq!(for_raw_stop_reason(99), SOFTWARE);
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

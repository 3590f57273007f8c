//! The exit codes of `airlock`: one table for every subcommand.
//!
//! A tool call that got an answer exits with the code of its status (0 to 8), so that a script
//! can branch on what happened to the tool. A failure of `airlock` itself exits with one of the
//! BSD `sysexits.h` codes (64 and up), which no tool status uses, so that "the tool failed" is
//! never confused with "airlock could not ask". The tool's own exit code is never `airlock`'s:
//! the status line shows it as `tool exit code`.
//!
//! | code | meaning |
//! | ---: | --- |
//! | 0 | `OK`, or a command that runs no tool succeeded |
//! | 1 | `TOOL_ERROR` |
//! | 2 | `INVALID_ARGUMENTS` |
//! | 3 | `DENIED` |
//! | 4 | `TIMEOUT` |
//! | 5 | `CANCELLED` |
//! | 6 | `LIMIT_EXCEEDED` |
//! | 7 | `SANDBOX_ERROR` |
//! | 8 | `OUTCOME_UNKNOWN` |
//! | 64 | `EX_USAGE`: the command was wrong — a flag, `--args`, a workspace, an unknown tool or id, a request the daemon refused as malformed (`INVALID_ARGUMENT`, `NOT_FOUND`, `OUT_OF_RANGE`, `FAILED_PRECONDITION`) |
//! | 66 | `EX_NOINPUT`: a file the command names cannot be read (`--args @FILE`, a script, a certificate, a token file) |
//! | 69 | `EX_UNAVAILABLE`: the daemon cannot be reached, went away mid-call, or answered `UNAVAILABLE` |
//! | 70 | `EX_SOFTWARE`: the daemon failed inside (`INTERNAL`, `UNKNOWN`, `DATA_LOSS`) |
//! | 74 | `EX_IOERR`: the output could not be written |
//! | 75 | `EX_TEMPFAIL`: a cap was reached (`RESOURCE_EXHAUSTED`: too many runs or calls at once), or the call timed out or was aborted; try again later |
//! | 76 | `EX_PROTOCOL`: the server is not airlockd, is older than this client (`UNIMPLEMENTED`), or broke the protocol |
//! | 77 | `EX_NOPERM`: the token is missing or refused (`UNAUTHENTICATED`), the tenant may not do this (`PERMISSION_DENIED`), or a TLS certificate was refused |
//! | 130 | interrupted by Ctrl-C (128 + SIGINT, what a shell reports) |
//!
//! An agent run (`airlock run`, `airlock runs attach`) exits with the code of its stop reason,
//! chosen to mean the same as the tool status or failure it resembles:
//!
//! | code | stop reason |
//! | ---: | --- |
//! | 0 | `FINAL` |
//! | 3 | `PERMISSION_DENIED` (as a tool's `DENIED`) |
//! | 6 | `MAX_STEPS`, `BUDGET_EXHAUSTED`, `REPEATED_ERRORS`: the run hit a limit (as `LIMIT_EXCEEDED`) |
//! | 10 | `NO_PROGRESS`: the run went round in circles (the same call with the same result again and again, or steps that changed and observed nothing); no tool status is like it |
//! | 69 | `MODEL_ERROR`: the model provider failed (as an unavailable service) |
//! | 70 | a reason this client does not know |
//! | 130 | `CANCELLED`, by Ctrl-C or by any client |

use tonic::Code;

use crate::proto::{StopReason, ToolStatus};

/// The call succeeded (`OK`), or a command that runs no tool succeeded.
pub const OK: u8 = 0;
/// `EX_USAGE`: the command was used incorrectly.
pub const USAGE: u8 = 64;
/// `EX_NOINPUT`: a file the command names cannot be read.
pub const NO_INPUT: u8 = 66;
/// `EX_UNAVAILABLE`: the daemon (or, for a run, the model provider) could not serve.
pub const UNAVAILABLE: u8 = 69;
/// `EX_SOFTWARE`: the daemon failed inside.
pub const SOFTWARE: u8 = 70;
/// `EX_IOERR`: writing the output failed.
pub const IO_ERROR: u8 = 74;
/// `EX_TEMPFAIL`: a cap or a deadline; the same command may succeed later.
pub const TEMPORARY: u8 = 75;
/// `EX_PROTOCOL`: the server is not (this version of) airlockd, or broke the protocol.
pub const PROTOCOL: u8 = 76;
/// `EX_NOPERM`: no token, a refused token, a tenant without the right, a refused certificate.
pub const NO_PERMISSION: u8 = 77;
/// The user pressed Ctrl-C: 128 + SIGINT, the code a shell gives a process killed by it.
pub const INTERRUPTED: u8 = 130;

/// The exit code of a finished tool call with this status.
///
/// `UNSPECIFIED` never comes from a correct daemon: a result without a status is a protocol
/// error, [`PROTOCOL`].
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
        ToolStatus::Unspecified => PROTOCOL,
    }
}

/// [`for_status`] of the status as it arrives on the wire. A value this client does not know
/// (from a newer daemon) cannot be reported faithfully, so it is [`PROTOCOL`].
pub fn for_raw_status(status: i32) -> u8 {
    ToolStatus::try_from(status).map_or(PROTOCOL, for_status)
}

/// A revert put back everything it could, but some paths could not be restored byte for
/// byte (their contents were not kept): the code of a tool's `TOOL_ERROR`.
pub const REVERT_PARTIAL: u8 = 1;

/// `airlock tools check` found something wrong with the tool, or `airlock tools build`'s
/// command failed: the code of a tool's `TOOL_ERROR`.
pub const CHECK_FAILED: u8 = 1;

/// A denied call ended the run: the code of a tool's `DENIED`.
pub const RUN_DENIED: u8 = 3;
/// The run hit one of its limits (steps, tokens, wall time, tool calls, repeated errors): the
/// code of a tool's `LIMIT_EXCEEDED`.
pub const RUN_LIMIT: u8 = 6;

/// The run stopped making progress (`NO_PROGRESS`). Unlike the other stop reasons it resembles
/// no tool status, so it has a code of its own: past the tool statuses (0–8, with 9 left for
/// the next status the API adds) and below the `sysexits.h` codes, so that a script can tell a
/// run stuck in a loop from one that ran out of budget.
pub const RUN_NO_PROGRESS: u8 = 10;

/// The exit code of a run that ended for `reason`.
///
/// A cancelled run exits like a process stopped by Ctrl-C, whoever cancelled it: the run did
/// not finish, and scripts already treat 130 as "stopped on request". A failing model provider
/// is a service that could not serve: [`UNAVAILABLE`].
pub fn for_stop_reason(reason: StopReason) -> u8 {
    match reason {
        StopReason::Final => OK,
        StopReason::PermissionDenied => RUN_DENIED,
        StopReason::MaxSteps | StopReason::BudgetExhausted | StopReason::RepeatedErrors => {
            RUN_LIMIT
        }
        StopReason::Cancelled => INTERRUPTED,
        StopReason::ModelError => UNAVAILABLE,
        StopReason::NoProgress => RUN_NO_PROGRESS,
        StopReason::Unspecified => SOFTWARE,
    }
}

/// [`for_stop_reason`] of the reason as it arrives on the wire; a reason this client does not
/// know (from a newer daemon) is [`SOFTWARE`].
pub fn for_raw_stop_reason(reason: i32) -> u8 {
    StopReason::try_from(reason).map_or(SOFTWARE, for_stop_reason)
}

/// The exit code of a call the daemon answered with a gRPC error status (the statuses are
/// listed in `proto/API.md`).
pub fn for_rpc_code(code: Code) -> u8 {
    match code {
        Code::Ok => OK,
        Code::InvalidArgument
        | Code::NotFound
        | Code::OutOfRange
        | Code::FailedPrecondition
        | Code::AlreadyExists => USAGE,
        Code::Unauthenticated | Code::PermissionDenied => NO_PERMISSION,
        Code::ResourceExhausted | Code::DeadlineExceeded | Code::Aborted => TEMPORARY,
        Code::Unavailable => UNAVAILABLE,
        Code::Unimplemented => PROTOCOL,
        Code::Cancelled => INTERRUPTED,
        Code::Unknown | Code::Internal | Code::DataLoss => SOFTWARE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_documented_code() {
        let expected = [
            (ToolStatus::Unspecified, 76),
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
        let client_codes = [
            USAGE,
            NO_INPUT,
            UNAVAILABLE,
            SOFTWARE,
            IO_ERROR,
            TEMPORARY,
            NO_PERMISSION,
            INTERRUPTED,
        ];
        for raw in 1..=9 {
            assert!(!client_codes.contains(&for_raw_status(raw)), "status {raw}");
        }
    }

    #[test]
    fn no_progress_has_a_code_no_status_and_no_failure_uses() {
        let code = for_stop_reason(StopReason::NoProgress);
        assert_eq!(code, RUN_NO_PROGRESS);
        for raw in 0..=9 {
            assert_ne!(for_raw_status(raw), code, "status {raw}");
        }
        assert!(code < USAGE);
        for reason in [
            StopReason::Final,
            StopReason::MaxSteps,
            StopReason::RepeatedErrors,
            StopReason::PermissionDenied,
        ] {
            assert_ne!(for_stop_reason(reason), code, "{reason:?}");
        }
    }

    #[test]
    fn an_unknown_status_is_a_protocol_error() {
        assert_eq!(for_raw_status(42), PROTOCOL);
        assert_eq!(for_raw_status(-1), PROTOCOL);
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
            (StopReason::ModelError, 69),
            (StopReason::NoProgress, 10),
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
    fn every_rpc_code_has_its_documented_class() {
        for (code, exit) in [
            (Code::InvalidArgument, USAGE),
            (Code::NotFound, USAGE),
            (Code::OutOfRange, USAGE),
            (Code::FailedPrecondition, USAGE),
            (Code::Unauthenticated, NO_PERMISSION),
            (Code::PermissionDenied, NO_PERMISSION),
            (Code::ResourceExhausted, TEMPORARY),
            (Code::DeadlineExceeded, TEMPORARY),
            (Code::Unavailable, UNAVAILABLE),
            (Code::Unimplemented, PROTOCOL),
            (Code::Internal, SOFTWARE),
            (Code::DataLoss, SOFTWARE),
            (Code::Unknown, SOFTWARE),
        ] {
            assert_eq!(for_rpc_code(code), exit, "{code:?}");
        }
    }
}

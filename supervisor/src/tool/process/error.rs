//! What went wrong with a tool process, in words the agent reads: what happened, what to do,
//! and the tail of the tool's stderr.

use super::{EgressSetupError, Misuse, SandboxMode};
use crate::tool::launcher::LauncherError;
use autotool_policy::PolicyError;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Why a tool did not become a working MCP server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitFailure {
    #[error("it gave no answer to `initialize` within {}", secs(*after))]
    NoAnswer { after: Duration },
    #[error("it ended ({exit}) before answering `initialize`")]
    Exited {
        status: Option<ExitStatus>,
        exit: String,
    },
    #[error("{what}")]
    Garbage { what: String },
    #[error("the `initialize` handshake failed: {what}")]
    Handshake { what: String },
}

/// What went wrong with a tool process. Messages say what happened and what to do, and quote
/// the tail of the tool's stderr verbatim (redact before showing them to a model).
#[derive(Debug, thiserror::Error)]
pub enum ToolProcError {
    #[error("the tool's launch policy is invalid: {0}")]
    Policy(#[from] PolicyError),
    #[error("the tool cannot be confined: {0}")]
    Launcher(#[from] LauncherError),
    #[error(
        "could not start {program:?}: {source}; check the Python runtime and the launcher with `autotool doctor`"
    )]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the tool's egress proxy could not be set up: {what}; check the launcher with `autotool doctor`.{}",
        stderr_section(stderr_tail)
    )]
    Egress {
        what: EgressSetupError,
        stderr_tail: String,
    },
    #[error(
        "the tool did not start as an MCP server: {reason}. A tool must be a Python MCP server that ends with `mcp.run()` and writes nothing but MCP messages to stdout (log to stderr).{}",
        stderr_section(stderr_tail)
    )]
    Initialize {
        reason: InitFailure,
        stderr_tail: String,
    },
    #[error(
        "`{operation}` got no answer within {}, so the tool process was stopped; make the function return sooner, or give it a longer timeout.{}",
        secs(*after),
        stderr_section(stderr_tail)
    )]
    Timeout {
        operation: String,
        after: Duration,
        stderr_tail: String,
    },
    #[error(
        "the tool process ended ({exit}) before answering `{operation}`; fix what its stderr shows (a crash, an exit, a limit) and start it again.{}",
        stderr_section(stderr_tail)
    )]
    Exited {
        operation: String,
        status: Option<ExitStatus>,
        exit: String,
        stderr_tail: String,
    },
    #[error(
        "the tool broke the MCP protocol during `{operation}`: {what}. It was stopped; print diagnostics to stderr (`print(..., file=sys.stderr)` or `logging`), never to stdout.{}",
        stderr_section(stderr_tail)
    )]
    Protocol {
        operation: String,
        what: String,
        stderr_tail: String,
    },
    #[error(
        "during `{operation}`, {}, so the tool was stopped. {}{}",
        misuse.what(),
        misuse.advice(),
        stderr_section(stderr_tail)
    )]
    Misused {
        operation: String,
        misuse: Misuse,
        stderr_tail: String,
    },
    #[error("the tool refused `{operation}` with JSON-RPC error {code}: {message}")]
    Rejected {
        operation: String,
        code: i32,
        message: String,
    },
    #[error(
        "`{operation}` was not answered: the tool process is not running any more ({why}); start it again"
    )]
    Stopped { operation: String, why: String },
}

pub(super) fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn stderr_section(tail: &str) -> String {
    if tail.is_empty() {
        " It wrote nothing to stderr.".to_string()
    } else {
        format!("\n--- the tool's stderr, last lines ---\n{tail}")
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        15 => "SIGTERM".into(),
        24 => "SIGXCPU: its CPU-time limit".into(),
        25 => "SIGXFSZ: its file-size limit".into(),
        31 => "SIGSYS: a system call the sandbox refuses".into(),
        n => format!("signal {n}"),
    }
}

/// Say how a process ended. Under the launcher, 125 is the launcher's own failure and 128+N
/// the tool's death by signal N.
pub(super) fn describe_exit(status: Option<ExitStatus>, sandbox: SandboxMode) -> String {
    let Some(status) = status else {
        return "its exit status could not be read".into();
    };
    if let Some(sig) = status.signal() {
        return format!("killed by {}", signal_name(sig));
    }
    match (status.code(), sandbox) {
        (Some(125), SandboxMode::Strict) => {
            "exit status 125: autotool-launcher could not start it, for the reason in its stderr"
                .into()
        }
        (Some(c), SandboxMode::Strict) if (129..=192).contains(&c) => {
            format!("exit status {c}: killed by {}", signal_name(c - 128))
        }
        (Some(c), _) => format!("exit status {c}"),
        (None, _) => "no exit status".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exits_are_described_for_each_mode() {
        let code = |c: i32| Some(ExitStatus::from_raw(c << 8));
        assert_eq!(describe_exit(code(3), SandboxMode::Off), "exit status 3");
        assert_eq!(describe_exit(code(3), SandboxMode::Strict), "exit status 3");
        assert!(describe_exit(code(125), SandboxMode::Strict).contains("autotool-launcher"));
        assert_eq!(
            describe_exit(code(137), SandboxMode::Strict),
            "exit status 137: killed by SIGKILL"
        );
        assert_eq!(
            describe_exit(code(137), SandboxMode::Off),
            "exit status 137"
        );
        assert_eq!(
            describe_exit(Some(ExitStatus::from_raw(9)), SandboxMode::Off),
            "killed by SIGKILL"
        );
        assert_eq!(
            describe_exit(None, SandboxMode::Off),
            "its exit status could not be read"
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(secs(Duration::from_secs(20)), "20 s");
        assert_eq!(secs(Duration::from_millis(1500)), "1.5 s");
    }
}

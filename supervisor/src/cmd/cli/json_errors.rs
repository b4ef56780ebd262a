//! Errors in JSON: a command line that carries `--json` gets its errors as JSON on stdout too.

use super::{Cmd, ServiceCmd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set when the command carries `--json`: errors are then JSON on stdout too.
pub(super) static JSON_ERRORS: AtomicBool = AtomicBool::new(false);

/// Whether this command line asked for JSON.
pub(super) fn wants_json(cmd: &Cmd) -> bool {
    use crate::cmd::keys::KeysCmd;
    use crate::cmd::runtime::RuntimeCmd;
    use crate::cmd::tools::ToolsCmd;
    match cmd {
        Cmd::Doctor { json } | Cmd::Config { json, .. } => *json,
        Cmd::Events(args) => args.json,
        Cmd::Add(args) => args.json,
        Cmd::Service {
            cmd: ServiceCmd::Status { json },
        } => *json,
        Cmd::Tools {
            cmd: ToolsCmd::List { json } | ToolsCmd::Show { json, .. },
        } => *json,
        #[cfg(feature = "team")]
        Cmd::Tools {
            cmd: ToolsCmd::Team(t),
        } => t.json(),
        #[cfg(feature = "team")]
        Cmd::Trust {
            cmd: crate::cmd::team::TrustCmd::List { json },
        }
        | Cmd::Library {
            cmd:
                crate::cmd::follow::LibraryCmd::Status { json }
                | crate::cmd::follow::LibraryCmd::Follow { json, .. },
        } => *json,
        Cmd::Keys {
            cmd: KeysCmd::List { json },
        } => *json,
        Cmd::Hosts {
            cmd: crate::cmd::hosts::HostsCmd::List { json },
        } => *json,
        Cmd::Dirs {
            cmd: crate::cmd::dirs::DirsCmd::List { json },
        } => *json,
        Cmd::Runtime {
            cmd: RuntimeCmd::Status { json },
        } => *json,
        _ => false,
    }
}

/// The JSON form of an error: `{"error": {"command", "message", "exit_code"}}`.
pub fn error_json(command: &str, message: &str, exit_code: u8) -> String {
    serde_json::json!({
        "error": {
            "command": format!("autotool {command}").trim_end(),
            "message": message,
            "exit_code": exit_code,
        }
    })
    .to_string()
}

/// Report that `autotool COMMAND` failed with `message`: `autotool COMMAND: message` on
/// stderr, or with `--json` the JSON form on stdout. Returns exit status 1.
pub fn fail(command: &str, message: &str) -> ExitCode {
    // The message can quote a registry's or a tool's words: escaped like all output.
    if JSON_ERRORS.load(Ordering::Relaxed) {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let json = error_json(command, message, 1);
        let _ = writeln!(stdout, "{}", crate::terminal::escape_text(&json));
    } else {
        crate::terminal::eprint_line(&format!("autotool {command}: {message}"));
    }
    ExitCode::FAILURE
}

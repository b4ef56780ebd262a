//! `autotool-launcher` as the wheel carries it, beside `autotool` (which finds it there): the
//! same entry point as `launcher/src/main.rs`, whose doc lists the confinement stages.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match autotool_launcher::cli(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            autotool_launcher::report(&err);
            ExitCode::from(autotool_launcher::LAUNCHER_FAILED)
        }
    }
}

//! What autotool prints of its own making: man pages (and the outcome of writing any generated
//! text, where a reader that stopped reading has what it wanted).

use clap::CommandFactory as _;
use std::process::ExitCode;

/// `autotool man [--dir DIR]`.
pub(super) fn man(dir: Option<&std::path::Path>, out: &mut dyn std::io::Write) -> ExitCode {
    let cmd = super::cli::Cli::command();
    let done = match dir {
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(cmd, dir))
            .and_then(|()| writeln!(out, "man pages written to {}", dir.display())),
        None => clap_mangen::Man::new(cmd).render(out),
    };
    written("man", done)
}

/// The outcome of writing a command's output: a reader that stopped reading (`| head`) has
/// what it wanted.
pub(super) fn written(command: &str, result: std::io::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => super::fail(command, &format!("cannot write the output: {e}")),
    }
}

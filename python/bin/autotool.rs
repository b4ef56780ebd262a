//! `autotool` as the wheel carries it: the same entry point as `supervisor/src/main.rs`.
#![deny(clippy::print_stdout)]

fn main() -> std::process::ExitCode {
    autotool::cmd::cli::main()
}

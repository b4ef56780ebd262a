//! `autotool`: the command line ([`autotool::cmd`]).
#![deny(clippy::print_stdout)]

fn main() -> std::process::ExitCode {
    autotool::cmd::cli::main()
}

#![recursion_limit = "256"]
//! toolgraph's command line: parse arguments, load configuration, start tracing, call one library
//! function per command.

mod cli;
mod users;

fn main() -> std::process::ExitCode {
    cli::main()
}

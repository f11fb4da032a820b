//! The `quantenergy` binary: the command line of [`cli::run`].

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::run(std::env::args_os()))
}

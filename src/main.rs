//! The `sentin8-cron` binary: parse the command line, run the subcommand, map the outcome to an
//! exit code. Everything else lives in the library so tests can drive it in-process.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use sentin8_cron::cmd::{self, Cli};

/// A burst's calls allocate on many threads at once, where mimalloc costs less than the system
/// allocator (allocation was about a sixth of serve's CPU in a 20,000 burst).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse_env();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(cmd::EXIT_RUNTIME);
        }
    };
    // A closed pipe (`... | head -1`) is the reader being done, not an error: the rest of the
    // output is dropped and the command ends with the status its work earned.
    let mut stdout = cmd::output::ClosedPipeIsDone::new(std::io::stdout());
    match runtime.block_on(cmd::run(cli, &mut stdout)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", cmd::message(&err));
            cmd::exit_code(&err)
        }
    }
}

//! `rimthan`: the thin command-line front of the rimthan libraries.
//!
//! Exit codes: 0 success; 1 the input was rejected (a registry failed verification, a source
//! or argument is invalid); 2 usage error; 3 internal or I/O failure.

mod commands;

use std::process::ExitCode;

use clap::Parser;

/// A server's requests allocate and free many short-lived buffers (bodies, JSON values, the
/// check interpreter's values) across worker threads; mimalloc's per-thread free lists serve them
/// with less work than the system allocator (`docs/performance.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`rimthan registry inspect | head`) is the reader's choice, not a failure.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            match err.downcast_ref::<rimthan_registry::RegistryError>() {
                Some(e) => eprintln!("error[{}]: {err:#}", e.code()),
                // Waiting for people is where a run stops, not an error.
                None if err.is::<commands::AwaitingSignOff>() => eprintln!("{err:#}"),
                None => eprintln!("error: {err:#}"),
            }
            ExitCode::from(commands::exit_code(&err))
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

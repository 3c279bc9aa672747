//! Subcommands: one module each, with its arguments and a `run`.

mod evidence;
mod registry;
mod serve;
mod sessions;
mod stage;

use clap::{Parser, Subcommand};
use rimthan_registry::RegistryError;

/// The rimthan workflow-engine MCP server and its registry tools.
#[derive(Debug, Parser)]
#[command(name = "rimthan", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the workflow engine over Streamable HTTP (default) or stdio.
    Serve(Box<serve::ServeArgs>),
    /// Run a scripted harness through a whole workflow (or inject a classic mistake).
    Stage(stage::StageArgs),
    /// Build, verify, inspect and promote registry releases.
    #[command(subcommand)]
    Registry(registry::RegistryCommand),
    /// List and show the sessions a server's store holds (read-only).
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Verify the audit log's hash chains in a server's store (read-only).
    #[command(subcommand)]
    Audit(evidence::AuditCommand),
    /// Verify a session's signed provenance statement offline.
    #[command(subcommand)]
    Provenance(evidence::ProvenanceCommand),
}

impl Cli {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Serve(args) => args.run(),
            Command::Stage(args) => args.run(),
            Command::Registry(cmd) => cmd.run(),
            Command::Sessions(cmd) => cmd.run(),
            Command::Audit(cmd) => cmd.run(),
            Command::Provenance(cmd) => cmd.run(),
        }
    }
}

/// Exit code for an error: 1 when the input was rejected, 2 when `registry check` was not given a
/// file a check reads, 3 when the machine failed, 4 when a step waits for sign-off.
pub(crate) fn exit_code(err: &anyhow::Error) -> u8 {
    match err.downcast_ref::<RegistryError>() {
        Some(e) if e.is_input_error() => 1,
        Some(_) => 3,
        None if err.downcast_ref::<AwaitingSignOff>().is_some() => 4,
        None if err.downcast_ref::<InputError>().is_some() => 1,
        None if err.downcast_ref::<registry::ChecksFailed>().is_some() => 1,
        None if err.downcast_ref::<registry::CasesFailed>().is_some() => 1,
        // Nothing was checked: a CI job given too few files must not pass.
        None if err.downcast_ref::<registry::InputMissing>().is_some() => 2,
        None if err.downcast_ref::<evidence::NotVerified>().is_some() => 1,
        // The server refused the harness: the run's input (or the server's verdict) is at fault.
        None => match err.downcast_ref::<rimthan_stage::StageError>() {
            Some(rimthan_stage::StageError::Registry(e)) if !e.is_input_error() => 3,
            Some(rimthan_stage::StageError::Io { .. } | rimthan_stage::StageError::Connect(_)) => 3,
            Some(_) => 1,
            None => 3,
        },
    }
}

/// `rimthan stage` stopped where the session waits for people to sign a step off: not a
/// failure, and not a completion either (exit status 4, the README's table).
#[derive(Debug)]
pub(crate) struct AwaitingSignOff {
    pub(crate) session: String,
    /// The session's page in the server's view, when staged against a server.
    pub(crate) page: Option<String>,
}

impl std::fmt::Display for AwaitingSignOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "session {} waits for sign-off", self.session)?;
        match &self.page {
            Some(page) => write!(f, " ({page})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for AwaitingSignOff {}

/// An argument or input file the user must fix.
#[derive(Debug)]
pub(crate) struct InputError(pub(crate) String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

//! `rimthan audit verify` and `rimthan provenance verify`: the evidence a server leaves, checked
//! by anyone (`docs/operations/evidence.md`). Both only read.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use rimthan_engine::{
    chain::{verify_audit, verify_audit_trusting},
    provenance::{
        EnvelopeFailure, KeysDocument, MAX_ENVELOPE_BYTES, PublicKeys, SubjectFailure,
        check_subjects, verify_envelope,
    },
};
use serde_json::json;

use super::InputError;

/// Check the audit log's hash chains.
#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Walk every chain of a server's store (read-only, beside the server) and name each break:
    /// its entry, session and kind (edited, deleted, inserted, reordered). Exits 0 only when
    /// every chain verifies.
    Verify(AuditVerifyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AuditVerifyArgs {
    /// The server's store (as `serve --database-url`); default: the user data folder's SQLite file.
    #[arg(long, env = "RIMTHAN_DATABASE_URL")]
    database_url: Option<String>,
    /// The published keys document to check retention anchors against (as `provenance verify
    /// --keys`); without it, the keys the store itself lists are trusted, which whoever can
    /// write the store can add to.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Check a signed provenance statement.
#[derive(Debug, Subcommand)]
pub(crate) enum ProvenanceCommand {
    /// Check a session's DSSE envelope against published keys and, with --project, that every
    /// subject's file still has the digest it records. Exits 0 only when all holds.
    Verify(ProvenanceVerifyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ProvenanceVerifyArgs {
    /// The envelope, e.g. .rimthan/workflow-session.intoto.json.
    file: PathBuf,
    /// The published keys (`GET /.well-known/rimthan/provenance-keys.json`).
    #[arg(long)]
    keys: PathBuf,
    /// The project folder the subjects' paths are relative to; each is re-hashed.
    #[arg(long)]
    project: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Evidence that does not verify: the run's verdict, exit code 1.
#[derive(Debug)]
pub(crate) struct NotVerified(pub(crate) String);

impl std::fmt::Display for NotVerified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotVerified {}

impl AuditCommand {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let AuditCommand::Verify(args) = self;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(args.run())
    }
}

impl AuditVerifyArgs {
    async fn run(self) -> anyhow::Result<()> {
        let url = match &self.database_url {
            Some(url) => url.clone(),
            None => super::serve::default_database_url()?,
        };
        let store = rimthan_engine::store::open_read_only(&url)
            .await
            .with_context(|| format!("cannot read the store at {url}"))?;
        let report = match &self.keys {
            Some(path) => verify_audit_trusting(&*store, &read_keys(path)?).await?,
            None => {
                if !self.json {
                    eprintln!(
                        "note: retention anchors are checked against the keys the store itself \
                         lists; pass --keys with the published keys document to trust none of \
                         the store's"
                    );
                }
                verify_audit(&*store).await?
            }
        };
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            for b in &report.breaks {
                println!(
                    "{}  session {}  chain {}  entry {}  index {}: {}",
                    b.kind.as_str(),
                    b.session.as_deref().unwrap_or("-"),
                    if b.chain.is_empty() { "-" } else { &b.chain },
                    b.entry.map_or("-".into(), |e| e.to_string()),
                    b.index.map_or("-".into(), |i| i.to_string()),
                    b.detail
                );
            }
            println!(
                "{} chains, {} entries: {}",
                report.chains,
                report.entries,
                if report.verified() {
                    "every chain verifies".to_owned()
                } else {
                    format!("{} breaks", report.breaks.len())
                }
            );
            match &report.last_seal {
                Some(at) => println!(
                    "{} seals, the last at {at}: a chain cut back or deleted before it is named",
                    report.seals
                ),
                None => println!(
                    "no seal yet: a chain cut back with its head row, or deleted whole, cannot be \
                     named (the server seals every 5 minutes)"
                ),
            }
        }
        if report.verified() {
            Ok(())
        } else {
            Err(NotVerified(format!("the audit log has {} breaks", report.breaks.len())).into())
        }
    }
}

/// A file named on the command line, read as the registry reads its own: a regular file (a
/// named pipe or device is refused, not waited on or read forever), at most
/// `MAX_ENVELOPE_BYTES`.
fn read_bounded(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    Ok(
        rimthan_registry::read_regular_file(path, MAX_ENVELOPE_BYTES)
            .map_err(|e| InputError(format!("{}: {e}", path.display())))?,
    )
}

impl ProvenanceCommand {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let ProvenanceCommand::Verify(args) = self;
        args.run()
    }
}

/// The usable keys of a published keys document (`/.well-known/rimthan/provenance-keys.json`).
fn read_keys(path: &std::path::Path) -> anyhow::Result<PublicKeys> {
    let keys: KeysDocument = serde_json::from_slice(&read_bounded(path)?)
        .map_err(|e| InputError(format!("{}: not a keys document: {e}", path.display())))?;
    let keys = PublicKeys::from_files(&keys.keys);
    if keys.is_empty() {
        return Err(InputError(format!("{}: holds no usable key", path.display())).into());
    }
    Ok(keys)
}

impl ProvenanceVerifyArgs {
    fn run(self) -> anyhow::Result<()> {
        let keys = read_keys(&self.keys)?;
        let envelope = read_bounded(&self.file)?;
        let failed = |failure: EnvelopeFailure, detail: String| -> anyhow::Result<()> {
            if self.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"verified": false, "failure": failure.code(), "detail": detail})
                    )?
                );
            } else {
                println!("{}: {detail}", failure.code());
            }
            Err(NotVerified(format!("{}: {}", self.file.display(), failure.code())).into())
        };
        let statement = match verify_envelope(&envelope, &keys) {
            Ok(statement) => statement,
            Err(failure) => {
                let detail = match failure {
                    EnvelopeFailure::MalformedEnvelope => {
                        "not a DSSE envelope of an in-toto statement"
                    }
                    EnvelopeFailure::WrongPayloadType => {
                        "the payload type is not application/vnd.in-toto+json"
                    }
                    EnvelopeFailure::UnknownKeyId => "no signature is by a published key",
                    EnvelopeFailure::SignatureInvalid => {
                        "a published key's signature does not match the statement: it was altered or forged"
                    }
                    EnvelopeFailure::SubjectChanged
                    | EnvelopeFailure::SubjectMissing
                    | EnvelopeFailure::SubjectUnreadable => "",
                };
                return failed(failure, detail.into());
            }
        };
        let subjects = match &self.project {
            Some(dir) => check_subjects(&statement, dir),
            None => Vec::new(),
        };
        if let Some(first) = subjects.first() {
            // A changed subject is named with its digest now, to compare with the statement's.
            let named = |s: &SubjectFailure| match &s.sha256 {
                Some(now) => format!("{} (its sha256 is now {now})", s.path),
                None => s.path.clone(),
            };
            for s in &subjects[1..] {
                if !self.json {
                    println!("{}: {}", s.failure.code(), named(s));
                }
            }
            return failed(
                first.failure,
                format!(
                    "{}{}",
                    named(first),
                    if subjects.len() > 1 {
                        format!(" (and {} more)", subjects.len() - 1)
                    } else {
                        String::new()
                    }
                ),
            );
        }
        let predicate = &statement.predicate;
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({
                    "verified": true,
                    "subjects": statement.subject.len(),
                    "rehashed": self.project.is_some(),
                    "statement": statement,
                }))?
            );
        } else {
            println!(
                "verified: session {} · {}@{} · release {} · {} subjects{}",
                predicate["session"].as_str().unwrap_or("-"),
                predicate["workflow"]["id"].as_str().unwrap_or("-"),
                predicate["workflow"]["version"].as_str().unwrap_or("-"),
                predicate["release"]["id"].as_str().unwrap_or("-"),
                statement.subject.len(),
                if self.project.is_some() {
                    ", each re-hashed"
                } else {
                    " (not re-hashed: pass --project)"
                }
            );
        }
        Ok(())
    }
}

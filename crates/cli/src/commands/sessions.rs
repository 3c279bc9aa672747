//! `rimthan sessions`: what a facilitator asks first — who started, who stands where, what was
//! sent back and why — read beside the serving process, never written (`docs/operations/facilitator.md`).

use std::{path::PathBuf, sync::Arc};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use rimthan_engine::{
    SessionQuery, Status, Store,
    store::{Age, MAX_PAGE},
};
use rimthan_registry::{
    RegistryFiles, VerifiedRegistry, external_policy, verify_embedded, verify_registry,
};
use serde_json::json;

use super::InputError;

/// Read the sessions a server's store holds, and sign off steps that wait for approval.
#[derive(Debug, Subcommand)]
pub(crate) enum SessionsCommand {
    /// List sessions, most recently changed first.
    List(ListArgs),
    /// Show one session: its timeline, latest findings and accepted outputs.
    Show(ShowArgs),
    /// Approve the step a session waits for sign-off of, on a running server.
    Approve(ApproveArgs),
    /// Send the step a session waits for sign-off of back for revision, with a note.
    SendBack(SendBackArgs),
    /// Waive one failed check's finding of the step a session waits for sign-off of.
    Waive(WaiveArgs),
}

/// Where the sessions are.
#[derive(Debug, Args)]
struct StoreArgs {
    /// The server's store (as `serve --database-url`); default: the user data folder's SQLite file.
    #[arg(long, env = "RIMTHAN_DATABASE_URL")]
    database_url: Option<String>,
    /// The server's registry folder, to count each workflow's steps (default: the embedded one).
    #[arg(long, env = "RIMTHAN_REGISTRY")]
    registry: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Only sessions in this status: active, revise, awaiting_approval or completed.
    #[arg(long)]
    status: Option<String>,
    /// Only sessions of this workflow id.
    #[arg(long)]
    workflow: Option<String>,
    /// Only sessions whose owner belongs to this organization.
    #[arg(long)]
    organization: Option<String>,
    /// Only sessions changed within this long: 30m, 12h or 7d.
    #[arg(long)]
    since: Option<String>,
    /// Sessions per page (1 to 1000).
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// The page, from 1.
    #[arg(long, default_value_t = 1)]
    page: u64,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The session id (32 hex digits, as in its session file).
    id: String,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// The running server a decision goes to, and whose token decides.
#[derive(Debug, Args)]
struct ServerArgs {
    /// The server's base URL.
    #[arg(long, env = "RIMTHAN_SERVER", default_value = "http://127.0.0.1:8787")]
    server: String,
    /// The environment variable that holds your bearer token (never the token itself).
    #[arg(long, default_value = "RIMTHAN_TOKEN")]
    token_env: String,
    /// Decide under this name, on a server that authenticates nobody (loopback only): the
    /// decision is recorded as asserted, not authenticated. Needs no token.
    #[arg(long = "as", value_name = "NAME")]
    asserted: Option<String>,
    /// The session id.
    id: String,
    /// The step waiting for sign-off.
    #[arg(long)]
    step: String,
    /// The session revision you looked at (`sessions show --json`); default: as it stands.
    #[arg(long)]
    revision: Option<u64>,
    /// An output's digest you read, as PATH=SHA256 (repeatable; `sessions show --json` lists
    /// them): the decision is refused with approval_content_changed if the output is another.
    #[arg(long = "expect-sha256", value_name = "PATH=SHA256")]
    expect_sha256: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    target: ServerArgs,
    /// A note for the record.
    #[arg(long)]
    note: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct SendBackArgs {
    #[command(flatten)]
    target: ServerArgs,
    /// What to change; the participant sees it as a finding.
    #[arg(long)]
    note: String,
}

#[derive(Debug, Args)]
pub(crate) struct WaiveArgs {
    #[command(flatten)]
    target: ServerArgs,
    /// The check whose finding is waived.
    #[arg(long)]
    check: String,
    /// The check's rule.
    #[arg(long)]
    rule: String,
    /// The output path the finding is in.
    #[arg(long)]
    path: String,
    /// Why the finding is acceptable.
    #[arg(long)]
    reason: String,
}

impl ServerArgs {
    /// Posts `decision` and prints the answer; a refusal is an error naming its code.
    async fn post(&self, mut decision: serde_json::Value) -> anyhow::Result<()> {
        let token = match &self.asserted {
            Some(name) => {
                decision["as"] = json!(name);
                None
            }
            None => Some(std::env::var(&self.token_env).map_err(|_| {
                InputError(format!(
                    "set {} to your bearer token (--token-env names another variable), or on a \
                     server that authenticates nobody name yourself with --as",
                    self.token_env
                ))
            })?),
        };
        decision["step"] = json!(self.step);
        if !self.expect_sha256.is_empty() {
            decision["expect_sha256"] = json!(self.expect_sha256);
        }
        if let Some(revision) = self.revision {
            decision["revision"] = json!(revision);
        }
        let (status, answer) = rimthan_mcp::decision_client::post_decision(
            &self.server,
            &self.id,
            token.as_deref(),
            &decision,
        )
        .await
        .map_err(anyhow::Error::msg)?;
        println!("{}", serde_json::to_string_pretty(&answer)?);
        if answer["result"] == "recorded" {
            Ok(())
        } else {
            let failure = &answer["failure"];
            Err(InputError(format!(
                "refused ({status}): {} ({})",
                failure["message"].as_str().unwrap_or("no message"),
                failure["code"].as_str().unwrap_or("no code")
            ))
            .into())
        }
    }
}

impl SessionsCommand {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        match self {
            SessionsCommand::List(args) => runtime.block_on(args.run()),
            SessionsCommand::Show(args) => runtime.block_on(args.run()),
            SessionsCommand::Approve(args) => runtime.block_on(
                args.target
                    .post(json!({"action": "approve", "note": args.note})),
            ),
            SessionsCommand::SendBack(args) => runtime.block_on(
                args.target
                    .post(json!({"action": "send_back", "note": args.note})),
            ),
            SessionsCommand::Waive(args) => runtime.block_on(args.target.post(json!({
                "action": "waive", "check": args.check, "rule": args.rule,
                "path": args.path, "note": args.reason,
            }))),
        }
    }
}

impl StoreArgs {
    async fn open(&self) -> anyhow::Result<(Arc<dyn Store>, VerifiedRegistry)> {
        let url = match &self.database_url {
            Some(url) => url.clone(),
            None => super::serve::default_database_url()?,
        };
        let store = rimthan_engine::store::open_read_only(&url)
            .await
            .with_context(|| format!("cannot read the store at {url}"))?;
        let registry = match &self.registry {
            None => verify_embedded()?,
            Some(dir) => verify_registry(&RegistryFiles::from_dir(dir)?, &external_policy())?,
        };
        Ok((store, registry))
    }
}

impl ListArgs {
    fn query(&self) -> Result<SessionQuery, InputError> {
        let status = match &self.status {
            None => None,
            Some(s) => Some(Status::from_wire(s).ok_or_else(|| {
                InputError(format!(
                    "--status {:?}: use active, revise, awaiting_approval or completed",
                    s.chars().take(32).collect::<String>()
                ))
            })?),
        };
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(InputError(format!(
                "--limit {}: use 1 to {MAX_PAGE}",
                self.limit
            )));
        }
        if self.page == 0 {
            return Err(InputError("--page: pages count from 1".into()));
        }
        let changed_since = match &self.since {
            None => None,
            Some(since) => Some(
                since
                    .parse::<Age>()
                    .map_err(|e| InputError(format!("--since {e}")))?
                    .cutoff(),
            ),
        };
        Ok(SessionQuery {
            status,
            workflow: self.workflow.clone(),
            organization: self.organization.clone(),
            changed_since,
            limit: self.limit,
            offset: (self.page - 1).saturating_mul(u64::from(self.limit)),
        })
    }

    async fn run(self) -> anyhow::Result<()> {
        let query = self.query()?;
        let (store, registry) = self.store.open().await?;
        let sessions = store.list_sessions(&query).await?;
        if self.json {
            let rows: Vec<_> = sessions
                .iter()
                .map(|s| {
                    let mut row = serde_json::to_value(s).expect("summaries serialize");
                    row["steps"] = json!(s.steps(&registry));
                    row
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
            return Ok(());
        }
        if sessions.is_empty() {
            println!("no sessions on page {}", self.page);
            return Ok(());
        }
        // The workflow column is as wide as its longest id@version: cutting it would hide the
        // version, which is what tells two runs of one workflow apart.
        let labels: Vec<String> = sessions
            .iter()
            .map(|s| format!("{}@{}", s.workflow, s.workflow_version))
            .collect();
        let width = labels.iter().map(String::len).max().unwrap_or(0).max(24);
        println!(
            "{:<32}  {:<16}  {:<12}  {:<width$}  {:<11}  {:>5}  {:<9}  {:>6}  {:<20}  CHANGED",
            "ID",
            "PRINCIPAL",
            "ORGANIZATION",
            "WORKFLOW",
            "HARNESS",
            "STEP",
            "STATUS",
            "REVISE",
            "STARTED"
        );
        for (s, label) in sessions.iter().zip(&labels) {
            println!(
                "{:<32}  {:<16.16}  {:<12.12}  {:<width$}  {:<11}  {:>5}  {:<9}  {:>6}  {:<20}  {}",
                s.id.to_string(),
                s.principal.as_deref().unwrap_or("-"),
                s.organization.as_deref().unwrap_or("-"),
                label,
                s.harness,
                s.position(s.steps(&registry)),
                s.status.as_str(),
                s.revise_rounds,
                s.created_at,
                s.updated_at
            );
        }
        Ok(())
    }
}

impl ShowArgs {
    async fn run(self) -> anyhow::Result<()> {
        let id: rimthan_engine::SessionId = self.id.parse().map_err(|_| {
            let shown: String = self.id.chars().take(64).collect();
            InputError(format!(
                "{shown:?} is not a session id: 32 hex digits, as in .rimthan/workflow-session.json"
            ))
        })?;
        let (store, registry) = self.store.open().await?;
        let Some(session) = store.load_session(&id).await? else {
            return Err(InputError(format!("session {id} is not in this store")).into());
        };
        let timeline = store.audit_log(&id).await?;
        let chain = rimthan_engine::chain::verify_session_chain(&*store, &id).await?;
        // The statement the participant was handed, unsigned: the store holds no private key.
        let statement = match store.completion_link(&id).await? {
            Some(completion) if session.status == Status::Completed => registry
                .release(&session.release)
                .and_then(|r| rimthan_engine::provenance::statement_for(r, &session, completion)),
            _ => None,
        };
        let outputs: Vec<_> = session
            .ledger
            .iter()
            .map(|(path, a)| {
                json!({"path": path, "artifact_id": a.artifact_id, "owner_step": a.owner_step,
                       "bytes": a.bytes, "sha256": a.sha256})
            })
            .collect();
        if self.json {
            let shown = json!({
                "id": session.id, "status": session.status.as_str(), "revision": session.revision,
                "workflow": session.workflow, "workflow_version": session.workflow_version,
                "release": session.release, "harness": session.host.harness.as_str(),
                "principal": session.principal, "step_index": session.step_index,
                "revise_rounds": session.revise_rounds, "created_at": session.created_at,
                "updated_at": session.updated_at, "timeline": timeline,
                "findings": session.findings, "report_rounds": session.report_rounds,
                "outputs": outputs, "audit_chain": chain, "statement": statement,
            });
            println!("{}", serde_json::to_string_pretty(&shown)?);
            return Ok(());
        }
        let standing = match session.status {
            Status::Completed => "completed".to_owned(),
            status => format!("{} at step {}", status.as_str(), session.step_index + 1),
        };
        println!(
            "session {} · {}@{} · release {} · {} · {standing} · {} revise rounds",
            session.id,
            session.workflow,
            session.workflow_version,
            session.release,
            session.host.harness.as_str(),
            session.revise_rounds
        );
        if let Some(p) = &session.principal {
            println!(
                "owner {} ({})",
                p.subject,
                p.organization.as_deref().unwrap_or("no organization")
            );
        }
        println!(
            "started {} · changed {}",
            session.created_at, session.updated_at
        );
        if chain.verified() {
            println!("audit chain verifies ({} entries)", chain.entries);
        } else {
            println!("audit chain BROKEN:");
            for b in &chain.breaks {
                println!(
                    "  {} entry {} index {}: {}",
                    b.kind.as_str(),
                    b.entry.map_or("-".into(), |e| e.to_string()),
                    b.index.map_or("-".into(), |i| i.to_string()),
                    b.detail
                );
            }
        }
        if let Some(statement) = &statement {
            let at = &statement.predicate["audit_chain"];
            println!(
                "provenance: the participant keeps the signed statement at {} (/admin/sessions/{}/provenance.json serves it); it names audit entry {} sha256 {}",
                rimthan_engine::provenance::STATEMENT_PATH,
                session.id,
                at["index"],
                at["sha256"].as_str().unwrap_or("-")
            );
        }
        println!("\ntimeline");
        for e in &timeline {
            let codes: Vec<&str> = e.codes.iter().map(|c| c.as_str()).collect();
            // A judged submission names its step and the validators that sent it back.
            let judged =
                e.judgement
                    .as_ref()
                    .map_or_else(String::new, |j| match j.failed.as_slice() {
                        [] => format!("{} passed", j.step),
                        failed => format!("{} failed by {}", j.step, failed.join(", ")),
                    });
            // A decision names who made it and what they wrote, refused ones too.
            let decided = e.decision.as_ref().map_or_else(String::new, |d| {
                let by = e.principal.as_deref().unwrap_or("someone unauthenticated");
                let waived = match (&d.check_id, &d.rule, &d.path) {
                    (Some(check), rule, path) => format!(
                        " waiving check {check} rule {} in {}",
                        rule.as_deref().unwrap_or("-"),
                        path.as_deref().unwrap_or("-")
                    ),
                    _ => String::new(),
                };
                let note = d
                    .note
                    .as_deref()
                    .map_or_else(String::new, |n| format!(": {}", printable(n)));
                format!(" step {} by {}{waived}{note}", d.step, printable(by))
            });
            println!(
                "  {}  {:<24}  {:<9}  {}{}{}",
                e.at,
                e.tool.as_str(),
                e.outcome.as_str(),
                codes.join(", "),
                judged,
                decided
            );
        }
        if !session.findings.is_empty() {
            println!("\nlatest findings");
            for f in &session.findings {
                let by = match (&f.check_id, &f.rule) {
                    (Some(check), Some(rule)) => format!("check {check} [{rule}]"),
                    _ => f.validator_id.clone(),
                };
                let at = match (&f.path, f.line) {
                    (Some(path), Some(line)) => format!("{path}:{line}"),
                    (Some(path), None) => path.clone(),
                    _ => "-".into(),
                };
                println!("  {by} {} {at}: {}", f.severity, f.message);
            }
        }
        print_report_rounds(&session);
        if !outputs.is_empty() {
            println!("\naccepted outputs (attested; the store holds no bodies)");
            for (path, a) in &session.ledger {
                println!("  {path}  {} bytes  sha256 {}", a.bytes, a.sha256);
            }
        }
        Ok(())
    }
}

/// Every kept round of validator reports and deterministic checks, per step: verdict, summary,
/// findings and the fields a report schema adds.
fn print_report_rounds(session: &rimthan_engine::Session) {
    if session.report_rounds.is_empty() {
        return;
    }
    println!(
        "\nchecks and validator reports (the last {} rounds per step)",
        rimthan_engine::REPORT_ROUNDS_KEPT
    );
    for (step, rounds) in &session.report_rounds {
        for round in rounds {
            println!("  {step} round {} ({})", round.round, round.at);
            for c in &round.checks {
                let verdict = serde_json::to_value(c.verdict).unwrap_or_default();
                println!(
                    "    check {} {} ({} findings; sha256 {})",
                    c.id,
                    verdict.as_str().unwrap_or("-"),
                    c.finding_count,
                    c.sha256
                );
                for f in &c.findings {
                    let at = match (&f.path, f.line) {
                        (Some(path), Some(line)) => format!("{path}:{line}"),
                        (Some(path), None) => path.clone(),
                        _ => "-".into(),
                    };
                    println!("      {} {at}: {}: {}", f.severity, f.rule, f.message);
                }
            }
            for r in &round.reports {
                let verdict = serde_json::to_value(r.verdict).unwrap_or_default();
                println!(
                    "    {}@{} {}: {}",
                    r.validator_id,
                    r.validator_version,
                    verdict.as_str().unwrap_or("-"),
                    r.summary
                );
                for f in &r.findings {
                    println!(
                        "      {} {}: {}",
                        f.severity,
                        f.path.as_deref().unwrap_or("-"),
                        f.message
                    );
                }
                for (field, value) in &r.extra {
                    println!("      {field} = {value}");
                }
            }
        }
    }
}

/// `text` with control characters shown escaped, so a note cannot move the terminal's cursor or
/// recolour what follows.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

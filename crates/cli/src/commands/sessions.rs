//! `rimthan sessions`: what a facilitator asks first — who started, who stands where, what was
//! sent back and why — read beside the serving process, never written (`docs/operations/facilitator.md`).

use std::{path::PathBuf, sync::Arc};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use rimthan_engine::{
    SessionQuery, Status, Store,
    store::{Age, MAX_PAGE},
};
use rimthan_mcp::report::SessionReport;
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
    /// Instead: the sessions waiting for a sign-off you may give, soonest expiry first, from
    /// the server at --server with your own token.
    #[arg(long, requires = "server")]
    waiting_for_me: bool,
    /// With --waiting-for-me: the server's base URL.
    #[arg(long, env = "RIMTHAN_SERVER")]
    server: Option<String>,
    /// With --waiting-for-me: the environment variable that holds your bearer token.
    #[arg(long, default_value = "RIMTHAN_TOKEN")]
    token_env: String,
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
    /// Read the session from the server at this base URL (`GET /admin/api/sessions/ID`) instead
    /// of from its store, with your own token (facilitators, and role holders while it waits
    /// for their sign-off).
    #[arg(long)]
    server: Option<String>,
    /// With --server: the environment variable that holds your bearer token.
    #[arg(long, default_value = "RIMTHAN_TOKEN")]
    token_env: String,
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
        let (status, answer) = rimthan_mcp::admin_client::post_decision(
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

    /// The sessions waiting for the caller's sign-off, as the server lists them.
    async fn waiting(&self, server: &str) -> anyhow::Result<()> {
        let token = std::env::var(&self.token_env).ok();
        let (status, body) = rimthan_mcp::admin_client::get_waiting(server, token.as_deref())
            .await
            .map_err(anyhow::Error::msg)?;
        if status != 200 {
            let shown: String = body.chars().take(512).collect();
            return Err(InputError(format!("{server} answered {status}: {shown}")).into());
        }
        let document: serde_json::Value = serde_json::from_str(&body)
            .with_context(|| format!("{server} answered a list that is not JSON"))?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&document)?);
            return Ok(());
        }
        let rows = document["waiting"].as_array().cloned().unwrap_or_default();
        if rows.is_empty() {
            println!("nothing waits for you");
            return Ok(());
        }
        let text = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_owned();
        println!(
            "{:<32}  {:<16}  {:<32}  {:<20}  {:<40}  LINK",
            "ID", "PRINCIPAL", "WORKFLOW", "STEP", "EXPIRES"
        );
        for row in rows {
            let expires = match (row["expires_at"].as_str(), row["time_left"].as_str()) {
                (Some(at), Some(left)) => format!("{at} ({left})"),
                _ => "never".to_owned(),
            };
            println!(
                "{:<32}  {:<16.16}  {:<32}  {:<20}  {:<40}  {}{}",
                text(&row["id"]),
                text(&row["principal"]),
                format!(
                    "{}@{}",
                    text(&row["workflow"]),
                    text(&row["workflow_version"])
                ),
                text(&row["step"]),
                expires,
                server.trim_end_matches('/'),
                text(&row["link"])
            );
        }
        Ok(())
    }

    async fn run(self) -> anyhow::Result<()> {
        if let (true, Some(server)) = (self.waiting_for_me, &self.server) {
            return self.waiting(server).await;
        }
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
        if let Some(server) = &self.server {
            return self.remote(server, &id).await;
        }
        let (store, registry) = self.store.open().await?;
        let Some(report) = SessionReport::read(&*store, &registry, &id).await? else {
            return Err(InputError(format!("session {id} is not in this store")).into());
        };
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report.json())?);
        } else {
            print!("{}", report.text());
        }
        Ok(())
    }

    /// The same report, read from the server at `server` with the caller's own token.
    async fn remote(&self, server: &str, id: &rimthan_engine::SessionId) -> anyhow::Result<()> {
        let token = std::env::var(&self.token_env).ok();
        let (status, body) =
            rimthan_mcp::admin_client::get_report(server, id.as_str(), token.as_deref(), self.json)
                .await
                .map_err(anyhow::Error::msg)?;
        if status != 200 {
            let shown: String = body.chars().take(512).collect();
            return Err(InputError(format!("{server} answered {status}: {shown}")).into());
        }
        if self.json {
            let document: serde_json::Value = serde_json::from_str(&body)
                .with_context(|| format!("{server} answered a report that is not JSON"))?;
            println!("{}", serde_json::to_string_pretty(&document)?);
        } else {
            print!("{body}");
        }
        Ok(())
    }
}

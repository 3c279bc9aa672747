//! `rimthan stage`: a scripted harness that runs any verified workflow the way a real host does.
//!
//! # Brief overview
//!
//! [`run`] connects to a server (remote Streamable HTTP, or one started in-process on the
//! embedded registry or an operator's), checks its identity and its four tools, and picks the
//! workflow from the release's own resources. Everything workflow-specific comes from the
//! definition and the plans: the adapter pinned for the harness, the step count, the validator
//! capabilities to declare, the host assets to deliver (project-local at the contract's paths,
//! or dynamically), the outputs to write (the author's examples, else schema-valid generated
//! content, else a placeholder naming the step), and the report fields each validator's
//! `report_schema` asks for. Outputs are attested by reading them back from disk; validators
//! are scripted read-only checks of their declared inputs; `.rimthan/workflow-session.json` is
//! written after every change. A [`Fault`] injects one classic mistake so an operator can see
//! the server's code for it, and `revise` makes one validator send a step back once.

mod case;
mod client;
mod content;
mod decide;
mod drive;
mod fault;
mod project;
mod trace;
mod validator;
mod workflow;

use std::path::Path;

use rimthan_registry::{ChannelName, Harness, HostCapability, RegistryError, Version, WorkflowId};

use crate::client::connect;
pub use crate::{
    case::{
        CASE_FILE, Case, CaseFile, Decide, DecisionCase, Expect, Submission, TESTS_DIR, find_cases,
        run_case,
    },
    fault::Fault,
    project::{Project, ReadBack},
    trace::{TraceParent, TraceParentError},
};

/// Where the session file lives in the project.
pub const SESSION_FILE: &str = ".rimthan/workflow-session.json";
/// Where a completed session's signed provenance statement is kept, beside the session file.
pub const STATEMENT_FILE: &str = ".rimthan/workflow-session.intoto.json";

/// What went wrong; each variant is a problem an operator can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A path the server declared is not safe to write.
    #[error("{path}: {reason}")]
    UnsafePath {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A symlink sits where the harness would write (a folder of the path, the file, or its
    /// temporary name); nothing is written through it.
    #[error(
        "{path}: is a symlink; rimthan stage writes nothing through a symlink in the project: remove it and run again"
    )]
    SymlinkInProject {
        /// The path, relative to the project.
        path: String,
    },
    /// A workflow test case's file does not parse, breaks a bound, or names a file that cannot
    /// be read.
    #[error("{path}: {reason}")]
    CaseInvalid {
        /// The case file, or the file it names.
        path: String,
        /// What to change.
        reason: String,
    },
    /// The in-process server's registry did not verify.
    #[error("the registry did not verify: {0}")]
    Registry(#[source] RegistryError),
    /// The server could not be reached or spoke no MCP.
    #[error("cannot talk to the server: {0}")]
    Connect(String),
    /// The server answered 401: it wants a bearer token this run did not give, or refused it.
    #[error(
        "the server at {url} requires a bearer token (401): pass --token or set RIMTHAN_TOKEN{given}"
    )]
    Unauthorized {
        /// The MCP endpoint.
        url: String,
        /// What to add when a token was given and refused.
        given: &'static str,
    },
    /// The in-process server's channel names no release, so there is nothing to serve.
    #[error(
        "channel {channel} names no release in the registry (channels: {channels}); point it at \
         a release with `rimthan registry promote REGISTRY --channel {channel} --release ID`, or \
         pass --channel"
    )]
    ChannelWithoutRelease {
        /// The channel asked for.
        channel: ChannelName,
        /// The channels the registry has, comma-separated (`none` when it has none).
        channels: String,
    },
    /// The server is not a rimthan workflow engine with exactly the four tools.
    #[error("the server is not a rimthan workflow engine: {0}")]
    Identity(String),
    /// No workflow was named and the release does not offer exactly one.
    #[error("{0}")]
    WorkflowChoice(String),
    /// The server answered something this harness does not understand.
    #[error("unexpected answer to {tool}: {detail}")]
    Protocol {
        /// The tool called.
        tool: String,
        /// What was wrong.
        detail: String,
    },
    /// The start was blocked.
    #[error("the start was blocked: {}", codes.join(", "))]
    Blocked {
        /// Blocker codes.
        codes: Vec<String>,
    },
    /// A sign-off given with `--sign-off-as` was refused.
    #[error("the sign-off of step {step} was refused: {message} ({code})")]
    SignOffRefused {
        /// The step.
        step: String,
        /// The refusal's code.
        code: String,
        /// Its message.
        message: String,
    },
    /// A call was rejected.
    #[error("step {step}: {tool} was rejected: {}", codes.join(", "))]
    Rejected {
        /// The step.
        step: String,
        /// The tool.
        tool: String,
        /// Failure codes.
        codes: Vec<String>,
    },
    /// No content could be produced for a declared output.
    #[error("step {step}: no content for {artifact}: {reason}")]
    NoContent {
        /// The step.
        step: String,
        /// The output's artifact id.
        artifact: String,
        /// Why, and what the author can add.
        reason: String,
    },
    /// The requested fault needs something this workflow does not have.
    #[error("fault {}: {reason}", fault.as_str())]
    FaultNotApplicable {
        /// The fault.
        fault: Fault,
        /// What is missing.
        reason: String,
    },
    /// `--resume` without a session file.
    #[error("{0} not found: run without --resume first, or clone a project that holds it")]
    NoSessionFile(String),
}

impl StageError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        StageError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Which protocol revision to speak over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// 2025-11-25: `initialize` and `Mcp-Session-Id`.
    V2025_11_25,
    /// 2026-07-28: `server/discover`, stateless.
    V2026_07_28,
}

/// Which server to talk to.
#[derive(Debug, Clone)]
pub enum Target {
    /// A running server's MCP endpoint.
    Url {
        /// e.g. `http://127.0.0.1:8787/mcp`.
        url: String,
        /// The revision to speak.
        protocol: Protocol,
        /// A bearer token, when the server authenticates callers.
        token: Option<String>,
    },
    /// A server started in this process on an engine the caller holds (`rimthan registry
    /// test` decides sign-offs on it between runs).
    Engine(std::sync::Arc<rimthan_engine::Engine>),
    /// A server started in this process.
    InProcess {
        /// Its store.
        database_url: String,
        /// An operator's registry folder; the embedded default when absent.
        registry: Option<std::path::PathBuf>,
        /// What new sessions start from: a channel's release, or one release by id (the only
        /// way a draft is served).
        serving: rimthan_engine::Serving,
    },
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct StageConfig {
    /// The harness to behave as.
    pub harness: Harness,
    /// The server.
    pub target: Target,
    /// The project folder.
    pub project: std::path::PathBuf,
    /// The workflow to start; the release's only workflow when absent.
    pub workflow: Option<WorkflowId>,
    /// Its version; the highest the release offers when absent.
    pub workflow_version: Option<Version>,
    /// Continue from the project's session file.
    pub resume: bool,
    /// A mistake to inject.
    pub fault: Option<Fault>,
    /// Make the first validator that runs fail once, so the step goes through `revise`.
    pub revise: bool,
    /// Stop after this many report submissions, leaving the session where it stands.
    pub stop_after: Option<usize>,
    /// Sign off every step that waits for it under this name, as the operator at this machine
    /// (in-process only, where nobody authenticates: recorded as asserted).
    pub sign_off_as: Option<String>,
    /// Make every JSON and Markdown output this session's own: a final line of spaces and tabs
    /// spelling this number in binary, which neither format reads. Load tests set it per session,
    /// so no two sessions send the same bytes, as no two participants do.
    pub vary: Option<u16>,
    /// What a workflow test case has the harness do instead (`rimthan registry test`).
    pub script: Option<std::sync::Arc<Script>>,
    /// The trace context every request carries, so the server's spans join this trace; a new
    /// trace per run when none.
    pub trace: Option<TraceParent>,
}

/// Per step and round (the step's first submission is round 1, a revision round 2, …): the
/// bytes to write for an output instead of the author's example, and the validators that fail.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// (step, round) → output path → bytes.
    pub outputs:
        std::collections::BTreeMap<(String, usize), std::collections::BTreeMap<String, Vec<u8>>>,
    /// (step, round) → ids of the validators whose report fails.
    pub failing: std::collections::BTreeMap<(String, usize), std::collections::BTreeSet<String>>,
}

impl StageConfig {
    /// A plain run of `target` as `harness` in `project`: the release's only (or named)
    /// workflow at its highest version, started afresh, no fault, no revise, no stop, no
    /// sign-off, the author's own bytes. Set the fields that differ.
    pub fn new(harness: Harness, target: Target, project: std::path::PathBuf) -> Self {
        Self {
            harness,
            target,
            project,
            workflow: None,
            workflow_version: None,
            resume: false,
            fault: None,
            revise: false,
            stop_after: None,
            sign_off_as: None,
            vary: None,
            script: None,
            trace: None,
        }
    }
}

/// How a step went.
#[derive(Debug, Clone)]
pub struct StepRecord {
    /// Step id.
    pub step: String,
    /// `advanced`, `completed`, `revise`, or the rejection codes.
    pub outcome: String,
    /// Wall time of the step, in milliseconds.
    pub millis: u128,
    /// Files written into the project.
    pub files: Vec<String>,
    /// On `revise`: the rule of each failing check and the id of each failing validator that
    /// sent the step back, sorted.
    pub sent_back_by: Vec<String>,
    /// On `awaiting approval`: the rule of each failed check an approver must waive, sorted.
    pub to_waive: Vec<String>,
}

/// One request the harness made, as its caller waited for it.
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// The tool called, or the MCP method (`resources/read`, `resources/list`, `tools/list`).
    pub method: String,
    /// Wall time until the answer, every retry and its pause included, in microseconds.
    pub micros: u64,
    /// Attempts made, the first included (more than one: a transport error was retried).
    pub attempts: u32,
}

/// The observed result of an injected fault.
#[derive(Debug, Clone)]
pub struct FaultOutcome {
    /// The fault.
    pub fault: Fault,
    /// The codes the server answered with.
    pub codes: Vec<String>,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The session.
    pub session_id: String,
    /// The workflow (`id@version`).
    pub workflow: String,
    /// Its final status.
    pub status: String,
    /// One record per step handled in this run.
    pub steps: Vec<StepRecord>,
    /// The injected fault's outcome, if any.
    pub fault: Option<FaultOutcome>,
    /// The sign-off the session waits for, as the server described it (`approval` of the
    /// payload: the step, approvals needed and given, who may decide), when it stopped there.
    pub approval: Option<serde_json::Value>,
    /// The notes of people who sent the resumed step back, as the session read on `--resume`.
    pub sent_back: Vec<String>,
    /// Every request of the run, in order.
    pub calls: Vec<CallRecord>,
    /// The trace context the run's requests carried.
    pub trace: Option<TraceParent>,
}

/// The host capabilities a real host of each harness has (see the host matrix in
/// `docs/operations/workflow-engine-bootstrap.md`). Validator capabilities are not a property
/// of the host here: the stage declares what the workflow's validators need.
pub fn host_capabilities(harness: Harness) -> Vec<HostCapability> {
    use HostCapability::*;
    match harness {
        // Codex does not surface MCP prompts; it materializes skills and agents in the project.
        // Nor does it hold a spawned role to its read-only sandbox or to its inputs (the codex
        // adapter), so neither is declared.
        Harness::Codex => vec![
            McpTools,
            McpResources,
            NativeSubagents,
            StructuredReports,
            ProjectLocalAssets,
        ],
        Harness::ClaudeCode => HostCapability::ALL.to_vec(),
        // Dynamic delivery only until staging evidence exists (see the adapters).
        Harness::Cowork | Harness::Buzz => {
            vec![McpTools, McpResources, NativeSubagents, StructuredReports]
        }
    }
}

/// Runs the workflow, calling `on_step` after every step with its position and the step count.
pub async fn run(
    config: &StageConfig,
    on_step: &mut (dyn FnMut(&StepRecord, usize, usize) + Send),
) -> Result<Summary, StageError> {
    let project = Project::open(&config.project)?;
    let trace = config.trace.unwrap_or_else(TraceParent::generate);
    let client = connect(&config.target, trace).await?;
    let result = drive::drive(&client, &project, config, on_step)
        .await
        .map(|mut summary| {
            summary.calls = client.take_calls();
            summary.trace = Some(trace);
            summary
        });
    client.close().await;
    result
}

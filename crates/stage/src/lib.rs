//! `rimthan stage`: a scripted harness that runs a whole workflow the way a real host does.
//!
//! # Brief overview
//!
//! [`run`] connects to a server (remote Streamable HTTP, or one started in-process), checks its
//! identity and its four tools, declares the chosen harness's capabilities, delivers host assets
//! as the bound adapter allows (project-local files at the contract's paths, or dynamic
//! delivery), writes each step's declared outputs from built-in sample content, attests them by
//! reading them back from disk, runs each validator as a scripted read-only check of its declared
//! inputs, submits the reports, and writes `.rimthan/workflow-session.json` after every change.
//! A [`Fault`] injects one classic mistake so an operator can see the server's code for it.

mod project;

use std::{path::Path, sync::Arc, time::Instant};

use rimthan_registry::{Harness, HostCapability, ValidatorCapability};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, ProtocolVersion, ReadResourceRequestParams, ResourceContents},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};

pub use project::{Project, ReadBack};

/// Where the session file lives in the project.
pub const SESSION_FILE: &str = ".rimthan/workflow-session.json";

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
    /// The server could not be reached or spoke no MCP.
    #[error("cannot talk to the server: {0}")]
    Connect(String),
    /// The server is not a rimthan workflow engine with exactly the four tools.
    #[error("the server is not a rimthan workflow engine: {0}")]
    Identity(String),
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
    /// A declared output has no built-in sample content.
    #[error("no sample content for {0}; the stage harness knows the research-study outputs only")]
    NoSample(String),
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

/// A classic harness mistake to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Attest a host asset with a digest that is not its rendition's.
    WrongDigest,
    /// Write and attest a file the step does not declare.
    ExtraFile,
    /// Put a declared output behind a symlink.
    SymlinkedOutput,
    /// Submit the report set without one validator's report.
    MissingReport,
    /// Reuse a checkpoint after the session moved on.
    StaleCheckpoint,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 5] = [
        Fault::WrongDigest,
        Fault::ExtraFile,
        Fault::SymlinkedOutput,
        Fault::MissingReport,
        Fault::StaleCheckpoint,
    ];

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::WrongDigest => "wrong-digest",
            Fault::ExtraFile => "extra-file",
            Fault::SymlinkedOutput => "symlinked-output",
            Fault::MissingReport => "missing-report",
            Fault::StaleCheckpoint => "stale-checkpoint",
        }
    }

    /// The code the server answers with.
    pub fn expected_code(self) -> &'static str {
        match self {
            Fault::WrongDigest => "asset_digest_mismatch",
            Fault::ExtraFile => "unexpected_output",
            Fault::SymlinkedOutput => "symlink_in_path",
            Fault::MissingReport => "report_missing",
            Fault::StaleCheckpoint => "stale_checkpoint",
        }
    }
}

impl std::str::FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Fault::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Fault::ALL.iter().map(|f| f.as_str()).collect();
                format!("unknown fault {s:?}: use one of {}", names.join(", "))
            })
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
    },
    /// A server started in this process on the embedded registry.
    InProcess {
        /// Its store.
        database_url: String,
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
    /// Continue from the project's session file.
    pub resume: bool,
    /// A mistake to inject.
    pub fault: Option<Fault>,
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
    /// Its final status.
    pub status: String,
    /// One record per step handled in this run.
    pub steps: Vec<StepRecord>,
    /// The injected fault's outcome, if any.
    pub fault: Option<FaultOutcome>,
}

/// The capabilities a real host of each harness has (see the host matrix).
pub fn declaration(harness: Harness) -> (Vec<HostCapability>, Vec<ValidatorCapability>) {
    use HostCapability::*;
    let host = match harness {
        // Codex does not surface MCP prompts; it materializes skills and agents in the project.
        Harness::Codex => vec![
            McpTools,
            McpResources,
            NativeSubagents,
            ScopedInputs,
            ReadOnlyCapabilities,
            StructuredReports,
            ProjectLocalAssets,
        ],
        Harness::ClaudeCode => HostCapability::ALL.to_vec(),
        // Dynamic delivery only until staging evidence exists (see the adapters).
        Harness::Cowork | Harness::Buzz => {
            vec![McpTools, McpResources, NativeSubagents, StructuredReports]
        }
    };
    let validator = vec![
        ValidatorCapability::WorkspaceRead,
        ValidatorCapability::WebRead,
        ValidatorCapability::GitRead,
    ];
    (host, validator)
}

/// Built-in sample content of the research-study outputs.
fn sample(path: &str) -> Option<&'static [u8]> {
    Some(match path {
        "research/question.json" => {
            include_bytes!("../../../registry/samples/research-study/research/question.json")
        }
        "research/sources.json" => {
            include_bytes!("../../../registry/samples/research-study/research/sources.json")
        }
        "research/notes.md" => {
            include_bytes!("../../../registry/samples/research-study/research/notes.md")
        }
        "research/findings.md" => {
            include_bytes!("../../../registry/samples/research-study/research/findings.md")
        }
        _ => return None,
    })
}

type Client = RunningService<RoleClient, ()>;

async fn connect(target: &Target) -> Result<Client, StageError> {
    let err = |e: &dyn std::fmt::Display| StageError::Connect(e.to_string());
    match target {
        Target::Url { url, protocol } => {
            let transport = StreamableHttpClientTransport::from_uri(url.clone());
            match protocol {
                Protocol::V2025_11_25 => ().serve(transport).await.map_err(|e| err(&e)),
                Protocol::V2026_07_28 => ()
                    .serve_with_lifecycle(
                        transport,
                        ClientLifecycleMode::Discover {
                            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                        },
                    )
                    .await
                    .map_err(|e| err(&e)),
            }
        }
        Target::InProcess { database_url } => {
            let registry = rimthan_registry::verify_embedded().map_err(|e| err(&e))?;
            let store = rimthan_engine::store::open(database_url)
                .await
                .map_err(|e| err(&e))?;
            let releases = Arc::new(rimthan_engine::Releases::new(
                registry,
                "stable".parse().expect("valid channel"),
            ));
            let engine = rimthan_engine::Engine::new(releases, store, None)
                .await
                .map_err(|e| err(&e))?;
            let server = rimthan_mcp::RimthanServer::new(
                Arc::new(engine),
                rimthan_mcp::Profile::WorkflowEngine,
            );
            let (server_io, client_io) = tokio::io::duplex(1 << 20);
            tokio::spawn(async move {
                if let Ok(running) = server.serve(server_io).await {
                    let _ = running.waiting().await;
                }
            });
            ().serve(client_io).await.map_err(|e| err(&e))
        }
    }
}

async fn verify_identity(client: &Client) -> Result<(), StageError> {
    let info = client
        .peer_info()
        .and_then(|i| i.server_info.as_ref().map(|s| s.name.clone()));
    if info.as_deref() != Some(rimthan_mcp::SERVER_NAME) {
        return Err(StageError::Identity(format!("serverInfo name is {info:?}")));
    }
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| StageError::Connect(e.to_string()))?;
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    let expected = [
        rimthan_mcp::START,
        rimthan_mcp::ACTIVE_STEP,
        rimthan_mcp::PREPARE,
        rimthan_mcp::SUBMIT,
    ];
    if names != expected {
        return Err(StageError::Identity(format!(
            "tools are {names:?}, expected exactly {expected:?}"
        )));
    }
    Ok(())
}

/// A tool result: its structured content and whether it is an error outcome.
async fn call(client: &Client, tool: &str, arguments: Value) -> Result<(Value, bool), StageError> {
    let params =
        CallToolRequestParams::new(tool.to_owned()).with_arguments(rmcp::model::object(arguments));
    let result = client
        .call_tool(params)
        .await
        .map_err(|e| StageError::Protocol {
            tool: tool.into(),
            detail: e.to_string(),
        })?;
    let value = result
        .structured_content
        .ok_or_else(|| StageError::Protocol {
            tool: tool.into(),
            detail: "no structured content".into(),
        })?;
    Ok((value, result.is_error == Some(true)))
}

fn codes(value: &Value) -> Vec<String> {
    let list = value
        .get("failures")
        .or_else(|| value.get("blockers"))
        .and_then(Value::as_array);
    list.map(|l| {
        l.iter()
            .filter_map(|f| f["code"].as_str().map(str::to_owned))
            .collect()
    })
    .unwrap_or_default()
}

fn str_field<'v>(value: &'v Value, tool: &str, field: &str) -> Result<&'v str, StageError> {
    value[field].as_str().ok_or_else(|| StageError::Protocol {
        tool: tool.into(),
        detail: format!("no {field}"),
    })
}

async fn read_resource(client: &Client, uri: &str) -> Result<Vec<u8>, StageError> {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri.to_owned()))
        .await
        .map_err(|e| StageError::Protocol {
            tool: "resources/read".into(),
            detail: format!("{uri}: {e}"),
        })?;
    match result.contents.into_iter().next() {
        Some(ResourceContents::TextResourceContents { text, .. }) => Ok(text.into_bytes()),
        _ => Err(StageError::Protocol {
            tool: "resources/read".into(),
            detail: format!("{uri}: no text content"),
        }),
    }
}

fn save_session_file(project: &Project, payload: &Value) -> Result<(), StageError> {
    if let Some(content) = payload.get("session_file").map(|f| &f["content"]) {
        let mut text = serde_json::to_string_pretty(content).expect("JSON serializes");
        text.push('\n');
        project.write_session_file(text.as_bytes())?;
    }
    Ok(())
}

/// Runs the workflow, calling `on_step` after every step.
pub async fn run(
    config: &StageConfig,
    on_step: &mut dyn FnMut(&StepRecord, usize, usize),
) -> Result<Summary, StageError> {
    let project = Project::open(&config.project)?;
    let client = connect(&config.target).await?;
    let result = drive(&client, &project, config, on_step).await;
    let _ = client.cancel().await;
    result
}

async fn drive(
    client: &Client,
    project: &Project,
    config: &StageConfig,
    on_step: &mut dyn FnMut(&StepRecord, usize, usize),
) -> Result<Summary, StageError> {
    verify_identity(client).await?;
    let harness = config.harness.as_str();
    let (host_caps, validator_caps) = declaration(config.harness);
    let adapter = json!({"id": harness, "version": "1.1.0"});
    let mut payload = if config.resume {
        let path = project.root().join(SESSION_FILE);
        let text = std::fs::read(&path)
            .map_err(|_| StageError::NoSessionFile(path.display().to_string()))?;
        let file: Value = serde_json::from_slice(&text).map_err(|e| StageError::Protocol {
            tool: "session file".into(),
            detail: e.to_string(),
        })?;
        let (value, error) = call(
            client,
            rimthan_mcp::ACTIVE_STEP,
            json!({"checkpoint": file["checkpoint"]}),
        )
        .await?;
        if error && value["status"] == "rejected" {
            return Err(StageError::Rejected {
                step: "(resume)".into(),
                tool: rimthan_mcp::ACTIVE_STEP.into(),
                codes: codes(&value),
            });
        }
        value
    } else {
        let start = json!({"workflow_id": "research-study",
            "host": {"harness": harness, "adapter": adapter, "capabilities": host_caps, "validator_capabilities": validator_caps}});
        let (value, _) = call(client, rimthan_mcp::START, start).await?;
        if value["status"] == "blocked" {
            return Err(StageError::Blocked {
                codes: codes(&value),
            });
        }
        value
    };
    save_session_file(project, &payload)?;
    let session_id = str_field(&payload, rimthan_mcp::START, "session_id")?.to_owned();
    let total = 4;
    let mut steps = Vec::new();
    let mut fault = config.fault;
    let mut previous_checkpoint: Option<Value> = None;

    while payload["status"] != "completed" {
        let started = Instant::now();
        let step = payload["step"].clone();
        let step_id = str_field(&step, rimthan_mcp::ACTIVE_STEP, "id")?.to_owned();
        let index = match step_id.as_str() {
            "setup-workspace" => 1,
            "frame-question" => 2,
            "gather-sources" => 3,
            _ => 4,
        };

        // The stale-checkpoint fault: reuse the checkpoint the session has moved past.
        if fault == Some(Fault::StaleCheckpoint)
            && let Some(old) = previous_checkpoint.take()
        {
            let (value, _) =
                call(client, rimthan_mcp::ACTIVE_STEP, json!({"checkpoint": old})).await?;
            return Ok(faulted(
                session_id,
                &payload,
                steps,
                Fault::StaleCheckpoint,
                codes(&value),
            ));
        }

        let mut files = Vec::new();
        let mut prepare = json!({"checkpoint": payload["checkpoint"], "step_id": step_id});
        if step["kind"] == "setup" {
            let mut deliveries = Vec::new();
            for asset in payload["host_assets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let uri = str_field(&asset, rimthan_mcp::START, "uri")?;
                let bytes = read_resource(client, uri).await?;
                let (sha256, mode, path) = match asset["project_local_path"].as_str() {
                    Some(path) => {
                        project.write(path, &bytes)?;
                        files.push(path.to_owned());
                        (
                            project.read_back(path)?.sha256.to_string(),
                            "project-local",
                            Some(path.to_owned()),
                        )
                    }
                    None => (
                        rimthan_registry::Sha256Digest::of(&bytes).to_string(),
                        "dynamic-context",
                        None,
                    ),
                };
                let mut delivery = json!({"kind": asset["kind"], "id": asset["id"], "version": asset["version"], "sha256": sha256, "delivery_mode": mode});
                if let Some(path) = path {
                    delivery["path"] = json!(path);
                }
                deliveries.push(delivery);
            }
            if fault == Some(Fault::WrongDigest)
                && let Some(first) = deliveries.first_mut()
            {
                first["sha256"] = json!("0".repeat(64));
            }
            prepare["host_attestation"] = json!({"harness": harness, "adapter": adapter,
                "capabilities": host_caps, "validator_capabilities": validator_caps, "deliveries": deliveries});
        } else {
            let mut artifacts = Vec::new();
            let outputs = step["outputs"].as_array().cloned().unwrap_or_default();
            for (i, output) in outputs.iter().enumerate() {
                let path = str_field(output, rimthan_mcp::ACTIVE_STEP, "path")?;
                let bytes = sample(path).ok_or_else(|| StageError::NoSample(path.into()))?;
                if i == 0 && fault == Some(Fault::SymlinkedOutput) {
                    project.symlink_to_shadow(path, bytes)?;
                } else {
                    project.write(path, bytes)?;
                }
                files.push(path.to_owned());
                artifacts.push(attest(project, output, path)?);
            }
            if fault == Some(Fault::ExtraFile) {
                let extra = "research/scratch.md";
                project.write(extra, b"# Scratch\n\nNot a declared output.\n")?;
                files.push(extra.into());
                let declared = json!({"artifact_id": "scratch", "path": extra, "owner_step": step_id,
                    "media_type": "text/markdown", "schema": null, "write_policy": "create-or-replace-owned"});
                artifacts.push(attest(project, &declared, extra)?);
            }
            prepare["output_attestation"] = json!({"artifacts": artifacts});
        }
        let (plan, rejected) = call(client, rimthan_mcp::PREPARE, prepare).await?;
        if rejected {
            let found = codes(&plan);
            if let Some(f) = fault.filter(|f| {
                matches!(
                    f,
                    Fault::WrongDigest | Fault::ExtraFile | Fault::SymlinkedOutput
                )
            }) {
                return Ok(faulted(session_id, &payload, steps, f, found));
            }
            return Err(StageError::Rejected {
                step: step_id,
                tool: rimthan_mcp::PREPARE.into(),
                codes: found,
            });
        }

        let mut reports = Vec::new();
        for validator in plan["validators"].as_array().cloned().unwrap_or_default() {
            reports.push(run_validator(project, &validator)?);
        }
        if fault == Some(Fault::MissingReport) && !reports.is_empty() {
            reports.remove(0);
            let submit = json!({"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports});
            let (value, _) = call(client, rimthan_mcp::SUBMIT, submit).await?;
            return Ok(faulted(
                session_id,
                &payload,
                steps,
                Fault::MissingReport,
                codes(&value),
            ));
        }
        let submit = json!({"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports});
        let (next, _) = call(client, rimthan_mcp::SUBMIT, submit).await?;
        if next["status"] == "rejected" {
            return Err(StageError::Rejected {
                step: step_id,
                tool: rimthan_mcp::SUBMIT.into(),
                codes: codes(&next),
            });
        }
        save_session_file(project, &next)?;
        let outcome = match next["status"].as_str() {
            Some("completed") => "completed",
            Some("revise") => "revise",
            _ => "advanced",
        };
        let record = StepRecord {
            step: step_id,
            outcome: outcome.into(),
            millis: started.elapsed().as_millis(),
            files,
        };
        on_step(&record, index, total);
        steps.push(record);
        previous_checkpoint = Some(payload["checkpoint"].clone());
        payload = next;
        if fault.is_some_and(|f| f != Fault::StaleCheckpoint) && payload["status"] == "completed" {
            fault = None;
        }
    }
    Ok(Summary {
        session_id,
        status: "completed".into(),
        steps,
        fault: None,
    })
}

fn faulted(
    session_id: String,
    payload: &Value,
    steps: Vec<StepRecord>,
    fault: Fault,
    codes: Vec<String>,
) -> Summary {
    let status = payload["status"].as_str().unwrap_or("unknown").to_owned();
    Summary {
        session_id,
        status,
        steps,
        fault: Some(FaultOutcome { fault, codes }),
    }
}

/// The output attestation entry for a declared output, from what is on disk.
fn attest(project: &Project, output: &Value, path: &str) -> Result<Value, StageError> {
    let back = project.read_back(path)?;
    let mut artifact = json!({"artifact_id": output["artifact_id"], "path": path, "owner_step": output["owner_step"],
        "media_type": output["media_type"], "bytes": back.bytes.len(), "sha256": back.sha256.to_string(),
        "symlink_free": back.symlink_free, "read_back": true, "write_policy": output["write_policy"]});
    if !output["schema"].is_null() {
        artifact["schema_sha256"] = output["schema"]["sha256"].clone();
        artifact["content"] =
            serde_json::from_slice(&back.bytes).map_err(|e| StageError::UnsafePath {
                path: path.into(),
                reason: format!("not JSON: {e}"),
            })?;
    }
    Ok(artifact)
}

/// A scripted validator: reads exactly its declared inputs, checks them against the accepted
/// digests in the plan, and reports.
fn run_validator(project: &Project, validator: &Value) -> Result<Value, StageError> {
    let mut read = Vec::new();
    let mut findings = Vec::new();
    for input in validator["inputs"].as_array().cloned().unwrap_or_default() {
        let path = str_field(&input, rimthan_mcp::PREPARE, "path")?;
        let back = project.read_back(path)?;
        if input["sha256"]
            .as_str()
            .is_some_and(|s| s != back.sha256.to_string())
        {
            findings.push(json!({"severity": "error", "message": "the file changed since it was accepted", "path": path}));
        }
        read.push(path.to_owned());
    }
    let allowed: Vec<Value> = validator["capabilities"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let used: Vec<Value> = allowed
        .into_iter()
        .filter(|c| c == "workspace.read")
        .collect();
    let verdict = if findings.is_empty() { "pass" } else { "fail" };
    Ok(
        json!({"validator_id": validator["id"], "validator_version": validator["version"], "verdict": verdict,
        "summary": format!("Scripted check of {} declared input(s).", read.len()), "findings": findings,
        "inputs_read": read, "capabilities_used": used}),
    )
}

//! `rimthan stage`: run the scripted harness against a server and report each step.

use std::{io::IsTerminal as _, path::PathBuf};

use clap::Args;
use rimthan_engine::Serving;
use rimthan_registry::{Harness, IdError, Version, WorkflowId};
use rimthan_stage::{
    Fault, Protocol, SESSION_FILE, StageConfig, StepRecord, Target, TraceParent, run,
};

use super::{AwaitingSignOff, InputError};

#[derive(Debug, Args)]
pub(crate) struct StageArgs {
    /// The harness to behave as: codex, claude-code, cowork or buzz.
    #[arg(long)]
    harness: String,
    /// A running server's MCP endpoint; omit to start one in-process.
    #[arg(long)]
    url: Option<String>,
    /// The protocol revision to speak over HTTP: 2026-07-28 or 2025-11-25.
    #[arg(long, default_value = "2026-07-28")]
    protocol: String,
    /// The in-process server's store (default: a SQLite file in the project's .rimthan folder).
    #[arg(long)]
    database_url: Option<String>,
    /// The in-process server's registry folder (default: the embedded registry).
    #[arg(long)]
    registry: Option<PathBuf>,
    /// The in-process server's channel.
    #[arg(long, default_value = "stable")]
    channel: String,
    /// Instead of a channel: the release the in-process server starts the session from, by id;
    /// with --registry, a draft (`registry build --draft`) is served only this way.
    #[arg(long, conflicts_with = "channel")]
    release: Option<String>,
    /// The workflow to start (default: the release's only workflow).
    #[arg(long)]
    workflow: Option<String>,
    /// Its version (default: the highest the release offers).
    #[arg(long)]
    workflow_version: Option<String>,
    /// Make the first validator that runs fail once, so its step goes through `revise`.
    #[arg(long)]
    revise: bool,
    /// Stop after this many report submissions, leaving the session where it stands (with
    /// --revise and 1, in `revise`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    stop_after: Option<u32>,
    /// Sign off every step that waits for it under this name, as the operator at this machine
    /// (in-process only, where nobody authenticates: recorded as asserted, not authenticated).
    #[arg(long, value_name = "NAME")]
    sign_off_as: Option<String>,
    /// A bearer token for a server at --url that authenticates callers.
    #[arg(long, env = "RIMTHAN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The project folder to work in (created if absent).
    #[arg(long)]
    project: PathBuf,
    /// Continue from the project's .rimthan/workflow-session.json (the Git-handoff path).
    #[arg(long)]
    resume: bool,
    /// Inject a classic mistake and show the server's code: wrong-digest, extra-file,
    /// symlinked-output, missing-report, stale-checkpoint or text-mismatch.
    #[arg(long)]
    fault: Option<String>,
    /// The W3C trace context every request carries, so the server's spans for the session join
    /// this trace (default: a new trace, whose id is printed).
    #[arg(long, env = "TRACEPARENT", value_name = "TRACEPARENT", value_parser = traceparent)]
    traceparent: Option<TraceParent>,
}

fn traceparent(value: &str) -> Result<TraceParent, String> {
    value
        .parse()
        .map_err(|e: rimthan_stage::TraceParentError| e.to_string())
}

fn progress_line(record: &StepRecord, index: usize, total: usize, bar: bool) {
    if bar {
        let done = "#".repeat(index);
        let todo = " ".repeat(total.saturating_sub(index));
        eprintln!(
            "[{done}{todo}] {index}/{total} {:<20} {:<10} {:>6} ms",
            record.step, record.outcome, record.millis
        );
    } else {
        eprintln!(
            "step {index}/{total} {} {} {} ms",
            record.step, record.outcome, record.millis
        );
    }
}

impl StageArgs {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let input = |e: IdError| InputError(e.to_string());
        let harness: Harness = self.harness.parse().map_err(input)?;
        let workflow: Option<WorkflowId> = self
            .workflow
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(input)?;
        let workflow_version: Option<Version> = self
            .workflow_version
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(input)?;
        let serving = match &self.release {
            Some(release) => Serving::Release(release.parse().map_err(input)?),
            None => Serving::Channel(self.channel.parse().map_err(input)?),
        };
        let fault: Option<Fault> = self
            .fault
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(InputError)?;
        let protocol = match self.protocol.as_str() {
            "2026-07-28" => Protocol::V2026_07_28,
            "2025-11-25" => Protocol::V2025_11_25,
            other => {
                return Err(InputError(format!(
                    "unknown protocol {other:?}: use 2026-07-28 or 2025-11-25"
                ))
                .into());
            }
        };
        if self.url.is_some() && (self.registry.is_some() || self.release.is_some()) {
            return Err(InputError(
                "--registry and --release are for the in-process server; a server at --url \
                 serves its own (`serve --release`)"
                    .into(),
            )
            .into());
        }
        if self.url.is_some() && self.sign_off_as.is_some() {
            return Err(InputError(
                "--sign-off-as is for the in-process server; at a server at --url approvers \
                 decide at /admin or with `rimthan sessions approve`"
                    .into(),
            )
            .into());
        }
        if let Some(name) = &self.sign_off_as
            && rimthan_engine::approval::Approver::asserted(name).is_none()
        {
            return Err(InputError(format!(
                "--sign-off-as takes a name of 1 to {} bytes without control characters",
                rimthan_engine::approval::MAX_ASSERTED_NAME_BYTES
            ))
            .into());
        }
        if self.url.is_none() && self.token.is_some() {
            return Err(InputError(
                "--token is for a server at --url; the in-process server authenticates no one"
                    .into(),
            )
            .into());
        }
        let project_existed = self.project.exists();
        let state_dir = self.project.join(".rimthan");
        let state_existed = state_dir.exists();
        let target = match self.url {
            Some(url) => Target::Url {
                url,
                protocol,
                token: self.token,
            },
            None => {
                let url = match self.database_url {
                    Some(url) => url,
                    None => format!(
                        "sqlite://{}",
                        rimthan_stage::Project::open(&self.project)?
                            .state_database()?
                            .display()
                    ),
                };
                Target::InProcess {
                    database_url: url,
                    registry: self.registry,
                    serving,
                }
            }
        };
        let config = StageConfig {
            harness,
            target,
            project: self.project,
            workflow,
            workflow_version,
            resume: self.resume,
            fault,
            revise: self.revise,
            stop_after: self.stop_after.map(|n| n as usize),
            sign_off_as: self.sign_off_as,
            vary: None,
            script: None,
            trace: self.traceparent,
        };
        let bar = std::io::stderr().is_terminal();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let result = runtime.block_on(run(&config, &mut |r, i, t| progress_line(r, i, t, bar)));
        drop(runtime);
        let summary = match result {
            Ok(summary) => summary,
            Err(e) => {
                // A start that did not succeed leaves the project as it found it.
                if !config.resume && !config.project.join(SESSION_FILE).exists() {
                    if !project_existed {
                        let _ = std::fs::remove_dir_all(&config.project);
                    } else if !state_existed {
                        let _ = std::fs::remove_dir_all(&state_dir);
                    }
                }
                return Err(e.into());
            }
        };

        // What the people who sent the step back wrote comes first: it is why this run revises.
        for note in &summary.sent_back {
            println!("{note}");
        }
        println!(
            "session {} ({harness}, {}): {}",
            summary.session_id, summary.workflow, summary.status
        );
        if let Some(trace) = &summary.trace {
            println!("trace {}", trace.trace_id());
        }
        println!("{:<20} {:<10} {:>8}  FILES", "STEP", "OUTCOME", "MS");
        for step in &summary.steps {
            println!(
                "{:<20} {:<10} {:>8}  {}",
                step.step,
                step.outcome,
                step.millis,
                step.files.join(", ")
            );
        }
        if summary.status == "awaiting_approval" && summary.fault.is_none() {
            if let Some(approval) = &summary.approval {
                eprintln!("{}", who_decides(approval));
            }
            let page = match &config.target {
                Target::Url { url, .. } => {
                    let base = url.trim_end_matches('/');
                    let base = base.strip_suffix("/mcp").unwrap_or(base);
                    eprintln!(
                        "approvers decide at {base}/admin/sessions/{} or with `rimthan sessions \
                         approve {}`; then run this again with --resume",
                        summary.session_id, summary.session_id
                    );
                    Some(format!("{base}/admin/sessions/{}", summary.session_id))
                }
                // Nobody is authenticated in-process, so nobody can tell an approver from the
                // participant (docs/operations/facilitator.md §5).
                Target::InProcess { .. } | Target::Engine(_) => {
                    eprintln!(
                        "the in-process server authenticates no one: sign off at this machine \
                         with --resume --sign-off-as NAME (recorded as asserted), or stage \
                         against a server with credentials (--url)"
                    );
                    None
                }
            };
            return Err(AwaitingSignOff {
                session: summary.session_id,
                page,
            }
            .into());
        }
        if let Some(outcome) = summary.fault {
            let expected = outcome.fault.expected_code();
            let matched = outcome.codes.iter().any(|c| c == expected);
            eprintln!(
                "fault {}: the server answered {} (expected {expected}{})",
                outcome.fault.as_str(),
                outcome.codes.join(", "),
                if matched { "" } else { ": MISMATCH" }
            );
            return Err(InputError(format!(
                "fault {} injected; the session did not complete",
                outcome.fault.as_str()
            ))
            .into());
        }
        Ok(())
    }
}

/// "waiting for sign-off of step S: approvals 1 of 2 (bob); may decide: …" from a waiting
/// payload's `approval`.
fn who_decides(approval: &serde_json::Value) -> String {
    let given: Vec<&str> = approval["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["subject"].as_str())
        .collect();
    let mut who = Vec::new();
    if approval["facilitators"] == true {
        who.push("a facilitator of the session's organization".to_owned());
    }
    let roles: Vec<&str> = approval["roles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str())
        .collect();
    if !roles.is_empty() {
        who.push(format!("someone holding the role {}", roles.join(" or ")));
    }
    let mut line = format!(
        "waiting for sign-off of step {}: approvals {} of {}",
        approval["step"].as_str().unwrap_or("?"),
        given.len(),
        approval["approvals_needed"]
    );
    if !given.is_empty() {
        line.push_str(&format!(" ({})", given.join(", ")));
    }
    line.push_str(&format!("; may decide: {}", who.join(", or ")));
    if approval["self_approval"] != true {
        line.push_str(", not the participant");
    }
    line
}

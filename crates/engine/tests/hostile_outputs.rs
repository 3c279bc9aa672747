//! One preparation of every step of the shipped workflows that has deterministic checks, with
//! each Markdown, SQL, CSV or YAML output replaced by hostile text at its declared `max_bytes`
//! (`docs/checks.md` §"What a parsed form costs"): the memory the engine holds meanwhile,
//! counted by this binary's allocator, stays under 64 MiB, and the step is judged (refused or
//! sent to revise), never left hanging. Its own binary: the allocator counts the whole process,
//! so the preparations run one at a time and nothing else runs beside them.

use std::time::Duration;

use peak_alloc::PeakAlloc;
use rimthan_engine::{
    ActivePayload, ActiveStepRequest, Engine, OutputAttestation, PrepareRequest, StartRequest,
    StepResult, Verdict,
};
use rimthan_registry::Sha256Digest;
use rimthan_testkit::engine::*;

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// What the issue that asked for these bounds set for one preparation.
const MEMORY_BOUND: usize = 64 << 20;

/// The most costly text of `max_bytes` bytes for a file of this name's format, as measured by
/// `crates/checks/tests/hostile.rs`: quotations nested around all the text, a flat operator
/// chain, column names longer than the rows, an alias repeated until the file is full.
fn hostile(path: &str, max_bytes: usize) -> Option<String> {
    let text = match path.rsplit_once('.').map(|(_, e)| e) {
        Some("md") => format!(
            "{} {}",
            ">".repeat(max_bytes / 2),
            "x".repeat(max_bytes / 2)
        ),
        Some("sql") => {
            let mut text = String::from("SELECT 1");
            while text.len() + 4 < max_bytes {
                text.push_str("+1");
            }
            text.push_str(";\n");
            text
        }
        Some("csv") => {
            let mut text = (0..64)
                .map(|i| format!("{i}{}", "n".repeat(500)))
                .collect::<Vec<_>>()
                .join(",");
            text.push('\n');
            let row = vec!["1"; 64].join(",");
            while text.len() + row.len() < max_bytes {
                text.push_str(&row);
                text.push('\n');
            }
            text
        }
        Some("yaml" | "yml") => {
            let values = max_bytes / 8;
            format!(
                "anchor: &a [{}x]\nbomb: [{}*a]\n",
                "x, ".repeat(values),
                "*a, ".repeat(values)
            )
        }
        _ => return None,
    };
    Some(text.chars().take(max_bytes).collect())
}

/// The step's worked-example attestation with each output hostile text can stand in for
/// replaced by it; `None` when the step has no such output or no check.
fn hostile_attestation(payload: &ActivePayload) -> Option<OutputAttestation> {
    let step = payload.step.as_ref()?;
    if step.checks.is_empty() {
        return None;
    }
    let mut att = output_attestation(payload);
    let mut replaced = false;
    for (artifact, output) in att.artifacts.iter_mut().zip(&step.outputs) {
        let Some(text) = hostile(&output.path, output.max_bytes as usize) else {
            continue;
        };
        artifact.bytes = text.len() as u64;
        artifact.sha256 = Sha256Digest::of(text.as_bytes()).to_string();
        artifact.text = Some(text);
        replaced = true;
    }
    replaced.then_some(att)
}

/// Seconds of CPU this process has used (user and system), from `/proc/self/stat`.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = stat.rsplit_once(')').unwrap().1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// Walks `start`'s workflow up to its last checked step (`checked`), preparing each checked
/// step once with hostile outputs before passing it with its worked example; returns how many
/// hostile preparations ran.
async fn walk(engine: &Engine, start: &StartRequest, checked: &[String]) -> usize {
    let mut payload = active(engine.start(start.clone(), None).await.unwrap());
    let mut hostile_runs = 0;
    let mut seen = 0;
    while let Some(step) = payload.step.clone() {
        seen += usize::from(checked.contains(&step.id));
        if let Some(att) = hostile_attestation(&payload) {
            let req = PrepareRequest {
                checkpoint: payload.checkpoint.clone(),
                step_id: step.id.clone(),
                host_attestation: None,
                output_attestation: Some(att),
            };
            let before = ALLOCATOR.current_usage();
            ALLOCATOR.reset_peak_usage();
            let cpu_before = cpu();
            let outcome = engine.prepare(req, None).await.unwrap();
            let held = ALLOCATOR.peak_usage().saturating_sub(before);
            let spent = cpu() - cpu_before;
            let judged = serde_json::to_string(&outcome).unwrap();
            eprintln!(
                "{}: held {} KiB, {} ms of CPU: {}",
                step.id,
                held >> 10,
                spent.as_millis(),
                &judged[..judged.len().min(300)]
            );
            assert!(
                held < MEMORY_BOUND,
                "{}: one preparation held {} MiB",
                step.id,
                held >> 20
            );
            assert!(
                judged.contains("\"verdict\":\"fail\"") || judged.contains("check_aborted"),
                "{}: hostile outputs are judged failing: {judged}",
                step.id
            );
            hostile_runs += 1;
        }
        if seen == checked.len() {
            break;
        }
        let plan = ready(
            engine
                .prepare(prepare(&payload, start), None)
                .await
                .unwrap(),
        );
        let submitted = engine
            .submit(submit(&payload, &plan, Verdict::Pass), None)
            .await
            .unwrap();
        let StepResult::Active(next) = submitted.clone() else {
            panic!("{}: the worked example was refused: {submitted:?}", step.id);
        };
        payload = *next;
        if payload.status == rimthan_engine::Status::AwaitingApproval {
            sign_off(engine, &payload.session_id.parse().unwrap()).await;
            let resumed = engine
                .active_step(
                    ActiveStepRequest {
                        checkpoint: payload.checkpoint.clone(),
                    },
                    None,
                )
                .await
                .unwrap();
            payload = step_active(resumed);
        }
    }
    hostile_runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_preparation_of_each_shipped_checked_step_with_hostile_outputs_holds_under_64_mib() {
    let engine = engine_on(sqlite_memory().await).await;
    let registry = rimthan_registry::verify_embedded().unwrap();
    let release = registry.channel(&"stable".parse().unwrap()).unwrap();
    // Each workflow's newest version, whose worked examples the samples are.
    let mut newest = std::collections::BTreeMap::new();
    for workflow in release.workflows() {
        newest.insert(workflow.doc().id.clone(), workflow);
    }
    let mut runs = 0;
    for (id, workflow) in newest {
        let checked: Vec<String> = workflow
            .steps()
            .iter()
            .filter(|s| !s.checks().is_empty())
            .map(|s| s.doc().id.to_string())
            .collect();
        let mut start = start_request("codex");
        start.workflow_id = id;
        // Every validator capability a shipped workflow asks for.
        start
            .host
            .validator_capabilities
            .push(rimthan_registry::ValidatorCapability::DatabaseRead);
        runs += walk(&engine, &start, &checked).await;
    }
    assert!(runs >= 3, "the shipped workflows have checked steps to try");
}

//! A validator's own `report_schema` is the contract of its report (`docs/engine.md` §6.1): the fields it
//! adds beyond the base report are accepted, judged by that schema, bounded, and kept with the
//! report. Runs a test workflow built from `tests/data/report-contracts/` (one work step checked
//! by `file-counter`, whose `counted-report` schema requires `files_checked`, and by
//! `plain-reviewer`, which returns the base report).

use std::{path::Path, sync::Arc};

use rimthan_engine::{
    ActivePayload, AdapterDeclaration, ArtifactAttestation, Engine, HostDeclaration,
    MAX_REPORT_EXTRA_BYTES, MAX_REPORT_EXTRA_FIELDS, OutputAttestation, PrepareRequest, Releases,
    RepositoryPolicy, SessionId, StartRequest, Store, SubmitRequest, ValidationPlan, Verdict,
};
use rimthan_registry::{Sha256Digest, ValidatorCapability, WritePolicy};
use serde_json::{Value, json};

use crate::common::*;

const COUNTER: &str = "file-counter";
const PLAIN: &str = "plain-reviewer";

/// The test release, signed with a fresh key, as the only release of `stable`.
fn checklist_releases() -> Arc<Releases> {
    releases_built_from(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report-contracts"))
}

fn checklist_start() -> StartRequest {
    StartRequest {
        workflow_id: "checklist".parse().unwrap(),
        workflow_version: None,
        release: None,
        channel: None,
        host: HostDeclaration {
            harness: "codex".into(),
            adapter: Some(AdapterDeclaration {
                id: Some("codex".into()),
                version: Some("1.1.0".into()),
            }),
            capabilities: all_host_capabilities(),
            validator_capabilities: vec![ValidatorCapability::WorkspaceRead],
        },
        repository_policy: RepositoryPolicy::default(),
        idempotency_key: None,
    }
}

fn notes_attestation(payload: &ActivePayload) -> OutputAttestation {
    let output = &payload.step.as_ref().unwrap().outputs[0];
    let content = json!({"notes": ["Every claim names its source."]});
    let bytes = serde_json::to_vec(&content).unwrap();
    OutputAttestation {
        artifacts: vec![ArtifactAttestation {
            artifact_id: output.artifact_id.clone(),
            path: output.path.clone(),
            owner_step: output.owner_step.clone(),
            media_type: output.media_type.clone(),
            schema_sha256: output.schema.as_ref().map(|s| s.sha256.clone()),
            bytes: bytes.len() as u64,
            sha256: Sha256Digest::of(&bytes).to_string(),
            symlink_free: true,
            read_back: true,
            write_policy: WritePolicy::CreateOrReplaceOwned,
            content: Some(content),
            text: None,
        }],
        inputs: vec![],
    }
}

struct AtWork {
    engine: Engine,
    store: Arc<dyn Store>,
    payload: ActivePayload,
    plan: ValidationPlan,
}

/// A session at `write-notes`, its outputs attested and the plan ready.
async fn at_write_notes() -> AtWork {
    let store = sqlite_memory().await;
    let engine = Engine::new(checklist_releases(), store.clone(), None)
        .await
        .unwrap();
    let start = checklist_start();
    let setup = active(engine.start(start.clone(), None).await.unwrap());
    let payload = pass_step(&engine, &setup, &start).await;
    assert_eq!(payload.step.as_ref().unwrap().id, "write-notes");
    let plan = ready(
        engine
            .prepare(
                PrepareRequest {
                    checkpoint: payload.checkpoint.clone(),
                    step_id: "write-notes".into(),
                    host_attestation: None,
                    output_attestation: Some(notes_attestation(&payload)),
                },
                None,
            )
            .await
            .unwrap(),
    );
    let ids: Vec<_> = plan.validators.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, [COUNTER, PLAIN]);
    AtWork {
        engine,
        store,
        payload,
        plan,
    }
}

impl AtWork {
    /// Faithful passing reports, `file-counter`'s carrying `files_checked`, then `edit`.
    fn submission(&self, edit: impl FnOnce(&mut Value, &mut Value)) -> SubmitRequest {
        let mut req = submit(&self.payload, &self.plan, Verdict::Pass);
        req.reports[0]
            .extra
            .insert("files_checked".into(), json!(1));
        let mut counter = serde_json::to_value(&req.reports[0]).unwrap();
        let mut plain = serde_json::to_value(&req.reports[1]).unwrap();
        edit(&mut counter, &mut plain);
        req.reports = vec![
            serde_json::from_value(counter).unwrap(),
            serde_json::from_value(plain).unwrap(),
        ];
        req
    }

    /// The rejection's failures, as JSON.
    async fn rejected(&self, req: SubmitRequest) -> Vec<Value> {
        let result = serde_json::to_value(self.engine.submit(req, None).await.unwrap()).unwrap();
        assert_eq!(result["status"], "rejected", "{result:#}");
        result["failures"].as_array().unwrap().clone()
    }
}

/// The single failure's code, validator and the error pointers of its detail.
fn one_failure(failures: &[Value]) -> (&str, &str, Vec<&str>) {
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let f = &failures[0];
    let pointers = f["detail"]["errors"]
        .as_array()
        .map(|e| e.iter().map(|e| e["pointer"].as_str().unwrap()).collect())
        .unwrap_or_default();
    (
        f["code"].as_str().unwrap(),
        f["detail"]["validator_id"].as_str().unwrap(),
        pointers,
    )
}

#[tokio::test]
async fn a_report_with_the_field_its_schema_requires_passes_and_keeps_it() {
    let at = at_write_notes().await;
    let req = at.submission(|_, _| {});
    let done = step_active(at.engine.submit(req, None).await.unwrap());
    assert_eq!(done.status.as_str(), "completed");
    let id: SessionId = done.session_id.parse().unwrap();
    let session = at.store.load_session(&id).await.unwrap().unwrap();
    let kept = &session.reports[&"write-notes".parse().unwrap()];
    assert_eq!(kept[0].validator_id, COUNTER);
    assert_eq!(kept[0].extra["files_checked"], json!(1));
    assert!(kept[1].extra.is_empty());
    assert!(session.reports[&"setup-workspace".parse().unwrap()].is_empty());
}

#[tokio::test]
async fn a_failing_round_keeps_its_reports_until_the_round_that_passes() {
    let at = at_write_notes().await;
    let req = at.submission(|counter, _| {
        counter["verdict"] = json!("fail");
        counter["files_checked"] = json!(0);
    });
    let revise = step_active(at.engine.submit(req, None).await.unwrap());
    assert_eq!(revise.status.as_str(), "revise");
    assert_eq!(revise.findings[0].validator_id, COUNTER);
    let id: SessionId = revise.session_id.parse().unwrap();
    let step = "write-notes".parse().unwrap();
    let session = at.store.load_session(&id).await.unwrap().unwrap();
    assert_eq!(session.reports[&step][0].extra["files_checked"], json!(0));

    let plan = ready(
        at.engine
            .prepare(
                PrepareRequest {
                    checkpoint: revise.checkpoint.clone(),
                    step_id: "write-notes".into(),
                    host_attestation: None,
                    output_attestation: Some(notes_attestation(&revise)),
                },
                None,
            )
            .await
            .unwrap(),
    );
    let again = AtWork {
        payload: revise,
        plan,
        ..at
    };
    let done = step_active(
        again
            .engine
            .submit(again.submission(|_, _| {}), None)
            .await
            .unwrap(),
    );
    assert_eq!(done.status.as_str(), "completed");
    let session = again.store.load_session(&id).await.unwrap().unwrap();
    assert_eq!(session.reports[&step][0].extra["files_checked"], json!(1));
}

#[tokio::test]
async fn a_report_without_the_field_its_schema_requires_is_report_schema_invalid() {
    let at = at_write_notes().await;
    let failures = at
        .rejected(at.submission(|counter, _| {
            counter.as_object_mut().unwrap().remove("files_checked");
        }))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_schema_invalid", COUNTER, vec![""])
    );
    let message = failures[0]["message"].as_str().unwrap();
    assert!(message.contains("files_checked"), "{message}");
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_report_schema_invalid_with_its_pointer() {
    let at = at_write_notes().await;
    let failures = at
        .rejected(at.submission(|counter, _| counter["files_checked"] = json!(-1)))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_schema_invalid", COUNTER, vec!["/files_checked"])
    );
}

#[tokio::test]
async fn a_field_the_validator_schema_does_not_declare_is_report_schema_invalid() {
    let at = at_write_notes().await;
    let failures = at
        .rejected(at.submission(|counter, _| counter["coverage"] = json!(0.5)))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_schema_invalid", COUNTER, vec![""])
    );
    let message = failures[0]["message"].as_str().unwrap();
    assert!(message.contains("coverage"), "{message}");
}

#[tokio::test]
async fn a_base_report_validator_still_refuses_any_extra_field() {
    let at = at_write_notes().await;
    let failures = at
        .rejected(at.submission(|_, plain| plain["files_checked"] = json!(1)))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_schema_invalid", PLAIN, vec![""])
    );
    let message = failures[0]["message"].as_str().unwrap();
    assert!(message.contains("files_checked"), "{message}");
}

#[tokio::test]
async fn a_misspelt_base_field_beside_the_real_one_is_named_by_the_schema() {
    let at = at_write_notes().await;
    let failures = at
        .rejected(at.submission(|_, plain| plain["verdikt"] = json!("pass")))
        .await;
    let message = failures[0]["message"].as_str().unwrap();
    assert!(message.contains("verdikt"), "{message}");
}

#[tokio::test]
async fn too_many_extra_fields_are_refused_before_the_schema_runs() {
    let at = at_write_notes().await;
    let failures = at
        .rejected(at.submission(|counter, _| {
            for i in 0..MAX_REPORT_EXTRA_FIELDS {
                counter[format!("extra_{i}")] = json!(i);
            }
        }))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_extras_exceeded", COUNTER, vec![])
    );
    let detail = &failures[0]["detail"];
    assert_eq!(detail["fields"], json!(MAX_REPORT_EXTRA_FIELDS + 1));
    assert_eq!(detail["max_fields"], json!(MAX_REPORT_EXTRA_FIELDS));
}

#[tokio::test]
async fn extra_fields_over_the_byte_bound_are_refused_without_echoing_them() {
    let at = at_write_notes().await;
    let big = "x".repeat(MAX_REPORT_EXTRA_BYTES);
    let failures = at
        .rejected(at.submission(|_, plain| plain["notes"] = json!(big)))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_extras_exceeded", PLAIN, vec![])
    );
    let text = failures[0].to_string();
    assert!(text.len() < 1024, "the failure echoes the input: {text}");
    assert_eq!(
        failures[0]["detail"]["max_bytes"],
        json!(MAX_REPORT_EXTRA_BYTES)
    );
}

#[tokio::test]
async fn extras_at_the_bounds_reach_the_schema() {
    let at = at_write_notes().await;
    // The byte bound counts the extras as one compact JSON object: `{"f":"…"}` is 8 bytes more
    // than the string.
    let fits = "x".repeat(MAX_REPORT_EXTRA_BYTES - 8);
    let failures = at
        .rejected(at.submission(|_, plain| plain["f"] = json!(fits)))
        .await;
    assert_eq!(
        one_failure(&failures),
        ("report_schema_invalid", PLAIN, vec![""])
    );
}

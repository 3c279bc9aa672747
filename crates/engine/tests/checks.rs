//! Deterministic checks judge the participant's actual outputs (`docs/engine.md` §5.1): the
//! server holds each text to its attested digest, runs the step's checks while preparing, and
//! a failing check sends the step to `revise` with its rule, path and line whatever the
//! reports say. Runs the test workflow of `tests/data/checked/` (see its README).

use std::{collections::BTreeMap, path::Path, sync::Arc};

use rimthan_engine::{
    ActivePayload, AdapterDeclaration, ArtifactAttestation, CheckVerdict, Engine, HostDeclaration,
    InputText, OutputAttestation, PrepareRequest, Releases, RepositoryPolicy, SessionId,
    StartRequest, Status, ValidationPlan, Verdict,
};
use rimthan_registry::{Sha256Digest, ValidatorCapability};
use serde_json::Value;

use crate::common::*;

pub(crate) const PLAN: &str = r#"{"title": "Add a sales channel", "risks": ["backfill load"]}"#;
pub(crate) const NOTE_OK: &str =
    "# Add a sales channel\n\n## Risks\n\n- The backfill loads the primary (data team).\n";
pub(crate) const NOTE_NO_OWNER: &str =
    "# Add a sales channel\n\n## Risks\n\n- The backfill loads the primary.\n";
pub(crate) const SQL_OK: &str =
    "SET statement_timeout = '5s';\nALTER TABLE orders ADD COLUMN sales_channel text;\n";
const SQL_NO_TIMEOUT: &str = "ALTER TABLE orders ADD COLUMN sales_channel text;\n";

fn releases() -> Arc<Releases> {
    releases_built_from(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/checked"))
}

pub(crate) fn start() -> StartRequest {
    StartRequest {
        workflow_id: "release-note".parse().unwrap(),
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

/// The attestation of a harness that wrote `files` (path → text) and sends the text of every
/// output and input the payload marks `send_text`.
pub(crate) fn attest(payload: &ActivePayload, files: &BTreeMap<&str, &str>) -> OutputAttestation {
    let step = payload.step.as_ref().unwrap();
    OutputAttestation {
        artifacts: step
            .outputs
            .iter()
            .map(|o| {
                let text = files[o.path.as_str()];
                let json = o.media_type == "application/json";
                ArtifactAttestation {
                    artifact_id: o.artifact_id.clone(),
                    path: o.path.clone(),
                    owner_step: o.owner_step.clone(),
                    media_type: o.media_type.clone(),
                    schema_sha256: o.schema.as_ref().map(|s| s.sha256.clone()),
                    bytes: text.len() as u64,
                    sha256: Sha256Digest::of(text.as_bytes()).to_string(),
                    symlink_free: true,
                    read_back: true,
                    write_policy: o.write_policy,
                    content: json.then(|| serde_json::from_str(text).unwrap()),
                    text: o.send_text.then(|| text.to_owned()),
                }
            })
            .collect(),
        inputs: step
            .inputs
            .iter()
            .filter(|i| i.send_text)
            .map(|i| InputText {
                artifact_id: i.artifact_id.clone(),
                path: i.path.clone(),
                text: files[i.path.as_str()].to_owned(),
            })
            .collect(),
    }
}

pub(crate) fn prepare_with(payload: &ActivePayload, att: OutputAttestation) -> PrepareRequest {
    PrepareRequest {
        checkpoint: payload.checkpoint.clone(),
        step_id: payload.step.as_ref().unwrap().id.clone(),
        host_attestation: None,
        output_attestation: Some(att),
    }
}

pub(crate) struct AtNote {
    pub(crate) engine: Engine,
    payload: ActivePayload,
}

/// A session at `write-note`, its plan accepted as `PLAN`.
async fn at_write_note() -> AtNote {
    at_write_note_on(sqlite_memory().await).await
}

/// The same, on a given store.
pub(crate) async fn at_write_note_on(store: Arc<dyn rimthan_engine::Store>) -> AtNote {
    at_write_note_of(releases(), store).await
}

/// The same, of a given registry, on a given store.
async fn at_write_note_of(
    releases: Arc<Releases>,
    store: Arc<dyn rimthan_engine::Store>,
) -> AtNote {
    let engine = Engine::new(releases, store, None).await.unwrap();
    let start = start();
    let setup = active(engine.start(start.clone(), None).await.unwrap());
    let drafting = pass_step(&engine, &setup, &start).await;
    let files = BTreeMap::from([("plan/plan.json", PLAN)]);
    let plan = ready(
        engine
            .prepare(prepare_with(&drafting, attest(&drafting, &files)), None)
            .await
            .unwrap(),
    );
    assert!(plan.checks.is_empty(), "draft-plan has no checks");
    let payload = step_active(
        engine
            .submit(submit(&drafting, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    );
    assert_eq!(payload.step.as_ref().unwrap().id, "write-note");
    AtNote { engine, payload }
}

impl AtNote {
    fn files(&self, note: &'static str, sql: &'static str) -> BTreeMap<&'static str, &'static str> {
        BTreeMap::from([
            ("plan/plan.json", PLAN),
            ("note/note.md", note),
            ("note/migrate.sql", sql),
        ])
    }

    async fn prepare(&self, att: OutputAttestation) -> Value {
        let result = self
            .engine
            .prepare(prepare_with(&self.payload, att), None)
            .await
            .unwrap();
        serde_json::to_value(result).unwrap()
    }

    pub(crate) async fn plan(&self, note: &'static str, sql: &'static str) -> ValidationPlan {
        let att = attest(&self.payload, &self.files(note, sql));
        let result = self
            .engine
            .prepare(prepare_with(&self.payload, att), None)
            .await
            .unwrap();
        ready(result)
    }

    async fn revision(&self) -> u64 {
        let id: SessionId = self.payload.session_id.parse().unwrap();
        let session = self.engine.store().load_session(&id).await.unwrap();
        session.unwrap().revision
    }
}

fn codes_of(result: &Value) -> Vec<&str> {
    assert_eq!(result["status"], "rejected", "{result:#}");
    result["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_payload_names_the_checks_and_the_texts_they_read() {
    let at = at_write_note().await;
    let step = at.payload.step.as_ref().unwrap();
    let ids: Vec<&str> = step.checks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["note-names-risks", "migrate-lint"]);
    assert!(
        step.checks[0]
            .uri
            .ends_with("/workflows/release-note/1.0.0/checks/note-names-risks")
    );
    assert_eq!(step.checks[0].reads, ["note", "change-plan"]);
    assert!(step.outputs.iter().all(|o| o.send_text));
    assert!(step.inputs[0].send_text);
}

#[tokio::test]
async fn a_failing_check_sends_the_step_to_revise_with_its_rule_and_line_whatever_the_reports_say()
{
    let at = at_write_note().await;
    let plan = at.plan(NOTE_NO_OWNER, SQL_OK).await;
    let ids: Vec<(&str, CheckVerdict)> = plan
        .checks
        .iter()
        .map(|c| (c.record.id.as_str(), c.record.verdict))
        .collect();
    assert_eq!(
        ids,
        [
            ("note-names-risks", CheckVerdict::Fail),
            ("migrate-lint", CheckVerdict::Pass)
        ]
    );
    let finding = &plan.checks[0].record.findings[0];
    assert_eq!(
        (finding.rule.as_str(), finding.path.as_deref(), finding.line),
        ("risk-owner", Some("note/note.md"), Some(5))
    );
    assert!(plan.instructions.contains("whatever the reports say"));
    // Every validator passes; the check still decides.
    let revise = step_active(
        at.engine
            .submit(submit(&at.payload, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    );
    assert_eq!(revise.status, Status::Revise);
    let findings = serde_json::to_value(&revise.findings).unwrap();
    assert_eq!(findings[0]["check_id"], "note-names-risks");
    assert_eq!(findings[0]["rule"], "risk-owner");
    assert_eq!(findings[0]["line"], 5);
    assert_eq!(findings[0]["path"], "note/note.md");
    assert!(findings[0].get("validator_id").is_none(), "{findings:#}");
    // The check describes its rule, so the participant reads how to fix it.
    assert_eq!(
        findings[0]["help"],
        serde_json::json!({
            "text": "Name who owns the risk in parentheses after it.",
            "url": "https://example.org/release-notes#risk-owners",
        })
    );

    // Fixed, it passes and the workflow completes.
    let at = AtNote {
        engine: at.engine,
        payload: revise,
    };
    let plan = at.plan(NOTE_OK, SQL_OK).await;
    assert!(
        plan.checks
            .iter()
            .all(|c| c.record.verdict == CheckVerdict::Pass)
    );
    let done = step_active(
        at.engine
            .submit(submit(&at.payload, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    );
    assert_eq!(done.status, Status::Completed);
    let id: SessionId = done.session_id.parse().unwrap();
    let session = at.engine.store().load_session(&id).await.unwrap().unwrap();
    let rounds = &session.report_rounds[&"write-note".parse().unwrap()];
    let verdicts: Vec<CheckVerdict> = rounds.iter().map(|r| r.checks[0].verdict).collect();
    assert_eq!(verdicts, [CheckVerdict::Fail, CheckVerdict::Pass]);
    let digest = Sha256Digest::of(NOTE_OK.as_bytes()).to_string();
    assert_eq!(rounds[1].checks[0].inputs["note/note.md"], digest);
    // The text itself is never stored.
    let stored = serde_json::to_string(&session).unwrap();
    assert!(!stored.contains("loads the primary"), "{stored}");

    // The audit log keeps each preparation's checks: digests, verdicts, rules and lines.
    let log = at.engine.store().audit_log(&id).await.unwrap();
    let prepared: Vec<_> = log
        .iter()
        .filter(|e| !e.checks.is_empty())
        .map(|e| &e.checks[0])
        .collect();
    assert_eq!(prepared.len(), 2, "{log:#?}");
    assert_eq!(prepared[0].verdict, CheckVerdict::Fail);
    let place = &prepared[0].findings[0];
    assert_eq!(
        (place.rule.as_str(), place.path.as_deref(), place.line),
        ("risk-owner", Some("note/note.md"), Some(5))
    );
    assert_eq!(prepared[1].verdict, CheckVerdict::Pass);
    assert_eq!(prepared[1].inputs["note/note.md"], digest);
    let logged = serde_json::to_string(&log).unwrap();
    assert!(!logged.contains("loads the primary"), "{logged}");
    assert!(!logged.contains(&finding.message), "{logged}");
}

#[tokio::test]
async fn postgres_keeps_each_preparations_check_results_in_the_audit_log() {
    let Some(store) = postgres().await else {
        return;
    };
    let at = at_write_note_on(store).await;
    let plan = at.plan(NOTE_NO_OWNER, SQL_OK).await;
    assert_eq!(plan.checks[0].record.verdict, CheckVerdict::Fail);
    let id: SessionId = at.payload.session_id.parse().unwrap();
    let log = at.engine.store().audit_log(&id).await.unwrap();
    let kept = &log.last().unwrap().checks;
    let ids: Vec<(&str, CheckVerdict)> = kept.iter().map(|c| (c.id.as_str(), c.verdict)).collect();
    assert_eq!(
        ids,
        [
            ("note-names-risks", CheckVerdict::Fail),
            ("migrate-lint", CheckVerdict::Pass)
        ]
    );
    let place = &kept[0].findings[0];
    assert_eq!((place.rule.as_str(), place.line), ("risk-owner", Some(5)));
    assert_eq!(
        kept[0].inputs["note/note.md"],
        Sha256Digest::of(NOTE_NO_OWNER.as_bytes()).to_string()
    );
}

#[tokio::test]
async fn a_warning_is_shown_and_does_not_fail_the_step() {
    let at = at_write_note().await;
    let plan = at.plan(NOTE_OK, SQL_NO_TIMEOUT).await;
    let lint = &plan.checks[1].record;
    assert_eq!(lint.verdict, CheckVerdict::Pass);
    assert_eq!(lint.findings[0].rule, "require-statement-timeout");
    assert_eq!(lint.findings[0].severity, rimthan_engine::Severity::Warning);
    // A rule its check does not describe carries no help.
    assert_eq!(lint.findings[0].help, None);
}

#[tokio::test]
async fn a_text_that_is_not_the_attested_bytes_is_refused_and_nothing_changes() {
    let at = at_write_note().await;
    let before = at.revision().await;
    let mut att = attest(&at.payload, &at.files(NOTE_OK, SQL_OK));
    att.artifacts[0].text = Some(NOTE_NO_OWNER.to_owned());
    assert_eq!(codes_of(&at.prepare(att).await), ["output_text_mismatch"]);

    let mut att = attest(&at.payload, &at.files(NOTE_OK, SQL_OK));
    att.artifacts[1].text = None;
    assert_eq!(codes_of(&at.prepare(att).await), ["output_text_missing"]);

    let mut att = attest(&at.payload, &at.files(NOTE_OK, SQL_OK));
    att.inputs[0].text = PLAN.replace("sales", "sale");
    assert_eq!(codes_of(&at.prepare(att).await), ["output_text_mismatch"]);

    let mut att = attest(&at.payload, &at.files(NOTE_OK, SQL_OK));
    att.inputs.clear();
    assert_eq!(codes_of(&at.prepare(att).await), ["output_text_missing"]);

    let mut att = attest(&at.payload, &at.files(NOTE_OK, SQL_OK));
    att.inputs[0].artifact_id = "note".into();
    assert_eq!(
        codes_of(&at.prepare(att).await),
        ["unexpected_output", "output_text_missing"]
    );
    assert_eq!(at.revision().await, before);
}

#[tokio::test]
async fn a_check_that_never_ends_is_cut_at_its_bound_and_the_session_is_left_as_it_was() {
    let at = at_write_note().await;
    let before = at.revision().await;
    let note = "# Add a sales channel\n\nspin forever\n";
    let result = at
        .prepare(attest(&at.payload, &at.files(note, SQL_OK)))
        .await;
    assert_eq!(codes_of(&result), ["check_aborted"]);
    let detail = &result["failures"][0]["detail"];
    assert_eq!(detail["check_id"], "note-names-risks");
    // Whichever bound a loaded machine reaches first: operations, or wall time.
    let reason = detail["reason_code"].as_str().unwrap();
    assert!(
        ["check_operations_exceeded", "check_wall_time_exceeded"].contains(&reason),
        "{detail:#}"
    );
    assert_eq!(at.revision().await, before);
    // The participant fixes the note and goes on.
    let plan = at.plan(NOTE_OK, SQL_OK).await;
    assert!(
        plan.checks
            .iter()
            .all(|c| c.record.verdict == CheckVerdict::Pass)
    );
}

#[tokio::test]
async fn a_json_outputs_schema_judges_the_attested_text_not_a_different_content() {
    let engine = Engine::new(releases(), sqlite_memory().await, None)
        .await
        .unwrap();
    let start = start();
    let setup = active(engine.start(start.clone(), None).await.unwrap());
    let drafting = pass_step(&engine, &setup, &start).await;
    let violating = r#"{"title": "", "risks": []}"#;
    let attest_plan = |text: Option<&str>, content: Option<&str>| {
        let mut att = attest(&drafting, &BTreeMap::from([("plan/plan.json", violating)]));
        let art = &mut att.artifacts[0];
        art.text = text.map(str::to_owned);
        art.content = content.map(|c| serde_json::from_str(c).unwrap());
        att
    };
    let prepare = |att| {
        let engine = &engine;
        let drafting = &drafting;
        async move {
            serde_json::to_value(
                engine
                    .prepare(prepare_with(drafting, att), None)
                    .await
                    .unwrap(),
            )
            .unwrap()
        }
    };
    // The digest is the violating file's; a conforming `content` beside its text is refused.
    let both = prepare(attest_plan(Some(violating), Some(PLAN))).await;
    assert_eq!(
        codes_of(&both),
        ["output_content_mismatch", "schema_validation_failed"]
    );
    // The text alone is what the schema judges.
    let text_only = prepare(attest_plan(Some(violating), None)).await;
    assert_eq!(codes_of(&text_only), ["schema_validation_failed"]);
    // A text that is not the attested bytes is refused for that, whatever its content says.
    let other = prepare(attest_plan(Some(PLAN), Some(PLAN))).await;
    assert_eq!(codes_of(&other), ["output_text_mismatch"]);
}

/// A check declared `enforcement: warn` is being rolled out: it still runs and its findings
/// are shown, as warnings, and the step passes; the same output fails the enforced check.
#[tokio::test]
async fn a_check_rolled_out_as_warn_reports_its_errors_as_warnings_and_blocks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("checked");
    rimthan_testkit::fs::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/checked"),
        &source,
    );
    let step = source.join("workflows/release-note/1.0.0/steps/write-note.md");
    let text = std::fs::read_to_string(&step).unwrap();
    let rolled_out = text.replacen(
        "    reads: [note, change-plan]\n",
        "    reads: [note, change-plan]\n    enforcement: warn\n",
        1,
    );
    assert_ne!(text, rolled_out);
    std::fs::write(&step, rolled_out).unwrap();
    let at = at_write_note_of(releases_built_from(&source), sqlite_memory().await).await;
    let plan = at.plan(NOTE_NO_OWNER, SQL_OK).await;
    let note = &plan.checks[0].record;
    assert_eq!(note.id, "note-names-risks");
    assert_eq!(note.verdict, CheckVerdict::Pass);
    assert_eq!(note.findings[0].rule, "risk-owner");
    assert_eq!(
        serde_json::to_value(note.findings[0].severity).unwrap(),
        "warning"
    );
    let next = step_active(
        at.engine
            .submit(submit(&at.payload, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    );
    assert_ne!(next.status, Status::Revise, "a warning blocks nothing");
}

#[tokio::test]
async fn a_check_runs_once_per_set_of_texts_while_its_findings_are_kept() {
    let at = at_write_note().await;
    let before = at.engine.checks_run();
    let first = at.plan(NOTE_NO_OWNER, SQL_OK).await;
    assert_eq!(at.engine.checks_run() - before, 2);
    // The note changed, the SQL did not: only the check that reads the note runs again.
    let second = at.plan(NOTE_OK, SQL_OK).await;
    assert_eq!(at.engine.checks_run() - before, 3);
    assert_eq!(first.checks[1].record, second.checks[1].record);
    // The first texts again: both verdicts are kept, and the plan is the one they gave.
    let third = at.plan(NOTE_NO_OWNER, SQL_OK).await;
    assert_eq!(at.engine.checks_run() - before, 3);
    let records = |p: &ValidationPlan| {
        p.checks
            .iter()
            .map(|c| c.record.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(records(&first), records(&third));
    let kept = at.engine.verdict_cache();
    assert_eq!((kept.entries, kept.hits), (3, 3));
}

//! Report sets (`docs/engine.md` §6), checkpoints, the session file (`docs/engine.md` §4) and session ownership.

use rimthan_engine::{ActiveStepRequest, Engine, Principal, StartRequest, Verdict};
use rimthan_registry::{ValidatorCapability, verify_embedded};

use crate::common::*;

async fn at_gather_sources() -> (Engine, StartRequest, rimthan_engine::ActivePayload) {
    let engine = engine_on(sqlite_memory().await).await;
    let start = start_request("claude-code");
    let mut payload = active(engine.start(start.clone(), None).await.unwrap());
    for _ in 0..2 {
        payload = pass_step(&engine, &payload, &start).await;
    }
    assert_eq!(payload.step.as_ref().unwrap().id, "gather-sources");
    (engine, start, payload)
}

type ReportMutation = (
    &'static str,
    fn(&mut Vec<rimthan_engine::Report>),
    &'static [&'static str],
);

const REPORT_MUTATIONS: &[ReportMutation] = &[
    ("no reports", |r| r.clear(), &["report_missing"]),
    (
        "duplicated",
        |r| {
            let x = r[0].clone();
            r.push(x);
        },
        &["report_duplicate"],
    ),
    (
        "unknown validator",
        |r| r[0].validator_id = "ghost".into(),
        &["report_missing", "report_unexpected"],
    ),
    (
        "validator_version",
        |r| r[0].validator_version = "9.9.9".into(),
        &["report_unexpected"],
    ),
    (
        "summary empty",
        |r| r[0].summary = String::new(),
        &["report_schema_invalid"],
    ),
    (
        "database.read never declared",
        |r| {
            r[0].capabilities_used
                .push(ValidatorCapability::DatabaseRead)
        },
        &["capability_escalation"],
    ),
    (
        "validator id breaks the schema pattern",
        |r| {
            r[0].validator_id = "Source_Auditor".into();
        },
        &["report_missing", "report_unexpected"],
    ),
    (
        "finding message empty",
        |r| {
            r[0].findings.push(rimthan_engine::ReportFinding {
                severity: rimthan_engine::Severity::Info,
                message: String::new(),
                path: None,
                pointer: None,
            })
        },
        &["report_schema_invalid"],
    ),
    (
        "git.read not allowed to source-auditor",
        |r| r[0].capabilities_used.push(ValidatorCapability::GitRead),
        &["capability_escalation"],
    ),
    (
        "undeclared input",
        |r| r[0].inputs_read.push(".env".into()),
        &["undeclared_input_read"],
    ),
];

#[tokio::test]
async fn each_report_set_mistake_yields_its_code() {
    let (engine, start, payload) = at_gather_sources().await;
    let plan = ready(
        engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap(),
    );
    assert_eq!(plan.validators[0].id, "source-auditor");
    let inputs: Vec<_> = plan.validators[0]
        .inputs
        .iter()
        .map(|i| i.path.as_str())
        .collect();
    assert_eq!(
        inputs,
        [
            "research/question.json",
            "research/sources.json",
            "research/notes.md"
        ]
    );
    assert!(plan.validators[0].inputs.iter().all(|i| i.sha256.is_some()));
    for (what, mutate, expected) in REPORT_MUTATIONS {
        let mut req = submit(&payload, &plan, Verdict::Pass);
        mutate(&mut req.reports);
        assert_eq!(
            codes(&engine.submit(req, None).await.unwrap()),
            *expected,
            "{what}"
        );
    }
    // Rejections change nothing: the faithful set still advances.
    let next = step_active(
        engine
            .submit(submit(&payload, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    );
    assert_eq!(next.step.unwrap().id, "synthesize-findings");
}

#[tokio::test]
async fn a_newer_plan_supersedes_an_older_one() {
    let (engine, start, payload) = at_gather_sources().await;
    let old = ready(
        engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap(),
    );
    // The same files attested in another order: a new request, so a new plan.
    let mut reordered = prepare(&payload, &start);
    let artifacts = &mut reordered.output_attestation.as_mut().unwrap().artifacts;
    assert!(artifacts.len() > 1);
    artifacts.reverse();
    let new = ready(engine.prepare(reordered, None).await.unwrap());
    assert_ne!(old.validation_id, new.validation_id);
    let stale = engine
        .submit(submit(&payload, &old, Verdict::Pass), None)
        .await
        .unwrap();
    assert_eq!(codes(&stale), ["validation_superseded"]);
    let mut unknown = submit(&payload, &new, Verdict::Pass);
    unknown.validation_id = "nope".into();
    assert_eq!(
        codes(&engine.submit(unknown, None).await.unwrap()),
        ["validation_not_found"]
    );
    step_active(
        engine
            .submit(submit(&payload, &new, Verdict::Pass), None)
            .await
            .unwrap(),
    );
}

#[tokio::test]
async fn session_file_content_satisfies_the_shipped_schema() {
    let registry = verify_embedded().unwrap();
    let release = registry.channel(&"stable".parse().unwrap()).unwrap();
    let schema = release
        .schema(
            &"workflow-session".parse().unwrap(),
            &"1.0.0".parse().unwrap(),
        )
        .unwrap();
    let (engine, start, payload) = at_gather_sources().await;
    let owned = Principal {
        subject: "ada".into(),
        organization: Some("lab".into()),
    };
    let owned_payload = active(engine.start(start.clone(), Some(&owned)).await.unwrap());
    let plan = ready(
        engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap(),
    );
    let revise = step_active(
        engine
            .submit(submit(&payload, &plan, Verdict::Fail), None)
            .await
            .unwrap(),
    );
    for file in [
        &payload.session_file,
        &revise.session_file,
        &owned_payload.session_file,
    ] {
        assert_eq!(file.path, ".rimthan/workflow-session.json");
        let content = serde_json::to_value(&file.content).unwrap();
        let errors: Vec<_> = schema
            .validator()
            .iter_errors(&content)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?} in {content}");
    }
    assert_eq!(revise.session_file.content.checkpoint, revise.checkpoint);
    assert_eq!(
        revise.session_file.content.status,
        rimthan_engine::Status::Revise
    );
}

#[tokio::test]
async fn a_cloned_checkpoint_resumes_for_the_same_organization_only() {
    let engine = engine_on(sqlite_memory().await).await;
    let ada = Principal {
        subject: "ada".into(),
        organization: Some("lab".into()),
    };
    let grace = Principal {
        subject: "grace".into(),
        organization: Some("lab".into()),
    };
    let mallory = Principal {
        subject: "mallory".into(),
        organization: Some("elsewhere".into()),
    };
    let payload = active(
        engine
            .start(start_request("codex"), Some(&ada))
            .await
            .unwrap(),
    );
    let resume = |who| {
        let req = ActiveStepRequest {
            checkpoint: payload.session_file.content.checkpoint.clone(),
        };
        let engine = &engine;
        async move { engine.active_step(req, who).await.unwrap() }
    };
    assert!(codes(&resume(Some(&grace)).await).is_empty());
    assert_eq!(
        codes(&resume(Some(&mallory)).await),
        ["session_access_denied"]
    );
    assert_eq!(codes(&resume(None).await), ["session_access_denied"]);
}

#[tokio::test]
async fn a_checkpoint_from_another_server_secret_is_invalid() {
    let store = sqlite_memory().await;
    let ours = engine_on(store.clone()).await;
    let payload = active(ours.start(start_request("codex"), None).await.unwrap());
    let theirs = Engine::new(releases(), store, Some(vec![9; 32]))
        .await
        .unwrap();
    let result = theirs
        .active_step(
            ActiveStepRequest {
                checkpoint: payload.checkpoint,
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(codes(&result), ["invalid_checkpoint"]);
}

#[tokio::test]
async fn completed_sessions_have_no_active_step_to_prepare() {
    let engine = engine_on(sqlite_memory().await).await;
    let start = start_request("codex");
    let mut payload = active(engine.start(start.clone(), None).await.unwrap());
    while payload.step.is_some() {
        payload = pass_step(&engine, &payload, &start).await;
    }
    let req = rimthan_engine::PrepareRequest {
        checkpoint: payload.checkpoint.clone(),
        step_id: "synthesize-findings".into(),
        host_attestation: None,
        output_attestation: None,
    };
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["step_not_active"]
    );
}

#[tokio::test]
async fn checkpoints_for_unknown_or_future_sessions_are_refused() {
    let store = sqlite_memory().await;
    let secret = vec![5; 32];
    let engine = Engine::new(releases(), store, Some(secret.clone()))
        .await
        .unwrap();
    let key = rimthan_engine::CheckpointKey::new(secret).unwrap();
    let ghost = key.issue(&rimthan_engine::SessionId::generate(), 0);
    let result = engine
        .active_step(ActiveStepRequest { checkpoint: ghost }, None)
        .await
        .unwrap();
    assert_eq!(codes(&result), ["session_not_found"]);
    let payload = active(engine.start(start_request("codex"), None).await.unwrap());
    let session = payload.session_id.parse().unwrap();
    let ahead = key.issue(&session, 7);
    let result = engine
        .active_step(ActiveStepRequest { checkpoint: ahead }, None)
        .await
        .unwrap();
    assert_eq!(codes(&result), ["invalid_checkpoint"]);
}

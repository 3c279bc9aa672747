//! The organization is the tenant (`docs/engine.md` §3.2): session access and idempotency keys
//! are held to (organization, subject), run by every backend in `backends.rs`.

use std::sync::Arc;

use rimthan_engine::{
    ActivePayload, ActiveStepRequest, AuditEntry, Engine, Operation, Outcome, Principal, SessionId,
    StartRequest, Store,
};

use crate::common::*;

/// The checkpoint secret of these tests, so an id derived by an earlier version can be stated.
const SECRET: [u8; 32] = [7; 32];

fn principal(subject: &str, organization: Option<&str>) -> Principal {
    Principal {
        subject: subject.into(),
        organization: organization.map(str::to_owned),
    }
}

fn keyed(key: &str) -> StartRequest {
    let mut start = start_request("codex");
    start.idempotency_key = Some(key.to_owned().try_into().unwrap());
    start
}

async fn engine_with_secret(store: Arc<dyn Store>) -> Engine {
    Engine::new(releases(), store, Some(SECRET.to_vec()))
        .await
        .unwrap()
}

async fn resume(engine: &Engine, payload: &ActivePayload, who: &Principal) -> Vec<String> {
    let request = ActiveStepRequest {
        checkpoint: payload.checkpoint.clone(),
    };
    codes(&engine.active_step(request, Some(who)).await.unwrap())
}

/// `ada` of `lab`, `ada` of `field` and an `ada` of no organization using one idempotency key
/// get three sessions, and none may read or drive another's; within `lab` the handoff holds.
pub(crate) async fn equal_subjects_of_two_organizations_are_two_tenants(store: Arc<dyn Store>) {
    let engine = engine_on(store).await;
    let lab = principal("ada", Some("lab"));
    let field = principal("ada", Some("field"));
    let orgless = principal("ada", None);
    let start = keyed("harness-run-shared");
    let ours = active(engine.start(start.clone(), Some(&lab)).await.unwrap());
    let theirs = active(engine.start(start.clone(), Some(&field)).await.unwrap());
    let own = active(engine.start(start.clone(), Some(&orgless)).await.unwrap());
    assert_ne!(theirs.session_id, ours.session_id);
    assert_ne!(own.session_id, ours.session_id);
    assert_ne!(own.session_id, theirs.session_id);
    assert_eq!(
        active(engine.start(start.clone(), Some(&lab)).await.unwrap()),
        ours,
        "the owner's retry still finds its session"
    );

    for (payload, outsiders) in [
        (&ours, [&field, &orgless]),
        (&theirs, [&lab, &orgless]),
        (&own, [&lab, &field]),
    ] {
        for outsider in outsiders {
            assert_eq!(
                resume(&engine, payload, outsider).await,
                ["session_access_denied"],
                "{outsider:?} on {}",
                payload.session_id
            );
            let driven = engine
                .prepare(prepare(payload, &start), Some(outsider))
                .await
                .unwrap();
            assert_eq!(codes(&driven), ["session_access_denied"]);
        }
    }

    // Within an organization a colleague resumes (the Git handoff); a colleague of no
    // organization is nobody's colleague.
    let grace = principal("grace", Some("lab"));
    assert!(resume(&engine, &ours, &grace).await.is_empty());
    assert_eq!(
        resume(&engine, &own, &principal("grace", None)).await,
        ["session_access_denied"]
    );
    assert!(resume(&engine, &own, &orgless).await.is_empty());
    let plan = ready(
        engine
            .prepare(prepare(&theirs, &start), Some(&field))
            .await
            .unwrap(),
    );
    assert!(!plan.validation_id.is_empty());
}

/// A session an earlier version stored under the id it derived from the subject alone stays its
/// owner's: the owner's retry with the key replays it, while the same subject of another
/// organization, or of none, gets a session of its own.
pub(crate) async fn a_key_reused_by_its_owner_finds_the_session_an_earlier_version_derived(
    store: Arc<dyn Store>,
) {
    // The id `rimthan-keyed-start/1` gave `ada` and this key under `SECRET`:
    // HMAC-SHA256(SECRET, "rimthan-keyed-start/1\n3\nada\nharness-run-legacy"), first 16 bytes.
    let legacy: SessionId = "09e8646f7b6ce99e098ab50c3927c49c".parse().unwrap();
    let lab = principal("ada", Some("lab"));
    let start = keyed("harness-run-legacy");
    // The session as that version stored it: made here, then stored under the old id.
    let scratch = engine_with_secret(sqlite_memory().await).await;
    let made = active(scratch.start(start.clone(), Some(&lab)).await.unwrap());
    let mut session = (*scratch
        .store()
        .load_session(&made.session_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap())
    .clone();
    session.id = legacy.clone();
    let audit = AuditEntry {
        session_id: Some(legacy.clone()),
        seq: Some(0),
        tool: Operation::StartWorkflow,
        outcome: Outcome::Active,
        codes: Vec::new(),
        attestation_sha256: None,
        reports_sha256: None,
        principal: Some("ada".into()),
        organization: Some("lab".into()),
        workflow: None,
        judgement: None,
        checks: Vec::new(),
        decision: None,
        at: session.created_at.clone(),
    };
    store.insert_session(&session, &audit).await.unwrap();

    let engine = engine_with_secret(store).await;
    let replayed = active(engine.start(start.clone(), Some(&lab)).await.unwrap());
    assert_eq!(replayed.session_id, legacy.as_str());
    assert!(resume(&engine, &replayed, &lab).await.is_empty());
    for stranger in [principal("ada", Some("field")), principal("ada", None)] {
        let own = active(engine.start(start.clone(), Some(&stranger)).await.unwrap());
        assert_ne!(own.session_id, legacy.as_str(), "{stranger:?}");
        assert_eq!(
            resume(&engine, &replayed, &stranger).await,
            ["session_access_denied"]
        );
    }
}

//! Every judged round of a step's reports is kept, the latest `REPORT_ROUNDS_KEPT` per step,
//! and a session stored before rounds were kept still loads (`docs/engine.md` §3).

use rimthan_engine::{REPORT_ROUNDS_KEPT, Session, SessionId, Status, Verdict};

use crate::common::*;

#[tokio::test]
async fn a_step_revised_past_the_bound_keeps_its_latest_rounds_in_order() {
    let store = sqlite_memory().await;
    let engine = engine_on(store.clone()).await;
    let start = start_request("codex");
    let setup = active(engine.start(start.clone(), None).await.unwrap());
    let mut payload = pass_step(&engine, &setup, &start).await;
    let step = payload.step.as_ref().unwrap().id.clone();
    let failing = REPORT_ROUNDS_KEPT + 2;
    for _ in 0..failing {
        let plan = ready(
            engine
                .prepare(prepare(&payload, &start), None)
                .await
                .unwrap(),
        );
        payload = step_active(
            engine
                .submit(submit(&payload, &plan, Verdict::Fail), None)
                .await
                .unwrap(),
        );
        assert_eq!(payload.status, Status::Revise);
    }
    pass_step(&engine, &payload, &start).await;

    let id: SessionId = payload.session_id.parse().unwrap();
    let session = store.load_session(&id).await.unwrap().unwrap();
    assert_eq!(
        session
            .report_rounds
            .keys()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
        std::slice::from_ref(&step),
        "setup, which runs no validator, has no rounds"
    );
    let rounds = &session.report_rounds[&step.parse().unwrap()];
    let numbers: Vec<u32> = rounds.iter().map(|r| r.round).collect();
    let total = failing as u32 + 1;
    let first = total - REPORT_ROUNDS_KEPT as u32 + 1;
    assert_eq!(numbers, (first..=total).collect::<Vec<_>>());
    assert!(
        rounds[..rounds.len() - 1]
            .iter()
            .all(|r| r.reports.iter().any(|r| r.verdict == Verdict::Fail))
    );
    assert!(
        rounds
            .last()
            .unwrap()
            .reports
            .iter()
            .all(|r| r.verdict == Verdict::Pass)
    );

    // As stored before rounds were kept: the field is absent.
    let mut old = serde_json::to_value(&*session).unwrap();
    old.as_object_mut().unwrap().remove("report_rounds");
    let loaded: Session = serde_json::from_value(old).unwrap();
    assert!(loaded.report_rounds.is_empty());
}

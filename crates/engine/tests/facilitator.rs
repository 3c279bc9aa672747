//! What a facilitator counts (`docs/engine.md` §7.5), run by every backend in `backends.rs`.

use std::sync::Arc;

use rimthan_engine::{
    ActivePayload, Code, Principal, SessionQuery, StartResult, StatsQuery, Status, Store, Verdict,
};

use crate::common::*;

/// Sessions on two harnesses and two organizations, one sent back by its validators and one
/// start refused, are counted per step, validator, harness and organization.
pub(crate) async fn workflow_statistics_count_steps_validators_harnesses_and_refused_starts(
    store: Arc<dyn Store>,
) {
    let engine = engine_on(store.clone()).await;
    let member = |subject: &str, organization: &str| Principal {
        subject: subject.into(),
        organization: Some(organization.into()),
    };
    let step = |payload: ActivePayload, who: Principal, verdict: Verdict, harness: &str| {
        let (engine, start) = (&engine, start_request(harness));
        async move {
            let plan = ready(
                engine
                    .prepare(prepare(&payload, &start), Some(&who))
                    .await
                    .unwrap(),
            );
            step_active(
                engine
                    .submit(submit(&payload, &plan, verdict), Some(&who))
                    .await
                    .unwrap(),
            )
        }
    };
    let begin = |who: Principal, harness: &str| {
        let (engine, start) = (&engine, start_request(harness));
        async move { engine.start(start, Some(&who)).await.unwrap() }
    };

    let ada = member("ada", "lab");
    let mut done = active(begin(ada.clone(), "codex").await);
    let mut steps = 0;
    while done.status != Status::Completed {
        done = step(done, ada.clone(), Verdict::Pass, "codex").await;
        steps += 1;
    }
    let bob = member("bob", "lab");
    let revised = active(begin(bob.clone(), "claude-code").await);
    let revised = step(revised, bob.clone(), Verdict::Pass, "claude-code").await;
    let revised = step(revised, bob.clone(), Verdict::Fail, "claude-code").await;
    assert_eq!(revised.status, Status::Revise);
    let carol = member("carol", "field");
    let moving = active(begin(carol.clone(), "codex").await);
    step(moving, carol, Verdict::Pass, "codex").await;
    let refused = begin(member("dan", "lab"), "not-a-harness").await;
    assert!(matches!(refused, StartResult::Blocked(_)));

    let listed = store
        .list_sessions(&SessionQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let query = |organization: Option<&str>| StatsQuery {
        workflow: listed[0].workflow.clone(),
        workflow_version: listed[0].workflow_version.clone(),
        organization: organization.map(str::to_owned),
    };
    let all = store.workflow_stats(&query(None)).await.unwrap();
    let mut reached = vec![3, 3];
    reached.resize(steps, 1);
    assert_eq!(all.reached(steps), reached);
    assert_eq!(all.in_status(Status::Completed), 1);
    assert_eq!(all.in_status(Status::Revise), 1);
    assert_eq!(all.in_status(Status::Active), 1);
    assert_eq!(
        all.by_harness().into_iter().collect::<Vec<_>>(),
        [("claude-code", 1), ("codex", 2)]
    );
    // Step 0: three passes; step 1: ada's pass and bob's failure; later steps: ada's passes.
    let judged: Vec<_> = all
        .steps
        .iter()
        .map(|s| (s.step_index, s.judged, s.revised, s.timed))
        .collect();
    let mut expected = vec![(0, 3, 0, 3), (1, 2, 1, 1)];
    expected.extend((2..steps as u64).map(|i| (i, 1, 0, 1)));
    assert_eq!(judged, expected);
    for s in &all.steps {
        let (median, p90) = (s.median_seconds.unwrap(), s.p90_seconds.unwrap());
        assert!(median <= p90 && p90 < 60, "{s:?}");
    }
    assert!(!all.failures.is_empty());
    assert!(
        all.failures
            .iter()
            .all(|f| f.step_index == 1 && f.failed == 1)
    );
    assert_eq!(all.refused_starts, 1);
    let door = &all.recent_refused_starts[0];
    assert_eq!(door.principal.as_deref(), Some("dan"));
    assert_eq!(door.codes[0], Code::UnsupportedHarness);

    // A facilitator of one organization counts only its sessions and refusals.
    let lab = store.workflow_stats(&query(Some("lab"))).await.unwrap();
    assert_eq!(lab.reached(steps)[0], 2);
    assert_eq!(lab.by_harness().get("codex"), Some(&1));
    assert_eq!(lab.refused_starts, 1);
    assert_eq!(lab.steps[0].judged, 2);
    let field = store.workflow_stats(&query(Some("field"))).await.unwrap();
    assert_eq!(field.reached(steps)[0], 1);
    assert_eq!(field.refused_starts, 0);
    assert!(field.failures.is_empty());
    let nobody = store.workflow_stats(&query(Some("nobody"))).await.unwrap();
    assert_eq!(nobody.reached(steps), vec![0; steps]);

    let workflows = store.workflows(None).await.unwrap();
    assert_eq!(workflows.len(), 1);
    assert_eq!((workflows[0].sessions, workflows[0].completed), (3, 1));
    let of_lab = store.workflows(Some("lab")).await.unwrap();
    assert_eq!((of_lab[0].sessions, of_lab[0].completed), (2, 1));

    // The judgement is part of the audit entry it was counted from.
    let bob_session = revised.session_id.parse().unwrap();
    let log = store.audit_log(&bob_session).await.unwrap();
    let judged = log.iter().filter_map(|e| e.judgement.as_ref());
    let verdicts: Vec<_> = judged
        .map(|j| (j.step_index, j.failed.is_empty()))
        .collect();
    assert_eq!(verdicts, [(0, true), (1, false)]);
    assert!(log.iter().all(|e| e.organization.as_deref() == Some("lab")));
    assert_eq!(
        store.recent_audit(&bob_session, 2).await.unwrap(),
        log[log.len() - 2..]
    );
    assert_eq!(store.recent_audit(&bob_session, 1000).await.unwrap(), log);
}

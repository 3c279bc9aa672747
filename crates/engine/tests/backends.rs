//! The behavioural suite every store backend runs: SQLite always (memory and file),
//! PostgreSQL when `RIMTHAN_TEST_DATABASE_URL` is set.

use std::{future::Future as _, sync::Arc};

use rimthan_engine::{Code, Engine, Operation, Outcome, Pruned, Status, Store, Verdict};

use crate::common::*;

/// start → setup → three work steps → completed, with one revise round on the last step.
pub(crate) async fn full_session_with_one_revise_round(store: Arc<dyn Store>) {
    let engine = engine_on(store.clone()).await;
    let start = start_request("claude-code");
    let mut payload = active(engine.start(start.clone(), None).await.unwrap());
    assert_eq!(payload.step.as_ref().unwrap().id, "setup-workspace");
    for expected in ["frame-question", "gather-sources", "synthesize-findings"] {
        payload = pass_step(&engine, &payload, &start).await;
        assert_eq!(payload.status, Status::Active);
        assert_eq!(payload.step.as_ref().unwrap().id, expected);
    }
    // A failing validator sends the step back for revision with its findings.
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
    assert_eq!(revise.status, Status::Revise);
    assert_eq!(revise.step.as_ref().unwrap().id, "synthesize-findings");
    assert_eq!(revise.findings.len(), 1);
    assert_ne!(revise.checkpoint, payload.checkpoint);
    // The old checkpoint is now stale.
    let stale = engine
        .submit(submit(&payload, &plan, Verdict::Pass), None)
        .await
        .unwrap();
    assert_eq!(codes(&stale), ["stale_checkpoint"]);
    let done = pass_step(&engine, &revise, &start).await;
    assert_eq!(done.status, Status::Completed);
    assert!(done.step.is_none());
    assert_eq!(done.session_file.content.active_step, None);

    let session: rimthan_engine::SessionId = done.session_id.parse().unwrap();
    // Each step keeps its last accepted report set: the passing round replaced the revise round.
    let stored = store.load_session(&session).await.unwrap().unwrap();
    // The completing answer's statement is signed over the chain link the write returned;
    // the completion's entry read back from the store gives the same statement.
    assert!(done.provenance.is_some());
    assert_eq!(done.provenance, engine.provenance(&stored).await.unwrap());
    assert_eq!(stored.reports.len(), 4);
    let last = &stored.reports[&"synthesize-findings".parse().unwrap()];
    assert!(!last.is_empty());
    assert!(last.iter().all(|r| r.verdict == Verdict::Pass));
    let log = store.audit_log(&session).await.unwrap();
    let outcomes: Vec<_> = log
        .iter()
        .map(|e| format!("{}:{}", e.tool, e.outcome))
        .collect();
    assert_eq!(
        outcomes.first().map(String::as_str),
        Some("start_workflow:active")
    );
    assert_eq!(
        outcomes.last().map(String::as_str),
        Some("submit_step_reports:completed")
    );
    assert!(outcomes.contains(&"submit_step_reports:revise".to_owned()));
    assert!(
        log.iter()
            .filter(|e| e.tool == Operation::PrepareStepValidation)
            .all(|e| e.attestation_sha256.is_some())
    );
    assert!(
        log.iter()
            .filter(|e| e.tool == Operation::SubmitStepReports && e.outcome != Outcome::Rejected)
            .all(|e| e.reports_sha256.is_some())
    );
}

/// Many tasks submit the same reports on one checkpoint: exactly one advances the session and
/// every other gets that same answer (an identical request is a retry), while a different
/// request on the old checkpoint is `stale_checkpoint`; the audit log holds exactly one entry
/// per call.
pub(crate) async fn racing_submissions_advance_exactly_once(store: Arc<dyn Store>) {
    const RACERS: usize = 12;
    let engine = Arc::new(engine_on(store.clone()).await);
    let start = start_request("codex");
    let payload = active(engine.start(start.clone(), None).await.unwrap());
    let plan = ready(
        engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap(),
    );
    let request = submit(&payload, &plan, Verdict::Pass);
    let tasks: Vec<_> = (0..RACERS)
        .map(|_| {
            let (engine, request) = (engine.clone(), request.clone());
            tokio::spawn(async move { engine.submit(request, None).await.unwrap() })
        })
        .collect();
    let mut checkpoints = std::collections::BTreeSet::new();
    for task in tasks {
        let next = step_active(task.await.unwrap());
        assert_eq!(next.step.as_ref().unwrap().id, "frame-question");
        checkpoints.insert(next.checkpoint);
    }
    assert_eq!(checkpoints.len(), 1, "every racer got the one answer");
    // The setup step's plan has no validators, so only the plan id can differ.
    let mut different = request.clone();
    different.validation_id = "another-plan".into();
    let other = engine.submit(different, None).await.unwrap();
    assert_eq!(codes(&other), ["stale_checkpoint"]);
    let session = payload.session_id.parse().unwrap();
    let submits: Vec<_> = store
        .audit_log(&session)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.tool == Operation::SubmitStepReports)
        .collect();
    assert_eq!(
        submits.len(),
        RACERS + 1,
        "one audit entry per call, none lost or doubled"
    );
    assert_eq!(
        submits
            .iter()
            .filter(|e| e.outcome == Outcome::Active)
            .count(),
        1
    );
    assert_eq!(
        submits
            .iter()
            .filter(|e| e.outcome == Outcome::Replayed)
            .count(),
        RACERS - 1
    );
}

/// Each changing call repeated after its answer was lost gets that answer again (same
/// checkpoint, same session file, same plan) without a second change, for as long as no
/// other request has changed the session.
pub(crate) async fn identical_retries_get_the_lost_answer(store: Arc<dyn Store>) {
    let engine = engine_on(store.clone()).await;
    let mut start = start_request("codex");
    start.idempotency_key = Some("harness-run-7f3a".to_owned().try_into().unwrap());
    let first = active(engine.start(start.clone(), None).await.unwrap());
    let again = active(engine.start(start.clone(), None).await.unwrap());
    assert_eq!(again, first);
    // Another caller's key, or no key, starts another session.
    let mut other = start.clone();
    other.idempotency_key = Some("harness-run-other".to_owned().try_into().unwrap());
    let second = active(engine.start(other, None).await.unwrap());
    assert_ne!(second.session_id, first.session_id);

    let prepared = prepare(&first, &start);
    let plan = ready(engine.prepare(prepared.clone(), None).await.unwrap());
    let plan_again = ready(engine.prepare(prepared.clone(), None).await.unwrap());
    assert_eq!(plan_again, plan);

    let submitted = submit(&first, &plan, Verdict::Pass);
    let next = step_active(engine.submit(submitted.clone(), None).await.unwrap());
    let next_again = step_active(engine.submit(submitted.clone(), None).await.unwrap());
    assert_eq!(next_again, next);
    assert_eq!(
        step_active(
            engine
                .active_step(
                    rimthan_engine::ActiveStepRequest {
                        checkpoint: next.checkpoint.clone()
                    },
                    None
                )
                .await
                .unwrap()
        ),
        next
    );

    // The same key with other arguments is refused, naming the session.
    let mut changed = start.clone();
    changed.repository_policy.forbidden_paths = vec!["secrets/**".into()];
    let refused = engine.start(changed, None).await.unwrap();
    assert_eq!(codes(&refused), ["idempotency_key_reused"]);

    // Once another request moved the session on, the old requests are no retries any more.
    ready(engine.prepare(prepare(&next, &start), None).await.unwrap());
    let late = engine.submit(submitted, None).await.unwrap();
    assert_eq!(codes(&late), ["stale_checkpoint"]);
    let late_start = engine.start(start, None).await.unwrap();
    assert_eq!(codes(&late_start), ["idempotency_key_reused"]);
    let stale_read = engine
        .active_step(
            rimthan_engine::ActiveStepRequest {
                checkpoint: first.checkpoint.clone(),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(codes(&stale_read), ["stale_checkpoint"]);

    // Changes and refusals are logged; the successful read is counted in the metrics only.
    let session = first.session_id.parse().unwrap();
    let log = store.audit_log(&session).await.unwrap();
    let outcomes: Vec<_> = log
        .iter()
        .map(|e| format!("{}:{}", e.tool, e.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            "start_workflow:active",
            "start_workflow:replayed",
            "prepare_step_validation:ready",
            "prepare_step_validation:replayed",
            "submit_step_reports:active",
            "submit_step_reports:replayed",
            "start_workflow:rejected",
            "prepare_step_validation:ready",
            "submit_step_reports:rejected",
            "start_workflow:rejected",
            "get_active_step:rejected",
        ]
    );
}

/// A second engine over the same store (a replica, or a restart) continues the session and
/// shares the checkpoint secret.
pub(crate) async fn sessions_survive_a_new_engine_on_the_same_store(store: Arc<dyn Store>) {
    let start = start_request("claude-code");
    let first = engine_on(store.clone()).await;
    let payload = active(first.start(start.clone(), None).await.unwrap());
    drop(first);
    let second: Engine = engine_on(store).await;
    let next = pass_step(&second, &payload, &start).await;
    assert_eq!(next.step.unwrap().id, "frame-question");
}

/// A tampered checkpoint is refused before any session is read.
pub(crate) async fn tampered_checkpoints_are_invalid(store: Arc<dyn Store>) {
    let engine = engine_on(store).await;
    let payload = active(engine.start(start_request("codex"), None).await.unwrap());
    let mut token = payload.checkpoint.clone();
    let last = token.pop().unwrap();
    token.push(if last == 'A' { 'B' } else { 'A' });
    let result = engine
        .active_step(
            rimthan_engine::ActiveStepRequest { checkpoint: token },
            None,
        )
        .await
        .unwrap();
    assert_eq!(codes(&result), [Code::InvalidCheckpoint.as_str()]);
}

/// Retention deletes audit entries older than the cutoff and completed sessions last changed
/// before it, nothing younger and no open session, which carries on as before.
pub(crate) async fn retention_deletes_only_what_is_old_enough(store: Arc<dyn Store>) {
    let engine = engine_on(store.clone()).await;
    let start = start_request("codex");
    let mut done = active(engine.start(start.clone(), None).await.unwrap());
    while done.status != Status::Completed {
        done = pass_step(&engine, &done, &start).await;
    }
    let open_start = start_request("claude-code");
    let open = active(engine.start(open_start.clone(), None).await.unwrap());
    let (done_id, open_id) = (
        done.session_id.parse().unwrap(),
        open.session_id.parse().unwrap(),
    );

    let nothing = store
        .prune("2000-01-01T00:00:00Z", engine.provenance_key())
        .await
        .unwrap();
    assert_eq!(nothing, Pruned::default());
    assert!(store.load_session(&done_id).await.unwrap().is_some());

    let pruned = store
        .prune("9999-12-31T23:59:59Z", engine.provenance_key())
        .await
        .unwrap();
    assert_eq!(pruned.sessions, 1, "only the completed session goes");
    assert!(pruned.audit_entries >= 10, "{pruned:?}");
    assert!(store.load_session(&done_id).await.unwrap().is_none());
    assert!(store.audit_log(&done_id).await.unwrap().is_empty());
    assert!(store.audit_log(&open_id).await.unwrap().is_empty());

    let read = engine
        .active_step(
            rimthan_engine::ActiveStepRequest {
                checkpoint: open.checkpoint.clone(),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(step_active(read), open);
    // What retention pruned left a signed anchor: the pruned chains and the one that went on
    // after it still verify.
    let verified = rimthan_engine::chain::verify_audit(&*store).await.unwrap();
    assert!(verified.verified(), "{:?}", verified.breaks);
    pass_step(&engine, &open, &open_start).await;
    assert_eq!(store.audit_log(&open_id).await.unwrap().len(), 2);
    let verified = rimthan_engine::chain::verify_audit(&*store).await.unwrap();
    assert!(verified.verified(), "{:?}", verified.breaks);
    assert_eq!(verified.entries, 2);
}

/// A change whose caller went away once it was queued (a client that hung up) still commits,
/// and the session is then read at its new revision, never at the one before: the store's
/// memory is kept by its writer, not by the caller.
pub(crate) async fn a_change_whose_caller_hung_up_is_read_back_as_committed(store: Arc<dyn Store>) {
    let engine = engine_on(store.clone()).await;
    let payload = active(engine.start(start_request("codex"), None).await.unwrap());
    let id = payload.session_id.parse().unwrap();
    let stored = store.load_session(&id).await.unwrap().unwrap();
    let mut next = (*stored).clone();
    next.revision += 1;
    next.updated_at = "2099-01-01T00:00:00Z".into();
    let audit = store.audit_log(&id).await.unwrap().remove(0);
    // Polled once, which queues the write, then dropped while it waits for the commit.
    {
        let mut write = std::pin::pin!(store.update_session(stored.revision, &next, &audit, &[]));
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let _ = write.as_mut().poll(&mut context);
    }
    for _ in 0..200 {
        if store.audit_log(&id).await.unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        store.audit_log(&id).await.unwrap().len(),
        2,
        "the write never committed"
    );
    let read = store.load_session(&id).await.unwrap().unwrap();
    assert_eq!(read.revision, next.revision);
    assert_eq!(read.updated_at, next.updated_at);
}

/// Sessions are listed from their columns: filtered by status, workflow and organization,
/// most recently changed first, a page at a time, with the revise rounds they went through.
pub(crate) async fn sessions_list_by_status_workflow_and_organization(store: Arc<dyn Store>) {
    use rimthan_engine::{ActivePayload, Principal, SessionQuery};
    let engine = engine_on(store.clone()).await;
    let lab = |subject: &str| Principal {
        subject: subject.into(),
        organization: Some("lab".into()),
    };
    let start = start_request("codex");
    // One step as `who`: prepare, then submit reports with `verdict`.
    let step = |payload: ActivePayload, who: Principal, verdict: Verdict| {
        let (engine, start) = (&engine, &start);
        async move {
            let plan = ready(
                engine
                    .prepare(prepare(&payload, start), Some(&who))
                    .await
                    .unwrap(),
            );
            let reports = submit(&payload, &plan, verdict);
            step_active(engine.submit(reports, Some(&who)).await.unwrap())
        }
    };
    let mut done = active(
        engine
            .start(start.clone(), Some(&lab("ada")))
            .await
            .unwrap(),
    );
    while done.status != Status::Completed {
        done = step(done, lab("ada"), Verdict::Pass).await;
    }
    // The setup step has no validator to fail: revise the first work step.
    let revised = active(
        engine
            .start(start.clone(), Some(&lab("bob")))
            .await
            .unwrap(),
    );
    let revised = step(revised, lab("bob"), Verdict::Pass).await;
    let revised = step(revised, lab("bob"), Verdict::Fail).await;
    assert_eq!(revised.status, Status::Revise);
    let outsider = active(engine.start(start.clone(), None).await.unwrap());

    let list = |query: SessionQuery| {
        let store = store.clone();
        async move {
            store
                .list_sessions(&SessionQuery { limit: 50, ..query })
                .await
                .unwrap()
        }
    };
    let all = list(SessionQuery::default()).await;
    assert_eq!(all.len(), 3);
    assert!(all.windows(2).all(|w| w[0].updated_at >= w[1].updated_at));
    let completed = list(SessionQuery {
        status: Some(Status::Completed),
        ..Default::default()
    })
    .await;
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0].id.to_string(), done.session_id);
    assert_eq!(completed[0].principal.as_deref(), Some("ada"));
    assert_eq!(completed[0].harness, "codex");
    assert_eq!(completed[0].workflow, start.workflow_id.to_string());
    let in_revision = list(SessionQuery {
        status: Some(Status::Revise),
        ..Default::default()
    })
    .await;
    assert_eq!(in_revision.len(), 1);
    assert_eq!(in_revision[0].revise_rounds, 1);
    assert_eq!(in_revision[0].step_index, 1);
    let of_lab = list(SessionQuery {
        organization: Some("lab".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(of_lab.len(), 2);
    assert!(
        !of_lab
            .iter()
            .any(|s| s.id.to_string() == outsider.session_id)
    );
    let none = list(SessionQuery {
        workflow: Some("no-such-workflow".into()),
        ..Default::default()
    })
    .await;
    assert!(none.is_empty());
    let second = store
        .list_sessions(&SessionQuery {
            limit: 1,
            offset: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(second, all[1..2]);
}

macro_rules! backend {
    ($name:ident, $store:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use crate::common::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn full_session_with_one_revise_round() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::full_session_with_one_revise_round(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn racing_submissions_advance_exactly_once() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::racing_submissions_advance_exactly_once(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn identical_retries_get_the_lost_answer() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::identical_retries_get_the_lost_answer(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sessions_survive_a_new_engine_on_the_same_store() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::sessions_survive_a_new_engine_on_the_same_store(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retention_deletes_only_what_is_old_enough() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::retention_deletes_only_what_is_old_enough(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_change_whose_caller_hung_up_is_read_back_as_committed() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::a_change_whose_caller_hung_up_is_read_back_as_committed(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sessions_list_by_status_workflow_and_organization() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::sessions_list_by_status_workflow_and_organization(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn workflow_statistics_count_steps_validators_harnesses_and_refused_starts() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                crate::facilitator::workflow_statistics_count_steps_validators_harnesses_and_refused_starts(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn equal_subjects_of_two_organizations_are_two_tenants() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                crate::tenants::equal_subjects_of_two_organizations_are_two_tenants(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_key_reused_by_its_owner_finds_the_session_an_earlier_version_derived() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                crate::tenants::a_key_reused_by_its_owner_finds_the_session_an_earlier_version_derived(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tampered_checkpoints_are_invalid() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::tampered_checkpoints_are_invalid(store).await;
            }
        }
    };
}

backend!(
    sqlite_memory,
    Some((sqlite_memory().await, None::<tempfile::TempDir>))
);
backend!(sqlite_file, {
    let (store, dir) = sqlite_file().await;
    Some((store, Some(dir)))
});
backend!(
    postgres,
    postgres().await.map(|s| (s, None::<tempfile::TempDir>))
);

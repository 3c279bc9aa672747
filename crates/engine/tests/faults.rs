//! Fault injection: a store that fails chosen operations. Each failure surfaces as a stable
//! internal-error code, nothing partial is persisted, and the next call succeeds.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
};

use async_trait::async_trait;
use rimthan_engine::{ActiveStepRequest, Verdict};
use rimthan_engine::{
    AuditEntry, Pruned, Session, SessionId, SessionQuery, SessionSummary, StatsQuery, Store,
    StoreError, WorkflowCount, WorkflowStats,
    chain::{ChainHead, ChainLink, StoredLink},
    provenance::ProvenanceKey,
    store::StoreErrorKind,
};
use rimthan_registry::PublicKeyFile;

use crate::common::*;

/// Wraps a store and fails the operations named in `failing`.
#[derive(Debug)]
struct FailingStore {
    inner: Arc<dyn Store>,
    failing: Mutex<BTreeSet<&'static str>>,
    /// Compare-and-swaps still to lose, as if another replica had written first.
    losing: std::sync::atomic::AtomicUsize,
}

impl FailingStore {
    fn lose_updates(&self, times: usize) {
        self.losing
            .store(times, std::sync::atomic::Ordering::SeqCst);
    }

    fn fail(&self, operation: &'static str) {
        self.failing.lock().unwrap().insert(operation);
    }

    fn heal(&self) {
        self.failing.lock().unwrap().clear();
    }

    fn check(&self, operation: &'static str) -> Result<(), StoreError> {
        if self.failing.lock().unwrap().contains(operation) {
            Err(StoreError {
                kind: StoreErrorKind::Unavailable,
                message: format!("injected failure of {operation}"),
            })
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for FailingStore {
    fn system(&self) -> &'static str {
        self.inner.system()
    }
    async fn secret(&self, name: &str, generated: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        self.check("secret")?;
        self.inner.secret(name, generated).await
    }
    async fn insert_session(
        &self,
        session: &Session,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.check("insert_session")?;
        self.inner.insert_session(session, audit).await
    }
    async fn load_session(&self, id: &SessionId) -> Result<Option<Arc<Session>>, StoreError> {
        self.check("load_session")?;
        self.inner.load_session(id).await
    }
    async fn update_session(
        &self,
        expected: u64,
        session: &Session,
        audit: &AuditEntry,
        notices: &[rimthan_engine::Notice],
    ) -> Result<Option<ChainLink>, StoreError> {
        self.check("update_session")?;
        let lose = self.losing.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |left| left.checked_sub(1),
        );
        if lose.is_ok() {
            return Ok(None);
        }
        self.inner
            .update_session(expected, session, audit, notices)
            .await
    }
    async fn append_audit(&self, audit: &AuditEntry) -> Result<(), StoreError> {
        self.check("append_audit")?;
        self.inner.append_audit(audit).await
    }
    async fn prune(&self, before: &str, key: &ProvenanceKey) -> Result<Pruned, StoreError> {
        self.check("prune")?;
        self.inner.prune(before, key).await
    }
    async fn seal(&self, key: &ProvenanceKey, at: &str) -> Result<Option<u64>, StoreError> {
        self.check("seal")?;
        self.inner.seal(key, at).await
    }
    async fn seals(&self) -> Result<Vec<rimthan_engine::chain::Seal>, StoreError> {
        self.check("seals")?;
        self.inner.seals().await
    }
    async fn audit_chains(&self, chain: Option<&str>) -> Result<Vec<ChainHead>, StoreError> {
        self.inner.audit_chains(chain).await
    }
    async fn chain_entries(&self, chain: &str) -> Result<Vec<StoredLink>, StoreError> {
        self.inner.chain_entries(chain).await
    }
    async fn unchained_audit(&self) -> Result<Vec<StoredLink>, StoreError> {
        self.inner.unchained_audit().await
    }
    async fn completion_link(&self, session: &SessionId) -> Result<Option<ChainLink>, StoreError> {
        self.check("completion_link")?;
        self.inner.completion_link(session).await
    }
    async fn provenance_keys(&self) -> Result<Vec<PublicKeyFile>, StoreError> {
        self.inner.provenance_keys().await
    }
    async fn add_provenance_key(&self, key: &PublicKeyFile) -> Result<(), StoreError> {
        self.inner.add_provenance_key(key).await
    }
    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError> {
        self.inner.list_sessions(query).await
    }
    async fn workflow_stats(&self, query: &StatsQuery) -> Result<WorkflowStats, StoreError> {
        self.inner.workflow_stats(query).await
    }
    async fn workflows(
        &self,
        organization: Option<&str>,
    ) -> Result<Vec<WorkflowCount>, StoreError> {
        self.inner.workflows(organization).await
    }
    async fn audit_log(&self, session: &SessionId) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.audit_log(session).await
    }
    async fn recent_audit(
        &self,
        session: &SessionId,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.recent_audit(session, limit).await
    }
    async fn due_sessions(
        &self,
        now: i64,
        limit: u32,
    ) -> Result<Vec<rimthan_engine::SessionId>, StoreError> {
        self.check("due_sessions")?;
        self.inner.due_sessions(now, limit).await
    }
    async fn claim_deliveries(
        &self,
        now: i64,
        lease_until: i64,
        limit: u32,
    ) -> Result<Vec<rimthan_engine::WebhookDelivery>, StoreError> {
        self.check("claim_deliveries")?;
        self.inner.claim_deliveries(now, lease_until, limit).await
    }
    async fn finish_delivery(
        &self,
        id: i64,
        outcome: &rimthan_engine::DeliveryOutcome,
    ) -> Result<(), StoreError> {
        self.check("finish_delivery")?;
        self.inner.finish_delivery(id, outcome).await
    }
    async fn outbox_counts(&self) -> Result<rimthan_engine::OutboxCounts, StoreError> {
        self.check("outbox_counts")?;
        self.inner.outbox_counts().await
    }
    async fn deliveries(
        &self,
        session: Option<&SessionId>,
        limit: u32,
    ) -> Result<Vec<rimthan_engine::DeliveryRecord>, StoreError> {
        self.check("deliveries")?;
        self.inner.deliveries(session, limit).await
    }
    async fn open_sessions(&self) -> Result<u64, StoreError> {
        self.check("open_sessions")?;
        self.inner.open_sessions().await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.check("ping")?;
        self.inner.ping().await
    }
}

#[tokio::test]
async fn each_failed_store_operation_is_a_stable_code_and_leaves_nothing_partial() {
    let inner = sqlite_memory().await;
    let store = Arc::new(FailingStore {
        losing: Default::default(),
        inner: inner.clone(),
        failing: Mutex::default(),
    });
    let engine = engine_on(store.clone()).await;
    let start = start_request("claude-code");

    // A failed start persists no session.
    store.fail("insert_session");
    let err = engine.start(start.clone(), None).await.unwrap_err();
    assert_eq!(err.code(), "store_unavailable");
    store.heal();
    let payload = active(engine.start(start.clone(), None).await.unwrap());
    let session: SessionId = payload.session_id.parse().unwrap();
    let log_before = inner.audit_log(&session).await.unwrap();

    // A failed read or write during prepare and submit changes nothing.
    for operation in ["load_session", "update_session"] {
        store.fail(operation);
        let err = engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "store_unavailable", "{operation}");
        store.heal();
        let stored = inner.load_session(&session).await.unwrap().unwrap();
        assert_eq!(
            (stored.seq, stored.plan.is_none()),
            (0, true),
            "{operation}: nothing partial"
        );
        assert_eq!(
            inner.audit_log(&session).await.unwrap(),
            log_before,
            "{operation}: no audit entry"
        );
    }
    let plan = ready(
        engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap(),
    );
    store.fail("update_session");
    let err = engine
        .submit(submit(&payload, &plan, Verdict::Pass), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "store_unavailable");
    store.heal();
    assert_eq!(
        inner.load_session(&session).await.unwrap().unwrap().seq,
        0,
        "the step did not advance"
    );

    // The next call succeeds, from the same checkpoint.
    let next = step_active(
        engine
            .submit(submit(&payload, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    );
    assert_eq!(next.step.unwrap().id, "frame-question");

    // A rejected call whose audit append fails is an error, not a silent success.
    store.fail("append_audit");
    let err = engine
        .active_step(
            ActiveStepRequest {
                checkpoint: payload.checkpoint.clone(),
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "store_unavailable");
    store.heal();
}

#[tokio::test]
async fn a_lost_compare_and_swap_does_not_run_the_checks_again() {
    let store = Arc::new(FailingStore {
        inner: sqlite_memory().await,
        failing: Mutex::default(),
        losing: Default::default(),
    });
    let at = crate::checks::at_write_note_on(store.clone()).await;
    let before = at.engine.checks_run();
    store.lose_updates(5);
    let plan = at.plan(crate::checks::NOTE_OK, crate::checks::SQL_OK).await;
    assert_eq!(plan.checks.len(), 2);
    assert_eq!(
        at.engine.checks_run() - before,
        2,
        "each check runs once per preparation, not once per attempt"
    );
}

/// A replica whose store fails while it fires a timer commits nothing: the timer stays due, and
/// the next replica over the same database fires it, once.
#[tokio::test]
async fn a_timer_whose_firing_failed_stays_due_for_the_next_replica() {
    use crate::timers::{DAY, Timed, plus, releases};
    use rimthan_engine::{Engine, Operation, Outcome};

    let inner = sqlite_memory().await;
    let at = Timed::awaiting_sign_off(inner.clone(), "1.0.0").await;
    let later = plus(&at.requested_at().await, DAY + 1);
    let failing = Arc::new(FailingStore {
        inner: inner.clone(),
        failing: Mutex::default(),
        losing: Default::default(),
    });
    let killed = Engine::new(releases(), failing.clone(), None)
        .await
        .unwrap();
    failing.fail("update_session");
    assert!(killed.fire_due(&later).await.is_err());
    assert!(at.timer_entries().await.is_empty());
    let next = Engine::new(releases(), inner, None).await.unwrap();
    assert_eq!(next.fire_due(&later).await.unwrap().fired, 1);
    assert_eq!(
        at.timer_entries().await,
        [(Operation::RemindApproval, Outcome::AwaitingApproval)]
    );
}

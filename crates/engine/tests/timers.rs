//! Timers (`docs/engine.md` §6.3): a sign-off's reminder and expiry and a step's deadline fire at
//! their time, under a clock the test gives `Engine::fire_due`; a decision or a submission that
//! comes first cancels them; they survive a new engine on the same store; of two replicas firing
//! at once, one fires each timer, and one that fails mid-fire leaves it to the other. Runs the
//! test workflow of `tests/data/timed/`.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use rimthan_engine::{
    ActivePayload, ActiveStepRequest, Engine, NotifyConfig, Operation, Outcome, Principal,
    Releases, SessionId, Status, StepResult, Store, Verdict,
    approval::{Approver, Decision, DecisionRequest, DecisionResult, FacilitatorOf, Identity},
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::checks::{NOTE_OK, PLAN, SQL_OK, attest, prepare_with, start};
use crate::common::*;

pub(crate) fn releases() -> Arc<Releases> {
    releases_built_from(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/timed"))
}

fn participant() -> Principal {
    Principal {
        subject: "pat".into(),
        organization: Some("acme".into()),
    }
}

/// `at` moved by `seconds`.
pub(crate) fn plus(at: &str, seconds: i64) -> String {
    let t = OffsetDateTime::parse(at, &Rfc3339).unwrap() + time::Duration::seconds(seconds);
    t.format(&Rfc3339).unwrap()
}

const HOUR: i64 = 3600;
pub(crate) const DAY: i64 = 24 * HOUR;

/// A session of `pat` on workflow version `version` of the timed release.
pub(crate) struct Timed {
    pub(crate) engine: Engine,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) payload: ActivePayload,
    pub(crate) id: SessionId,
}

impl Timed {
    /// At `draft-plan`, whose deadline runs.
    async fn at_draft_plan(store: Arc<dyn Store>, version: &str) -> Self {
        Self::at_draft_plan_notifying(store, version, None).await
    }

    /// At `draft-plan`, on an engine that sends webhook events to `notify`.
    pub(crate) async fn at_draft_plan_notifying(
        store: Arc<dyn Store>,
        version: &str,
        notify: Option<NotifyConfig>,
    ) -> Self {
        let mut engine = Engine::new(releases(), store.clone(), None).await.unwrap();
        if let Some(notify) = notify {
            engine = engine.with_notify(notify);
        }
        let me = participant();
        let mut start = start();
        start.workflow_version = Some(version.parse().unwrap());
        let setup = active(engine.start(start.clone(), Some(&me)).await.unwrap());
        let plan = ready(
            engine
                .prepare(prepare(&setup, &start), Some(&me))
                .await
                .unwrap(),
        );
        let payload = step_active(
            engine
                .submit(submit(&setup, &plan, Verdict::Pass), Some(&me))
                .await
                .unwrap(),
        );
        assert_eq!(payload.step.as_ref().unwrap().id, "draft-plan");
        Self {
            id: payload.session_id.parse().unwrap(),
            engine,
            store,
            payload,
        }
    }

    /// At `write-note`, waiting for sign-off.
    pub(crate) async fn awaiting_sign_off(store: Arc<dyn Store>, version: &str) -> Self {
        Self::awaiting_sign_off_notifying(store, version, None).await
    }

    /// At `write-note`, waiting for sign-off, on an engine that sends webhook events to
    /// `notify`.
    pub(crate) async fn awaiting_sign_off_notifying(
        store: Arc<dyn Store>,
        version: &str,
        notify: Option<NotifyConfig>,
    ) -> Self {
        let mut at = Self::at_draft_plan_notifying(store, version, notify).await;
        at.payload = at.pass(&[("plan/plan.json", PLAN)]).await;
        at.payload = at
            .pass(&[
                ("plan/plan.json", PLAN),
                ("note/note.md", NOTE_OK),
                ("note/migrate.sql", SQL_OK),
            ])
            .await;
        assert_eq!(at.payload.status, Status::AwaitingApproval);
        at
    }

    /// Prepares the active step with `files` and submits passing reports.
    async fn pass(&self, files: &[(&str, &'static str)]) -> ActivePayload {
        let me = participant();
        let files: BTreeMap<&str, &str> = files.iter().copied().collect();
        let att = attest(&self.payload, &files);
        let plan = ready(
            self.engine
                .prepare(prepare_with(&self.payload, att), Some(&me))
                .await
                .unwrap(),
        );
        step_active(
            self.engine
                .submit(submit(&self.payload, &plan, Verdict::Pass), Some(&me))
                .await
                .unwrap(),
        )
    }

    pub(crate) async fn stored(&self) -> Arc<rimthan_engine::Session> {
        self.store.load_session(&self.id).await.unwrap().unwrap()
    }

    /// When the sign-off was asked for.
    pub(crate) async fn requested_at(&self) -> String {
        let stored = self.stored().await;
        stored
            .approval
            .as_ref()
            .unwrap()
            .requested_at
            .clone()
            .unwrap()
    }

    /// The participant's view.
    pub(crate) async fn read(&self) -> ActivePayload {
        let req = ActiveStepRequest {
            checkpoint: self.payload.checkpoint.clone(),
        };
        match self
            .engine
            .active_step(req, Some(&participant()))
            .await
            .unwrap()
        {
            StepResult::Active(p) => *p,
            other => panic!("{}", serde_json::to_string_pretty(&other).unwrap()),
        }
    }

    /// The operations of the session's audit entries the server recorded for its timers.
    pub(crate) async fn timer_entries(&self) -> Vec<(Operation, Outcome)> {
        self.store
            .audit_log(&self.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| {
                matches!(
                    e.tool,
                    Operation::RemindApproval
                        | Operation::ExpireApproval
                        | Operation::ExpireDeadline
                )
            })
            .map(|e| (e.tool, e.outcome))
            .collect()
    }

    pub(crate) async fn fire(&self, at: &str) -> usize {
        self.engine.fire_due(at).await.unwrap().fired
    }
}

pub(crate) fn facilitator() -> Approver {
    Approver {
        principal: Principal {
            subject: "fran".into(),
            organization: Some("acme".into()),
        },
        facilitator: FacilitatorOf::OwnOrganization,
        roles: Vec::new(),
        identity: Identity::Verified,
    }
}

/// A reminder fires once at its time; the expiry sends the step back with a finding naming it,
/// each an audit entry of the session's chain; nothing fires early.
pub(crate) async fn a_reminder_then_an_expiry_fire_at_their_time(store: Arc<dyn Store>) {
    let at = Timed::awaiting_sign_off(store, "1.0.0").await;
    let asked = at.requested_at().await;
    let approval = at.payload.approval.as_ref().unwrap();
    assert_eq!(
        approval.remind_at.as_deref(),
        Some(plus(&asked, DAY).as_str())
    );
    assert_eq!(
        approval.expires_at.as_deref(),
        Some(plus(&asked, 3 * DAY).as_str())
    );

    assert_eq!(at.fire(&plus(&asked, DAY - 1)).await, 0);
    assert_eq!(at.fire(&plus(&asked, DAY)).await, 1);
    assert_eq!(at.fire(&plus(&asked, DAY + HOUR)).await, 0, "reminded once");
    let view = at.read().await;
    assert_eq!(view.status, Status::AwaitingApproval);
    assert_eq!(view.approval.as_ref().unwrap().remind_at, None);

    assert_eq!(at.fire(&plus(&asked, 3 * DAY)).await, 1);
    let view = at.read().await;
    assert_eq!(view.status, Status::Revise);
    assert!(
        view.findings[0].message.contains("expired undecided"),
        "{:?}",
        view.findings
    );
    assert_eq!(view.step.as_ref().unwrap().id, "write-note");
    assert_eq!(
        at.timer_entries().await,
        [
            (Operation::RemindApproval, Outcome::AwaitingApproval),
            (Operation::ExpireApproval, Outcome::Revise),
        ]
    );
    // Nothing is timed while the step is revised (its step has no deadline).
    assert_eq!(at.fire(&plus(&asked, 30 * DAY)).await, 0);

    // Submitted again and approved, the session completes, and its statement says what fired.
    let mut at = at;
    at.payload = view;
    at.payload = at
        .pass(&[
            ("plan/plan.json", PLAN),
            ("note/note.md", NOTE_OK),
            ("note/migrate.sql", SQL_OK),
        ])
        .await;
    assert_eq!(at.payload.status, Status::AwaitingApproval);
    let req = DecisionRequest {
        session: at.id.clone(),
        step: "write-note".parse().unwrap(),
        revision: at.stored().await.revision,
        expected: Default::default(),
        decision: Decision::Approve { note: None },
    };
    at.engine.decide(req, &facilitator()).await.unwrap();
    let done = at.read().await;
    assert_eq!(done.status, Status::Completed);
    let envelope = serde_json::to_value(&done.provenance.unwrap().content).unwrap();
    let payload = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        envelope["payload"].as_str().unwrap(),
    )
    .unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    let timers = &statement["predicate"]["steps"][2]["timers"];
    assert_eq!(timers[0]["timer"], "reminder", "{timers:#}");
    assert_eq!(timers[1]["timer"], "signoff_expired", "{timers:#}");
    assert_eq!(timers[1]["on_expiry"], "send_back", "{timers:#}");
    // The chain still verifies with the server's entries in it.
    let report = rimthan_engine::chain::verify_session_chain(at.store.as_ref(), &at.id)
        .await
        .unwrap();
    assert!(report.verified(), "{report:?}");
}

/// A decision before the reminder cancels both timers.
pub(crate) async fn a_decision_cancels_the_timers(store: Arc<dyn Store>) {
    let at = Timed::awaiting_sign_off(store, "1.0.0").await;
    let asked = at.requested_at().await;
    let req = DecisionRequest {
        session: at.id.clone(),
        step: "write-note".parse().unwrap(),
        revision: at.stored().await.revision,
        expected: Default::default(),
        decision: Decision::Approve { note: None },
    };
    let decided = at.engine.decide(req, &facilitator()).await.unwrap();
    assert!(
        matches!(
            decided,
            DecisionResult::Recorded {
                status: Status::Completed,
                ..
            }
        ),
        "{decided:?}"
    );
    assert_eq!(at.fire(&plus(&asked, 10 * DAY)).await, 0);
    assert!(at.timer_entries().await.is_empty());
}

/// An expiry with `on_expiry: fail` ends the session `expired`; tool calls are refused.
pub(crate) async fn an_expiry_that_fails_ends_the_session(store: Arc<dyn Store>) {
    let at = Timed::awaiting_sign_off(store, "1.1.0").await;
    let asked = at.requested_at().await;
    // Down for four days: the reminder and the expiry are both due; the expiry wins.
    assert_eq!(at.fire(&plus(&asked, 4 * DAY)).await, 1);
    let view = at.read().await;
    assert_eq!(view.status, Status::Expired);
    assert!(view.step.is_none());
    assert_eq!(
        at.timer_entries().await,
        [(Operation::ExpireApproval, Outcome::Expired)]
    );
    assert_eq!(at.fire(&plus(&asked, 5 * DAY)).await, 0);
    let files: BTreeMap<&str, &str> = BTreeMap::from([
        ("plan/plan.json", PLAN),
        ("note/note.md", NOTE_OK),
        ("note/migrate.sql", SQL_OK),
    ]);
    let again = at
        .engine
        .prepare(
            prepare_with(&at.payload, attest(&at.payload, &files)),
            Some(&participant()),
        )
        .await
        .unwrap();
    assert_eq!(codes(&again), ["session_expired"]);
    assert_eq!(at.store.open_sessions().await.unwrap(), 0);
}

/// A step's deadline sends it back and starts again; with `fail`, the session ends.
pub(crate) async fn a_deadline_sends_the_step_back_or_ends_the_session(store: Arc<dyn Store>) {
    let at = Timed::at_draft_plan(store.clone(), "1.0.0").await;
    let deadline = at
        .payload
        .deadline
        .clone()
        .expect("draft-plan has a deadline");
    assert_eq!(deadline.step, "draft-plan");
    assert_eq!(at.fire(&plus(&deadline.at, -1)).await, 0);
    assert_eq!(at.fire(&deadline.at).await, 1);
    let view = at.read().await;
    assert_eq!(view.status, Status::Revise);
    assert!(
        view.findings[0]
            .message
            .contains("deadline of step draft-plan")
    );
    let again = view.deadline.expect("the deadline starts again");
    assert!(again.at > deadline.at, "{again:?}");
    assert_eq!(
        at.timer_entries().await,
        [(Operation::ExpireDeadline, Outcome::Revise)]
    );

    let ends = Timed::at_draft_plan(store, "1.1.0").await;
    let deadline = ends.payload.deadline.clone().unwrap();
    assert_eq!(ends.fire(&plus(&deadline.at, 60)).await, 1);
    assert_eq!(ends.read().await.status, Status::Expired);
}

/// What came due while no engine ran fires on the next engine over the same store.
pub(crate) async fn timers_survive_a_new_engine_on_the_same_store(store: Arc<dyn Store>) {
    let at = Timed::awaiting_sign_off(store.clone(), "1.0.0").await;
    let asked = at.requested_at().await;
    let id = at.id.clone();
    drop(at);
    let engine = Engine::new(releases(), store.clone(), None).await.unwrap();
    let pass = engine.fire_due(&plus(&asked, DAY + 1)).await.unwrap();
    assert_eq!((pass.due, pass.fired), (1, 1));
    let session = store.load_session(&id).await.unwrap().unwrap();
    assert!(session.approval.as_ref().unwrap().reminded_at.is_some());
}

macro_rules! backend {
    ($name:ident, $store:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use crate::common::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_reminder_then_an_expiry_fire_at_their_time() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::a_reminder_then_an_expiry_fire_at_their_time(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_decision_cancels_the_timers() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::a_decision_cancels_the_timers(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_expiry_that_fails_ends_the_session() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::an_expiry_that_fails_ends_the_session(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_deadline_sends_the_step_back_or_ends_the_session() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::a_deadline_sends_the_step_back_or_ends_the_session(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn timers_survive_a_new_engine_on_the_same_store() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::timers_survive_a_new_engine_on_the_same_store(store).await;
            }
        }
    };
}

backend!(sqlite_file, {
    let (store, dir) = sqlite_file().await;
    Some((store, Some(dir)))
});
backend!(
    postgres,
    postgres().await.map(|s| (s, None::<tempfile::TempDir>))
);

/// Two replicas on one PostgreSQL fire every due timer together: each timer fires once, with
/// one audit entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_fire_each_timer_once() {
    let Some([one, two]) = postgres_replicas().await else {
        return;
    };
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(Timed::awaiting_sign_off(one.clone(), "1.0.0").await);
    }
    let asked = sessions[0].requested_at().await;
    let later = plus(&asked, DAY + HOUR);
    let a = Engine::new(releases(), one, None).await.unwrap();
    let b = Engine::new(releases(), two, None).await.unwrap();
    let (x, y) = tokio::join!(a.fire_due(&later), b.fire_due(&later));
    let fired = x.unwrap().fired + y.unwrap().fired;
    assert!(fired >= 6, "{fired}");
    for at in &sessions {
        assert_eq!(
            at.timer_entries().await,
            [(Operation::RemindApproval, Outcome::AwaitingApproval)],
        );
    }
    assert_eq!(fired, 6, "each timer fired by exactly one replica");
}

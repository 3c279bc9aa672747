//! A step that declares `approval` waits for sign-off after its validators and checks pass
//! (`docs/engine.md` §6.2): no tool call advances it; distinct people its approval names approve
//! it, send it back with a note, or waive a failed check's finding; everyone else is refused
//! with a named code and nothing changes. Runs the test workflow of `docs/examples/signed-off/`.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use rimthan_engine::{
    ActivePayload, ActiveStepRequest, Engine, Operation, Outcome, Principal, Releases, SessionId,
    Status, StepResult, Verdict,
    approval::{Approver, Decision, DecisionRequest, DecisionResult, FacilitatorOf, Identity},
};
use serde_json::Value;

use crate::checks::{NOTE_NO_OWNER, NOTE_OK, PLAN, SQL_OK, attest, prepare_with, start};
use crate::common::*;

const SQL_RENAMES: &str =
    "SET statement_timeout = '5s';\nALTER TABLE orders RENAME COLUMN channel TO sales_channel;\n";

fn releases() -> Arc<Releases> {
    releases_built_from(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/signed-off"),
    )
}

fn principal(subject: &str, organization: &str) -> Principal {
    Principal {
        subject: subject.into(),
        organization: Some(organization.into()),
    }
}

fn participant() -> Principal {
    principal("pat", "acme")
}

fn facilitator(subject: &str, organization: &str) -> Approver {
    Approver {
        principal: principal(subject, organization),
        facilitator: FacilitatorOf::OwnOrganization,
        roles: Vec::new(),
        identity: Identity::Verified,
    }
}

fn release_manager(subject: &str, organization: &str) -> Approver {
    Approver {
        principal: principal(subject, organization),
        facilitator: FacilitatorOf::Nobody,
        roles: vec!["release-manager".parse().unwrap()],
        identity: Identity::Verified,
    }
}

/// A session of `pat` at `write-note`.
struct Session {
    engine: Engine,
    payload: ActivePayload,
    id: SessionId,
    /// Who the participant is; none where nobody authenticates.
    me: Option<Principal>,
}

impl Session {
    async fn at_write_note() -> Self {
        Self::at_write_note_by(Some(participant())).await
    }

    async fn at_write_note_by(me: Option<Principal>) -> Self {
        let engine = Engine::new(releases(), sqlite_memory().await, None)
            .await
            .unwrap();
        let start = start();
        let setup = active(engine.start(start.clone(), me.as_ref()).await.unwrap());
        let plan = ready(
            engine
                .prepare(prepare(&setup, &start), me.as_ref())
                .await
                .unwrap(),
        );
        let drafting = step_active(
            engine
                .submit(submit(&setup, &plan, Verdict::Pass), me.as_ref())
                .await
                .unwrap(),
        );
        let mut at = Self {
            id: drafting.session_id.parse().unwrap(),
            engine,
            payload: drafting,
            me,
        };
        let files = BTreeMap::from([("plan/plan.json", PLAN)]);
        let next = at.submit(&files).await;
        assert_eq!(next.step.as_ref().unwrap().id, "write-note");
        at.payload = next;
        at
    }

    /// Prepares the active step with `files` and submits passing reports.
    async fn submit(&self, files: &BTreeMap<&str, &str>) -> ActivePayload {
        let me = self.me.as_ref();
        let att = attest(&self.payload, files);
        let plan = ready(
            self.engine
                .prepare(prepare_with(&self.payload, att), me)
                .await
                .unwrap(),
        );
        step_active(
            self.engine
                .submit(submit(&self.payload, &plan, Verdict::Pass), me)
                .await
                .unwrap(),
        )
    }

    async fn write_note(&mut self, note: &'static str, sql: &'static str) {
        let files = BTreeMap::from([
            ("plan/plan.json", PLAN),
            ("note/note.md", note),
            ("note/migrate.sql", sql),
        ]);
        self.payload = self.submit(&files).await;
    }

    /// The session as stored.
    async fn stored(&self) -> Arc<rimthan_engine::Session> {
        let session = self.engine.store().load_session(&self.id).await.unwrap();
        session.unwrap()
    }

    async fn revision(&self) -> u64 {
        self.stored().await.revision
    }

    async fn decide(&self, by: &Approver, decision: Decision) -> DecisionResult {
        let req = DecisionRequest {
            session: self.id.clone(),
            step: "write-note".parse().unwrap(),
            revision: self.revision().await,
            expected: Default::default(),
            decision,
        };
        self.engine.decide(req, by).await.unwrap()
    }

    /// The participant's view, with the checkpoint its submission returned.
    async fn read(&self) -> ActivePayload {
        let req = ActiveStepRequest {
            checkpoint: self.payload.checkpoint.clone(),
        };
        match self
            .engine
            .active_step(req, self.me.as_ref())
            .await
            .unwrap()
        {
            StepResult::Active(p) => *p,
            other => panic!("{}", serde_json::to_string_pretty(&other).unwrap()),
        }
    }
}

fn approve() -> Decision {
    Decision::Approve { note: None }
}

fn refused(result: DecisionResult) -> String {
    match result {
        DecisionResult::Refused { failure } => failure.code.as_str().to_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn recorded(result: DecisionResult) -> (Status, usize) {
    match result {
        DecisionResult::Recorded {
            status, approvals, ..
        } => (status, approvals),
        other => panic!("expected a recorded decision, got {other:?}"),
    }
}

#[tokio::test]
async fn a_passing_step_that_needs_sign_off_waits_and_no_tool_call_can_advance_it() {
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_OK, SQL_OK).await;
    assert_eq!(at.payload.status, Status::AwaitingApproval);
    let approval = serde_json::to_value(at.payload.approval.as_ref().unwrap()).unwrap();
    assert_eq!(approval["approvals_needed"], 2);
    assert_eq!(approval["facilitators"], true);
    assert_eq!(approval["roles"], serde_json::json!(["release-manager"]));
    assert_eq!(approval["self_approval"], false);
    assert_eq!(approval["outputs"].as_array().unwrap().len(), 2);
    assert_eq!(at.read().await.status, Status::AwaitingApproval);

    // Preparing again is refused, and so is a submission.
    let files = BTreeMap::from([
        ("plan/plan.json", PLAN),
        ("note/note.md", NOTE_OK),
        ("note/migrate.sql", SQL_OK),
    ]);
    let result = at
        .engine
        .prepare(
            prepare_with(&at.payload, attest(&at.payload, &files)),
            Some(&participant()),
        )
        .await
        .unwrap();
    let result: Value = serde_json::to_value(result).unwrap();
    assert_eq!(
        result["failures"][0]["code"], "awaiting_approval",
        "{result:#}"
    );
    assert_eq!(at.read().await.status, Status::AwaitingApproval);
}

#[tokio::test]
async fn two_distinct_approvers_complete_the_step_and_the_participant_reads_it_with_its_checkpoint()
{
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_OK, SQL_OK).await;
    let ann = facilitator("ann", "acme");
    let first = at
        .decide(
            &ann,
            Decision::Approve {
                note: Some("Reviewed the lock timeouts.".into()),
            },
        )
        .await;
    assert_eq!(recorded(first), (Status::AwaitingApproval, 1));
    assert_eq!(
        refused(at.decide(&ann, approve()).await),
        "approval_already_given"
    );
    let second = at.decide(&release_manager("rui", "acme"), approve()).await;
    assert_eq!(recorded(second).0, Status::Completed);

    let done = at.read().await;
    assert_eq!(done.status, Status::Completed);
    let statement = serde_json::to_value(&done.provenance.as_ref().unwrap().content).unwrap();
    let payload = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        statement["payload"].as_str().unwrap(),
    )
    .unwrap();
    let predicate: Value = serde_json::from_slice::<Value>(&payload).unwrap()["predicate"].clone();
    let step = &predicate["steps"][2];
    assert_eq!(step["id"], "write-note");
    assert_eq!(step["approvals"][1]["subject"], "rui", "{step:#}");
    // The statement says on what ground each approved: the role the step names, or facilitator.
    assert_eq!(step["approvals"][0]["basis"], "facilitator", "{step:#}");
    assert_eq!(
        step["approvals"][1]["basis"],
        serde_json::json!({"role": "release-manager"}),
        "{step:#}"
    );
    let session = at.stored().await;
    let signed = &session.signoffs[&"write-note".parse().unwrap()];
    let who: Vec<&str> = signed
        .approvals
        .iter()
        .map(|a| a.subject.as_str())
        .collect();
    assert_eq!(who, ["ann", "rui"]);
    let log = at.engine.store().audit_log(&at.id).await.unwrap();
    let approvals: Vec<_> = log
        .iter()
        .filter(|e| e.tool == Operation::ApproveStep && e.outcome != Outcome::Rejected)
        .collect();
    assert_eq!(approvals.len(), 2);
    assert_eq!(approvals[0].principal.as_deref(), Some("ann"));
    assert_eq!(
        approvals[0].decision.as_ref().unwrap().note.as_deref(),
        Some("Reviewed the lock timeouts.")
    );
    assert_eq!(approvals[1].outcome, Outcome::Completed);
}

#[tokio::test]
async fn whoever_the_approval_does_not_name_is_refused_and_nothing_changes() {
    let mut at = Session::at_write_note().await;
    let not_pending = at.decide(&facilitator("ann", "acme"), approve()).await;
    assert_eq!(refused(not_pending), "approval_not_pending");
    at.write_note(NOTE_OK, SQL_OK).await;
    let before = at.revision().await;
    // Another organization's people learn nothing of the session: it answers them as an id no
    // session has, and their attempts stay out of its chain.
    let cases = [
        (
            Approver {
                facilitator: FacilitatorOf::OwnOrganization,
                ..release_manager("pat", "acme")
            },
            "the participant",
            "approval_not_allowed",
        ),
        (
            facilitator("oz", "globex"),
            "a facilitator of another organization",
            "session_not_found",
        ),
        (
            release_manager("rae", "globex"),
            "a role holder of another organization",
            "session_not_found",
        ),
        (
            Approver {
                principal: principal("sam", "acme"),
                facilitator: FacilitatorOf::Nobody,
                roles: vec!["dba".parse().unwrap()],
                identity: Identity::Verified,
            },
            "a holder of another role",
            "approval_not_allowed",
        ),
    ];
    for (who, what, code) in cases {
        assert_eq!(refused(at.decide(&who, approve()).await), code, "{what}");
    }
    let log = at.engine.store().audit_log(&at.id).await.unwrap();
    assert!(
        log.iter()
            .all(|e| !matches!(e.principal.as_deref(), Some("oz" | "rae"))),
        "another organization's attempt was written into the session's chain"
    );
    let ann = facilitator("ann", "acme");
    let blank = Decision::SendBack { note: "  ".into() };
    assert_eq!(
        refused(at.decide(&ann, blank).await),
        "approval_note_required"
    );
    let stale = DecisionRequest {
        session: at.id.clone(),
        step: "write-note".parse().unwrap(),
        revision: before - 1,
        expected: Default::default(),
        decision: approve(),
    };
    assert_eq!(
        refused(at.engine.decide(stale, &ann).await.unwrap()),
        "approval_stale"
    );
    assert_eq!(at.revision().await, before, "a refusal changes nothing");
    assert_eq!(at.read().await.status, Status::AwaitingApproval);
}

#[tokio::test]
async fn a_send_back_puts_the_step_into_revise_with_the_note_and_a_resubmission_waits_again() {
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_OK, SQL_OK).await;
    let note = "Split the backfill into batches of 10,000 rows.";
    let back = at
        .decide(
            &facilitator("ann", "acme"),
            Decision::SendBack { note: note.into() },
        )
        .await;
    assert_eq!(recorded(back).0, Status::Revise);
    let revise = at.read().await;
    assert_eq!(revise.status, Status::Revise);
    assert!(
        revise.findings[0].message.contains(note),
        "{:?}",
        revise.findings
    );
    assert!(revise.findings[0].message.contains("ann"));
    at.payload = revise;
    at.write_note(NOTE_OK, SQL_OK).await;
    assert_eq!(at.payload.status, Status::AwaitingApproval);
    assert!(at.payload.approval.as_ref().unwrap().approvals.is_empty());
}

#[tokio::test]
async fn a_failed_check_waits_for_a_waiver_unless_the_step_forbids_waiving_it() {
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_NO_OWNER, SQL_OK).await;
    assert_eq!(at.payload.status, Status::AwaitingApproval);
    let waivable = &at.payload.approval.as_ref().unwrap().waivable;
    assert_eq!(waivable.len(), 1);
    assert_eq!(waivable[0].rule.as_deref(), Some("risk-owner"));

    let ann = facilitator("ann", "acme");
    assert_eq!(
        refused(at.decide(&ann, approve()).await),
        "approval_findings_unwaived"
    );
    let waive = |check: &str, reason: &str| Decision::Waive {
        check: check.parse().unwrap(),
        rule: "risk-owner".into(),
        path: "note/note.md".into(),
        reason: reason.into(),
    };
    assert_eq!(
        refused(at.decide(&ann, waive("note-names-risks", "")).await),
        "approval_note_required"
    );
    assert_eq!(
        refused(at.decide(&ann, waive("migrate-lint", "fine")).await),
        "waiver_not_allowed"
    );
    let reason = "The data team owns every backfill; the owner is implied.";
    let (status, _) = recorded(at.decide(&ann, waive("note-names-risks", reason)).await);
    assert_eq!(status, Status::AwaitingApproval);
    assert_eq!(
        refused(at.decide(&ann, waive("note-names-risks", reason)).await),
        "waiver_not_found"
    );
    recorded(at.decide(&ann, approve()).await);
    let (status, _) = recorded(at.decide(&release_manager("rui", "acme"), approve()).await);
    assert_eq!(status, Status::Completed);
    let session = at.stored().await;
    let waivers = &session.signoffs[&"write-note".parse().unwrap()].waivers;
    assert_eq!(waivers.len(), 1);
    assert_eq!(waivers[0].reason, reason);
    assert_eq!(
        waivers[0].output_sha256,
        rimthan_registry::Sha256Digest::of(NOTE_NO_OWNER.as_bytes())
    );

    // A finding of a check no approver may waive sends the step back at once.
    let mut again = Session::at_write_note().await;
    again.write_note(NOTE_OK, SQL_RENAMES).await;
    assert_eq!(again.payload.status, Status::Revise);
}

#[tokio::test]
async fn two_approvers_racing_on_one_revision_make_one_transition() {
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_OK, SQL_OK).await;
    let revision = at.revision().await;
    let request = |decision| DecisionRequest {
        session: at.id.clone(),
        step: "write-note".parse().unwrap(),
        revision,
        expected: Default::default(),
        decision,
    };
    let (ann, rui) = (facilitator("ann", "acme"), release_manager("rui", "acme"));
    let (a, b) = tokio::join!(
        at.engine.decide(request(approve()), &ann),
        at.engine.decide(
            request(Decision::SendBack {
                note: "Not yet.".into()
            }),
            &rui
        ),
    );
    let results = [a.unwrap(), b.unwrap()];
    let recorded = results
        .iter()
        .filter(|r| matches!(r, DecisionResult::Recorded { .. }))
        .count();
    assert_eq!(recorded, 1, "{results:?}");
    assert!(results.iter().any(|r| matches!(
        r,
        DecisionResult::Refused { failure } if failure.code.as_str() == "approval_stale"
    )));
    assert_eq!(at.revision().await, revision + 1);
}

/// A decision bound to the digests the approver read is refused, naming the path and both
/// digests, when the output waiting for sign-off is another; the digests read let it through.
#[tokio::test]
async fn a_decision_bound_to_what_was_read_is_refused_when_the_output_changed() {
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_OK, SQL_OK).await;
    let read = rimthan_registry::Sha256Digest::of(NOTE_OK.as_bytes());
    let other = rimthan_registry::Sha256Digest::of(b"another note\n");
    let ann = facilitator("ann", "acme");
    let request =
        |expected: BTreeMap<String, rimthan_registry::Sha256Digest>, revision| DecisionRequest {
            session: at.id.clone(),
            step: "write-note".parse().unwrap(),
            revision,
            expected,
            decision: approve(),
        };
    let revision = at.revision().await;
    let changed = at
        .engine
        .decide(
            request(
                BTreeMap::from([("note/note.md".to_owned(), other)]),
                revision,
            ),
            &ann,
        )
        .await
        .unwrap();
    let DecisionResult::Refused { failure } = changed else {
        panic!("{changed:?}")
    };
    assert_eq!(failure.code.as_str(), "approval_content_changed");
    let detail = serde_json::to_value(&failure).unwrap()["detail"].clone();
    assert_eq!(detail["path"], "note/note.md");
    assert_eq!(detail["expected_sha256"], other.to_string());
    assert_eq!(detail["sha256"], read.to_string());
    assert_eq!(at.revision().await, revision, "a refusal changes nothing");
    let unknown = at
        .engine
        .decide(
            request(
                BTreeMap::from([("note/other.md".to_owned(), read)]),
                revision,
            ),
            &ann,
        )
        .await
        .unwrap();
    assert_eq!(refused(unknown), "approval_content_changed");
    let bound = at
        .engine
        .decide(
            request(
                BTreeMap::from([("note/note.md".to_owned(), read)]),
                revision,
            ),
            &ann,
        )
        .await
        .unwrap();
    assert!(
        matches!(bound, DecisionResult::Recorded { .. }),
        "{bound:?}"
    );
}

#[tokio::test]
async fn where_nobody_authenticates_the_operator_signs_off_under_a_name_recorded_as_asserted() {
    let mut at = Session::at_write_note_by(None).await;
    at.write_note(NOTE_OK, SQL_OK).await;
    assert_eq!(at.payload.status, Status::AwaitingApproval);
    let ada = Approver::asserted("ada").unwrap();
    assert_eq!(
        recorded(at.decide(&ada, approve()).await),
        (Status::AwaitingApproval, 1)
    );
    // One name is one person, however often it is given.
    assert_eq!(
        refused(at.decide(&ada, approve()).await),
        "approval_already_given"
    );
    recorded(
        at.decide(&Approver::asserted("bo").unwrap(), approve())
            .await,
    );

    let stored = at.stored().await;
    let signed = &stored.signoffs[&"write-note".parse().unwrap()];
    assert_eq!(signed.approvals.len(), 2);
    for approval in &signed.approvals {
        let recorded = serde_json::to_value(approval).unwrap();
        assert_eq!(recorded["authenticated"], false, "{recorded}");
        assert_eq!(recorded["basis"], "local_operator", "{recorded}");
    }
    let log = at.engine.store().audit_log(&at.id).await.unwrap();
    let decisions: Vec<_> = log.iter().filter_map(|e| e.decision.as_ref()).collect();
    assert_eq!(decisions.len(), 3);
    assert!(decisions.iter().all(|d| d.asserted), "{decisions:?}");
}

#[tokio::test]
async fn an_asserted_name_decides_nothing_an_authenticated_participant_started() {
    // A participant known by subject alone: the session is theirs, not the machine's.
    let mut alone = Session::at_write_note_by(Some(Principal {
        subject: "pat".into(),
        organization: None,
    }))
    .await;
    alone.write_note(NOTE_OK, SQL_OK).await;
    let before = alone.revision().await;
    let ada = Approver::asserted("ada").unwrap();
    assert_eq!(
        refused(alone.decide(&ada, approve()).await),
        "approval_not_authenticated"
    );
    assert_eq!(alone.revision().await, before);
    // An organization's session is no session at all to an asserted name.
    let mut owned = Session::at_write_note().await;
    owned.write_note(NOTE_OK, SQL_OK).await;
    assert_eq!(
        refused(owned.decide(&ada, approve()).await),
        "session_not_found"
    );
}

#[tokio::test]
async fn the_texts_of_a_signed_step_are_kept_for_its_approver_and_the_sent_back_round_beside_them()
{
    let mut at = Session::at_write_note().await;
    at.write_note(NOTE_OK, SQL_OK).await;
    let stored = at.stored().await;
    let pending = stored.approval.as_ref().unwrap();
    assert_eq!(pending.texts["note/note.md"], NOTE_OK);
    assert_eq!(pending.texts["note/migrate.sql"], SQL_OK);
    assert!(pending.previous_texts.is_empty());

    let back = Decision::SendBack {
        note: "Name the owner.".into(),
    };
    recorded(at.decide(&facilitator("ann", "acme"), back).await);
    at.payload = at.read().await;
    let changed = "# Add a sales channel\n\nOwner: data team.\n";
    at.write_note(changed, SQL_OK).await;
    let stored = at.stored().await;
    let pending = stored.approval.as_ref().unwrap();
    assert_eq!(pending.texts["note/note.md"], changed);
    assert_eq!(pending.previous_texts["note/note.md"], NOTE_OK);
    assert_eq!(pending.previous_texts["note/migrate.sql"], SQL_OK);
    assert!(stored.sent_back_texts.is_empty());
}

#[tokio::test]
async fn a_signed_step_refuses_an_output_attested_without_its_text() {
    let at = Session::at_write_note().await;
    let files = BTreeMap::from([
        ("plan/plan.json", PLAN),
        ("note/note.md", NOTE_OK),
        ("note/migrate.sql", SQL_OK),
    ]);
    let mut att = attest(&at.payload, &files);
    let step = at.payload.step.as_ref().unwrap();
    assert!(step.outputs.iter().all(|o| o.send_text), "{step:?}");
    for artifact in &mut att.artifacts {
        artifact.text = None;
    }
    let result = at
        .engine
        .prepare(prepare_with(&at.payload, att), Some(&participant()))
        .await
        .unwrap();
    let result = serde_json::to_value(result).unwrap();
    let codes: Vec<_> = result["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == "output_text_missing"),
        "{result:#}"
    );
}

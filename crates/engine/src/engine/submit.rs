//! `rimthan.submit_step_reports`: check the report set against the pending plan, then advance,
//! ask for a revision, or complete.

use super::{Engine, Evidence, access::Door, transact::Ruling};
use crate::{
    error::EngineError,
    model::audit::{Operation, Outcome},
    model::codes::{Code, Failure},
    model::payload::SERVER_NAME,
    model::payload::StepResult,
    model::request::SubmitRequest,
    model::session::{Principal, Session, Status, now_rfc3339},
    rules::reports::check_reports,
    rules::transition,
    rules::view::Pinned,
};

const TOOL: Operation = Operation::SubmitStepReports;

impl Engine {
    /// `rimthan.submit_step_reports`.
    pub async fn submit(
        &self,
        req: SubmitRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
        let (fingerprint, evidence) = Evidence::of_submission(&req);
        let door = Door::Checkpoint {
            tool: TOOL,
            token: &req.checkpoint,
            principal,
            evidence,
            retry: Some(&fingerprint),
        };
        let refuse = |session: &Session, failures| {
            let (rejected, audit) =
                self.rejection(TOOL, Some(session), failures, principal, evidence);
            Ok(Ruling::Answer(StepResult::Rejected(rejected), audit))
        };
        let done = self.transact(door, StepResult::Rejected, |opened| {
            let session = opened.session();
            let pinned = Pinned::resolve(opened.release(), session, &self.policies)?;
            if session.last_change.as_ref() == Some(&fingerprint) {
                let payload = pinned.active_payload(session, &self.key, SERVER_NAME);
                let audit = self.audit(TOOL, Some(session), Outcome::Replayed, principal);
                return Ok(Ruling::Answer(StepResult::Active(Box::new(payload)), audit));
            }
            if session.status == Status::AwaitingApproval {
                return refuse(session, vec![transition::awaiting_approval(session)]);
            }
            if session.status == Status::Expired {
                return refuse(session, vec![transition::expired(session)]);
            }
            let plan = match &session.plan {
                Some(plan) if plan.id == req.validation_id => plan,
                _ => {
                    let failure = if session.retired_plans.contains(&req.validation_id) {
                        Failure::new(
                            Code::ValidationSuperseded,
                            "a newer validation plan replaced this one; submit against the latest plan",
                        )
                    } else {
                        Failure::new(
                            Code::ValidationNotFound,
                            "no validation plan with this id is pending; call rimthan.prepare_step_validation",
                        )
                    };
                    let failure = failure.with("validation_id", &req.validation_id);
                    return refuse(session, vec![failure]);
                }
            };
            let planned = pinned.planned(session, plan)?;
            let failures = check_reports(&pinned, session, &planned, &req.reports);
            if !failures.is_empty() {
                return refuse(session, failures);
            }
            let (next, judgement) = transition::submitted(
                &pinned,
                session,
                plan,
                &req.reports,
                fingerprint.clone(),
                &now_rfc3339(),
            );
            let answer = StepResult::Active(Box::new(pinned.active_payload(
                &next,
                &self.key,
                SERVER_NAME,
            )));
            let mut audit = self.audit(TOOL, Some(&next), next.status.into(), principal);
            audit.judgement = Some(judgement);
            evidence.apply(&mut audit);
            Ok(Ruling::Move {
                next: Box::new(next),
                audit,
                answer,
            })
        })
        .await?;
        // The completing answer carries the statement, signed over the audit entry the
        // completion committed (so it is built only once that is stored).
        Ok(match (done.answer, done.session) {
            (StepResult::Active(mut payload), Some(session)) => {
                payload.provenance = self.provenance_at(&session, done.link).await?;
                StepResult::Active(payload)
            }
            (answer, _) => answer,
        })
    }
}

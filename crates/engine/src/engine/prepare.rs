//! `rimthan.prepare_step_validation`: check the step's attestation and persist the validation
//! plan its validators will run.

use rimthan_registry::StepKind;

use super::{Engine, Evidence, access::Door, transact::Ruling};
use crate::{
    error::EngineError,
    model::audit::{Operation, Outcome},
    model::codes::{Code, Failure},
    model::payload::{
        InputPayload, PlanCheck, PlanValidator, PrepareResult, ReadyTag, ValidationPlan,
    },
    model::request::PrepareRequest,
    model::session::{PlanRecord, Principal, Session, SessionId, Status, now_rfc3339},
    rules::attestation::{check_host, check_outputs},
    rules::checks::{Checked, run_checks},
    rules::transition,
    rules::view::{Pinned, Planned},
};

const TOOL: Operation = Operation::PrepareStepValidation;

/// Instructions that come with every validation plan.
const PLAN_INSTRUCTIONS: &str = "Run each validator as a separate native subagent, one at a \
time or in parallel, each with only its own instructions, read-only access to its declared \
inputs, and only its listed capabilities. Collect exactly one JSON report per validator, \
conforming to its report schema, and submit them together with rimthan.submit_step_reports \
and this validation_id. Do not edit any file while validators run.";

/// Added when a deterministic check failed: the round's outcome is already decided.
const CHECKS_FAILED_INSTRUCTIONS: &str = " A deterministic check failed (see checks): the step \
will return to revise with its findings whatever the reports say. Still run the validators and \
submit their reports, so this round's revision has every finding.";

impl Engine {
    /// `rimthan.prepare_step_validation`.
    pub async fn prepare(
        &self,
        req: PrepareRequest,
        principal: Option<&Principal>,
    ) -> Result<PrepareResult, EngineError> {
        let (fingerprint, evidence) = Evidence::of_preparation(&req);
        let door = Door::Checkpoint {
            tool: TOOL,
            token: &req.checkpoint,
            principal,
            evidence,
            retry: Some(&fingerprint),
        };
        let done = self
            .transact(door, PrepareResult::Rejected, |opened| {
                let session = opened.session();
                let pinned = Pinned::resolve(opened.release(), session, &self.policies)?;
                if session.last_change.as_ref() == Some(&fingerprint)
                    && let Some(plan) = &session.plan
                {
                    let payload = self.plan_payload(&pinned, session, plan)?;
                    let audit = self.audit(TOOL, Some(session), Outcome::Replayed, principal);
                    return Ok(Ruling::Answer(PrepareResult::Ready(payload), audit));
                }
                match self.check_preparation(&pinned, session, &req) {
                    Ok(plan) => {
                        let host = match (&req.host_attestation, evidence) {
                            (Some(_), Evidence::Attestation(digest)) => Some(digest),
                            _ => None,
                        };
                        let next = transition::prepared(
                            session,
                            &plan,
                            host,
                            fingerprint.clone(),
                            &now_rfc3339(),
                        );
                        let mut audit = self.audit(TOOL, Some(&next), Outcome::Ready, principal);
                        evidence.apply(&mut audit);
                        audit.checks = plan.checks.iter().map(Into::into).collect();
                        let answer =
                            PrepareResult::Ready(self.plan_payload(&pinned, &next, &plan)?);
                        Ok(Ruling::Move {
                            next: Box::new(next),
                            audit,
                            answer,
                        })
                    }
                    Err(failures) => {
                        let (rejected, audit) =
                            self.rejection(TOOL, Some(session), failures, principal, evidence);
                        Ok(Ruling::Answer(PrepareResult::Rejected(rejected), audit))
                    }
                }
            })
            .await;
        done.map(|done| done.answer)
    }

    fn check_preparation(
        &self,
        pinned: &Pinned<'_>,
        session: &Session,
        req: &PrepareRequest,
    ) -> Result<PlanRecord, Vec<Failure>> {
        if session.status == Status::AwaitingApproval {
            return Err(vec![transition::awaiting_approval(session)]);
        }
        if session.status == Status::Expired {
            return Err(vec![transition::expired(session)]);
        }
        let step = pinned
            .active_step(session)
            .filter(|_| !session.status.is_terminal());
        let Some(step) = step.filter(|s| s.doc().id.as_str() == req.step_id) else {
            return Err(vec![
                Failure::new(
                    Code::StepNotActive,
                    format!("step {:?} is not the active step", req.step_id),
                )
                .with("active_step", step.map(|s| s.doc().id.as_str())),
            ]);
        };
        let setup = step.doc().kind == StepKind::Setup;
        let (outputs, checked) = match (setup, &req.host_attestation, &req.output_attestation) {
            (true, Some(att), None) => {
                let failures = check_host(pinned, session, att);
                if !failures.is_empty() {
                    return Err(failures);
                }
                (Default::default(), Checked::default())
            }
            (false, None, Some(att)) => {
                let outputs = check_outputs(pinned, session, step, att)?;
                let checked = run_checks(pinned, session, step, att, &outputs, &self.verdicts)?;
                (outputs, checked)
            }
            _ => {
                let wanted = if setup {
                    "host_attestation"
                } else {
                    "output_attestation"
                };
                return Err(vec![
                    Failure::new(
                        Code::AttestationTypeNotAllowed,
                        format!(
                            "step {} takes exactly one attestation: {wanted}",
                            step.doc().id
                        ),
                    )
                    .with("expected", wanted),
                ]);
            }
        };
        Ok(PlanRecord {
            id: SessionId::generate().to_string(),
            step: step.doc().id.clone(),
            validators: step
                .doc()
                .validators
                .iter()
                .map(|v| (v.id.clone(), v.version.clone()))
                .collect(),
            outputs,
            checks: checked.records,
            texts: checked.signed_texts,
        })
    }

    fn plan_payload(
        &self,
        pinned: &Pinned<'_>,
        session: &Session,
        plan: &PlanRecord,
    ) -> Result<ValidationPlan, EngineError> {
        let release = pinned.release.id();
        let validators = pinned
            .planned(session, plan)?
            .into_iter()
            .map(
                |Planned {
                     id,
                     version,
                     validator,
                     allowed,
                 }| {
                    let doc = validator.doc();
                    PlanValidator {
                        id: id.to_string(),
                        version: version.to_string(),
                        uri: rimthan_registry::uri::validator(release, id, version),
                        sha256: validator.entry().sha256.to_string(),
                        instructions: doc.instructions.clone(),
                        inputs: doc
                            .inputs
                            .iter()
                            .map(|a| {
                                let mut input = pinned.input(session, a.as_str());
                                // Outputs of the step under validation are known from the plan.
                                if let Some(accepted) = plan.outputs.get(&input.path) {
                                    input.sha256 = Some(accepted.sha256.to_string());
                                }
                                input
                            })
                            .collect::<Vec<InputPayload>>(),
                        capabilities: allowed,
                        isolation: pinned.contract.validator_isolation,
                        report_schema: pinned.schema(&doc.report_schema),
                    }
                },
            )
            .collect();
        let checks: Vec<PlanCheck> = plan
            .checks
            .iter()
            .map(|record| PlanCheck {
                uri: rimthan_registry::uri::check(
                    release,
                    &session.workflow,
                    &session.workflow_version,
                    &record.id,
                ),
                record: record.clone(),
            })
            .collect();
        let mut instructions = PLAN_INSTRUCTIONS.to_owned();
        if plan.checks.iter().any(|c| c.failed()) {
            instructions.push_str(CHECKS_FAILED_INSTRUCTIONS);
        }
        Ok(ValidationPlan {
            status: ReadyTag::Tag,
            validation_id: plan.id.clone(),
            validators,
            checks,
            instructions,
        })
    }
}

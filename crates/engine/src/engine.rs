//! The engine: the four workflow operations over a store and a verified registry.
//!
//! Every state change is a compare-and-swap on the session's revision, retried from a fresh
//! read when another call won; a retry re-runs every check, so a lost race surfaces as the
//! code the winner's change implies (`stale_checkpoint`, `validation_superseded`).
//!
//! The request behind each change is remembered in the session ([`LastChange`]), so a harness
//! that repeats it after losing the answer gets that answer again, not a second change or a
//! `stale_checkpoint` it cannot recover from (`docs/engine.md` §3.1).

use std::sync::Arc;

use rimthan_registry::{Sha256Digest, StepKind, VerifiedRelease, to_canonical_bytes};
use serde::Serialize;

use crate::{
    attestation::{check_host, check_outputs},
    checkpoint::CheckpointKey,
    codes::{Code, Failure},
    error::EngineError,
    offers::PolicyCache,
    payload::{
        ActivePayload, Blocked, BlockedTag, InputPayload, PlanValidator, PrepareResult, ReadyTag,
        Rejected, StartResult, StepResult, ValidationPlan,
    },
    releases::Releases,
    reports::check_reports,
    request::{ActiveStepRequest, PrepareRequest, StartRequest, SubmitRequest, Verdict},
    session::{
        ChangeTool, Finding, LastChange, PlanRecord, Principal, Session, SessionId, Status,
        now_rfc3339,
    },
    start::evaluate,
    store::{AuditEntry, Store},
    view::Pinned,
};

/// The MCP server's name, written into session files.
pub const SERVER_NAME: &str = "rimthan-workflow-engine";
/// The store secret that keys checkpoints.
const CHECKPOINT_SECRET: &str = "checkpoint-hmac-sha256";
/// Compare-and-swap attempts before a call gives up.
const MAX_ATTEMPTS: u32 = 32;

/// Instructions that come with every validation plan.
const PLAN_INSTRUCTIONS: &str = "Run each validator as a separate native subagent, one at a \
time or in parallel, each with only its own instructions, read-only access to its declared \
inputs, and only its listed capabilities. Collect exactly one JSON report per validator, \
conforming to its report schema, and submit them together with rimthan.submit_step_reports \
and this validation_id. Do not edit any file while validators run.";

/// The workflow engine.
#[derive(Debug)]
pub struct Engine {
    releases: Arc<Releases>,
    store: Arc<dyn Store>,
    key: CheckpointKey,
    policies: PolicyCache,
}

/// A session loaded for a call, or the failures that stop the call (with the session, when
/// one was found, so the rejection is audited against it).
type Opened = Result<(Session, Arc<VerifiedRelease>), (Option<Session>, Vec<Failure>)>;

impl Engine {
    /// An engine over `releases` and `store`. Without an explicit `secret`, the checkpoint secret
    /// is read from the store, generated on first use (replicas sharing a database share it).
    pub async fn new(
        releases: Arc<Releases>,
        store: Arc<dyn Store>,
        secret: Option<Vec<u8>>,
    ) -> Result<Self, EngineError> {
        let secret = match secret {
            Some(s) => s,
            None => {
                store
                    .secret(CHECKPOINT_SECRET, CheckpointKey::generate_secret())
                    .await?
            }
        };
        let key = CheckpointKey::new(secret).ok_or_else(|| EngineError::InvalidArgument {
            field: "checkpoint secret".into(),
            message: format!("use at least {} bytes", crate::checkpoint::MIN_SECRET_BYTES),
        })?;
        Ok(Self {
            releases,
            store,
            key,
            policies: PolicyCache::default(),
        })
    }

    /// The registry in use.
    pub fn releases(&self) -> &Arc<Releases> {
        &self.releases
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn audit(
        &self,
        tool: &str,
        session: Option<&Session>,
        outcome: &str,
        codes: Vec<String>,
        principal: Option<&Principal>,
    ) -> AuditEntry {
        AuditEntry {
            session_id: session.map(|s| s.id.clone()),
            seq: session.map(|s| s.seq),
            tool: tool.into(),
            outcome: outcome.into(),
            codes,
            attestation_sha256: None,
            reports_sha256: None,
            principal: principal.map(|p| p.subject.clone()),
            at: now_rfc3339(),
        }
    }

    /// Audits an identical retry answered from the session as it stands.
    async fn replayed(
        &self,
        tool: &str,
        session: &Session,
        principal: Option<&Principal>,
    ) -> Result<(), EngineError> {
        self.store
            .append_audit(&self.audit(tool, Some(session), "replayed", vec![], principal))
            .await?;
        Ok(())
    }

    async fn reject(
        &self,
        tool: &str,
        session: Option<&Session>,
        failures: Vec<Failure>,
        principal: Option<&Principal>,
        evidence: Evidence,
    ) -> Result<Rejected, EngineError> {
        let codes = failures.iter().map(|f| f.code.to_string()).collect();
        let mut audit = self.audit(tool, session, "rejected", codes, principal);
        evidence.apply(&mut audit);
        self.store.append_audit(&audit).await?;
        Ok(Rejected::new(failures))
    }

    /// `rimthan.start_workflow`.
    pub async fn start(
        &self,
        req: StartRequest,
        principal: Option<&Principal>,
    ) -> Result<StartResult, EngineError> {
        const TOOL: &str = "start_workflow";
        let change = LastChange {
            tool: ChangeTool::Start,
            request_sha256: Evidence::digest(&req),
        };
        let keyed = req.idempotency_key.as_ref().map(|key| {
            let owner = principal.map_or("", |p| p.subject.as_str());
            self.key.keyed_session(owner, key.as_str())
        });
        if let Some(id) = &keyed
            && let Some(existing) = self.store.load_session(id).await?
        {
            return self.start_again(existing, &change, principal).await;
        }
        let registry = self.releases.snapshot();
        let release = match (&req.release, &req.channel) {
            (Some(_), Some(_)) => {
                return Err(EngineError::InvalidArgument {
                    field: "channel".into(),
                    message: "name a release or a channel, not both".into(),
                });
            }
            (Some(id), None) => registry.release(id).ok_or_else(|| {
                Failure::new(
                    Code::UnknownRelease,
                    format!("release {id} is not in the registry"),
                )
                .with("release", id.as_str())
                .with(
                    "available",
                    registry
                        .releases()
                        .keys()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>(),
                )
            }),
            (None, channel) => {
                let channel = channel.as_ref().unwrap_or(self.releases.active_channel());
                registry.channel(channel).ok_or_else(|| {
                    Failure::new(
                        Code::UnknownChannel,
                        format!("channel {channel} is not in the registry"),
                    )
                    .with("channel", channel.as_str())
                    .with(
                        "available",
                        registry
                            .channels()
                            .keys()
                            .map(|c| c.as_str())
                            .collect::<Vec<_>>(),
                    )
                })
            }
        };
        let release = match release {
            Ok(r) => r.clone(),
            Err(f) => {
                return Ok(StartResult::Rejected(
                    self.reject(TOOL, None, vec![f], principal, Evidence::None)
                        .await?,
                ));
            }
        };
        let workflow = match &req.workflow_version {
            Some(v) => release.workflow(&req.workflow_id, v),
            None => release.latest_workflow(&req.workflow_id),
        };
        let Some(workflow) = workflow else {
            let available: Vec<String> = release
                .workflows()
                .map(|w| format!("{}@{}", w.doc().id, w.doc().version))
                .collect();
            let f = Failure::new(
                Code::UnknownWorkflow,
                format!(
                    "workflow {} is not in release {}",
                    req.workflow_id,
                    release.id()
                ),
            )
            .with("available", available);
            return Ok(StartResult::Rejected(
                self.reject(TOOL, None, vec![f], principal, Evidence::None)
                    .await?,
            ));
        };
        let policy = self.policies.compile(&req.repository_policy)?;
        let binding = match evaluate(&release, workflow, &req.host, &policy) {
            Ok(binding) => binding,
            Err(blockers) => {
                let codes = blockers.iter().map(|b| b.code.to_string()).collect();
                self.store
                    .append_audit(&self.audit(TOOL, None, "blocked", codes, principal))
                    .await?;
                return Ok(StartResult::Blocked(Blocked {
                    status: BlockedTag::Tag,
                    blockers,
                }));
            }
        };
        let now = now_rfc3339();
        let session = Session {
            id: keyed.clone().unwrap_or_else(SessionId::generate),
            revision: 0,
            seq: 0,
            release: release.id().clone(),
            workflow: workflow.doc().id.clone(),
            workflow_version: workflow.doc().version.clone(),
            host: binding,
            principal: principal.cloned(),
            policy: req.repository_policy.clone(),
            status: Status::Active,
            step_index: 0,
            plan: None,
            retired_plans: Vec::new(),
            ledger: Default::default(),
            attested: Default::default(),
            findings: Vec::new(),
            reports: Default::default(),
            last_change: Some(change.clone()),
            created_at: now.clone(),
            updated_at: now,
        };
        let pinned = Pinned::resolve(&release, &session, &self.policies)?;
        let payload = pinned.active_payload(&session, &self.key, SERVER_NAME);
        let audit = self.audit(TOOL, Some(&session), "active", vec![], principal);
        if let Err(e) = self.store.insert_session(&session, &audit).await {
            // An identical keyed start that raced this one stored the session first.
            return match self.store.load_session(&session.id).await? {
                Some(existing) if keyed.is_some() => {
                    self.start_again(existing, &change, principal).await
                }
                _ => Err(e.into()),
            };
        }
        Ok(StartResult::Active(Box::new(payload)))
    }

    /// A keyed start whose session exists: the identical request gets the session's answer
    /// while nothing has changed it since; anything else is `idempotency_key_reused`.
    async fn start_again(
        &self,
        existing: Session,
        change: &LastChange,
        principal: Option<&Principal>,
    ) -> Result<StartResult, EngineError> {
        const TOOL: &str = "start_workflow";
        let failure = if !may_act(existing.principal.as_ref(), principal) {
            Some(Failure::new(
                Code::SessionAccessDenied,
                "this session belongs to another principal outside your organization",
            ))
        } else if existing.last_change.as_ref() == Some(change) {
            None
        } else if existing.last_change.as_ref().map(|c| c.tool) == Some(ChangeTool::Start) {
            Some(Failure::new(
                Code::IdempotencyKeyReused,
                "this idempotency key already started a session with other arguments; use a new key for a new start",
            ))
        } else {
            Some(Failure::new(
                Code::IdempotencyKeyReused,
                "this idempotency key started a session that has moved on since; continue it from its session file",
            ))
        };
        if let Some(failure) = failure {
            let failure = failure.with("session_id", existing.id.as_str());
            return Ok(StartResult::Rejected(
                self.reject(
                    TOOL,
                    Some(&existing),
                    vec![failure],
                    principal,
                    Evidence::None,
                )
                .await?,
            ));
        }
        let release = self.pinned_release(&existing)?;
        let pinned = Pinned::resolve(&release, &existing, &self.policies)?;
        let payload = pinned.active_payload(&existing, &self.key, SERVER_NAME);
        self.replayed(TOOL, &existing, principal).await?;
        Ok(StartResult::Active(Box::new(payload)))
    }

    fn pinned_release(&self, session: &Session) -> Result<Arc<VerifiedRelease>, EngineError> {
        self.releases
            .snapshot()
            .release(&session.release)
            .cloned()
            .ok_or_else(|| EngineError::PinnedReleaseMissing(session.release.to_string()))
    }

    /// Loads the session `token` names. A checkpoint one behind is current for `retry`, the
    /// request that made the session's latest change.
    async fn load(
        &self,
        token: &str,
        principal: Option<&Principal>,
        retry: Option<&LastChange>,
    ) -> Result<Opened, EngineError> {
        let Some(checkpoint) = self.key.verify(token) else {
            return Ok(Err((
                None,
                vec![Failure::new(
                    Code::InvalidCheckpoint,
                    "the checkpoint is not one this server issued; use the checkpoint from the latest result or session file",
                )],
            )));
        };
        let Some(session) = self.store.load_session(&checkpoint.session).await? else {
            return Ok(Err((
                None,
                vec![
                    Failure::new(
                        Code::SessionNotFound,
                        format!("session {} is not stored here", checkpoint.session),
                    )
                    .with("session_id", checkpoint.session.as_str()),
                ],
            )));
        };
        if !may_act(session.principal.as_ref(), principal) {
            return Ok(Err((
                Some(session),
                vec![Failure::new(
                    Code::SessionAccessDenied,
                    "this session belongs to another principal outside your organization",
                )],
            )));
        }
        let retried = retry.is_some()
            && session.last_change.as_ref() == retry
            && checkpoint.seq.checked_add(1) == Some(session.seq);
        if checkpoint.seq != session.seq && !retried {
            let failure = if checkpoint.seq < session.seq {
                Failure::new(
                    Code::StaleCheckpoint,
                    "a newer checkpoint exists; call rimthan.get_active_step with the latest one",
                )
                .with("checkpoint_seq", checkpoint.seq)
                .with("session_seq", session.seq)
            } else {
                Failure::new(
                    Code::InvalidCheckpoint,
                    "the checkpoint is ahead of the stored session",
                )
            };
            return Ok(Err((Some(session), vec![failure])));
        }
        let release = self.pinned_release(&session)?;
        Ok(Ok((session, release)))
    }

    /// Loads the session a checkpoint names, or audits and returns the rejection.
    async fn open(
        &self,
        tool: &str,
        token: &str,
        principal: Option<&Principal>,
        evidence: Evidence,
        retry: Option<&LastChange>,
    ) -> Result<Result<(Session, Arc<VerifiedRelease>), Rejected>, EngineError> {
        Ok(match self.load(token, principal, retry).await? {
            Ok(opened) => Ok(opened),
            Err((session, failures)) => Err(self
                .reject(tool, session.as_ref(), failures, principal, evidence)
                .await?),
        })
    }

    /// `rimthan.get_active_step`.
    pub async fn active_step(
        &self,
        req: ActiveStepRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
        const TOOL: &str = "get_active_step";
        let (session, release) = match self
            .open(TOOL, &req.checkpoint, principal, Evidence::None, None)
            .await?
        {
            Ok(opened) => opened,
            Err(rejected) => return Ok(StepResult::Rejected(rejected)),
        };
        let pinned = Pinned::resolve(&release, &session, &self.policies)?;
        let payload = pinned.active_payload(&session, &self.key, SERVER_NAME);
        // A read that succeeds changes nothing and proves nothing new: it is counted in the
        // metrics, not logged row by row (docs/engine.md §7). A refused read was audited above.
        Ok(StepResult::Active(Box::new(payload)))
    }

    /// `rimthan.prepare_step_validation`.
    pub async fn prepare(
        &self,
        req: PrepareRequest,
        principal: Option<&Principal>,
    ) -> Result<PrepareResult, EngineError> {
        const TOOL: &str = "prepare_step_validation";
        let evidence = Evidence::digest_attestation(&req);
        let change = LastChange {
            tool: ChangeTool::Prepare,
            request_sha256: Evidence::digest(&req),
        };
        for _ in 0..MAX_ATTEMPTS {
            let (session, release) = match self
                .open(TOOL, &req.checkpoint, principal, evidence, Some(&change))
                .await?
            {
                Ok(opened) => opened,
                Err(rejected) => return Ok(PrepareResult::Rejected(rejected)),
            };
            let pinned = Pinned::resolve(&release, &session, &self.policies)?;
            if session.last_change.as_ref() == Some(&change)
                && let Some(plan) = &session.plan
            {
                let payload = self.plan_payload(&pinned, &session, plan)?;
                self.replayed(TOOL, &session, principal).await?;
                return Ok(PrepareResult::Ready(payload));
            }
            let failures = match self.check_preparation(&pinned, &session, &req) {
                Ok(plan) => {
                    let mut next = session.clone();
                    if let Some(old) = next.plan.take() {
                        next.retire(old.id);
                    }
                    next.attested
                        .extend(plan.outputs.iter().map(|(p, a)| (p.clone(), a.sha256)));
                    next.plan = Some(plan.clone());
                    next.last_change = Some(change.clone());
                    next.revision += 1;
                    next.updated_at = now_rfc3339();
                    let mut audit = self.audit(TOOL, Some(&next), "ready", vec![], principal);
                    evidence.apply(&mut audit);
                    if !self
                        .store
                        .update_session(session.revision, &next, &audit)
                        .await?
                    {
                        continue;
                    }
                    return Ok(PrepareResult::Ready(
                        self.plan_payload(&pinned, &next, &plan)?,
                    ));
                }
                Err(failures) => failures,
            };
            return Ok(PrepareResult::Rejected(
                self.reject(TOOL, Some(&session), failures, principal, evidence)
                    .await?,
            ));
        }
        Err(EngineError::Contended {
            attempts: MAX_ATTEMPTS,
        })
    }

    fn check_preparation(
        &self,
        pinned: &Pinned<'_>,
        session: &Session,
        req: &PrepareRequest,
    ) -> Result<PlanRecord, Vec<Failure>> {
        let step = pinned
            .active_step(session)
            .filter(|_| session.status != Status::Completed);
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
        let outputs = match (setup, &req.host_attestation, &req.output_attestation) {
            (true, Some(att), None) => {
                let failures = check_host(pinned, session, att);
                if !failures.is_empty() {
                    return Err(failures);
                }
                Default::default()
            }
            (false, None, Some(att)) => check_outputs(pinned, session, step, att)?,
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
        })
    }

    fn plan_payload(
        &self,
        pinned: &Pinned<'_>,
        session: &Session,
        plan: &PlanRecord,
    ) -> Result<ValidationPlan, EngineError> {
        let release = pinned.release.id();
        let validators = plan
            .validators
            .iter()
            .zip(pinned.planned(session, plan)?)
            .map(|((id, version), validator)| {
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
                    capabilities: doc
                        .capabilities
                        .iter()
                        .filter(|c| session.host.validator_capabilities.contains(c))
                        .copied()
                        .collect(),
                    isolation: pinned.contract.validator_isolation,
                    report_schema: pinned.schema(&doc.report_schema),
                }
            })
            .collect();
        Ok(ValidationPlan {
            status: ReadyTag::Tag,
            validation_id: plan.id.clone(),
            validators,
            instructions: PLAN_INSTRUCTIONS.into(),
        })
    }

    /// `rimthan.submit_step_reports`.
    pub async fn submit(
        &self,
        req: SubmitRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
        const TOOL: &str = "submit_step_reports";
        let evidence = Evidence::digest_reports(&req);
        let change = LastChange {
            tool: ChangeTool::Submit,
            request_sha256: Evidence::digest(&req),
        };
        for _ in 0..MAX_ATTEMPTS {
            let (session, release) = match self
                .open(TOOL, &req.checkpoint, principal, evidence, Some(&change))
                .await?
            {
                Ok(opened) => opened,
                Err(rejected) => return Ok(StepResult::Rejected(rejected)),
            };
            let pinned = Pinned::resolve(&release, &session, &self.policies)?;
            if session.last_change.as_ref() == Some(&change) {
                let payload = pinned.active_payload(&session, &self.key, SERVER_NAME);
                self.replayed(TOOL, &session, principal).await?;
                return Ok(StepResult::Active(Box::new(payload)));
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
                    return Ok(StepResult::Rejected(
                        self.reject(TOOL, Some(&session), vec![failure], principal, evidence)
                            .await?,
                    ));
                }
            };
            let validators = pinned.planned(&session, plan)?;
            let failures = check_reports(&pinned, &session, plan, &validators, &req.reports);
            if !failures.is_empty() {
                return Ok(StepResult::Rejected(
                    self.reject(TOOL, Some(&session), failures, principal, evidence)
                        .await?,
                ));
            }
            let mut next = session.clone();
            let plan = plan.clone();
            next.plan = None;
            next.retire(plan.id.clone());
            next.reports.insert(plan.step.clone(), req.reports.clone());
            let failing: Vec<_> = req
                .reports
                .iter()
                .filter(|r| r.verdict == Verdict::Fail)
                .collect();
            if failing.is_empty() {
                next.ledger.extend(plan.outputs);
                next.step_index += 1;
                next.status = if next.step_index == pinned.workflow.steps().len() {
                    Status::Completed
                } else {
                    Status::Active
                };
                next.findings.clear();
            } else {
                next.status = Status::Revise;
                next.findings = findings_of(&failing);
            }
            next.last_change = Some(change.clone());
            next.seq += 1;
            next.revision += 1;
            next.updated_at = now_rfc3339();
            let mut audit = self.audit(TOOL, Some(&next), next.status.as_str(), vec![], principal);
            evidence.apply(&mut audit);
            if !self
                .store
                .update_session(session.revision, &next, &audit)
                .await?
            {
                continue;
            }
            let payload: ActivePayload = pinned.active_payload(&next, &self.key, SERVER_NAME);
            return Ok(StepResult::Active(Box::new(payload)));
        }
        Err(EngineError::Contended {
            attempts: MAX_ATTEMPTS,
        })
    }
}

fn findings_of(failing: &[&crate::request::Report]) -> Vec<Finding> {
    failing
        .iter()
        .flat_map(|r| {
            let listed = r.findings.iter().map(|f| Finding {
                validator_id: r.validator_id.clone(),
                severity: serde_json::to_value(f.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                message: f.message.clone(),
                path: f.path.clone(),
                pointer: f.pointer.clone(),
            });
            let summary = r.findings.is_empty().then(|| Finding {
                validator_id: r.validator_id.clone(),
                severity: "error".into(),
                message: r.summary.clone(),
                path: None,
                pointer: None,
            });
            listed.chain(summary).collect::<Vec<_>>()
        })
        .collect()
}

/// Whether `caller` may act on a session owned by `owner`: the same subject, or the same
/// organization (the authenticated Git handoff). Unowned sessions are open to any caller.
fn may_act(owner: Option<&Principal>, caller: Option<&Principal>) -> bool {
    match (owner, caller) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(owner), Some(caller)) => {
            owner.subject == caller.subject
                || owner.organization.is_some() && owner.organization == caller.organization
        }
    }
}

/// Digests of submitted evidence, recorded in the audit log.
#[derive(Debug, Clone, Copy)]
enum Evidence {
    None,
    Attestation(Sha256Digest),
    Reports(Sha256Digest),
}

impl Evidence {
    fn digest(value: &impl Serialize) -> Sha256Digest {
        Sha256Digest::of(&to_canonical_bytes(value).expect("requests serialize"))
    }

    fn digest_attestation(req: &PrepareRequest) -> Self {
        match (&req.host_attestation, &req.output_attestation) {
            (Some(a), _) => Evidence::Attestation(Self::digest(a)),
            (None, Some(a)) => Evidence::Attestation(Self::digest(a)),
            (None, None) => Evidence::None,
        }
    }

    fn digest_reports(req: &SubmitRequest) -> Self {
        Evidence::Reports(Self::digest(&req.reports))
    }

    fn apply(self, audit: &mut AuditEntry) {
        match self {
            Evidence::None => {}
            Evidence::Attestation(d) => audit.attestation_sha256 = Some(d.to_string()),
            Evidence::Reports(d) => audit.reports_sha256 = Some(d.to_string()),
        }
    }
}

//! `rimthan.start_workflow`: resolve the release and workflow, evaluate every blocker, and store
//! a new session bound to the declared host, or answer a keyed retry from the session it made.

use std::sync::Arc;
use tracing::Instrument as _;

use super::{
    Engine, Evidence,
    access::{access_denied, may_act},
};
use crate::{
    error::EngineError,
    model::audit::{Operation, Outcome},
    model::codes::{Code, Failure},
    model::payload::SERVER_NAME,
    model::payload::{Blocked, BlockedTag, StartResult},
    model::request::StartRequest,
    model::session::WorkflowRef,
    model::session::{LastRequest, Principal, RequestTool, Session, SessionId, now_rfc3339},
    releases::Serving,
    rules::blockers::evaluate,
    rules::transition,
    rules::view::Pinned,
};

const TOOL: Operation = Operation::StartWorkflow;

impl Engine {
    /// `rimthan.start_workflow`.
    pub async fn start(
        &self,
        req: StartRequest,
        principal: Option<&Principal>,
    ) -> Result<StartResult, EngineError> {
        let fingerprint = Evidence::fingerprint(RequestTool::Start, &req);
        let keyed = req
            .idempotency_key
            .as_ref()
            .map(|key| self.key.keyed_session(principal, key.as_str()));
        if let (Some(id), Some(key)) = (&keyed, &req.idempotency_key)
            && let Some(existing) = self.keyed_start(id, key.as_str(), principal).await?
        {
            return self.start_again(existing, &fingerprint, principal).await;
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
            (None, None) => self.releases.active(&registry).ok_or_else(|| {
                let served = self.releases.served();
                Failure::new(
                    match served {
                        Serving::Channel(_) => Code::UnknownChannel,
                        Serving::Release(_) => Code::UnknownRelease,
                    },
                    format!("the server's {served} is not in the registry"),
                )
            }),
            (None, Some(channel)) => registry.channel(channel).ok_or_else(|| {
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
            }),
        };
        let release = match release {
            Ok(r) => r.clone(),
            Err(f) => return self.refuse(None, f, principal).await,
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
            return self.refuse(None, f, principal).await;
        };
        let policy = self.policies.compile(&req.repository_policy)?;
        let binding = match evaluate(&release, workflow, &req.host, &policy) {
            Ok(binding) => binding,
            Err(blockers) => {
                let mut audit = self.audit(TOOL, None, Outcome::Blocked, principal);
                audit.codes = blockers.iter().map(|b| b.code).collect();
                audit.workflow = Some(WorkflowRef {
                    id: workflow.doc().id.to_string(),
                    version: workflow.doc().version.to_string(),
                });
                self.store
                    .append_audit(&audit)
                    .instrument(self.store_span("append_audit"))
                    .await?;
                return Ok(StartResult::Blocked(Blocked {
                    status: BlockedTag::Tag,
                    blockers,
                }));
            }
        };
        let start = transition::Start {
            id: keyed.clone().unwrap_or_else(SessionId::generate),
            release: &release,
            workflow,
            host: binding,
            principal,
            policy: req.repository_policy.clone(),
            fingerprint: fingerprint.clone(),
        };
        let session = transition::started(start, &now_rfc3339());
        let pinned = Pinned::resolve(&release, &session, &self.policies)?;
        let payload = pinned.active_payload(&session, &self.key, SERVER_NAME);
        let audit = self.audit(TOOL, Some(&session), Outcome::Active, principal);
        super::trace::record_session(&session, &release);
        if let Err(e) = self
            .store
            .insert_session(&session, &audit)
            .instrument(self.store_span("insert_session"))
            .await
        {
            // An identical keyed start that raced this one stored the session first.
            return match self
                .store
                .load_session(&session.id)
                .instrument(self.store_span("load_session"))
                .await?
            {
                Some(existing) if keyed.is_some() => {
                    self.start_again(existing, &fingerprint, principal).await
                }
                _ => Err(e.into()),
            };
        }
        Ok(StartResult::Active(Box::new(payload)))
    }

    /// The session a start with idempotency key `key` made for this caller's tenant, if any:
    /// `id`, the one its (organization, subject) derives, or one that versions keying by the
    /// subject alone stored for this very principal (`docs/engine.md` §3.2). The same subject of another
    /// tenant never finds the latter: it starts a session of its own.
    async fn keyed_start(
        &self,
        id: &SessionId,
        key: &str,
        principal: Option<&Principal>,
    ) -> Result<Option<Arc<Session>>, EngineError> {
        if let Some(existing) = self
            .store
            .load_session(id)
            .instrument(self.store_span("load_session"))
            .await?
        {
            return Ok(Some(existing));
        }
        let earlier = self.key.subject_keyed_session(principal, key);
        Ok(self
            .store
            .load_session(&earlier)
            .instrument(self.store_span("load_session"))
            .await?
            .filter(|s| s.principal.as_ref() == principal))
    }

    /// A keyed start whose session exists: the identical request gets the session's answer
    /// while nothing has changed it since; anything else is `idempotency_key_reused`.
    async fn start_again(
        &self,
        existing: Arc<Session>,
        fingerprint: &LastRequest,
        principal: Option<&Principal>,
    ) -> Result<StartResult, EngineError> {
        let failure = if !may_act(existing.principal.as_ref(), principal) {
            Some(access_denied())
        } else if existing.last_change.as_ref() == Some(fingerprint) {
            None
        } else if existing.last_change.as_ref().map(|c| c.tool) == Some(RequestTool::Start) {
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
            return self.refuse(Some(&existing), failure, principal).await;
        }
        let release = self.pinned_release(&existing)?;
        let pinned = Pinned::resolve(&release, &existing, &self.policies)?;
        let payload = pinned.active_payload(&existing, &self.key, SERVER_NAME);
        let audit = self.audit(TOOL, Some(&existing), Outcome::Replayed, principal);
        self.store
            .append_audit(&audit)
            .instrument(self.store_span("append_audit"))
            .await?;
        Ok(StartResult::Active(Box::new(payload)))
    }

    async fn refuse(
        &self,
        session: Option<&Session>,
        failure: Failure,
        principal: Option<&Principal>,
    ) -> Result<StartResult, EngineError> {
        let rejected = self
            .reject(TOOL, session, vec![failure], principal, Evidence::None)
            .await?;
        Ok(StartResult::Rejected(rejected))
    }
}

//! What the engine writes to the audit log: one entry per change and per refusal, with digests
//! of the evidence a call carried (`docs/engine.md` §7).

use rimthan_registry::{Sha256Digest, to_canonical_bytes, to_canonical_bytes_with_members};
use serde::Serialize;
use tracing::Instrument as _;

use super::{Engine, access::Opened};
use crate::{
    error::EngineError,
    model::audit::{AuditEntry, Operation, Outcome},
    model::codes::Failure,
    model::notify::{Notice, NotifyConfig},
    model::payload::Rejected,
    model::request::{PrepareRequest, SubmitRequest},
    model::session::WorkflowRef,
    model::session::{LastRequest, Principal, RequestTool, Session, now_rfc3339},
    rules::notify,
};

impl Engine {
    /// Sends every change's webhook events to `config`'s receivers (`serve --notify-url`):
    /// each joins the outbox in the change's own transaction.
    pub fn with_notify(mut self, config: NotifyConfig) -> Self {
        self.notify = Some(config).filter(|c| !c.endpoints.is_empty());
        self
    }

    /// The webhook events of storing `next` over the session `opened` read, with `audit`.
    pub(super) fn notices(
        &self,
        opened: &Opened,
        next: &Session,
        audit: &AuditEntry,
    ) -> Vec<Notice> {
        let Some(config) = &self.notify else {
            return Vec::new();
        };
        notify::notices(
            config,
            opened.release(),
            opened.session(),
            next,
            audit.tool,
            audit.principal.as_deref(),
            &audit.at,
        )
    }

    pub(super) fn audit(
        &self,
        tool: Operation,
        session: Option<&Session>,
        outcome: Outcome,
        principal: Option<&Principal>,
    ) -> AuditEntry {
        AuditEntry {
            session_id: session.map(|s| s.id.clone()),
            seq: session.map(|s| s.seq),
            tool,
            outcome,
            codes: Vec::new(),
            attestation_sha256: None,
            reports_sha256: None,
            principal: principal.map(|p| p.subject.clone()),
            organization: principal.and_then(|p| p.organization.clone()),
            workflow: session.map(|s| WorkflowRef {
                id: s.workflow.to_string(),
                version: s.workflow_version.to_string(),
            }),
            judgement: None,
            checks: Vec::new(),
            decision: None,
            at: now_rfc3339(),
        }
    }

    /// The refusal of a call, and its audit entry.
    pub(super) fn rejection(
        &self,
        tool: Operation,
        session: Option<&Session>,
        failures: Vec<Failure>,
        principal: Option<&Principal>,
        evidence: Evidence,
    ) -> (Rejected, AuditEntry) {
        let mut audit = self.audit(tool, session, Outcome::Rejected, principal);
        audit.codes = failures.iter().map(|f| f.code).collect();
        evidence.apply(&mut audit);
        (Rejected::new(failures), audit)
    }

    /// Audits and returns the refusal of a call.
    pub(super) async fn reject(
        &self,
        tool: Operation,
        session: Option<&Session>,
        failures: Vec<Failure>,
        principal: Option<&Principal>,
        evidence: Evidence,
    ) -> Result<Rejected, EngineError> {
        let (rejected, audit) = self.rejection(tool, session, failures, principal, evidence);
        self.store
            .append_audit(&audit)
            .instrument(self.store_span("append_audit"))
            .await?;
        Ok(rejected)
    }
}

/// Digests of submitted evidence, recorded in the audit log.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Evidence {
    None,
    Attestation(Sha256Digest),
    Reports(Sha256Digest),
}

impl Evidence {
    /// The sha256 of a value's canonical JSON.
    pub(super) fn digest(value: &impl Serialize) -> Sha256Digest {
        Sha256Digest::of(&to_canonical_bytes(value).expect("requests serialize"))
    }

    /// The record of the request behind a change, by which its identical retry is known.
    pub(super) fn fingerprint(tool: RequestTool, req: &impl Serialize) -> LastRequest {
        LastRequest {
            tool,
            request_sha256: Self::digest(req),
        }
    }

    /// A preparation's fingerprint and the digest of its attestation (the host's, else the
    /// outputs'), from one canonical form of the request: the attestation's is a slice of it.
    pub(super) fn of_preparation(req: &PrepareRequest) -> (LastRequest, Self) {
        let (bytes, [host, outputs]) =
            to_canonical_bytes_with_members(req, ["host_attestation", "output_attestation"])
                .expect("requests serialize");
        let evidence = match host.or(outputs) {
            Some(range) => Evidence::Attestation(Sha256Digest::of(&bytes[range])),
            None => Evidence::None,
        };
        (Self::whole(RequestTool::Prepare, &bytes), evidence)
    }

    /// A submission's fingerprint and the digest of its reports, from one canonical form.
    pub(super) fn of_submission(req: &SubmitRequest) -> (LastRequest, Self) {
        let (bytes, [reports]) =
            to_canonical_bytes_with_members(req, ["reports"]).expect("requests serialize");
        let reports = reports.expect("a submission always has its reports");
        (
            Self::whole(RequestTool::Submit, &bytes),
            Evidence::Reports(Sha256Digest::of(&bytes[reports])),
        )
    }

    fn whole(tool: RequestTool, canonical: &[u8]) -> LastRequest {
        LastRequest {
            tool,
            request_sha256: Sha256Digest::of(canonical),
        }
    }

    pub(super) fn apply(self, audit: &mut AuditEntry) {
        match self {
            Evidence::None => {}
            Evidence::Attestation(d) => audit.attestation_sha256 = Some(d.to_string()),
            Evidence::Reports(d) => audit.reports_sha256 = Some(d.to_string()),
        }
    }
}

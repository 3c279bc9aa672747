//! Making the signed provenance statement of a completed session (`docs/operations/evidence.md`)
//! from the session, its pinned release and the chain entry of its completion; the shapes and
//! their signing and verification are `model/provenance.rs`.

use std::collections::BTreeMap;

use rimthan_registry::{Sha256Digest, to_canonical_bytes};

use crate::model::{
    audit::AuditCheck,
    chain::ChainLink,
    payload::SERVER_NAME,
    provenance::{
        ChainRef, Named, PREDICATE_TYPE, ReleaseRef, STATEMENT_TYPE, SessionPredicate, SignerRef,
        Statement, StepEvidence, Subject, ValidatorEvidence,
    },
    session::Session,
};

/// The facts of a completed session a statement is made from, beyond the session itself.
#[derive(Debug, Clone)]
pub struct StatementFacts {
    /// The pinned release's manifest digest.
    pub manifest_sha256: String,
    /// Whether the release is a draft, never published.
    pub draft: bool,
    /// The adapter's validator isolation.
    pub isolation: String,
    /// The step ids, in workflow order.
    pub steps: Vec<String>,
    /// The completing entry of the session's chain.
    pub completion: ChainLink,
    /// The key that signs, and where it is held (none for a statement shown unsigned).
    pub signer: Option<SignerRef>,
}

/// The statement of a completed session.
pub fn session_statement(session: &Session, facts: &StatementFacts) -> Statement {
    let subject = session
        .ledger
        .iter()
        .map(|(path, artifact)| Subject {
            name: path.clone(),
            digest: BTreeMap::from([("sha256".to_owned(), artifact.sha256.to_string())]),
        })
        .collect();
    let steps = facts
        .steps
        .iter()
        .map(|id| {
            let step = session.reports.keys().find(|s| s.as_str() == id);
            let validators = step
                .and_then(|s| session.reports.get(s))
                .map(|reports| {
                    reports
                        .iter()
                        .map(|r| ValidatorEvidence {
                            id: r.validator_id.clone(),
                            version: r.validator_version.clone(),
                            isolation: facts.isolation.clone(),
                            verdict: r.verdict,
                            report_sha256: Sha256Digest::of(
                                &to_canonical_bytes(r).expect("reports serialize"),
                            )
                            .to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let checks = session
                .report_rounds
                .iter()
                .find(|(s, _)| s.as_str() == id)
                .and_then(|(_, rounds)| rounds.last())
                .map(|round| round.checks.iter().map(AuditCheck::from).collect())
                .unwrap_or_default();
            let signed = session
                .signoffs
                .iter()
                .find(|(s, _)| s.as_str() == id)
                .map(|(_, signed)| signed.clone());
            StepEvidence {
                id: id.clone(),
                validators,
                checks,
                approvals: signed
                    .as_ref()
                    .map(|s| s.approvals.clone())
                    .unwrap_or_default(),
                waivers: signed.map(|s| s.waivers).unwrap_or_default(),
                timers: session
                    .timer_events
                    .iter()
                    .filter(|t| &t.step == id)
                    .cloned()
                    .collect(),
            }
        })
        .collect();
    let predicate = SessionPredicate {
        session: session.id.to_string(),
        workflow: Named {
            id: session.workflow.to_string(),
            version: session.workflow_version.to_string(),
        },
        release: ReleaseRef {
            id: session.release.to_string(),
            manifest_sha256: facts.manifest_sha256.clone(),
            draft: facts.draft,
        },
        harness: session.host.harness.as_str().to_owned(),
        adapter: Named {
            id: session.host.adapter.id.to_string(),
            version: session.host.adapter.version.to_string(),
        },
        host_attestation_sha256: session.host_attestation_sha256.map(|d| d.to_string()),
        steps,
        principal: session.principal.as_ref().map(|p| p.subject.clone()),
        organization: session
            .principal
            .as_ref()
            .and_then(|p| p.organization.clone()),
        started_at: session.created_at.clone(),
        completed_at: session.updated_at.clone(),
        audit_chain: ChainRef {
            chain: session.id.to_string(),
            index: facts.completion.index,
            sha256: facts.completion.sha256.clone(),
        },
        server: SERVER_NAME.to_owned(),
        signer: facts.signer.clone(),
    };
    Statement {
        statement_type: STATEMENT_TYPE.into(),
        subject,
        predicate_type: PREDICATE_TYPE.into(),
        predicate: serde_json::to_value(predicate).expect("predicates serialize"),
    }
}

/// The statement of a completed session from its pinned release: the facts the release holds
/// (manifest digest, the adapter's isolation, the steps) and the chain entry of its completion.
/// None when the release no longer holds the session's workflow or adapter.
pub fn statement_for(
    release: &rimthan_registry::VerifiedRelease,
    session: &Session,
    completion: ChainLink,
    signer: Option<SignerRef>,
) -> Option<Statement> {
    let workflow = release.workflow(&session.workflow, &session.workflow_version)?;
    let binding = &session.host.adapter;
    let adapter = release.asset(
        rimthan_registry::AssetKind::HostAdapter,
        &binding.id,
        &binding.version,
    )?;
    let contract = adapter.base().adapter_contract.as_ref()?;
    let facts = StatementFacts {
        manifest_sha256: release.manifest_sha256().to_string(),
        draft: release.is_draft(),
        isolation: contract.validator_isolation.as_str().to_owned(),
        steps: workflow
            .steps()
            .iter()
            .map(|s| s.doc().id.to_string())
            .collect(),
        completion,
        signer,
    };
    Some(session_statement(session, &facts))
}

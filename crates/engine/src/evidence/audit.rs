//! Verifying the audit chains a store holds (`docs/engine.md` §7.6): reads every chain (or one
//! session's) and its rows, and holds them to [`verify_chain`]; read-only.

use crate::{
    model::chain::{AuditVerification, BreakKind, ChainBreak, verify_chain},
    model::provenance::PublicKeys,
    model::session::SessionId,
    store::{Store, StoreError},
};

/// Walks every chain of the store, and names every unchained row written since chaining began
/// (an insertion); read-only.
pub async fn verify_audit(store: &dyn Store) -> Result<AuditVerification, StoreError> {
    let mut report = AuditVerification::default();
    for row in store.unchained_audit().await? {
        report.breaks.push(ChainBreak {
            chain: String::new(),
            session: row.session.clone(),
            entry: Some(row.id),
            index: None,
            kind: BreakKind::Inserted,
            detail: "the entry belongs to no chain, though it was written after chaining began"
                .into(),
        });
    }
    walk(store, None, &mut report).await?;
    Ok(report)
}

/// Walks one session's chain.
pub async fn verify_session_chain(
    store: &dyn Store,
    session: &SessionId,
) -> Result<AuditVerification, StoreError> {
    let mut report = AuditVerification::default();
    walk(store, Some(session.as_str()), &mut report).await?;
    Ok(report)
}

/// Walks every chain (or the one named) into `report`.
async fn walk(
    store: &dyn Store,
    chain: Option<&str>,
    report: &mut AuditVerification,
) -> Result<(), StoreError> {
    let keys = PublicKeys::from_files(&store.provenance_keys().await?);
    for head in store.audit_chains(chain).await? {
        let rows = store.chain_entries(&head.chain).await?;
        report.chains += 1;
        report.entries += rows.len() as u64;
        report.breaks.extend(verify_chain(&head, &rows, &keys));
    }
    Ok(())
}

//! Verifying the audit chains a store holds (`docs/engine.md` §7.6): reads every chain (or one
//! session's) and its rows, and holds them to [`verify_chain`]; read-only.

use crate::{
    model::chain::{AuditVerification, BreakKind, ChainBreak, verify_chain},
    model::provenance::PublicKeys,
    model::seal::{Sealed, chain_gone, check_sealed, replay},
    model::session::SessionId,
    store::{Store, StoreError},
};

/// Walks every chain of the store, and names every unchained row written since chaining began
/// (an insertion); read-only. Retention anchors are checked against the keys the store itself
/// lists, which whoever can write the store can add to: [`verify_audit_trusting`] takes them
/// from outside.
pub async fn verify_audit(store: &dyn Store) -> Result<AuditVerification, StoreError> {
    let keys = PublicKeys::from_files(&store.provenance_keys().await?);
    verify_audit_trusting(store, &keys).await
}

/// [`verify_audit`], with retention anchors checked against `keys` only (`audit verify --keys`).
pub async fn verify_audit_trusting(
    store: &dyn Store,
    keys: &PublicKeys,
) -> Result<AuditVerification, StoreError> {
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
    let (sealed, seal_breaks) = replay(&store.seals().await?, keys);
    report.seals = sealed.seals;
    report.last_seal = sealed.last_at.clone();
    report.breaks.extend(seal_breaks);
    walk(store, None, keys, Some(&sealed), &mut report).await?;
    Ok(report)
}

/// Walks one session's chain.
pub async fn verify_session_chain(
    store: &dyn Store,
    session: &SessionId,
) -> Result<AuditVerification, StoreError> {
    let mut report = AuditVerification::default();
    let keys = PublicKeys::from_files(&store.provenance_keys().await?);
    walk(store, Some(session.as_str()), &keys, None, &mut report).await?;
    Ok(report)
}

/// Walks every chain (or the one named) into `report`.
/// With `sealed`, each chain is also held to what its last seal recorded, and every sealed
/// chain the store no longer has is named.
async fn walk(
    store: &dyn Store,
    chain: Option<&str>,
    keys: &PublicKeys,
    sealed: Option<&Sealed>,
    report: &mut AuditVerification,
) -> Result<(), StoreError> {
    let mut unseen: std::collections::BTreeMap<&str, (u64, u64)> = sealed
        .map(|s| {
            s.heads
                .iter()
                .map(|(chain, (length, _, seq))| (chain.as_str(), (*length, *seq)))
                .collect()
        })
        .unwrap_or_default();
    for head in store.audit_chains(chain).await? {
        let rows = store.chain_entries(&head.chain).await?;
        report.chains += 1;
        report.entries += rows.len() as u64;
        report.breaks.extend(verify_chain(&head, &rows, keys));
        unseen.remove(head.chain.as_str());
        if let Some((length, digest, seq)) = sealed.and_then(|s| s.heads.get(&head.chain)) {
            report
                .breaks
                .extend(check_sealed(&head, &rows, (*length, digest, *seq)));
        }
    }
    report
        .breaks
        .extend(unseen.into_iter().map(|(chain, at)| chain_gone(chain, at)));
    Ok(())
}

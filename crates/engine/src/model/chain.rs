//! The hash-chained audit log (`docs/engine.md` §7.6): each entry carries the digest of the entry
//! before it in its chain, over a canonical encoding of the entry, so an entry edited, deleted,
//! inserted or reordered in the database breaks the chain where it happened.
//!
//! A chain is one session's entries (or, for a start refused before it had a session, the
//! refused starts of one UTC day): appends to different sessions never wait for each other, so
//! PostgreSQL replicas are not serialized on one row. Retention prunes a chain's oldest entries
//! and leaves a signed [`RetentionAnchor`] in their place, so the rest still verifies.
//!
//! Everything here is pure: the digests and [`verify_chain`] over rows already read. Walking a
//! store's chains is `evidence/audit.rs`.

use std::collections::BTreeMap;

use rimthan_registry::{Sha256Digest, to_canonical_bytes};
use serde::{Deserialize, Serialize};

use crate::{
    model::audit::AuditEntry,
    model::provenance::{ProvenanceKey, PublicKeys},
    model::session::SessionId,
};

/// The `prev` of a chain's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain an entry belongs to: its session, or the day of a start refused without one.
pub fn chain_of(entry: &AuditEntry) -> String {
    match &entry.session_id {
        Some(id) => id.as_str().to_owned(),
        None => format!("starts:{}", entry.at.get(..10).unwrap_or(&entry.at)),
    }
}

/// What an entry's digest covers: the entry as the log records it, and its place in its chain.
#[derive(Serialize)]
struct Linked<'a> {
    chain: &'a str,
    index: u64,
    prev: &'a str,
    entry: &'a AuditEntry,
}

/// The sha256 (hex) of an entry at `index` of `chain`, after the entry whose digest is `prev`:
/// over the canonical JSON of all four, so a change to any field changes it.
pub fn entry_digest(chain: &str, index: u64, prev: &str, entry: &AuditEntry) -> String {
    let linked = Linked {
        chain,
        index,
        prev,
        entry,
    };
    Sha256Digest::of(&to_canonical_bytes(&linked).expect("audit entries serialize")).to_string()
}

/// A chain's link: the index and digest of one of its entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    /// The entry's index in its chain, from 1.
    pub index: u64,
    /// Its digest.
    pub sha256: String,
}

/// What retention leaves of a chain's pruned start: the last pruned entry's index and digest,
/// signed with the provenance key, so the entries after it still verify and nobody can claim
/// a later prune than happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionAnchor {
    /// The chain.
    pub chain: String,
    /// The index of the last entry pruned.
    pub pruned_through: u64,
    /// Its digest.
    pub sha256: String,
    /// The retention cutoff that pruned it (RFC 3339).
    pub before: String,
    /// The provenance key that signed the anchor.
    pub key_id: String,
    /// The ed25519 signature over [`RetentionAnchor::signed_bytes`], hex.
    pub signature: String,
}

#[derive(Serialize)]
struct AnchorBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    chain: &'a str,
    pruned_through: u64,
    sha256: &'a str,
    before: &'a str,
}

impl RetentionAnchor {
    /// Signs an anchor.
    pub fn sign(
        key: &ProvenanceKey,
        chain: &str,
        pruned_through: u64,
        sha256: &str,
        before: &str,
    ) -> Self {
        let mut anchor = RetentionAnchor {
            chain: chain.to_owned(),
            pruned_through,
            sha256: sha256.to_owned(),
            before: before.to_owned(),
            key_id: key.key_id(),
            signature: String::new(),
        };
        anchor.signature = hex::encode(key.sign(&anchor.signed_bytes()));
        anchor
    }

    /// The bytes signed: the canonical JSON of the anchor without its key and signature.
    pub fn signed_bytes(&self) -> Vec<u8> {
        to_canonical_bytes(&AnchorBody {
            kind: "rimthan.audit.retention-anchor/v1",
            chain: &self.chain,
            pruned_through: self.pruned_through,
            sha256: &self.sha256,
            before: &self.before,
        })
        .expect("anchors serialize")
    }
}

/// A chain as its head row records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    /// The chain.
    pub chain: String,
    /// Its length and head digest; none when the head row is missing.
    pub head: Option<ChainLink>,
    /// The signed anchor retention left; none when nothing was pruned.
    pub anchor: Option<RetentionAnchor>,
    /// A stored anchor that does not parse.
    pub anchor_unreadable: bool,
}

/// One chained audit row as stored.
#[derive(Debug, Clone)]
pub struct StoredLink {
    /// The row id.
    pub id: i64,
    /// The session column (as stored; it may not parse).
    pub session: Option<String>,
    /// Index in the chain, as stored; none in a row inserted without one.
    pub index: Option<u64>,
    /// The recorded digest of the entry before.
    pub prev: Option<String>,
    /// The recorded digest of this entry.
    pub sha256: Option<String>,
    /// The entry its columns decode to, or why they do not.
    pub entry: Result<AuditEntry, String>,
}

/// How a chain is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakKind {
    /// An entry's content no longer has the digest it was written with, or no longer is the
    /// entry the next one was written after.
    Edited,
    /// An entry the chain had is gone.
    Deleted,
    /// An entry the chain never had is there.
    Inserted,
    /// An entry stands before one that was written before it.
    Reordered,
}

impl BreakKind {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakKind::Edited => "edited",
            BreakKind::Deleted => "deleted",
            BreakKind::Inserted => "inserted",
            BreakKind::Reordered => "reordered",
        }
    }
}

/// One break of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    /// The chain.
    pub chain: String,
    /// The session the chain is of, when it is a session's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The audit row concerned, when one is there to name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<i64>,
    /// The index in the chain concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// How it is broken.
    pub kind: BreakKind,
    /// What was found.
    pub detail: String,
}

/// What walking the chains found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuditVerification {
    /// Chains walked.
    pub chains: u64,
    /// Chained entries read.
    pub entries: u64,
    /// Every break, chain by chain.
    pub breaks: Vec<ChainBreak>,
    /// Seals over the chains' heads read (`model/seal.rs`).
    pub seals: u64,
    /// When the last seal was made: a deletion after it is named only where a chain shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seal: Option<String>,
}

impl AuditVerification {
    /// Whether every chain verifies.
    pub fn verified(&self) -> bool {
        self.breaks.is_empty()
    }
}

fn session_of(chain: &str) -> Option<String> {
    chain.parse::<SessionId>().ok().map(|s| s.to_string())
}

/// Walks one chain: its rows in id order, against its head row and anchor, with the keys that
/// may have signed the anchor.
pub fn verify_chain(head: &ChainHead, rows: &[StoredLink], keys: &PublicKeys) -> Vec<ChainBreak> {
    let chain = head.chain.as_str();
    let mut breaks = Vec::new();
    let mut broken = |entry: Option<i64>, index: Option<u64>, kind, detail: String| {
        breaks.push(ChainBreak {
            chain: chain.to_owned(),
            session: session_of(chain),
            entry,
            index,
            kind,
            detail,
        })
    };
    let mut start = (0u64, GENESIS.to_owned());
    if head.anchor_unreadable {
        broken(
            None,
            None,
            BreakKind::Edited,
            "the retention anchor does not parse".into(),
        );
    }
    if let Some(anchor) = &head.anchor {
        if anchor.chain != chain {
            broken(
                None,
                None,
                BreakKind::Edited,
                format!("the retention anchor names chain {:?}", anchor.chain),
            );
        } else if let Err(why) =
            keys.verify(&anchor.key_id, &anchor.signed_bytes(), &anchor.signature)
        {
            broken(
                None,
                Some(anchor.pruned_through),
                BreakKind::Edited,
                format!("the retention anchor's signature does not verify: {why}"),
            );
        }
        start = (anchor.pruned_through, anchor.sha256.clone());
    }
    // Rows retention left behind its anchor (written with a clock behind the others) are before
    // the verified part of the chain.
    let mut by_index: BTreeMap<u64, Vec<&StoredLink>> = BTreeMap::new();
    for row in rows {
        match row.index {
            Some(i) if i > start.0 => by_index.entry(i).or_default().push(row),
            Some(_) => {}
            None => broken(
                Some(row.id),
                None,
                BreakKind::Inserted,
                "the row names this chain but no place in it".into(),
            ),
        }
    }
    let recorded = head.head.as_ref().map_or(0, |h| h.index);
    let last = by_index
        .keys()
        .next_back()
        .copied()
        .unwrap_or(0)
        .max(recorded);
    if head.head.is_none() && !by_index.is_empty() {
        broken(
            None,
            None,
            BreakKind::Deleted,
            "the chain's head record is gone".into(),
        );
    }
    let mut prev: Option<String> = Some(start.1.clone());
    let mut last_id = i64::MIN;
    for index in start.0 + 1..=last {
        let Some(candidates) = by_index.get(&index) else {
            broken(
                None,
                Some(index),
                BreakKind::Deleted,
                format!("entry {index} of the chain is missing"),
            );
            prev = None;
            continue;
        };
        // Of two rows at one place, the one that links is the chain's; the other was inserted.
        let row = candidates
            .iter()
            .find(|r| r.prev.is_some() && r.prev == prev && intact(chain, r))
            .or_else(|| candidates.iter().find(|r| intact(chain, r)))
            .unwrap_or(&candidates[0]);
        for other in candidates.iter().filter(|r| r.id != row.id) {
            broken(
                Some(other.id),
                Some(index),
                BreakKind::Inserted,
                format!("a second entry at place {index} of the chain"),
            );
        }
        if !intact(chain, row) {
            let why = match &row.entry {
                Err(e) => e.clone(),
                Ok(_) => "its content does not have the digest it was written with".into(),
            };
            broken(Some(row.id), Some(index), BreakKind::Edited, why);
        } else if let Some(p) = &prev
            && row.prev.as_deref() != Some(p.as_str())
        {
            broken(
                Some(row.id),
                Some(index),
                BreakKind::Edited,
                "it was not written after the entry before it in the chain".into(),
            );
        }
        if index > recorded && head.head.is_some() {
            broken(
                Some(row.id),
                Some(index),
                BreakKind::Inserted,
                format!("the chain's head records {recorded} entries"),
            );
        }
        if row.id < last_id {
            broken(
                Some(row.id),
                Some(index),
                BreakKind::Reordered,
                format!("entry {index} is stored before entry {}", index - 1),
            );
        }
        last_id = row.id;
        prev = row.sha256.clone();
    }
    if let (Some(h), Some(p)) = (&head.head, &prev)
        && h.index == last
        && h.index > start.0
        && &h.sha256 != p
    {
        broken(
            None,
            Some(h.index),
            BreakKind::Edited,
            "the chain's last entry is not the head it recorded".into(),
        );
    }
    breaks
}

/// Whether a row's stored digest is the digest of its content at its place.
fn intact(chain: &str, row: &StoredLink) -> bool {
    match (&row.entry, row.index, &row.prev, &row.sha256) {
        (Ok(entry), Some(index), Some(prev), Some(sha256)) => {
            &entry_digest(chain, index, prev, entry) == sha256
        }
        _ => false,
    }
}

//! Seals over the audit chains' heads (`docs/engine.md` §7.6): what lets a verifier name a
//! deletion the chains alone cannot show.
//!
//! A chain proves every entry it still holds, but not that it still holds all it had: cut a
//! session's last entry and set its head row back, or delete a session's chain and head row
//! together, and what is left verifies. Certificate Transparency answers this with signed tree
//! heads; here the server periodically (and after each retention pass) signs a **seal**: the
//! length and head digest of every chain that changed since the seal before, numbered, and
//! linked to that seal by its digest. Replaying the seals in order gives, for every chain ever
//! sealed, the length and head it had at its last seal; a chain now shorter than that, with
//! another entry at that index, or gone, is a break, and so is a seal missing from the
//! sequence. What changed after the last seal is covered only by the chains themselves.
//!
//! Everything here is pure: signing, and [`replay`] over seals already read.

use std::collections::BTreeMap;

use rimthan_registry::{Sha256Digest, to_canonical_bytes};
use serde::{Deserialize, Serialize};

use crate::model::{
    chain::{BreakKind, ChainBreak, ChainHead, GENESIS, StoredLink},
    provenance::{ProvenanceKey, PublicKeys},
    session::SessionId,
};

/// The chain name breaks of the seal sequence itself are reported under.
pub const SEALS_CHAIN: &str = "seals";

/// One chain's length and head digest as a seal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedHead {
    /// The chain.
    pub chain: String,
    /// Its length.
    pub length: u64,
    /// The digest of its entry at `length`.
    pub head: String,
}

/// A signed record of the chains that changed since the seal before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// Its place in the sequence, from 1.
    pub seq: u64,
    /// The digest of the seal before it ([`Seal::digest`]); `GENESIS` for the first.
    pub previous: String,
    /// When it was made (RFC 3339, UTC).
    pub at: String,
    /// The chains that changed since the seal before, by name.
    pub heads: Vec<SealedHead>,
    /// The provenance key that signed it.
    pub key_id: String,
    /// The ed25519 signature over [`Seal::signed_bytes`], hex.
    pub signature: String,
}

#[derive(Serialize)]
struct SealBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    seq: u64,
    previous: &'a str,
    at: &'a str,
    heads: &'a [SealedHead],
}

impl Seal {
    /// Signs the seal `seq` after the seal whose digest is `previous`.
    pub fn sign(
        key: &ProvenanceKey,
        seq: u64,
        previous: &str,
        at: &str,
        heads: Vec<SealedHead>,
    ) -> Self {
        let mut seal = Seal {
            seq,
            previous: previous.to_owned(),
            at: at.to_owned(),
            heads,
            key_id: key.key_id(),
            signature: String::new(),
        };
        seal.signature = hex::encode(key.sign(&seal.signed_bytes()));
        seal
    }

    /// The bytes signed: the canonical JSON of the seal without its key and signature.
    pub fn signed_bytes(&self) -> Vec<u8> {
        to_canonical_bytes(&SealBody {
            kind: "rimthan.audit.seal/v1",
            seq: self.seq,
            previous: &self.previous,
            at: &self.at,
            heads: &self.heads,
        })
        .expect("seals serialize")
    }

    /// What the next seal names as `previous`.
    pub fn digest(&self) -> String {
        Sha256Digest::of(&self.signed_bytes()).to_string()
    }
}

/// What the seals say every sealed chain had, at its last seal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sealed {
    /// Chain → (length, head, the seal that recorded them).
    pub heads: BTreeMap<String, (u64, String, u64)>,
    /// How many seals were read.
    pub seals: u64,
    /// When the last was made.
    pub last_at: Option<String>,
}

/// Replays `seals` (in `seq` order) into what they say, naming each break of the sequence: a
/// seal whose signature no key in `keys` verifies (`edited`), one missing from the numbering or
/// not following the one before (`deleted`, or `edited` when it names another predecessor).
pub fn replay(seals: &[Seal], keys: &PublicKeys) -> (Sealed, Vec<ChainBreak>) {
    let mut sealed = Sealed::default();
    let mut breaks = Vec::new();
    let mut broken = |seq: u64, kind, detail: String| {
        breaks.push(ChainBreak {
            chain: SEALS_CHAIN.to_owned(),
            session: None,
            entry: None,
            index: Some(seq),
            kind,
            detail,
        })
    };
    let mut previous = (0u64, GENESIS.to_owned());
    for seal in seals {
        if let Err(why) = keys.verify(&seal.key_id, &seal.signed_bytes(), &seal.signature) {
            broken(
                seal.seq,
                BreakKind::Edited,
                format!("seal {}'s signature does not verify: {why}", seal.seq),
            );
        }
        if seal.seq != previous.0 + 1 {
            broken(
                seal.seq,
                BreakKind::Deleted,
                format!("seals {}..{} are gone", previous.0 + 1, seal.seq),
            );
        } else if seal.previous != previous.1 {
            broken(
                seal.seq,
                BreakKind::Edited,
                format!("seal {} does not follow the seal before it", seal.seq),
            );
        }
        for head in &seal.heads {
            sealed.heads.insert(
                head.chain.clone(),
                (head.length, head.head.clone(), seal.seq),
            );
        }
        previous = (seal.seq, seal.digest());
        sealed.seals += 1;
        sealed.last_at = Some(seal.at.clone());
    }
    (sealed, breaks)
}

/// Holds one chain, as stored, to what its last seal recorded: `(length, head, seal)`. The
/// entry at that index must still have that digest, or, where retention pruned through it, the
/// anchor must name it; a chain shorter than that lost entries after the seal.
pub fn check_sealed(
    head: &ChainHead,
    rows: &[StoredLink],
    (length, digest, seq): (u64, &str, u64),
) -> Option<ChainBreak> {
    let broken = |kind, detail: String| ChainBreak {
        chain: head.chain.clone(),
        session: session_of(&head.chain),
        entry: None,
        index: Some(length),
        kind,
        detail,
    };
    if let Some(row) = rows.iter().find(|r| r.index == Some(length)) {
        return (row.sha256.as_deref() != Some(digest)).then(|| ChainBreak {
            entry: Some(row.id),
            ..broken(
                BreakKind::Edited,
                format!("entry {length} is not the one seal {seq} recorded as the chain's head"),
            )
        });
    }
    match &head.anchor {
        Some(anchor) if anchor.pruned_through > length => None,
        Some(anchor) if anchor.pruned_through == length => (anchor.sha256 != digest).then(|| {
            broken(
                BreakKind::Edited,
                format!("the retention anchor names another entry {length} than seal {seq}"),
            )
        }),
        _ => Some(broken(
            BreakKind::Deleted,
            format!(
                "seal {seq} recorded {length} entries; the chain now ends before entry {length}"
            ),
        )),
    }
}

/// The break of a chain a seal recorded that the store no longer has at all.
pub fn chain_gone(chain: &str, (length, seq): (u64, u64)) -> ChainBreak {
    ChainBreak {
        chain: chain.to_owned(),
        session: session_of(chain),
        entry: None,
        index: Some(length),
        kind: BreakKind::Deleted,
        detail: format!(
            "seal {seq} recorded this chain with {length} entries; its entries and head row are gone"
        ),
    }
}

fn session_of(chain: &str) -> Option<String> {
    chain.parse::<SessionId>().ok().map(|s| s.to_string())
}

//! Checkpoint tokens: opaque to harnesses, authenticated with HMAC-SHA256 under a server
//! secret that replicas share (`docs/engine.md` §3).
//!
//! Form: `rc1.<session id>.<sequence>.<base64url mac>`, the MAC over
//! `rimthan-checkpoint/1\n<session id>\n<sequence>`. The version prefix lets the format change
//! without old tokens being misread.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::model::session::{Principal, SessionId};

const PREFIX: &str = "rc1";
const DOMAIN: &str = "rimthan-checkpoint/1";
const START_DOMAIN: &str = "rimthan-keyed-start/2";
/// The derivation of versions that keyed a start by the subject alone (`docs/engine.md` §3.2).
const SUBJECT_START_DOMAIN: &str = "rimthan-keyed-start/1";
/// Bytes of secret a checkpoint key needs at least.
pub const MIN_SECRET_BYTES: usize = 32;

/// The server secret that signs checkpoints.
#[derive(Clone)]
pub struct CheckpointKey(Vec<u8>);

impl std::fmt::Debug for CheckpointKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckpointKey(..)")
    }
}

/// A verified checkpoint: session and sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The session.
    pub session: SessionId,
    /// The sequence number it was issued at.
    pub seq: u64,
}

impl CheckpointKey {
    /// A key from secret bytes; `None` when shorter than [`MIN_SECRET_BYTES`].
    pub fn new(secret: Vec<u8>) -> Option<Self> {
        (secret.len() >= MIN_SECRET_BYTES).then_some(Self(secret))
    }

    /// Fresh random secret bytes for a new deployment.
    pub fn generate_secret() -> Vec<u8> {
        let mut secret = vec![0u8; MIN_SECRET_BYTES];
        getrandom::fill(&mut secret).expect("the operating system's random source works");
        secret
    }

    fn mac(&self, session: &SessionId, seq: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key size");
        mac.update(format!("{DOMAIN}\n{session}\n{seq}").as_bytes());
        mac
    }

    /// Issues the token for `session` at `seq`.
    pub fn issue(&self, session: &SessionId, seq: u64) -> String {
        let tag = self.mac(session, seq).finalize().into_bytes();
        format!("{PREFIX}.{session}.{seq}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// The session id a start with idempotency key `key` gets for `caller`'s tenant, its
    /// organization and subject (none without auth): a MAC, so only this server's key derives it.
    pub(crate) fn keyed_session(&self, caller: Option<&Principal>, key: &str) -> SessionId {
        // Compact JSON holds no raw newline and tells a missing organization from any name.
        let tenant = serde_json::to_string(&caller.map(|p| (&p.organization, &p.subject)))
            .expect("strings serialize");
        self.start_mac(START_DOMAIN, &tenant, key)
    }

    /// The id versions before the organization was the tenant derived for `caller` and `key`:
    /// from the subject alone (empty without auth).
    pub(crate) fn subject_keyed_session(&self, caller: Option<&Principal>, key: &str) -> SessionId {
        let owner = caller.map_or("", |p| p.subject.as_str());
        self.start_mac(
            SUBJECT_START_DOMAIN,
            &format!("{}\n{owner}", owner.len()),
            key,
        )
    }

    fn start_mac(&self, domain: &str, caller: &str, key: &str) -> SessionId {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key size");
        mac.update(format!("{domain}\n{caller}\n{key}").as_bytes());
        SessionId::from_mac(&mac.finalize().into_bytes())
    }

    /// Verifies a token; `None` for anything malformed or not signed with this key.
    pub fn verify(&self, token: &str) -> Option<Checkpoint> {
        let mut parts = token.split('.');
        let (Some(PREFIX), Some(session), Some(seq), Some(tag), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let session: SessionId = session.parse().ok()?;
        if seq.starts_with('+') || (seq.len() > 1 && seq.starts_with('0')) {
            return None;
        }
        let seq: u64 = seq.parse().ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(&session, seq).verify_slice(&tag).ok()?;
        Some(Checkpoint { session, seq })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key() -> CheckpointKey {
        CheckpointKey::new(vec![7; 32]).unwrap()
    }

    #[test]
    fn issued_tokens_verify_and_name_session_and_sequence() {
        let session = SessionId::generate();
        let token = key().issue(&session, 3);
        assert_eq!(key().verify(&token), Some(Checkpoint { session, seq: 3 }));
    }

    #[test]
    fn tokens_from_another_key_or_edited_do_not_verify() {
        let session = SessionId::generate();
        let token = key().issue(&session, 3);
        let other = CheckpointKey::new(vec![8; 32]).unwrap();
        assert_eq!(other.verify(&token), None);
        let bumped = token.replacen(".3.", ".4.", 1);
        assert_eq!(key().verify(&bumped), None);
        assert!(CheckpointKey::new(vec![1; 31]).is_none());
    }

    #[test]
    fn keyed_starts_derive_one_id_per_organization_and_subject() {
        let who = |subject: &str, organization: Option<&str>| Principal {
            subject: subject.into(),
            organization: organization.map(str::to_owned),
        };
        let callers = [
            None,
            Some(who("ada", None)),
            Some(who("ada", Some("lab"))),
            Some(who("ada", Some("field"))),
            Some(who("lab", Some("ada"))),
            Some(who("grace", Some("lab"))),
        ];
        let ids: std::collections::BTreeSet<_> = callers
            .iter()
            .map(|c| key().keyed_session(c.as_ref(), "run-1"))
            .collect();
        assert_eq!(ids.len(), callers.len());
        let ada = who("ada", Some("lab"));
        // What versions keying by the subject alone derived, so their sessions are found.
        assert_eq!(
            key()
                .subject_keyed_session(Some(&ada), "harness-run-legacy")
                .as_str(),
            "09e8646f7b6ce99e098ab50c3927c49c"
        );
    }

    proptest! {
        #[test]
        fn no_string_but_an_issued_token_verifies(s in "rc1\\.[a-f0-9]{0,40}\\.[0-9]{0,4}\\.[A-Za-z0-9_-]{0,50}|.{0,120}") {
            prop_assert_eq!(key().verify(&s), None);
        }

        #[test]
        fn any_single_character_change_is_rejected(seq in 0u64..1000, pos in any::<prop::sample::Index>(), c in "[a-z0-9._-]") {
            let token = key().issue(&SessionId::generate(), seq);
            let i = pos.index(token.len());
            let mut edited = token.clone();
            edited.replace_range(i..i + 1, &c);
            if edited != token {
                prop_assert_eq!(key().verify(&edited), None);
            }
        }
    }
}

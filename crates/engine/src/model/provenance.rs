//! The signed provenance statement of a completed session (`docs/operations/evidence.md`): an
//! in-toto Statement v1 whose subjects are the accepted outputs and whose predicate says what
//! checked them, by what, against which release, wrapped in a DSSE envelope signed with the
//! server's ed25519 provenance key. Anyone holding the published public keys verifies it
//! offline; a DSSE library written by others accepts it too (`e2e/python`).
//!
//! Here are the shapes, the keys, signing and verification; making a session's statement from
//! the session and its release is `evidence/statement.rs`.

use std::collections::BTreeMap;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use rimthan_registry::to_canonical_bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{model::audit::AuditCheck, model::request::Verdict};

mod keys;
mod verify;

pub use keys::{KeyCustody, KeysDocument, ProvenanceKey, PublicKeys};
pub use verify::{EnvelopeFailure, SubjectFailure, check_subjects, verify_envelope};

/// The DSSE payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of a rimthan session.
pub const PREDICATE_TYPE: &str = "https://rimthan.dev/provenance/session/v1";
/// Where the harness keeps the statement, beside the session file.
pub const STATEMENT_PATH: &str = ".rimthan/workflow-session.intoto.json";
/// The largest envelope or keys file `provenance verify` reads.
pub const MAX_ENVELOPE_BYTES: u64 = 4 << 20;

/// DSSE's pre-authentication encoding of a payload: what is signed.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A DSSE envelope (`https://github.com/secure-systems-lab/dsse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "ProvenanceEnvelope")]
pub struct Envelope {
    /// The in-toto statement's canonical JSON, base64.
    pub payload: String,
    /// Always `application/vnd.in-toto+json`.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// The ed25519 signatures over the DSSE pre-authentication encoding.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "ProvenanceSignature")]
pub struct EnvelopeSignature {
    /// The provenance key's id, as published.
    pub keyid: String,
    /// The signature, base64.
    pub sig: String,
}

/// An in-toto Statement v1 about a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    /// [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The accepted outputs.
    pub subject: Vec<Subject>,
    /// [`PREDICATE_TYPE`].
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// What happened to them.
    pub predicate: serde_json::Value,
}

/// A subject: an output by path and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// The project-relative path.
    pub name: String,
    /// `{"sha256": hex}`.
    pub digest: BTreeMap<String, String>,
}

/// The predicate of a session statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionPredicate {
    /// The session id.
    pub session: String,
    /// The workflow and its version.
    pub workflow: Named,
    /// The release it ran against.
    pub release: ReleaseRef,
    /// The harness.
    pub harness: String,
    /// The bound host adapter.
    pub adapter: Named,
    /// sha256 of the canonical host attestation the setup step accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_attestation_sha256: Option<String>,
    /// Each step, in workflow order.
    pub steps: Vec<StepEvidence>,
    /// The principal that started it, when auth is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// Their organization.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// RFC 3339 time it started.
    pub started_at: String,
    /// RFC 3339 time it completed.
    pub completed_at: String,
    /// The entry of the session's audit chain that records the completion.
    pub audit_chain: ChainRef,
    /// The server that signed.
    pub server: String,
    /// The key that signed, and where it is held: `store` means whoever could read the server's
    /// database could have signed this too. Absent only from a statement shown unsigned (`rimthan
    /// sessions show` reads the store, not the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<SignerRef>,
}

/// The signing key of a statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignerRef {
    /// Its key id.
    pub key_id: String,
    /// Where it is held.
    pub custody: KeyCustody,
}

/// An id and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Named {
    /// The id.
    pub id: String,
    /// The version.
    pub version: String,
}

/// A release by id and manifest digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseRef {
    /// The release id.
    pub id: String,
    /// sha256 of its signed manifest.
    pub manifest_sha256: String,
    /// A draft (`registry build --draft`): never published, its id may name other bytes
    /// tomorrow; the manifest digest alone fixes what ran. Absent for a published release.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draft: bool,
}

/// An audit chain's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainRef {
    /// The chain (the session id).
    pub chain: String,
    /// The entry's index.
    pub index: u64,
    /// Its digest.
    pub sha256: String,
}

/// What checked one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepEvidence {
    /// The step id.
    pub id: String,
    /// Its validators' reports that passed it.
    pub validators: Vec<ValidatorEvidence>,
    /// Its deterministic checks on the outputs that passed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<AuditCheck>,
    /// Who signed it off, when its approval asked for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::model::approval::Signoff>,
    /// The failed check findings an approver waived, each with its reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waivers: Vec<crate::model::approval::Waiver>,
    /// The reminders and expiries of its sign-off and deadline that fired, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<crate::model::session::TimerEvent>,
}

/// One validator's report on a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidatorEvidence {
    /// Validator id.
    pub id: String,
    /// Its version.
    pub version: String,
    /// `host-enforced` or `instructed`.
    pub isolation: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// sha256 of the canonical report.
    pub report_sha256: String,
}

/// Signs a statement into a DSSE envelope; the payload is the statement's canonical JSON, so
/// the same statement and key give the same envelope.
pub fn sign_statement(statement: &Statement, key: &ProvenanceKey) -> Envelope {
    let payload = to_canonical_bytes(statement).expect("statements serialize");
    let signature = key.sign(&pae(PAYLOAD_TYPE, &payload));
    Envelope {
        payload: STANDARD.encode(&payload),
        payload_type: PAYLOAD_TYPE.into(),
        signatures: vec![EnvelopeSignature {
            keyid: key.key_id(),
            sig: STANDARD.encode(signature),
        }],
    }
}

/// The file a harness writes: the envelope as pretty JSON with a final newline.
pub fn envelope_file(envelope: &Envelope) -> String {
    let mut text = serde_json::to_string_pretty(envelope).expect("envelopes serialize");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement() -> Statement {
        Statement {
            statement_type: STATEMENT_TYPE.into(),
            subject: vec![Subject {
                name: "out/report.md".into(),
                digest: BTreeMap::from([("sha256".into(), "ab".repeat(32))]),
            }],
            predicate_type: PREDICATE_TYPE.into(),
            predicate: serde_json::json!({"session": "s"}),
        }
    }

    #[test]
    fn pae_is_the_dsse_v1_encoding() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }

    #[test]
    fn each_way_an_envelope_is_wrong_has_its_own_failure() {
        let ours = ProvenanceKey::from_seed(&[1; 32]).unwrap();
        let other = ProvenanceKey::from_seed(&[2; 32]).unwrap();
        let keys = PublicKeys::from_files(&[ours.public_key_file()]);
        let envelope = sign_statement(&statement(), &ours);
        let bytes = |e: &Envelope| serde_json::to_vec(e).unwrap();
        assert_eq!(verify_envelope(&bytes(&envelope), &keys), Ok(statement()));

        // Re-signed by another key that claims the published id.
        let mut claimed = sign_statement(&statement(), &other);
        claimed.signatures[0].keyid = ours.key_id();
        assert_eq!(
            verify_envelope(&bytes(&claimed), &keys),
            Err(EnvelopeFailure::SignatureInvalid)
        );
        // Re-signed by a key nobody published.
        let unknown = sign_statement(&statement(), &other);
        assert_eq!(
            verify_envelope(&bytes(&unknown), &keys),
            Err(EnvelopeFailure::UnknownKeyId)
        );
        // Another payload type, even correctly signed for it.
        let mut typed = envelope.clone();
        typed.payload_type = "application/json".into();
        assert_eq!(
            verify_envelope(&bytes(&typed), &keys),
            Err(EnvelopeFailure::WrongPayloadType)
        );
        assert_eq!(
            verify_envelope(b"{\"payload\": 1}", &keys),
            Err(EnvelopeFailure::MalformedEnvelope)
        );
        // A good signature beside a forged one does not carry it.
        let mut both = envelope.clone();
        both.signatures.push(claimed.signatures[0].clone());
        assert_eq!(
            verify_envelope(&bytes(&both), &keys),
            Err(EnvelopeFailure::SignatureInvalid)
        );
    }

    #[test]
    fn a_key_file_whose_id_is_not_its_key_verifies_nothing() {
        let ours = ProvenanceKey::from_seed(&[1; 32]).unwrap();
        let mut file = ours.public_key_file();
        file.key_id = ProvenanceKey::from_seed(&[2; 32])
            .unwrap()
            .public_key_file()
            .key_id;
        assert!(PublicKeys::from_files(&[file]).is_empty());
    }
}

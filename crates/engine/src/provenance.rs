//! The signed provenance statement of a completed session (`docs/operations/evidence.md`): an
//! in-toto Statement v1 whose subjects are the accepted outputs and whose predicate says what
//! checked them, by what, against which release, wrapped in a DSSE envelope signed with the
//! server's ed25519 provenance key. Anyone holding the published public keys verifies it
//! offline; a DSSE library written by others accepts it too (`e2e/python`).

use std::{collections::BTreeMap, fmt, path::Path, sync::Arc};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use ed25519_dalek::{Signer as _, Verifier as _};
use rimthan_registry::{PublicKeyFile, Sha256Digest, SigningKeyFile, to_canonical_bytes};
use serde::{Deserialize, Serialize};

use crate::{audit::AuditCheck, chain::ChainLink, request::Verdict, session::Session};

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

/// The server's provenance signing key.
#[derive(Clone)]
pub struct ProvenanceKey(Arc<ed25519_dalek::SigningKey>);

impl fmt::Debug for ProvenanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProvenanceKey({})", self.key_id())
    }
}

fn key_id_of(key: &ed25519_dalek::VerifyingKey) -> String {
    Sha256Digest::of(key.as_bytes()).to_string()[..16].to_owned()
}

impl ProvenanceKey {
    /// A fresh 32-byte seed from the operating system's random source.
    pub fn generate_seed() -> Vec<u8> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).expect("the operating system's random source works");
        seed.to_vec()
    }

    /// The key of a 32-byte seed.
    pub fn from_seed(seed: &[u8]) -> Option<Self> {
        let seed: [u8; 32] = seed.try_into().ok()?;
        Some(Self(Arc::new(ed25519_dalek::SigningKey::from_bytes(&seed))))
    }

    /// The key a key file holds (the form `rimthan registry keygen` writes), checking that its
    /// id matches the key.
    pub fn from_file(file: &SigningKeyFile) -> Result<Self, String> {
        if file.algorithm != "ed25519" {
            return Err(format!("algorithm {:?} is not ed25519", file.algorithm));
        }
        let mut seed = [0u8; 32];
        hex::decode_to_slice(&file.secret_key, &mut seed)
            .map_err(|_| "secret_key is not 64 hex digits".to_owned())?;
        let key = Self::from_seed(&seed).expect("32 bytes");
        if key.key_id() != file.key_id.as_str() {
            return Err(format!(
                "key_id {} does not match the key (its id is {})",
                file.key_id,
                key.key_id()
            ));
        }
        Ok(key)
    }

    /// The key id: the first 16 hex digits of the public key's sha256.
    pub fn key_id(&self) -> String {
        key_id_of(&self.0.verifying_key())
    }

    /// The public half, as published.
    pub fn public_key_file(&self) -> PublicKeyFile {
        PublicKeyFile {
            algorithm: "ed25519".into(),
            key_id: self.key_id().parse().expect("derived ids are key ids"),
            public_key: hex::encode(self.0.verifying_key().as_bytes()),
        }
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.0.sign(message).to_bytes().to_vec()
    }
}

/// The published public keys: `GET /.well-known/rimthan/provenance-keys.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysDocument {
    /// Every key the server signed with, current and rotated, by id.
    pub keys: Vec<PublicKeyFile>,
}

/// Public keys a verifier trusts, by id.
#[derive(Debug, Clone, Default)]
pub struct PublicKeys(BTreeMap<String, ed25519_dalek::VerifyingKey>);

impl PublicKeys {
    /// The usable keys of `files`: a file with another algorithm, a bad key or an id that is
    /// not its key's is left out, so it verifies nothing.
    pub fn from_files(files: &[PublicKeyFile]) -> Self {
        let mut keys = BTreeMap::new();
        for file in files.iter().filter(|f| f.algorithm == "ed25519") {
            let mut raw = [0u8; 32];
            if hex::decode_to_slice(&file.public_key, &mut raw).is_err() {
                continue;
            }
            if let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&raw)
                && key_id_of(&key) == file.key_id.as_str()
            {
                keys.insert(file.key_id.to_string(), key);
            }
        }
        Self(keys)
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks a hex signature of `message` by the key `key_id`.
    pub fn verify(&self, key_id: &str, message: &[u8], signature_hex: &str) -> Result<(), String> {
        let mut raw = [0u8; 64];
        hex::decode_to_slice(signature_hex, &mut raw)
            .map_err(|_| "the signature is not 128 hex digits".to_owned())?;
        self.verify_raw(key_id, message, &raw)
            .map_err(|f| f.to_string())
    }

    fn verify_raw(&self, key_id: &str, message: &[u8], raw: &[u8]) -> Result<(), Failure> {
        let key = self.0.get(key_id).ok_or(Failure::UnknownKeyId)?;
        let signature =
            ed25519_dalek::Signature::from_slice(raw).map_err(|_| Failure::SignatureInvalid)?;
        key.verify(message, &signature)
            .map_err(|_| Failure::SignatureInvalid)
    }
}

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

/// A DSSE envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The payload, base64.
    pub payload: String,
    /// Its type.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// Its signatures.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    /// The signing key's id.
    pub keyid: String,
    /// The ed25519 signature over the PAE, base64.
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

/// The facts of a completed session a statement is made from, beyond the session itself.
#[derive(Debug, Clone)]
pub struct StatementFacts {
    /// The pinned release's manifest digest.
    pub manifest_sha256: String,
    /// The adapter's validator isolation.
    pub isolation: String,
    /// The step ids, in workflow order.
    pub steps: Vec<String>,
    /// The completing entry of the session's chain.
    pub completion: ChainLink,
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
            StepEvidence {
                id: id.clone(),
                validators,
                checks,
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
        server: crate::SERVER_NAME.to_owned(),
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
        isolation: contract.validator_isolation.as_str().to_owned(),
        steps: workflow
            .steps()
            .iter()
            .map(|s| s.doc().id.to_string())
            .collect(),
        completion,
    };
    Some(session_statement(session, &facts))
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

/// Why `provenance verify` refuses an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The file is not a DSSE envelope, or its payload not an in-toto statement.
    #[error("malformed_envelope")]
    MalformedEnvelope,
    /// The envelope's payload type is not an in-toto statement's.
    #[error("wrong_payload_type")]
    WrongPayloadType,
    /// No signature is by a published key.
    #[error("unknown_key_id")]
    UnknownKeyId,
    /// A published key's signature does not match the payload (forged or altered, or
    /// re-signed by another key claiming the id).
    #[error("signature_invalid")]
    SignatureInvalid,
    /// A subject's file differs from the digest the statement records.
    #[error("subject_changed")]
    SubjectChanged,
    /// A subject's file is not in the project.
    #[error("subject_missing")]
    SubjectMissing,
}

impl Failure {
    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Failure::MalformedEnvelope => "malformed_envelope",
            Failure::WrongPayloadType => "wrong_payload_type",
            Failure::UnknownKeyId => "unknown_key_id",
            Failure::SignatureInvalid => "signature_invalid",
            Failure::SubjectChanged => "subject_changed",
            Failure::SubjectMissing => "subject_missing",
        }
    }
}

/// Verifies an envelope's signature against `keys` and returns its statement. A signature by
/// a published key decides; one by an unknown key only when no published key signed.
pub fn verify_envelope(bytes: &[u8], keys: &PublicKeys) -> Result<Statement, Failure> {
    let envelope: Envelope =
        serde_json::from_slice(bytes).map_err(|_| Failure::MalformedEnvelope)?;
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(Failure::WrongPayloadType);
    }
    let payload = STANDARD
        .decode(&envelope.payload)
        .map_err(|_| Failure::MalformedEnvelope)?;
    let signed = pae(&envelope.payload_type, &payload);
    let mut failure = Failure::UnknownKeyId;
    let mut verified = false;
    for signature in &envelope.signatures {
        let raw = STANDARD
            .decode(&signature.sig)
            .map_err(|_| Failure::MalformedEnvelope)?;
        match keys.verify_raw(&signature.keyid, &signed, &raw) {
            Ok(()) => verified = true,
            Err(Failure::SignatureInvalid) => failure = Failure::SignatureInvalid,
            Err(_) => {}
        }
    }
    if !verified || failure == Failure::SignatureInvalid {
        return Err(failure);
    }
    let statement: Statement =
        serde_json::from_slice(&payload).map_err(|_| Failure::MalformedEnvelope)?;
    if statement.statement_type != STATEMENT_TYPE {
        return Err(Failure::MalformedEnvelope);
    }
    Ok(statement)
}

/// A subject whose file is not what the statement says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubjectFailure {
    /// The subject's path.
    pub path: String,
    /// `subject_changed` or `subject_missing`.
    pub failure: Failure,
    /// The file's sha256 now, when it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Re-hashes every subject under `project`: the ones that differ. A subject whose name leaves
/// the project (absolute, or with `..`) counts as missing.
pub fn check_subjects(statement: &Statement, project: &Path) -> Vec<SubjectFailure> {
    let mut failures = Vec::new();
    for subject in &statement.subject {
        let relative = Path::new(&subject.name);
        let inside = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        let read = inside
            .then(|| std::fs::read(project.join(relative)).ok())
            .flatten();
        match read {
            None => failures.push(SubjectFailure {
                path: subject.name.clone(),
                failure: Failure::SubjectMissing,
                sha256: None,
            }),
            Some(bytes) => {
                let now = Sha256Digest::of(&bytes).to_string();
                if subject.digest.get("sha256") != Some(&now) {
                    failures.push(SubjectFailure {
                        path: subject.name.clone(),
                        failure: Failure::SubjectChanged,
                        sha256: Some(now),
                    });
                }
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement() -> Statement {
        Statement {
            statement_type: STATEMENT_TYPE.into(),
            subject: vec![Subject {
                name: "research/question.md".into(),
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
            Err(Failure::SignatureInvalid)
        );
        // Re-signed by a key nobody published.
        let unknown = sign_statement(&statement(), &other);
        assert_eq!(
            verify_envelope(&bytes(&unknown), &keys),
            Err(Failure::UnknownKeyId)
        );
        // Another payload type, even correctly signed for it.
        let mut typed = envelope.clone();
        typed.payload_type = "application/json".into();
        assert_eq!(
            verify_envelope(&bytes(&typed), &keys),
            Err(Failure::WrongPayloadType)
        );
        assert_eq!(
            verify_envelope(b"{\"payload\": 1}", &keys),
            Err(Failure::MalformedEnvelope)
        );
        // A good signature beside a forged one does not carry it.
        let mut both = envelope.clone();
        both.signatures.push(claimed.signatures[0].clone());
        assert_eq!(
            verify_envelope(&bytes(&both), &keys),
            Err(Failure::SignatureInvalid)
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

//! Verifying a statement offline: the DSSE signature against the published keys, then each
//! subject against the project's files (`rimthan provenance verify`).

use std::path::Path;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use rimthan_registry::Sha256Digest;
use serde::Serialize;

use super::{Envelope, PAYLOAD_TYPE, PublicKeys, STATEMENT_TYPE, Statement, pae};

/// Why `provenance verify` refuses an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeFailure {
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
    /// A subject's path is not a regular file inside the project: a symlink on the way, a
    /// FIFO, a device, a folder, or more bytes than any output may have.
    #[error("subject_unreadable")]
    SubjectUnreadable,
}

impl EnvelopeFailure {
    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            EnvelopeFailure::MalformedEnvelope => "malformed_envelope",
            EnvelopeFailure::WrongPayloadType => "wrong_payload_type",
            EnvelopeFailure::UnknownKeyId => "unknown_key_id",
            EnvelopeFailure::SignatureInvalid => "signature_invalid",
            EnvelopeFailure::SubjectChanged => "subject_changed",
            EnvelopeFailure::SubjectMissing => "subject_missing",
            EnvelopeFailure::SubjectUnreadable => "subject_unreadable",
        }
    }
}

/// Verifies an envelope's signature against `keys` and returns its statement. A signature by
/// a published key decides; one by an unknown key only when no published key signed.
pub fn verify_envelope(bytes: &[u8], keys: &PublicKeys) -> Result<Statement, EnvelopeFailure> {
    let envelope: Envelope =
        serde_json::from_slice(bytes).map_err(|_| EnvelopeFailure::MalformedEnvelope)?;
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(EnvelopeFailure::WrongPayloadType);
    }
    let payload = STANDARD
        .decode(&envelope.payload)
        .map_err(|_| EnvelopeFailure::MalformedEnvelope)?;
    let signed = pae(&envelope.payload_type, &payload);
    let mut failure = EnvelopeFailure::UnknownKeyId;
    let mut verified = false;
    for signature in &envelope.signatures {
        let raw = STANDARD
            .decode(&signature.sig)
            .map_err(|_| EnvelopeFailure::MalformedEnvelope)?;
        match keys.verify_raw(&signature.keyid, &signed, &raw) {
            Ok(()) => verified = true,
            Err(EnvelopeFailure::SignatureInvalid) => failure = EnvelopeFailure::SignatureInvalid,
            Err(_) => {}
        }
    }
    if !verified || failure == EnvelopeFailure::SignatureInvalid {
        return Err(failure);
    }
    let statement: Statement =
        serde_json::from_slice(&payload).map_err(|_| EnvelopeFailure::MalformedEnvelope)?;
    if statement.statement_type != STATEMENT_TYPE {
        return Err(EnvelopeFailure::MalformedEnvelope);
    }
    Ok(statement)
}

/// A subject whose file is not what the statement says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubjectFailure {
    /// The subject's path.
    pub path: String,
    /// `subject_changed` or `subject_missing`.
    pub failure: EnvelopeFailure,
    /// The file's sha256 now, when it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Re-hashes every subject under `project`: the ones that differ. A subject whose name leaves
/// the project (absolute, or with `..`) counts as missing.
pub fn check_subjects(statement: &Statement, project: &Path) -> Vec<SubjectFailure> {
    let mut failures = Vec::new();
    for subject in &statement.subject {
        let failure = |failure, sha256| SubjectFailure {
            path: subject.name.clone(),
            failure,
            sha256,
        };
        match read_subject(project, &subject.name) {
            Err(kind) => failures.push(failure(kind, None)),
            Ok(bytes) => {
                let now = Sha256Digest::of(&bytes).to_string();
                if subject.digest.get("sha256") != Some(&now) {
                    failures.push(failure(EnvelopeFailure::SubjectChanged, Some(now)));
                }
            }
        }
    }
    failures
}

/// The most bytes of a subject read: the largest output a release may declare.
pub(crate) const MAX_SUBJECT_BYTES: u64 = 16 << 20;

/// A subject's bytes, read as the registry reads its own files: every folder on the way is a
/// folder inside `project` (no symlink out of it), and the file a regular file of at most
/// `MAX_SUBJECT_BYTES`, opened without following a symlink or waiting on a FIFO.
fn read_subject(project: &Path, name: &str) -> Result<Vec<u8>, EnvelopeFailure> {
    let relative = Path::new(name);
    let inside = relative
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        return Err(EnvelopeFailure::SubjectMissing);
    }
    let mut path = project.to_path_buf();
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        path.push(component);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(EnvelopeFailure::SubjectMissing);
            }
            Err(_) => return Err(EnvelopeFailure::SubjectUnreadable),
        };
        let last = components.peek().is_none();
        if meta.file_type().is_symlink() || (!last && !meta.is_dir()) {
            return Err(EnvelopeFailure::SubjectUnreadable);
        }
    }
    rimthan_registry::read_regular_file(&path, MAX_SUBJECT_BYTES)
        .map_err(|_| EnvelopeFailure::SubjectUnreadable)
}

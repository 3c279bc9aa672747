//! Authentication: the manifest's digest or signature, then every entry's bytes against it.
//! The only place a [`VerifiedRelease`] is built; nothing is parsed before its bytes are
//! authenticated.

use std::{collections::BTreeMap, sync::Arc};

use crate::{
    canonical::is_canonical,
    digest::Sha256Digest,
    error::RegistryError,
    files::{MAX_FILE_BYTES, RegistryFiles},
    ids::ReleaseId,
    model::{Entry, EntryKind, MANIFEST_FORMAT, Manifest},
    path::check_relative_path,
    release::{TrustAnchor, VerifiedRelease},
    signature::{SignatureCheck, SignatureFile, TrustedKeys},
};

use super::{TrustPolicy, load::Structure};

/// Verifies one release.
pub(crate) fn verify_release(
    files: &RegistryFiles,
    id: &ReleaseId,
    keys: &TrustedKeys,
    policy: &TrustPolicy,
) -> Result<VerifiedRelease, RegistryError> {
    let base = format!("releases/{id}/");
    let manifest_path = format!("{base}manifest.json");
    let sig_path = format!("{base}manifest.sig");
    let manifest_bytes =
        files
            .get(&manifest_path)
            .cloned()
            .ok_or_else(|| RegistryError::ManifestInvalid {
                file: manifest_path.clone(),
                reason: "missing".into(),
            })?;
    let manifest_sha256 = Sha256Digest::of(&manifest_bytes);

    // Authenticate the manifest bytes before parsing anything they say.
    let signature = read_signature(files, &sig_path)?;
    let anchor = match policy {
        TrustPolicy::Pinned(pins) => {
            let expected = pins.get(id).ok_or_else(|| RegistryError::ManifestInvalid {
                file: manifest_path.clone(),
                reason: "this release is not pinned by the binary; an embedded registry holds \
                         only the releases it was built with"
                    .into(),
            })?;
            if *expected != manifest_sha256 {
                return Err(RegistryError::ManifestDigestMismatch {
                    file: manifest_path,
                    expected: expected.to_string(),
                    actual: manifest_sha256.to_string(),
                });
            }
            TrustAnchor::PinnedDigest
        }
        TrustPolicy::RegistryKeys { refused } => {
            if signature.key_id == *refused {
                return Err(RegistryError::UntrustedSigningKey {
                    file: sig_path,
                    key_id: signature.key_id.to_string(),
                });
            }
            TrustAnchor::Signature
        }
    };
    match keys.check(&manifest_bytes, &signature) {
        SignatureCheck::Valid => {}
        SignatureCheck::UnknownKey => {
            return Err(RegistryError::UnknownSigningKey {
                file: sig_path,
                key_id: signature.key_id.to_string(),
            });
        }
        SignatureCheck::Invalid => {
            return Err(RegistryError::SignatureInvalid {
                file: sig_path,
                key_id: signature.key_id.to_string(),
            });
        }
    }

    let manifest = parse_manifest(&manifest_path, &manifest_bytes, id)?;
    let contents = check_entry_bytes(files, &base, &manifest)?;
    let mut release = VerifiedRelease {
        id: id.clone(),
        manifest,
        manifest_bytes,
        manifest_sha256,
        key_id: signature.key_id,
        anchor,
        contents,
        workflows: BTreeMap::new(),
        validators: BTreeMap::new(),
        assets: BTreeMap::new(),
        schemas: BTreeMap::new(),
    };
    Structure::new(&base).check(&mut release)?;
    Ok(release)
}

fn read_signature(files: &RegistryFiles, path: &str) -> Result<SignatureFile, RegistryError> {
    let bytes = files
        .get(path)
        .ok_or_else(|| RegistryError::SignatureMissing { file: path.into() })?;
    serde_json::from_slice(bytes).map_err(|_| RegistryError::SignatureInvalid {
        file: path.into(),
        key_id: "(unreadable signature file)".into(),
    })
}

fn parse_manifest(path: &str, bytes: &[u8], id: &ReleaseId) -> Result<Manifest, RegistryError> {
    let invalid = |reason: String| RegistryError::ManifestInvalid {
        file: path.into(),
        reason,
    };
    // One pass over the bytes decides canonical form; the typed entries are read straight from
    // them, with no intermediate JSON tree.
    if !is_canonical(bytes) {
        return Err(invalid(
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Err(e) => e.to_string(),
                Ok(_) => "not canonical JSON (sorted keys, no whitespace); rebuild it with \
                          `rimthan registry build`"
                    .into(),
            },
        ));
    }
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    if manifest.format != MANIFEST_FORMAT {
        return Err(invalid(format!(
            "format {:?} is not {MANIFEST_FORMAT:?}",
            manifest.format
        )));
    }
    if manifest.release != *id {
        return Err(invalid(format!(
            "names release {} but sits in releases/{id}/; a release id is never rewritten",
            manifest.release
        )));
    }
    Ok(manifest)
}

/// The folder every entry of a kind lives under, derived from its identity.
fn expected_prefix(entry: &Entry) -> String {
    match (entry.kind, &entry.workflow, entry.asset_kind) {
        (EntryKind::Workflow, _, _) => format!("workflows/{}/{}/", entry.id, entry.version),
        (EntryKind::Step, Some(w), _) => format!("workflows/{w}/{}/steps/", entry.version),
        (EntryKind::Asset, _, Some(k)) => format!("assets/{k}/{}/{}/", entry.id, entry.version),
        (EntryKind::Validator, _, _) => format!("validators/{}/{}/", entry.id, entry.version),
        (EntryKind::Schema, _, _) => format!("schemas/{}/{}/", entry.id, entry.version),
        (EntryKind::Bootstrap, _, _) => "bootstrap/".into(),
        (EntryKind::Step, None, _) | (EntryKind::Asset, _, None) => String::new(),
    }
}

fn check_entry_bytes(
    files: &RegistryFiles,
    base: &str,
    manifest: &Manifest,
) -> Result<BTreeMap<String, Arc<[u8]>>, RegistryError> {
    let manifest_file = format!("{base}manifest.json");
    let mut contents = BTreeMap::new();
    let mut previous: Option<&str> = None;
    for entry in &manifest.entries {
        let file = format!("{base}{}", entry.path);
        if previous.is_some_and(|p| p >= entry.path.as_str()) {
            return Err(if previous == Some(entry.path.as_str()) {
                RegistryError::DuplicateEntry {
                    file,
                    entry: entry.label(),
                }
            } else {
                RegistryError::ManifestInvalid {
                    file: manifest_file,
                    reason: format!(
                        "entries must be sorted by path; {} is out of order",
                        entry.path
                    ),
                }
            });
        }
        previous = Some(&entry.path);
        if let Err(e) = crate::ids::check_name("entry id", &entry.id) {
            return Err(RegistryError::InvalidId {
                file,
                entry: entry.label(),
                reason: e.to_string(),
            });
        }
        if entry.bytes > MAX_FILE_BYTES {
            return Err(RegistryError::EntryTooLarge {
                file,
                bytes: entry.bytes,
                limit: MAX_FILE_BYTES,
            });
        }
        if let Err(rule) = check_relative_path(&entry.path) {
            return Err(RegistryError::ManifestInvalid {
                file: manifest_file,
                reason: format!(
                    "{}: path {:?} breaks rule {rule}: {}",
                    entry.label(),
                    entry.path,
                    rule.advice()
                ),
            });
        }
        let prefix = expected_prefix(entry);
        if prefix.is_empty() || !entry.path.starts_with(&prefix) {
            return Err(RegistryError::ManifestInvalid {
                file: manifest_file,
                reason: format!(
                    "{}: path {:?} must lie under {prefix:?} (steps name their workflow, \
                     assets their asset_kind)",
                    entry.label(),
                    entry.path
                ),
            });
        }
        let bytes = files
            .get(&file)
            .ok_or_else(|| RegistryError::EntryMissing {
                file: file.clone(),
                entry: entry.label(),
            })?;
        if bytes.len() as u64 != entry.bytes {
            return Err(RegistryError::SizeMismatch {
                file,
                entry: entry.label(),
                expected: entry.bytes,
                actual: bytes.len() as u64,
            });
        }
        let actual = Sha256Digest::of(bytes);
        if actual != entry.sha256 {
            return Err(RegistryError::DigestMismatch {
                file,
                entry: entry.label(),
                expected: entry.sha256.to_string(),
                actual: actual.to_string(),
            });
        }
        contents.insert(entry.path.clone(), bytes.clone());
    }
    let signed = [manifest_file.as_str(), &format!("{base}manifest.sig")].map(str::to_owned);
    for path in files.paths_under(base) {
        if !signed.iter().any(|s| s == path) && !contents.contains_key(&path[base.len()..]) {
            return Err(RegistryError::UnlistedFile { file: path.into() });
        }
    }
    Ok(contents)
}

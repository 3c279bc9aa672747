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

use super::{Compiled, TrustPolicy, load::Structure};

/// Verifies one release, sharing with earlier releases of the same verification what their
/// identical documents compiled to.
pub(crate) fn verify_release(
    files: &RegistryFiles,
    id: &ReleaseId,
    keys: &TrustedKeys,
    policy: &TrustPolicy,
    compiled: &mut Compiled,
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
    Structure::new(&base, compiled).check(&mut release)?;
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
        (EntryKind::Check, Some(w), _) => format!("workflows/{w}/{}/checks/", entry.version),
        (EntryKind::Step | EntryKind::Check, None, _) | (EntryKind::Asset, _, None) => {
            String::new()
        }
    }
}

/// Checks every entry's listing, then its bytes: sizes as the files are matched to the sorted
/// entries in one merge (no lookup per entry), then every digest, hashed on all cores. The
/// first failure in manifest order is reported; a file no entry lists, after them.
fn check_entry_bytes(
    files: &RegistryFiles,
    base: &str,
    manifest: &Manifest,
) -> Result<BTreeMap<String, Arc<[u8]>>, RegistryError> {
    let manifest_file = format!("{base}manifest.json");
    let signature_file = format!("{base}manifest.sig");
    let mut previous: Option<&str> = None;
    for entry in &manifest.entries {
        let file = || format!("{base}{}", entry.path);
        if previous.is_some_and(|p| p >= entry.path.as_str()) {
            return Err(if previous == Some(entry.path.as_str()) {
                RegistryError::DuplicateEntry {
                    file: file(),
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
                file: file(),
                entry: entry.label(),
                reason: e.to_string(),
            });
        }
        if entry.bytes > MAX_FILE_BYTES {
            return Err(RegistryError::EntryTooLarge {
                file: file(),
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
                    "{}: path {:?} must lie under {prefix:?} (steps and checks name their \
                     workflow, assets their asset_kind)",
                    entry.label(),
                    entry.path
                ),
            });
        }
    }

    // Both sides are sorted by path: one merge pairs each entry with its file.
    let mut listed = files
        .entries_under(base)
        .filter(|(path, _)| *path != manifest_file && *path != signature_file)
        .peekable();
    let mut paired = Vec::with_capacity(manifest.entries.len());
    let mut unlisted = None;
    for entry in &manifest.entries {
        let bytes = loop {
            match listed.peek() {
                Some((path, _)) if path[base.len()..] < *entry.path => {
                    unlisted = unlisted.or(Some(*path));
                    listed.next();
                }
                Some((path, bytes)) if path[base.len()..] == *entry.path => {
                    let bytes = *bytes;
                    listed.next();
                    break bytes;
                }
                _ => {
                    return Err(RegistryError::EntryMissing {
                        file: format!("{base}{}", entry.path),
                        entry: entry.label(),
                    });
                }
            }
        };
        if bytes.len() as u64 != entry.bytes {
            return Err(RegistryError::SizeMismatch {
                file: format!("{base}{}", entry.path),
                entry: entry.label(),
                expected: entry.bytes,
                actual: bytes.len() as u64,
            });
        }
        paired.push((entry, bytes));
    }
    let digests = digests(&paired);
    for ((entry, _), actual) in paired.iter().zip(&digests) {
        if *actual != entry.sha256 {
            return Err(RegistryError::DigestMismatch {
                file: format!("{base}{}", entry.path),
                entry: entry.label(),
                expected: entry.sha256.to_string(),
                actual: actual.to_string(),
            });
        }
    }
    if let Some(path) = unlisted.or_else(|| listed.next().map(|(p, _)| p)) {
        return Err(RegistryError::UnlistedFile { file: path.into() });
    }
    Ok(paired
        .into_iter()
        .map(|(entry, bytes)| (entry.path.clone(), bytes.clone()))
        .collect())
}

/// The sha256 of each entry's bytes, in order, hashed on as many threads as the machine has
/// cores (at most four), each over a contiguous share of the bytes.
fn digests(paired: &[(&Entry, &Arc<[u8]>)]) -> Vec<Sha256Digest> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let total: usize = paired.iter().map(|(_, b)| b.len()).sum();
    if threads == 1 || total < (1 << 20) {
        return paired.iter().map(|(_, b)| Sha256Digest::of(b)).collect();
    }
    // Split where the running byte count crosses each share, so threads hash alike amounts.
    let share = total.div_ceil(threads);
    let mut chunks = Vec::with_capacity(threads);
    let (mut start, mut bytes) = (0, 0);
    for (i, (_, b)) in paired.iter().enumerate() {
        bytes += b.len();
        if bytes >= share * (chunks.len() + 1) {
            chunks.push(&paired[start..=i]);
            start = i + 1;
        }
    }
    chunks.push(&paired[start..]);
    std::thread::scope(|scope| {
        let running: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(_, b)| Sha256Digest::of(b))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        running
            .into_iter()
            .flat_map(|r| r.join().expect("hashing does not panic"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_hashed_on_several_threads_come_back_in_entry_order() {
        let entry: Entry = serde_json::from_value(serde_json::json!({
            "kind": "schema", "id": "s", "version": "1.0.0", "path": "schemas/s/1.0.0/s.json",
            "media_type": "application/json", "bytes": 0,
            "sha256": Sha256Digest::of(b"").to_string(),
        }))
        .unwrap();
        // Uneven sizes, 3 MiB in all: every split lands somewhere inside the list.
        let blobs: Vec<Arc<[u8]>> = (0..300u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 97 % 20_000)].into())
            .collect();
        let total: usize = blobs.iter().map(|b| b.len()).sum();
        assert!(total > 2 << 20, "{total}");
        let paired: Vec<(&Entry, &Arc<[u8]>)> = blobs.iter().map(|b| (&entry, b)).collect();
        let sequential: Vec<Sha256Digest> = blobs.iter().map(|b| Sha256Digest::of(b)).collect();
        assert_eq!(digests(&paired), sequential);
    }
}

//! The publication lock, `published.json` at a registry's root: what every release and every
//! versioned entry was when it was first published, so neither can name other bytes later
//! (`docs/registry-format.md` §1.1).
//!
//! `rimthan registry build` records each release it publishes and refuses a build that would
//! give a recorded release id or (kind, id, version) new bytes; [`check_published`] re-reads a
//! registry folder against its lock (the repository's tests run it on the embedded default).
//! Entries are keyed by [`Entry::label`], which names kind, id, version and rendition. The
//! bootstrap paragraph is not versioned apart from its release, so only the release's manifest
//! digest covers it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    canonical::to_canonical_bytes,
    digest::Sha256Digest,
    error::RegistryError,
    files::RegistryFiles,
    ids::ReleaseId,
    model::{Entry, EntryKind, Manifest},
};

/// The lock file, at the registry's root.
pub const PUBLISHED_FILE: &str = "published.json";
/// The lock format this crate reads and writes.
pub const PUBLISHED_FORMAT: &str = "rimthan-published/1";

/// `published.json`: release id → manifest sha256, and entry → the digests it was published with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedLock {
    /// Always [`PUBLISHED_FORMAT`].
    pub format: String,
    /// Every published release's manifest sha256.
    pub releases: BTreeMap<ReleaseId, Sha256Digest>,
    /// Every published versioned entry, by [`Entry::label`].
    pub entries: BTreeMap<String, PublishedEntry>,
}

/// What one versioned entry was first published as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedEntry {
    /// The release that first published it.
    pub first_release: ReleaseId,
    /// SHA-256 of its bytes.
    pub sha256: Sha256Digest,
    /// SHA-256 of its canonical manifest record, which also fixes what the manifest says about
    /// the bytes (media type, compatible harnesses, adapter contract).
    pub record_sha256: Sha256Digest,
}

impl Default for PublishedLock {
    fn default() -> Self {
        Self {
            format: PUBLISHED_FORMAT.into(),
            releases: BTreeMap::new(),
            entries: BTreeMap::new(),
        }
    }
}

impl PublishedLock {
    /// The lock in `files`, if the registry has one.
    pub fn read(files: &RegistryFiles) -> Result<Option<Self>, RegistryError> {
        let Some(bytes) = files.get(PUBLISHED_FILE) else {
            return Ok(None);
        };
        let lock: Self = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        if lock.format != PUBLISHED_FORMAT {
            return Err(invalid(format!(
                "format {:?} is not {PUBLISHED_FORMAT:?}",
                lock.format
            )));
        }
        Ok(Some(lock))
    }

    /// The lock as written: pretty, keys sorted, one trailing newline, so a new release shows
    /// in review as added lines only.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("lock serializes");
        bytes.push(b'\n');
        bytes
    }

    /// Records a release and its versioned entries, refusing any that the lock already holds
    /// with other digests.
    pub fn record(
        &mut self,
        manifest: &Manifest,
        manifest_sha256: Sha256Digest,
    ) -> Result<(), RegistryError> {
        let release = &manifest.release;
        for entry in versioned(manifest) {
            let new = PublishedEntry {
                first_release: release.clone(),
                sha256: entry.sha256,
                record_sha256: record_sha256(entry),
            };
            match self.entries.get(&entry.label()) {
                None => {
                    self.entries.insert(entry.label(), new);
                }
                Some(old) => compare(
                    old,
                    &new,
                    entry,
                    &format!("releases/{release}/{}", entry.path),
                )?,
            }
        }
        match self.releases.get(release) {
            Some(old) if *old != manifest_sha256 => Err(RegistryError::PublishedChanged {
                file: manifest_file(release),
                entry: format!("release {release} manifest"),
                published: old.to_string(),
                actual: manifest_sha256.to_string(),
                fix: RELEASE_FIX.into(),
            }),
            _ => {
                self.releases.insert(release.clone(), manifest_sha256);
                Ok(())
            }
        }
    }
}

/// The lock of the releases in `files` as their manifests state them (unverified: this is how
/// a registry written before the lock existed gets one), on top of its lock if it has one.
pub fn lock_of(files: &RegistryFiles) -> Result<PublishedLock, RegistryError> {
    let mut lock = PublishedLock::read(files)?.unwrap_or_default();
    for (release, bytes) in manifests(files) {
        let manifest = parse_manifest(&release, bytes)?;
        lock.record(&manifest, Sha256Digest::of(bytes))?;
    }
    Ok(lock)
}

/// Checks a registry folder against its `published.json`: every recorded release is present
/// with the manifest digest it was published with, every release present is recorded, and every
/// versioned entry's bytes and manifest record are those first published.
pub fn check_published(files: &RegistryFiles) -> Result<PublishedLock, RegistryError> {
    let lock = PublishedLock::read(files)?
        .ok_or_else(|| invalid("missing; `rimthan registry build` writes it".into()))?;
    for (release, published) in &lock.releases {
        let Some(bytes) = files.get(&manifest_file(release)) else {
            return Err(invalid(format!(
                "release {release} was published but releases/{release}/ is gone; restore it"
            )));
        };
        let actual = Sha256Digest::of(bytes);
        if actual != *published {
            return Err(RegistryError::PublishedChanged {
                file: manifest_file(release),
                entry: format!("release {release} manifest"),
                published: published.to_string(),
                actual: actual.to_string(),
                fix: RELEASE_FIX.into(),
            });
        }
    }
    for (release, bytes) in manifests(files) {
        if !lock.releases.contains_key(&release) {
            return Err(invalid(format!(
                "release {release} is not recorded; publish releases with `rimthan registry build`"
            )));
        }
        let manifest = parse_manifest(&release, bytes)?;
        for entry in versioned(&manifest) {
            let file = format!("releases/{release}/{}", entry.path);
            let Some(old) = lock.entries.get(&entry.label()) else {
                return Err(invalid(format!(
                    "{} of release {release} is not recorded; publish releases with `rimthan \
                     registry build`",
                    entry.label()
                )));
            };
            let bytes = files
                .get(&file)
                .ok_or_else(|| RegistryError::EntryMissing {
                    file: file.clone(),
                    entry: entry.label(),
                })?;
            let actual = PublishedEntry {
                first_release: release.clone(),
                sha256: Sha256Digest::of(bytes),
                record_sha256: record_sha256(entry),
            };
            compare(old, &actual, entry, &file)?;
        }
    }
    Ok(lock)
}

fn compare(
    old: &PublishedEntry,
    new: &PublishedEntry,
    entry: &Entry,
    file: &str,
) -> Result<(), RegistryError> {
    let changed = |what: &str, published: Sha256Digest, actual: Sha256Digest| {
        RegistryError::PublishedChanged {
            file: file.to_owned(),
            entry: format!(
                "{}{what} (first published in release {})",
                entry.label(),
                old.first_release
            ),
            published: published.to_string(),
            actual: actual.to_string(),
            fix: way_through(entry).into(),
        }
    };
    if old.sha256 != new.sha256 {
        return Err(changed("", old.sha256, new.sha256));
    }
    if old.record_sha256 != new.record_sha256 {
        return Err(changed(
            " manifest record",
            old.record_sha256,
            new.record_sha256,
        ));
    }
    Ok(())
}

/// What to do about a changed release manifest.
const RELEASE_FIX: &str =
    "restore it; a release never changes, so build a change under a new release id";

/// What to do about a published entry that a build gave new bytes: a release id names a set
/// of versions, so only a new version carries a change, and an entry a workflow version owns
/// (its definition, steps and checks) changes only with a new version of that workflow.
fn way_through(entry: &Entry) -> String {
    let v = entry.version.semver();
    let next = crate::Version::new(v.major, v.minor, v.patch + 1);
    let owner = match entry.kind {
        EntryKind::Workflow => Some(entry.id.as_str()),
        EntryKind::Step | EntryKind::Check => entry.path.split('/').nth(1),
        _ => None,
    };
    match owner {
        Some(workflow) => format!(
            "restore it, and publish the change as workflow {workflow} version {next} (copy \
             workflows/{workflow}/{}/ of the source to workflows/{workflow}/{next}/ and edit \
             there); a new release id alone cannot change a published version",
            entry.version
        ),
        None => format!(
            "restore it, and publish the change as {} version {next} beside it, with a new \
             version of each workflow that uses it; a new release id alone cannot change a \
             published version",
            entry.label().split('@').next().unwrap_or_default()
        ),
    }
}

fn versioned(manifest: &Manifest) -> impl Iterator<Item = &Entry> {
    manifest
        .entries
        .iter()
        .filter(|e| e.kind != EntryKind::Bootstrap)
}

fn record_sha256(entry: &Entry) -> Sha256Digest {
    Sha256Digest::of(&to_canonical_bytes(entry).expect("entry serializes"))
}

fn manifest_file(release: &ReleaseId) -> String {
    format!("releases/{release}/manifest.json")
}

/// Every `releases/<id>/manifest.json` in `files` whose folder name is a release id; other
/// names are the verifier's to refuse.
fn manifests(files: &RegistryFiles) -> impl Iterator<Item = (ReleaseId, &[u8])> {
    files.paths_under("releases/").filter_map(|path| {
        let (id, rest) = path["releases/".len()..].split_once('/')?;
        let id: ReleaseId = id.parse().ok()?;
        (rest == "manifest.json").then(|| (id, &files.get(path).expect("listed")[..]))
    })
}

fn parse_manifest(release: &ReleaseId, bytes: &[u8]) -> Result<Manifest, RegistryError> {
    serde_json::from_slice(bytes).map_err(|e| RegistryError::ManifestInvalid {
        file: manifest_file(release),
        reason: e.to_string(),
    })
}

fn invalid(reason: String) -> RegistryError {
    RegistryError::PublishedLockInvalid {
        file: PUBLISHED_FILE.into(),
        reason,
    }
}

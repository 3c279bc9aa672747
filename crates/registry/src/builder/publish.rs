//! Publishing a built release into a registry folder without ever rewriting a release or a
//! published entry, keeping drafts apart (rebuilt at will, never recorded), and moving
//! channels.

use std::{
    fs,
    path::{Path, PathBuf},
};

use super::{
    BuiltRelease,
    source::{read, sorted_names},
};
use crate::{
    error::RegistryError,
    files::{RegistryFiles, write_atomic},
    ids::{ChannelName, ReleaseId},
    model::{ChannelsFile, Manifest},
    published::{PUBLISHED_FILE, PublishedLock, lock_of},
    verify::{CHANNELS_FILE, load_channels},
};

/// Where drafts are kept in a registry folder, one folder per draft id. Nothing under it is
/// published: `verify_registry` reads `releases/` only, unless a draft is named ([`with_draft`]).
pub const DRAFTS_DIR: &str = "drafts";

/// Writes a built release into the registry at `out` and records it in `published.json`.
/// An existing release with identical bytes is left alone; one with any different byte is an
/// error, never rewritten, and so is a release giving a (kind, id, version) that an earlier
/// release published other bytes. Nothing is written when the build is refused. A draft of the
/// same id, if any, is removed once the release is in place: the id is published now.
///
/// A draft (`built.draft`) goes to `drafts/<id>/` instead, replacing the draft there, and the
/// lock is neither consulted for its entries nor extended; only a published release's id is
/// refused to it.
pub fn publish(out: &Path, built: &BuiltRelease) -> Result<(), RegistryError> {
    let prefix = format!("releases/{}/", built.release);
    let existing = if out.exists() {
        RegistryFiles::from_dir(out)?
    } else {
        RegistryFiles::default()
    };
    let mut lock = lock_of(&existing)?;
    if built.draft {
        if lock.releases.contains_key(&built.release) {
            return Err(RegistryError::DraftOfPublished {
                file: format!("{prefix}manifest.json"),
                release: built.release.to_string(),
            });
        }
        write_keys(out, built)?;
        let staging = stage(out, built, &prefix)?;
        let drafts = out.join(DRAFTS_DIR);
        fs::create_dir_all(&drafts).map_err(RegistryError::io(&drafts))?;
        let draft_dir = drafts.join(built.release.as_str());
        // Swapped, not overwritten, so a crash leaves either draft whole.
        if draft_dir.exists() {
            let replaced = out.join(format!(".replaced-{}", built.release));
            if replaced.exists() {
                fs::remove_dir_all(&replaced).map_err(RegistryError::io(&replaced))?;
            }
            fs::rename(&draft_dir, &replaced).map_err(RegistryError::io(&draft_dir))?;
            fs::rename(&staging, &draft_dir).map_err(RegistryError::io(&draft_dir))?;
            return fs::remove_dir_all(&replaced).map_err(RegistryError::io(&replaced));
        }
        return fs::rename(&staging, &draft_dir).map_err(RegistryError::io(&draft_dir));
    }
    let manifest: Manifest = serde_json::from_slice(
        built
            .files
            .get(&format!("{prefix}manifest.json"))
            .expect("a built release has a manifest"),
    )
    .expect("a built manifest parses");
    lock.record(&manifest, built.manifest_sha256)
        .map_err(|mut e| {
            // Name the source file the author edits, not the built one.
            if let RegistryError::PublishedChanged { file, .. } = &mut e
                && let Some(source) = built.sources.get(file.as_str())
            {
                *file = source.display().to_string();
            }
            e
        })?;
    let release_dir = out.join("releases").join(built.release.as_str());
    if release_dir.exists() {
        let old: Vec<_> = existing.paths_under(&prefix).collect();
        let new: Vec<_> = built.files.paths_under(&prefix).collect();
        let differing = new
            .iter()
            .find(|p| existing.get(p) != built.files.get(p))
            .or_else(|| old.iter().find(|p| built.files.get(p).is_none()));
        if let Some(file) = differing {
            return Err(RegistryError::ReleaseExists {
                file: (*file).to_owned(),
                release: built.release.to_string(),
            });
        }
        write_keys(out, built)?;
        return write_lock(out, &existing, &lock);
    }
    write_keys(out, built)?;
    let staging = stage(out, built, &prefix)?;
    fs::create_dir_all(out.join("releases")).map_err(RegistryError::io(out))?;
    fs::rename(&staging, &release_dir).map_err(RegistryError::io(&release_dir))?;
    // Written after the release is in place: a crash between the two leaves a release the next
    // build records from its manifest, never a lock naming a release that is not there.
    write_lock(out, &existing, &lock)?;
    let draft = out.join(DRAFTS_DIR).join(built.release.as_str());
    if draft.exists() {
        fs::remove_dir_all(&draft).map_err(RegistryError::io(&draft))?;
    }
    Ok(())
}

/// Writes the release's files into `.staging-<id>/` beside the registry's folders, to be moved
/// into place with one rename, so a crash never leaves a half-written release that could
/// neither verify nor be rebuilt.
fn stage(out: &Path, built: &BuiltRelease, prefix: &str) -> Result<PathBuf, RegistryError> {
    let staging = out.join(format!(".staging-{}", built.release));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(RegistryError::io(&staging))?;
    }
    for path in built.files.paths_under(prefix) {
        write_atomic(
            &staging.join(&path[prefix.len()..]),
            built.files.get(path).expect("listed"),
        )?;
    }
    Ok(staging)
}

/// `files` as a server that names `release` reads them (`serve --release`): a published release
/// as it is; a draft with `drafts/<release>/…` read as `releases/<release>/…`, so it verifies like
/// any release (its signed manifest still says it is a draft). Other drafts stay out of sight.
/// An id that is neither is `release_not_found`.
pub fn with_draft(
    files: &RegistryFiles,
    release: &ReleaseId,
) -> Result<RegistryFiles, RegistryError> {
    let draft_prefix = format!("{DRAFTS_DIR}/{release}/");
    let release_prefix = format!("releases/{release}/");
    if files.paths_under(&release_prefix).next().is_some() {
        return Ok(files.clone());
    }
    let mut with = RegistryFiles::default();
    let mut found = false;
    for path in files.paths() {
        let bytes = files.get(path).expect("listed").clone();
        match path.strip_prefix(&draft_prefix) {
            Some(rest) => {
                found = true;
                with.insert(format!("{release_prefix}{rest}"), bytes);
            }
            None => with.insert(path, bytes),
        }
    }
    if !found {
        let drafts_prefix = format!("{DRAFTS_DIR}/");
        let mut drafts: Vec<&str> = files
            .paths_under(&drafts_prefix)
            .filter_map(|p| p.split('/').nth(1))
            .collect();
        drafts.dedup();
        let mut releases: Vec<&str> = files
            .paths_under("releases/")
            .filter_map(|p| p.split('/').nth(1))
            .collect();
        releases.dedup();
        return Err(RegistryError::ReleaseNotFound {
            release: release.to_string(),
            available: format!(
                "releases: {}; drafts: {}",
                listed(&releases),
                listed(&drafts)
            ),
        });
    }
    Ok(with)
}

fn write_lock(
    out: &Path,
    existing: &RegistryFiles,
    lock: &PublishedLock,
) -> Result<(), RegistryError> {
    let bytes = lock.to_bytes();
    if existing
        .get(PUBLISHED_FILE)
        .is_some_and(|old| **old == bytes[..])
    {
        return Ok(());
    }
    write_atomic(&out.join(PUBLISHED_FILE), &bytes)
}

fn write_keys(out: &Path, built: &BuiltRelease) -> Result<(), RegistryError> {
    built
        .files
        .paths_under("keys/")
        .try_for_each(|p| write_atomic(&out.join(p), built.files.get(p).expect("listed")))
}

/// Points `channel` at `release` in the registry at `dir`, after checking the release exists.
/// The caller decides how much verification to demand first (see `rimthan registry promote`).
pub fn set_channel(
    dir: &Path,
    channel: &ChannelName,
    release: &ReleaseId,
) -> Result<(), RegistryError> {
    if !dir
        .join("releases")
        .join(release.as_str())
        .join("manifest.json")
        .is_file()
    {
        refuse_draft(dir, release)?;
        return Err(RegistryError::ReleaseNotFound {
            release: release.to_string(),
            available: available_releases(dir),
        });
    }
    let mut files = RegistryFiles::default();
    let path = dir.join(CHANNELS_FILE);
    if path.exists() {
        files.insert(CHANNELS_FILE, read(&path)?);
    }
    let mut channels: ChannelsFile = load_channels(&files)?;
    channels.channels.insert(channel.clone(), release.clone());
    let mut bytes = serde_json::to_vec_pretty(&channels).expect("channels serialize");
    bytes.push(b'\n');
    write_atomic(&path, &bytes)
}

/// `release_is_draft` when `release` is a draft of the registry at `dir` and no release: what
/// `promote` says instead of "not found".
pub fn refuse_draft(dir: &Path, release: &ReleaseId) -> Result<(), RegistryError> {
    let published = dir.join("releases").join(release.as_str()).is_dir();
    if !published && dir.join(DRAFTS_DIR).join(release.as_str()).is_dir() {
        return Err(RegistryError::ReleaseIsDraft {
            file: format!("{DRAFTS_DIR}/{release}/manifest.json"),
            release: release.to_string(),
        });
    }
    Ok(())
}

fn listed(ids: &[&str]) -> String {
    if ids.is_empty() {
        "none".into()
    } else {
        ids.join(", ")
    }
}

fn available_releases(dir: &Path) -> String {
    let names = sorted_names(&dir.join("releases")).unwrap_or_default();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

//! Publishing a built release into a registry folder without ever rewriting a release or a
//! published entry, and moving channels.

use std::{fs, path::Path};

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

/// Writes a built release into the registry at `out` and records it in `published.json`.
/// An existing release with identical bytes is left alone; one with any different byte is an
/// error, never rewritten, and so is a release giving a (kind, id, version) that an earlier
/// release published other bytes. Nothing is written when the build is refused.
pub fn publish(out: &Path, built: &BuiltRelease) -> Result<(), RegistryError> {
    let prefix = format!("releases/{}/", built.release);
    let existing = if out.exists() {
        RegistryFiles::from_dir(out)?
    } else {
        RegistryFiles::default()
    };
    let mut lock = lock_of(&existing)?;
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
    // Stage the release beside the registry and move it into place with one rename, so a
    // crash never leaves a half-written release that could neither verify nor be rebuilt.
    let staging = out.join(format!(".staging-{}", built.release));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(RegistryError::io(&staging))?;
    }
    for path in built.files.paths_under(&prefix) {
        write_atomic(
            &staging.join(&path[prefix.len()..]),
            built.files.get(path).expect("listed"),
        )?;
    }
    fs::create_dir_all(out.join("releases")).map_err(RegistryError::io(out))?;
    fs::rename(&staging, &release_dir).map_err(RegistryError::io(&release_dir))?;
    // Written after the release is in place: a crash between the two leaves a release the next
    // build records from its manifest, never a lock naming a release that is not there.
    write_lock(out, &existing, &lock)
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

fn available_releases(dir: &Path) -> String {
    let names = sorted_names(&dir.join("releases")).unwrap_or_default();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

//! Publishing a built release into a registry folder without ever rewriting a release, and
//! moving channels.

use std::{fs, path::Path};

use super::{
    BuiltRelease,
    source::{read, sorted_names},
};
use crate::{
    error::RegistryError,
    files::{RegistryFiles, write_atomic},
    ids::{ChannelName, ReleaseId},
    model::ChannelsFile,
    verify::{CHANNELS_FILE, load_channels},
};

/// Writes a built release into the registry at `out`. An existing release with identical bytes
/// is left alone; one with any different byte is an error, never rewritten.
pub fn publish(out: &Path, built: &BuiltRelease) -> Result<(), RegistryError> {
    let prefix = format!("releases/{}/", built.release);
    let release_dir = out.join("releases").join(built.release.as_str());
    if release_dir.exists() {
        let existing = RegistryFiles::from_dir(out)?;
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
        return write_keys(out, built);
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
    fs::rename(&staging, &release_dir).map_err(RegistryError::io(&release_dir))
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

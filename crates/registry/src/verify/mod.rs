//! Verification of a registry: digests, signatures, and every structural rule of `docs/registry-format.md` §3.
//!
//! Order matters and is fixed: the manifest is authenticated first (pinned digest or trusted
//! signature), then every entry's bytes against it, then the documents are parsed and their
//! references and rules checked. Nothing is parsed before its bytes are authenticated.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use crate::{
    builder::DRAFTS_DIR,
    digest::Sha256Digest,
    error::RegistryError,
    files::RegistryFiles,
    ids::ReleaseId,
    model::ChannelsFile,
    release::VerifiedRegistry,
    signature::{KeyId, PublicKeyFile, TrustedKeys},
};

mod authenticate;
mod checks;
mod compiled;
mod load;
mod rules;

pub(crate) use authenticate::verify_release;
pub(crate) use checks::compile_check;
pub(crate) use compiled::Compiled;

/// The JSON Schema dialect every shipped schema uses.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// Largest declared output size a workflow may allow.
pub(crate) const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;
/// The channels file.
pub const CHANNELS_FILE: &str = "channels.json";

/// Whom to trust.
#[derive(Debug, Clone)]
pub enum TrustPolicy {
    /// An operator's registry: the keys in its `keys/`, never the embedded default's key.
    RegistryKeys {
        /// The embedded default release's development key, refused here.
        refused: KeyId,
    },
    /// The embedded default: each release's manifest sha256 is compiled in.
    Pinned(BTreeMap<ReleaseId, Sha256Digest>),
}

/// Verifies every release and the channels of a registry.
pub fn verify_registry(
    files: &RegistryFiles,
    policy: &TrustPolicy,
) -> Result<VerifiedRegistry, RegistryError> {
    let keys = load_keys(files)?;
    let channels = load_channels(files)?;
    let mut releases = BTreeMap::new();
    let mut compiled = Compiled::default();
    for id in release_ids(files)? {
        let release = verify_release(files, &id, &keys, policy, &mut compiled)?;
        releases.insert(id, Arc::new(release));
    }
    for (channel, release) in &channels.channels {
        match releases.get(release) {
            None if files
                .get(&format!("{DRAFTS_DIR}/{release}/manifest.json"))
                .is_some() =>
            {
                return Err(RegistryError::ReleaseIsDraft {
                    file: CHANNELS_FILE.into(),
                    release: release.to_string(),
                });
            }
            None => {
                return Err(RegistryError::ChannelUnknownRelease {
                    file: CHANNELS_FILE.into(),
                    channel: channel.to_string(),
                    release: release.to_string(),
                });
            }
            Some(named) if named.is_draft() => {
                return Err(RegistryError::ReleaseIsDraft {
                    file: CHANNELS_FILE.into(),
                    release: release.to_string(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(VerifiedRegistry { releases, channels })
}

/// Reads `keys/*.json` into a trust set.
pub(crate) fn load_keys(files: &RegistryFiles) -> Result<TrustedKeys, RegistryError> {
    let mut keys = TrustedKeys::default();
    for path in files.paths_under("keys/") {
        let invalid = |reason: String| RegistryError::KeyInvalid {
            file: path.into(),
            reason,
        };
        let file: PublicKeyFile = serde_json::from_slice(&files.get(path).expect("listed")[..])
            .map_err(|e| invalid(e.to_string()))?;
        if path != format!("keys/{}.json", file.key_id) {
            return Err(invalid(format!(
                "name the file keys/{}.json after its key id",
                file.key_id
            )));
        }
        keys.insert(&file).map_err(|e| invalid(e.0))?;
    }
    Ok(keys)
}

/// Reads `channels.json`; a registry without one has no channels.
pub(crate) fn load_channels(files: &RegistryFiles) -> Result<ChannelsFile, RegistryError> {
    match files.get(CHANNELS_FILE) {
        None => Ok(ChannelsFile::default()),
        Some(bytes) => serde_json::from_slice(bytes).map_err(|e| RegistryError::ChannelsInvalid {
            file: CHANNELS_FILE.into(),
            reason: format!("{e}; expected {{\"channels\": {{\"stable\": \"<release id>\"}}}}"),
        }),
    }
}

fn release_ids(files: &RegistryFiles) -> Result<BTreeSet<ReleaseId>, RegistryError> {
    let mut ids = BTreeSet::new();
    for path in files.paths_under("releases/") {
        let segment = path["releases/".len()..]
            .split('/')
            .next()
            .unwrap_or_default();
        let id = segment
            .parse()
            .map_err(|e: crate::ids::IdError| RegistryError::InvalidId {
                file: path.into(),
                entry: format!("release {segment}"),
                reason: e.to_string(),
            })?;
        ids.insert(id);
    }
    Ok(ids)
}

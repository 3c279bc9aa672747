//! The default registry compiled into the binary, trusted by the manifest digests its
//! publication lock pins.
//!
//! `registry/default/` is the output of `rimthan registry build` over `registry/source/` with
//! the repository's development key (`registry/default-release.key`), one release appended per
//! content change and none ever rebuilt. That key is public by being committed, so it is refused
//! for every external registry ([`external_policy`]); the embedded copy is trusted because every
//! release's manifest digest is in its `published.json`, compiled into the binary with it. Tests
//! rebuild the newest release from the source byte for byte and check every older one against
//! the lock.

use std::str::FromStr;

use crate::{
    error::RegistryError,
    files::RegistryFiles,
    published::{PUBLISHED_FILE, PublishedLock},
    release::VerifiedRegistry,
    signature::KeyId,
    verify::{TrustPolicy, verify_registry},
};

include!(concat!(env!("OUT_DIR"), "/embedded_files.rs"));

/// Id of the repository's development key that signs the embedded default releases.
pub const DEFAULT_KEY_ID: &str = "00220f89c0584f55";

/// The embedded registry's files.
pub fn embedded_files() -> RegistryFiles {
    RegistryFiles::from_static(EMBEDDED_FILES)
}

/// The trust policy for the embedded registry: every release's manifest digest, as its
/// compiled-in `published.json` records it.
pub fn embedded_policy() -> Result<TrustPolicy, RegistryError> {
    let lock = PublishedLock::read(&embedded_files())?.ok_or_else(|| {
        RegistryError::PublishedLockInvalid {
            file: PUBLISHED_FILE.into(),
            reason: "the embedded default registry has no publication lock; rebuild the binary \
                     from its own source tree"
                .into(),
        }
    })?;
    Ok(TrustPolicy::Pinned(lock.releases))
}

/// The trust policy for an operator's registry: its `keys/`, never the development key.
pub fn external_policy() -> TrustPolicy {
    TrustPolicy::RegistryKeys {
        refused: KeyId::from_str(DEFAULT_KEY_ID).expect("valid constant"),
    }
}

/// Verifies the embedded default registry.
pub fn verify_embedded() -> Result<VerifiedRegistry, RegistryError> {
    verify_registry(&embedded_files(), &embedded_policy()?)
}

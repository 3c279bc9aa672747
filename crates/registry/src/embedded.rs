//! The default registry compiled into the binary, trusted by its pinned manifest digest.
//!
//! `registry/default/` is the output of `rimthan registry build` over `registry/source/` with
//! the repository's development key (`registry/default-release.key`). That key is public by
//! being committed, so it is refused for every external registry
//! ([`external_policy`]); the embedded copy is trusted because its manifest digest below is
//! part of the binary, and a test rebuilds the source and compares every byte.

use std::{collections::BTreeMap, str::FromStr};

use crate::{
    digest::Sha256Digest,
    error::RegistryError,
    files::RegistryFiles,
    ids::ReleaseId,
    release::VerifiedRegistry,
    signature::KeyId,
    verify::{TrustPolicy, verify_registry},
};

include!(concat!(env!("OUT_DIR"), "/embedded_files.rs"));

/// Release id of the embedded default release.
pub const DEFAULT_RELEASE_ID: &str = "2026.12.0";
/// SHA-256 of the embedded default release's `manifest.json`.
pub const DEFAULT_MANIFEST_SHA256: &str =
    "62fabdf90c87e1ce23284019b11d3d4e9fb99eef085ce48592c98f64d9426383";
/// Id of the repository's development key that signs the embedded default release.
pub const DEFAULT_KEY_ID: &str = "00220f89c0584f55";

/// The embedded registry's files.
pub fn embedded_files() -> RegistryFiles {
    RegistryFiles::from_static(EMBEDDED_FILES)
}

/// The trust policy for the embedded registry: its pinned manifest digest.
pub fn embedded_policy() -> TrustPolicy {
    let release = ReleaseId::from_str(DEFAULT_RELEASE_ID).expect("valid constant");
    let digest = Sha256Digest::from_str(DEFAULT_MANIFEST_SHA256).expect("valid constant");
    TrustPolicy::Pinned(BTreeMap::from([(release, digest)]))
}

/// The trust policy for an operator's registry: its `keys/`, never the development key.
pub fn external_policy() -> TrustPolicy {
    TrustPolicy::RegistryKeys {
        refused: KeyId::from_str(DEFAULT_KEY_ID).expect("valid constant"),
    }
}

/// Verifies the embedded default registry.
pub fn verify_embedded() -> Result<VerifiedRegistry, RegistryError> {
    verify_registry(&embedded_files(), &embedded_policy())
}

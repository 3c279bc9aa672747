//! The provenance signing key and the public keys a verifier trusts (`docs/operations/evidence.md`):
//! one key signs, every key ever used stays published so what it signed keeps verifying.

use std::{collections::BTreeMap, fmt, sync::Arc};

use ed25519_dalek::{Signer as _, Verifier as _};
use rimthan_registry::{PublicKeyFile, Sha256Digest, SigningKeyFile};
use serde::{Deserialize, Serialize};

use super::EnvelopeFailure;

/// The server's provenance signing key.
#[derive(Clone)]
pub struct ProvenanceKey(Arc<ed25519_dalek::SigningKey>);

impl fmt::Debug for ProvenanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProvenanceKey({})", self.key_id())
    }
}

fn key_id_of(key: &ed25519_dalek::VerifyingKey) -> String {
    Sha256Digest::of(key.as_bytes()).to_string()[..16].to_owned()
}

impl ProvenanceKey {
    /// A fresh 32-byte seed from the operating system's random source.
    pub fn generate_seed() -> Vec<u8> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).expect("the operating system's random source works");
        seed.to_vec()
    }

    /// The key of a 32-byte seed.
    pub fn from_seed(seed: &[u8]) -> Option<Self> {
        let seed: [u8; 32] = seed.try_into().ok()?;
        Some(Self(Arc::new(ed25519_dalek::SigningKey::from_bytes(&seed))))
    }

    /// The key a key file holds (the form `rimthan registry keygen` writes), checking that its
    /// id matches the key.
    pub fn from_file(file: &SigningKeyFile) -> Result<Self, String> {
        if file.algorithm != "ed25519" {
            return Err(format!("algorithm {:?} is not ed25519", file.algorithm));
        }
        let mut seed = [0u8; 32];
        hex::decode_to_slice(&file.secret_key, &mut seed)
            .map_err(|_| "secret_key is not 64 hex digits".to_owned())?;
        let key = Self::from_seed(&seed).expect("32 bytes");
        if key.key_id() != file.key_id.as_str() {
            return Err(format!(
                "key_id {} does not match the key (its id is {})",
                file.key_id,
                key.key_id()
            ));
        }
        Ok(key)
    }

    /// The key id: the first 16 hex digits of the public key's sha256.
    pub fn key_id(&self) -> String {
        key_id_of(&self.0.verifying_key())
    }

    /// The public half, as published.
    pub fn public_key_file(&self) -> PublicKeyFile {
        PublicKeyFile {
            algorithm: "ed25519".into(),
            key_id: self.key_id().parse().expect("derived ids are key ids"),
            public_key: hex::encode(self.0.verifying_key().as_bytes()),
        }
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.0.sign(message).to_bytes().to_vec()
    }
}

/// Where the key that signs provenance is held, which is what trusting its signatures means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyCustody {
    /// Generated once and kept in the store: whoever can read the store can sign as the
    /// server, and whoever can write it can add a key that gets published.
    Store,
    /// Read from the file the operator gave (`serve --provenance-key-file`); no private key is in
    /// the store, and only keys from configuration are published.
    File,
}

impl KeyCustody {
    /// The snake_case name statements and `/readyz` carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Store => "store",
            Self::File => "file",
        }
    }
}

/// The published public keys: `GET /.well-known/rimthan/provenance-keys.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysDocument {
    /// Every key the server signed with, current and rotated, by id.
    pub keys: Vec<PublicKeyFile>,
}

/// Public keys a verifier trusts, by id.
#[derive(Debug, Clone, Default)]
pub struct PublicKeys(BTreeMap<String, ed25519_dalek::VerifyingKey>);

impl PublicKeys {
    /// The usable keys of `files`: a file with another algorithm, a bad key or an id that is
    /// not its key's is left out, so it verifies nothing.
    pub fn from_files(files: &[PublicKeyFile]) -> Self {
        let mut keys = BTreeMap::new();
        for file in files.iter().filter(|f| f.algorithm == "ed25519") {
            let mut raw = [0u8; 32];
            if hex::decode_to_slice(&file.public_key, &mut raw).is_err() {
                continue;
            }
            if let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&raw)
                && key_id_of(&key) == file.key_id.as_str()
            {
                keys.insert(file.key_id.to_string(), key);
            }
        }
        Self(keys)
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks a hex signature of `message` by the key `key_id`.
    pub fn verify(&self, key_id: &str, message: &[u8], signature_hex: &str) -> Result<(), String> {
        let mut raw = [0u8; 64];
        hex::decode_to_slice(signature_hex, &mut raw)
            .map_err(|_| "the signature is not 128 hex digits".to_owned())?;
        self.verify_raw(key_id, message, &raw)
            .map_err(|f| f.to_string())
    }

    pub(super) fn verify_raw(
        &self,
        key_id: &str,
        message: &[u8],
        raw: &[u8],
    ) -> Result<(), EnvelopeFailure> {
        let key = self.0.get(key_id).ok_or(EnvelopeFailure::UnknownKeyId)?;
        let signature = ed25519_dalek::Signature::from_slice(raw)
            .map_err(|_| EnvelopeFailure::SignatureInvalid)?;
        key.verify(message, &signature)
            .map_err(|_| EnvelopeFailure::SignatureInvalid)
    }
}

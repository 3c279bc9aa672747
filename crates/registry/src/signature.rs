//! Ed25519 release signatures and the key files that carry them.
//!
//! A key id is derived from the public key (the first 16 hex digits of its sha256), so a key
//! file cannot claim another key's id. `manifest.sig` signs the exact manifest bytes.

use std::{collections::BTreeMap, fmt, str::FromStr};

use ed25519_dalek::{Signer as _, Verifier as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error as _};

use crate::digest::Sha256Digest;

/// The only signature algorithm releases use.
pub(crate) const ALGORITHM: &str = "ed25519";

/// A signing key id: 16 lowercase hex digits derived from the public key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(String);

impl KeyId {
    fn of(key: &ed25519_dalek::VerifyingKey) -> Self {
        Self(Sha256Digest::of(key.as_bytes()).to_string()[..16].to_owned())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for KeyId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() == 16
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!(
                "{s:?} is not a key id: use 16 lowercase hex digits"
            ))
        }
    }
}

impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

/// `keys/<key_id>.json`: a trusted public key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeyFile {
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// Id derived from the key.
    pub key_id: KeyId,
    /// The 32-byte public key, hex.
    pub public_key: String,
}

/// A private signing key file, as written by `rimthan registry keygen`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningKeyFile {
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// Id derived from the public half.
    pub key_id: KeyId,
    /// The 32-byte secret seed, hex.
    pub secret_key: String,
}

/// `manifest.sig`: a signature over the manifest bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// The signing key.
    pub key_id: KeyId,
    /// The 64-byte signature, hex.
    pub signature: String,
}

/// Why a key or signature file is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

/// An ed25519 key that signs releases.
pub struct SigningKey(ed25519_dalek::SigningKey);

impl SigningKey {
    /// Generates a key from the operating system's random source.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError(format!("no random source: {e}")))?;
        Ok(Self(ed25519_dalek::SigningKey::from_bytes(&seed)))
    }

    /// Reads a key from its file form, checking that the id matches the key.
    pub fn from_file(file: &SigningKeyFile) -> Result<Self, KeyError> {
        if file.algorithm != ALGORITHM {
            return Err(KeyError(format!(
                "algorithm {:?} is not ed25519",
                file.algorithm
            )));
        }
        let mut seed = [0u8; 32];
        hex::decode_to_slice(&file.secret_key, &mut seed)
            .map_err(|_| KeyError("secret_key is not 64 hex digits".into()))?;
        let key = Self(ed25519_dalek::SigningKey::from_bytes(&seed));
        if key.key_id() != file.key_id {
            return Err(KeyError(format!(
                "key_id {} does not match the key (its id is {})",
                file.key_id,
                key.key_id()
            )));
        }
        Ok(key)
    }

    /// The file form of this private key.
    pub fn to_file(&self) -> SigningKeyFile {
        SigningKeyFile {
            algorithm: ALGORITHM.into(),
            key_id: self.key_id(),
            secret_key: hex::encode(self.0.to_bytes()),
        }
    }

    /// The id of this key.
    pub fn key_id(&self) -> KeyId {
        KeyId::of(&self.0.verifying_key())
    }

    /// The public half, in file form.
    pub fn public_key_file(&self) -> PublicKeyFile {
        PublicKeyFile {
            algorithm: ALGORITHM.into(),
            key_id: self.key_id(),
            public_key: hex::encode(self.0.verifying_key().as_bytes()),
        }
    }

    /// Signs `message`; ed25519 is deterministic, so the same key and bytes give the same file.
    pub fn sign(&self, message: &[u8]) -> SignatureFile {
        SignatureFile {
            algorithm: ALGORITHM.into(),
            key_id: self.key_id(),
            signature: hex::encode(self.0.sign(message).to_bytes()),
        }
    }
}

/// Public keys a verifier trusts, by id.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedKeys(BTreeMap<KeyId, ed25519_dalek::VerifyingKey>);

/// The outcome of checking a signature against [`TrustedKeys`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignatureCheck {
    /// Signed by a trusted key.
    Valid,
    /// The key id is not trusted.
    UnknownKey,
    /// The key is trusted but the signature does not match the bytes.
    Invalid,
}

impl TrustedKeys {
    /// Adds a key file, checking its algorithm and that its id matches the key.
    pub(crate) fn insert(&mut self, file: &PublicKeyFile) -> Result<(), KeyError> {
        if file.algorithm != ALGORITHM {
            return Err(KeyError(format!(
                "algorithm {:?} is not ed25519",
                file.algorithm
            )));
        }
        let mut raw = [0u8; 32];
        hex::decode_to_slice(&file.public_key, &mut raw)
            .map_err(|_| KeyError("public_key is not 64 hex digits".into()))?;
        let key = ed25519_dalek::VerifyingKey::from_bytes(&raw)
            .map_err(|_| KeyError("public_key is not a valid ed25519 point".into()))?;
        if KeyId::of(&key) != file.key_id {
            return Err(KeyError(format!(
                "key_id {} does not match the key (its id is {})",
                file.key_id,
                KeyId::of(&key)
            )));
        }
        self.0.insert(file.key_id.clone(), key);
        Ok(())
    }

    /// Checks `signature` over `message`.
    pub(crate) fn check(&self, message: &[u8], signature: &SignatureFile) -> SignatureCheck {
        let Some(key) = self.0.get(&signature.key_id) else {
            return SignatureCheck::UnknownKey;
        };
        let mut raw = [0u8; 64];
        if signature.algorithm != ALGORITHM
            || hex::decode_to_slice(&signature.signature, &mut raw).is_err()
        {
            return SignatureCheck::Invalid;
        }
        let sig = ed25519_dalek::Signature::from_bytes(&raw);
        match key.verify(message, &sig) {
            Ok(()) => SignatureCheck::Valid,
            Err(_) => SignatureCheck::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_bytes_and_key() {
        let key = SigningKey::generate().unwrap();
        let mut trusted = TrustedKeys::default();
        trusted.insert(&key.public_key_file()).unwrap();
        let sig = key.sign(b"manifest");
        assert_eq!(trusted.check(b"manifest", &sig), SignatureCheck::Valid);
        assert_eq!(trusted.check(b"manifesT", &sig), SignatureCheck::Invalid);
        let other = SigningKey::generate().unwrap();
        assert_eq!(
            trusted.check(b"manifest", &other.sign(b"manifest")),
            SignatureCheck::UnknownKey
        );
    }

    #[test]
    fn key_files_round_trip_and_ids_cannot_lie() {
        let key = SigningKey::generate().unwrap();
        let again = SigningKey::from_file(&key.to_file()).unwrap();
        assert_eq!(again.key_id(), key.key_id());
        let mut lying = key.public_key_file();
        lying.key_id = SigningKey::generate().unwrap().key_id();
        assert!(TrustedKeys::default().insert(&lying).is_err());
    }
}

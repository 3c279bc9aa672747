//! SHA-256 digests, written as 64 lowercase hex digits.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// Digests `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // On the stack: digests are written into every payload, audit entry and statement.
        let mut text = [0u8; 64];
        hex::encode_to_slice(self.0, &mut text).expect("64 hex digits hold 32 bytes");
        f.write_str(std::str::from_utf8(&text).expect("hex digits are ASCII"))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

/// A string that is not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a sha256 digest: use 64 lowercase hex digits")]
pub struct DigestParseError(pub String);

impl FromStr for Sha256Digest {
    type Err = DigestParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let mut out = [0u8; 32];
        match hex::decode_to_slice(s, &mut out) {
            Ok(()) if lower => Ok(Self(out)),
            _ => Err(DigestParseError(s.to_owned())),
        }
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Parsed from the borrowed text: a manifest holds one digest per entry.
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = Sha256Digest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("64 lowercase hex digits")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Sha256Digest, E> {
                text.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_empty_input_is_the_known_value() {
        assert_eq!(
            Sha256Digest::of(b"").to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parsing_requires_64_lowercase_hex_digits() {
        let d = Sha256Digest::of(b"x");
        assert_eq!(d.to_string().parse::<Sha256Digest>().unwrap(), d);
        assert!(
            d.to_string()
                .to_uppercase()
                .parse::<Sha256Digest>()
                .is_err()
        );
        assert!("abc".parse::<Sha256Digest>().is_err());
    }
}

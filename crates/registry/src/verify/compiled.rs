//! What one verification has already compiled, by the digest of the bytes it came from.
//!
//! Releases are append-only, so a registry's releases grow in number and mostly republish the
//! same schemas and checks byte for byte. Compiling a JSON Schema or a check script is the
//! largest fixed cost of verifying a release, and dropping the compiled forms is the next, so
//! each distinct document is compiled once per verification and shared between the releases
//! that list it. The key is the entry's sha256, which authentication has already matched to its
//! bytes; a compiled check is also keyed by the limits its step gives it, since the same script
//! read by a step with larger outputs runs under larger bounds. This lives only as long as one
//! [`super::verify_registry`] call: nothing here outlives the files it was computed from, and
//! its size is bounded by theirs.

use std::{collections::BTreeMap, sync::Arc};

use rimthan_checks::{Check, Limits};

use crate::digest::Sha256Digest;

/// A schema's parsed document and its compiled validator.
pub(crate) type CompiledSchema = (Arc<serde_json::Value>, Arc<jsonschema::Validator>);

/// Compiled schemas and checks of one verification, by content digest.
#[derive(Default)]
pub(crate) struct Compiled {
    schemas: BTreeMap<Sha256Digest, CompiledSchema>,
    checks: BTreeMap<Sha256Digest, Vec<(Limits, Arc<Check>)>>,
}

impl Compiled {
    pub(crate) fn schema(&self, sha256: &Sha256Digest) -> Option<CompiledSchema> {
        self.schemas.get(sha256).cloned()
    }

    pub(crate) fn keep_schema(&mut self, sha256: Sha256Digest, schema: CompiledSchema) {
        self.schemas.insert(sha256, schema);
    }

    pub(crate) fn check(&self, sha256: &Sha256Digest, limits: &Limits) -> Option<Arc<Check>> {
        self.checks
            .get(sha256)?
            .iter()
            .find(|(kept, _)| kept == limits)
            .map(|(_, check)| Arc::clone(check))
    }

    pub(crate) fn keep_check(&mut self, sha256: Sha256Digest, limits: Limits, check: Arc<Check>) {
        self.checks.entry(sha256).or_default().push((limits, check));
    }
}

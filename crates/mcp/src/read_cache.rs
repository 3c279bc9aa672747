//! Resource reads, kept by what determines them: the registry snapshot in use and the URI read.
//!
//! Release content is immutable, and what the catalogue builds from it (a summary, the bootstrap
//! text, an entry found among a release's manifest) depends only on the verified registry and
//! the server's profile, which is fixed for the server's life. So a successful read is kept,
//! serialized never: the result itself, cloned for each answer. Only reads that succeeded are
//! kept, so every key is a URI the registry serves (at most [`catalogue::MAX_URI_BYTES`]); a
//! caller cannot add keys of its own, and nothing else of the request (its id, headers or
//! `_meta`) is part of the key. A reload makes every kept read a miss: each is checked against
//! the snapshot it was built from.

use std::sync::{Arc, Weak};

use rimthan_engine::cache::{BoundedCache, CacheBounds, CacheStats, json_weight};
use rimthan_registry::VerifiedRegistry;
use rmcp::model::ReadResourceResult;

use crate::catalogue;

/// The bounds of the read cache: a release's documents are a few KiB each.
pub(crate) const READ_CACHE_BOUNDS: CacheBounds = CacheBounds {
    max_bytes: 32 * 1024 * 1024,
    max_entries: 8192,
};

#[derive(Debug)]
struct KeptRead {
    result: ReadResourceResult,
    /// The snapshot the read was answered from; weak, so a replaced registry is not kept alive.
    registry: Weak<VerifiedRegistry>,
}

/// Successful reads by URI, for the registry snapshot they were answered from.
#[derive(Debug)]
pub(crate) struct ReadCache(BoundedCache<Box<str>, Arc<KeptRead>>);

impl Default for ReadCache {
    fn default() -> Self {
        Self(BoundedCache::new(READ_CACHE_BOUNDS))
    }
}

impl ReadCache {
    /// The read of `uri` in `registry`: kept, or made by `read` and kept when it succeeds.
    pub(crate) fn read(
        &self,
        registry: &Arc<VerifiedRegistry>,
        uri: &str,
        read: impl FnOnce() -> Result<ReadResourceResult, rmcp::ErrorData>,
    ) -> Result<ReadResourceResult, rmcp::ErrorData> {
        let current =
            |kept: &Arc<KeptRead>| std::ptr::eq(kept.registry.as_ptr(), Arc::as_ptr(registry));
        if let Some(kept) = self.0.get_if(uri, current) {
            return Ok(kept.result.clone());
        }
        let result = read()?;
        if uri.len() <= catalogue::MAX_URI_BYTES {
            let weight = uri.len() + json_weight(&result);
            let kept = KeptRead {
                result: result.clone(),
                registry: Arc::downgrade(registry),
            };
            self.0.insert(uri.into(), Arc::new(kept), weight);
        }
        Ok(result)
    }

    /// What the cache holds and how it has served.
    pub(crate) fn stats(&self) -> CacheStats {
        self.0.stats()
    }
}

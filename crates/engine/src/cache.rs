//! Least-recently-used caches bounded twice: by the bytes their values weigh and by how many
//! entries they hold. Whatever is inserted, a cache never holds more than either bound: the
//! least recently used entries go first, and a value heavier than the whole byte bound is not
//! kept at all. Keys are the caller's to keep small: every cache built on this one keys by
//! values the server made or bounded (a session id and revision, a registry URI), never by
//! bytes a caller sent (`docs/mcp.md` §3.1).

use std::{
    borrow::Borrow,
    hash::Hash,
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use hashlink::LruCache;

/// The bounds of one cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBounds {
    /// Most bytes the kept values may weigh together.
    pub max_bytes: usize,
    /// Most entries kept.
    pub max_entries: usize,
}

/// What a cache holds and how it has served, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries held now.
    pub entries: usize,
    /// Bytes their values weigh now.
    pub bytes: usize,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that found nothing current.
    pub misses: u64,
    /// Entries dropped to stay within the bounds.
    pub evictions: u64,
}

/// An unsynchronised weighed LRU map: the part a lock-holding owner (the session cache) embeds.
#[derive(Debug)]
pub(crate) struct Weighed<K: Hash + Eq, V> {
    entries: LruCache<K, (V, usize)>,
    bytes: usize,
    bounds: CacheBounds,
    evictions: u64,
}

impl<K: Hash + Eq, V> Weighed<K, V> {
    pub(crate) fn new(bounds: CacheBounds) -> Self {
        Self {
            entries: LruCache::new_unbounded(),
            bytes: 0,
            bounds,
            evictions: 0,
        }
    }

    /// The value under `key`, now the most recently used.
    pub(crate) fn get<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// Keeps `value` weighing `weight` bytes under `key`, dropping the least recently used
    /// entries until both bounds hold; `false` (and nothing kept) when the value alone weighs
    /// more than the byte bound.
    pub(crate) fn insert(&mut self, key: K, value: V, weight: usize) -> bool {
        self.remove(&key);
        if weight > self.bounds.max_bytes || self.bounds.max_entries == 0 {
            return false;
        }
        self.bytes += weight;
        self.entries.insert(key, (value, weight));
        while self.bytes > self.bounds.max_bytes || self.entries.len() > self.bounds.max_entries {
            let Some((_, (_, w))) = self.entries.remove_lru() else {
                break;
            };
            self.bytes -= w;
            self.evictions += 1;
        }
        true
    }

    pub(crate) fn remove(&mut self, key: &K) {
        if let Some((_, w)) = self.entries.remove(key) {
            self.bytes -= w;
        }
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.entries.len(),
            bytes: self.bytes,
            evictions: self.evictions,
            ..CacheStats::default()
        }
    }
}

/// A weighed LRU cache shared between tasks, counting its hits and misses.
#[derive(Debug)]
pub struct BoundedCache<K: Hash + Eq, V> {
    inner: Mutex<Weighed<K, V>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<K: Hash + Eq, V: Clone> BoundedCache<K, V> {
    /// An empty cache within `bounds`.
    pub fn new(bounds: CacheBounds) -> Self {
        Self {
            inner: Mutex::new(Weighed::new(bounds)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Weighed<K, V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value under `key` if `current` holds for it, counted as a hit; otherwise a miss.
    pub fn get_if<Q: Hash + Eq + ?Sized>(
        &self,
        key: &Q,
        current: impl FnOnce(&V) -> bool,
    ) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let found = self.lock().get(key).filter(|v| current(v)).cloned();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `value` weighing `weight` bytes under `key` (see [`Weighed::insert`]); whether it
    /// was kept.
    pub fn insert(&self, key: K, value: V, weight: usize) -> bool {
        self.lock().insert(key, value, weight)
    }

    /// What the cache holds and how it has served.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            ..self.lock().stats()
        }
    }
}

/// The bytes `value` serializes to as JSON, counted without keeping them: what a cached answer
/// weighs, near enough, in the memory its decoded form holds.
pub fn json_weight(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A value that does not serialize weighs as much as any cache allows: it is never kept.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

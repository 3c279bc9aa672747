//! The engine's bounded caches: what they keep, that they evict within their bounds, and that a
//! kept active step never answers for a session that has moved on.

use std::sync::Arc;

use rimthan_engine::{
    ActivePayload, ActiveStepRequest, Engine, Status, Store, Verdict,
    cache::{BoundedCache, CacheBounds},
};

use crate::common::*;

fn cache(max_bytes: usize, max_entries: usize) -> BoundedCache<u32, &'static str> {
    BoundedCache::new(CacheBounds {
        max_bytes,
        max_entries,
    })
}

#[test]
fn a_cache_evicts_the_least_recently_used_past_its_byte_bound() {
    let cache = cache(100, 1000);
    for key in 0..10 {
        assert!(cache.insert(key, "v", 30));
        // Key 0 is read after every insert, so it stays the most recently used.
        cache.get_if(&0, |_| true);
    }
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.bytes, stats.evictions), (3, 90, 7));
    assert!(cache.get_if(&0, |_| true).is_some());
    assert!(cache.get_if(&9, |_| true).is_some());
    assert!(cache.get_if(&1, |_| true).is_none());
}

#[test]
fn a_cache_evicts_past_its_entry_bound_and_keeps_nothing_heavier_than_its_byte_bound() {
    let cache = cache(1000, 4);
    for key in 0..10 {
        cache.insert(key, "v", 1);
    }
    assert_eq!(cache.stats().entries, 4);
    assert!(!cache.insert(99, "heavy", 1001));
    assert!(cache.get_if(&99, |_| true).is_none());
    // Replacing a key replaces its weight.
    cache.insert(9, "w", 500);
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.bytes), (4, 503));
}

#[test]
fn a_lookup_that_is_not_current_is_a_miss() {
    let cache = cache(1000, 10);
    cache.insert(1, "old", 1);
    assert!(cache.get_if(&1, |v| *v == "new").is_none());
    assert!(cache.get_if(&1, |v| *v == "old").is_some());
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 1));
}

async fn read(engine: &Engine, payload: &ActivePayload) -> ActivePayload {
    let request = ActiveStepRequest {
        checkpoint: payload.checkpoint.clone(),
    };
    step_active(engine.active_step(request, None).await.unwrap())
}

/// An engine over the same store and registry whose caches are empty: what an answer computed
/// from the stored session alone is.
async fn uncached(engine: &Engine) -> Engine {
    Engine::new(engine.releases().clone(), engine.store().clone(), None)
        .await
        .unwrap()
}

async fn revision(store: &Arc<dyn Store>, payload: &ActivePayload) -> u64 {
    let id = payload.session_id.parse().unwrap();
    store.load_session(&id).await.unwrap().unwrap().revision
}

async fn a_kept_active_step_never_outlives_a_change(store: Arc<dyn Store>) {
    let engine = engine_on(store.clone()).await;
    let start = start_request("claude-code");
    let payload = active(engine.start(start.clone(), None).await.unwrap());
    let payload = pass_step(&engine, &payload, &start).await;
    assert_eq!(
        revision(&store, &payload).await,
        2,
        "every change moves it by one"
    );
    let first = read(&engine, &payload).await;
    assert_eq!(read(&engine, &payload).await, first);
    let kept = engine.active_step_cache();
    assert_eq!((kept.entries, kept.hits, kept.misses), (1, 1, 1));

    // A prepare keeps the checkpoint and moves the revision: the payload is computed anew.
    let plan = ready(
        engine
            .prepare(prepare(&payload, &start), None)
            .await
            .unwrap(),
    );
    assert_eq!(revision(&store, &payload).await, 3);
    let after = read(&engine, &payload).await;
    assert_eq!(after, read(&uncached(&engine).await, &payload).await);
    assert_eq!(engine.active_step_cache().misses, 2);

    // A failing round sends the step back: the new checkpoint shows the revise state, the old
    // one is refused.
    let revise = step_active(
        engine
            .submit(submit(&payload, &plan, Verdict::Fail), None)
            .await
            .unwrap(),
    );
    assert_eq!(revision(&store, &payload).await, 4);
    assert_eq!(read(&engine, &revise).await.status, Status::Revise);
    assert_eq!(
        read(&engine, &revise).await,
        read(&uncached(&engine).await, &revise).await
    );
    let stale = engine
        .active_step(
            ActiveStepRequest {
                checkpoint: payload.checkpoint.clone(),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(codes(&stale), ["stale_checkpoint"]);
}

#[tokio::test]
async fn a_kept_active_step_never_outlives_a_change_on_sqlite() {
    a_kept_active_step_never_outlives_a_change(sqlite_memory().await).await;
    let (store, _dir) = sqlite_file().await;
    a_kept_active_step_never_outlives_a_change(store).await;
}

#[tokio::test]
async fn a_kept_active_step_never_outlives_a_change_on_postgres() {
    if let Some(store) = postgres().await {
        a_kept_active_step_never_outlives_a_change(store).await;
    }
}

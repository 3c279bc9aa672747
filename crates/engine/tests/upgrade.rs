//! An upgrade of the binary: a store written by a binary that embedded one release holds
//! sessions pinned to it, and the next binary, which embeds that release unchanged beside a newer
//! one on `stable`, serves and finishes them on their own release while new sessions start on the
//! newer one.

use std::{path::Path, sync::Arc};

use rimthan_engine::{ActiveStepRequest, Engine, Releases, Status, Store, store::SqliteStore};
use rimthan_registry::{
    RegistryFiles, ReleaseId, TrustPolicy, VerifiedRegistry, build_release, check_published,
    publish, set_channel, verify_registry,
};
use rimthan_testkit::{
    fs::copy_dir,
    registry::{default_key, repo_root},
};

use crate::common::*;

/// Appends `release` built from `source` to the registry at `out` and points `stable` at it,
/// as `registry/build-default.sh` does.
fn append(out: &Path, source: &Path, release: &ReleaseId) {
    publish(
        out,
        &build_release(source, release, &default_key()).unwrap(),
    )
    .unwrap();
    set_channel(out, &"stable".parse().unwrap(), release).unwrap();
}

/// The registry a binary built from `out` would embed: every release its `published.json`
/// records, trusted by those digests alone.
fn embedded_by_a_binary_of(out: &Path) -> VerifiedRegistry {
    let files = RegistryFiles::from_dir(out).unwrap();
    let lock = check_published(&files).unwrap();
    verify_registry(&files, &TrustPolicy::Pinned(lock.releases)).unwrap()
}

async fn engine(registry: VerifiedRegistry, url: &str) -> (Engine, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(url).await.unwrap());
    let releases = Arc::new(Releases::new(registry, "stable".parse().unwrap()));
    (
        Engine::new(releases, store.clone(), None).await.unwrap(),
        store,
    )
}

#[tokio::test]
async fn a_session_pinned_to_an_older_embedded_release_finishes_under_the_next_binary() {
    let (source, out, data) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    copy_dir(&repo_root().join("registry/source"), source.path());
    let url = format!("sqlite://{}", data.path().join("rimthan.db").display());
    let (old, new): (ReleaseId, ReleaseId) =
        ("2027.01.0".parse().unwrap(), "2027.02.0".parse().unwrap());

    // The older binary: one release, a session started and one step passed.
    append(out.path(), source.path(), &old);
    let (engine_before, store) = engine(embedded_by_a_binary_of(out.path()), &url).await;
    let start = start_request("codex");
    let setup = active(engine_before.start(start.clone(), None).await.unwrap());
    assert_eq!(setup.release, old.as_str());
    let second = pass_step(&engine_before, &setup, &start).await;
    drop((engine_before, store));

    // The next binary: a new skill version appended as a new release, promoted on `stable`.
    let skill = source.path().join("skills/rimthan-research/1.0.1");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: rimthan-research\ndescription: Research, revised.\n---\nRevised.\n",
    )
    .unwrap();
    append(out.path(), source.path(), &new);
    let (engine_after, _store) = engine(embedded_by_a_binary_of(out.path()), &url).await;

    let resumed = engine_after
        .active_step(
            ActiveStepRequest {
                checkpoint: second.checkpoint.clone(),
            },
            None,
        )
        .await
        .unwrap();
    let mut payload = step_active(resumed);
    assert_eq!(
        payload.release,
        old.as_str(),
        "the session stays on its release"
    );
    assert_eq!(payload.step, second.step);
    while payload.status != Status::Completed {
        payload = pass_step(&engine_after, &payload, &start).await;
        assert_eq!(payload.release, old.as_str());
    }

    let fresh = active(
        engine_after
            .start(start_request("codex"), None)
            .await
            .unwrap(),
    );
    assert_eq!(
        fresh.release,
        new.as_str(),
        "new sessions start on the promoted release"
    );
}

//! Durability under storage faults (`docs/engine.md` §7.2): a commit that fails acknowledges
//! nothing, leaves the writer clean, and the store recovers by itself once the fault is gone.
//! Every change that was acknowledged is there after a restart.
//!
//! SQLite's disk fills for real: the database lives on a 4 MiB tmpfs mounted for the test
//! (root only; `RIMTHAN_TEST_REQUIRE_TMPFS=1`, set by CI, makes a failed mount an error rather
//! than a skip). PostgreSQL's writer loses its connection mid-batch: the server terminates it.
//! (A full PostgreSQL disk fails the same commit path; it is not filled here, because a
//! tablespace on a tmpfs that goes away takes the shared test server down with it: its
//! checkpointer panics on the missing files.)

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::Duration,
};

use rimthan_engine::{
    Engine, SessionId, StartResult, Store,
    store::{PostgresStore, SqliteStore},
};

use crate::common::*;

/// A tmpfs of a few MiB mounted on a temporary folder, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            return Some(Self { dir });
        }
        if std::env::var_os("RIMTHAN_TEST_REQUIRE_TMPFS").is_some() {
            panic!("RIMTHAN_TEST_REQUIRE_TMPFS is set but a tmpfs could not be mounted");
        }
        eprintln!("cannot mount a tmpfs (not root?): skipping this disk-full test");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Takes every free byte with a filler file, which [`SmallDisk::free`] removes.
    fn fill(&self) -> PathBuf {
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 << 10];
        while file.write_all(&block).is_ok() {}
        while file.write_all(&[0]).is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Starts a session, returning its id if the start was acknowledged.
async fn start_one(engine: &Engine) -> Option<SessionId> {
    match engine.start(start_request("claude-code"), None).await {
        Ok(StartResult::Active(payload)) => Some(payload.session_id.parse().unwrap()),
        Ok(other) => panic!(
            "a start was answered neither active nor with a store error: {}",
            serde_json::to_string(&other).unwrap()
        ),
        Err(e) => {
            assert!(
                e.code().starts_with("store_"),
                "a failed start must name the store: {e}"
            );
            None
        }
    }
}

/// Every acknowledged session is stored, as a fresh reader of the store sees it.
async fn assert_all_stored(store: &dyn Store, acknowledged: &[SessionId], when: &str) {
    for id in acknowledged {
        assert!(
            store.load_session(id).await.unwrap().is_some(),
            "{when}: acknowledged session {id} is lost"
        );
    }
}

/// Disk full on SQLite: starts that find no space fail, none is acknowledged without being
/// stored, the writer needs no restart once space returns, and an outside reader and a restart
/// both find every acknowledged session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_disk_full_loses_no_acknowledged_session() {
    let Some(disk) = SmallDisk::mount("4m") else {
        return;
    };
    let url = format!("sqlite://{}", disk.path().join("rimthan.db").display());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
    let engine = engine_on(store.clone()).await;
    let mut acknowledged = Vec::new();
    for _ in 0..3 {
        acknowledged.extend(start_one(&engine).await);
    }
    assert_eq!(
        acknowledged.len(),
        3,
        "starts failed before the disk filled"
    );

    let filler = disk.fill();
    let mut refused = 0;
    for _ in 0..40 {
        match start_one(&engine).await {
            Some(id) => acknowledged.push(id),
            None => {
                refused += 1;
                assert!(
                    store.ping().await.is_err(),
                    "the store calls itself ready right after a commit failed on a full disk"
                );
            }
        }
    }
    assert!(refused > 0, "no start failed on a full disk");

    std::fs::remove_file(filler).unwrap();
    let mut after = Vec::new();
    for _ in 0..5 {
        after.extend(start_one(&engine).await);
    }
    assert_eq!(
        after.len(),
        5,
        "the store did not recover once space returned"
    );
    acknowledged.extend(after);
    store.ping().await.unwrap();

    let reader = SqliteStore::open_read_only(&url).await.unwrap();
    assert_all_stored(&reader, &acknowledged, "read beside the writer").await;
    drop(reader);
    drop(engine);
    drop(store);
    // The writer task and its connections close on their own: give them a moment to let go of
    // the file lock before a new process's worth of store opens it.
    let reopened = loop {
        match SqliteStore::open(&url).await {
            Ok(store) => break store,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert_all_stored(&reopened, &acknowledged, "after a restart").await;
    // Commits that failed mid-append left no half of an entry: every chain verifies up to its
    // last committed entry.
    let verified = rimthan_engine::chain::verify_audit(&reopened)
        .await
        .unwrap();
    assert!(verified.verified(), "{:?}", verified.breaks);
}

/// The PostgreSQL writer's connection dies mid-batch (the server terminates it): the writes
/// of that batch fail or are stored, never acknowledged and lost, and the store goes on with
/// new connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_writer_connection_killed_loses_no_acknowledged_session() {
    let Ok(url) = std::env::var(PG_ENV) else {
        eprintln!("{PG_ENV} is not set: skipping this PostgreSQL test");
        return;
    };
    let schema = format!("t_{}", SessionId::generate());
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    let engine = Arc::new(engine_on(store.clone()).await);
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    // Kills land between batches as often as inside one: go on until some landed inside.
    for round in 0..50 {
        if refused > 0 && round >= 5 {
            break;
        }
        let starts: Vec<_> = (0..32)
            .map(|_| {
                let engine = engine.clone();
                tokio::spawn(async move { start_one(&engine).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(2 * (round % 5))).await;
        // Every connection of this store is named after its schema.
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(&schema)
        .execute(&admin)
        .await
        .unwrap();
        for start in starts {
            match start.await.unwrap() {
                Some(id) => acknowledged.push(id),
                None => refused += 1,
            }
        }
    }
    assert!(
        refused > 0,
        "no start failed while its connection was killed"
    );
    let mut after = Vec::new();
    for _ in 0..5 {
        after.extend(start_one(&engine).await);
    }
    assert_eq!(
        after.len(),
        5,
        "the store did not recover from lost connections"
    );
    acknowledged.extend(after);
    let reopened = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    assert_all_stored(&reopened, &acknowledged, "read by a new replica").await;
    // Connections killed mid-append left no half of an entry: every chain verifies up to its
    // last committed entry.
    let verified = rimthan_engine::chain::verify_audit(&reopened)
        .await
        .unwrap();
    assert!(verified.verified(), "{:?}", verified.breaks);
}

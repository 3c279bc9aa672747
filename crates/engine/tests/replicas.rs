//! Sessions served from memory stay correct across processes: replicas on one PostgreSQL
//! database each keep their own cache, and a SQLite file has exactly one writer process.

use std::sync::Arc;

use rimthan_engine::{ActivePayload, ActiveStepRequest, Engine, Status, Store, store::SqliteStore};

use crate::common::*;

async fn read(engine: &Engine, checkpoint: &str) -> rimthan_engine::StepResult {
    engine
        .active_step(
            ActiveStepRequest {
                checkpoint: checkpoint.to_owned(),
            },
            None,
        )
        .await
        .unwrap()
}

/// At every change made on one replica, both replicas serve the new checkpoint the step the
/// store holds, and both refuse the checkpoint it replaced, though each had cached the session
/// as it was before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_serve_a_step_older_than_the_store() {
    let Some([a, b]) = postgres_replicas().await else {
        return;
    };
    let replicas = [engine_on(a).await, engine_on(b).await];
    let start = start_request("claude-code");
    let mut payload: ActivePayload = active(replicas[0].start(start.clone(), None).await.unwrap());
    for replica in &replicas {
        assert_eq!(
            step_active(read(replica, &payload.checkpoint).await),
            payload
        );
    }
    let mut changes = 0;
    while payload.status != Status::Completed {
        let mover = &replicas[changes % 2];
        let next = pass_step(mover, &payload, &start).await;
        for replica in &replicas {
            assert_eq!(
                step_active(read(replica, &next.checkpoint).await),
                next,
                "change {changes}: a replica served another step than the store's"
            );
            let stale = read(replica, &payload.checkpoint).await;
            assert_eq!(
                codes(&stale),
                ["stale_checkpoint"],
                "change {changes}: a replaced checkpoint was served"
            );
        }
        payload = next;
        changes += 1;
    }
    assert!(changes >= 2, "the workflow moved through one replica only");
}

/// Retention on one replica is seen by the other: replica A prunes a completed session that
/// replica B still holds in memory, the owner starts again with the same idempotency key (the
/// same session id) through B, and B serves every step of the new session, never its copy of
/// the pruned one, even when the new session reaches the revision the pruned one had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_tell_a_session_started_anew_from_the_one_retention_pruned() {
    let Some([a, b]) = postgres_replicas().await else {
        return;
    };
    let (pruner, server) = (engine_on(a.clone()).await, engine_on(b).await);
    let mut start = start_request("claude-code");
    start.idempotency_key = Some("nightly-run".to_owned().try_into().unwrap());
    let mut pruned = active(pruner.start(start.clone(), None).await.unwrap());
    while pruned.status != Status::Completed {
        pruned = pass_step(&pruner, &pruned, &start).await;
        step_active(read(&server, &pruned.checkpoint).await);
    }
    // A pruned session is older than anything that replaces it; the store tells them apart by
    // their creation times, which are whole seconds.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let gone = a
        .prune("9999-12-31T00:00:00Z", pruner.provenance_key())
        .await
        .unwrap();
    assert_eq!(gone.sessions, 1);

    let mut anew = active(server.start(start.clone(), None).await.unwrap());
    assert_eq!(anew.session_id, pruned.session_id);
    assert_eq!(anew.step.as_ref().unwrap().id, "setup-workspace");
    while anew.status != Status::Completed {
        anew = pass_step(&server, &anew, &start).await;
        assert_eq!(step_active(read(&server, &anew.checkpoint).await), anew);
    }
}

/// A second process cannot open a SQLite file another one writes: its cache would go stale
/// behind the first one's changes. The lock goes with the store. Reading beside the writer (an
/// inspection command) is allowed, and sees what the writer committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_has_one_writer_process() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("one.db").display());
    let first = SqliteStore::open(&url).await.unwrap();
    let engine = engine_on(Arc::new(first.clone())).await;
    let payload = active(engine.start(start_request("codex"), None).await.unwrap());
    drop(engine);

    let reader = SqliteStore::open_read_only(&url).await.unwrap();
    let id = payload.session_id.parse().unwrap();
    let seen = reader.load_session(&id).await.unwrap().unwrap();
    assert_eq!(seen.seq, 0);
    let log = reader.audit_log(&id).await.unwrap();
    let write = reader.append_audit(&log[0]).await.unwrap_err();
    assert!(write.message.contains("read-only"), "{}", write.message);

    let refused = SqliteStore::open(&url).await.unwrap_err();
    assert_eq!(
        refused.kind,
        rimthan_engine::store::StoreErrorKind::Unavailable
    );
    assert!(
        refused.message.contains("in use by another process"),
        "{}",
        refused.message
    );
    drop(first);
    SqliteStore::open(&url).await.unwrap();
}

/// The writer lock belongs to the file, not to its spelling: the same database reached through
/// a symlinked file or a symlinked folder is refused while a writer holds it, and a database
/// with a second hard link, which no lock could tie to the first name, is refused outright.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_a_sqlite_file_starts_a_second_writer() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("one.db");
    let first = SqliteStore::open(&format!("sqlite://{}", real.display()))
        .await
        .unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("link.db")).unwrap();
    std::os::unix::fs::symlink(dir.path(), dir.path().join("folder")).unwrap();
    for spelling in [
        dir.path().join("link.db"),
        dir.path().join("folder").join("one.db"),
        dir.path().join(".").join("one.db"),
    ] {
        let refused = SqliteStore::open(&format!("sqlite://{}", spelling.display()))
            .await
            .unwrap_err();
        assert!(
            refused.message.contains("in use by another process"),
            "{}: {}",
            spelling.display(),
            refused.message
        );
    }
    drop(first);

    std::fs::hard_link(&real, dir.path().join("hard.db")).unwrap();
    for spelling in [&real, &dir.path().join("hard.db")] {
        let refused = SqliteStore::open(&format!("sqlite://{}", spelling.display()))
            .await
            .unwrap_err();
        assert!(
            refused.message.contains("2 hard links"),
            "{}: {}",
            spelling.display(),
            refused.message
        );
    }
}

/// The audit log stays append-only to anything but retention: a delete of a row younger than
/// the cutoff retention recorded is refused by the database itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_rows_leave_only_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("log.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.unwrap());
    let engine = engine_on(store.clone()).await;
    active(engine.start(start_request("codex"), None).await.unwrap());
    let raw = sqlx::SqlitePool::connect(&url).await.unwrap();
    for statement in [
        "DELETE FROM audit_log",
        "UPDATE audit_log SET outcome = 'active'",
    ] {
        let refused = sqlx::query(statement).execute(&raw).await.unwrap_err();
        assert!(refused.to_string().contains("append-only"), "{refused}");
    }
    store
        .prune("2000-01-01T00:00:00Z", engine.provenance_key())
        .await
        .unwrap();
    let refused = sqlx::query("DELETE FROM audit_log")
        .execute(&raw)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("only by retention"),
        "{refused}"
    );
}

/// A store written before the listed columns existed gets them filled from each session's state
/// when it is opened by this version (migration 0004), on SQLite and on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_store_gets_its_sessions_listed_after_migrating() {
    use rimthan_engine::{Principal, SessionQuery};
    // A session as this version stores it, to write into stores at the older schema.
    let current = sqlite_memory().await;
    let engine = engine_on(current.clone()).await;
    let owner = Principal {
        subject: "ada".into(),
        organization: Some("lab".into()),
    };
    let payload = active(
        engine
            .start(start_request("codex"), Some(&owner))
            .await
            .unwrap(),
    );
    let id = payload.session_id.parse().unwrap();
    let session = current.load_session(&id).await.unwrap().unwrap();
    let state = serde_json::to_string(&*session).unwrap();
    let check = |listed: Vec<rimthan_engine::SessionSummary>| {
        assert_eq!(listed.len(), 1);
        let row = &listed[0];
        assert_eq!(row.id, session.id);
        assert_eq!(row.workflow, session.workflow.to_string());
        assert_eq!(row.workflow_version, session.workflow_version.to_string());
        assert_eq!(row.release, session.release.to_string());
        assert_eq!(row.harness, "codex");
        assert_eq!(row.principal.as_deref(), Some("ada"));
        assert_eq!(row.organization.as_deref(), Some("lab"));
    };
    let query = SessionQuery {
        limit: 10,
        ..Default::default()
    };

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let old = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
            .await
            .unwrap();
        let mut migrator = sqlx::migrate!("./migrations/sqlite");
        migrator.migrations = migrator.migrations[..3].to_vec().into();
        migrator.run(&old).await.unwrap();
        sqlx::query(
            "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status) \
             VALUES (?, 0, 0, ?, ?, ?, 'active')",
        )
        .bind(session.id.as_str())
        .bind(&state)
        .bind(&session.created_at)
        .bind(&session.updated_at)
        .execute(&old)
        .await
        .unwrap();
        old.close().await;
    }
    check(
        SqliteStore::open(&url)
            .await
            .unwrap()
            .list_sessions(&query)
            .await
            .unwrap(),
    );

    let Ok(pg) = std::env::var(PG_ENV) else {
        return;
    };
    let schema = format!("t_{}", rimthan_engine::SessionId::generate());
    let options: sqlx::postgres::PgConnectOptions = pg.parse().unwrap();
    let admin = sqlx::PgPool::connect_with(options.clone()).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .unwrap();
    let old = sqlx::PgPool::connect_with(options.options([("search_path", schema.as_str())]))
        .await
        .unwrap();
    let mut migrator = sqlx::migrate!("./migrations/postgres");
    migrator.migrations = migrator.migrations[..3].to_vec().into();
    migrator.run(&old).await.unwrap();
    sqlx::query(
        "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status) \
         VALUES ($1, 0, 0, $2, $3, $4, 'active')",
    )
    .bind(session.id.as_str())
    .bind(&state)
    .bind(&session.created_at)
    .bind(&session.updated_at)
    .execute(&old)
    .await
    .unwrap();
    old.close().await;
    let store = rimthan_engine::store::PostgresStore::connect_in_schema(&pg, &schema)
        .await
        .unwrap();
    check(store.list_sessions(&query).await.unwrap());
}

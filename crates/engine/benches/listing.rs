//! Listing sessions from a store that holds 100,000 of them (SQLite file): the first page, and
//! pages filtered by status, workflow and organization. Run: `cargo bench -p rimthan-engine
//! --bench listing`. The rows are written straight into the table (the list reads only its
//! columns), spread over 4 workflows, 3 statuses and 20 organizations.

#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use rimthan_engine::{SessionQuery, Status, Store, store::SqliteStore};

const SESSIONS: usize = 100_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("many.db").display());
    let store =
        rt.block_on(async {
            // Migrate, then fill the table directly beside the (idle) store.
            drop(SqliteStore::open(&url).await.unwrap());
            let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
            let mut tx = pool.begin().await.unwrap();
            for i in 0..SESSIONS {
                let status = ["active", "revise", "completed"][i % 3];
                sqlx::query(
                "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status, \
                 workflow, workflow_version, release, harness, principal, organization, \
                 step_index, revise_rounds) VALUES (?, 0, 0, '{}', ?, ?, ?, ?, '1.0.0', \
                 '2026.12.0', 'codex', ?, ?, 1, 0)",
            )
            .bind(format!("{i:032x}"))
            .bind(format!("2026-11-{:02}T00:00:00Z", 1 + i % 28))
            .bind(format!("2026-12-{:02}T{:02}:{:02}:00Z", 1 + i % 3, i % 24, i % 60))
            .bind(status)
            .bind(format!("workflow-{}", i % 4))
            .bind(format!("participant-{i}"))
            .bind(format!("org-{}", i % 20))
            .execute(&mut *tx)
            .await
            .unwrap();
            }
            tx.commit().await.unwrap();
            pool.close().await;
            SqliteStore::open_read_only(&url).await.unwrap()
        });
    let mut group = c.benchmark_group("list_100k_sessions");
    let cases = [
        ("first_page", SessionQuery::default()),
        (
            "status_revise",
            SessionQuery {
                status: Some(Status::Revise),
                ..Default::default()
            },
        ),
        (
            "workflow_and_organization",
            SessionQuery {
                workflow: Some("workflow-1".into()),
                organization: Some("org-5".into()),
                ..Default::default()
            },
        ),
        (
            "page_600_of_status",
            SessionQuery {
                status: Some(Status::Completed),
                offset: 50 * 599,
                ..Default::default()
            },
        ),
    ];
    for (name, query) in cases {
        let query = SessionQuery { limit: 50, ..query };
        let listed = rt.block_on(store.list_sessions(&query)).unwrap();
        assert!(!listed.is_empty(), "{name} lists nothing");
        group.bench_function(name, |b| {
            b.iter(|| rt.block_on(store.list_sessions(&query)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Listing sessions from a store that holds 100,000 of them (SQLite file): the first page, and
//! pages filtered by status, workflow and organization; then the facilitator's statistics of
//! one workflow with 100,000 sessions and 300,000 judged submissions (`docs/engine.md` §7.5).
//! Run: `cargo bench -p rimthan-engine --bench listing`. The rows are written straight into the
//! tables (both read only columns): the list's spread over 4 workflows, 3 statuses and 20
//! organizations; the statistics' over 4 steps, 4 harnesses and 20 organizations.

#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use rimthan_engine::{SessionQuery, StatsQuery, Status, Store, store::SqliteStore};

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
    stats(c, &rt);
}

/// One workflow of 4 steps: session *i* stands at step `i % 5` (5 = completed), passed each step
/// before it in 1 to 100 minutes, and was sent back once on step 1 by one of two validators when
/// `i % 7 == 0`; every hundredth start was refused.
fn stats(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("stats.db").display());
    let store = rt.block_on(async {
        drop(SqliteStore::open(&url).await.unwrap());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        let audit = "INSERT INTO audit_log (session_id, seq, tool, outcome, codes, principal, at, \
            organization, workflow, workflow_version, step, step_index, failed, seconds) \
            VALUES (?, 0, ?, ?, '[]', ?, '2026-12-01T00:00:00Z', ?, 'study', '1.0.0', ?, ?, ?, ?)";
        for i in 0..SESSIONS {
            let id = format!("{i:032x}");
            let reached = (i % 5) as i64;
            let status = match reached {
                4 => "completed",
                _ if i % 7 == 0 && reached == 1 => "revise",
                _ => "active",
            };
            let organization = format!("org-{}", i % 20);
            let principal = format!("participant-{i}");
            sqlx::query(
                "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status, \
                 workflow, workflow_version, release, harness, principal, organization, \
                 step_index, revise_rounds) VALUES (?, 0, 0, '{}', '2026-11-01T00:00:00Z', \
                 '2026-12-01T00:00:00Z', ?, 'study', '1.0.0', '2026.12.0', ?, ?, ?, ?, 0)",
            )
            .bind(&id)
            .bind(status)
            .bind(["codex", "claude-code", "cowork", "buzz"][i % 4])
            .bind(&principal)
            .bind(&organization)
            .bind(reached)
            .execute(&mut *tx)
            .await
            .unwrap();
            let judged =
                |step: i64, outcome: &'static str, failed: &'static str, seconds: Option<i64>| {
                    sqlx::query(audit)
                        .bind(&id)
                        .bind("submit_step_reports")
                        .bind(outcome)
                        .bind(&principal)
                        .bind(&organization)
                        .bind(format!("step-{step}"))
                        .bind(step)
                        .bind(failed)
                        .bind(seconds)
                };
            if i % 7 == 0 && reached >= 1 {
                let failed = ["[\"checker-a\"]", "[\"checker-b\"]"][i % 2];
                judged(1, "revise", failed, None)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            for step in 0..reached {
                let seconds = 60 * (1 + (i as i64 * 31 + step * 17) % 100);
                judged(step, "active", "[]", Some(seconds))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            if i % 100 == 0 {
                sqlx::query(audit)
                    .bind(None::<String>)
                    .bind("start_workflow")
                    .bind("blocked")
                    .bind(&principal)
                    .bind(&organization)
                    .bind(None::<String>)
                    .bind(None::<i64>)
                    .bind(None::<String>)
                    .bind(None::<i64>)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
        }
        tx.commit().await.unwrap();
        pool.close().await;
        SqliteStore::open_read_only(&url).await.unwrap()
    });
    let query = |organization: Option<&str>| StatsQuery {
        workflow: "study".into(),
        workflow_version: "1.0.0".into(),
        organization: organization.map(str::to_owned),
    };
    let all = rt.block_on(store.workflow_stats(&query(None))).unwrap();
    assert_eq!(all.reached(4)[0], SESSIONS as u64);
    assert_eq!(all.refused_starts, (SESSIONS / 100) as u64);
    assert!(all.steps.iter().all(|s| s.median_seconds.is_some()));
    let mut group = c.benchmark_group("stats_100k_sessions");
    for (name, organization) in [
        ("all_organizations", None),
        ("one_organization", Some("org-5")),
    ] {
        let query = query(organization);
        group.bench_function(name, |b| {
            b.iter(|| rt.block_on(store.workflow_stats(&query)).unwrap())
        });
    }
    group.bench_function("workflows", |b| {
        b.iter(|| rt.block_on(store.workflows(None)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

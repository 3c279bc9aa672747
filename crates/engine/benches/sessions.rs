//! Complete `research-study` sessions (start → setup → three work steps → completed) per second,
//! on a SQLite file with `synchronous=FULL`, and on PostgreSQL when
//! `RIMTHAN_TEST_DATABASE_URL` is set. Run: `cargo bench -p rimthan-engine`.

#![allow(missing_docs)]

use rimthan_testkit::engine as common;

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rimthan_engine::{Engine, Status, Store};

async fn full_session(engine: &Engine) {
    let start = common::start_request("claude-code");
    let mut payload = common::active(engine.start(start.clone(), None).await.unwrap());
    while payload.status != Status::Completed {
        payload = common::pass_step(engine, &payload, &start).await;
    }
}

/// Sessions run at once in the concurrent cells: as many harnesses as the HTTP load test's.
const CONCURRENT: usize = 64;

fn bench_store(c: &mut Criterion, name: &str, rt: &tokio::runtime::Runtime, store: Arc<dyn Store>) {
    let engine = Arc::new(rt.block_on(common::engine_on(store)));
    let mut group = c.benchmark_group("full_session");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    group.bench_function(name, |b| b.iter(|| rt.block_on(full_session(&engine))));
    group.finish();
    // Concurrent sessions share transactions (group commit), as concurrent harnesses do.
    let mut group = c.benchmark_group("concurrent_sessions");
    group.throughput(Throughput::Elements(CONCURRENT as u64));
    group.sample_size(10);
    group.bench_function(name, |b| {
        b.iter(|| {
            rt.block_on(async {
                let runs: Vec<_> = (0..CONCURRENT)
                    .map(|_| {
                        let engine = engine.clone();
                        tokio::spawn(async move { full_session(&engine).await })
                    })
                    .collect();
                for run in runs {
                    run.await.unwrap();
                }
            })
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (sqlite, _dir) = rt.block_on(common::sqlite_file());
    bench_store(c, "sqlite_file_synchronous_full", &rt, sqlite);
    if let Some(pg) = rt.block_on(common::postgres()) {
        bench_store(c, "postgres", &rt, pg);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Micro-benchmarks of the engine's per-call checks: checkpoint token verification, and
//! preparing a work step (output attestation checks, JSON Schema validation of the artifact,
//! plan persisted to in-memory SQLite). Run: `cargo bench -p rimthan-engine --bench checks`.

#![allow(missing_docs)]

use rimthan_testkit::engine as common;

use criterion::{Criterion, criterion_group, criterion_main};
use rimthan_engine::{CheckpointKey, SessionId};

fn bench(c: &mut Criterion) {
    let key = CheckpointKey::new(vec![9; 32]).unwrap();
    let token = key.issue(&SessionId::generate(), 42);
    c.bench_function("checkpoint_verify", |b| {
        b.iter(|| key.verify(&token).unwrap())
    });
    c.bench_function("checkpoint_verify_tampered", |b| {
        let tampered = token.replacen(".42.", ".43.", 1);
        b.iter(|| key.verify(&tampered).is_none())
    });

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (engine, start, payload) = runtime.block_on(async {
        let engine = common::engine_on(common::sqlite_memory().await).await;
        let start = common::start_request("claude-code");
        let setup = common::active(engine.start(start.clone(), None).await.unwrap());
        let payload = common::pass_step(&engine, &setup, &start).await;
        (engine, start, payload)
    });
    let request = common::prepare(&payload, &start);
    c.bench_function("prepare_output_attestation", |b| {
        b.iter(|| {
            runtime
                .block_on(engine.prepare(request.clone(), None))
                .unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

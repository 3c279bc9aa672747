//! Whole sessions over HTTP at a chosen concurrency: each worker is a faithful harness
//! (`rimthan stage`: connect, list, read the assets, then every step's prepare and submit with
//! real files read back), run back to back until `SESSIONS` have completed. Prints sessions/s
//! and the p50/p99 of each step's wall time. `bench/run.sh` runs it beside the peer kit.
//!
//!   cargo run --release -p rimthan-stage --example load -- URL HARNESS WORKFLOW CONCURRENCY SESSIONS

#![allow(missing_docs)]

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Instant,
};

use rimthan_stage::{Protocol, StageConfig, Target};

fn percentile(sorted: &[u128], p: f64) -> u128 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, harness, workflow, concurrency, sessions] = args.as_slice() else {
        eprintln!("usage: load URL HARNESS WORKFLOW CONCURRENCY SESSIONS");
        std::process::exit(2);
    };
    let harness = harness
        .parse()
        .expect("a harness: codex, claude-code, cowork or buzz");
    let workflow: rimthan_registry::WorkflowId = workflow.parse().expect("a workflow id");
    let concurrency: usize = concurrency.parse().expect("a number of workers");
    let sessions: usize = sessions.parse().expect("a number of sessions");
    let claimed = Arc::new(AtomicUsize::new(0));
    let steps: Arc<Mutex<BTreeMap<String, Vec<u128>>>> = Arc::default();
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (url, claimed, steps) = (url.clone(), claimed.clone(), steps.clone());
            let workflow = workflow.clone();
            tokio::spawn(async move {
                loop {
                    let index = claimed.fetch_add(1, Ordering::Relaxed);
                    if index >= sessions {
                        break;
                    }
                    let project = tempfile::tempdir().expect("a temporary project");
                    let target = Target::Url {
                        url: url.clone(),
                        protocol: Protocol::V2026_07_28,
                        token: None,
                    };
                    let mut config = StageConfig::new(harness, target, project.path().to_owned());
                    config.workflow = Some(workflow.clone());
                    // Each session sends its own bytes, as participants do: no check verdict
                    // is kept from one session for another.
                    config.vary = Some(index as u16);
                    let summary = rimthan_stage::run(&config, &mut |_, _, _| {})
                        .await
                        .expect("a whole session");
                    assert_eq!(summary.status, "completed");
                    let mut steps = steps.lock().expect("no worker panicked");
                    for record in summary.steps {
                        steps.entry(record.step).or_default().push(record.millis);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker finished");
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{sessions} sessions at C={concurrency}: {:.0} sessions/s ({elapsed:.1} s)",
        sessions as f64 / elapsed
    );
    for (step, mut millis) in std::mem::take(&mut *steps.lock().expect("workers are done")) {
        millis.sort_unstable();
        println!(
            "  {step:<22} p50 {:>4} ms  p99 {:>4} ms",
            percentile(&millis, 0.5),
            percentile(&millis, 0.99)
        );
    }
}

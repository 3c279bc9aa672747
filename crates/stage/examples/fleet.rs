//! A fleet of participants in front of replicas: `SESSIONS` whole sessions, `CONCURRENCY` at
//! once, each a faithful harness (`rimthan stage` with its retries, its own bytes per session),
//! sent through a round-robin TCP balancer to the replicas at `BACKEND`s (host:port, each a
//! `rimthan serve` on one PostgreSQL database). The balancer is what a Kubernetes Service or a
//! layer-4 load balancer does: every new connection goes to the next replica that accepts it, so
//! when one is killed, the harness's retry on a fresh connection reaches another.
//!
//! Writes the number of completed sessions to `PROGRESS` as it goes (`bench/fleet` kills a
//! replica when it passes a mark), each completed session's id and the transitions its harness
//! saw acknowledged to `IDS` (`id<TAB>count`, sorted, for the comparison with the store's audit
//! log), and prints sessions/s, every failure, the retried requests and
//! each tool's p50/p99 as the harness waited for it.
//!
//!   cargo run --release -p rimthan-stage --example fleet -- \
//!     HARNESS WORKFLOW CONCURRENCY SESSIONS PROGRESS IDS BACKEND...

#![allow(missing_docs)]

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rimthan_stage::{CallRecord, Protocol, StageConfig, Target};
use tokio::net::{TcpListener, TcpStream};

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// Accepts connections on `listener` and joins each to the next backend that accepts one.
async fn balance(listener: TcpListener, backends: Vec<SocketAddr>) {
    let backends = Arc::new(backends);
    let mut next = 0usize;
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        let first = next;
        next = next.wrapping_add(1);
        let backends = Arc::clone(&backends);
        tokio::spawn(async move {
            let _ = inbound.set_nodelay(true);
            for i in 0..backends.len() {
                let Ok(mut outbound) =
                    TcpStream::connect(backends[(first + i) % backends.len()]).await
                else {
                    continue;
                };
                let _ = outbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                return;
            }
        });
    }
}

#[derive(Default)]
struct Tally {
    completed: Vec<String>,
    failed: Vec<String>,
    calls: BTreeMap<String, Vec<u64>>,
    retried: usize,
    most_attempts: u32,
}

impl Tally {
    fn add_calls(&mut self, calls: Vec<CallRecord>) {
        for call in calls {
            if call.attempts > 1 {
                self.retried += 1;
            }
            self.most_attempts = self.most_attempts.max(call.attempts);
            self.calls.entry(call.method).or_default().push(call.micros);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [
        harness,
        workflow,
        concurrency,
        sessions,
        progress,
        ids,
        backends @ ..,
    ] = args.as_slice()
    else {
        eprintln!(
            "usage: fleet HARNESS WORKFLOW CONCURRENCY SESSIONS PROGRESS IDS BACKEND (host:port)..."
        );
        std::process::exit(2);
    };
    let harness = harness
        .parse()
        .expect("a harness: codex, claude-code, cowork or buzz");
    let workflow: rimthan_registry::WorkflowId = workflow.parse().expect("a workflow id");
    let concurrency: usize = concurrency.parse().expect("a number of workers");
    let sessions: usize = sessions.parse().expect("a number of sessions");
    let (progress, ids) = (PathBuf::from(progress), PathBuf::from(ids));
    let backends: Vec<SocketAddr> = backends
        .iter()
        .map(|b| b.parse().expect("a backend as host:port"))
        .collect();
    assert!(!backends.is_empty(), "name at least one backend");

    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port for the balancer");
    let url = format!(
        "http://{}/mcp",
        listener.local_addr().expect("a bound address")
    );
    tokio::spawn(balance(listener, backends.clone()));

    let claimed = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let reporter = {
        let (done, progress) = (Arc::clone(&done), progress.clone());
        tokio::spawn(async move {
            loop {
                let count = done.load(Ordering::Relaxed).to_string();
                let partial = progress.with_extension("partial");
                if std::fs::write(&partial, count).is_ok() {
                    let _ = std::fs::rename(&partial, &progress);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (url, claimed, done, tally) =
                (url.clone(), claimed.clone(), done.clone(), tally.clone());
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
                    // Every participant sends its own bytes: no kept check verdict answers
                    // for another session.
                    config.vary = Some(index as u16);
                    let outcome = rimthan_stage::run(&config, &mut |_, _, _| {}).await;
                    let mut tally = tally.lock().expect("no worker panicked");
                    match outcome {
                        Ok(summary) if summary.status == "completed" => {
                            tally.completed.push(format!(
                                "{}\t{}",
                                summary.session_id,
                                summary.steps.len()
                            ));
                            tally.add_calls(summary.calls);
                        }
                        Ok(summary) => tally.failed.push(format!(
                            "session {} stopped in status {}",
                            summary.session_id, summary.status
                        )),
                        Err(e) => tally.failed.push(format!("session #{index}: {e}")),
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker finished");
    }
    let elapsed = started.elapsed().as_secs_f64();
    reporter.abort();
    let _ = std::fs::write(&progress, sessions.to_string());
    let mut tally = std::mem::take(&mut *tally.lock().expect("workers are done"));
    tally.completed.sort_unstable();
    let mut listed = tally.completed.join("\n");
    listed.push('\n');
    std::fs::write(&ids, listed).expect("the ids file is writable");

    println!(
        "{sessions} sessions at C={concurrency} through {} replicas: {:.1} sessions/s ({elapsed:.1} s); {} completed, {} failed",
        backends.len(),
        sessions as f64 / elapsed,
        tally.completed.len(),
        tally.failed.len()
    );
    for failure in tally.failed.iter().take(20) {
        println!("  failed: {failure}");
    }
    println!(
        "requests retried on a fresh connection: {} (most attempts for one request: {})",
        tally.retried, tally.most_attempts
    );
    println!(
        "  {:<32} {:>8} {:>9} {:>9}",
        "request", "count", "p50 ms", "p99 ms"
    );
    for (method, mut micros) in tally.calls {
        micros.sort_unstable();
        println!(
            "  {method:<32} {:>8} {:>9.2} {:>9.2}",
            micros.len(),
            percentile(&micros, 0.5) as f64 / 1000.0,
            percentile(&micros, 0.99) as f64 / 1000.0
        );
    }
    if !tally.failed.is_empty() {
        std::process::exit(1);
    }
}

//! Many live sessions on a server, for a benchmark that reads them the way a fleet of harnesses
//! does: each worker is a faithful harness (`rimthan stage`) that starts a session and passes its
//! setup step, leaving it active at its first work step. Writes the `get_active_step` call of
//! every session, as the JSON array the peer kit's load generator sends in rotation
//! (`bench/run.sh`).
//!
//!   cargo run --release -p rimthan-stage --example live_sessions -- URL HARNESS WORKFLOW CONCURRENCY SESSIONS OUT

#![allow(missing_docs)]

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use rimthan_stage::{Protocol, SESSION_FILE, StageConfig, Target};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, harness, workflow, concurrency, sessions, out] = args.as_slice() else {
        eprintln!("usage: live_sessions URL HARNESS WORKFLOW CONCURRENCY SESSIONS OUT");
        std::process::exit(2);
    };
    let harness = harness
        .parse()
        .expect("a harness: codex, claude-code, cowork or buzz");
    let workflow: rimthan_registry::WorkflowId = workflow.parse().expect("a workflow id");
    let concurrency: usize = concurrency.parse().expect("a number of workers");
    let sessions: usize = sessions.parse().expect("a number of sessions");
    let claimed = Arc::new(AtomicUsize::new(0));
    let calls: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (url, claimed, calls) = (url.clone(), claimed.clone(), calls.clone());
            let workflow = workflow.clone();
            tokio::spawn(async move {
                while claimed.fetch_add(1, Ordering::Relaxed) < sessions {
                    let project = tempfile::tempdir().expect("a temporary project");
                    let target = Target::Url {
                        url: url.clone(),
                        protocol: Protocol::V2026_07_28,
                        token: None,
                    };
                    let mut config = StageConfig::new(harness, target, project.path().to_owned());
                    config.workflow = Some(workflow.clone());
                    config.stop_after = Some(1);
                    rimthan_stage::run(&config, &mut |_, _, _| {})
                        .await
                        .expect("a session past its setup step");
                    let file =
                        std::fs::read(project.path().join(SESSION_FILE)).expect("the session file");
                    let file: serde_json::Value =
                        serde_json::from_slice(&file).expect("a JSON session file");
                    let call = serde_json::json!({
                        "name": "rimthan.get_active_step",
                        "arguments": {"checkpoint": file["checkpoint"]},
                    });
                    calls.lock().expect("no worker panicked").push(call);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker finished");
    }
    let mut calls = std::mem::take(&mut *calls.lock().expect("workers are done"));
    // Sessions in the order they were started would put one worker's run of sessions together;
    // sorted by checkpoint, neighbouring calls name unrelated sessions.
    calls.sort_by_cached_key(|call| {
        call["arguments"]["checkpoint"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    std::fs::write(out, serde_json::to_vec(&calls).expect("calls serialize")).expect("OUT written");
    println!("{} live sessions written to {out}", calls.len());
}

//! Background tasks never die silently: a task that panics is logged, counted on `/metrics` and
//! started again.

use std::sync::{
    Arc,
    atomic::{AtomicU32, Ordering},
};

use rimthan_mcp::{Gauges, Metrics, tasks::supervise};

fn failures(metrics: &Metrics, task: &str) -> Option<String> {
    let page = metrics.render(&Gauges {
        open_sessions: None,
        channel: "stable".into(),
        release: "r".into(),
        manifest_sha256: "0".repeat(64),
        caches: Vec::new(),
        check_runs: 0,
        throttled: 0,
        outbox: None,
    });
    let prefix = format!("rimthan_background_task_failures_total{{task=\"{task}\"}} ");
    page.lines()
        .find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
}

#[tokio::test(start_paused = true)]
async fn a_background_task_that_panics_is_counted_and_started_again() {
    let metrics = Arc::new(Metrics::default());
    let starts = Arc::new(AtomicU32::new(0));
    let counted = starts.clone();
    supervise("flaky", metrics.clone(), move || {
        let starts = counted.clone();
        async move {
            if starts.fetch_add(1, Ordering::SeqCst) < 2 {
                panic!("boom");
            }
            std::future::pending::<()>().await;
        }
    });
    // Paused time jumps over each restart's pause as soon as every task waits.
    for _ in 0..100 {
        if starts.load(Ordering::SeqCst) >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    assert_eq!(
        starts.load(Ordering::SeqCst),
        3,
        "the task was not started again"
    );
    assert_eq!(failures(&metrics, "flaky").as_deref(), Some("2"));
}

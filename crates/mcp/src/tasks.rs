//! Background tasks that must not die silently (`docs/operations/deploy.md` §8): a task that
//! panics, or ends though it was meant to run for the process's life, is logged as an error,
//! counted in `rimthan_background_task_failures_total{task}`, and started again after a pause.

use std::{future::Future, sync::Arc, time::Duration};

use crate::metrics::Metrics;

/// How long a failed task waits before it starts again.
const RESTART_AFTER: Duration = Duration::from_secs(10);

/// Runs `start()`'s task for the process's life under the name `task`, starting it again each
/// time it fails. Ends only when the runtime shuts down.
pub fn supervise<F, Fut>(
    task: &'static str,
    metrics: Arc<Metrics>,
    start: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let reason = match tokio::spawn(start()).await {
                Ok(()) => "it ended".to_owned(),
                Err(e) if e.is_panic() => {
                    let panic = e.into_panic();
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic without a message".to_owned());
                    format!("it panicked: {message}")
                }
                // Cancelled: the runtime is shutting down.
                Err(_) => return,
            };
            metrics.background_task_failure(task);
            tracing::error!(
                task,
                %reason,
                restart_in_seconds = RESTART_AFTER.as_secs(),
                "background task failed; starting it again"
            );
            tokio::time::sleep(RESTART_AFTER).await;
        }
    })
}

//! The threads runs happen on are kept for the next run, within bounds: a run never waits for
//! another, the threads left waiting are at most sixteen, and a thread whose run was stopped at
//! its deadline runs the next check as if new. One test in its own binary, since it counts the
//! process's threads.

use std::time::Duration;

use rimthan_checks::{Check, Input, Limits};

const FINDS: &str = r#"
for p in inputs["notes.md"].markdown.paragraphs {
    error("paragraph", "a paragraph", "notes.md", p.line);
}
"#;

/// Threads of this process named as check runs' threads are, once the threads that are past
/// the bound have ended: a thread answers its run before it decides to wait or end.
#[cfg(target_os = "linux")]
fn check_threads() -> usize {
    let count = || {
        std::fs::read_dir("/proc/self/task")
            .expect("the process's threads are listed")
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim_end() == "rimthan-check")
            .count()
    };
    for _ in 0..500 {
        if count() <= 16 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    count()
}

#[test]
fn forty_runs_at_once_end_at_their_deadlines_and_leave_at_most_sixteen_threads_waiting() {
    let endless = Check::script(
        "loop { }",
        Limits::default()
            .with_max_operations(u64::MAX)
            .with_max_wall_time(Duration::from_millis(300)),
    )
    .unwrap();
    let finds = Check::script(FINDS, Limits::default()).unwrap();
    let notes = b"# Notes\n\nOne.\n\nTwo.\n";
    let inputs = [Input::new("notes.md", notes)];

    // Forty runs at once, more than the threads kept: each gets a thread and ends at its own
    // deadline.
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..40).map(|_| s.spawn(|| endless.run(&inputs))).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for outcome in outcomes {
        assert_eq!(outcome.unwrap_err().code(), "check_wall_time_exceeded");
    }
    #[cfg(target_os = "linux")]
    {
        let waiting = check_threads();
        assert!(waiting <= 16, "{waiting} threads kept after forty runs");
        assert!(waiting > 0, "no thread kept for the next run");
    }

    // The threads that were stopped run the next checks as new ones would.
    let first = finds.run(&inputs).unwrap();
    assert_eq!(first.len(), 2, "{first:#?}");
    for _ in 0..50 {
        assert_eq!(finds.run(&inputs).unwrap(), first);
    }
    #[cfg(target_os = "linux")]
    assert!(check_threads() <= 16);
}

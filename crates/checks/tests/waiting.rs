//! A run started and waited for in two steps (`Check::start`, `Running::wait_for`, then
//! `Running::wait`), as a caller on an async runtime waits: a run that ends within the first
//! wait gives the findings `Check::run` gives; a run still going when a short wait ends goes on,
//! and the later wait still ends it at the deadline counted from its start.

use std::time::{Duration, Instant};

use rimthan_checks::{Check, Input, Limits};

const REPORTS: &str = r#"
for p in inputs["notes.md"].markdown.paragraphs {
    warning("paragraph", p.text, "notes.md", p.line);
}
"#;

const NOTES: &[u8] = b"# Notes\n\nOne paragraph.\n\nAnother one.\n";

/// A check that never ends by itself: only its wall-time bound stops it.
fn endless(wall_time: Duration) -> Check {
    let limits = Limits::default()
        .with_max_operations(u64::MAX)
        .with_max_wall_time(wall_time);
    Check::script("loop { }", limits).unwrap()
}

#[test]
fn a_run_that_ends_within_the_wait_gives_the_findings_a_whole_run_gives() {
    let check = Check::script(REPORTS, Limits::default()).unwrap();
    let inputs = [Input::new("notes.md", NOTES)];
    let whole = check.run(&inputs).unwrap();
    assert_eq!(whole.len(), 2, "{whole:?}");
    let mut running = check.start(&inputs).unwrap();
    let waited = running
        .wait_for(Duration::from_secs(30))
        .expect("a run of two findings ends within 30 s")
        .unwrap();
    assert_eq!(waited, whole);
}

#[test]
fn a_run_still_going_after_a_short_wait_ends_at_its_own_deadline() {
    let check = endless(Duration::from_millis(400));
    let started = Instant::now();
    let mut running = check.start(&[Input::new("notes.md", NOTES)]).unwrap();
    assert!(
        running.wait_for(Duration::from_millis(20)).is_none(),
        "the loop never ends by itself"
    );
    let outcome = running.wait();
    let took = started.elapsed();
    assert_eq!(outcome.unwrap_err().code(), "check_wall_time_exceeded");
    assert!(
        took >= Duration::from_millis(400),
        "stopped after {took:?}, before its deadline"
    );
    assert!(
        took < Duration::from_secs(20),
        "stopped after {took:?}, long past its deadline"
    );
}

#[test]
fn a_short_wait_ends_no_later_than_the_runs_deadline() {
    let check = endless(Duration::from_millis(100));
    let mut running = check.start(&[Input::new("notes.md", NOTES)]).unwrap();
    let started = Instant::now();
    assert!(running.wait_for(Duration::from_secs(60)).is_none());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a wait of a minute was not cut at the run's deadline"
    );
    assert_eq!(
        running.wait().unwrap_err().code(),
        "check_wall_time_exceeded"
    );
}

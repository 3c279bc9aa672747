//! `rimthan serve` and its store, as an operator meets them: one process per SQLite file, and
//! retention that deletes what is old enough when the server starts (`docs/engine.md` §7).

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use rimthan_engine::{AuditEntry, Code, Operation, Outcome, SessionId, Store, store::SqliteStore};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// Starts `serve` on `database` and returns it with its stderr lines, once it says it serves.
fn serve(database: &str, extra: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database,
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, received) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    (child, received)
}

fn wait_for(lines: &mpsc::Receiver<String>, needle: &str) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no line with {needle:?} within 20 s"));
        if line.contains(needle) {
            return line;
        }
    }
}

fn entry(session: &SessionId, at: &str) -> AuditEntry {
    AuditEntry {
        session_id: Some(session.clone()),
        seq: Some(0),
        tool: Operation::GetActiveStep,
        outcome: Outcome::Rejected,
        codes: vec![Code::StaleCheckpoint],
        attestation_sha256: None,
        reports_sha256: None,
        principal: None,
        organization: None,
        workflow: None,
        judgement: None,
        checks: Vec::new(),
        decision: None,
        at: at.into(),
    }
}

#[test]
fn a_second_serve_on_the_same_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("one.db").display());
    let (mut first, lines) = serve(&database, &[]);
    wait_for(&lines, "serving Streamable HTTP");
    let second = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &database,
        ])
        .output()
        .unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(
        second.status.code(),
        Some(3),
        "a store it cannot use is an I/O failure"
    );
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("in use by another process"), "{stderr}");
}

#[test]
fn retain_days_deletes_old_audit_entries_at_start_and_keeps_recent_ones() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("kept.db").display());
    let (old, recent) = (SessionId::generate(), SessionId::generate());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&database).await.unwrap();
        store
            .append_audit(&entry(&old, "2001-02-03T04:05:06Z"))
            .await
            .unwrap();
        store
            .append_audit(&entry(&recent, "2999-01-01T00:00:00Z"))
            .await
            .unwrap();
    });

    let (mut server, lines) = serve(&database, &["--retain-days", "30"]);
    let pass = wait_for(&lines, "retention pass");
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(pass.contains("audit_entries=1"), "{pass}");

    runtime.block_on(async {
        let store = SqliteStore::open_read_only(&database).await.unwrap();
        assert!(store.audit_log(&old).await.unwrap().is_empty());
        assert_eq!(store.audit_log(&recent).await.unwrap().len(), 1);
    });
    let refused = Command::new(BIN)
        .args(["serve", "--database-url", &database, "--retain-days", "0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "0 days is a usage error");
    // A cutoff further back than any time is refused at start, naming the range, rather than
    // killing the retention task later.
    let refused = Command::new(BIN)
        .args(["serve", "--database-url", &database])
        .args(["--retain-days", "4294967295"])
        .output()
        .unwrap();
    assert_eq!(
        refused.status.code(),
        Some(2),
        "an endless age is a usage error"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--retain-days") && stderr.contains("36500"),
        "{stderr}"
    );
}

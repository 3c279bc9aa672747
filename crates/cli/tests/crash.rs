//! Crash safety: concurrent sessions against `rimthan serve`, killed with SIGKILL at random
//! moments and restarted on the same store. Every acknowledged transition (what a harness wrote
//! to its session file) is present, none is half-applied, and the audit log agrees with every
//! session's state. On SQLite always, on PostgreSQL when `RIMTHAN_TEST_DATABASE_URL` is set.

use std::{
    net::TcpListener,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use rimthan_engine::{Operation, Outcome, SessionId};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");
const ROUNDS: usize = 3;
const SESSIONS_PER_ROUND: usize = 3;

fn spawn_server(database: &str, port: u16) -> Child {
    spawn_server_with(database, port, &[])
}

fn spawn_server_with(database: &str, port: u16, extra: &[&str]) -> Child {
    let child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            database,
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn stage(url: &str, project: &Path, harness: &str, resume: bool) -> Child {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "stage",
        "--workflow",
        "research-study",
        "--harness",
        harness,
        "--url",
        url,
        "--project",
        project.to_str().unwrap(),
    ]);
    if resume {
        cmd.arg("--resume");
    }
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The checkpoint sequence a session file acknowledges.
fn acknowledged(project: &Path) -> Option<(SessionId, u64)> {
    let text = std::fs::read(project.join(".rimthan/workflow-session.json")).ok()?;
    let file: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let checkpoint = file["checkpoint"].as_str()?;
    let mut parts = checkpoint.split('.');
    let (_, session, seq) = (parts.next()?, parts.next()?, parts.next()?);
    Some((session.parse().ok()?, seq.parse().ok()?))
}

/// A pseudo-random delay from a seed, so runs differ but stay reproducible per seed.
fn delay(seed: &mut u64) -> Duration {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    Duration::from_millis(60 + *seed % 300)
}

fn crash_and_recover(database: &str) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut seed = std::process::id() as u64 | 1;
    let projects = tempfile::tempdir().unwrap();
    let harnesses = ["codex", "claude-code", "cowork"];
    for round in 0..ROUNDS {
        let mut server = spawn_server(database, port);
        let runs: Vec<(std::path::PathBuf, Child)> = (0..SESSIONS_PER_ROUND)
            .map(|i| {
                let project = projects.path().join(format!("r{round}-s{i}"));
                let child = stage(&url, &project, harnesses[i % harnesses.len()], false);
                (project, child)
            })
            .collect();
        std::thread::sleep(delay(&mut seed));
        server.kill().unwrap(); // SIGKILL: no drain, no cleanup.
        server.wait().unwrap();
        for (_, mut child) in runs {
            let _ = child.wait();
        }
    }

    // Restart and check every session any harness saw acknowledged.
    let mut server = spawn_server(database, port);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime
        .block_on(rimthan_engine::store::open_read_only(database))
        .unwrap();
    let mut resumable = Vec::new();
    for entry in std::fs::read_dir(projects.path()).unwrap() {
        let project = entry.unwrap().path();
        let Some((session, seq)) = acknowledged(&project) else {
            continue;
        };
        let stored = runtime
            .block_on(store.load_session(&session))
            .unwrap()
            .expect("an acknowledged session exists");
        // The acknowledged transition is there; at most the one in flight at the kill went
        // further (its response never arrived).
        assert!(
            stored.seq == seq || stored.seq == seq + 1,
            "{session}: stored seq {} vs acknowledged {seq}",
            stored.seq
        );
        let log = runtime.block_on(store.audit_log(&session)).unwrap();
        let transitions = log
            .iter()
            .filter(|e| {
                (e.tool == Operation::StartWorkflow || e.tool == Operation::SubmitStepReports)
                    && e.outcome != Outcome::Rejected
            })
            .count() as u64;
        assert_eq!(
            transitions,
            stored.seq + 1,
            "{session}: the audit log agrees with the state"
        );
        let completed = stored.status == rimthan_engine::Status::Completed;
        assert_eq!(
            completed,
            stored.step_index == 4,
            "{session}: status and step agree"
        );
        if stored.seq == seq && !completed {
            resumable.push(project);
        }
    }
    // Every session left at an acknowledged checkpoint resumes and completes.
    for project in &resumable {
        let file: serde_json::Value = serde_json::from_slice(
            &std::fs::read(project.join(".rimthan/workflow-session.json")).unwrap(),
        )
        .unwrap();
        let harness = file["host"]["harness"].as_str().unwrap();
        let status = stage(&url, project, harness, true).wait().unwrap();
        assert!(status.success(), "{} did not resume", project.display());
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn sigkill_loses_no_acknowledged_transition_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    crash_and_recover(&format!(
        "sqlite://{}",
        dir.path().join("crash.sqlite").display()
    ));
}

#[test]
fn sigkill_loses_no_acknowledged_transition_on_postgres() {
    let Ok(url) = std::env::var("RIMTHAN_TEST_DATABASE_URL") else {
        eprintln!("RIMTHAN_TEST_DATABASE_URL is not set: skipping the PostgreSQL crash test");
        return;
    };
    let schema = format!("t_{}", SessionId::generate());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(rimthan_engine::store::PostgresStore::connect_in_schema(
            &url, &schema,
        ))
        .unwrap();
    let separator = if url.contains('?') { '&' } else { '?' };
    crash_and_recover(&format!(
        "{url}{separator}options=-c%20search_path%3D{schema}"
    ));
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn raw_status(port: u16, request: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 32];
    let n = stream.read(&mut head).unwrap();
    String::from_utf8_lossy(&head[..n])
        .split(' ')
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap_or(0)
}

/// With `--legacy-sessions`, thousands of idle legacy-era sessions (initialize, then silence)
/// keep the server's memory bounded by the session cap, and a well-behaved client is served
/// meanwhile. (By default no session is minted at all.)
#[test]
fn thousands_of_idle_legacy_sessions_keep_memory_bounded() {
    const SESSIONS: usize = 2000;
    const CAP: usize = 500;
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let database = format!("sqlite://{}", dir.path().join("idle.sqlite").display());
    let mut server = spawn_server_with(
        &database,
        port,
        &["--legacy-sessions", "--max-sessions", "500"],
    );
    let before = rss_kib(server.id());
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let accepted = (0..SESSIONS)
        .filter(|_| raw_status(port, &request) == 200)
        .count();
    assert_eq!(accepted, CAP, "sessions beyond the cap are refused");
    let grown_mib = rss_kib(server.id()).saturating_sub(before) / 1024;
    let project = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let served = stage(&url, project.path(), "codex", false).wait().unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    eprintln!("{SESSIONS} session attempts (cap {CAP}) grew the server by {grown_mib} MiB");
    assert!(
        served.success(),
        "a well-behaved client is served meanwhile"
    );
    assert!(
        grown_mib < 64,
        "{SESSIONS} idle sessions grew the server by {grown_mib} MiB"
    );
}

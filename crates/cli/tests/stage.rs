//! `rimthan stage` against a `rimthan serve` started by the test, as an operator runs them.

use std::{
    net::TcpListener,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// A `rimthan serve` on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--database-url")
        .arg(format!(
            "sqlite://{}",
            dir.path().join("db.sqlite").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
        _dir: dir,
    }
}

fn stage(args: &[&str]) -> Output {
    Command::new(BIN).arg("stage").args(args).output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn every_harness_completes_against_a_served_engine() {
    let server = serve();
    for (harness, protocol) in [
        ("codex", "2026-07-28"),
        ("claude-code", "2025-11-25"),
        ("cowork", "2026-07-28"),
        ("buzz", "2025-11-25"),
    ] {
        let project = tempfile::tempdir().unwrap();
        let out = stage(&[
            "--harness",
            harness,
            "--url",
            &server.url,
            "--protocol",
            protocol,
            "--project",
            project.path().to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{harness}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(": completed"));
        assert_eq!(
            stderr(&out)
                .lines()
                .filter(|l| l.starts_with("step "))
                .count(),
            4,
            "{harness}"
        );
        let session: serde_json::Value = serde_json::from_slice(
            &std::fs::read(project.path().join(".rimthan/workflow-session.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(session["status"], "completed");
        assert_eq!(session["host"]["harness"], harness);
        let local = match harness {
            "codex" => Some(".codex/agents/claim-checker.toml"),
            "claude-code" => Some(".claude/agents/claim-checker.md"),
            _ => None,
        };
        if let Some(path) = local {
            assert!(project.path().join(path).is_file(), "{harness}: {path}");
        }
        assert!(!project.path().join(".claude").exists() || harness == "claude-code");
    }
}

#[test]
fn each_fault_shows_its_documented_code() {
    let server = serve();
    for (fault, code) in [
        ("wrong-digest", "asset_digest_mismatch"),
        ("extra-file", "unexpected_output"),
        ("symlinked-output", "symlink_in_path"),
        ("missing-report", "report_missing"),
        ("stale-checkpoint", "stale_checkpoint"),
    ] {
        let project = tempfile::tempdir().unwrap();
        let out = stage(&[
            "--harness",
            "codex",
            "--url",
            &server.url,
            "--project",
            project.path().to_str().unwrap(),
            "--fault",
            fault,
        ]);
        assert_eq!(out.status.code(), Some(1), "{fault}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "fault {fault}: the server answered {code} (expected {code})"
            )),
            "{fault}: {err}"
        );
    }
}

#[test]
fn a_session_resumes_from_its_session_file() {
    let server = serve();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    let first = stage(&[
        "--harness",
        "claude-code",
        "--url",
        &server.url,
        "--project",
        dir,
        "--fault",
        "missing-report",
    ]);
    assert_eq!(first.status.code(), Some(1));
    // A colleague clones the project (here: the same folder) and continues from the file.
    let resumed = stage(&[
        "--harness",
        "claude-code",
        "--url",
        &server.url,
        "--project",
        dir,
        "--resume",
    ]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(
        !stderr(&resumed).contains("setup-workspace"),
        "resume starts at the active step"
    );
}

#[test]
fn an_in_process_run_needs_no_server() {
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--harness",
        "buzz",
        "--project",
        project.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn resuming_without_a_session_file_is_an_input_error() {
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--harness",
        "codex",
        "--project",
        project.path().to_str().unwrap(),
        "--resume",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("workflow-session.json not found"));
}

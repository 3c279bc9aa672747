//! `rimthan stage` against a `rimthan serve` started by the test, as an operator runs them.

use std::{
    net::TcpListener,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

mod common;

use common::{build_signed, outside_source};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// A `rimthan serve` on a free loopback port, killed when dropped. It authenticates with a
/// token file: `PARTICIPANT` runs sessions, `FACILITATOR` signs steps off.
struct Server {
    child: Child,
    url: String,
    base: String,
    _dir: tempfile::TempDir,
}

const PARTICIPANT: &str = "pat";
const FACILITATOR: &str = "ann";

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve() -> Server {
    serve_with(&[])
}

fn serve_with(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let hash = |t: &str| rimthan_registry::Sha256Digest::of(t.as_bytes()).to_string();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(
        &tokens,
        serde_json::json!({"tokens": [
            {"sha256": hash(PARTICIPANT), "principal": PARTICIPANT, "organization": "acme", "scopes": ["rimthan:workflow"]},
            {"sha256": hash(FACILITATOR), "principal": FACILITATOR, "organization": "acme", "facilitator": "organization"},
        ]})
        .to_string(),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--auth", "tokens", "--auth-tokens-file"])
        .arg(&tokens)
        .args(extra)
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
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

/// `rimthan stage`, as the participant when it talks to a server.
fn stage(args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.arg("stage").args(args);
    if args.contains(&"--url") {
        command.env("RIMTHAN_TOKEN", PARTICIPANT);
    }
    command.output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The shipped workflows and the harnesses each pins, with the protocol to speak.
const SHIPPED: [(&str, &[(&str, &str)]); 2] = [
    (
        "research-study",
        &[
            ("codex", "2026-07-28"),
            ("claude-code", "2025-11-25"),
            ("cowork", "2026-07-28"),
            ("buzz", "2025-11-25"),
        ],
    ),
    (
        "schema-migration",
        &[
            ("codex", "2025-11-25"),
            ("claude-code", "2026-07-28"),
            ("cowork", "2025-11-25"),
        ],
    ),
];

#[test]
fn every_shipped_workflow_completes_on_every_harness_it_pins_against_a_served_engine() {
    let server = serve();
    let mut signed_off = 0;
    for (workflow, harnesses) in SHIPPED {
        let steps = std::fs::read_to_string(format!(
            "../../registry/source/workflows/{workflow}/1.0.0/workflow.json"
        ))
        .map(|t| {
            serde_json::from_str::<serde_json::Value>(&t).unwrap()["steps"]
                .as_array()
                .unwrap()
                .len()
        })
        .unwrap();
        for (harness, protocol) in harnesses {
            let project = tempfile::tempdir().unwrap();
            let target = [
                "--harness",
                harness,
                "--url",
                &server.url,
                "--protocol",
                protocol,
                "--project",
                project.path().to_str().unwrap(),
            ];
            let out = stage(&[&["--workflow", workflow][..], &target].concat());
            let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            // 0 when the session completed, 4 when it waits for sign-off (README, exit statuses).
            let waits = stdout.contains("): awaiting_approval");
            assert_eq!(
                out.status.code(),
                Some(if waits { 4 } else { 0 }),
                "{workflow} {harness}: {}",
                stderr(&out)
            );
            let mut handled = step_lines(&out).len();
            // A step that waits for sign-off: a facilitator approves it on the command line
            // with their own token, and the participant's harness resumes.
            if stdout.contains("): awaiting_approval") {
                let session = stdout.split_whitespace().nth(1).unwrap().to_owned();
                let approved = Command::new(BIN)
                    .args(["sessions", "approve", &session, "--server", &server.base])
                    .args(["--step", "write-migration", "--note", "Read it."])
                    .env("RIMTHAN_TOKEN", FACILITATOR)
                    .output()
                    .unwrap();
                assert!(approved.status.success(), "{}", stderr(&approved));
                let resumed = stage(&[&target[..], &["--resume"]].concat());
                assert!(resumed.status.success(), "{}", stderr(&resumed));
                stdout = String::from_utf8_lossy(&resumed.stdout).into_owned();
                handled += step_lines(&resumed).len();
                signed_off += 1;
            }
            assert!(
                stdout.contains(": completed"),
                "{workflow} {harness}: {stdout}"
            );
            assert_eq!(handled, steps, "{workflow} {harness}");
            let session: serde_json::Value = serde_json::from_slice(
                &std::fs::read(project.path().join(".rimthan/workflow-session.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(session["status"], "completed");
            assert_eq!(session["workflow"]["id"], workflow);
            assert_eq!(session["host"]["harness"], *harness);
            let local = match *harness {
                "codex" => Some(".codex/agents/"),
                "claude-code" => Some(".claude/agents/"),
                _ => None,
            };
            if let Some(dir) = local {
                assert!(project.path().join(dir).is_dir(), "{harness}: {dir}");
            }
            assert!(!project.path().join(".claude").exists() || *harness == "claude-code");
        }
    }
    assert!(signed_off > 0, "no shipped workflow waited for sign-off");
}

#[test]
fn a_harness_a_shipped_workflow_leaves_out_is_blocked() {
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--workflow",
        "schema-migration",
        "--harness",
        "buzz",
        "--project",
        project.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unsupported_harness"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn without_workflow_a_release_of_several_workflows_names_them() {
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--harness",
        "codex",
        "--project",
        project.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--workflow")
            && err.contains("research-study@1.0.0")
            && err.contains("schema-migration@1.0.0"),
        "{err}"
    );
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
            "--workflow",
            "research-study",
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
        "--workflow",
        "schema-migration",
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
    // The resumed run goes on to the step that waits for sign-off, and says so with its own
    // exit status (4), who may decide and where.
    assert_eq!(resumed.status.code(), Some(4), "{}", stderr(&resumed));
    let said = stderr(&resumed);
    assert!(
        said.contains("waiting for sign-off of step write-migration: approvals 0 of ")
            && said.contains("/admin/sessions/")
            && said.contains("not the participant"),
        "{said}"
    );
    assert!(
        !stderr(&resumed).contains("setup-workspace"),
        "resume starts at the active step"
    );
}

#[test]
fn an_in_process_run_needs_no_server() {
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--workflow",
        "research-study",
        "--harness",
        "buzz",
        "--project",
        project.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn in_process_every_shipped_workflow_completes_when_the_operator_signs_off_under_a_name() {
    for (workflow, harnesses) in SHIPPED {
        let (harness, _) = harnesses[0];
        let project = tempfile::tempdir().unwrap();
        let dir = project.path().to_str().unwrap();
        let out = stage(&[
            "--workflow",
            workflow,
            "--harness",
            harness,
            "--project",
            dir,
            "--sign-off-as",
            "ada",
        ]);
        assert!(out.status.success(), "{workflow}: {}", stderr(&out));
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(printed.contains(": completed"), "{workflow}: {printed}");
        if workflow == "schema-migration" {
            assert!(
                printed.contains("signed off as ada (asserted)"),
                "{workflow}: {printed}"
            );
        }
    }
    // Without a name the run stops at the sign-off and says how to give one.
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    let waits = stage(&[
        "--workflow",
        "schema-migration",
        "--harness",
        "codex",
        "--project",
        dir,
    ]);
    assert_eq!(waits.status.code(), Some(4), "{}", stderr(&waits));
    assert!(
        stderr(&waits).contains("--resume --sign-off-as NAME"),
        "{}",
        stderr(&waits)
    );
    let resumed = stage(&[
        "--harness",
        "codex",
        "--project",
        dir,
        "--resume",
        "--sign-off-as",
        "ada",
    ]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    // A server at a URL has its own doors for approvers.
    let refused = stage(&[
        "--workflow",
        "schema-migration",
        "--harness",
        "codex",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--project",
        dir,
        "--sign-off-as",
        "ada",
    ]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
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

/// The outside workflow's source (`tests/data/outside-workflow`) plus what a release shares
/// across workflows (the host adapters and the base report schema), built and signed with a
/// fresh key into a registry folder.
struct OutsideRegistry {
    dir: tempfile::TempDir,
}

impl OutsideRegistry {
    fn build() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let source = outside_source("outside-workflow", dir.path());
        build_signed(&source, dir.path(), &[]);
        Self { dir }
    }

    fn path(&self) -> String {
        self.dir.path().join("registry").display().to_string()
    }
}

fn step_lines(output: &Output) -> Vec<String> {
    stderr(output)
        .lines()
        .filter(|l| l.starts_with("step "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_workflow_written_outside_the_repository_completes_on_every_pinned_harness() {
    let registry = OutsideRegistry::build();
    let server = serve_with(&["--registry", &registry.path()]);
    let registry_path = registry.path();
    let runs: [(&str, Vec<&str>); 3] = [
        (
            "codex",
            vec!["--url", &server.url, "--protocol", "2026-07-28"],
        ),
        (
            "claude-code",
            vec!["--url", &server.url, "--protocol", "2025-11-25"],
        ),
        ("codex", vec!["--registry", &registry_path]),
    ];
    for (harness, target) in runs {
        let project = tempfile::tempdir().unwrap();
        let dir = project.path().to_str().unwrap();
        let mut args = vec!["--harness", harness, "--project", dir];
        args.extend(target);
        let out = stage(&args);
        assert!(out.status.success(), "{harness}: {}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("changelog-entry@1.0.0): completed"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let lines = step_lines(&out);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[2].starts_with("step 3/3 publish-notes completed"),
            "{lines:?}"
        );

        // The author's example, a schema-valid generated entry, a placeholder naming the step.
        let read = |p: &str| std::fs::read_to_string(project.path().join(p)).unwrap();
        assert_eq!(
            read("changes/notes.txt"),
            std::fs::read_to_string(
                "tests/data/outside-workflow/workflows/changelog-entry/1.0.0/examples/changes/notes.txt"
            )
            .unwrap()
        );
        let entry: serde_json::Value = serde_json::from_str(&read("changes/entry.json")).unwrap();
        for field in ["kind", "summary", "ships_on", "issues"] {
            assert!(entry.get(field).is_some(), "{field} in {entry}");
        }
        assert!(read("changes/check.sh").contains("publish-notes"));
    }
}

#[test]
fn a_harness_the_workflow_does_not_pin_is_blocked_and_nothing_is_written() {
    let registry = OutsideRegistry::build();
    let parent = tempfile::tempdir().unwrap();
    let project = parent.path().join("project");
    let out = stage(&[
        "--harness",
        "cowork",
        "--registry",
        &registry.path(),
        "--project",
        project.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unsupported_harness"),
        "{}",
        stderr(&out)
    );
    assert!(
        !project.exists(),
        "a refused start leaves no project behind"
    );
}

#[test]
fn a_workflow_or_version_the_release_lacks_is_refused_with_the_servers_code() {
    let registry = OutsideRegistry::build();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    let registry_path = registry.path();
    for selection in [
        vec!["--workflow", "no-such-workflow"],
        vec![
            "--workflow",
            "changelog-entry",
            "--workflow-version",
            "9.9.9",
        ],
    ] {
        let mut args = vec![
            "--harness",
            "codex",
            "--registry",
            &registry_path,
            "--project",
            dir,
        ];
        args.extend(&selection);
        let out = stage(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{selection:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("unknown_workflow"),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read_dir(project.path()).unwrap().count(),
            0,
            "nothing is written to an existing project before a start succeeds"
        );
    }
}

#[test]
fn revise_sends_one_step_back_once_and_the_run_still_completes() {
    let registry = OutsideRegistry::build();
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--harness",
        "claude-code",
        "--registry",
        &registry.path(),
        "--project",
        project.path().to_str().unwrap(),
        "--revise",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = step_lines(&out);
    assert!(
        lines[1].starts_with("step 2/3 draft-entry revise"),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with("step 2/3 draft-entry advanced"),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 4, "{lines:?}");
}

#[test]
fn each_fault_shows_its_code_on_a_workflow_written_outside_the_repository() {
    let registry = OutsideRegistry::build();
    // This workflow declares no checks, so `text-mismatch` has nothing to apply to; the checked
    // outside workflow shows that fault's code (`tests/checks.rs`).
    for fault in rimthan_stage::Fault::ALL
        .iter()
        .filter(|f| **f != rimthan_stage::Fault::TextMismatch)
    {
        let project = tempfile::tempdir().unwrap();
        let out = stage(&[
            "--harness",
            "codex",
            "--registry",
            &registry.path(),
            "--project",
            project.path().to_str().unwrap(),
            "--fault",
            fault.as_str(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", fault.as_str());
        let code = fault.expected_code();
        assert!(
            stderr(&out).contains(&format!("the server answered {code} (expected {code})")),
            "{}: {}",
            fault.as_str(),
            stderr(&out)
        );
    }
}

#[test]
fn an_initialized_source_stages_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let init = Command::new(BIN)
        .args(["registry", "init", source.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", stderr(&init));
    let registry = build_signed(&source, dir.path(), &["--strict"]);
    let project = tempfile::tempdir().unwrap();
    let out = stage(&[
        "--harness",
        "claude-code",
        "--registry",
        registry.to_str().unwrap(),
        "--project",
        project.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("): completed"));
}

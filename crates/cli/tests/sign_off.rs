//! The command-line path of sign-off (`docs/operations/facilitator.md` §5), all real processes:
//! `rimthan stage` drives a session of a workflow whose step needs two approvers to
//! `awaiting_approval` and stops there; `rimthan sessions send-back` sends it back with the
//! approver's own token; `stage --resume` revises and stops at sign-off again; the participant
//! may not approve their own session; two approvers do, and `stage --resume` completes it.
//! Runs the test workflow of `docs/examples/signed-off/`.

use std::{
    path::Path,
    process::{Command, Output},
};

mod common;

use common::{build_signed, copy_tree, serve_on_free_port};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn stage(url: &str, project: &Path, resume: bool) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(["stage", "--harness", "codex", "--url", url, "--project"])
        .arg(project)
        .env("RIMTHAN_TOKEN", "pat");
    if resume {
        command.arg("--resume");
    }
    command.output().unwrap()
}

fn decide(server: &str, token: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("sessions")
        .args(args)
        .args(["--step", "write-note", "--server", server])
        .env("RIMTHAN_TOKEN", token)
        .output()
        .unwrap()
}

#[test]
fn stage_stops_at_sign_off_and_approvers_decide_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/signed-off"),
        &source,
    );
    let registry = build_signed(&source, dir.path(), &[]);
    let hash = |t: &str| rimthan_registry::Sha256Digest::of(t.as_bytes()).to_string();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(
        &tokens,
        serde_json::json!({"tokens": [
            {"sha256": hash("pat"), "principal": "pat", "organization": "acme", "scopes": ["rimthan:workflow"]},
            {"sha256": hash("ann"), "principal": "ann", "organization": "acme", "facilitator": "organization"},
            {"sha256": hash("rui"), "principal": "rui", "organization": "acme", "roles": ["release-manager"]},
        ]})
        .to_string(),
    )
    .unwrap();
    let mut serve = Command::new(BIN);
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--auth", "tokens"])
        .arg("--auth-tokens-file")
        .arg(&tokens)
        .arg("--registry")
        .arg(&registry)
        .arg("--database-url")
        .arg(format!(
            "sqlite://{}",
            dir.path().join("db.sqlite").display()
        ));
    let (served, port) = serve_on_free_port(serve);
    let server = format!("http://127.0.0.1:{port}");
    let url = format!("{server}/mcp");
    let project = dir.path().join("project");

    // Without a token, the server's 401 is said as what to do, not as transport types.
    let refused = Command::new(BIN)
        .args(["stage", "--harness", "codex", "--url", &url, "--project"])
        .arg(dir.path().join("tokenless"))
        .env_remove("RIMTHAN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains(&format!(
            "the server at {url} requires a bearer token (401): pass --token or set RIMTHAN_TOKEN"
        )),
        "{}",
        text(&refused.stderr)
    );

    // Stopped at sign-off: exit status 4, who may decide, and the session's page.
    let out = stage(&url, &project, false);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(stdout.contains("): awaiting_approval"), "{stdout}");
    let said = text(&out.stderr);
    assert!(
        said.contains("waiting for sign-off of step write-note: approvals 0 of 2; may decide: a facilitator of the session's organization, or someone holding the role release-manager, not the participant")
            && said.contains(&format!("{server}/admin/sessions/")),
        "{said}"
    );
    let id = stdout
        .split_whitespace()
        .nth(1)
        .expect("the summary names the session")
        .to_owned();

    // What waits for rui, from the command line with rui's own token.
    let waiting = Command::new(BIN)
        .args(["sessions", "list", "--waiting-for-me", "--server", &server])
        .env("RIMTHAN_TOKEN", "rui")
        .output()
        .unwrap();
    assert!(waiting.status.success(), "{}", text(&waiting.stderr));
    let listed = text(&waiting.stdout);
    assert!(
        listed.contains(&id) && listed.contains("write-note") && listed.contains("never"),
        "{listed}"
    );

    let sent = decide(
        &server,
        "ann",
        &["send-back", &id, "--note", "Batch the backfill."],
    );
    assert!(sent.status.success(), "{}", text(&sent.stderr));
    assert!(
        text(&sent.stdout).contains(r#""status": "revise""#),
        "{}",
        text(&sent.stdout)
    );

    // The resumed run shows the send-back's note before anything else.
    let out = stage(&url, &project, true);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        stdout.starts_with("Sent back by ann: Batch the backfill.\n"),
        "{stdout}"
    );
    assert!(stdout.contains("): awaiting_approval"), "{stdout}");

    let own = decide(
        &server,
        "pat",
        &["approve", &id, "--note", "My own work is fine."],
    );
    assert_eq!(own.status.code(), Some(1));
    assert!(
        text(&own.stderr).contains("approval_not_allowed"),
        "{}",
        text(&own.stderr)
    );
    // Bound to a digest the output does not have: refused, naming the path.
    let zeros = "0".repeat(64);
    let changed = decide(
        &server,
        "rui",
        &[
            "approve",
            &id,
            "--expect-sha256",
            &format!("note/note.md={zeros}"),
        ],
    );
    assert_eq!(changed.status.code(), Some(1));
    let said = text(&changed.stderr);
    assert!(
        said.contains("approval_content_changed") && said.contains("note/note.md"),
        "{said}"
    );
    for approver in ["rui", "ann"] {
        let out = decide(&server, approver, &["approve", &id, "--note", "Checked."]);
        assert!(out.status.success(), "{approver}: {}", text(&out.stderr));
    }

    let out = stage(&url, &project, true);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("): completed"), "{stdout}");
    assert!(
        project
            .join(".rimthan/workflow-session.intoto.json")
            .is_file()
    );

    // The server reads the same report to a facilitator, byte for byte, text and JSON; a
    // participant reads nothing of it.
    let database = format!("sqlite://{}", dir.path().join("db.sqlite").display());
    let show = |args: &[&str], token: Option<&str>| {
        let mut command = Command::new(BIN);
        command.args(["sessions", "show", &id]).args(args);
        match token {
            Some(token) => command.env("RIMTHAN_TOKEN", token),
            None => command.env_remove("RIMTHAN_TOKEN"),
        };
        command.output().unwrap()
    };
    let registry = registry.to_str().unwrap();
    for format in [&[][..], &["--json"][..]] {
        let local = [
            format,
            &["--database-url", &database, "--registry", registry],
        ]
        .concat();
        let local = show(&local, None);
        assert!(local.status.success(), "{}", text(&local.stderr));
        let remote = show(&[format, &["--server", &server]].concat(), Some("ann"));
        assert!(remote.status.success(), "{}", text(&remote.stderr));
        assert_eq!(text(&remote.stdout), text(&local.stdout));
    }
    let participant = show(&["--server", &server], Some("pat"));
    assert_eq!(participant.status.code(), Some(1));
    assert!(
        text(&participant.stderr).contains("403"),
        "{}",
        text(&participant.stderr)
    );

    // The timeline names who decided and what they wrote, the refused attempt included.
    drop(served);
    let shown = Command::new(BIN)
        .args(["sessions", "show", &id, "--database-url"])
        .arg(format!(
            "sqlite://{}",
            dir.path().join("db.sqlite").display()
        ))
        .output()
        .unwrap();
    let shown = text(&shown.stdout);
    let line = |tool: &str, needle: &str| {
        shown
            .lines()
            .find(|l| l.contains(tool) && l.contains(needle))
            .unwrap_or_else(|| panic!("no {tool} line with {needle:?} in\n{shown}"))
            .to_owned()
    };
    line(
        "send_back_step",
        "step write-note by ann: Batch the backfill.",
    );
    let refused = line("approve_step", "by pat");
    assert!(
        refused.contains("rejected")
            && refused.contains("approval_not_allowed")
            && refused.contains("My own work is fine."),
        "{refused}"
    );
    line("approve_step", "by rui: Checked.");
    line("approve_step", "by ann: Checked.");
}

#[test]
fn serve_with_no_flags_completes_a_sign_off_given_at_the_machine_under_an_asserted_name() {
    // The README's `serve` (embedded registry, no authentication) and a shipped workflow whose
    // step needs sign-off: the participant's harness stops there, the operator at the machine
    // approves under their name, and the session completes.
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Command::new(BIN);
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(format!(
            "sqlite://{}",
            dir.path().join("db.sqlite").display()
        ));
    let (served, port) = serve_on_free_port(serve);
    let server = format!("http://127.0.0.1:{port}");
    let url = format!("{server}/mcp");
    let project = dir.path().join("project");
    let run = |resume: bool| {
        let mut command = Command::new(BIN);
        command
            .args([
                "stage",
                "--harness",
                "codex",
                "--workflow",
                "schema-migration",
            ])
            .args(["--url", &url, "--project"])
            .arg(&project);
        if resume {
            command.arg("--resume");
        }
        command.output().unwrap()
    };
    let waits = run(false);
    assert_eq!(waits.status.code(), Some(4), "{}", text(&waits.stderr));
    let file: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(project.join(".rimthan/workflow-session.json")).unwrap(),
    )
    .unwrap();
    let session = file["session_id"].as_str().unwrap().to_owned();
    let step = file["active_step"].as_str().unwrap().to_owned();

    // Without a name, or with a token but no name, nothing is decided.
    let nameless = Command::new(BIN)
        .args([
            "sessions", "approve", &session, "--step", &step, "--server", &server,
        ])
        .env("RIMTHAN_TOKEN", "anything")
        .output()
        .unwrap();
    assert_eq!(
        nameless.status.code(),
        Some(1),
        "{}",
        text(&nameless.stderr)
    );
    assert!(text(&nameless.stderr).contains("approval_not_authenticated"));
    let approved = Command::new(BIN)
        .args([
            "sessions", "approve", &session, "--step", &step, "--server", &server,
        ])
        .args(["--as", "ada", "--note", "Read at the machine."])
        .env_remove("RIMTHAN_TOKEN")
        .output()
        .unwrap();
    assert!(approved.status.success(), "{}", text(&approved.stderr));
    assert!(text(&approved.stdout).contains("\"recorded\""));

    let done = run(true);
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert!(
        text(&done.stdout).contains(": completed"),
        "{}",
        text(&done.stdout)
    );
    drop(served);
}

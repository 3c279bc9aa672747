//! A workflow written outside this repository with deterministic checks (a Markdown rule and
//! squawk, `docs/examples/checked-workflow/`): it builds with its examples passing and its
//! counter-examples failing, stages on both pinned harnesses over HTTP (each protocol
//! revision), and `rimthan registry check` holds local files to the same checks.

use std::{
    path::Path,
    process::{Command, Output},
};

mod common;

use common::{build_signed, example_source, serve_on_free_port};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_checked_workflow_stages_on_both_pinned_harnesses_and_the_text_mismatch_fault_shows_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let registry = build_signed(&source, dir.path(), &[]);
    let mut serve = Command::new(BIN);
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--registry"])
        .arg(&registry)
        .arg("--database-url")
        .arg(format!(
            "sqlite://{}",
            dir.path().join("db.sqlite").display()
        ));
    let (_server, port) = serve_on_free_port(serve);
    let url = format!("http://127.0.0.1:{port}/mcp");
    for (harness, protocol) in [("codex", "2026-07-28"), ("claude-code", "2025-11-25")] {
        let project = tempfile::tempdir().unwrap();
        let out = run(&[
            "stage",
            "--harness",
            harness,
            "--url",
            &url,
            "--protocol",
            protocol,
            "--project",
            project.path().to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{harness}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("data-fix@1.0.0): completed"),
            "{}",
            text(&out.stdout)
        );
    }
    let project = tempfile::tempdir().unwrap();
    let out = run(&[
        "stage",
        "--harness",
        "codex",
        "--url",
        &url,
        "--project",
        project.path().to_str().unwrap(),
        "--fault",
        "text-mismatch",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "fault text-mismatch: the server answered output_text_mismatch (expected output_text_mismatch)"
        ),
        "{}",
        text(&out.stderr)
    );
}

fn check(source: &Path, files: &[&Path], format: &str) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["registry", "check"])
        .arg(source)
        .args(["--workflow", "data-fix", "--step", "write-fix"])
        .args(files)
        .args(["--format", format]);
    cmd.output().unwrap()
}

#[test]
fn registry_check_prints_each_finding_at_its_path_and_line_and_fails_like_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let work = dir.path().join("work/fix");
    std::fs::create_dir_all(&work).unwrap();
    let notes = work.join("notes.md");
    let up = work.join("up.sql");
    std::fs::write(
        &notes,
        "# Fix\n\n## Rollback\n\n- Restore from the snapshot (DBA).\n- Tell support.\n",
    )
    .unwrap();
    std::fs::write(&up, "ALTER TABLE orders RENAME COLUMN a TO b;\n").unwrap();

    let out = check(&source, &[&notes, &up], "text");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("fix/notes.md:6: rollback-owner: name who runs this rollback step"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fix/up.sql:1: renaming-column: "),
        "{stdout}"
    );
    assert!(
        stdout.contains("  help: Add the new column, copy, move readers and writers over"),
        "{stdout}"
    );
    assert!(
        stdout.contains("require-statement-timeout") && stdout.contains("(warning)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("check notes-name-rollback: fail"),
        "{stdout}"
    );

    let out = check(&source, &[&notes, &up], "json");
    assert_eq!(out.status.code(), Some(1));
    let results: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results[0]["verdict"], "fail");
    assert_eq!(results[0]["findings"][0]["line"], 6);

    // SARIF for code-scanning views: each finding at the file as given and its line.
    let out = check(&source, &[&notes, &up], "sarif");
    assert_eq!(out.status.code(), Some(1));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(log["version"], "2.1.0");
    let results = log["runs"][0]["results"].as_array().unwrap();
    let owner = results
        .iter()
        .find(|r| r["ruleId"] == "notes-name-rollback/rollback-owner")
        .expect("the rollback-owner finding");
    assert_eq!(owner["level"], "error");
    let location = &owner["locations"][0]["physicalLocation"];
    assert_eq!(
        location["artifactLocation"]["uri"],
        notes.display().to_string()
    );
    assert_eq!(location["region"]["startLine"], 6);
    assert!(
        log["runs"][0]["tool"]["driver"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == "notes-name-rollback/rollback-owner")
    );
    // A rule its check describes carries the author's help and page.
    let rename = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "up-lint/renaming-column")
        .expect("the renaming-column rule");
    assert_eq!(
        rename["helpUri"],
        "https://squawkhq.com/docs/renaming-column"
    );
    assert!(
        rename["help"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Add the new column")
    );

    // A file a check reads was not given: nothing is checked, and the run does not pass.
    let out = check(&source, &[&notes], "text");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let said = text(&out.stderr);
    assert!(
        said.contains("check_input_missing") && said.contains("fix/up.sql"),
        "{said}"
    );

    std::fs::write(
        &notes,
        "# Fix\n\n## Rollback\n\n- Restore from the snapshot (DBA).\n",
    )
    .unwrap();
    std::fs::write(
        &up,
        "SET statement_timeout = '5s';\nUPDATE orders SET b = 1 WHERE b IS NULL;\n",
    )
    .unwrap();
    let out = check(&source, &[&notes, &up], "text");
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("check up-lint: pass"));

    let stray = dir.path().join("elsewhere.md");
    std::fs::write(&stray, "# x\n").unwrap();
    let out = check(&source, &[&stray], "text");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("none of the step's outputs or inputs"),
        "{}",
        text(&out.stderr)
    );
}

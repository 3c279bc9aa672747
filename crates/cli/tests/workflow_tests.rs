//! `rimthan registry test` (`docs/authoring.md` §13): an outside workflow's cases
//! (`docs/examples/checked-workflow/workflows/data-fix/1.0.0/tests/`) pass as written, and a
//! case that says something else happens fails with the first divergence, in text and JSON.

use std::process::{Command, Output};

mod common;

use common::example_source;

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");
const CASES: &str = "workflows/data-fix/1.0.0/tests";

fn test(source: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["registry", "test"])
        .arg(source)
        .args(extra)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_example_workflows_cases_pass_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let out = test(&source, &[]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let printed = text(&out.stdout);
    for case in [
        "a-check-sends-it-back",
        "happy-path",
        "squawk-sends-it-back",
        "the-reviewer-sends-it-back",
    ] {
        assert!(
            printed.contains(&format!("PASS data-fix@1.0.0 {case}\n")),
            "{printed}"
        );
    }
    assert!(
        printed.contains("4 case(s): 4 passed, 0 failed"),
        "{printed}"
    );
}

#[test]
fn a_case_that_expects_otherwise_fails_at_its_first_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let edit = |case: &str, from: &str, to: &str| {
        let path = source.join(CASES).join(case).join("case.json");
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(json.contains(from), "{case} says {from}");
        std::fs::write(&path, json.replacen(from, to, 1)).unwrap();
    };
    // The wrong rule named; the reviewer no longer fails, so nothing sends the step back.
    edit(
        "a-check-sends-it-back",
        r#"["rollback-owner"]"#,
        r#"["rollback-section"]"#,
    );
    edit(
        "the-reviewer-sends-it-back",
        r#""fail": ["fix-reviewer"], "#,
        "",
    );
    let out = test(&source, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains(
            "FAIL data-fix@1.0.0 a-check-sends-it-back: submission 2 (write-fix): expected it \
             sent back by rollback-section, got rollback-owner"
        ),
        "{printed}"
    );
    assert!(
        printed.contains(
            "FAIL data-fix@1.0.0 the-reviewer-sends-it-back: submission 2 (write-fix): expected \
             revise, got completed"
        ),
        "{printed}"
    );
    assert!(
        printed.contains("PASS data-fix@1.0.0 happy-path"),
        "{printed}"
    );

    let out = test(&source, &["--format", "json", "--workflow", "data-fix"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    let failed: Vec<_> = cases
        .iter()
        .filter(|c| c["result"] == "fail")
        .map(|c| c["case"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        ["a-check-sends-it-back", "the-reviewer-sends-it-back"]
    );
    assert_eq!(cases[1]["workflow"], "data-fix");
    assert_eq!(cases[1]["version"], "1.0.0");
    assert_eq!(cases[1]["divergence"], serde_json::Value::Null);

    let out = test(&source, &["--format", "junit"]);
    assert_eq!(out.status.code(), Some(1));
    let (testcases, failures) = junit(&out.stdout);
    assert_eq!(
        testcases,
        [
            "data-fix@1.0.0 a-check-sends-it-back",
            "data-fix@1.0.0 happy-path",
            "data-fix@1.0.0 squawk-sends-it-back",
            "data-fix@1.0.0 the-reviewer-sends-it-back"
        ]
    );
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[1].contains("expected revise, got completed"),
        "{failures:?}"
    );
}

/// A JUnit report's testcases (`classname name`) and failure messages, as a CI system reads
/// them.
fn junit(xml: &[u8]) -> (Vec<String>, Vec<String>) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(xml);
    let (mut testcases, mut failures) = (Vec::new(), Vec::new());
    let attr = |e: &quick_xml::events::BytesStart<'_>, name: &[u8]| {
        e.try_get_attribute(name)
            .unwrap()
            .map(|a| a.unescape_value().unwrap().into_owned())
            .unwrap_or_default()
    };
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf).unwrap() {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                b"testcase" => {
                    testcases.push(format!("{} {}", attr(&e, b"classname"), attr(&e, b"name")))
                }
                b"failure" => failures.push(attr(&e, b"message")),
                _ => {}
            },
            _ => {}
        }
        buf.clear();
    }
    (testcases, failures)
}

#[test]
fn a_case_file_that_reaches_outside_the_workflow_versions_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let path = source
        .join(CASES)
        .join("a-check-sends-it-back")
        .join("case.json");
    let json = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        json.replacen(
            "\"../../counter-examples/notes-name-rollback/step-without-owner/fix/notes.md\"",
            "\"../../../1.0.0/examples/fix/notes.md\"",
            1,
        ),
    )
    .unwrap();
    let out = test(&source, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("name a file of the workflow version's folder"),
        "{}",
        text(&out.stdout)
    );
}

/// The case `docs/authoring.md` §13 shows runs as shown on the example it is written for.
#[test]
fn the_case_the_authoring_guide_shows_passes_on_the_example() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/authoring.md"),
    )
    .unwrap();
    let shown = guide
        .split("## 13. Workflow test cases")
        .nth(1)
        .and_then(|s| s.split("```json\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("§13 shows a case.json");
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let case = source.join(CASES).join("from-the-guide");
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(case.join("case.json"), shown).unwrap();
    let out = test(&source, &[]);
    assert!(
        text(&out.stdout).contains("PASS data-fix@1.0.0 from-the-guide"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The cases that ship with the embedded registry's source pass: every shipped workflow
/// version that has cases runs them here, so a release cannot change what they prove unseen.
#[test]
fn the_shipped_workflows_cases_pass() {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source");
    let out = test(&source, &["--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    let cases = report["cases"].as_array().unwrap();
    let workflows: std::collections::BTreeSet<_> = cases
        .iter()
        .map(|c| c["workflow"].as_str().unwrap())
        .collect();
    assert!(
        cases.len() >= 6 && workflows.len() >= 2,
        "each shipped workflow carries cases: {report}"
    );
    let failed: Vec<_> = cases.iter().filter(|c| c["result"] != "pass").collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(out.status.success());
}

/// `--init` writes the happy path of a workflow as a case that passes as written: to the end,
/// or to the first step people sign off; it never overwrites a case.
#[test]
fn init_writes_a_happy_path_that_passes_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    for (example, workflow, ends) in [
        ("checked-workflow", "data-fix", "completed"),
        ("signed-off", "release-note", "awaiting_approval"),
    ] {
        let source = example_source(example, &dir.path().join(example));
        let init = test(&source, &["--init", "first", "--workflow", workflow]);
        assert!(init.status.success(), "{}", text(&init.stderr));
        let written = std::fs::read_to_string(
            source
                .join("workflows")
                .join(workflow)
                .join("1.0.0/tests/first/case.json"),
        )
        .unwrap();
        let case: serde_json::Value = serde_json::from_str(&written).unwrap();
        assert_eq!(case["status"], ends, "{written}");
        let run = test(&source, &["--workflow", workflow]);
        assert!(
            text(&run.stdout).contains(&format!("PASS {workflow}@1.0.0 first")),
            "{}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
        let again = test(&source, &["--init", "first", "--workflow", workflow]);
        assert_eq!(again.status.code(), Some(1));
        assert_eq!(
            std::fs::read_to_string(
                source
                    .join("workflows")
                    .join(workflow)
                    .join("1.0.0/tests/first/case.json")
            )
            .unwrap(),
            written
        );
    }
}

/// `registry build` runs the cases as it proves the examples: a failing case publishes nothing,
/// while a draft is built anyway with the failure shown.
#[test]
fn a_failing_case_stops_a_build_but_not_a_draft() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let path = source
        .join(CASES)
        .join("the-reviewer-sends-it-back")
        .join("case.json");
    let json = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, json.replacen(r#""fail": ["fix-reviewer"], "#, "", 1)).unwrap();
    let key = dir.path().join("author.key");
    let registry = dir.path().join("registry");
    let keygen = Command::new(BIN)
        .args(["registry", "keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(keygen.status.success());
    let build = |extra: &[&str]| {
        Command::new(BIN)
            .args(["registry", "build"])
            .arg(&source)
            .arg("--out")
            .arg(&registry)
            .args(["--release", "2027.1.0", "--key"])
            .arg(&key)
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = build(&[]);
    assert_eq!(refused.status.code(), Some(1));
    let said = text(&refused.stderr);
    assert!(
        said.contains("FAIL data-fix@1.0.0 the-reviewer-sends-it-back")
            && said.contains("1 of 4 workflow test case(s) failed"),
        "{said}"
    );
    assert!(!registry.join("releases").exists(), "nothing was published");
    let draft = build(&["--draft"]);
    assert!(draft.status.success(), "{}", text(&draft.stderr));
    assert!(text(&draft.stderr).contains("the draft is built anyway"));
    assert!(registry.join("drafts/2027.1.0/manifest.json").is_file());
}

/// A case decides sign-offs as people do: a step needing two approvals completes with two, and
/// waits with one, which a case expecting completion reports.
#[test]
fn a_case_decides_a_sign_off_and_one_approval_of_two_is_not_enough() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("signed-off", dir.path());
    let cases = source.join("workflows/release-note/1.0.0/tests");
    let case = |name: &str, approvers: &[&str]| {
        let decisions: Vec<_> = approvers
            .iter()
            .map(|by| serde_json::json!({"by": by, "decide": "approve"}))
            .collect();
        let doc = serde_json::json!({"submissions": [
            {"step": "setup-workspace", "expect": "advanced"},
            {"step": "draft-plan", "expect": "advanced"},
            {"step": "write-note", "expect": "awaiting_approval", "decisions": decisions},
        ], "status": "completed"});
        std::fs::create_dir_all(cases.join(name)).unwrap();
        std::fs::write(cases.join(name).join("case.json"), doc.to_string()).unwrap();
    };
    case("two-approvals", &["ann", "bob"]);
    case("one-approval", &["ann"]);
    let out = test(&source, &[]);
    let printed = text(&out.stdout);
    assert!(
        printed.contains("PASS release-note@1.0.0 two-approvals"),
        "{printed}{}",
        text(&out.stderr)
    );
    assert!(
        printed.contains(
            "FAIL release-note@1.0.0 one-approval: after the last submission: expected status \
             completed, got awaiting_approval"
        ),
        "{printed}"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// A case moves the clock: a sign-off that expires sends the step back (`on_expiry:
/// send_back`), and a missed deadline ends the session (`on_expiry: fail`), as the server's
/// timers do at that time (`crates/engine/tests/data/timed/`).
#[test]
fn a_case_waits_for_timers_an_expiry_sends_back_and_a_missed_deadline_ends_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    common::copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/timed"),
        &source,
    );
    let write = |version: &str, name: &str, doc: serde_json::Value| {
        let case = source
            .join("workflows/release-note")
            .join(version)
            .join("tests")
            .join(name);
        std::fs::create_dir_all(&case).unwrap();
        std::fs::write(case.join("case.json"), doc.to_string()).unwrap();
    };
    write(
        "1.0.0",
        "the-sign-off-expires",
        serde_json::json!({"submissions": [
            {"step": "setup-workspace", "expect": "advanced"},
            {"step": "draft-plan", "expect": "advanced"},
            {"step": "write-note", "expect": "awaiting_approval", "wait": "P3DT1H"},
            {"step": "write-note", "expect": "awaiting_approval"},
        ], "status": "awaiting_approval"}),
    );
    write(
        "1.1.0",
        "the-deadline-passes",
        serde_json::json!({"submissions": [
            {"step": "setup-workspace", "expect": "advanced", "wait": "P2DT1H"},
        ], "status": "expired"}),
    );
    write(
        "1.1.0",
        "the-deadline-has-not-passed",
        serde_json::json!({"submissions": [
            {"step": "setup-workspace", "expect": "advanced", "wait": "P1D"},
        ], "status": "expired"}),
    );
    let out = test(&source, &[]);
    let printed = text(&out.stdout);
    for pass in [
        "PASS release-note@1.0.0 the-sign-off-expires",
        "PASS release-note@1.1.0 the-deadline-passes",
    ] {
        assert!(printed.contains(pass), "{printed}{}", text(&out.stderr));
    }
    assert!(
        printed.contains(
            "FAIL release-note@1.1.0 the-deadline-has-not-passed: after the last submission: \
             expected status expired, got active"
        ),
        "{printed}"
    );
}

/// A refusal is an outcome a case can expect, with its codes: notes over the output's
/// `max_bytes` are refused when the step is prepared, and a case expecting other codes fails.
#[test]
fn a_case_expects_a_refusal_with_its_codes() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let case = source.join(CASES).join("notes-too-long");
    std::fs::create_dir_all(&case).unwrap();
    let mut notes = String::from("# Backfill\n\n");
    while notes.len() <= 65536 {
        notes.push_str("A line of notes nobody needed.\n");
    }
    std::fs::write(case.join("notes.md"), notes).unwrap();
    let doc = |codes: &[&str]| {
        serde_json::json!({"submissions": [
            {"step": "setup-workspace", "expect": "advanced"},
            {"step": "write-fix", "outputs": {"fix/notes.md": "notes.md"},
             "expect": "rejected", "codes": codes},
        ], "status": "rejected"})
        .to_string()
    };
    std::fs::write(case.join("case.json"), doc(&["max_bytes_exceeded"])).unwrap();
    let out = test(&source, &["--workflow", "data-fix"]);
    assert!(
        text(&out.stdout).contains("PASS data-fix@1.0.0 notes-too-long"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    std::fs::write(case.join("case.json"), doc(&["output_text_mismatch"])).unwrap();
    let out = test(&source, &["--workflow", "data-fix"]);
    assert!(
        text(&out.stdout).contains(
            "FAIL data-fix@1.0.0 notes-too-long: submission 2 (write-fix): expected codes \
             output_text_mismatch, got max_bytes_exceeded"
        ),
        "{}",
        text(&out.stdout)
    );
}

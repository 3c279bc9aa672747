//! What a first-time author meets after `registry build` succeeds: staging on a harness the
//! workflow does not pin, a report schema whose first example fails, a workflow id longer than
//! a list column, and a channel that names no release. The workflow is
//! `tests/data/last-mile`, built and signed with a fresh key as an author does.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

mod common;

use common::{build_signed, outside_source};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");
const LABEL: &str = "quarterly-vendor-risk-review@1.0.0";

fn rimthan(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The fixture plus the shared adapters and base report schema, built as release 2027.1.0 on
/// channel `stable` into `dir/registry`.
fn build(dir: &Path) -> PathBuf {
    build_signed(&outside_source("last-mile", dir), dir, &[])
}

#[test]
fn a_run_on_a_report_schema_whose_first_example_fails_completes_and_lists_the_whole_version() {
    let dir = tempfile::tempdir().unwrap();
    let registry = build(dir.path());
    let database = format!("sqlite://{}", dir.path().join("store.db").display());
    let project = dir.path().join("project");
    let out = rimthan(&[
        "stage",
        "--registry",
        registry.to_str().unwrap(),
        "--harness",
        "codex",
        "--database-url",
        &database,
        "--project",
        project.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    let list = rimthan(&[
        "sessions",
        "list",
        "--registry",
        registry.to_str().unwrap(),
        "--database-url",
        &database,
    ]);
    assert!(list.status.success(), "{}", stderr(&list));
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains(LABEL), "{text}");
}

#[test]
fn a_harness_the_workflow_does_not_pin_is_refused_for_that_reason_only() {
    let dir = tempfile::tempdir().unwrap();
    let registry = build(dir.path());
    let project = dir.path().join("project");
    let out = rimthan(&[
        "stage",
        "--registry",
        registry.to_str().unwrap(),
        "--harness",
        "cowork",
        "--project",
        project.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("unsupported_harness"), "{err}");
    assert!(!err.contains("unsupported_host_adapter"), "{err}");
}

#[test]
fn a_channel_that_names_no_release_says_how_to_promote_one() {
    let dir = tempfile::tempdir().unwrap();
    let registry = build(dir.path());
    let registry = registry.to_str().unwrap();
    let project = dir.path().join("project");
    let staged = rimthan(&[
        "stage",
        "--registry",
        registry,
        "--channel",
        "candidate",
        "--harness",
        "codex",
        "--project",
        project.to_str().unwrap(),
    ]);
    let served = rimthan(&[
        "serve",
        "--registry",
        registry,
        "--channel",
        "candidate",
        "--listen",
        "127.0.0.1:0",
    ]);
    for out in [staged, served] {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("channel candidate names no release"), "{err}");
        assert!(err.contains("channels: stable"), "{err}");
        assert!(
            err.contains("rimthan registry promote REGISTRY --channel candidate"),
            "{err}"
        );
    }
}

#[test]
fn every_round_of_validator_reports_is_shown_after_the_step_passes() {
    let dir = tempfile::tempdir().unwrap();
    let registry = build(dir.path());
    let database = format!("sqlite://{}", dir.path().join("store.db").display());
    let project = dir.path().join("project");
    let out = rimthan(&[
        "stage",
        "--registry",
        registry.to_str().unwrap(),
        "--harness",
        "claude-code",
        "--database-url",
        &database,
        "--project",
        project.to_str().unwrap(),
        "--revise",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let session = std::fs::read_to_string(project.join(".rimthan/workflow-session.json")).unwrap();
    let session: serde_json::Value = serde_json::from_str(&session).unwrap();
    let id = session["session_id"].as_str().unwrap().to_owned();

    let show = |extra: &[&str]| {
        let mut args = vec!["sessions", "show", "--database-url", &database, &id];
        args.extend(extra);
        let out = rimthan(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let shown: serde_json::Value = serde_json::from_str(&show(&["--json"])).unwrap();
    let rounds = shown["report_rounds"]["write-result"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    let (failed, passed) = (&rounds[0]["reports"][0], &rounds[1]["reports"][0]);
    assert_eq!(rounds[0]["round"], 1);
    assert_eq!(failed["verdict"], "fail");
    assert!(
        !failed["findings"].as_array().unwrap().is_empty(),
        "{failed}"
    );
    assert_eq!(passed["verdict"], "pass");
    assert!(passed["items_checked"].as_u64().unwrap() >= 1, "{passed}");

    let text = show(&[]);
    assert!(text.contains("write-result round 1"), "{text}");
    assert!(text.contains("result-checker@1.0.0 fail"), "{text}");
    assert!(text.contains("items_checked = "), "{text}");
}

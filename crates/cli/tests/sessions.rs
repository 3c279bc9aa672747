//! `rimthan sessions`, as a facilitator runs it beside a store harnesses have used
//! (`docs/operations/facilitator.md`).

use std::{path::Path, process::Command};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

fn rimthan(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// Stages one whole session of the embedded release's first workflow into `database`.
fn stage(database: &str, project: &Path, harness: &str, extra: &[&str]) {
    let project = project.to_str().unwrap();
    let mut args = vec![
        "stage",
        "--harness",
        harness,
        "--database-url",
        database,
        "--project",
        project,
    ];
    args.extend_from_slice(extra);
    let out = rimthan(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json(args: &[&str]) -> Value {
    let out = rimthan(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sessions_list_and_show_what_harnesses_did_and_refuse_what_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("store.db").display());
    let workflow = rimthan_registry::verify_embedded()
        .unwrap()
        .releases()
        .values()
        .last()
        .unwrap()
        .workflows()
        .next()
        .unwrap()
        .doc()
        .id
        .to_string();
    stage(
        &database,
        &dir.path().join("a"),
        "codex",
        &["--workflow", &workflow],
    );
    stage(
        &database,
        &dir.path().join("b"),
        "claude-code",
        &["--workflow", &workflow, "--revise"],
    );

    let listed = json(&["sessions", "list", "--database-url", &database, "--json"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    for session in listed {
        assert_eq!(session["status"], "completed");
        assert_eq!(session["workflow"], workflow.as_str());
        assert_eq!(session["step_index"], session["steps"]);
    }
    let harnesses: Vec<_> = listed.iter().map(|s| s["harness"].clone()).collect();
    assert!(harnesses.contains(&"codex".into()) && harnesses.contains(&"claude-code".into()));
    let revised = listed
        .iter()
        .find(|s| s["harness"] == "claude-code")
        .unwrap();
    assert_eq!(revised["revise_rounds"], 1);

    let filtered = json(&[
        "sessions",
        "list",
        "--database-url",
        &database,
        "--json",
        "--status",
        "revise",
    ]);
    assert_eq!(filtered, serde_json::json!([]));
    let page_two = json(&[
        "sessions",
        "list",
        "--database-url",
        &database,
        "--json",
        "--limit",
        "1",
        "--page",
        "2",
    ]);
    assert_eq!(page_two.as_array().unwrap()[..], listed[1..]);

    let id = revised["id"].as_str().unwrap();
    let shown = json(&[
        "sessions",
        "show",
        "--database-url",
        &database,
        id,
        "--json",
    ]);
    let timeline = shown["timeline"].as_array().unwrap();
    assert_eq!(timeline[0]["tool"], "start_workflow");
    // The revision a decision names with --revision (docs/operations/facilitator.md §5).
    let revision = shown["revision"]
        .as_u64()
        .expect("show --json carries the revision");
    assert!(revision > 0, "{revision}");
    let revise = timeline.iter().find(|e| e["outcome"] == "revise").unwrap();
    let failed = revise["judgement"]["failed"].as_array().unwrap();
    assert!(!failed.is_empty(), "{revise}");
    assert_eq!(timeline.last().unwrap()["outcome"], "completed");
    let outputs = shown["outputs"].as_array().unwrap();
    assert!(!outputs.is_empty());
    assert!(
        outputs
            .iter()
            .all(|o| o["sha256"].as_str().unwrap().len() == 64)
    );
    let text = rimthan(&["sessions", "show", "--database-url", &database, id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("revise"));
    let step = revise["judgement"]["step"].as_str().unwrap();
    assert!(
        text.contains(&format!("{step} failed by {}", failed[0].as_str().unwrap())),
        "{text}"
    );

    for (args, says) in [
        (
            vec!["show", "0123456789abcdef0123456789abcdef"],
            "is not in this store",
        ),
        (vec!["show", "<script>"], "is not a session id"),
        (
            vec!["list", "--status", "stuck"],
            "use active, revise, awaiting_approval or completed",
        ),
        (
            vec!["list", "--since", "7 weeks"],
            "give a number and a unit",
        ),
        (vec!["list", "--limit", "0"], "use 1 to 1000"),
        (vec!["list", "--page", "0"], "pages count from 1"),
    ] {
        let mut full = vec!["sessions"];
        full.extend_from_slice(&args);
        full.extend_from_slice(&["--database-url", &database]);
        let out = rimthan(&full);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// The flags `rimthan sessions <sub> --help` lists.
fn help_flags(sub: &str) -> std::collections::BTreeSet<String> {
    let help = String::from_utf8(rimthan(&["sessions", sub, "--help"]).stdout).unwrap();
    help.lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .map(|r| r.split([' ', '=', '<']).next().unwrap().to_owned())
        .filter(|f| f != "help")
        .collect()
}

/// The flags named in the first column of the tables of `docs/operations/facilitator.md`
/// between `from` and the next `## ` heading.
fn doc_flags(from: &str) -> std::collections::BTreeSet<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations/facilitator.md"),
    )
    .unwrap();
    let section = &doc[doc.find(from).expect("heading") + from.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" | ").next())
        .flat_map(|cell| cell.split("`--").skip(1))
        .map(|r| r.split(['`', ' ']).next().unwrap().to_owned())
        .collect()
}

#[test]
fn the_facilitator_flag_table_lists_every_sessions_list_flag() {
    assert_eq!(doc_flags("## 1. "), help_flags("list"));
}

#[test]
fn the_sign_off_flag_table_lists_every_decision_flag() {
    let mut from_help = help_flags("approve");
    from_help.extend(help_flags("send-back"));
    from_help.extend(help_flags("waive"));
    assert_eq!(doc_flags("## 5. "), from_help);
}

#[test]
fn sessions_show_prints_what_an_agent_wrote_with_control_and_bidi_characters_escaped() {
    use rimthan_testkit::engine::*;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("store.db").display());
    let hostile = "\u{1b}[2J\u{7}\u{202e}txt.exe";
    let id = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = rimthan_engine::store::open(&database).await.unwrap();
        let engine = engine_on(store).await;
        let start = start_request("claude-code");
        let setup = active(engine.start(start.clone(), None).await.unwrap());
        let first = pass_step(&engine, &setup, &start).await;
        let plan = ready(engine.prepare(prepare(&first, &start), None).await.unwrap());
        let mut req = submit(&first, &plan, rimthan_engine::Verdict::Fail);
        req.reports[0].summary = hostile.into();
        req.reports[0].findings[0].message = hostile.into();
        let revise = step_active(engine.submit(req, None).await.unwrap());
        revise.session_id
    });
    let out = rimthan(&["sessions", "show", &id, "--database-url", &database]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains(r"\u{1b}[2J\u{7}\u{202e}txt.exe"), "{shown}");
    assert!(
        !shown.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "raw control characters in\n{shown}"
    );
}

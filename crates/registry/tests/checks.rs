//! Deterministic checks as release content: a step's checks build into signed `check` entries
//! the verifier compiles and attaches to the step, and a release that breaks their rules is
//! refused.

use rimthan_registry::{CheckKind, ReleaseId, build_release, init_source};

use crate::{
    authoring::overlay_dir,
    common::{test_key, verify_external},
};

fn built_with_checks() -> rimthan_registry::BuiltRelease {
    let dir = tempfile::tempdir().unwrap();
    init_source(dir.path()).unwrap();
    rimthan_testkit::fs::copy_dir(&overlay_dir("checked"), dir.path());
    let release: ReleaseId = "0.1.0".parse().unwrap();
    build_release(dir.path(), &release, &test_key()).unwrap()
}

#[test]
fn a_step_with_proven_checks_builds_into_signed_check_entries() {
    let built = built_with_checks();
    assert_eq!(built.warnings, []);
    let registry = verify_external(&built.files).unwrap();
    let release = registry.release(&"0.1.0".parse().unwrap()).unwrap();
    let workflow = release.workflows().next().unwrap();
    let step = workflow.step("write-result").unwrap();
    let ids: Vec<&str> = step.doc().checks.iter().map(|c| c.as_str()).collect();
    assert_eq!(ids, ["notes-sections", "change-lint"]);
    let checks = step.checks();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0].doc().kind, CheckKind::Script);
    assert!(
        checks[0]
            .doc()
            .script
            .as_deref()
            .unwrap()
            .contains("risk-owner")
    );
    assert_eq!(checks[1].doc().kind, CheckKind::SqlLint);
    assert_eq!(
        checks[1].entry().path,
        "workflows/my-workflow/1.0.0/checks/change-lint.json"
    );
    // Bounded by the declared size of what it reads, so an output at max_bytes is checked.
    assert_eq!(checks[1].compiled().limits().max_input_bytes, 8192);
    // The steps without checks keep their bytes: no `checks` key at all.
    let setup = workflow.step("setup-workspace").unwrap();
    assert!(setup.doc().checks.is_empty());
    let setup_bytes = built
        .files
        .get("releases/0.1.0/workflows/my-workflow/1.0.0/steps/setup-workspace.json")
        .unwrap();
    assert!(!String::from_utf8_lossy(setup_bytes).contains("checks"));
}

#[test]
fn the_compiled_check_runs_on_a_participants_text() {
    let built = built_with_checks();
    let registry = verify_external(&built.files).unwrap();
    let release = registry.release(&"0.1.0".parse().unwrap()).unwrap();
    let step = release
        .workflows()
        .next()
        .unwrap()
        .step("write-result")
        .unwrap();
    let lint = step.checks()[1].compiled();
    let findings = lint
        .run(&[rimthan_checks::Input::new(
            "work/change.sql",
            b"ALTER TABLE t RENAME COLUMN a TO b;\n",
        )])
        .unwrap();
    let rules: Vec<(&str, Option<u32>)> =
        findings.iter().map(|f| (f.rule.as_str(), f.line)).collect();
    assert!(rules.contains(&("renaming-column", Some(1))), "{rules:?}");
}

#[test]
fn a_check_entry_no_step_lists_is_refused_by_the_verifier() {
    let mut built = built_with_checks();
    let path = "releases/0.1.0/workflows/my-workflow/1.0.0/steps/write-result.json";
    let mut doc: serde_json::Value =
        serde_json::from_slice(built.files.get(path).unwrap()).unwrap();
    doc["checks"] = serde_json::json!(["notes-sections"]);
    built.files.insert(
        path.to_owned(),
        rimthan_registry::to_canonical_bytes(&doc).unwrap(),
    );
    crate::common::reseal(&mut built.files, "0.1.0", &test_key());
    let err = verify_external(&built.files).unwrap_err();
    assert_eq!(err.code(), "check_invalid", "{err}");
    assert!(err.to_string().contains("change-lint"), "{err}");
}

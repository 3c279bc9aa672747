//! What `registry build` tells an author. One folder per authoring mistake under
//! `tests/source_data/<case>/case.json`: each applies its edits to the source `init_source`
//! writes (a small two-step workflow), builds it, and asserts the code, the source file the
//! message names (never the built `releases/…` file) and, where known, the line.

use std::path::{Path, PathBuf};

use rimthan_registry::{
    BuiltRelease, Harness, INIT_ADAPTER_VERSION, InitOptions, RegistryError, Version,
    build_release, init_source, init_source_with,
};
use serde::Deserialize;

use crate::common::{repo_root, test_key};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    description: String,
    /// A folder under `tests/source_overlays/` copied over the init source before the edits.
    #[serde(default)]
    overlay: Option<String>,
    edits: Vec<Edit>,
    expect: Expect,
}

/// Exactly one of `code` (the build fails), `warning` (it succeeds with that warning) or
/// `example` (it succeeds and inlines that example).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    warning: Option<String>,
    #[serde(default)]
    example: Option<ExpectExample>,
    /// The source file (relative to the source folder) the message must name.
    #[serde(default)]
    file: Option<String>,
    /// Its line, for errors whose parser knows it.
    #[serde(default)]
    line: Option<usize>,
    /// Further substrings the message must contain.
    #[serde(default)]
    mentions: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectExample {
    step: String,
    path: String,
    text: String,
}

/// An edit of a source-relative file.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
enum Edit {
    /// Replace the first occurrence of `find` with `with`, repeated `times` times (once when
    /// absent).
    Replace {
        path: String,
        find: String,
        with: String,
        #[serde(default)]
        times: Option<usize>,
    },
    Remove {
        path: String,
    },
    Rename {
        path: String,
        to: String,
    },
    /// Write `text`, or raw `bytes` when given.
    Write {
        path: String,
        #[serde(default)]
        text: String,
        #[serde(default)]
        bytes: Option<Vec<u8>>,
    },
}

fn source_data() -> PathBuf {
    repo_root().join("crates/registry/tests/source_data")
}

fn apply(src: &Path, edit: &Edit) {
    let write = |rel: &str, bytes: &[u8]| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    match edit {
        Edit::Replace {
            path,
            find,
            with,
            times,
        } => {
            let text = std::fs::read_to_string(src.join(path)).unwrap();
            assert!(text.contains(find.as_str()), "{path} lacks {find:?}");
            let with = with.repeat(times.unwrap_or(1));
            write(path, text.replacen(find.as_str(), &with, 1).as_bytes());
        }
        Edit::Remove { path } => std::fs::remove_file(src.join(path)).unwrap(),
        Edit::Rename { path, to } => std::fs::rename(src.join(path), src.join(to)).unwrap(),
        Edit::Write { path, text, bytes } => {
            write(path, bytes.as_deref().unwrap_or(text.as_bytes()))
        }
    }
}

/// A source change several cases build on, such as a step with deterministic checks.
pub(crate) fn overlay_dir(name: &str) -> PathBuf {
    repo_root()
        .join("crates/registry/tests/source_overlays")
        .join(name)
}

fn build_case(name: &str) -> (Case, Result<BuiltRelease, RegistryError>) {
    let path = source_data().join(name).join("case.json");
    let case: Case = serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("source");
    init_source(&src).unwrap();
    if let Some(overlay) = &case.overlay {
        rimthan_testkit::fs::copy_dir(&overlay_dir(overlay), &src);
    }
    for edit in &case.edits {
        apply(&src, edit);
    }
    let result = build_release(&src, &"0.1.0".parse().unwrap(), &test_key());
    (case, result)
}

fn assert_names(name: &str, message: &str, expect: &Expect) {
    if let Some(file) = &expect.file {
        let named = match expect.line {
            Some(line) => format!("source/{file}:{line}: "),
            None => format!("source/{file}: "),
        };
        assert!(
            message.contains(&named),
            "{name}: {message}\nshould name {named}"
        );
    }
    assert!(
        !message.contains("releases/"),
        "{name}: names a built file: {message}"
    );
    for part in &expect.mentions {
        assert!(
            message.contains(part.as_str()),
            "{name}: {message}\nshould mention {part}"
        );
    }
}

fn assert_case(name: &str) {
    let (case, result) = build_case(name);
    let expect = &case.expect;
    match (&expect.code, &expect.warning, &expect.example, result) {
        (Some(code), None, None, Err(err)) => {
            assert_eq!(err.code(), code, "{name}: {err}");
            assert!(err.is_input_error(), "{name}: exit 1, not an I/O failure");
            assert_names(name, &err.to_string(), expect);
        }
        (None, Some(code), None, Ok(built)) => {
            let warning = built
                .warnings
                .iter()
                .find(|w| w.code() == code)
                .unwrap_or_else(|| panic!("{name}: no {code} warning in {:?}", built.warnings));
            assert_names(name, &warning.to_string(), expect);
        }
        (None, None, Some(example), Ok(built)) => {
            let step_path = format!(
                "releases/0.1.0/workflows/my-workflow/1.0.0/steps/{}.json",
                example.step
            );
            let doc: rimthan_registry::StepDoc =
                serde_json::from_slice(built.files.get(&step_path).unwrap()).unwrap();
            let output = doc.outputs.iter().find(|o| o.path == example.path).unwrap();
            assert_eq!(
                output.example.as_deref(),
                Some(example.text.as_str()),
                "{name}"
            );
        }
        (_, _, _, result) => panic!(
            "{name} ({}): expected {expect:?}, got {:?}",
            case.description,
            result.map(|b| b.warnings).map_err(|e| e.to_string())
        ),
    }
}

#[test]
fn the_init_source_builds_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    init_source(dir.path()).unwrap();
    let built = build_release(dir.path(), &"0.1.0".parse().unwrap(), &test_key()).unwrap();
    assert_eq!(built.warnings, []);
}

#[test]
fn init_refuses_a_folder_that_is_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let err = init_source(dir.path()).unwrap_err();
    assert_eq!(err.code(), "source_invalid");
    assert_eq!(
        std::fs::read(dir.path().join("notes.txt")).unwrap(),
        b"mine"
    );
}

#[test]
fn a_source_without_examples_builds_outputs_without_an_example_field() {
    let dir = tempfile::tempdir().unwrap();
    init_source(dir.path()).unwrap();
    let built = build_release(dir.path(), &"0.1.0".parse().unwrap(), &test_key()).unwrap();
    let step = built
        .files
        .get("releases/0.1.0/workflows/my-workflow/1.0.0/steps/write-result.json")
        .unwrap();
    assert!(!String::from_utf8_lossy(step).contains("example"));
}

#[test]
fn init_names_the_workflow_and_pins_only_the_chosen_harnesses() {
    let dir = tempfile::tempdir().unwrap();
    let options = InitOptions::new(
        "vendor-review".parse().unwrap(),
        vec![Harness::Codex, Harness::ClaudeCode],
    );
    let written = init_source_with(dir.path(), &options).unwrap();
    assert!(
        !written.iter().any(|p| p.contains("my-workflow")),
        "{written:?}"
    );
    assert!(!dir.path().join("adapters/cowork").exists());
    let built = build_release(dir.path(), &"0.1.0".parse().unwrap(), &test_key()).unwrap();
    assert_eq!(built.warnings, []);
    let doc: rimthan_registry::WorkflowDoc = serde_json::from_slice(
        built
            .files
            .get("releases/0.1.0/workflows/vendor-review/1.0.0/definition.json")
            .unwrap(),
    )
    .unwrap();
    let pins: Vec<(Harness, String)> = doc
        .harnesses
        .iter()
        .map(|(h, pin)| (*h, format!("{}@{}", pin.id, pin.version)))
        .collect();
    assert_eq!(
        pins,
        [
            (Harness::Codex, format!("codex@{INIT_ADAPTER_VERSION}")),
            (
                Harness::ClaudeCode,
                format!("claude-code@{INIT_ADAPTER_VERSION}")
            ),
        ]
    );
}

/// `init`, the authoring guide and the committed source agree on one current adapter version:
/// the highest each harness's adapter has.
#[test]
fn init_and_the_authoring_guide_pin_the_current_adapter_version() {
    let current: Version = INIT_ADAPTER_VERSION.parse().unwrap();
    for harness in Harness::ALL {
        let dir = repo_root()
            .join("registry/source/adapters")
            .join(harness.as_str());
        let highest = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.trim_end_matches(".md").parse::<Version>().unwrap()
            })
            .max()
            .unwrap();
        assert_eq!(highest, current, "{harness}");
    }
    let guide = std::fs::read_to_string(repo_root().join("docs/authoring.md")).unwrap();
    assert!(guide.contains(&format!("\"version\": \"{INIT_ADAPTER_VERSION}\"")));
    assert!(
        !guide.contains("\"version\": \"1.1.0\"}"),
        "§3 pins an old adapter"
    );
}

macro_rules! cases {
    ($($name:ident => $case:literal),+ $(,)?) => {
        $(#[test] fn $name() { assert_case($case); })+

        #[test]
        fn every_source_case_folder_has_a_test() {
            let mut listed = vec![$($case),+];
            listed.sort_unstable();
            let mut on_disk: Vec<String> = std::fs::read_dir(source_data())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            on_disk.sort();
            assert_eq!(on_disk, listed);
        }
    };
}

cases! {
    a_missing_step_file_names_the_expected_file => "step-file-missing",
    a_mis_cased_step_file_names_both_names => "step-file-mis-cased",
    a_step_file_with_another_extension_names_both_names => "step-file-wrong-extension",
    an_unlisted_step_file_is_refused => "step-file-unlisted",
    a_mis_cased_copy_of_a_step_file_is_refused => "step-file-duplicate-case",
    a_missing_workflow_json_is_refused => "workflow-json-missing",
    a_workflow_json_syntax_error_names_its_line => "workflow-json-syntax-error",
    a_stray_file_in_a_version_folder_is_refused => "version-folder-stray-file",
    a_frontmatter_error_names_its_line => "frontmatter-type-error",
    a_validator_no_step_runs_is_refused => "validator-unused",
    a_schema_nothing_uses_is_a_warning => "schema-unused",
    a_described_rule_no_counter_example_produces_is_a_warning => "rule-not-exercised",
    a_counter_example_producing_other_findings_than_listed_is_refused => "counter-example-findings-differ",
    a_counter_example_of_a_described_check_must_list_its_findings => "counter-example-findings-unlisted",
    a_check_reporting_a_rule_it_does_not_describe_is_refused => "check-reports-undescribed-rule",
    help_for_a_rule_a_sql_lint_check_does_not_run_is_refused => "rule-help-not-among-rules",
    help_longer_than_one_line_is_refused => "rule-help-too-long",
    a_reminder_not_before_the_expiry_is_refused => "approval-timers-out-of-order",
    an_expiry_past_a_year_is_refused => "approval-expiry-past-a-year",
    a_duration_in_months_names_its_line => "approval-duration-in-months",
    on_expiry_without_an_expiry_is_refused => "approval-on-expiry-without-expiry",
    a_zero_deadline_is_refused => "deadline-zero",
    a_schema_file_with_another_extension_is_refused => "schema-wrong-extension",
    a_mis_cased_skill_file_is_refused => "skill-file-mis-cased",
    a_refused_output_path_names_the_step_source => "verify-error-names-step-source",
    a_dangling_report_schema_names_the_validator_source => "verify-error-names-validator-source",
    an_example_is_inlined_into_its_output => "example-inlined",
    an_example_for_no_declared_output_is_refused => "example-for-undeclared-output",
    an_example_for_a_json_output_is_refused => "example-for-json-output",
    an_example_over_max_bytes_is_refused => "example-too-large",
    an_example_that_is_not_utf8_is_refused => "example-not-utf8",
    a_work_step_without_a_validator_is_refused => "work-step-without-validator",
    a_validator_setup_does_not_deliver_is_refused => "validator-not-delivered",
    a_validator_input_typo_names_the_validator_source_line => "validator-input-typo",
    a_validator_id_typo_suggests_the_near_miss => "validator-id-typo",
    an_unknown_adapter_version_lists_the_versions_that_exist => "adapter-pin-unknown-version",
    a_report_schema_that_drops_a_base_field_names_the_schema_file => "report-schema-drops-base-field",
    a_check_that_does_not_compile_names_its_script_line => "check-does-not-compile",
    a_check_script_past_the_declaration_limit_is_refused_naming_it => "check-script-too-large",
    a_check_reading_what_its_step_cannot_give_is_refused => "check-reads-undeclared-output",
    a_check_that_passes_its_counter_example_is_refused => "check-passes-its-counter-example",
    a_check_the_worked_example_fails_is_refused => "check-fails-the-worked-example",
    a_check_without_a_counter_example_is_refused => "check-without-counter-example",
    an_unknown_squawk_rule_is_refused => "check-unknown-sql-rule",
    a_script_no_check_is_named_after_is_refused => "check-script-without-check",
    an_undeclared_counter_example_is_refused => "counter-example-undeclared",
}

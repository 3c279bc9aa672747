//! One test per folder under `tests/data/<case>/`: each runs its check on its inputs and
//! asserts the exact findings (input, line, rule, severity) or the exact error code and place.

use rimthan_checks::CheckError;

use crate::common::{Case, Expect, data_dir};

fn assert_fixture(name: &str) {
    let (case, dir) = Case::load(name);
    let outcome = case.run(&dir);
    match (&case.expect, outcome) {
        (Expect::Findings(expected), Ok(findings)) => {
            let actual: Vec<_> = findings
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        f.line,
                        f.rule.clone(),
                        f.severity.as_str().to_owned(),
                    )
                })
                .collect();
            assert_eq!(
                &actual, expected,
                "{name}: {}\n{findings:#?}",
                case.description
            );
        }
        (Expect::Error { code, line, column }, Err(err)) => {
            assert_eq!(err.code(), code, "{name}: {err}");
            let place = match &err {
                CheckError::CompileFailed { line, column, .. }
                | CheckError::ScriptFailed { line, column, .. } => (Some(*line), Some(*column)),
                CheckError::FindingInvalid { line, .. } => (Some(*line), None),
                _ => (None, None),
            };
            if line.is_some() {
                assert_eq!(place.0, *line, "{name}: {err}");
            }
            if column.is_some() {
                assert_eq!(place.1, *column, "{name}: {err}");
            }
        }
        (Expect::Findings(_), Err(err)) => panic!("{name} must run: {err} ({})", case.description),
        (Expect::Error { code, .. }, Ok(findings)) => {
            panic!(
                "{name} must fail with {code}: got {findings:#?} ({})",
                case.description
            )
        }
    }
}

macro_rules! fixtures {
    ($($name:ident => $case:literal),+ $(,)?) => {
        $(#[test] fn $name() { assert_fixture($case); })+

        #[test]
        fn every_fixture_folder_has_a_test() {
            let mut listed = vec![$($case),+];
            listed.sort_unstable();
            let mut on_disk: Vec<String> = std::fs::read_dir(data_dir())
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| e.path().join("case.json").exists())
                .map(|e| e.file_name().into_string().unwrap())
                .collect();
            on_disk.sort();
            assert_eq!(on_disk, listed);
        }
    };
}

fixtures! {
    every_quotation_citing_a_source_passes => "markdown-quotes-cited",
    a_quotation_without_a_source_is_found_at_its_line => "markdown-quote-uncited",
    a_section_without_a_quotation_is_found_at_its_heading => "markdown-section-without-quote",
    csv_rows_with_a_source_pass => "csv-sources-complete",
    a_csv_row_without_a_source_is_found_at_its_line => "csv-source-missing",
    a_csv_row_of_the_wrong_width_is_a_parse_error_at_its_line => "csv-ragged-row",
    json_criteria_met_with_evidence_pass => "json-criteria-evidenced",
    a_json_criterion_met_without_evidence_is_found => "json-criterion-unevidenced",
    json_that_does_not_parse_is_a_parse_error_at_its_line => "json-unparsable",
    a_yaml_key_is_read_from_its_parsed_form => "yaml-owner-missing",
    squawk_finds_a_renamed_column_at_its_line_with_the_named_severity => "sql-lint-rename-column",
    a_psql_script_is_linted_as_psql_sends_it => "sql-lint-psql-script",
    a_squawk_ignore_comment_is_refused_and_the_rule_still_applies => "sql-lint-ignore-comment",
    sql_that_does_not_parse_is_a_syntax_error_at_its_line => "sql-lint-syntax-error",
    an_unknown_squawk_rule_is_refused => "sql-lint-unknown-rule",
    a_script_reads_sql_statements_with_their_lines => "sql-statements",
    a_check_that_does_not_compile_names_line_and_column => "compile-error",
    an_infinite_loop_is_cut_at_the_operation_bound => "infinite-loop",
    a_loop_past_the_wall_time_is_cut_at_the_wall_time_bound => "wall-time",
    unbounded_recursion_is_cut_at_the_call_depth_bound => "unbounded-recursion",
    a_huge_string_is_cut_at_the_data_bound => "huge-string",
    a_huge_array_is_cut_at_the_data_bound => "huge-array",
    a_million_findings_are_cut_at_the_findings_bound => "million-findings",
    a_finding_with_an_empty_rule_is_refused_naming_the_call => "finding-invalid",
    a_non_utf8_input_is_refused_before_parsing => "input-not-utf8",
    an_input_with_a_nul_byte_is_refused_as_binary => "input-binary",
    an_input_over_the_byte_bound_is_refused_before_parsing => "input-too-large",
    a_runtime_error_names_its_line => "script-runtime-error",
}

//! Hostile inputs at the size a workflow allows an output (128 KiB), each built by a generator:
//! every one is refused or judged within the stated bounds (`docs/checks.md` §Bounds), and the
//! memory a run takes, counted by this binary's allocator, stays under the parsed-form budget
//! plus a fixed allowance, however the input is shaped.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use peak_alloc::PeakAlloc;
use rimthan_checks::{Check, CheckError, Finding, Input, Limits, PARSE_ERROR_RULE, Severity};

/// The global allocator, counting the bytes live and the most live since the last reset.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// One test at a time: the counters are the whole process's, so nothing else may allocate
/// while a run is measured.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The largest output the shipped workflows allow a Markdown or SQL file.
const SIZE: usize = 128 << 10;

/// What a run may take beyond its parsed forms: the input's own copies (the text a script
/// reads, squawk's tree and tokens, libyaml's events), the interpreter and the thread.
const ALLOWANCE: usize = 24 << 20;

/// Runs `check` on one input and returns its outcome and the most memory it held at once.
fn measure(check: &Check, name: &str, text: &str) -> (Result<Vec<Finding>, CheckError>, usize) {
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    let outcome = check.run(&[Input::new(name, text.as_bytes())]);
    let peak = ALLOCATOR.peak_usage().saturating_sub(before);
    (outcome, peak)
}

/// A script that reads every input's parsed form, as the shipped checks do.
fn reader() -> Check {
    Check::script(
        r#"for input in inputs.values() { let n = input.len(); }"#,
        Limits::default(),
    )
    .unwrap()
}

fn within_bounds(name: &str, text: &str) -> Result<Vec<Finding>, CheckError> {
    assert!(text.len() <= SIZE + 16, "{name} is {} bytes", text.len());
    let limits = Limits::default();
    let (outcome, peak) = measure(&reader(), name, text);
    eprintln!("{name}: held {} KiB at most", peak >> 10);
    assert!(
        peak <= limits.max_parsed_bytes + ALLOWANCE,
        "{name}: a run held {} MiB, over the {} MiB budget and its allowance ({outcome:?})",
        peak >> 20,
        (limits.max_parsed_bytes + ALLOWANCE) >> 20,
    );
    outcome
}

fn parse_error_at(outcome: &Result<Vec<Finding>, CheckError>, needle: &str) {
    let findings = outcome.as_ref().expect("a parse error is a finding");
    assert!(
        findings
            .iter()
            .any(|f| f.rule == PARSE_ERROR_RULE && f.message.contains(needle)),
        "expected a parse_error naming {needle:?}: {findings:?}"
    );
}

fn too_complex(outcome: &Result<Vec<Finding>, CheckError>) {
    match outcome {
        Err(e) => assert_eq!(e.code(), "check_input_too_complex", "{e}"),
        Ok(findings) => panic!("expected check_input_too_complex, got {findings:?}"),
    }
}

#[test]
fn quotations_nested_to_the_file_size_are_a_parse_error_not_gigabytes() {
    let _alone = alone();
    let text = format!("{} {}", ">".repeat(SIZE / 2), "x".repeat(SIZE / 2));
    parse_error_at(&within_bounds("notes.md", &text), "nests more than");
}

#[test]
fn list_items_nested_to_the_file_size_are_a_parse_error() {
    let _alone = alone();
    let text = format!("{}{}", "- ".repeat(SIZE / 4), "x".repeat(SIZE / 2));
    parse_error_at(&within_bounds("notes.md", &text), "nests more than");
}

#[test]
fn quotations_nested_to_the_limit_around_all_the_text_stay_in_budget() {
    let _alone = alone();
    let depth = 31;
    let mut text = String::new();
    for _ in 0..SIZE / (depth + 64) {
        text.push_str(&">".repeat(depth));
        text.push(' ');
        text.push_str(&"x".repeat(62));
        text.push('\n');
    }
    let outcome = within_bounds("notes.md", &text);
    assert!(outcome.is_ok(), "{outcome:?}");
}

#[test]
fn a_long_heading_over_many_items_is_held_once() {
    let _alone = alone();
    let heading = "h".repeat(SIZE / 2);
    let text = format!("# {heading}\n\n{}", "- a\n".repeat(SIZE / 8));
    // Each item's `section` is the one heading; the interpreter counts it once per item
    // against `max_string_bytes` when a script takes the whole form at once.
    match within_bounds("notes.md", &text) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.code(), "check_data_too_large", "{e}"),
    }
    let check = Check::script(
        r#"for item in inputs["notes.md"].markdown.items { if item.section.len() == 0 { error("x", "no section") } }"#,
        Limits::default(),
    )
    .unwrap();
    let (outcome, peak) = measure(&check, "notes.md", &text);
    assert_eq!(outcome.unwrap(), vec![]);
    assert!(
        peak <= Limits::default().max_parsed_bytes + ALLOWANCE,
        "{} MiB",
        peak >> 20
    );
}

#[test]
fn a_file_of_tiny_elements_stops_at_the_budget() {
    let _alone = alone();
    let limits = Limits::default().with_max_parsed_bytes(4 << 20);
    let check = Check::script("let n = 0;", limits.clone()).unwrap();
    let text = "- a\n".repeat(SIZE / 4);
    let (outcome, peak) = measure(&check, "notes.md", &text);
    too_complex(&outcome);
    assert!(
        peak <= limits.max_parsed_bytes + ALLOWANCE,
        "{} MiB",
        peak >> 20
    );
}

#[test]
fn csv_column_names_are_not_copied_into_every_row_past_the_budget() {
    let _alone = alone();
    let names: Vec<String> = (0..64).map(|i| format!("{i}{}", "n".repeat(500))).collect();
    let mut text = names.join(",");
    text.push('\n');
    let row = vec!["1"; names.len()].join(",");
    while text.len() + row.len() < SIZE {
        text.push_str(&row);
        text.push('\n');
    }
    too_complex(&within_bounds("sources.csv", &text));
}

#[test]
fn a_yaml_alias_bomb_stops_at_the_budget() {
    let _alone = alone();
    // Enough events that serde_norway's own repetition limit (a hundred replays per event)
    // allows a hundred million values.
    let text = format!(
        "anchor: &a [{}x]\nbomb: [{}*a]\n",
        "x, ".repeat(10_000),
        "*a, ".repeat(10_000)
    );
    too_complex(&within_bounds("owners.yaml", &text));
}

#[test]
fn a_json_array_of_the_file_size_is_read_within_budget() {
    let _alone = alone();
    let text = format!("[{}0]", "0,".repeat(SIZE / 2 - 2));
    let outcome = within_bounds("criteria.json", &text);
    assert!(outcome.is_ok(), "{outcome:?}");
}

#[test]
fn flat_operator_chains_are_refused_before_squawk_parses_them() {
    let _alone = alone();
    let lint = Check::sql_lint([("renaming-column", Severity::Error)], Limits::default()).unwrap();
    let errors = Check::script(
        r#"for e in inputs["up.sql"].sql.errors { error("sql", e.message, "up.sql", e.line) }"#,
        Limits::default(),
    )
    .unwrap();
    for operator in ["+", "-", "*", "/", "=", "<", "||", "->", " AND "] {
        let mut text = String::from("SELECT 1");
        while text.len() < SIZE - 8 {
            text.push_str(operator);
            text.push('1');
        }
        text.push_str(";\n");
        for check in [&errors, &lint] {
            let findings = check.run(&[Input::new("up.sql", text.as_bytes())]).unwrap();
            let found = findings
                .iter()
                .any(|f| f.message.contains("chains more than"));
            assert!(found, "{operator}: {findings:?}");
        }
    }
}

#[test]
fn a_long_but_ordinary_expression_still_parses() {
    let _alone = alone();
    let terms: Vec<String> = (0..400).map(|i| format!("a{i} = {i}")).collect();
    let text = format!(
        "SELECT * FROM t WHERE {} AND x IN ({});\n",
        terms.join(" OR "),
        (0..5000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let lint = Check::sql_lint([("renaming-column", Severity::Error)], Limits::default()).unwrap();
    let findings = lint.run(&[Input::new("up.sql", text.as_bytes())]).unwrap();
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn a_native_call_in_a_loop_is_stopped_at_the_deadline_not_after_thousands_of_calls() {
    let _alone = alone();
    let limits = Limits::default()
        .with_max_operations(u64::MAX)
        .with_max_wall_time(Duration::from_millis(200));
    let check = Check::script(
        r#"
        let big = [];
        big.pad(1000000, 0);
        loop { big.contains(1); }
        "#,
        limits,
    )
    .unwrap();
    let started = Instant::now();
    let outcome = check.run(&[Input::new("notes.md", b"# x\n")]);
    assert_eq!(
        outcome.unwrap_err().code(),
        "check_wall_time_exceeded",
        "the loop never ends by itself"
    );
    // Before, the clock was read every 4,096 operations: 4,096 scans of a million elements.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "stopped after {:?}",
        started.elapsed()
    );
}

#[test]
fn a_script_past_the_size_or_declaration_limit_is_refused_before_compiling() {
    let _alone = alone();
    let long = format!("// {}\nlet x = 1;", "c".repeat(64 << 10));
    let declarations: String = (0..2_001).map(|i| format!("let v{i} = {i};\n")).collect();
    for source in [long, declarations] {
        let error = Check::script(&source, Limits::default()).unwrap_err();
        assert_eq!(error.code(), "check_script_too_large", "{error}");
    }
    let within: String = (0..2_000).map(|i| format!("let v{i} = {i};\n")).collect();
    Check::script(&within, Limits::default()).unwrap();
}

//! Whatever text or bytes a participant sends, the runtime answers with findings or a named
//! error, within its bounds, and never panics.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use rimthan_checks::{Check, CheckError, Format, Input, Limits, Severity};

/// Touches every parsed form of every input, so each parser's output reaches the interpreter.
const CHECK: &str = r#"
for name in inputs.keys() {
    let input = inputs[name];
    let form = input[input.format];
    let size = input.text.len();
    if input.format == "markdown" {
        for h in form.headings { if h.level == 1 { warning("h1", h.text + ".", name, h.line); } }
        for q in form.quotes { if q.text == "" { error("empty-quote", "empty", name, q.line); } }
        for t in form.tables { size += t.rows.len(); }
        for p in form.paragraphs { size += p.sentences.len(); }
        for l in form.links { if l.url == "" { warning("empty-link", "empty", name, l.line); } }
    } else if input.format == "csv" {
        for row in form.rows { size += row.values.len(); }
    } else if input.format == "sql" {
        for s in form.statements { size += s.line; }
        for e in form.errors { warning("sql", e.message + ".", name, e.line); }
    } else if input.format == "json" || input.format == "yaml" {
        size += type_of(form).len();
    }
}
"#;

const FORMATS: [Format; 6] = [
    Format::Text,
    Format::Markdown,
    Format::Csv,
    Format::Json,
    Format::Yaml,
    Format::Sql,
];

fn limits() -> Limits {
    Limits::default()
        .with_max_operations(200_000)
        .with_max_findings(100)
        .with_max_wall_time(Duration::from_secs(2))
}

fn assert_bounded(bytes: &[u8]) {
    let check = Check::script(CHECK, limits()).unwrap();
    let lint = Check::sql_lint([("renaming-column", Severity::Error)], limits()).unwrap();
    for format in FORMATS {
        let started = Instant::now();
        let outcome = check.run(&[Input::with_format("input", bytes, format)]);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{format:?} ran too long"
        );
        match outcome {
            Ok(findings) => assert!(findings.len() <= 100),
            Err(
                CheckError::InputNotText { .. }
                | CheckError::OperationsExceeded { .. }
                | CheckError::TooManyFindings { .. }
                | CheckError::WallTimeExceeded { .. }
                | CheckError::InputTooComplex { .. }
                | CheckError::DataTooLarge { .. },
            ) => {}
            Err(other) => panic!("{format:?}: unexpected {other}"),
        }
    }
    match lint.run(&[Input::new("up.sql", bytes)]) {
        Ok(_) | Err(CheckError::InputNotText { .. } | CheckError::TooManyFindings { .. }) => {}
        Err(other) => panic!("sql-lint: unexpected {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_text_gets_findings_or_a_named_error(text in "(?s).{0,400}") {
        assert_bounded(text.as_bytes());
    }

    #[test]
    fn markdown_like_text_gets_findings_or_a_named_error(
        text in r"([#>|*\-`\[\]()!,.;:{}0-9a-z\x22 \n]|\r\n|\\){0,400}"
    ) {
        assert_bounded(text.as_bytes());
    }

    #[test]
    fn any_bytes_get_findings_or_a_named_error(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        assert_bounded(&bytes);
    }
}

/// Each of these once overflowed the stack (squawk's parser) or ran for seconds (libyaml's
/// scanner, squawk's parser) before the nesting bounds.
#[test]
fn deeply_nested_input_is_bounded_in_every_format() {
    for text in [
        "[".repeat(100_000),
        "{\"a\":".repeat(50_000),
        ">".repeat(100_000),
        "- ".repeat(50_000),
        "(".repeat(100_000),
        format!("SELECT {}", "(".repeat(50_000)),
        format!("SELECT {}1;", "NOT ".repeat(30_000)),
        format!("SELECT {}1;", "+".repeat(100_000)),
        format!("SELECT {}1;", "ARRAY[".repeat(30_000)),
        format!("SELECT {}1;", "CASE WHEN 1 THEN ".repeat(20_000)),
    ] {
        assert_bounded(text.as_bytes());
    }
}

//! `docs/checks.md` "Which squawk rule catches what": each row's statement, linted with that
//! rule alone, gives a finding of the rule. A row whose statement the rule misses, or a rule
//! squawk does not know, fails here, so the table says what the linter does.

use std::path::PathBuf;

use rimthan_checks::{Check, Input, Limits, Severity};

/// `(rule, statement)` of every row of the table.
fn rows() -> Vec<(String, String)> {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/checks.md");
    let text = std::fs::read_to_string(docs).unwrap();
    let table = text
        .split("### Which squawk rule catches what")
        .nth(1)
        .expect("the section");
    table
        .lines()
        .skip_while(|l| !l.starts_with("| rule |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let unquote = |cell: &str| {
                cell.trim_matches(|c| c == '|' || c == ' ' || c == '`')
                    .to_owned()
            };
            (unquote(cells[0]), unquote(cells[cells.len() - 1]))
        })
        .collect()
}

#[test]
fn each_rule_in_the_docs_table_catches_its_example_statement() {
    let rows = rows();
    assert!(rows.len() >= 20, "{rows:?}");
    let mut missed = Vec::new();
    for (rule, statement) in &rows {
        let check = Check::sql_lint([(rule.as_str(), Severity::Error)], Limits::default())
            .unwrap_or_else(|e| panic!("{rule}: {e}"));
        let findings = check
            .run(&[Input::new("up.sql", statement.as_bytes())])
            .unwrap();
        if !findings.iter().any(|f| &f.rule == rule) {
            missed.push(format!("{rule}: {statement} gave {findings:?}"));
        }
    }
    assert!(missed.is_empty(), "{missed:#?}");
}

//! `docs/checks.md` "Strings in a script": the script shown there runs as a check and reports
//! nothing, so each thing the table says about Rhai's string literals holds in the pinned Rhai.

use std::path::PathBuf;

use rimthan_checks::{Check, Limits};

/// The `rhai` block of the section.
fn documented_script() -> String {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/checks.md");
    let text = std::fs::read_to_string(docs).unwrap();
    let section = text
        .split("### Strings in a script")
        .nth(1)
        .expect("the section");
    let block = section.split("```rhai\n").nth(1).expect("a rhai block");
    block.split("```").next().unwrap().to_owned()
}

fn rules_reported(script: &str) -> Vec<String> {
    let check = Check::script(script, Limits::default()).unwrap();
    check
        .run(&[])
        .unwrap()
        .into_iter()
        .map(|f| f.rule)
        .collect()
}

#[test]
fn what_the_docs_say_of_string_literals_holds() {
    let script = documented_script();
    assert!(script.lines().count() >= 6, "{script}");
    assert_eq!(rules_reported(&script), Vec::<String>::new());
}

#[test]
fn the_documented_script_reports_a_claim_that_does_not_hold() {
    let script = documented_script().replacen("`a\\nb`.len() != 4", "`a\\nb`.len() != 3", 1);
    assert_eq!(rules_reported(&script), ["backtick-escape"]);
}

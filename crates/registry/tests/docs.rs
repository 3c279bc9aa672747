//! `docs/registry-format.md` states the error codes and workflow rules, and
//! `docs/authoring.md` which workflow versions ship now; these tests keep them in step with the
//! code and the embedded registry.

use crate::common::repo_root;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap()
}

/// The string literals of the `code()` match arms in `error.rs`.
fn error_codes() -> Vec<String> {
    read("crates/registry/src/error.rs")
        .lines()
        .filter_map(|line| line.split("=> \"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_code_table_lists_every_registry_error_code() {
    let docs = read("docs/registry-format.md");
    let table = docs
        .split("## 4. Error codes")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("§4 exists");
    let codes = error_codes();
    assert!(codes.len() > 20, "parsed only {codes:?}");
    for code in codes {
        assert!(table.contains(&format!("`{code}`")), "§4 lacks {code}");
    }
}

/// The rule list of a §4 table row.
fn documented_rules(code: &str) -> Vec<String> {
    let docs = read("docs/registry-format.md");
    let row = docs
        .lines()
        .find(|l| l.starts_with(&format!("| `{code}` |")))
        .unwrap_or_else(|| panic!("§4 has no row for {code}"));
    let rules = row
        .split("rule: `")
        .nth(1)
        .and_then(|r| r.split('`').next());
    let mut rules: Vec<String> = rules
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    rules.sort();
    rules
}

#[test]
fn the_code_table_lists_exactly_the_workflow_and_contract_rules() {
    let codes = |all: &[&str]| {
        let mut all: Vec<String> = all.iter().map(|c| (*c).to_owned()).collect();
        all.sort();
        all
    };
    let workflow: Vec<&str> = rimthan_registry::WorkflowRule::ALL
        .iter()
        .map(|r| r.code())
        .collect();
    let contract: Vec<&str> = rimthan_registry::ContractRule::ALL
        .iter()
        .map(|r| r.code())
        .collect();
    assert_eq!(documented_rules("workflow_invalid"), codes(&workflow));
    assert_eq!(
        documented_rules("adapter_contract_invalid"),
        codes(&contract)
    );
}

/// The guide's "current shipped workflows" are the highest versions the embedded stable channel
/// offers, so a new version cannot leave the guide pointing at an old one.
#[test]
fn the_authoring_guide_names_the_current_shipped_workflow_versions() {
    let docs = read("docs/authoring.md");
    let named = docs
        .split("The current shipped workflows")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("docs/authoring.md names the current shipped workflows")
        .replace('\n', " ");
    let registry = rimthan_registry::verify_embedded().unwrap();
    let stable = registry.channel(&"stable".parse().unwrap()).unwrap();
    let mut current: Vec<String> = stable
        .workflows()
        .map(|w| w.doc().id.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|id| {
            let latest = stable.latest_workflow(&id.parse().unwrap()).unwrap();
            format!("`{id}` {}", latest.doc().version)
        })
        .collect();
    current.sort();
    for workflow in &current {
        assert!(
            named.contains(workflow.as_str()),
            "docs/authoring.md names {named:?} as current; the stable release ships {current:?}"
        );
    }
}

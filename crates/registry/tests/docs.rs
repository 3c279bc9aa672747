//! `docs/registry-format.md` states the error codes and workflow rules; these tests keep it in
//! step with the code.

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

#[test]
fn the_new_workflow_rules_are_documented() {
    let docs = read("docs/registry-format.md");
    for rule in [
        "example_on_json_output",
        "example_too_large",
        "validator_input_unavailable",
    ] {
        assert!(read("crates/registry/src/verify.rs").contains(&format!("\"{rule}\"")));
        assert!(docs.contains(&format!(" {rule} ")), "§4 lacks rule {rule}");
    }
}

//! The code table of `docs/engine.md` §8 lists exactly the engine's codes.

use std::collections::BTreeSet;

use rimthan_engine::Code;

#[test]
fn the_documented_code_table_lists_every_code_once() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/engine.md"),
    )
    .unwrap();
    let table = doc
        .split("## 8. Codes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/engine.md has a section 8. Codes");
    let mut documented = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cell = row.split('|').nth(1).unwrap().trim();
        documented.push(cell.trim_matches('`').to_owned());
    }
    let unique: BTreeSet<_> = documented.iter().cloned().collect();
    assert_eq!(unique.len(), documented.len(), "a code is documented twice");
    let codes: BTreeSet<_> = Code::ALL.iter().map(|c| c.as_str().to_owned()).collect();
    assert_eq!(unique, codes);
}

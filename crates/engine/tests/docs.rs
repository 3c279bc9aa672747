//! The tables of `docs/engine.md` that state the contract: §8 lists exactly the engine's codes,
//! §6.2 exactly the fields of a payload's `approval`.

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

#[test]
fn the_documented_approval_payload_table_lists_every_field() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/engine.md"),
    )
    .unwrap();
    let section = doc
        .split("The payload's `approval` (`ApprovalPayload`")
        .nth(1)
        .expect("docs/engine.md §6.2 has the approval payload table");
    let documented: BTreeSet<String> = section
        .lines()
        .skip_while(|l| !l.starts_with("| field"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            row.split('|')
                .nth(1)
                .unwrap()
                .trim()
                .trim_matches('`')
                .to_owned()
        })
        .collect();
    let schema =
        serde_json::to_value(schemars::schema_for!(rimthan_engine::ApprovalPayload)).unwrap();
    let fields: BTreeSet<String> = schema["properties"]
        .as_object()
        .expect("an object schema")
        .keys()
        .cloned()
        .collect();
    assert_eq!(documented, fields);
}

//! The report contract: the base fields the engine reads, the shipped base schema that declares
//! them, and the report schemas that keep or break them.

use rimthan_registry::{BASE_REPORT_FIELDS, check_report_schema};
use serde_json::{Value, json};

use crate::common::repo_root;

fn shipped_report_schema() -> Value {
    let path = repo_root().join("registry/source/schemas/validator-report/1.0.0.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn breach(schema: &Value) -> (String, String) {
    let b = check_report_schema(schema).expect_err("must be refused");
    (b.field, b.problem)
}

#[test]
fn the_base_fields_are_exactly_what_the_shipped_report_schema_requires() {
    let schema = shipped_report_schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let base: Vec<&str> = BASE_REPORT_FIELDS.iter().map(|(f, _)| *f).collect();
    assert_eq!(required, base);
    for (field, ty) in BASE_REPORT_FIELDS {
        assert_eq!(schema["properties"][field]["type"], ty.as_str(), "{field}");
    }
    check_report_schema(&schema).expect("the shipped base schema keeps its own contract");
}

#[test]
fn a_narrower_verdict_and_extra_fields_are_allowed() {
    let mut schema = shipped_report_schema();
    schema["properties"]["verdict"]["enum"] = json!(["pass"]);
    schema["properties"]["files_checked"] = json!({"type": "integer"});
    schema["required"]
        .as_array_mut()
        .unwrap()
        .push(json!("files_checked"));
    check_report_schema(&schema).expect("narrowing and adding keep the contract");
}

#[test]
fn declarations_reached_by_local_ref_count() {
    let mut schema = shipped_report_schema();
    let findings = schema["properties"]["findings"].take();
    schema["$defs"] = json!({ "findings": findings });
    schema["properties"]["findings"] = json!({"$ref": "#/$defs/findings"});
    check_report_schema(&schema).expect("a $ref to the same declaration keeps the contract");
    schema["$defs"]["findings"]["type"] = json!("object");
    assert_eq!(breach(&schema).0, "findings");
}

#[test]
fn a_widened_verdict_is_refused() {
    let mut schema = shipped_report_schema();
    schema["properties"]["verdict"]["enum"] = json!(["pass", "fail", "maybe"]);
    let (field, problem) = breach(&schema);
    assert_eq!(field, "verdict");
    assert!(problem.contains("pass, fail"), "{problem}");
}

#[test]
fn a_nullable_base_field_is_a_retype() {
    let mut schema = shipped_report_schema();
    schema["properties"]["summary"]["type"] = json!(["string", "null"]);
    assert_eq!(breach(&schema).0, "summary");
}

#[test]
fn an_undeclared_base_field_is_refused() {
    let mut schema = shipped_report_schema();
    schema["properties"]
        .as_object_mut()
        .unwrap()
        .remove("inputs_read");
    let (field, problem) = breach(&schema);
    assert_eq!(field, "inputs_read");
    assert!(problem.contains("not declared"), "{problem}");
}

#[test]
fn findings_must_require_severity_and_message() {
    let mut schema = shipped_report_schema();
    schema["properties"]["findings"]["items"]["required"] = json!(["severity"]);
    assert_eq!(breach(&schema).0, "findings/items/message");
    let mut schema = shipped_report_schema();
    schema["properties"]["findings"]["items"]["properties"]["severity"]["enum"] =
        json!(["info", "fatal"]);
    assert_eq!(breach(&schema).0, "findings/items/severity");
}

#[test]
fn a_root_that_is_not_an_object_schema_is_refused() {
    let mut schema = shipped_report_schema();
    schema["type"] = json!("array");
    assert_eq!(breach(&schema).0, "(schema root)");
}

//! A scripted validator: reads exactly its declared inputs, checks them against the digests
//! the plan accepted, and answers with a report that meets its own `report_schema` (the base
//! fields from what it did, any further fields from the schema's example or a generated
//! instance).

use serde_json::{Map, Value, json};

use crate::{
    Project, StageError,
    client::{Client, read_json, str_field},
};

/// The report of one planned validator; `fail` makes it send the step back (`--revise`).
pub(crate) async fn report(
    client: &Client,
    project: &Project,
    validator: &Value,
    fail: bool,
) -> Result<Value, StageError> {
    let mut read = Vec::new();
    let mut findings = Vec::new();
    for input in validator["inputs"].as_array().into_iter().flatten() {
        let path = str_field(input, rimthan_mcp::PREPARE, "path")?;
        let back = project.read_back(path)?;
        if input["sha256"]
            .as_str()
            .is_some_and(|s| s != back.sha256.to_string())
        {
            findings.push(json!({"severity": "error", "message": "the file changed since it was accepted", "path": path}));
        }
        read.push(path.to_owned());
    }
    if fail {
        findings.push(json!({"severity": "error",
            "message": "rimthan stage --revise: this validator sends the step back once"}));
    }
    // It reads files and nothing else, whatever else it was allowed.
    let used: Vec<&Value> = validator["capabilities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| *c == "workspace.read")
        .collect();
    let verdict = if findings.is_empty() { "pass" } else { "fail" };
    let base = json!({"validator_id": validator["id"], "validator_version": validator["version"],
        "verdict": verdict, "summary": format!("Scripted check of {} declared input(s).", read.len()),
        "findings": findings, "inputs_read": read, "capabilities_used": used});

    let mut report = match validator["report_schema"]["uri"].as_str() {
        Some(uri) => {
            let schema = read_json(client, uri).await?;
            match rimthan_registry::example_where_or_instance(&schema, |e| e["verdict"] == verdict)
            {
                Some(Value::Object(fields)) => fields,
                _ => Map::new(),
            }
        }
        None => Map::new(),
    };
    report.extend(base.as_object().expect("an object").clone());
    Ok(Value::Object(report))
}

//! The four tools: schemas, annotations, results, argument errors, and a snapshot of the
//! public contract.

use rimthan_mcp::Profile;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn tool_and_template_lists_match_the_committed_contract() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let tools = client.list_all_tools().await.unwrap();
    insta::assert_json_snapshot!("tools_list", tools);
    let templates = client.list_all_resource_templates().await.unwrap();
    insta::assert_json_snapshot!("resource_templates_list", templates);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn input_schemas_enumerate_the_seeds_harnesses_and_capabilities() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let tools = client.list_all_tools().await.unwrap();
    let start = serde_json::to_value(&tools[0]).unwrap();
    let text = start["inputSchema"].to_string();
    for word in [
        "codex",
        "claude-code",
        "cowork",
        "buzz",
        "mcp.tools",
        "project-local-assets",
        "database.read",
    ] {
        assert!(
            text.contains(&format!("\"{word}\"")),
            "{word} missing from the start schema"
        );
    }
    assert_eq!(start["outputSchema"]["type"], "object");
    let active = serde_json::to_value(&tools[1]).unwrap();
    assert_eq!(active["annotations"]["readOnlyHint"], true);
    assert_eq!(active["annotations"]["idempotentHint"], true);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn argument_errors_are_tool_errors_naming_the_field() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let mut args = start_arguments("codex");
    args["host"]["capabilities"] = json!(["mcp.tools", "telepathy"]);
    let result = call(&client, rimthan_mcp::START, args).await;
    assert_eq!(result.is_error, Some(true));
    let value = structured(&result);
    assert_eq!(value["failures"][0]["code"], "invalid_arguments");
    assert_eq!(
        value["failures"][0]["detail"]["field"],
        "host.capabilities[1]"
    );

    let mut args = start_arguments("codex");
    args["surprise"] = json!(1);
    let value = structured(&call(&client, rimthan_mcp::START, args).await);
    assert!(
        value["failures"][0]["message"]
            .as_str()
            .unwrap()
            .contains("surprise"),
        "{value}"
    );

    let value = structured(&call(&client, rimthan_mcp::ACTIVE_STEP, json!({})).await);
    assert!(
        value["failures"][0]["message"]
            .as_str()
            .unwrap()
            .contains("checkpoint"),
        "{value}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn report_items_keep_the_exact_base_shape_and_admit_the_validators_fields() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let tools = client.list_all_tools().await.unwrap();
    let submit = serde_json::to_value(&tools[3]).unwrap();
    let report = &submit["inputSchema"]["$defs"]["Report"];
    let base = [
        "validator_id",
        "validator_version",
        "verdict",
        "summary",
        "findings",
        "inputs_read",
        "capabilities_used",
    ];
    assert_eq!(report["required"], json!(base));
    let mut listed: Vec<_> = report["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    listed.sort();
    let mut expected = base.map(str::to_owned).to_vec();
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(report["properties"]["verdict"]["$ref"], "#/$defs/Verdict");
    assert_eq!(report["additionalProperties"], true);
    let finding = &submit["inputSchema"]["$defs"]["ReportFinding"];
    assert_eq!(finding["additionalProperties"], false);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn report_argument_errors_name_the_base_field() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let report = json!({
        "validator_id": "scope-reviewer", "validator_version": "1.0.0", "verdict": "pass",
        "summary": "Checked.", "findings": [], "inputs_read": [], "capabilities_used": [],
        "files_checked": 1
    });
    let submit = |report| {
        let mut args = json!({"checkpoint": "rc1.x.0.x", "validation_id": "v"});
        args["reports"] = json!([report]);
        args
    };
    // A field beyond the base report passes the argument parse; its validator's schema judges it.
    let value = structured(&call(&client, rimthan_mcp::SUBMIT, submit(report.clone())).await);
    assert_eq!(
        value["failures"][0]["code"], "invalid_checkpoint",
        "{value}"
    );

    let mut bad = report.clone();
    bad["verdict"] = json!("maybe");
    let value = structured(&call(&client, rimthan_mcp::SUBMIT, submit(bad)).await);
    assert_eq!(value["failures"][0]["code"], "invalid_arguments");
    assert_eq!(
        value["failures"][0]["detail"]["field"], "reports[0].verdict",
        "{value}"
    );

    let mut bad = report.clone();
    bad["findings"] = json!([{"severity": "error", "message": "x", "pionter": "/a"}]);
    let value = structured(&call(&client, rimthan_mcp::SUBMIT, submit(bad)).await);
    assert_eq!(
        value["failures"][0]["detail"]["field"], "reports[0].findings[0].pionter",
        "{value}"
    );

    let mut misspelt = report;
    let verdict = misspelt.as_object_mut().unwrap().remove("verdict").unwrap();
    misspelt["verdikt"] = verdict;
    let value = structured(&call(&client, rimthan_mcp::SUBMIT, submit(misspelt)).await);
    assert_eq!(value["failures"][0]["code"], "invalid_arguments");
    let message = value["failures"][0]["message"].as_str().unwrap();
    assert!(message.contains("missing field `verdict`"), "{value}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn blocked_starts_are_tool_errors_with_codes() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let mut args = start_arguments("codex");
    args["host"]["adapter"] = json!({"id": "legacy-generic", "version": "1.0.0"});
    let result = call(&client, rimthan_mcp::START, args).await;
    assert_eq!(result.is_error, Some(true));
    let value = structured(&result);
    assert_eq!(value["status"], "blocked");
    assert_eq!(
        value["blockers"][0]["code"],
        "host_adapter_contract_unavailable"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_tools_are_invalid_params() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let params = rmcp::model::CallToolRequestParams::new("rimthan.nope");
    let err = client.call_tool(params).await.unwrap_err();
    let rmcp::service::ServiceError::McpError(data) = err else {
        panic!("{err:?}")
    };
    assert_eq!(data.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    client.cancel().await.unwrap();
}

/// A raw `tools/list` on `version`, with the headers and `_meta` that revision requires.
fn list_tools_request(version: &str) -> String {
    let mut params = json!({});
    let mut headers = String::new();
    if version >= "2026-07-28" {
        headers = "Mcp-Method: tools/list\r\n".into();
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {version}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn the_tool_list_carries_cache_hints_only_on_the_revision_that_defines_them() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    for (version, hinted) in [("2025-11-25", false), ("2026-07-28", true)] {
        let (status, body) = raw_exchange(http.addr, list_tools_request(version).as_bytes()).await;
        assert_eq!(status, 200, "{version}");
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let result = &answer["result"];
        assert_eq!(
            result["tools"].as_array().unwrap().len(),
            4,
            "{version}: {answer}"
        );
        assert_eq!(result.get("ttlMs").is_some(), hinted, "{version}: {result}");
        assert_eq!(result.get("cacheScope").is_some(), hinted, "{version}");
    }
}

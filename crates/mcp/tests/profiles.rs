//! Profiles and the seed-named surface test.

use rimthan_mcp::Profile;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};

use crate::common::*;

fn bootstrap_from_doc() -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/operations/workflow-engine-bootstrap.md"),
    )
    .unwrap();
    let begin = "<!-- rimthan:bootstrap:begin -->";
    let start = doc.find(begin).unwrap() + begin.len();
    doc[start..doc.find("<!-- rimthan:bootstrap:end -->").unwrap()]
        .trim()
        .to_owned()
}

#[tokio::test]
async fn test_mcp_workflow_engine_profile_exposes_four_tools_and_exact_resources() {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;

    let tools: Vec<_> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        tools,
        [
            "rimthan.start_workflow",
            "rimthan.get_active_step",
            "rimthan.prepare_step_validation",
            "rimthan.submit_step_reports"
        ]
    );

    let resources = client.list_all_resources().await.unwrap();
    for r in &resources {
        let meta = r
            .meta
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no _meta", r.uri));
        assert_eq!(
            meta.0.get("rimthan/cache-scope").and_then(|v| v.as_str()),
            Some("private"),
            "{}",
            r.uri
        );
    }
    let uris: Vec<_> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert!(
        uris.contains(&"rimthan://registry/2026.12.5/workflows/research-study/1.0.0/definition")
    );
    assert!(uris.contains(&"rimthan://registry/2026.12.5/schemas/validator-report/1.0.0"));
    assert!(uris.contains(&"rimthan://bootstrap/agent-entrypoint"));
    for uri in &uris {
        assert!(
            !uri.contains("/modules/") && !uri.contains("/presentation/"),
            "{uri}"
        );
        assert!(
            !uri.starts_with("rimthan://starter/") && !uri.starts_with("rimthan://pilot/"),
            "{uri}"
        );
        assert!(!uri.starts_with("rimthan://schemas/"), "{uri}");
    }
    let legacy_read = client
        .read_resource(ReadResourceRequestParams::new(
            "rimthan://schemas/research-question",
        ))
        .await;
    assert!(legacy_read.is_err(), "legacy schema URIs are not served");

    let templates = client.list_all_resource_templates().await.unwrap();
    let names: Vec<_> = templates.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "workflow-definition",
            "workflow-step",
            "workflow-check",
            "workflow-asset-content",
            "validator-definition",
            "workflow-versioned-schema"
        ]
    );
    for t in &templates {
        assert_eq!(
            t.meta.as_ref().unwrap().0["rimthan/cache-scope"],
            "private",
            "{}",
            t.name
        );
    }

    let expected = bootstrap_from_doc();
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(
        prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["rimthan.start_workflow"]
    );
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("rimthan.start_workflow"))
        .await
        .unwrap();
    let prompt_text = prompt.messages[0]
        .content
        .as_text()
        .expect("a text message")
        .text
        .clone();
    let resource = client
        .read_resource(ReadResourceRequestParams::new(
            "rimthan://bootstrap/agent-entrypoint",
        ))
        .await
        .unwrap();
    let resource_text = match &resource.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("{other:?}"),
    };
    let instructions = client.peer_info().unwrap().instructions.clone().unwrap();
    // The paragraph from the doc, then the workflow list (see tests/bootstrap.rs).
    assert!(
        prompt_text.starts_with(&format!("{expected}\n\nWorkflows in release 2026.12.5")),
        "{prompt_text}"
    );
    let embedded = rimthan_registry::verify_embedded().unwrap();
    for workflow in embedded
        .channel(&"stable".parse().unwrap())
        .unwrap()
        .workflows()
    {
        let doc = workflow.doc();
        let line = format!("\n- `{}` {}, {}: ", doc.id, doc.version, doc.title);
        assert!(prompt_text.contains(&line), "{line} in {prompt_text}");
    }
    assert_eq!(resource_text, prompt_text);
    assert_eq!(instructions, prompt_text);
    assert_eq!(
        client
            .peer_info()
            .unwrap()
            .server_info
            .as_ref()
            .unwrap()
            .name,
        "rimthan-workflow-engine"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn legacy_profile_serves_no_workflow_tool_and_no_registry_resource() {
    let client = duplex_client(server(Profile::Legacy).await).await;
    assert!(client.list_all_tools().await.unwrap().is_empty());
    let uris: Vec<_> = client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert_eq!(
        uris,
        [
            "rimthan://schemas/migration-change",
            "rimthan://schemas/migration-check-report",
            "rimthan://schemas/research-question",
            "rimthan://schemas/source-list",
            "rimthan://schemas/validator-report",
            "rimthan://schemas/workflow-session"
        ]
    );
    let schema = client
        .read_resource(ReadResourceRequestParams::new(
            "rimthan://schemas/source-list",
        ))
        .await
        .unwrap();
    assert_eq!(schema.contents.len(), 1);
    let templates: Vec<_> = client
        .list_all_resource_templates()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(templates, ["legacy-schema"]);
    let prompts: Vec<_> = client
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(prompts, ["rimthan.legacy_schemas"]);
    assert!(
        client
            .get_prompt(GetPromptRequestParams::new("rimthan.start_workflow"))
            .await
            .is_err()
    );
    let manifest = ReadResourceRequestParams::new("rimthan://registry/2026.12.5/manifest");
    assert!(client.read_resource(manifest).await.is_err());
    let call = rmcp::model::CallToolRequestParams::new("rimthan.start_workflow")
        .with_arguments(rmcp::model::object(start_arguments("codex")));
    assert!(client.call_tool(call).await.is_err());
    client.cancel().await.unwrap();
}

//! Streamable HTTP on both revisions, hardening, and health endpoints.

use rimthan_mcp::Profile;

use crate::common::*;

#[tokio::test]
async fn a_whole_session_runs_over_http_on_the_2025_11_25_revision() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let client = legacy_http_client(&http.url).await;
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        rmcp::model::ProtocolVersion::V_2025_11_25
    );
    let done = run_session(&client, "claude-code").await;
    assert_eq!(done["status"], "completed");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_whole_session_runs_over_http_on_the_2026_07_28_revision() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let client = modern_http_client(&http.url).await;
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        rmcp::model::ProtocolVersion::V_2026_07_28
    );
    let done = run_session(&client, "codex").await;
    assert_eq!(done["status"], "completed");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_checkpoint_continues_from_another_connection_and_revision() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let first = legacy_http_client(&http.url).await;
    let payload = structured(&call(&first, rimthan_mcp::START, start_arguments("codex")).await);
    first.cancel().await.unwrap();
    let second = modern_http_client(&http.url).await;
    let again = structured(
        &call(
            &second,
            rimthan_mcp::ACTIVE_STEP,
            serde_json::json!({"checkpoint": payload["checkpoint"]}),
        )
        .await,
    );
    assert_eq!(again["session_id"], payload["session_id"]);
    second.cancel().await.unwrap();
}

fn post(host: &str, origin: Option<&str>) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn disallowed_hosts_and_origins_get_403() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let local = format!("127.0.0.1:{}", http.addr.port());
    assert_eq!(raw_status(http.addr, &post(&local, None)).await, 200);
    assert_eq!(
        raw_status(http.addr, &post(&local, Some(&format!("http://{local}")))).await,
        200
    );
    assert_eq!(
        raw_status(http.addr, &post("evil.example.com", None)).await,
        403
    );
    assert_eq!(
        raw_status(http.addr, &post(&local, Some("http://evil.example.com"))).await,
        403
    );
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let get =
        |path: &str| format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    assert_eq!(raw_status(http.addr, &get("/healthz")).await, 200);
    assert_eq!(raw_status(http.addr, &get("/readyz")).await, 200);
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let body = "x".repeat(4 * 1024 * 1024 + 1);
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(raw_status(http.addr, &request).await, 413);
}

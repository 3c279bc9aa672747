//! Streamable HTTP on both revisions, hardening, and health endpoints.

use rimthan_mcp::Profile;
use serde_json::{Value, json};

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
async fn every_shipped_workflow_completes_on_every_harness_it_pins_over_both_revisions() {
    let served = server(Profile::WorkflowEngine).await;
    let engine = served.engine().clone();
    let http = http_server(served).await;
    let legacy = legacy_http_client(&http.url).await;
    let modern = modern_http_client(&http.url).await;
    let workflows = shipped_workflows();
    assert!(workflows.len() >= 2, "{workflows:?}");
    for (workflow, harnesses) in workflows {
        for (i, harness) in harnesses.iter().enumerate() {
            let client = if i % 2 == 0 { &legacy } else { &modern };
            let done = run_workflow(client, &engine, &workflow, harness).await;
            assert_eq!(done["status"], "completed", "{workflow} as {harness}");
        }
    }
    legacy.cancel().await.unwrap();
    modern.cancel().await.unwrap();
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

/// The `x-request-id` an answer carries to a request sent with `id` (none when `None`).
async fn answered_request_id(
    addr: std::net::SocketAddr,
    request: &str,
    id: Option<&str>,
) -> String {
    let header = id.map_or(String::new(), |id| format!("x-request-id: {id}\r\n"));
    let request = request.replacen("\r\n", &format!("\r\n{header}"), 1);
    let (head, _) = raw_answer(addr, request.as_bytes()).await;
    let ids: Vec<&str> = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.eq_ignore_ascii_case("x-request-id"))
        .map(|(_, value)| value.trim())
        .collect();
    assert_eq!(ids.len(), 1, "{head}");
    ids[0].to_owned()
}

#[tokio::test]
async fn every_answer_carries_the_request_id_kept_only_when_sane() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let health = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let read = read_request(
        "2026-07-28",
        "rimthan://bootstrap/agent-entrypoint",
        json!(1),
    );
    let body = "x".repeat(4 * 1024 * 1024 + 1);
    let too_large = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let sane = "proxy-7f3a-0001";
    let long = "a".repeat(65);
    for request in [health, read.as_str(), too_large.as_str()] {
        assert_eq!(
            answered_request_id(http.addr, request, Some(sane)).await,
            sane
        );
        let mut minted = Vec::new();
        for unusable in [
            None,
            Some(""),
            Some(long.as_str()),
            Some("a b"),
            Some("id;drop"),
        ] {
            let id = answered_request_id(http.addr, request, unusable).await;
            assert!(
                !id.is_empty() && Some(id.as_str()) != unusable && !minted.contains(&id),
                "{unusable:?} answered with {id}"
            );
            minted.push(id);
        }
    }
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

#[tokio::test]
async fn repeated_reads_get_the_same_answer_on_both_revisions() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let client = modern_http_client(&http.url).await;
    let listed = client.list_all_resources().await.unwrap();
    client.cancel().await.unwrap();
    assert!(listed.len() > 10);
    for version in ["2025-11-25", "2026-07-28"] {
        for resource in &listed {
            // The first answer is built; the second is kept from it, with its own id.
            let (status, first) = raw_read(http.addr, version, &resource.uri, json!(1)).await;
            assert_eq!(status, 200, "{version} {}: {first}", resource.uri);
            let (status, second) = raw_read(http.addr, version, &resource.uri, json!("two")).await;
            assert_eq!(status, 200);
            assert_eq!((&first["id"], &second["id"]), (&json!(1), &json!("two")));
            assert_eq!(
                first["result"], second["result"],
                "{version} {}",
                resource.uri
            );
            assert_eq!(first["result"]["contents"][0]["uri"], resource.uri.as_str());
        }
    }
}

#[tokio::test]
async fn a_kept_read_still_gets_every_header_check() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let read = |version: &str, id: u32| {
        read_request(version, "rimthan://bootstrap/agent-entrypoint", json!(id))
    };
    assert_eq!(raw_status(http.addr, &read("2025-11-25", 1)).await, 200);
    assert_eq!(raw_status(http.addr, &read("2025-11-25", 2)).await, 200);
    assert_eq!(raw_status(http.addr, &read("1999-01-01", 3)).await, 400);
    let evil = read("2025-11-25", 4).replace("Host: 127.0.0.1", "Host: evil.example.com");
    assert_eq!(raw_status(http.addr, &evil).await, 403);
    let no_sse = read("2025-11-25", 5).replace(", text/event-stream", "");
    assert_eq!(raw_status(http.addr, &no_sse).await, 406);
}

/// One raw `rimthan.get_active_step` call on `version`, with the headers that revision requires.
fn step_request(version: &str, checkpoint: &Value, id: Value) -> String {
    let mut params =
        json!({"name": rimthan_mcp::ACTIVE_STEP, "arguments": {"checkpoint": checkpoint}});
    let mut headers = String::new();
    if version >= "2026-07-28" {
        headers = format!(
            "Mcp-Method: tools/call\r\nMcp-Name: {}\r\n",
            rimthan_mcp::ACTIVE_STEP
        );
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    let body =
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {version}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn raw_step(
    addr: std::net::SocketAddr,
    version: &str,
    checkpoint: &Value,
    id: Value,
) -> Value {
    let (status, body) = raw_exchange(addr, step_request(version, checkpoint, id).as_bytes()).await;
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

/// How many `get_active_step` calls `/metrics` counts with `outcome`.
async fn counted(addr: std::net::SocketAddr, outcome: &str) -> u64 {
    let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let (_, body) = raw_exchange(addr, request.as_bytes()).await;
    let needle = format!(
        "tool=\"{}\",outcome=\"{outcome}\"",
        rimthan_mcp::ACTIVE_STEP
    );
    String::from_utf8(body)
        .unwrap()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// A repeated `get_active_step` gets the same answer, counted every time; after a change, the
/// same checkpoint gets the new state (what an engine with nothing kept computes) or its
/// refusal, never an answer kept from before.
#[tokio::test]
async fn get_active_step_shows_the_new_state_after_every_change() {
    let server = server(Profile::WorkflowEngine).await;
    let engine = server.engine().clone();
    let http = http_server(server).await;
    let client = modern_http_client(&http.url).await;
    let (workflow, _) = shipped_workflows().into_iter().next().unwrap();
    let (start, payload) = session_at_first_work_step(&client, &workflow, "codex").await;
    let checkpoint = &payload["checkpoint"];
    // An engine over the same store with empty caches: the answer the stored session gives.
    let direct = |checkpoint: &Value| {
        let engine = engine.clone();
        let checkpoint = checkpoint.as_str().unwrap().to_owned();
        async move {
            let engine = rimthan_engine::Engine::new(
                engine.releases().clone(),
                engine.store().clone(),
                None,
            )
            .await
            .unwrap();
            let result = engine
                .active_step(rimthan_engine::ActiveStepRequest { checkpoint }, None)
                .await
                .unwrap();
            serde_json::to_value(result).unwrap()
        }
    };
    for version in ["2025-11-25", "2026-07-28"] {
        let before = counted(http.addr, "active").await;
        let first = raw_step(http.addr, version, checkpoint, json!(1)).await;
        let second = raw_step(http.addr, version, checkpoint, json!("two")).await;
        assert_eq!((&first["id"], &second["id"]), (&json!(1), &json!("two")));
        assert_eq!(first["result"], second["result"], "{version}");
        assert_eq!(
            first["result"]["structuredContent"],
            direct(checkpoint).await
        );
        assert_eq!(counted(http.addr, "active").await, before + 2, "{version}");
    }

    // A prepare changes the session but not its checkpoint: the answer is computed anew.
    let release = shipped();
    let plan = prepare_active_step(&client, &release, &workflow, &start, &payload).await;
    let after = raw_step(http.addr, "2025-11-25", checkpoint, json!(3)).await;
    assert_eq!(
        after["result"]["structuredContent"],
        direct(checkpoint).await
    );

    // Once the session moves on, the old checkpoint is refused, and stays refused.
    let next = submit_passing_reports(&client, &release, &payload, &plan).await;
    assert_ne!(next["checkpoint"], *checkpoint);
    for id in [4, 5] {
        let stale = raw_step(http.addr, "2025-11-25", checkpoint, json!(id)).await;
        assert_eq!(stale["result"]["isError"], true, "{stale}");
        assert_eq!(
            stale["result"]["structuredContent"]["failures"][0]["code"],
            "stale_checkpoint"
        );
    }
    client.cancel().await.unwrap();
}

//! Every request takes one path through rmcp, and what repeats is kept only where it is
//! computed, keyed by what determines it: requests rmcp refuses stay refused however warm the
//! caches are, a read without a URI is refused only after the header checks, and no request
//! can grow a cache with bytes of its own.

use rimthan_mcp::Profile;
use serde_json::{Value, json};

use crate::common::*;

const BOOTSTRAP: &str = "rimthan://bootstrap/agent-entrypoint";

/// A raw POST to `/mcp` of `body` on `version`, with the headers that revision requires for
/// `method` naming `name`, and `extra` header lines.
fn post(version: &str, method: &str, name: &str, body: &str, extra: &str) -> String {
    let mut headers = String::new();
    if version >= "2026-07-28" {
        headers = format!("Mcp-Method: {method}\r\nMcp-Name: {name}\r\n");
    }
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {version}\r\n{headers}{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The `_meta` a 2026-07-28 request carries, plus `extra` fields.
fn meta(version: &str, extra: Value) -> Value {
    let mut meta = json!({});
    if version >= "2026-07-28" {
        meta = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    meta.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    meta
}

/// A read's and a step call's body text with `id` spelled as given (`1.5`, say).
fn bodies(version: &str, checkpoint: &Value, id: &str) -> [(&'static str, String, String); 2] {
    let read = json!({"uri": BOOTSTRAP, "_meta": meta(version, json!({}))});
    let step = json!({
        "name": rimthan_mcp::ACTIVE_STEP,
        "arguments": {"checkpoint": checkpoint},
        "_meta": meta(version, json!({})),
    });
    [
        (
            "resources/read",
            BOOTSTRAP.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/read","params":{read}}}"#),
        ),
        (
            "tools/call",
            rimthan_mcp::ACTIVE_STEP.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{step}}}"#),
        ),
    ]
}

/// The value of `/metrics`' line `name{cache="cache"}`.
async fn cache_metric(addr: std::net::SocketAddr, name: &str, cache: &str) -> u64 {
    let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let (_, page) = raw_exchange(addr, request.as_bytes()).await;
    let prefix = format!("{name}{{cache=\"{cache}\"}} ");
    String::from_utf8(page)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.parse().unwrap()))
        .unwrap_or_else(|| panic!("no {prefix}"))
}

/// rmcp on its own, without any of this server's layers: what rmcp itself answers.
async fn bare_rmcp(server: rimthan_mcp::RimthanServer) -> std::net::SocketAddr {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    let app = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test]
async fn requests_rmcp_refuses_are_refused_over_http_however_warm_the_caches() {
    let server = server(Profile::WorkflowEngine).await;
    let rmcp_alone = bare_rmcp(server.clone()).await;
    let http = http_server(server).await;
    let client = modern_http_client(&http.url).await;
    let started = structured(&call(&client, rimthan_mcp::START, start_arguments("codex")).await);
    client.cancel().await.unwrap();
    let checkpoint = &started["checkpoint"];
    for version in ["2025-11-25", "2026-07-28"] {
        // The same requests with a plain id are answered, twice, so every cache holds them.
        for (method, name, body) in bodies(version, checkpoint, "7") {
            for _ in 0..2 {
                let (status, answer) = raw_exchange(
                    http.addr,
                    post(version, method, &name, &body, "").as_bytes(),
                )
                .await;
                let answer: Value = serde_json::from_slice(&answer).unwrap();
                assert_eq!(status, 200, "{version} {method}: {answer}");
                assert!(answer["result"].is_object(), "{version} {method}: {answer}");
            }
        }
        let ids = ["1.5", "18446744073709551616", r#"1,"id":2"#];
        for id in ids {
            for (method, name, body) in bodies(version, checkpoint, id) {
                let request = post(version, method, &name, &body, "");
                let (bare, bare_answer) = raw_exchange(rmcp_alone, request.as_bytes()).await;
                let bare_answer = String::from_utf8_lossy(&bare_answer).into_owned();
                assert!(
                    (400..500).contains(&bare) && !bare_answer.contains("\"result\""),
                    "rmcp answers {version} {method} id {id} with {bare}: {bare_answer}"
                );
                let (status, answer) = raw_exchange(http.addr, request.as_bytes()).await;
                let answer: Value = serde_json::from_slice(&answer).unwrap();
                assert_eq!(status, 400, "{version} {method} id {id}: {answer}");
                assert_eq!(answer["id"], Value::Null, "{answer}");
                assert_eq!(answer["error"]["code"], -32600, "{answer}");
                assert!(answer.get("result").is_none(), "{answer}");
            }
        }
    }
}

#[tokio::test]
async fn a_read_without_a_uri_is_refused_only_after_the_host_origin_and_content_type_checks() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    for version in ["2025-11-25", "2026-07-28"] {
        let body = json!({
            "jsonrpc": "2.0", "id": 9, "method": "resources/read",
            "params": {"url": BOOTSTRAP, "_meta": meta(version, json!({}))},
        })
        .to_string();
        let request = post(version, "resources/read", BOOTSTRAP, &body, "");
        let evil_host = request.replace("Host: 127.0.0.1", "Host: evil.example.com");
        assert_eq!(raw_status(http.addr, &evil_host).await, 403, "{version}");
        let evil_origin = post(
            version,
            "resources/read",
            BOOTSTRAP,
            &body,
            "Origin: http://evil.example.com\r\n",
        );
        assert_eq!(raw_status(http.addr, &evil_origin).await, 403, "{version}");
        let text = request.replace("Content-Type: application/json", "Content-Type: text/plain");
        assert_eq!(raw_status(http.addr, &text).await, 415, "{version}");
        let (status, answer) = raw_exchange(http.addr, request.as_bytes()).await;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(status, 200, "{version}: {answer}");
        assert_eq!(answer["id"], 9);
        assert_eq!(answer["error"]["code"], -32602, "{version}: {answer}");
    }
}

/// Calls and reads that differ only in a large `params._meta` and a per-request `traceparent`
/// header (what tracing clients send) all share one kept entry per cache: no cache grows with
/// what a caller sends, whatever it sends.
#[tokio::test]
async fn calls_differing_only_in_a_large_meta_do_not_grow_any_cache() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let client = modern_http_client(&http.url).await;
    let started = structured(&call(&client, rimthan_mcp::START, start_arguments("codex")).await);
    client.cancel().await.unwrap();
    let checkpoint = &started["checkpoint"];
    const CALLS: usize = 24;
    const PAD: usize = 256 * 1024;
    for version in ["2025-11-25", "2026-07-28"] {
        for i in 0..CALLS {
            let extra = json!({"pad": format!("{i:08}{}", "m".repeat(PAD))});
            let traceparent = format!("traceparent: 00-{i:032x}-{i:016x}-01\r\n");
            let read = json!({
                "jsonrpc": "2.0", "id": i, "method": "resources/read",
                "params": {"uri": BOOTSTRAP, "_meta": meta(version, extra.clone())},
            });
            let step = json!({
                "jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {
                    "name": rimthan_mcp::ACTIVE_STEP,
                    "arguments": {"checkpoint": checkpoint},
                    "_meta": meta(version, extra),
                },
            });
            for (method, name, body) in [
                ("resources/read", BOOTSTRAP, read),
                ("tools/call", rimthan_mcp::ACTIVE_STEP, step),
            ] {
                let request = post(version, method, name, &body.to_string(), &traceparent);
                let (status, answer) = raw_exchange(http.addr, request.as_bytes()).await;
                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
            }
        }
    }
    let sent = 2 * CALLS * PAD;
    for cache in ["session", "active_step", "resource_read"] {
        assert_eq!(
            cache_metric(http.addr, "rimthan_cache_entries", cache).await,
            1,
            "{cache}"
        );
        let bytes = cache_metric(http.addr, "rimthan_cache_bytes", cache).await;
        assert!(
            bytes < 64 * 1024,
            "{cache} holds {bytes} bytes after {sent} were sent"
        );
    }
    let hits = cache_metric(http.addr, "rimthan_cache_hits_total", "active_step").await;
    assert_eq!(hits, 2 * CALLS as u64 - 1);
}

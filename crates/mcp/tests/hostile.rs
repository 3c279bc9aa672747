//! Hostile clients: malformed and oversized requests, wrong headers, slow bodies and floods of
//! idle sessions each get their documented answer while a well-behaved client keeps being served,
//! and requests built to make the server work (schema-error floods, oversize content, huge or
//! many globs) get bounded answers.

use std::time::Duration;

use rimthan_engine::{MAX_FORBIDDEN_PATHS, MAX_GLOB_BYTES, MAX_SCHEMA_ERRORS};
use rimthan_mcp::{
    Profile,
    http::{self, HttpConfig},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::oneshot,
};

use crate::common::*;

fn post(body: &str, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

const JSON: &str =
    "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

#[tokio::test]
async fn malformed_requests_get_4xx_answers() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let cases = [
        (
            "wrong content type",
            post(
                PING,
                "Content-Type: text/plain\r\nAccept: application/json, text/event-stream\r\n",
            ),
            415,
        ),
        (
            "no acceptable response type",
            post(
                PING,
                "Content-Type: application/json\r\nAccept: text/html\r\n",
            ),
            406,
        ),
        (
            "unknown protocol version",
            post(PING, &format!("{JSON}MCP-Protocol-Version: 1999-01-01\r\n")),
            400,
        ),
        // No unknown-session case: by default no session is minted and the header is ignored
        // (with --legacy-sessions, rmcp answers an unknown one with 404).
    ];
    for (what, request, status) in cases {
        assert_eq!(raw_status(http.addr, &request).await, status, "{what}");
    }
    // The server still serves a well-behaved client.
    let client = modern_http_client(&http.url).await;
    assert_eq!(client.list_all_tools().await.unwrap().len(), 4);
    client.cancel().await.unwrap();
}

fn post_bytes(body: &[u8], extra: &str) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

#[tokio::test]
async fn bodies_that_are_no_json_rpc_message_get_json_rpc_errors() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let cases: [(&str, Vec<u8>, i64); 4] = [
        ("malformed JSON", b"{not json".to_vec(), -32700),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec(),
            -32700,
        ),
        ("a batch", format!("[{PING},{PING}]").into_bytes(), -32600),
        ("no message", br#"{"hello":"world"}"#.to_vec(), -32600),
    ];
    for (what, body, code) in cases {
        let (status, answer) = raw_exchange(http.addr, &post_bytes(&body, JSON)).await;
        assert_eq!(status, 400, "{what}");
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["jsonrpc"], "2.0", "{what}");
        assert_eq!(answer["id"], Value::Null, "{what}");
        assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
    }
}

#[tokio::test]
async fn a_read_without_a_uri_is_invalid_params_on_both_revisions() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    for version in ["2025-11-25", "2026-07-28"] {
        let request = read_request(version, "rimthan://x", json!(9))
            .replace(r#""uri":"rimthan://x""#, r#""url":"rimthan://x""#);
        let (status, answer) = raw_exchange(http.addr, request.as_bytes()).await;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(status, 200, "{version}: {answer}");
        assert_eq!(answer["id"], 9);
        assert_eq!(answer["error"]["code"], -32602, "{version}: {answer}");
    }
}

#[tokio::test]
async fn a_megabyte_uri_is_refused_without_being_echoed() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let uri = format!("rimthan://registry/{}", "u".repeat(1 << 20));
    let (status, answer) = raw_read(http.addr, "2025-11-25", &uri, json!(1)).await;
    assert_eq!(status, 200);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let reply = answer.to_string();
    assert!(reply.len() < 1024, "a reply of {} bytes", reply.len());
    assert!(!reply.contains(&"u".repeat(64)));
    // A long URI within the bound that names nothing is echoed once, bounded by the bound.
    let missing = format!("rimthan://registry/{}", "m".repeat(1000));
    let (_, answer) = raw_read(http.addr, "2025-11-25", &missing, json!(2)).await;
    assert!(
        answer.to_string().len() < 3 * rimthan_mcp::MAX_URI_BYTES,
        "{answer}"
    );
}

#[tokio::test]
async fn a_slow_body_is_cut_off_without_stalling_others() {
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = HttpConfig::loopback(addr);
    config.body_timeout = Duration::from_millis(500);
    let (stop, stopped) = oneshot::channel::<()>();
    let server = server(Profile::WorkflowEngine).await;
    tokio::spawn(async move {
        http::serve(listener, server, &config, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let mut slow = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{JSON}Content-Length: 1000\r\n\r\n{{\"jsonrpc\""
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let client = modern_http_client(&format!("http://{addr}/mcp")).await;
    assert_eq!(
        client.list_all_tools().await.unwrap().len(),
        4,
        "others are served meanwhile"
    );
    let mut answer = vec![0u8; 256];
    let n = tokio::time::timeout(Duration::from_secs(5), slow.read(&mut answer))
        .await
        .expect("the slow body is cut off")
        .unwrap();
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(
        n == 0 || text.starts_with("HTTP/1.1 408") || text.starts_with("HTTP/1.1 400"),
        "{text}"
    );
    client.cancel().await.unwrap();
    let _ = stop.send(());
}

/// A prepare of the first output of research-study's first work step, with `content` and the
/// attested `bytes` as given; returns the request's arguments and the serialized reply.
async fn prepare_first_output(content: Value, bytes: usize) -> (Value, String, Value) {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let (_, payload) = session_at_first_work_step(&client, "research-study", "codex").await;
    let output = &payload["step"]["outputs"][0];
    let arguments = json!({
        "checkpoint": payload["checkpoint"],
        "step_id": payload["step"]["id"],
        "output_attestation": {"artifacts": [{
            "artifact_id": output["artifact_id"], "path": output["path"],
            "owner_step": output["owner_step"], "media_type": output["media_type"],
            "schema_sha256": output["schema"]["sha256"], "bytes": bytes,
            "sha256": "0".repeat(64), "symlink_free": true, "read_back": true,
            "write_policy": output["write_policy"], "content": content,
        }]},
    });
    let result = call(&client, rimthan_mcp::PREPARE, arguments.clone()).await;
    let reply = serde_json::to_string(&result).unwrap();
    client.cancel().await.unwrap();
    (arguments, reply, structured(&result))
}

/// research-study's framed question (its first output) with `n` empty success criteria, each
/// of which breaks the schema's `minLength`.
fn question_with_empty_criteria(n: usize) -> Value {
    let example = example(
        &shipped(),
        "research-study",
        "frame-question",
        "research-question",
    );
    let mut content: Value = serde_json::from_slice(&example).unwrap();
    content["success_criteria"] = json!(vec![""; n]);
    content
}

#[tokio::test]
async fn a_flood_of_schema_errors_gets_a_bounded_list_with_the_total() {
    // Within the output's max_bytes (16 KiB), so the schema runs: about 4,000 errors.
    let n = 4_000;
    let content = question_with_empty_criteria(n);
    assert!(serde_json::to_vec(&content).unwrap().len() <= 16 * 1024);
    let (arguments, reply, result) = prepare_first_output(content, 1000).await;
    let request = serde_json::to_string(&arguments).unwrap();
    assert!(
        reply.len() < 2 * request.len(),
        "reply {} bytes for a request of {}",
        reply.len(),
        request.len()
    );
    let failures = result["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{result}");
    let failure = &failures[0];
    assert_eq!(failure["code"], "schema_validation_failed");
    let errors = failure["detail"]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), MAX_SCHEMA_ERRORS);
    // One error per empty criterion, and one for more criteria than the schema's maxItems.
    assert_eq!(failure["detail"]["error_count"], n + 1);
    let pointers: Vec<_> = errors
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    let mut sorted = pointers.clone();
    sorted.sort();
    assert_eq!(pointers, sorted, "the kept errors are sorted by pointer");
}

#[tokio::test]
async fn a_schema_error_message_does_not_echo_a_long_value() {
    let mut content = question_with_empty_criteria(1);
    let long = "q".repeat(5_000);
    content["success_criteria"] = json!([{ "not": long }]);
    let (_, reply, result) = prepare_first_output(content, 1000).await;
    assert_eq!(result["failures"][0]["code"], "schema_validation_failed");
    assert!(!reply.contains(&"q".repeat(300)), "the value is echoed");
}

#[tokio::test]
async fn content_larger_than_max_bytes_is_refused_before_its_schema_runs() {
    // Valid against the schema but 20 KB of canonical JSON for a 16 KiB output, attesting a
    // small `bytes`: the content itself is held to max_bytes.
    let example = example(
        &shipped(),
        "research-study",
        "frame-question",
        "research-question",
    );
    let mut content: Value = serde_json::from_slice(&example).unwrap();
    content["context"] = json!("c".repeat(20_000));
    let (_, _, result) = prepare_first_output(content.clone(), 1000).await;
    let codes: Vec<_> = result["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["code"])
        .collect();
    assert_eq!(codes, ["max_bytes_exceeded"], "{result}");
    assert_eq!(result["failures"][0]["detail"]["field"], "content");

    // Over max_bytes and full of schema errors: the schema is not run.
    let (_, reply, result) = prepare_first_output(question_with_empty_criteria(50_000), 1000).await;
    let codes: Vec<_> = result["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["code"])
        .collect();
    assert_eq!(codes, ["max_bytes_exceeded"]);
    assert!(reply.len() < 4096, "{} bytes", reply.len());
}

async fn start_with_forbidden_paths(paths: Vec<String>) -> (String, Value) {
    let client = duplex_client(server(Profile::WorkflowEngine).await).await;
    let mut arguments = start_arguments("codex");
    arguments["repository_policy"] = json!({"forbidden_paths": paths});
    let result = call(&client, rimthan_mcp::START, arguments).await;
    client.cancel().await.unwrap();
    (serde_json::to_string(&result).unwrap(), structured(&result))
}

/// The start was refused as an argument error naming `field`.
fn assert_refused_argument(result: &Value, field: &str) {
    assert_eq!(
        result["failures"][0]["code"], "invalid_arguments",
        "{result}"
    );
    assert_eq!(result["failures"][0]["detail"]["field"], field, "{result}");
}

#[tokio::test]
async fn a_glob_longer_than_the_bound_is_refused_without_echo() {
    let long = "a".repeat(100_000);
    let (reply, result) = start_with_forbidden_paths(vec!["secrets/**".into(), long]).await;
    assert_refused_argument(&result, "repository_policy.forbidden_paths[1]");
    assert!(!reply.contains(&"a".repeat(100)), "the glob is echoed");
    assert!(
        reply.contains(&MAX_GLOB_BYTES.to_string()),
        "the bound is named"
    );

    let (_, result) = start_with_forbidden_paths(vec!["a".repeat(MAX_GLOB_BYTES)]).await;
    assert_eq!(
        result["status"], "active",
        "a glob at the bound is accepted"
    );
}

#[tokio::test]
async fn more_globs_than_the_bound_are_refused() {
    let paths = |n: usize| {
        (0..n)
            .map(|i| format!("private-{i}/**"))
            .collect::<Vec<_>>()
    };
    let (reply, result) = start_with_forbidden_paths(paths(MAX_FORBIDDEN_PATHS + 1)).await;
    assert_refused_argument(&result, "repository_policy.forbidden_paths");
    assert!(
        reply.contains(&MAX_FORBIDDEN_PATHS.to_string()),
        "the bound is named"
    );

    let (_, result) = start_with_forbidden_paths(paths(MAX_FORBIDDEN_PATHS)).await;
    assert_eq!(
        result["status"], "active",
        "globs up to the bound are accepted"
    );
}

#[tokio::test]
async fn an_invalid_glob_is_named_by_index_not_echoed() {
    let bad = format!("[{}", "b".repeat(900));
    let (reply, result) = start_with_forbidden_paths(vec![bad]).await;
    assert_refused_argument(&result, "repository_policy.forbidden_paths[0]");
    assert!(!reply.contains(&"b".repeat(100)), "the glob is echoed");
}

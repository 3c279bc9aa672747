//! Hostile HTTP: malformed and oversized requests, wrong headers, slow bodies and floods of idle
//! sessions each get their documented answer while a well-behaved client keeps being served.

use std::time::Duration;

use rimthan_mcp::{
    Profile,
    http::{self, HttpConfig},
};
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
        // rmcp answers an unparseable body with 415 ("fail to deserialize request body").
        ("malformed JSON", post("{not json", JSON), 415),
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

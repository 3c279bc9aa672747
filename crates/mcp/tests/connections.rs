//! Connections: sockets that send nothing, half a head, or stop reading are reaped by their
//! timers; a declared oversize body is refused before it is awaited; a body that finds the
//! budget for bodies in flight spent gets 503; paths under `/mcp/` are not the endpoint;
//! shutdown does not wait on a client that never finishes its head.

use std::time::{Duration, Instant};

use rimthan_mcp::Profile;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::common::*;

/// Reads until the peer closes, failing after `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the server closed the connection");
}

#[tokio::test]
async fn a_connection_that_sends_no_head_is_closed_after_the_header_timeout() {
    let http = http_server_with(server(Profile::WorkflowEngine).await, |c| {
        c.connections.header_timeout = Duration::from_millis(300);
    })
    .await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(http.addr).await.unwrap();
    let mut half = TcpStream::connect(http.addr).await.unwrap();
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
        .await
        .unwrap();
    for stream in [&mut silent, &mut half] {
        closed_within(stream, Duration::from_secs(5)).await;
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(250), "closed early: {took:?}");
    }
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let http = http_server_with(server(Profile::WorkflowEngine).await, |c| {
        c.connections.header_timeout = Duration::from_millis(300);
    })
    .await;
    let mut stream = TcpStream::connect(http.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    closed_within(&mut stream, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_client_that_stops_reading_its_answer_is_cut_off_after_the_idle_timeout() {
    let http = http_server_with(server(Profile::WorkflowEngine).await, |c| {
        c.connections.idle_timeout = Duration::from_millis(500);
    })
    .await;
    // Pipelined requests whose answers (about 40 KiB of tools each) fill the socket buffers
    // of a client that never reads.
    let mut stream = TcpStream::connect(http.addr).await.unwrap();
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{list}",
        list.len()
    );
    let started = Instant::now();
    let pipelined = request.repeat(400);
    // The write itself stalls once the server stops reading; the connection is then cut.
    let write = tokio::time::timeout(Duration::from_secs(10), async {
        let _ = stream.write_all(pipelined.as_bytes()).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    });
    write.await.expect("no hang");
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let cut = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received += n,
            }
        }
    })
    .await;
    assert!(cut.is_ok(), "the connection stayed open");
    assert!(
        received < 400 * 30_000,
        "every answer was delivered ({received} bytes), so nothing stalled"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn a_declared_oversize_body_is_refused_at_once() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    let mut stream = TcpStream::connect(http.addr).await.unwrap();
    stream
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Content-Length: 99999999999\r\n\r\n{",
        )
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let n = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf))
        .await
        .expect("answered within a second")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
}

#[tokio::test]
async fn a_body_that_finds_the_budget_spent_is_told_to_retry() {
    let http = http_server_with(server(Profile::WorkflowEngine).await, |c| {
        c.max_body_bytes = 1024;
        c.max_buffered_bytes = 1024;
    })
    .await;
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                Content-Length: 1000\r\n\r\n";
    // The first body holds 900 of the 1,024 bytes the server may buffer, and never ends.
    let mut holder = TcpStream::connect(http.addr).await.unwrap();
    holder
        .write_all(format!("{head}{}", " ".repeat(900)).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut second = TcpStream::connect(http.addr).await.unwrap();
    second
        .write_all(format!("{head}{}", " ".repeat(1000)).as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(2), second.read(&mut buf))
        .await
        .expect("answered at once")
        .unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    // Once the first body is gone, its bytes are back in the budget.
    drop(holder);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\
         Connection: close\r\n\r\n{}",
        " ".repeat(1000)
    );
    assert_eq!(raw_status(http.addr, &request).await, 400);
}

#[tokio::test]
async fn paths_under_the_endpoint_are_not_found() {
    let http = http_server(server(Profile::WorkflowEngine).await).await;
    for path in ["/mcp/", "/mcp/x", "/mcp/mcp"] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 2\r\n\
             Connection: close\r\n\r\n{{}}"
        );
        assert_eq!(raw_status(http.addr, &request).await, 404, "{path}");
    }
}

#[tokio::test]
async fn shutdown_does_not_wait_on_a_client_that_never_finishes_its_head() {
    let mut http = http_server_with(server(Profile::WorkflowEngine).await, |c| {
        c.connections.header_timeout = Duration::from_secs(60);
        c.connections.shutdown_grace = Duration::from_millis(500);
    })
    .await;
    let mut half = TcpStream::connect(http.addr).await.unwrap();
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // The head is being read when shutdown starts.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), http.shut_down())
        .await
        .expect("serve returned")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    closed_within(&mut half, Duration::from_secs(2)).await;
}

#[tokio::test]
async fn at_the_connection_cap_new_clients_wait_until_one_is_reaped() {
    let http = http_server_with(server(Profile::WorkflowEngine).await, |c| {
        c.connections.max_connections = 4;
        c.connections.header_timeout = Duration::from_millis(500);
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(http.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let health = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let status = tokio::time::timeout(Duration::from_secs(5), raw_status(http.addr, health))
        .await
        .expect("answered once the idle sockets were reaped");
    assert_eq!(status, 200);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "served before a permit was free: the cap is not applied"
    );
}

//! `rimthan serve` holds the memory `docs/operations/deploy.md` ("Memory") states for its
//! default limits: callers without a token get 401 before a byte of their body is kept, and
//! bodies from callers with one are bounded all together, however many connections send them
//! and however slowly.
#![cfg(target_os = "linux")]

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    sync::Arc,
    time::Duration,
};

mod common;

use common::{Served, serve_on_free_port};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// The largest body the default limit accepts, as the JSON that costs most to hold parsed.
const BODY_BYTES: usize = 4 * 1024 * 1024 - 1;

/// What the deploy guide states the default limits hold the server to, above its resident
/// memory at rest.
const STATED_MIB: u64 = 768;

/// `rimthan serve` with its default limits and token auth, on a port it picks itself (read back
/// from its log, so no other test can take the port in between).
fn serve(tokens: &std::path::Path) -> (Served, u16) {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--database-url", "sqlite::memory:", "--auth", "tokens"])
        .arg("--auth-tokens-file")
        .arg(tokens);
    serve_on_free_port(command)
}

/// A field of `/proc/PID/status`, in MiB.
fn status_mib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024
}

/// A `tools/call` whose arguments hold `[0,0,…,0]`, `BODY_BYTES` long in all: two bytes a
/// value, each value a node once parsed, the most a body of this size can cost to hold parsed.
fn zeros() -> Arc<Vec<u8>> {
    let head = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"rimthan.submit_step_reports","arguments":{"zeros":[0"#;
    let tail = b"]}}}";
    let mut body = Vec::with_capacity(BODY_BYTES);
    body.extend_from_slice(head);
    while body.len() < BODY_BYTES - tail.len() - 1 {
        body.extend_from_slice(b",0");
    }
    if body.len() < BODY_BYTES - tail.len() {
        body.push(b' ');
    }
    body.extend_from_slice(tail);
    assert_eq!(body.len(), BODY_BYTES);
    Arc::new(body)
}

/// Opens `clients` connections at once, each sending a POST to `/mcp` declaring `BODY_BYTES`
/// and then `sent` bytes of `body`; waits until every one has sent them and returns the open
/// streams (a client whose answer came early and whose body was cut short counts as done).
fn send_all(
    port: u16,
    clients: usize,
    token: Option<&str>,
    body: &Arc<Vec<u8>>,
    sent: usize,
) -> Vec<TcpStream> {
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: rimthan.submit_step_reports\r\n{authorization}Content-Length: {BODY_BYTES}\r\n\r\n"
    );
    let senders: Vec<_> = (0..clients)
        .map(|_| {
            let (head, body) = (head.clone(), body.clone());
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                stream.write_all(head.as_bytes()).unwrap();
                let _ = stream.write_all(&body[..sent]);
                stream
            })
        })
        .collect();
    senders.into_iter().map(|s| s.join().unwrap()).collect()
}

/// The status each stream was answered with (the body is sent whole first).
fn statuses(streams: Vec<TcpStream>) -> Vec<u16> {
    let threads: Vec<_> = streams
        .into_iter()
        .map(|mut stream| {
            std::thread::spawn(move || {
                let mut head = [0u8; 16];
                let n = stream.read(&mut head).unwrap_or(0);
                String::from_utf8_lossy(&head[..n])
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn many_slow_and_large_bodies_with_and_without_a_token_stay_within_the_stated_memory() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let hash = rimthan_registry::Sha256Digest::of(b"ada-token").to_string();
    let file = serde_json::json!({"tokens": [
        {"sha256": hash, "principal": "ada", "organization": "lab", "scopes": ["rimthan:workflow"]},
    ]});
    std::fs::write(&tokens, file.to_string()).unwrap();
    let (server, port) = serve(&tokens);
    let pid = server.0.id();
    let body = zeros();
    let at_rest = status_mib(pid, "VmRSS:");
    let grown = |what: &str| {
        let grown = status_mib(pid, "VmHWM:").saturating_sub(at_rest);
        eprintln!("{what}: peak {grown} MiB above rest ({at_rest} MiB)");
        assert!(
            grown <= STATED_MIB,
            "{what}: the server grew by {grown} MiB, beyond the {STATED_MIB} MiB stated"
        );
    };

    // 32 callers with a token at once, each sending a whole 4 MiB body: those the budget
    // holds are parsed and answered (the tool refuses the arguments); the others are told to
    // retry.
    let large = send_all(port, 32, Some("ada-token"), &body, BODY_BYTES);
    let answered = statuses(large);
    grown("32 large bodies with a token");
    assert!(
        answered.iter().all(|s| [200, 503].contains(s)),
        "{answered:?}"
    );
    assert!(
        answered.contains(&503),
        "the budget refused none: {answered:?}"
    );

    // 384 callers without a token, each sending all of a 4 MiB body but its last byte.
    let slow = send_all(port, 384, None, &body, BODY_BYTES - 1);
    grown("384 slow bodies without a token");
    // Refused unread: a client still writing when the server closes may get a reset instead of
    // the 401 (0 here), which refuses it just the same.
    let refused = statuses(slow);
    assert!(refused.iter().all(|s| [401, 0].contains(s)), "{refused:?}");
    assert!(refused.contains(&401), "{refused:?}");

    // 32 callers with a token at once, each sending all of a 4 MiB body but its last byte.
    let slow = send_all(port, 32, Some("ada-token"), &body, BODY_BYTES - 1);
    grown("32 slow bodies with a token");
    drop(slow);

    // 32 callers without a token, whole bodies: refused before any is read.
    let large = send_all(port, 32, None, &body, BODY_BYTES);
    assert!(statuses(large).iter().all(|s| *s == 401));
    grown("32 large bodies without a token");
}

/// One MCP request over its own connection on 2026-07-28: `params` with `_meta` holding the
/// revision's fields and `pad`, and a `traceparent` header of its own, as a tracing client
/// sends; returns the status and the JSON answer.
fn exchange(
    port: u16,
    method: &str,
    name: &str,
    mut params: Value,
    pad: &str,
    trace: usize,
) -> (u16, Value) {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "pad": pad,
    });
    let body =
        serde_json::json!({"jsonrpc": "2.0", "id": trace, "method": method, "params": params})
            .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: {method}\r\nMcp-Name: {name}\r\n\
         traceparent: 00-{trace:032x}-{trace:016x}-01\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = String::from_utf8_lossy(&answer[..split])
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap();
    (
        status,
        serde_json::from_slice(&answer[split + 4..]).unwrap(),
    )
}

/// What a caller sends cannot grow what the server keeps: reads and `get_active_step` calls
/// that differ only in a 1 MiB `params._meta` and their `traceparent` header, 480 MiB in all,
/// leave the server's resident memory within a few MiB of where the first few left it (a cache
/// keyed by the request's bytes kept all of them).
#[test]
fn calls_and_reads_with_varied_meta_and_headers_leave_resident_memory_where_it_was() {
    let mut command = Command::new(BIN);
    command.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        "sqlite::memory:",
    ]);
    let (server, port) = serve_on_free_port(command);
    let pid = server.0.id();
    let start = serde_json::to_value(rimthan_testkit::engine::start_request("codex")).unwrap();
    let (status, started) = exchange(
        port,
        "tools/call",
        "rimthan.start_workflow",
        serde_json::json!({"name": "rimthan.start_workflow", "arguments": start}),
        "",
        0,
    );
    assert_eq!(status, 200, "{started}");
    let checkpoint = started["result"]["structuredContent"]["checkpoint"].clone();
    assert!(checkpoint.is_string(), "{started}");
    let step = serde_json::json!({
        "name": "rimthan.get_active_step",
        "arguments": {"checkpoint": checkpoint},
    });
    let read = serde_json::json!({"uri": "rimthan://bootstrap/agent-entrypoint"});
    const PAD: usize = 1 << 20;
    let round = |i: usize| {
        let pad = format!("{i:08}{}", "m".repeat(PAD));
        for (method, name, params) in [
            ("tools/call", "rimthan.get_active_step", &step),
            (
                "resources/read",
                "rimthan://bootstrap/agent-entrypoint",
                &read,
            ),
        ] {
            let (status, answer) = exchange(port, method, name, params.clone(), &pad, i);
            assert_eq!(status, 200, "{answer}");
            assert!(answer["result"].is_object(), "{answer}");
        }
    };
    (1..=16).for_each(round);
    let settled = status_mib(pid, "VmRSS:");
    (17..=256).for_each(round);
    let grown = status_mib(pid, "VmRSS:").saturating_sub(settled);
    eprintln!("resident memory grew {grown} MiB over 480 MiB of varied requests");
    assert!(
        grown <= 32,
        "the server kept {grown} MiB more after 480 MiB of requests differing only in `_meta` and headers"
    );
}

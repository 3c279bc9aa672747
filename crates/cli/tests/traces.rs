//! `rimthan serve --otlp-endpoint` against a real OTLP/HTTP collector in the test, which decodes
//! what arrives with the OpenTelemetry protobuf definitions: a staged session given a
//! `traceparent` is one trace, with a span per request under the caller's span, child spans for
//! the store and the checks, and the conventions' attribute names (those
//! `docs/operations/tracing.md` lists, and no other); nothing arrives when export is off; a
//! collector that never answers neither fails nor holds up a session, and what is dropped is
//! counted.

use std::{
    collections::{BTreeMap, BTreeSet},
    convert::Infallible,
    io::{Read as _, Write as _},
    net::TcpStream,
    path::Path,
    process::{Command, Output},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use opentelemetry_proto::tonic::{
    collector::{metrics::v1::ExportMetricsServiceRequest, trace::v1::ExportTraceServiceRequest},
    common::v1::{AnyValue, KeyValue, any_value::Value},
    trace::v1::{Span, span::SpanKind},
};
use prost::Message as _;

mod common;

use common::{Served, build_signed, example_source, serve_on_free_port};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// A caller's trace context, for the tests that only need one.
const A_TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// How the collector answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collecting {
    /// Decodes and keeps every export, and answers 200.
    Answer,
    /// Accepts connections and never answers: a collector that is down the worst way.
    Hang,
}

#[derive(Debug, Default)]
struct Received {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    requests: usize,
}

/// An OTLP/HTTP receiver on a free loopback port, stopped with its runtime.
struct Collector {
    url: String,
    received: Arc<Mutex<Received>>,
    _runtime: tokio::runtime::Runtime,
}

impl Collector {
    fn start(mode: Collecting) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Received::default()));
        let kept = received.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let kept = kept.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        receive(request, kept.clone(), mode)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url,
            received,
            _runtime: runtime,
        }
    }

    fn spans(&self) -> Vec<Span> {
        let received = self.received.lock().unwrap();
        received
            .traces
            .iter()
            .flat_map(|t| &t.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }
}

async fn receive(
    request: hyper::Request<hyper::body::Incoming>,
    received: Arc<Mutex<Received>>,
    mode: Collecting,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    if mode == Collecting::Hang {
        std::future::pending::<()>().await;
    }
    let path = request.uri().path().to_owned();
    let protobuf = request
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/x-protobuf");
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let mut kept = received.lock().unwrap();
    kept.requests += 1;
    assert!(protobuf, "{path}: not sent as OTLP protobuf");
    match path.as_str() {
        "/v1/traces" => kept
            .traces
            .push(ExportTraceServiceRequest::decode(body).expect("an OTLP trace export")),
        "/v1/metrics" => kept
            .metrics
            .push(ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics export")),
        other => panic!("the server posted to {other}"),
    }
    Ok(hyper::Response::new(Full::new(Bytes::new())))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A server on the checked example (a workflow with script checks), its store in `dir`.
fn serve(dir: &Path, configure: impl FnOnce(&mut Command)) -> (Served, u16) {
    let source = example_source("checked-workflow", dir);
    let registry = build_signed(&source, dir, &[]);
    let mut serve = Command::new(BIN);
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--registry"])
        .arg(&registry)
        .arg("--database-url")
        .arg(format!("sqlite://{}", dir.join("db.sqlite").display()));
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") {
            serve.env_remove(name);
        }
    }
    serve.env("OTEL_BSP_SCHEDULE_DELAY", "100");
    configure(&mut serve);
    serve_on_free_port(serve)
}

fn stage(port: u16, harness: &str, protocol: &str, traceparent: &str) -> Output {
    let project = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "stage",
            "--harness",
            harness,
            "--url",
            &format!("http://127.0.0.1:{port}/mcp"),
            "--protocol",
            protocol,
            "--project",
        ])
        .arg(project.path())
        .args(["--traceparent", traceparent])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// Stops the server with SIGTERM, so it sends what waits, and waits for it to end.
fn stop(mut served: Served) {
    let status = Command::new("kill")
        .args(["-TERM", &served.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    while served.0.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, Value> {
    list.iter()
        .filter_map(|kv| {
            let AnyValue { value } = kv.value.clone()?;
            Some((kv.key.clone(), value?))
        })
        .collect()
}

fn string(value: Option<&Value>) -> Option<&str> {
    match value? {
        Value::StringValue(s) => Some(s),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every attribute name `docs/operations/tracing.md` lists in its attribute table.
fn documented_attributes() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations/tracing.md"),
    )
    .unwrap();
    let table = doc
        .split("### Attributes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the attribute table");
    table
        .lines()
        .filter(|line| line.starts_with("| `"))
        .flat_map(|line| {
            let first = line.split('|').nth(1).unwrap_or_default();
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_staged_session_is_one_trace_with_a_span_per_request_and_children_for_checks_and_the_store() {
    let collector = Collector::start(Collecting::Answer);
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = serve(dir.path(), |serve| {
        serve.args(["--otlp-endpoint", &collector.url]);
    });
    // Over 2026-07-28 the trace context travels in `_meta`; over 2025-11-25, also in the HTTP
    // header, which is all a listing carries.
    let runs = [
        (
            "codex",
            "2026-07-28",
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "00f067aa0ba902b7",
        ),
        (
            "claude-code",
            "2025-11-25",
            "0af7651916cd43dd8448eb211c80319c",
            "b7ad6b7169203331",
        ),
    ];
    let mut sessions = BTreeMap::new();
    for (harness, protocol, trace, parent) in runs {
        let out = stage(port, harness, protocol, &format!("00-{trace}-{parent}-01"));
        let stdout = text(&out.stdout);
        assert!(stdout.contains(&format!("trace {trace}")), "{stdout}");
        let session = stdout
            .split("session ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned();
        sessions.insert(trace, (session, parent));
    }
    stop(server);

    let spans = collector.spans();
    let by_id: BTreeMap<Vec<u8>, &Span> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    let documented = documented_attributes();
    for span in &spans {
        for key in attributes(&span.attributes).keys() {
            assert!(
                documented.contains(key),
                "span {:?} carries {key}, which docs/operations/tracing.md does not list",
                span.name
            );
        }
    }
    let requests: Vec<&Span> = spans
        .iter()
        .filter(|s| s.kind == SpanKind::Server as i32)
        .collect();
    for (trace, (session, parent)) in &sessions {
        let ours: Vec<&&Span> = requests
            .iter()
            .filter(|s| hex(&s.trace_id) == *trace)
            .collect();
        let tools: BTreeSet<&str> = ours
            .iter()
            .filter_map(|s| string(attributes(&s.attributes).get("gen_ai.tool.name")).map(|_| s))
            .map(|s| s.name.as_str())
            .collect();
        for tool in [
            "tools/call rimthan.start_workflow",
            "tools/call rimthan.prepare_step_validation",
            "tools/call rimthan.submit_step_reports",
        ] {
            assert!(tools.contains(tool), "{trace}: no {tool} span in {tools:?}");
        }
        for method in ["tools/list", "resources/read"] {
            assert!(
                ours.iter().any(|s| s.name == method),
                "{trace}: no {method} span"
            );
        }
        for span in &ours {
            assert_eq!(
                hex(&span.parent_span_id),
                *parent,
                "{}: not under the caller's span",
                span.name
            );
            let attrs = attributes(&span.attributes);
            for key in [
                "mcp.method.name",
                "mcp.protocol.version",
                "jsonrpc.request.id",
                "network.transport",
            ] {
                assert!(attrs.contains_key(key), "{}: no {key}", span.name);
            }
            if span.name.starts_with("tools/call") {
                assert_eq!(
                    string(attrs.get("rimthan.session.id")),
                    Some(session.as_str()),
                    "{}",
                    span.name
                );
                assert_eq!(
                    string(attrs.get("gen_ai.operation.name")),
                    Some("execute_tool")
                );
            }
        }
        let children: Vec<&Span> = spans
            .iter()
            .filter(|s| {
                hex(&s.trace_id) == *trace
                    && by_id
                        .get(&s.parent_span_id)
                        .is_some_and(|p| p.kind == SpanKind::Server as i32)
            })
            .collect();
        let checks: Vec<&&Span> = children.iter().filter(|s| s.name == "check").collect();
        assert!(!checks.is_empty(), "{trace}: no check span");
        for check in checks {
            let attrs = attributes(&check.attributes);
            assert!(string(attrs.get("rimthan.check.id")).is_some());
            assert!(matches!(
                string(attrs.get("rimthan.check.verdict")),
                Some("pass" | "fail")
            ));
            assert!(
                matches!(attrs.get("rimthan.check.bytes_read"), Some(Value::IntValue(n)) if *n > 0),
                "{attrs:?}"
            );
            assert_eq!(
                by_id[&check.parent_span_id].name,
                "tools/call rimthan.prepare_step_validation"
            );
        }
        let stored: Vec<&&Span> = children
            .iter()
            .filter(|s| s.name == "update_session")
            .collect();
        assert!(!stored.is_empty(), "{trace}: no store transaction span");
        for span in stored {
            assert_eq!(
                string(attributes(&span.attributes).get("db.system.name")),
                Some("sqlite")
            );
            assert_eq!(span.kind, SpanKind::Client as i32);
        }
        assert!(
            ours.iter()
                .any(|s| s.events.iter().any(|e| e.name == "session.transition")),
            "{trace}: no transition event"
        );
    }
    let received = collector.received.lock().unwrap();
    let metrics: BTreeSet<&str> = received
        .metrics
        .iter()
        .flat_map(|m| &m.resource_metrics)
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .map(|m| m.name.as_str())
        .collect();
    assert!(
        metrics.contains("mcp.server.operation.duration"),
        "{metrics:?}"
    );
    let service = received
        .traces
        .iter()
        .flat_map(|t| &t.resource_spans)
        .filter_map(|r| r.resource.as_ref())
        .map(|r| string(attributes(&r.attributes).get("service.name")).map(str::to_owned))
        .next()
        .flatten();
    assert_eq!(service.as_deref(), Some("rimthan"));
}

#[test]
fn nothing_is_exported_when_export_is_off() {
    let collector = Collector::start(Collecting::Answer);
    let dir = tempfile::tempdir().unwrap();
    // The endpoint is named, and the SDK's switch turns export off all the same.
    let (server, port) = serve(dir.path(), |serve| {
        serve
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
            .env("OTEL_SDK_DISABLED", "true");
    });
    stage(port, "codex", "2026-07-28", A_TRACEPARENT);
    stop(server);
    assert_eq!(collector.received.lock().unwrap().requests, 0);
}

#[test]
fn the_environment_alone_turns_export_on() {
    let collector = Collector::start(Collecting::Answer);
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = serve(dir.path(), |serve| {
        serve.env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url);
    });
    stage(port, "codex", "2026-07-28", A_TRACEPARENT);
    stop(server);
    assert!(
        collector
            .spans()
            .iter()
            .any(|s| s.name == "tools/call rimthan.start_workflow")
    );
}

/// The server's `/metrics` page.
fn metrics_page(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn a_collector_that_never_answers_fails_no_call_and_what_is_dropped_is_counted() {
    let collector = Collector::start(Collecting::Hang);
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = serve(dir.path(), |serve| {
        serve
            .args(["--otlp-endpoint", &collector.url])
            .env("OTEL_BSP_MAX_QUEUE_SIZE", "4")
            .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
            .env("OTEL_BSP_SCHEDULE_DELAY", "10");
    });
    // The first batch waits on the collector; the queue fills behind it, and the session goes on.
    for _ in 0..2 {
        stage(port, "codex", "2026-07-28", A_TRACEPARENT);
    }
    let page = metrics_page(port);
    let dropped: u64 = page
        .lines()
        .find_map(|l| l.strip_prefix("rimthan_otlp_spans_dropped_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no dropped-spans counter in\n{page}"));
    assert!(dropped > 0, "{page}");
    assert!(page.contains("mcp_server_operation_duration_seconds_bucket{"));
}

#[test]
fn an_endpoint_that_is_not_a_url_or_a_protocol_other_than_http_protobuf_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("db.sqlite").display());
    let serve = |extra: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(BIN);
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                &database,
            ])
            .args(extra)
            .envs(env.iter().copied());
        command.output().unwrap()
    };
    let out = serve(&["--otlp-endpoint", "127.0.0.1:4318"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not an http:// or https:// URL"),
        "{}",
        text(&out.stderr)
    );
    let out = serve(
        &["--otlp-endpoint", "http://127.0.0.1:4317"],
        &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\""),
        "{}",
        text(&out.stderr)
    );
}

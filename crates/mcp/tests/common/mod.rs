//! Test support: servers on memory SQLite, clients of both protocol revisions over an
//! in-process duplex or real loopback HTTP, and a harness that drives a session with tool calls.

#![allow(dead_code, unreachable_pub)]

use std::{net::SocketAddr, sync::Arc};

use rimthan_engine::{Engine, Releases};
use rimthan_mcp::{
    Profile, RimthanServer,
    http::{self, HttpConfig},
};
use rimthan_registry::{
    Harness, Sha256Digest, VerifiedRegistry, VerifiedRelease, example_or_instance, verify_embedded,
};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub type Client = RunningService<RoleClient, ()>;

pub async fn server_on(registry: VerifiedRegistry, profile: Profile) -> RimthanServer {
    let store = Arc::new(
        rimthan_engine::store::SqliteStore::open("sqlite::memory:")
            .await
            .unwrap(),
    );
    let releases = Arc::new(Releases::new(registry, "stable".parse().unwrap()));
    RimthanServer::new(
        Arc::new(Engine::new(releases, store, None).await.unwrap()),
        profile,
    )
}

pub async fn server(profile: Profile) -> RimthanServer {
    server_on(verify_embedded().unwrap(), profile).await
}

/// A 2025-11-25 client (initialize handshake) over an in-process duplex.
pub async fn duplex_client(server: RimthanServer) -> Client {
    let (s, c) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(s).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(c).await.unwrap()
}

pub use rimthan_testkit::fs::copy_dir;

/// A server on a free loopback port, stopped when dropped.
pub struct HttpServer {
    pub addr: SocketAddr,
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    /// The serve task: ends once shutdown is complete.
    pub served: Option<tokio::task::JoinHandle<()>>,
}

impl HttpServer {
    /// Asks the server to shut down and returns the serve task, to await its end.
    pub fn shut_down(&mut self) -> tokio::task::JoinHandle<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.served.take().expect("not yet shut down")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn http_server(server: RimthanServer) -> HttpServer {
    http_server_with(server, |_| {}).await
}

/// A server with its loopback configuration changed by `configure`.
pub async fn http_server_with(
    server: RimthanServer,
    configure: impl FnOnce(&mut HttpConfig),
) -> HttpServer {
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = HttpConfig::loopback(addr);
    configure(&mut config);
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        http::serve(listener, server, &config, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    HttpServer {
        addr,
        url: format!("http://{addr}/mcp"),
        stop: Some(stop),
        served: Some(served),
    }
}

/// Sets `config` to authenticate `/mcp` and `/admin` with the tokens of `file`, facilitators
/// opening the view by theirs.
pub fn facilitators_from(file: &std::path::Path, config: &mut HttpConfig) {
    let auth = std::sync::Arc::new(rimthan_mcp::auth::Auth {
        verifier: rimthan_mcp::auth::Verifier::tokens_from_file(file).unwrap(),
        resource: format!("http://{}/mcp", config.listen),
        authorization_servers: vec![],
        scope: "rimthan:workflow".into(),
        throttle: Default::default(),
    });
    config.admin = Some(rimthan_mcp::admin::Access::Facilitators(auth.clone()));
    config.auth = Some(auth);
}

/// A 2025-11-25 client over HTTP (initialize, `Mcp-Session-Id`).
pub async fn legacy_http_client(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
        .unwrap()
}

/// A 2026-07-28 client over HTTP (`server/discover`, no session).
pub async fn modern_http_client(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    ().serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap()
}

pub async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let params =
        CallToolRequestParams::new(tool.to_owned()).with_arguments(rmcp::model::object(arguments));
    client.call_tool(params).await.unwrap()
}

/// The structured content of a result, checked against its text mirror.
pub fn structured(result: &CallToolResult) -> Value {
    let value = result
        .structured_content
        .clone()
        .expect("structured content");
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .expect("text mirror");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        value,
        "text mirrors structured content"
    );
    value
}

/// The content a harness writes for `output` of `step`: the author's example from the release
/// (the step's inlined example, or the output schema's `examples`).
pub fn example(release: &VerifiedRelease, workflow: &str, step: &str, output: &str) -> Vec<u8> {
    let workflow = release.latest_workflow(&workflow.parse().unwrap()).unwrap();
    let decl = workflow
        .step(step)
        .unwrap()
        .doc()
        .outputs
        .iter()
        .find(|o| o.artifact_id.as_str() == output)
        .unwrap();
    if let Some(text) = &decl.example {
        return text.clone().into_bytes();
    }
    let schema = decl
        .schema
        .as_ref()
        .expect("an output without example has a schema");
    let schema = release.schema(&schema.id, &schema.version).unwrap();
    serde_json::to_vec_pretty(&example_or_instance(schema.value()).expect("an example")).unwrap()
}

/// The worked example of whichever step of `workflow` writes `artifact`.
pub fn example_of_artifact(release: &VerifiedRelease, workflow: &str, artifact: &str) -> Vec<u8> {
    let pinned = release.latest_workflow(&workflow.parse().unwrap()).unwrap();
    let step = pinned
        .steps()
        .iter()
        .find(|s| {
            s.doc()
                .outputs
                .iter()
                .any(|o| o.artifact_id.as_str() == artifact)
        })
        .expect("a step writes the artifact");
    example(release, workflow, step.doc().id.as_str(), artifact)
}

/// The stable release of the embedded registry.
pub fn shipped() -> Arc<VerifiedRelease> {
    // Verified once: every session a test drives asks for it.
    static SHIPPED: std::sync::OnceLock<Arc<VerifiedRelease>> = std::sync::OnceLock::new();
    SHIPPED
        .get_or_init(|| {
            verify_embedded()
                .unwrap()
                .channel(&"stable".parse().unwrap())
                .unwrap()
                .clone()
        })
        .clone()
}

/// Every shipped workflow with each harness it pins.
pub fn shipped_workflows() -> Vec<(String, Vec<String>)> {
    shipped()
        .workflows()
        .map(|w| {
            let harnesses = w.doc().harnesses.keys().map(|h| h.to_string()).collect();
            (w.doc().id.to_string(), harnesses)
        })
        .collect()
}

/// Start arguments for a shipped workflow: the adapter it pins for `harness`, every host
/// capability and the validator capabilities its validators use.
pub fn start_arguments_for(workflow: &str, harness: &str) -> Value {
    let release = shipped();
    let wf = release.latest_workflow(&workflow.parse().unwrap()).unwrap();
    let pin = &wf.doc().harnesses[&harness.parse::<Harness>().unwrap()];
    let validator_capabilities: std::collections::BTreeSet<_> = wf
        .steps()
        .iter()
        .flat_map(|s| s.doc().validators.iter())
        .flat_map(|v| {
            release
                .validator(&v.id, &v.version)
                .unwrap()
                .doc()
                .capabilities
                .clone()
        })
        .collect();
    json!({
        "workflow_id": workflow,
        "host": {
            "harness": harness,
            "adapter": {"id": pin.id, "version": pin.version},
            "capabilities": ["mcp.tools", "mcp.resources", "mcp.prompts", "native-subagents",
                             "scoped-inputs", "read-only-capabilities", "structured-reports",
                             "project-local-assets"],
            "validator_capabilities": validator_capabilities,
        }
    })
}

/// Start arguments for a research-study session as `harness`.
pub fn start_arguments(harness: &str) -> Value {
    start_arguments_for("research-study", harness)
}

/// Drives a whole research-study session with tool calls alone; returns the final payload.
pub async fn run_session(client: &Client, harness: &str) -> Value {
    run_session_across(&[client], harness).await
}

/// The same, spreading the calls round-robin over several clients (replicas).
pub async fn run_session_across(clients: &[&Client], harness: &str) -> Value {
    run_workflow_across(clients, None, "research-study", harness).await
}

/// Drives a whole session of a shipped workflow as `harness`, with the release's own examples
/// as outputs and reports that carry what each validator's report schema adds. Where a step
/// waits for sign-off, facilitators decide on `engine` (the one the server runs), as people
/// would in the facilitator's view, and the harness reads the step that follows.
pub async fn run_workflow(
    client: &Client,
    engine: &Engine,
    workflow: &str,
    harness: &str,
) -> Value {
    run_workflow_across(&[client], Some(engine), workflow, harness).await
}

async fn run_workflow_across(
    clients: &[&Client],
    approvers: Option<&Engine>,
    workflow: &str,
    harness: &str,
) -> Value {
    let release = shipped();
    let turn = std::sync::atomic::AtomicUsize::new(0);
    let next = || clients[turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % clients.len()];
    let start = start_arguments_for(workflow, harness);
    let mut payload = structured(&call(next(), rimthan_mcp::START, start.clone()).await);
    assert_eq!(payload["status"], "active", "{payload}");
    while payload["status"] != "completed" {
        if payload["status"] == "awaiting_approval" {
            let engine = approvers.expect("a step waits for sign-off, and nobody may decide");
            let session = payload["session_id"].as_str().unwrap().parse().unwrap();
            rimthan_testkit::engine::sign_off(engine, &session).await;
            let read = json!({"checkpoint": payload["checkpoint"]});
            payload = structured(&call(next(), rimthan_mcp::ACTIVE_STEP, read).await);
            assert_ne!(payload["status"], "awaiting_approval", "{payload}");
            continue;
        }
        payload = complete_step(&[next(), next()], &release, workflow, &start, payload).await;
    }
    payload
}

/// Starts a session of a shipped workflow as `harness` and completes its setup step; returns
/// the start arguments and the payload of the first work step.
pub async fn session_at_first_work_step(
    client: &Client,
    workflow: &str,
    harness: &str,
) -> (Value, Value) {
    let start = start_arguments_for(workflow, harness);
    let payload = structured(&call(client, rimthan_mcp::START, start.clone()).await);
    assert_eq!(payload["status"], "active", "{payload}");
    let payload = complete_step(&[client, client], &shipped(), workflow, &start, payload).await;
    (start, payload)
}

/// Prepares and submits the active step of `payload` (with `clients[0]`, then `clients[1]`),
/// the way a well-behaved harness does; returns the next payload.
async fn complete_step(
    clients: &[&Client; 2],
    release: &VerifiedRelease,
    workflow: &str,
    start: &Value,
    payload: Value,
) -> Value {
    let plan = prepare_active_step(clients[0], release, workflow, start, &payload).await;
    submit_passing_reports(clients[1], release, &payload, &plan).await
}

/// Prepares the active step of `payload` with the release's examples as outputs; returns the
/// validation plan.
pub async fn prepare_active_step(
    client: &Client,
    release: &VerifiedRelease,
    workflow: &str,
    start: &Value,
    payload: &Value,
) -> Value {
    let harness = start["host"]["harness"].as_str().unwrap();
    let step = payload["step"].clone();
    let id = step["id"].as_str().unwrap().to_owned();
    let mut prepare = json!({"checkpoint": payload["checkpoint"], "step_id": id});
    if id == "setup-workspace" {
        let deliveries: Vec<Value> = payload["host_assets"].as_array().unwrap().iter().map(|a| {
            let local = a.get("project_local_path").cloned();
            let mut d = json!({"kind": a["kind"], "id": a["id"], "version": a["version"], "sha256": a["sha256"],
                "delivery_mode": if local.is_some() { "project-local" } else { "dynamic-context" }});
            if let Some(path) = local { d["path"] = path; }
            d
        }).collect();
        prepare["host_attestation"] = json!({"harness": harness, "adapter": start["host"]["adapter"],
            "capabilities": start["host"]["capabilities"], "validator_capabilities": start["host"]["validator_capabilities"],
            "deliveries": deliveries});
    } else {
        let artifacts: Vec<Value> = step["outputs"].as_array().unwrap().iter().map(|o| {
            let bytes = example(release, workflow, &id, o["artifact_id"].as_str().unwrap());
            let mut a = json!({"artifact_id": o["artifact_id"], "path": o["path"], "owner_step": o["owner_step"],
                "media_type": o["media_type"], "bytes": bytes.len(), "sha256": Sha256Digest::of(&bytes).to_string(),
                "symlink_free": true, "read_back": true, "write_policy": o["write_policy"]});
            if !o["schema"].is_null() {
                a["schema_sha256"] = o["schema"]["sha256"].clone();
                a["content"] = serde_json::from_slice(&bytes).unwrap();
            }
            if o["send_text"] == true {
                a["text"] = json!(String::from_utf8(bytes).unwrap());
            }
            a
        }).collect();
        // The earlier outputs a deterministic check reads, as the earlier steps wrote them.
        let inputs: Vec<Value> = step["inputs"].as_array().unwrap().iter()
            .filter(|i| i["send_text"] == true)
            .map(|i| {
                let artifact = i["artifact_id"].as_str().unwrap();
                let bytes = example_of_artifact(release, workflow, artifact);
                json!({"artifact_id": artifact, "path": i["path"], "text": String::from_utf8(bytes).unwrap()})
            }).collect();
        prepare["output_attestation"] = json!({"artifacts": artifacts, "inputs": inputs});
    }
    let plan = structured(&call(client, rimthan_mcp::PREPARE, prepare).await);
    assert_eq!(plan["status"], "ready", "{plan}");
    plan
}

/// Submits a passing report per validator of `plan`, with what each report schema adds;
/// returns the next payload.
pub async fn submit_passing_reports(
    client: &Client,
    release: &VerifiedRelease,
    payload: &Value,
    plan: &Value,
) -> Value {
    let reports: Vec<Value> = plan["validators"].as_array().unwrap().iter().map(|v| {
        let schema = release
            .schema(&v["report_schema"]["id"].as_str().unwrap().parse().unwrap(),
                    &v["report_schema"]["version"].as_str().unwrap().parse().unwrap())
            .unwrap();
        let mut report = example_or_instance(schema.value()).unwrap();
        for (field, value) in json!({
            "validator_id": v["id"], "validator_version": v["version"], "verdict": "pass",
            "summary": "Checked the declared inputs.", "findings": [],
            "inputs_read": v["inputs"].as_array().unwrap().iter().map(|i| i["path"].clone()).collect::<Vec<_>>(),
            "capabilities_used": v["capabilities"],
        }).as_object().unwrap() {
            report[field] = value.clone();
        }
        report
    }).collect();
    let submit = json!({"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports});
    let result = call(client, rimthan_mcp::SUBMIT, submit).await;
    assert_ne!(result.is_error, Some(true));
    structured(&result)
}

/// Sends raw HTTP/1.1 and returns the status code (for header checks no client would make).
pub async fn raw_status(addr: SocketAddr, request: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // The server may answer (413, say) and close before the whole request is written.
    let request = request.to_owned();
    tokio::spawn(async move {
        let _ = writer.write_all(request.as_bytes()).await;
        writer.forget();
    });
    let mut buf = vec![0u8; 64];
    let n = reader.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

/// One raw HTTP `resources/read` request on `version` (`2025-11-25` or `2026-07-28`), with the
/// headers and `_meta` that revision requires.
pub fn read_request(version: &str, uri: &str, id: Value) -> String {
    let mut params = serde_json::json!({ "uri": uri });
    let mut headers = String::new();
    if version >= "2026-07-28" {
        headers = format!("Mcp-Method: resources/read\r\nMcp-Name: {uri}\r\n");
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": params})
        .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {version}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Sends [`read_request`] over raw HTTP (no client-side cache in between); returns the status
/// and the JSON answer.
pub async fn raw_read(addr: SocketAddr, version: &str, uri: &str, id: Value) -> (u16, Value) {
    let (status, body) = raw_exchange(addr, read_request(version, uri, id).as_bytes()).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Sends raw request bytes (with `Connection: close`) and returns the status and body.
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> (u16, Vec<u8>) {
    let (head, body) = raw_answer(addr, request).await;
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body)
}

/// Sends raw request bytes (with `Connection: close`) and returns the answer's head (status
/// line and headers) and body.
pub async fn raw_answer(addr: SocketAddr, request: &[u8]) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    (head, answer[split + 4..].to_vec())
}

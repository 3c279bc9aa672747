//! Production operation: replicas on one PostgreSQL database, live channel promotion under
//! load, reloading past a folder that holds a named pipe, and the Prometheus metrics page.

use std::{sync::Arc, time::Duration};

use rimthan_engine::{Engine, Releases, store::PostgresStore};
use rimthan_mcp::{
    Profile, RimthanServer,
    http::{self, HttpConfig},
    reload::Reloader,
};
use rimthan_registry::{
    RegistryFiles, SigningKey, build_release, external_policy, publish, set_channel,
    verify_embedded, verify_registry,
};
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

use crate::common::*;

/// A replica: its own engine and store pool on the shared database, served on its own port.
struct Replica {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

async fn replica(database: &str, schema: &str, secret: &[u8]) -> Replica {
    let store = Arc::new(
        PostgresStore::connect_in_schema(database, schema)
            .await
            .unwrap(),
    );
    let releases = Arc::new(Releases::new(
        verify_embedded().unwrap(),
        "stable".parse().unwrap(),
    ));
    let engine = Engine::new(releases, store, Some(secret.to_vec()))
        .await
        .unwrap();
    let server = RimthanServer::new(Arc::new(engine), Profile::WorkflowEngine);
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = HttpConfig::loopback(addr);
    let task = tokio::spawn(async move {
        let _ = http::serve(listener, server, &config, std::future::pending()).await;
    });
    Replica {
        url: format!("http://{addr}/mcp"),
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_one_postgres_database_serve_any_call() {
    let Ok(database) = std::env::var("RIMTHAN_TEST_DATABASE_URL") else {
        eprintln!("RIMTHAN_TEST_DATABASE_URL is not set: skipping the replica test");
        return;
    };
    let schema = format!("t_{}", rimthan_engine::SessionId::generate());
    let secret = [3u8; 32];
    // Three replicas migrate the same schema at once: the migration lock makes that safe.
    let (a, b, c) = tokio::join!(
        replica(&database, &schema, &secret),
        replica(&database, &schema, &secret),
        replica(&database, &schema, &secret)
    );
    let replicas = [a, b, c];
    let mut clients = Vec::new();
    for (i, r) in replicas.iter().enumerate() {
        // Mix the revisions: the 2025-11-25 session header is never needed to continue.
        clients.push(if i % 2 == 0 {
            modern_http_client(&r.url).await
        } else {
            legacy_http_client(&r.url).await
        });
    }
    let all: Vec<&Client> = clients.iter().collect();
    for harness in ["codex", "claude-code"] {
        assert_eq!(
            run_session_across(&all, harness).await["status"],
            "completed"
        );
    }

    // Racing the same submission on every replica advances exactly once.
    let payload = structured(&call(all[0], rimthan_mcp::START, start_arguments("codex")).await);
    let deliveries: Vec<_> = payload["host_assets"].as_array().unwrap().iter().map(|a| {
        let mut d = json!({"kind": a["kind"], "id": a["id"], "version": a["version"], "sha256": a["sha256"], "delivery_mode": "dynamic-context"});
        if let Some(p) = a.get("project_local_path") { d["delivery_mode"] = json!("project-local"); d["path"] = p.clone(); }
        d
    }).collect();
    let start = start_arguments("codex");
    let prepare = json!({"checkpoint": payload["checkpoint"], "step_id": "setup-workspace", "host_attestation": {
        "harness": "codex", "adapter": start["host"]["adapter"], "capabilities": start["host"]["capabilities"],
        "validator_capabilities": start["host"]["validator_capabilities"], "deliveries": deliveries}});
    let plan = structured(&call(all[1], rimthan_mcp::PREPARE, prepare).await);
    let submit = json!({"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": []});
    let (r0, r1, r2) = tokio::join!(
        call(all[0], rimthan_mcp::SUBMIT, submit.clone()),
        call(all[1], rimthan_mcp::SUBMIT, submit.clone()),
        call(all[2], rimthan_mcp::SUBMIT, submit.clone())
    );
    // Identical requests are one change: every replica answers with the one new checkpoint.
    let answers: Vec<_> = [r0, r1, r2].iter().map(structured).collect();
    assert!(
        answers.iter().all(|a| a["status"] == "active"),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .all(|a| a["checkpoint"] == answers[0]["checkpoint"])
    );
    assert_ne!(answers[0]["checkpoint"], payload["checkpoint"]);
    // A different request on the old checkpoint is stale everywhere.
    let mut other = submit.clone();
    other["validation_id"] = json!("another-plan");
    for client in &all {
        let stale = structured(&call(client, rimthan_mcp::SUBMIT, other.clone()).await);
        assert_eq!(stale["failures"][0]["code"], "stale_checkpoint", "{stale}");
    }

    // One replica dies mid-session; the others continue from the last acknowledged checkpoint.
    let session =
        structured(&call(all[0], rimthan_mcp::START, start_arguments("claude-code")).await);
    replicas[0].task.abort();
    let resumed = structured(
        &call(
            all[2],
            rimthan_mcp::ACTIVE_STEP,
            json!({"checkpoint": session["checkpoint"]}),
        )
        .await,
    );
    assert_eq!(resumed["session_id"], session["session_id"]);
    assert_eq!(
        run_session_across(&all[1..], "buzz").await["status"],
        "completed"
    );
    for r in &replicas {
        r.task.abort();
    }
}

fn build_registry(dir: &std::path::Path, key: &SigningKey, releases: &[&str], stable: &str) {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source");
    for release in releases {
        publish(
            dir,
            &build_release(&source, &release.parse().unwrap(), key).unwrap(),
        )
        .unwrap();
    }
    set_channel(dir, &"stable".parse().unwrap(), &stable.parse().unwrap()).unwrap();
}

/// A server over a fresh registry folder of releases 2027.01.0 and 2027.02.0, `stable` on the
/// first; the folder lives as long as the returned guard.
async fn two_release_server() -> (tempfile::TempDir, RimthanServer, HttpServer) {
    let (dir, _, server, http) = two_release_server_and_key().await;
    (dir, server, http)
}

async fn two_release_server_and_key() -> (tempfile::TempDir, SigningKey, RimthanServer, HttpServer)
{
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    build_registry(dir.path(), &key, &["2027.01.0", "2027.02.0"], "2027.01.0");
    let registry = verify_registry(
        &RegistryFiles::from_dir(dir.path()).unwrap(),
        &external_policy(),
    )
    .unwrap();
    let server = server_on(registry, Profile::WorkflowEngine).await;
    let http = http_server(server.clone()).await;
    (dir, key, server, http)
}

/// The first Markdown file under `dir`, depth first in name order.
fn first_markdown(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    entries.into_iter().find_map(|path| {
        if path.is_dir() {
            first_markdown(&path)
        } else {
            (path.extension().is_some_and(|e| e == "md")).then_some(path)
        }
    })
}

#[tokio::test]
async fn a_release_rewritten_in_place_is_refused_and_the_verified_copy_kept() {
    let (dir, key, server, http) = two_release_server_and_key().await;
    let client = modern_http_client(&http.url).await;
    let pinned = structured(&call(&client, rimthan_mcp::START, start_arguments("codex")).await);
    assert_eq!(pinned["release"], "2027.01.0");

    // The same release id, rebuilt from edited source and signed with the registry's key.
    let source = tempfile::tempdir().unwrap();
    copy_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source"),
        source.path(),
    );
    let edited = first_markdown(&source.path().join("workflows")).unwrap();
    let mut text = std::fs::read_to_string(&edited).unwrap();
    text.push_str("\nA sentence added after release.\n");
    std::fs::write(&edited, text).unwrap();
    let rebuilt = tempfile::tempdir().unwrap();
    publish(
        rebuilt.path(),
        &build_release(source.path(), &"2027.01.0".parse().unwrap(), &key).unwrap(),
    )
    .unwrap();
    let release_dir = dir.path().join("releases/2027.01.0");
    std::fs::remove_dir_all(&release_dir).unwrap();
    copy_dir(&rebuilt.path().join("releases/2027.01.0"), &release_dir);

    let before = server.engine().releases().snapshot();
    let refused = Reloader::new(dir.path().to_owned(), server.clone())
        .reload(true)
        .unwrap_err();
    assert!(
        matches!(
            refused,
            rimthan_mcp::reload::ReloadError::ReleaseRewritten { .. }
        ),
        "{refused}"
    );
    assert!(Arc::ptr_eq(&before, &server.engine().releases().snapshot()));
    let metrics = server.render_metrics(0).await;
    assert!(
        metrics.contains("rimthan_registry_release_rewrites_total 1"),
        "{metrics}"
    );
    // The pinned session goes on against the verified copy.
    let active = structured(
        &call(
            &client,
            rimthan_mcp::ACTIVE_STEP,
            json!({"checkpoint": pinned["checkpoint"]}),
        )
        .await,
    );
    assert_eq!(active["status"], "active");
    assert_eq!(active["release"], "2027.01.0");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotion_under_load_fails_no_call_and_keeps_sessions_pinned() {
    let (dir, server, http) = two_release_server().await;
    let client = modern_http_client(&http.url).await;
    let pinned = structured(&call(&client, rimthan_mcp::START, start_arguments("codex")).await);
    assert_eq!(pinned["release"], "2027.01.0");

    let mover = {
        let (dir, server) = (dir.path().to_owned(), server.clone());
        tokio::spawn(async move {
            let mut reloader = Reloader::new(dir.clone(), server);
            for i in 0..20 {
                let target = if i % 2 == 0 { "2027.02.0" } else { "2027.01.0" };
                set_channel(&dir, &"stable".parse().unwrap(), &target.parse().unwrap()).unwrap();
                reloader.reload(true).unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut calls = 0;
    while !mover.is_finished() {
        let listed = client.list_resources(None).await.unwrap();
        assert!(!listed.resources.is_empty());
        client
            .read_resource(ReadResourceRequestParams::new(
                "rimthan://registry/2027.01.0/manifest",
            ))
            .await
            .unwrap();
        let active = structured(
            &call(
                &client,
                rimthan_mcp::ACTIVE_STEP,
                json!({"checkpoint": pinned["checkpoint"]}),
            )
            .await,
        );
        assert_eq!(active["release"], "2027.01.0", "the session stays pinned");
        calls += 3;
    }
    mover.await.unwrap();
    assert!(calls > 0);
    // A session started on the old release completes on it after the moves.
    let done = run_session(&client, "claude-code").await;
    assert_eq!(done["status"], "completed");

    // A channel pointing at an unverifiable release is refused; the previous registry stays.
    let before = server.engine().releases().snapshot();
    let manifest = dir.path().join("releases/2027.02.0/manifest.json");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.push(b' ');
    std::fs::write(&manifest, bytes).unwrap();
    let mut reloader = Reloader::new(dir.path().to_owned(), server.clone());
    assert!(reloader.reload(true).is_err());
    assert!(Arc::ptr_eq(&before, &server.engine().releases().snapshot()));
    assert!(
        server
            .render_metrics(0)
            .await
            .contains("rimthan_registry_reload_failures_total 1")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_channel_move_changes_what_a_repeated_read_returns() {
    let (dir, server, http) = two_release_server().await;
    let channels = async || {
        let uri = "rimthan://registry/2027.02.0/summary";
        let (status, answer) = raw_read(http.addr, "2026-07-28", uri, json!(1)).await;
        assert_eq!(status, 200, "{answer}");
        let text = answer["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["channels"].clone()
    };
    assert_eq!(channels().await, json!([]));
    assert_eq!(channels().await, json!([]));
    set_channel(
        dir.path(),
        &"stable".parse().unwrap(),
        &"2027.02.0".parse().unwrap(),
    )
    .unwrap();
    Reloader::new(dir.path().to_owned(), server)
        .reload(true)
        .unwrap();
    assert_eq!(channels().await, json!(["stable"]));
}

#[tokio::test]
async fn a_channel_move_changes_what_a_repeated_list_names() {
    let (dir, server, http) = two_release_server().await;
    // Over raw HTTP: a client may keep a listing for its `ttl`, the server must not.
    let summaries = async || {
        let mut named = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let params = json!({"cursor": cursor});
            let body =
                json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": params})
                    .to_string();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let (status, answer) = raw_exchange(http.addr, request.as_bytes()).await;
            let answer: Value = serde_json::from_slice(&answer).unwrap();
            assert_eq!(status, 200, "{answer}");
            for resource in answer["result"]["resources"].as_array().unwrap() {
                let uri = resource["uri"].as_str().unwrap();
                if uri.ends_with("/summary") {
                    named.push(uri.to_owned());
                }
            }
            cursor = answer["result"]["nextCursor"].clone();
            if cursor.is_null() {
                return named;
            }
        }
    };
    let before = ["rimthan://registry/2027.01.0/summary"];
    assert_eq!(summaries().await, before);
    assert_eq!(summaries().await, before);
    set_channel(
        dir.path(),
        &"stable".parse().unwrap(),
        &"2027.02.0".parse().unwrap(),
    )
    .unwrap();
    Reloader::new(dir.path().to_owned(), server)
        .reload(true)
        .unwrap();
    assert_eq!(summaries().await, ["rimthan://registry/2027.02.0/summary"]);
}

/// The release the server's active channel serves.
fn active_release(server: &RimthanServer) -> String {
    let releases = server.engine().releases();
    let snapshot = releases.snapshot();
    releases.active(&snapshot).unwrap().id().to_string()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_pipe_in_the_registry_never_wedges_reloading() {
    let (dir, server, _http) = two_release_server().await;
    let fifo = dir.path().join("keys/pipe.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());

    // A reload refuses the pipe at once instead of waiting for a writer that never comes.
    let reload = {
        let (dir, server) = (dir.path().to_owned(), server.clone());
        tokio::task::spawn_blocking(move || Reloader::new(dir, server).reload(true))
    };
    let Ok(done) = tokio::time::timeout(Duration::from_secs(10), reload).await else {
        // Free the stuck reader so the runtime can shut down, then fail.
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
        panic!("a reload waited on a named pipe");
    };
    let refused = done.unwrap().unwrap_err().to_string();
    assert!(
        refused.contains("keys/pipe.json: is a named pipe"),
        "{refused}"
    );

    // The live reloader keeps refusing while the pipe is there, then picks up the promotion.
    let task = rimthan_mcp::reload::spawn(
        dir.path().to_owned(),
        server.clone(),
        Duration::from_millis(50),
    );
    set_channel(
        dir.path(),
        &"stable".parse().unwrap(),
        &"2027.02.0".parse().unwrap(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(active_release(&server), "2027.01.0");
    std::fs::remove_file(&fifo).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while active_release(&server) != "2027.02.0" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the promotion was never picked up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .is_ok(),
        "the reloader did not stop"
    );
}

#[tokio::test]
async fn metrics_are_valid_prometheus_text() {
    let server = server(Profile::WorkflowEngine).await;
    let http = http_server(server.clone()).await;
    let client = legacy_http_client(&http.url).await;
    run_session(&client, "codex").await;
    let mut blocked = start_arguments("codex");
    blocked["host"]["adapter"] = json!({"id": "legacy-generic", "version": "1.0.0"});
    call(&client, rimthan_mcp::START, blocked).await;
    client.cancel().await.unwrap();

    let page = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(http.addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        text.split_once("\r\n\r\n").unwrap().1.to_owned()
    };
    let mut samples = std::collections::BTreeMap::new();
    for line in page.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix('#') {
            assert!(
                rest.starts_with(" HELP ") || rest.starts_with(" TYPE ") || rest == " EOF",
                "{line}"
            );
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "{line}"
            );
        }
        samples.insert(series.to_owned(), value);
    }
    let get = |s: &str| {
        samples
            .get(s)
            .copied()
            .unwrap_or_else(|| panic!("{s} missing from\n{page}"))
    };
    assert_eq!(
        get(
            r#"rimthan_tool_calls_total{tool="rimthan.start_workflow",outcome="active",code="none"}"#
        ),
        1.0
    );
    assert_eq!(
        get(
            r#"rimthan_tool_calls_total{tool="rimthan.start_workflow",outcome="blocked",code="host_adapter_contract_unavailable"}"#
        ),
        1.0
    );
    assert_eq!(
        get(r#"rimthan_tool_call_duration_seconds_count{tool="rimthan.submit_step_reports"}"#),
        4.0
    );
    assert_eq!(get("rimthan_open_sessions"), 0.0);
    let embedded = rimthan_registry::verify_embedded().unwrap();
    let stable = embedded.channel(&"stable".parse().unwrap()).unwrap();
    assert_eq!(
        get(&format!(
            r#"rimthan_registry_release_info{{channel="stable",release="{}",manifest_sha256="{}"}}"#,
            stable.id(),
            stable.manifest_sha256()
        )),
        1.0
    );
    assert_eq!(get("rimthan_store_errors_total"), 0.0);
}

//! A load test's sessions send their own bytes (`StageConfig::vary`): each session's checks run
//! on texts no other session sent, and every session still completes; the same bytes sent again
//! are judged from the engine's kept verdicts.

use std::sync::Arc;

use rimthan_engine::{Engine, Releases};
use rimthan_mcp::{
    Profile, RimthanServer,
    http::{self, HttpConfig},
};
use rimthan_registry::Harness;
use rimthan_stage::{Protocol, StageConfig, Target};
use tokio::sync::oneshot;

/// The checks of one whole session of the workflow staged here.
const CHECKS_PER_SESSION: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varied_sessions_complete_and_each_sends_texts_no_other_sent() {
    let registry = rimthan_registry::verify_embedded().unwrap();
    let releases = Arc::new(Releases::new(registry, "stable".parse().unwrap()));
    let store = rimthan_testkit::engine::sqlite_memory().await;
    let engine = Arc::new(Engine::new(releases, store, None).await.unwrap());
    let server = RimthanServer::new(engine.clone(), Profile::WorkflowEngine);
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let config = HttpConfig::loopback(listener.local_addr().unwrap());
    let url = format!("http://{}/mcp", config.listen);
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        http::serve(listener, server, &config, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let projects = tempfile::tempdir().unwrap();
    let run = async |nonce: u16, name: &str| {
        let project = projects.path().join(name);
        let target = Target::Url {
            url: url.clone(),
            protocol: Protocol::V2026_07_28,
            token: None,
        };
        let mut config = StageConfig::new(Harness::Codex, target, project.clone());
        config.workflow = Some("research-study".parse().unwrap());
        config.vary = Some(nonce);
        let summary = rimthan_stage::run(&config, &mut |_, _, _| {})
            .await
            .unwrap();
        assert_eq!(summary.status, "completed", "session {name}");
        project
    };
    let first = run(0b1010_0000_0000_0101, "first").await;
    run(1, "second").await;
    assert_eq!(engine.checks_run(), 2 * CHECKS_PER_SESSION);
    assert_eq!(engine.verdict_cache().hits, 0);
    // The nonce is a last line of spaces and tabs, in binary, after the worked example.
    let findings = std::fs::read_to_string(first.join("research/findings.md")).unwrap();
    assert!(
        findings.ends_with("\n\t \t          \t \t\n"),
        "{findings:?}"
    );

    // The first session's bytes again: judged from the kept verdicts.
    run(0b1010_0000_0000_0101, "again").await;
    assert_eq!(engine.checks_run(), 2 * CHECKS_PER_SESSION);
    assert_eq!(engine.verdict_cache().hits, CHECKS_PER_SESSION);
    stop.send(()).unwrap();
    served.await.unwrap();
}

//! An unlucky network: 200 scripted sessions run through a fault-injecting proxy that drops
//! replies after the server answered, cuts requests mid-body and delays bytes. Retrying the
//! identical request the way `rimthan stage` does, every session ends `completed` (a session
//! waiting for sign-off is signed off and resumed through the same proxy), none is left open,
//! and the audit log holds each transition exactly once. On SQLite always, on PostgreSQL
//! when `RIMTHAN_TEST_DATABASE_URL` is set.

mod proxy;

use std::{
    collections::BTreeMap,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use rimthan_engine::{Engine, Operation, Outcome, Releases, SessionId, Store};
use rimthan_mcp::{
    Profile, RimthanServer,
    http::{self, HttpConfig},
};
use rimthan_registry::Harness;
use rimthan_stage::{Protocol, StageConfig, Target};
use tokio::sync::{Semaphore, oneshot};

const SESSIONS: usize = 200;
const CONCURRENT: usize = 8;
const PG_ENV: &str = "RIMTHAN_TEST_DATABASE_URL";

const FAULTS: proxy::Faults = proxy::Faults {
    drop_reply: 0.04,
    cut_request: 0.02,
    delay: 0.1,
    max_delay: Duration::from_millis(5),
};

async fn sessions_survive_an_unlucky_network(store: Arc<dyn Store>, seed: u64) {
    let registry = rimthan_registry::verify_embedded().unwrap();
    let releases = Arc::new(Releases::new(registry, "stable".parse().unwrap()));
    let engine = Arc::new(Engine::new(releases, store.clone(), None).await.unwrap());
    let server = RimthanServer::new(engine.clone(), Profile::WorkflowEngine);
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let config = HttpConfig::loopback(listener.local_addr().unwrap());
    let upstream = config.listen;
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        http::serve(listener, server, &config, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let proxy = proxy::start(upstream, FAULTS, seed).await;
    let url = format!("http://{}/mcp", proxy.addr);

    let projects = tempfile::tempdir().unwrap();
    let slots = Arc::new(Semaphore::new(CONCURRENT));
    let signed_off = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let runs: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let (slots, url, engine) = (slots.clone(), url.clone(), engine.clone());
            let signed_off = signed_off.clone();
            let project = projects.path().join(format!("p{i}"));
            tokio::spawn(async move {
                let _slot = slots.acquire().await.unwrap();
                let target = Target::Url {
                    url,
                    protocol: [Protocol::V2026_07_28, Protocol::V2025_11_25][i / 2 % 2],
                    token: None,
                };
                let harness = [Harness::Codex, Harness::ClaudeCode][i % 2];
                let mut config = StageConfig::new(harness, target, project);
                config.workflow = Some(
                    ["research-study", "schema-migration"][i / 4 % 2]
                        .parse()
                        .unwrap(),
                );
                let mut summary = rimthan_stage::run(&config, &mut |_, _, _| {}).await?;
                // A step that waits for sign-off: a facilitator decides, and the harness
                // resumes through the same unlucky network.
                if summary.status == "awaiting_approval" {
                    let session = summary.session_id.parse().unwrap();
                    rimthan_testkit::engine::sign_off(&engine, &session).await;
                    config.resume = true;
                    let resumed = rimthan_stage::run(&config, &mut |_, _, _| {}).await?;
                    summary.steps.extend(resumed.steps);
                    summary.status = resumed.status;
                    signed_off.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, rimthan_stage::StageError>(summary)
            })
        })
        .collect();
    let mut steps = BTreeMap::new();
    let mut retried_calls = 0;
    for (i, run) in runs.into_iter().enumerate() {
        let summary = run
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("session {i} (seed {seed}): {e}"));
        assert_eq!(summary.status, "completed", "session {i}");
        assert!(
            summary
                .calls
                .iter()
                .any(|c| c.method == rimthan_mcp::SUBMIT),
            "session {i}: the run's requests are recorded"
        );
        retried_calls += summary.calls.iter().filter(|c| c.attempts > 1).count();
        steps.insert(
            summary.session_id.parse::<SessionId>().unwrap(),
            summary.steps.len(),
        );
    }
    let counts = &proxy.counts;
    let (dropped, cut) = (
        counts.dropped_replies.load(Ordering::Relaxed),
        counts.cut_requests.load(Ordering::Relaxed),
    );
    assert!(dropped >= 50 && cut >= 20, "too few faults: {counts:?}");

    assert_eq!(
        store.open_sessions().await.unwrap(),
        0,
        "a session was stranded"
    );
    let mut replayed = 0;
    for (session, steps) in &steps {
        let log = store.audit_log(session).await.unwrap();
        let count = |tool: Operation, outcomes: &[Outcome]| {
            log.iter()
                .filter(|e| e.tool == tool && outcomes.contains(&e.outcome))
                .count()
        };
        assert_eq!(
            count(Operation::StartWorkflow, &[Outcome::Active]),
            1,
            "{session}"
        );
        assert_eq!(
            count(Operation::PrepareStepValidation, &[Outcome::Ready]),
            *steps,
            "{session}"
        );
        assert_eq!(
            count(
                Operation::SubmitStepReports,
                &[
                    Outcome::Active,
                    Outcome::Revise,
                    Outcome::AwaitingApproval,
                    Outcome::Completed
                ]
            ),
            *steps,
            "{session}: a transition is missing or doubled"
        );
        replayed += log
            .iter()
            .filter(|e| e.outcome == Outcome::Replayed)
            .count();
    }
    assert!(replayed > 0, "no lost reply was ever retried: {counts:?}");
    assert!(
        retried_calls > 0,
        "no recorded request names its retries: {counts:?}"
    );
    assert!(
        signed_off.load(Ordering::Relaxed) > 0,
        "no session waited for sign-off: the shipped migration step asks for it"
    );
    eprintln!(
        "{SESSIONS} sessions completed through {counts:?}; {replayed} identical retries answered"
    );
    let _ = stop.send(());
    served.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_an_unlucky_network_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("rimthan.db").display());
    let store = rimthan_engine::store::open(&url).await.unwrap();
    sessions_survive_an_unlucky_network(store, 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_an_unlucky_network_on_postgres() {
    let Ok(url) = std::env::var(PG_ENV) else {
        eprintln!("{PG_ENV} is not set: skipping this PostgreSQL test");
        return;
    };
    let schema = format!("t_{}", SessionId::generate());
    let store = Arc::new(
        rimthan_engine::store::PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    sessions_survive_an_unlucky_network(store, 0x5eed_0002).await;
}

//! The webhook outbox (`docs/operations/deploy.md`, Webhooks): each change's events join the
//! outbox in the change's own transaction, one row per receiver; a replica leases due rows, two
//! replicas never lease the same row at once, a lease that ran out is taken again, and an
//! attempt's end is recorded: delivered rows leave, retried ones wait, failed ones stay.

use std::sync::Arc;

use rimthan_engine::{
    DeliveryOutcome, NotifyConfig, Store,
    approval::{Decision, DecisionRequest},
};
use serde_json::Value;

use crate::common::*;
use crate::timers::{DAY, Timed, facilitator, plus};

fn notify() -> NotifyConfig {
    NotifyConfig {
        endpoints: vec!["http://127.0.0.1:9/a".into(), "http://127.0.0.1:9/b".into()],
        admin_origin: "https://rimthan.example".into(),
    }
}

fn unix(at: &str) -> i64 {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .unwrap()
        .unix_timestamp()
}

/// Leases everything due at `at` for a minute, and reads each body.
async fn claim(store: &Arc<dyn Store>, at: i64) -> Vec<(i64, String, Value)> {
    store
        .claim_deliveries(at, at + 60, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.id, d.endpoint, serde_json::from_str(&d.body).unwrap()))
        .collect()
}

pub(crate) async fn each_change_writes_its_events_for_every_receiver(store: Arc<dyn Store>) {
    let at = Timed::awaiting_sign_off_notifying(store.clone(), "1.0.0", Some(notify())).await;
    let asked = at.requested_at().await;
    let now = unix(&asked);

    let due = claim(&store, now).await;
    assert_eq!(due.len(), 2, "one event, two receivers: {due:#?}");
    let (_, endpoint, body) = &due[0];
    assert!(endpoint.ends_with("/a") || endpoint.ends_with("/b"));
    assert_eq!(body["type"], "approval.requested");
    let data = &body["data"];
    assert_eq!(data["session_id"], at.id.as_str());
    assert_eq!(data["step"], "write-note");
    assert_eq!(
        data["link"],
        format!("https://rimthan.example/admin/sessions/{}", at.id)
    );
    assert_eq!(
        data["approval"]["roles"],
        serde_json::json!(["release-manager"])
    );
    assert_eq!(data["approval"]["expires_at"], plus(&asked, 3 * DAY));
    // Never the outputs' text.
    assert!(!body.to_string().contains("sales channel"), "{body}");
    // Leased: nobody else takes them until the lease runs out.
    assert!(claim(&store, now).await.is_empty());
    assert_eq!(claim(&store, now + 61).await.len(), 2);

    // One attempt delivered, one to retry later, then failed for good.
    let (first, second) = (due[0].0, due[1].0);
    store
        .finish_delivery(first, &DeliveryOutcome::Delivered)
        .await
        .unwrap();
    let retry = DeliveryOutcome::Retry {
        next_attempt_at: now + 600,
        error: "503 Service Unavailable".into(),
    };
    store.finish_delivery(second, &retry).await.unwrap();
    assert_eq!(store.outbox_counts().await.unwrap().pending, 1);
    assert!(claim(&store, now + 599).await.is_empty());
    let again = store
        .claim_deliveries(now + 600, now + 660, 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempts, 3, "each lease counts an attempt");
    let failed = DeliveryOutcome::Failed {
        error: "gave up after 24 hours: 503".into(),
    };
    store.finish_delivery(second, &failed).await.unwrap();
    let counts = store.outbox_counts().await.unwrap();
    assert_eq!((counts.pending, counts.failed), (0, 1));
    let kept = store.deliveries(Some(&at.id), 10).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].state, "failed");
    assert_eq!(kept[0].event, "approval.requested");
    assert_eq!(store.deliveries(None, 10).await.unwrap(), kept);

    // A reminder and a decision each make their event; completing makes one more.
    assert_eq!(at.fire(&plus(&asked, DAY)).await, 1);
    let req = DecisionRequest {
        session: at.id.clone(),
        step: "write-note".parse().unwrap(),
        revision: at.stored().await.revision,
        expected: Default::default(),
        decision: Decision::Approve { note: None },
    };
    at.engine.decide(req, &facilitator()).await.unwrap();
    let mut kinds: Vec<String> = claim(&store, now + DAY + 10)
        .await
        .into_iter()
        .filter(|(_, e, _)| e.ends_with("/a"))
        .map(|(_, _, b)| b["type"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["approval.decided", "approval.reminder", "session.completed"]
    );
}

pub(crate) async fn an_engine_without_receivers_writes_no_events(store: Arc<dyn Store>) {
    let at = Timed::awaiting_sign_off(store.clone(), "1.0.0").await;
    let now = unix(&at.requested_at().await);
    assert!(claim(&store, now + DAY).await.is_empty());
    assert_eq!(store.outbox_counts().await.unwrap().pending, 0);
}

macro_rules! backend {
    ($name:ident, $store:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use crate::common::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn each_change_writes_its_events_for_every_receiver() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::each_change_writes_its_events_for_every_receiver(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_engine_without_receivers_writes_no_events() {
                let Some((store, _guard)) = ($store) else {
                    return;
                };
                super::an_engine_without_receivers_writes_no_events(store).await;
            }
        }
    };
}

backend!(sqlite_file, {
    let (store, dir) = sqlite_file().await;
    Some((store, Some(dir)))
});
backend!(
    postgres,
    postgres().await.map(|s| (s, None::<tempfile::TempDir>))
);

/// Two replicas claiming at once never lease the same delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_lease_the_same_delivery() {
    let Some([one, two]) = postgres_replicas().await else {
        return;
    };
    let mut asked = String::new();
    for _ in 0..5 {
        let at = Timed::awaiting_sign_off_notifying(one.clone(), "1.0.0", Some(notify())).await;
        asked = at.requested_at().await;
    }
    let now = unix(&asked) + 5;
    let (a, b) = tokio::join!(
        one.claim_deliveries(now, now + 60, 6),
        two.claim_deliveries(now, now + 60, 6)
    );
    let mut ids: Vec<i64> = a.unwrap().iter().chain(&b.unwrap()).map(|d| d.id).collect();
    let leased = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), leased, "a delivery leased twice");
    assert_eq!(leased, 10, "five events for two receivers");
}

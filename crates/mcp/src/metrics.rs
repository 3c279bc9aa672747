//! Prometheus metrics (`docs/operations/deploy.md` §8), kept and encoded by `prometheus-client`
//! (OpenMetrics text, label values escaped): tool calls by outcome and code, latency histograms,
//! open sessions, the registry release in use, store errors, refused registry reloads, and what
//! each bounded cache holds and how it has served.

use std::time::Duration;

use rimthan_engine::cache::CacheStats;

use prometheus_client::{
    encoding::{
        EncodeLabelSet,
        text::{encode_eof, encode_registry},
    },
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The `Content-Type` of [`Metrics::render`]'s page.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: &'static str,
    outcome: &'static str,
    code: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabel {
    task: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabel {
    cache: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReleaseLabels {
    channel: String,
    release: String,
    manifest_sha256: String,
}

type Latency = Family<ToolLabel, Histogram, fn() -> Histogram>;

/// Process-wide counters, rendered on `/metrics`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Latency,
    store_errors: Counter,
    reload_failures: Counter,
    releases_rewritten: Counter,
    task_failures: Family<TaskLabel, Counter>,
    timers_fired: Counter,
    deliveries: Family<OutcomeLabel, Counter>,
}

/// A webhook attempt's end.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// What the metrics page shows besides the counters, read when it is rendered.
#[derive(Debug, Clone)]
pub struct Gauges {
    /// Sessions not completed (None when the store did not answer).
    pub open_sessions: Option<u64>,
    /// The active channel and the release it names.
    pub channel: String,
    /// The release in use.
    pub release: String,
    /// Its manifest digest.
    pub manifest_sha256: String,
    /// Each bounded cache by name: `session` (the store's live sessions), `active_step`
    /// (payloads by session revision), `check_verdict` (check findings by check and input
    /// digests), `resource_read` (reads by registry snapshot and URI).
    pub caches: Vec<(&'static str, CacheStats)>,
    /// Deterministic check runs since start (`Engine::checks_run`).
    pub check_runs: u64,
    /// Credentials answered 429 since start (`crate::throttle::Throttle::refused`).
    pub throttled: u64,
    /// Webhook deliveries waiting and given up on (None when the store did not answer).
    pub outbox: Option<rimthan_engine::OutboxCounts>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "rimthan_tool_calls",
            "Tool calls by tool, outcome and first code",
            calls.clone(),
        );
        let latency: Latency = Family::new_with_constructor(|| Histogram::new(BUCKETS));
        registry.register(
            "rimthan_tool_call_duration_seconds",
            "Tool call latency",
            latency.clone(),
        );
        let store_errors = Counter::default();
        registry.register(
            "rimthan_store_errors",
            "Store failures",
            store_errors.clone(),
        );
        let reload_failures = Counter::default();
        registry.register(
            "rimthan_registry_reload_failures",
            "Registry reloads refused",
            reload_failures.clone(),
        );
        let releases_rewritten = Counter::default();
        registry.register(
            "rimthan_registry_release_rewrites",
            "Reloads refused because a release in use came back with another manifest",
            releases_rewritten.clone(),
        );
        let task_failures = Family::<TaskLabel, Counter>::default();
        registry.register(
            "rimthan_background_task_failures",
            "Background tasks that failed (a retention pass, or a task that panicked and was started again)",
            task_failures.clone(),
        );
        let timers_fired = Counter::default();
        registry.register(
            "rimthan_timers_fired",
            "Sign-off reminders and expiries and step deadlines this server fired",
            timers_fired.clone(),
        );
        let deliveries = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "rimthan_webhook_deliveries",
            "Webhook attempts by how they ended: delivered, retried, failed (given up on)",
            deliveries.clone(),
        );
        Self {
            deliveries,
            registry,
            calls,
            latency,
            store_errors,
            reload_failures,
            releases_rewritten,
            task_failures,
            timers_fired,
        }
    }
}

impl Metrics {
    /// Counts one tool call.
    pub fn tool_call(
        &self,
        tool: &'static str,
        outcome: &'static str,
        code: &'static str,
        elapsed: Duration,
    ) {
        self.calls
            .get_or_create(&CallLabels {
                tool,
                outcome,
                code,
            })
            .inc();
        self.latency
            .get_or_create(&ToolLabel { tool })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a store failure.
    pub fn store_error(&self) {
        self.store_errors.inc();
    }

    /// Counts a registry reload that was refused (the previous registry stays in use), and
    /// separately when the reason was a release rewritten in place.
    pub fn registry_reload_failure(&self, rewritten: bool) {
        self.reload_failures.inc();
        if rewritten {
            self.releases_rewritten.inc();
        }
    }

    /// Counts a failure of the background task `task`.
    pub fn background_task_failure(&self, task: &'static str) {
        self.task_failures.get_or_create(&TaskLabel { task }).inc();
    }

    /// Counts a webhook attempt by how it ended.
    pub fn webhook_delivery(&self, outcome: &'static str) {
        self.deliveries
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// Counts timers this server fired.
    pub fn timers_fired(&self, fired: usize) {
        self.timers_fired.inc_by(fired as u64);
    }

    /// The OpenMetrics text exposition ([`CONTENT_TYPE`]).
    pub fn render(&self, gauges: &Gauges) -> String {
        // Gauges are read at render time: they live in a registry of their own, encoded after
        // the counters, with one end-of-file marker for the page.
        let mut now = Registry::default();
        if let Some(open) = gauges.open_sessions {
            let gauge: Gauge = Gauge::default();
            gauge.set(i64::try_from(open).unwrap_or(i64::MAX));
            now.register("rimthan_open_sessions", "Sessions not completed", gauge);
        }
        let release = Family::<ReleaseLabels, Gauge>::default();
        release
            .get_or_create(&ReleaseLabels {
                channel: gauges.channel.clone(),
                release: gauges.release.clone(),
                manifest_sha256: gauges.manifest_sha256.clone(),
            })
            .set(1);
        now.register(
            "rimthan_registry_release_info",
            "The release new sessions start from",
            release,
        );
        register_caches(&mut now, &gauges.caches);
        let check_runs: Counter = Counter::default();
        check_runs.inc_by(gauges.check_runs);
        now.register(
            "rimthan_check_runs",
            "Deterministic check runs: once per check per preparation",
            check_runs,
        );
        let throttled: Counter = Counter::default();
        throttled.inc_by(gauges.throttled);
        now.register(
            "rimthan_auth_throttled",
            "Credentials refused with 429: their address sent too many refused tokens",
            throttled,
        );
        if let Some(outbox) = gauges.outbox {
            let pending: Gauge = Gauge::default();
            pending.set(i64::try_from(outbox.pending).unwrap_or(i64::MAX));
            now.register(
                "rimthan_webhooks_pending",
                "Webhook deliveries waiting for an attempt or a retry",
                pending,
            );
            let failed: Gauge = Gauge::default();
            failed.set(i64::try_from(outbox.failed).unwrap_or(i64::MAX));
            now.register(
                "rimthan_webhooks_failed",
                "Webhook deliveries given up on and kept as failed",
                failed,
            );
        }
        let mut out = String::new();
        encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &now))
            .and_then(|()| encode_eof(&mut out))
            .expect("writing to a String cannot fail");
        out
    }
}

/// The caches' sizes as gauges and their lookups as counters, read when the page is rendered.
fn register_caches(registry: &mut Registry, caches: &[(&'static str, CacheStats)]) {
    let entries = Family::<CacheLabel, Gauge>::default();
    let bytes = Family::<CacheLabel, Gauge>::default();
    let hits = Family::<CacheLabel, Counter>::default();
    let misses = Family::<CacheLabel, Counter>::default();
    let evictions = Family::<CacheLabel, Counter>::default();
    let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    for &(cache, stats) in caches {
        let label = CacheLabel { cache };
        entries.get_or_create(&label).set(gauge(stats.entries));
        bytes.get_or_create(&label).set(gauge(stats.bytes));
        hits.get_or_create(&label).inc_by(stats.hits);
        misses.get_or_create(&label).inc_by(stats.misses);
        evictions.get_or_create(&label).inc_by(stats.evictions);
    }
    registry.register("rimthan_cache_entries", "Entries a cache holds", entries);
    registry.register(
        "rimthan_cache_bytes",
        "Bytes the values a cache holds weigh",
        bytes,
    );
    registry.register("rimthan_cache_hits", "Lookups a cache answered", hits);
    registry.register(
        "rimthan_cache_misses",
        "Lookups a cache could not answer",
        misses,
    );
    registry.register(
        "rimthan_cache_evictions",
        "Entries dropped to keep a cache within its bounds",
        evictions,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let page = Metrics::default().render(&Gauges {
            open_sessions: None,
            channel: "a\"b\\c\nd".into(),
            release: "r".into(),
            manifest_sha256: "m".into(),
            check_runs: 0,
            throttled: 0,
            outbox: None,
            caches: vec![(
                "session",
                CacheStats {
                    entries: 2,
                    bytes: 300,
                    hits: 5,
                    ..CacheStats::default()
                },
            )],
        });
        assert!(
            page.contains(r#"rimthan_cache_bytes{cache="session"} 300"#),
            "{page}"
        );
        assert!(
            page.contains(r#"rimthan_cache_hits_total{cache="session"} 5"#),
            "{page}"
        );
        assert!(page.contains(r#"channel="a\"b\\c\nd""#), "{page}");
        assert!(!page.contains("rimthan_open_sessions "), "{page}");
        assert!(page.ends_with("# EOF\n"), "{page}");
    }
}

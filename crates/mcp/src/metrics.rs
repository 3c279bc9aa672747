//! Prometheus metrics (`docs/operations/deploy.md` §8), kept and encoded by `prometheus-client`
//! (OpenMetrics text, label values escaped): tool calls by outcome and code, latency histograms,
//! open sessions, the registry release in use, store errors, refused registry reloads, and what
//! each bounded cache holds and how it has served.

use std::{borrow::Cow, time::Duration};

use opentelemetry::KeyValue;
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

/// Session duration bucket bounds, in seconds: a session lasts seconds to hours.
const SESSION_BUCKETS: [f64; 9] = [
    1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0,
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

/// The attributes of `mcp.server.operation.duration`, spelled as Prometheus spells
/// OpenTelemetry's (dots become underscores); an attribute that does not apply is empty.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    mcp_method_name: &'static str,
    gen_ai_tool_name: &'static str,
    error_type: Cow<'static, str>,
    mcp_protocol_version: &'static str,
    network_transport: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    mcp_protocol_version: &'static str,
    network_transport: &'static str,
}

/// The MCP semantic conventions' two histograms, in seconds, with the same buckets on both
/// exports: Prometheus's (`/metrics`) and OpenTelemetry's (the global meter, a no-op unless
/// export is on, `crate::telemetry`).
#[derive(Debug)]
struct McpDurations {
    operations: Family<OperationLabels, Histogram, fn() -> Histogram>,
    sessions: Family<SessionLabels, Histogram, fn() -> Histogram>,
    otel_operations: opentelemetry::metrics::Histogram<f64>,
    otel_sessions: opentelemetry::metrics::Histogram<f64>,
}

impl McpDurations {
    fn register(registry: &mut Registry) -> Self {
        let operations: Family<OperationLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(BUCKETS));
        registry.register(
            "mcp_server_operation_duration_seconds",
            "MCP request duration as the server saw it, from receipt to answer",
            operations.clone(),
        );
        let sessions: Family<SessionLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(SESSION_BUCKETS));
        registry.register(
            "mcp_server_session_duration_seconds",
            "MCP session duration as the server saw it (stdio, and 2025-11-25 HTTP sessions)",
            sessions.clone(),
        );
        let meter = opentelemetry::global::meter("rimthan");
        Self {
            operations,
            sessions,
            otel_operations: meter
                .f64_histogram("mcp.server.operation.duration")
                .with_unit("s")
                .with_description("MCP request duration as the server saw it")
                .with_boundaries(BUCKETS.to_vec())
                .build(),
            otel_sessions: meter
                .f64_histogram("mcp.server.session.duration")
                .with_unit("s")
                .with_description("MCP session duration as the server saw it")
                .with_boundaries(SESSION_BUCKETS.to_vec())
                .build(),
        }
    }
}

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
    mcp: McpDurations,
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
        let mcp = McpDurations::register(&mut registry);
        Self {
            mcp,
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

    /// Times one MCP request: `method` and `tool` as `crate::traced` bounds them, `error` its
    /// `error.type`, `version` the protocol revision (empty when none was agreed). The
    /// OpenTelemetry histogram is fed only while export is on: off, nothing is built for it.
    pub(crate) fn operation(
        &self,
        method: &'static str,
        tool: Option<&'static str>,
        error: Option<Cow<'static, str>>,
        version: &'static str,
        transport: &'static str,
        elapsed: Duration,
    ) {
        let seconds = elapsed.as_secs_f64();
        if crate::telemetry::exporting() {
            let mut attributes = Vec::with_capacity(5);
            attributes.push(KeyValue::new("mcp.method.name", method));
            attributes.push(KeyValue::new("network.transport", transport));
            if let Some(tool) = tool {
                attributes.push(KeyValue::new("gen_ai.tool.name", tool));
            }
            if let Some(error) = &error {
                attributes.push(KeyValue::new("error.type", error.to_string()));
            }
            if !version.is_empty() {
                attributes.push(KeyValue::new("mcp.protocol.version", version));
            }
            self.mcp.otel_operations.record(seconds, &attributes);
        }
        self.mcp
            .operations
            .get_or_create(&OperationLabels {
                mcp_method_name: method,
                gen_ai_tool_name: tool.unwrap_or_default(),
                error_type: error.unwrap_or_default(),
                mcp_protocol_version: version,
                network_transport: transport,
            })
            .observe(seconds);
    }

    /// Times one MCP session, from its `initialize` until its service ended.
    pub(crate) fn session_ended(
        &self,
        version: &'static str,
        transport: &'static str,
        elapsed: Duration,
    ) {
        let seconds = elapsed.as_secs_f64();
        self.mcp
            .sessions
            .get_or_create(&SessionLabels {
                mcp_protocol_version: version,
                network_transport: transport,
            })
            .observe(seconds);
        if crate::telemetry::exporting() {
            self.mcp.otel_sessions.record(
                seconds,
                &[
                    KeyValue::new("mcp.protocol.version", version),
                    KeyValue::new("network.transport", transport),
                ],
            );
        }
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
        let dropped: Counter = Counter::default();
        dropped.inc_by(crate::telemetry::SPANS_DROPPED.load(std::sync::atomic::Ordering::Relaxed));
        now.register(
            "rimthan_otlp_spans_dropped",
            "Spans not exported: the queue was full or the collector refused or did not answer",
            dropped,
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

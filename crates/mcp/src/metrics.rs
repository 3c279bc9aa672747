//! Prometheus text metrics: tool calls by outcome and code, latency histograms, open
//! sessions, the registry release in use, store errors and refused registry reloads.

use std::{collections::BTreeMap, fmt::Write as _, sync::Mutex, time::Duration};

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Debug, Default)]
struct Inner {
    calls: BTreeMap<(String, String, String), u64>,
    latency: BTreeMap<String, Histogram>,
    store_errors: u64,
    registry_reload_failures: u64,
    registry_releases_rewritten: u64,
}

/// Process-wide counters, rendered on `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// What the metrics page shows besides the counters.
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
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts one tool call.
    pub fn tool_call(&self, tool: &str, outcome: &str, code: &str, elapsed: Duration) {
        let mut inner = self.lock();
        *inner
            .calls
            .entry((tool.into(), outcome.into(), code.into()))
            .or_default() += 1;
        let h = inner.latency.entry(tool.into()).or_default();
        let secs = elapsed.as_secs_f64();
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += secs;
    }

    /// Counts a store failure.
    pub fn store_error(&self) {
        self.lock().store_errors += 1;
    }

    /// Counts a registry reload that was refused (the previous registry stays in use), and
    /// separately when the reason was a release rewritten in place.
    pub fn registry_reload_failure(&self, rewritten: bool) {
        let mut inner = self.lock();
        inner.registry_reload_failures += 1;
        if rewritten {
            inner.registry_releases_rewritten += 1;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self, gauges: &Gauges) -> String {
        let inner = self.lock();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP rimthan_tool_calls_total Tool calls by tool, outcome and first code."
        );
        let _ = writeln!(out, "# TYPE rimthan_tool_calls_total counter");
        for ((tool, outcome, code), n) in &inner.calls {
            let _ = writeln!(
                out,
                "rimthan_tool_calls_total{{tool=\"{tool}\",outcome=\"{outcome}\",code=\"{code}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP rimthan_tool_call_duration_seconds Tool call latency."
        );
        let _ = writeln!(out, "# TYPE rimthan_tool_call_duration_seconds histogram");
        for (tool, h) in &inner.latency {
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "rimthan_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "rimthan_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "rimthan_tool_call_duration_seconds_sum{{tool=\"{tool}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "rimthan_tool_call_duration_seconds_count{{tool=\"{tool}\"}} {}",
                h.count
            );
        }
        if let Some(open) = gauges.open_sessions {
            let _ = writeln!(out, "# HELP rimthan_open_sessions Sessions not completed.");
            let _ = writeln!(out, "# TYPE rimthan_open_sessions gauge");
            let _ = writeln!(out, "rimthan_open_sessions {open}");
        }
        let _ = writeln!(
            out,
            "# HELP rimthan_registry_release_info The release new sessions start from."
        );
        let _ = writeln!(out, "# TYPE rimthan_registry_release_info gauge");
        let _ = writeln!(
            out,
            "rimthan_registry_release_info{{channel=\"{}\",release=\"{}\",manifest_sha256=\"{}\"}} 1",
            gauges.channel, gauges.release, gauges.manifest_sha256
        );
        let _ = writeln!(out, "# HELP rimthan_store_errors_total Store failures.");
        let _ = writeln!(out, "# TYPE rimthan_store_errors_total counter");
        let _ = writeln!(out, "rimthan_store_errors_total {}", inner.store_errors);
        let _ = writeln!(
            out,
            "# HELP rimthan_registry_reload_failures_total Registry reloads refused."
        );
        let _ = writeln!(out, "# TYPE rimthan_registry_reload_failures_total counter");
        let _ = writeln!(
            out,
            "rimthan_registry_reload_failures_total {}",
            inner.registry_reload_failures
        );
        let _ = writeln!(
            out,
            "# HELP rimthan_registry_release_rewrites_total Reloads refused because a release in use came back with another manifest."
        );
        let _ = writeln!(
            out,
            "# TYPE rimthan_registry_release_rewrites_total counter"
        );
        let _ = writeln!(
            out,
            "rimthan_registry_release_rewrites_total {}",
            inner.registry_releases_rewritten
        );
        out
    }
}

//! OpenTelemetry export over OTLP/HTTP with protobuf (`docs/operations/tracing.md`): the spans
//! `tracing` records under [`TRACE_TARGET`] and the two MCP duration histograms, sent to a
//! collector when an endpoint is configured, and nothing at all when none is.
//!
//! The standard variables are honoured as the OpenTelemetry SDK reads them:
//! `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (either turns export
//! on), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_BSP_*`, `OTEL_METRIC_EXPORT_INTERVAL`; `OTEL_SDK_DISABLED`
//! and `OTEL_TRACES_EXPORTER=none` turn it off. Spans leave through [`batch`], which never blocks
//! a request and counts what it drops; requests go out on the server's own HTTP client
//! ([`client`]).

mod batch;
mod client;

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::{
    Resource,
    metrics::{PeriodicReader, SdkMeterProvider},
    trace::SdkTracerProvider,
};
use rimthan_engine::TRACE_TARGET;
use tracing_subscriber::{Layer, filter::Targets, registry::LookupSpan};

pub(crate) use batch::SPANS_DROPPED;
pub use client::EXPORT_TIMEOUT;

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error(
        "the OTLP endpoint {0:?} is not an http:// or https:// URL; give the collector's base URL, e.g. http://127.0.0.1:4318"
    )]
    Endpoint(String),
    /// A protocol other than OTLP/HTTP with protobuf was asked for.
    #[error(
        "{variable}={value:?}: rimthan exports OTLP over HTTP with protobuf only; unset it or set http/protobuf (a collector listens for it on port 4318)"
    )]
    Protocol {
        /// The variable that asked.
        variable: &'static str,
        /// What it asked for.
        value: String,
    },
    /// The exporter could not be built.
    #[error("the OTLP exporter could not be built: {0}")]
    Exporter(String),
}

/// Whether export was started in this process: the OpenTelemetry instruments are fed only then.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether this process exports (`Telemetry::start` succeeded).
pub(crate) fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The running export: flushed and stopped by [`Telemetry::shutdown`].
#[derive(Debug)]
pub struct Telemetry {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
}

/// Whether export is asked for: an endpoint given, or one in the environment, and not disabled.
fn wanted(endpoint: Option<&str>) -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let is = |name: &str, value: &str| {
        std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
    };
    if is("OTEL_SDK_DISABLED", "true") || is("OTEL_TRACES_EXPORTER", "none") {
        return false;
    }
    endpoint.is_some()
        || set("OTEL_EXPORTER_OTLP_ENDPOINT")
        || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
}

/// `base` with a signal's path appended, as the OTLP specification appends it to
/// `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn signal_url(base: &str, path: &str) -> Result<String, TelemetryError> {
    let uri: http::Uri = base
        .parse()
        .map_err(|_| TelemetryError::Endpoint(base.to_owned()))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(TelemetryError::Endpoint(base.to_owned()));
    }
    Ok(format!("{}/{path}", base.trim_end_matches('/')))
}

/// Refuses a protocol variable naming anything but `http/protobuf`.
fn check_protocol() -> Result<(), TelemetryError> {
    for variable in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ] {
        if let Ok(value) = std::env::var(variable)
            && value.trim() != "http/protobuf"
        {
            return Err(TelemetryError::Protocol { variable, value });
        }
    }
    Ok(())
}

/// The resource the server reports as: `service.name` is `rimthan` unless the environment
/// names it; `service.version` is this build's.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let builder = Resource::builder();
    let builder = if named {
        builder
    } else {
        builder.with_service_name("rimthan")
    };
    builder
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

impl Telemetry {
    /// Starts export to `endpoint` (a collector's base URL; `/v1/traces` and `/v1/metrics` are
    /// appended), or to the endpoint the environment names; `None` when export is off. Export
    /// requests run on `runtime`. The meter provider becomes the global one, so the MCP duration
    /// histograms ([`crate::Metrics`]) reach the collector.
    pub fn start(
        endpoint: Option<&str>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Option<Self>, TelemetryError> {
        if !wanted(endpoint) {
            return Ok(None);
        }
        check_protocol()?;
        let client = client::OtlpClient::new(runtime).map_err(TelemetryError::Exporter)?;
        let exporter_error =
            |e: opentelemetry_otlp::ExporterBuildError| TelemetryError::Exporter(e.to_string());
        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(client.clone());
        let mut metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(client);
        if let Some(base) = endpoint {
            spans = spans.with_endpoint(signal_url(base, "v1/traces")?);
            metrics = metrics.with_endpoint(signal_url(base, "v1/metrics")?);
        }
        let resource = resource();
        let traces = SdkTracerProvider::builder()
            .with_span_processor(batch::Batches::new(
                spans.build().map_err(exporter_error)?,
                batch::Batching::from_env(),
            ))
            .with_resource(resource.clone())
            .build();
        let metrics = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.build().map_err(exporter_error)?).build())
            .with_resource(resource)
            .build();
        opentelemetry::global::set_meter_provider(metrics.clone());
        EXPORTING.store(true, Ordering::Relaxed);
        Ok(Some(Self { traces, metrics }))
    }

    /// The `tracing` layer that turns the spans and events under [`TRACE_TARGET`] into
    /// OpenTelemetry spans, and nothing else.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.traces.tracer("rimthan"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_level(false)
            .with_context_activation(false)
            .with_filter(Targets::new().with_target(TRACE_TARGET, tracing::Level::DEBUG))
    }

    /// Exports what waits and stops. Call it while the runtime given to
    /// [`start`](Self::start) still runs, from outside it.
    pub fn shutdown(self) {
        if let Err(e) = self.traces.shutdown() {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
        if let Err(e) = self.metrics.shutdown() {
            tracing::warn!(error = %e, "the last metrics could not be exported");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_path_is_appended_to_the_base_url() {
        assert_eq!(
            signal_url("http://127.0.0.1:4318", "v1/traces").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            signal_url("https://api.honeycomb.io/", "v1/metrics").unwrap(),
            "https://api.honeycomb.io/v1/metrics"
        );
        for refused in ["127.0.0.1:4318", "grpc://collector:4317", "", "http://"] {
            assert!(signal_url(refused, "v1/traces").is_err(), "{refused}");
        }
    }
}

//! Each request the server answers in a span that follows OpenTelemetry's semantic conventions
//! for MCP (`docs/operations/tracing.md`), joined to the caller's trace, and timed into
//! `mcp.server.operation.duration`; a session's length into `mcp.server.session.duration`.
//! [`crate::RimthanServer`]'s handlers each pass their work through [`observe`].
//!
//! The caller's trace context is read from the request's `_meta` (`traceparent`, `tracestate`:
//! how 2026-07-28 carries it) or else from the HTTP request's headers (how a 2025-11-25 client
//! sends it). An invalid one is ignored: the span starts a trace of its own. With export off the
//! span is disabled and none of this is read.
//!
//! Every value the caller controls is bounded before it reaches a span or a metric label: a
//! method or tool this server does not serve is `_OTHER`, ids and URIs are cut short, and
//! nothing of a tool's arguments or results is recorded beyond its refusal code.

use std::{borrow::Cow, future::Future, sync::Arc, time::Instant};

use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rimthan_engine::TRACE_TARGET;
use rmcp::{ErrorData, RoleServer, model::ProtocolVersion, service::RequestContext};
use tracing::{Instrument as _, Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::{WorkflowTool, metrics::Metrics};

/// The OpenTelemetry spelling of a value outside the known set.
pub(crate) const OTHER: &str = "_OTHER";
/// The longest request id or session id recorded.
const MAX_ID_BYTES: usize = 64;
/// The longest resource URI recorded.
const MAX_URI_BYTES: usize = 256;
/// The longest `tracestate` read; a longer one is ignored (W3C allows 512 bytes).
const MAX_TRACESTATE_BYTES: usize = 512;

/// How the server is reached, as `network.transport` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP.
    Tcp,
    /// stdio, or an in-process pipe.
    Pipe,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Pipe => "pipe",
        }
    }
}

/// How one server instance is reached, and the session it serves when it serves one.
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    transport: Transport,
    session: Option<Arc<SessionClock>>,
}

impl Default for Reach {
    fn default() -> Self {
        Self {
            transport: Transport::Pipe,
            session: None,
        }
    }
}

impl Reach {
    /// An instance reached over `transport`; `sessions` when it serves one MCP session from its
    /// `initialize` on (stdio, and each 2025-11-25 HTTP session), so its life is a session's.
    pub(crate) fn new(transport: Transport, sessions: bool, metrics: &Arc<Metrics>) -> Self {
        Self {
            transport,
            session: sessions.then(|| {
                Arc::new(SessionClock {
                    metrics: metrics.clone(),
                    transport,
                    began: std::sync::OnceLock::new(),
                })
            }),
        }
    }

    /// The session began under `version`.
    pub(crate) fn session_began(&self, version: &ProtocolVersion) {
        if let Some(session) = &self.session {
            let _ = session
                .began
                .set((Instant::now(), known_version(version.as_str())));
        }
    }
}

/// Times a session until the last instance serving it is dropped.
#[derive(Debug)]
struct SessionClock {
    metrics: Arc<Metrics>,
    transport: Transport,
    began: std::sync::OnceLock<(Instant, &'static str)>,
}

impl Drop for SessionClock {
    fn drop(&mut self) {
        if let Some(&(began, version)) = self.began.get() {
            self.metrics
                .session_ended(version, self.transport.as_str(), began.elapsed());
        }
    }
}

/// What a request is, in the bounded names it is recorded under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    method: &'static str,
    /// The tool of a `tools/call`, when this server has it; `_OTHER` when not.
    tool: Option<&'static str>,
    /// The prompt of a `prompts/get`, likewise.
    prompt: Option<&'static str>,
    uri: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// A request of `method` (one rmcp parsed: its constant spelling).
    pub(crate) fn method(method: &'static str) -> Self {
        Self {
            method,
            tool: None,
            prompt: None,
            uri: None,
        }
    }

    /// A `tools/call` of `name`.
    pub(crate) fn tool(name: &str) -> Self {
        Self {
            tool: Some(WorkflowTool::from_name(name).map_or(OTHER, WorkflowTool::name)),
            ..Self::method("tools/call")
        }
    }

    /// A `prompts/get` of `name`.
    pub(crate) fn prompt(name: &str) -> Self {
        Self {
            prompt: Some(crate::prompts::known(name).unwrap_or(OTHER)),
            ..Self::method("prompts/get")
        }
    }

    /// A `resources/read` of `uri`.
    pub(crate) fn read(uri: &'a str) -> Self {
        Self {
            uri: Some(uri),
            ..Self::method("resources/read")
        }
    }
}

/// Serves one request in its span and times it: `served` is the handler's work, `refused` says
/// what in a successful answer is a refusal (a tool's error result).
pub(crate) async fn observe<T>(
    metrics: &Metrics,
    reach: &Reach,
    call: Call<'_>,
    context: &RequestContext<RoleServer>,
    refused: impl FnOnce(&T) -> Option<Cow<'static, str>>,
    served: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let started = Instant::now();
    let version = context
        .protocol_version()
        .map(|v| known_version(v.as_str()))
        .unwrap_or_default();
    let span = request_span(&call, context, version, reach.transport);
    let result = served.instrument(span.clone()).await;
    let error = match &result {
        Ok(answer) => refused(answer),
        Err(e) => Some(rpc_error(e)),
    };
    if let Some(error) = &error {
        span.record("error.type", error.as_ref());
        span.record("otel.status_code", "ERROR");
        if let Err(e) = &result {
            span.record("rpc.response.status_code", e.code.0);
        }
    }
    metrics.operation(
        call.method,
        call.tool,
        error,
        version,
        reach.transport.as_str(),
        started.elapsed(),
    );
    result
}

/// A protocol revision this server knows, as its constant; `_OTHER` for any other.
fn known_version(version: &str) -> &'static str {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|v| v.as_str() == version)
        .map_or(OTHER, ProtocolVersion::as_str)
}

/// The request's span, a child of the caller's trace when it sent one.
fn request_span(
    call: &Call<'_>,
    context: &RequestContext<RoleServer>,
    version: &str,
    transport: Transport,
) -> Span {
    let span = tracing::debug_span!(
        target: TRACE_TARGET,
        "mcp",
        otel.name = Empty,
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = call.method,
        mcp.protocol.version = version,
        mcp.session.id = Empty,
        mcp.resource.uri = Empty,
        jsonrpc.request.id = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.prompt.name = Empty,
        network.transport = transport.as_str(),
        error.type = Empty,
        rpc.response.status_code = Empty,
        rimthan.session.id = Empty,
        rimthan.workflow.id = Empty,
        rimthan.workflow.version = Empty,
        rimthan.step.id = Empty,
        rimthan.release = Empty,
        rimthan.harness = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    match call.tool.or(call.prompt) {
        Some(target) => span.record("otel.name", format!("{} {target}", call.method)),
        None => span.record("otel.name", call.method),
    };
    if let Some(tool) = call.tool {
        span.record("gen_ai.tool.name", tool);
        span.record("gen_ai.operation.name", "execute_tool");
    }
    if let Some(prompt) = call.prompt {
        span.record("gen_ai.prompt.name", prompt);
    }
    if let Some(uri) = call.uri {
        span.record("mcp.resource.uri", cut(uri, MAX_URI_BYTES));
    }
    span.record(
        "jsonrpc.request.id",
        cut(&context.id.to_string(), MAX_ID_BYTES),
    );
    let headers = context
        .extensions
        .get::<axum::http::request::Parts>()
        .map(|parts| &parts.headers);
    if let Some(id) = headers
        .and_then(|h| h.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
    {
        span.record("mcp.session.id", cut(id, MAX_ID_BYTES));
    }
    let carrier = Carrier {
        meta: &context.meta,
        headers,
    };
    let parent = TraceContextPropagator::new().extract(&carrier);
    if opentelemetry::trace::TraceContextExt::span(&parent)
        .span_context()
        .is_valid()
    {
        let _ = span.set_parent(parent);
    }
    span
}

/// Where a caller's trace context is read from: the request's `_meta` when it carries a
/// `traceparent`, else the HTTP headers.
struct Carrier<'a> {
    meta: &'a rmcp::model::RequestMetaObject,
    headers: Option<&'a axum::http::HeaderMap>,
}

impl Carrier<'_> {
    fn in_meta(&self) -> bool {
        self.meta.get("traceparent").is_some()
    }
}

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = if self.in_meta() {
            self.meta.get(key).and_then(serde_json::Value::as_str)
        } else {
            self.headers?.get(key).and_then(|v| v.to_str().ok())
        };
        value.filter(|v| key != "tracestate" || v.len() <= MAX_TRACESTATE_BYTES)
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// A refusal's `error.type`: a code of the code table as its constant, any other cut short.
fn code(text: &str) -> Cow<'static, str> {
    rimthan_engine::Code::from_wire(text).map_or_else(
        || Cow::Owned(cut(text, MAX_ID_BYTES).to_owned()),
        |code| Cow::Borrowed(code.as_str()),
    )
}

/// The `error.type` of a tool result that is a refusal: its first code, or `tool_error`.
pub(crate) fn tool_refusal(result: &rmcp::model::CallToolResult) -> Option<Cow<'static, str>> {
    if result.is_error != Some(true) {
        return None;
    }
    let first = result
        .structured_content
        .as_ref()
        .and_then(|v| v.get("failures").or_else(|| v.get("blockers")))
        .and_then(|list| list.get(0)?.get("code")?.as_str());
    Some(first.map_or(Cow::Borrowed("tool_error"), code))
}

/// The `error.type` of a JSON-RPC error: the engine's failure code it carries, else its
/// JSON-RPC code.
fn rpc_error(e: &ErrorData) -> Cow<'static, str> {
    e.data
        .as_ref()
        .and_then(|d| d.get("code")?.as_str())
        .map_or_else(|| Cow::Owned(e.code.0.to_string()), code)
}

/// `value` cut to at most `max` bytes on a character boundary.
fn cut(value: &str, max: usize) -> &str {
    if value.len() <= max {
        return value;
    }
    let mut end = max;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

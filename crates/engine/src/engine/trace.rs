//! What the engine tells a trace (`docs/operations/tracing.md`): a child span per store operation
//! and per check, the session's identity on the request's span, and an event per transition.
//!
//! Every span and event here is at `DEBUG` under [`TRACE_TARGET`], which the server's log filter
//! leaves out unless an operator asks for it: with export off, none is built (a disabled
//! callsite costs one load), and no field value is computed. Only identifiers, counts and
//! verdicts are recorded, never an output's text, a token or a note.

use rimthan_checks::{Finding, Severity};
use rimthan_registry::{VerifiedRelease, Version};
use tracing::Span;

use crate::model::{approval::DecisionResult, session::Session};

/// The `tracing` target of every span and event meant for export; the OpenTelemetry layer
/// takes exactly these.
pub const TRACE_TARGET: &str = "rimthan_trace";

/// The span of one store operation, as a database client span.
pub(super) fn store_span(system: &'static str, operation: &'static str) -> Span {
    tracing::debug_span!(
        target: TRACE_TARGET,
        "store",
        otel.name = operation,
        otel.kind = "client",
        db.system.name = system,
        db.operation.name = operation,
    )
}

/// The span of one check over its inputs, whose size `bytes` gives (counted only when the span is
/// recorded); [`check_verdict`] completes it.
pub(super) fn check_span(id: &str, version: &Version, bytes: impl FnOnce() -> usize) -> Span {
    let span = tracing::debug_span!(
        target: TRACE_TARGET,
        "check",
        otel.name = "check",
        rimthan.check.id = id,
        rimthan.check.version = %version,
        rimthan.check.bytes_read = tracing::field::Empty,
        rimthan.check.verdict = tracing::field::Empty,
        rimthan.check.findings = tracing::field::Empty,
        rimthan.check.cached = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("rimthan.check.bytes_read", count(bytes()));
    }
    span
}

/// Records a check's verdict on its span: `pass` with no error finding, else `fail`; `cached`
/// when the findings were kept from an earlier run of the same check on the same bytes.
pub(super) fn check_verdict(span: &Span, findings: &[Finding], cached: bool) {
    if span.is_disabled() {
        return;
    }
    let fails = findings.iter().any(|f| f.severity == Severity::Error);
    span.record("rimthan.check.verdict", if fails { "fail" } else { "pass" });
    span.record("rimthan.check.findings", count(findings.len()));
    span.record("rimthan.check.cached", cached);
}

/// Records the session a request is about on the request's span (the current one): its id,
/// workflow, step, release and harness.
pub(super) fn record_session(session: &Session, release: &VerifiedRelease) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("rimthan.session.id", session.id.as_str());
    span.record(
        "rimthan.workflow.id",
        tracing::field::display(&session.workflow),
    );
    span.record(
        "rimthan.workflow.version",
        tracing::field::display(&session.workflow_version),
    );
    span.record("rimthan.release", tracing::field::display(&session.release));
    span.record(
        "rimthan.harness",
        tracing::field::display(&session.host.harness),
    );
    let step = release
        .workflow(&session.workflow, &session.workflow_version)
        .and_then(|w| w.steps().get(session.step_index));
    if let Some(step) = step {
        span.record("rimthan.step.id", step.entry().id.as_str());
    }
}

/// The root span of an approver's decision (made from `/admin` or the command line, never in an
/// MCP request): the store's spans fall under it.
pub(super) fn decision_span(decision: &'static str, authenticated: bool) -> Span {
    tracing::debug_span!(
        target: TRACE_TARGET,
        parent: None,
        "signoff",
        rimthan.decision = decision,
        rimthan.authenticated = authenticated,
        rimthan.session.id = tracing::field::Empty,
        rimthan.workflow.id = tracing::field::Empty,
        rimthan.workflow.version = tracing::field::Empty,
        rimthan.step.id = tracing::field::Empty,
        rimthan.release = tracing::field::Empty,
        rimthan.harness = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// The `signoff.decision` event, or the refusal's code on the span.
pub(super) fn decided(span: &Span, result: &DecisionResult) {
    if span.is_disabled() {
        return;
    }
    match result {
        DecisionResult::Recorded { status, .. } => {
            tracing::event!(
                target: TRACE_TARGET,
                parent: span,
                tracing::Level::DEBUG,
                rimthan.status.to = status.as_str(),
                "signoff.decision"
            );
        }
        DecisionResult::Refused { failure } => {
            span.record("error.type", failure.code.as_str());
        }
    }
}

/// An event on the request's span for a stored transition.
pub(super) fn transition(from: &Session, to: &Session) {
    tracing::event!(
        target: TRACE_TARGET,
        tracing::Level::DEBUG,
        rimthan.status.from = from.status.as_str(),
        rimthan.status.to = to.status.as_str(),
        rimthan.step.from = count(from.step_index),
        rimthan.step.to = count(to.step_index),
        rimthan.revision = i64::try_from(to.revision).unwrap_or(i64::MAX),
        "session.transition"
    );
}

/// A count as a signed 64-bit integer: OpenTelemetry's integer attributes are signed, and an
/// unsigned one is exported as text.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

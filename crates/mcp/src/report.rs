//! One session as `rimthan sessions show` prints it (`docs/operations/facilitator.md` §2), read
//! from the store beside the server or from the server itself (`GET /admin/api/sessions/{id}`,
//! `sessions show --server`): one document and one text, so both paths print the same.

use std::{fmt::Write as _, sync::Arc};

use rimthan_engine::{
    AuditEntry, Session, SessionId, Status, Store, StoreError,
    chain::{AuditVerification, verify_session_chain},
    provenance::{STATEMENT_PATH, Statement, statement_for},
};
use rimthan_registry::VerifiedRegistry;
use serde_json::json;

/// Appends a line to a `String`, which cannot fail.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// A session with its audit timeline, the verdict on its chain and, once completed, its
/// provenance statement (unsigned: the store holds no private key).
#[derive(Debug)]
pub struct SessionReport {
    session: Arc<Session>,
    timeline: Vec<AuditEntry>,
    chain: AuditVerification,
    statement: Option<Statement>,
    deliveries: Vec<rimthan_engine::DeliveryRecord>,
    /// The workflow's step ids in order, when the registry still holds its release.
    steps: Vec<String>,
}

/// Undelivered webhook events a report lists at most.
const DELIVERIES_SHOWN: u32 = 50;

impl SessionReport {
    /// The report of session `id`, or none when the store does not hold it.
    pub async fn read(
        store: &dyn Store,
        registry: &VerifiedRegistry,
        id: &SessionId,
    ) -> Result<Option<Self>, StoreError> {
        let Some(session) = store.load_session(id).await? else {
            return Ok(None);
        };
        Ok(Some(Self::of(store, registry, session).await?))
    }

    /// The report of a session already read.
    pub async fn of(
        store: &dyn Store,
        registry: &VerifiedRegistry,
        session: Arc<Session>,
    ) -> Result<Self, StoreError> {
        let id = &session.id;
        let timeline = store.audit_log(id).await?;
        let chain = verify_session_chain(store, id).await?;
        let statement = match store.completion_link(id).await? {
            Some(completion) if session.status == Status::Completed => registry
                .release(&session.release)
                .and_then(|r| statement_for(r, &session, completion, None)),
            _ => None,
        };
        let deliveries = store.deliveries(Some(id), DELIVERIES_SHOWN).await?;
        let steps = registry
            .release(&session.release)
            .and_then(|r| r.workflow(&session.workflow, &session.workflow_version))
            .map(|w| w.steps().iter().map(|s| s.doc().id.to_string()).collect())
            .unwrap_or_default();
        Ok(Self {
            steps,
            session,
            timeline,
            chain,
            statement,
            deliveries,
        })
    }

    /// The document `sessions show --json` prints.
    pub fn json(&self) -> serde_json::Value {
        let session = &self.session;
        let outputs: Vec<_> = session
            .ledger
            .iter()
            .map(|(path, a)| {
                json!({"path": path, "artifact_id": a.artifact_id, "owner_step": a.owner_step,
                       "bytes": a.bytes, "sha256": a.sha256})
            })
            .collect();
        json!({
            "id": session.id, "status": session.status.as_str(), "revision": session.revision,
            "workflow": session.workflow, "workflow_version": session.workflow_version,
            "release": session.release, "harness": session.host.harness.as_str(),
            "principal": session.principal, "step_index": session.step_index,
            "revise_rounds": session.revise_rounds, "created_at": session.created_at,
            "updated_at": session.updated_at, "timeline": self.timeline,
            "findings": session.findings, "report_rounds": session.report_rounds,
            "outputs": outputs, "audit_chain": self.chain, "statement": self.statement,
            "approval": session.approval.as_ref().map(|p| json!({
                "step": p.step, "requested_at": p.requested_at, "remind_at": p.remind_at,
                "reminded_at": p.reminded_at, "expires_at": p.expires_at, "on_expiry": p.on_expiry.map(|o| o.as_str()),
            })),
            "deadline": session.deadline, "timers_fired": session.timer_events,
            "webhooks_undelivered": self.deliveries,
        })
    }

    /// The text `sessions show` prints.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let session = &self.session;
        let chain = &self.chain;
        let timeline = &self.timeline;
        let statement = &self.statement;
        let standing = match session.status {
            Status::Completed => "completed".to_owned(),
            status => format!("{} at step {}", status.as_str(), session.step_index + 1),
        };
        say!(
            out,
            "session {} · {}@{} · release {} · {} · {standing} · {} revise rounds",
            session.id,
            session.workflow,
            session.workflow_version,
            session.release,
            session.host.harness.as_str(),
            session.revise_rounds
        );
        if let Some(p) = &session.principal {
            say!(
                out,
                "owner {} ({})",
                p.subject,
                p.organization.as_deref().unwrap_or("no organization")
            );
        }
        say!(
            out,
            "started {} · changed {}",
            session.created_at,
            session.updated_at
        );
        if chain.verified() {
            say!(out, "audit chain verifies ({} entries)", chain.entries);
        } else {
            say!(out, "audit chain BROKEN:");
            for b in &chain.breaks {
                say!(
                    out,
                    "  {} entry {} index {}: {}",
                    b.kind.as_str(),
                    b.entry.map_or("-".into(), |e| e.to_string()),
                    b.index.map_or("-".into(), |i| i.to_string()),
                    b.detail
                );
            }
        }
        if let Some(statement) = &statement {
            let at = &statement.predicate["audit_chain"];
            say!(
                out,
                "provenance: the participant keeps the signed statement at {} (/admin/sessions/{}/provenance.json serves it); it names audit entry {} sha256 {}",
                STATEMENT_PATH,
                session.id,
                at["index"],
                at["sha256"].as_str().unwrap_or("-")
            );
        }
        if let (Status::AwaitingApproval, Some(p)) = (session.status, &session.approval) {
            let expiry = match (&p.expires_at, p.on_expiry) {
                (Some(at), Some(on)) => format!("; expires {at} ({})", on.as_str()),
                _ => String::new(),
            };
            say!(
                out,
                "waiting for sign-off of step {} since {}{expiry}",
                p.step,
                p.requested_at.as_deref().unwrap_or("-")
            );
        }
        if let Some(d) = session
            .deadline
            .as_ref()
            .filter(|_| !session.status.is_terminal())
        {
            say!(
                out,
                "step {} is due {} ({})",
                d.step,
                d.at,
                d.on_expiry.as_str()
            );
        }
        if !self.deliveries.is_empty() {
            say!(out, "\nwebhook events not delivered");
            for d in &self.deliveries {
                say!(
                    out,
                    "  {}  {:<20}  {:<7}  {} attempts  {}  {}",
                    d.event_id,
                    d.event,
                    d.state,
                    d.attempts,
                    printable(&d.endpoint),
                    printable(d.last_error.as_deref().unwrap_or("-"))
                );
            }
        }
        say!(out, "\ntimeline");
        // The checks of the latest preparation, which judge the submission after it.
        let mut prepared: &[rimthan_engine::AuditCheck] = &[];
        for e in timeline {
            if !e.checks.is_empty() {
                prepared = &e.checks;
            }
            let codes: Vec<&str> = e.codes.iter().map(|c| c.as_str()).collect();
            // A judged submission names its step and what sent it back: validators, and the
            // checks that failed with their rules.
            let judged = e.judgement.as_ref().map_or_else(String::new, |j| {
                let mut by: Vec<String> = j.failed.clone();
                if e.outcome == rimthan_engine::Outcome::Revise {
                    by.extend(
                        prepared
                            .iter()
                            .filter(|c| c.verdict == rimthan_engine::CheckVerdict::Fail)
                            .map(|c| {
                                let mut rules: Vec<&str> = c
                                    .findings
                                    .iter()
                                    .filter(|f| f.severity == rimthan_engine::Severity::Error)
                                    .map(|f| f.rule.as_str())
                                    .collect();
                                rules.dedup();
                                format!("check {} ({})", c.id, printable(&rules.join(", ")))
                            }),
                    );
                }
                if by.is_empty() {
                    format!("{} passed", j.step)
                } else {
                    format!("{} failed by {}", j.step, by.join(", "))
                }
            });
            // A decision names who made it and what they wrote, refused ones too.
            let decided = e.decision.as_ref().map_or_else(String::new, |d| {
                let by = e.principal.as_deref().unwrap_or("someone unauthenticated");
                let waived = match (&d.check_id, &d.rule, &d.path) {
                    (Some(check), rule, path) => format!(
                        " waiving check {check} rule {} in {}",
                        rule.as_deref().unwrap_or("-"),
                        path.as_deref().unwrap_or("-")
                    ),
                    _ => String::new(),
                };
                let note = d
                    .note
                    .as_deref()
                    .map_or_else(String::new, |n| format!(": {}", printable(n)));
                let asserted = if d.asserted { " (name asserted)" } else { "" };
                format!(
                    " step {} by {}{asserted}{waived}{note}",
                    d.step,
                    printable(by)
                )
            });
            say!(
                out,
                "  {}  {:<24}  {:<9}  {}{}{}",
                e.at,
                e.tool.as_str(),
                e.outcome.as_str(),
                codes.join(", "),
                judged,
                decided
            );
        }
        if !session.findings.is_empty() {
            say!(out, "\nlatest findings");
            for f in &session.findings {
                let by = match (&f.check_id, &f.rule) {
                    (Some(check), Some(rule)) => format!("check {check} [{rule}]"),
                    _ => f.validator_id.clone(),
                };
                let at = location(f.path.as_deref(), f.line);
                say!(
                    out,
                    "  {} {} {}: {}",
                    printable(&by),
                    f.severity,
                    printable(&at),
                    printable(&f.message)
                );
            }
        }
        report_rounds(&mut out, session, &self.steps);
        if !session.ledger.is_empty() {
            say!(
                out,
                "\naccepted outputs (attested; the store holds no bodies)"
            );
            for (path, a) in &session.ledger {
                say!(
                    out,
                    "  {}  {} bytes  sha256 {}",
                    printable(path),
                    a.bytes,
                    a.sha256
                );
            }
        }
        out
    }
}

/// Every kept round of validator reports and deterministic checks, per step: verdict, summary,
/// findings and the fields a report schema adds.
fn report_rounds(out: &mut String, session: &Session, steps: &[String]) {
    if session.report_rounds.is_empty() {
        return;
    }
    say!(
        out,
        "\nchecks and validator reports (the last {} rounds per step)",
        rimthan_engine::REPORT_ROUNDS_KEPT
    );
    // In workflow order; a step the registry no longer names goes last.
    let mut ordered: Vec<_> = session.report_rounds.iter().collect();
    ordered.sort_by_key(|(step, _)| {
        steps
            .iter()
            .position(|s| s == step.as_str())
            .unwrap_or(usize::MAX)
    });
    for (step, rounds) in ordered {
        for round in rounds {
            say!(out, "  {step} round {} ({})", round.round, round.at);
            for c in &round.checks {
                let verdict = serde_json::to_value(c.verdict).unwrap_or_default();
                say!(
                    out,
                    "    check {} {} ({} findings; sha256 {})",
                    c.id,
                    verdict.as_str().unwrap_or("-"),
                    c.finding_count,
                    c.sha256
                );
                for f in &c.findings {
                    let at = location(f.path.as_deref(), f.line);
                    say!(
                        out,
                        "      {} {}: {}: {}",
                        f.severity,
                        printable(&at),
                        printable(&f.rule),
                        printable(&f.message)
                    );
                }
            }
            for r in &round.reports {
                let verdict = serde_json::to_value(r.verdict).unwrap_or_default();
                say!(
                    out,
                    "    {}@{} {}: {}",
                    printable(&r.validator_id),
                    printable(&r.validator_version),
                    verdict.as_str().unwrap_or("-"),
                    printable(&r.summary)
                );
                for f in &r.findings {
                    say!(
                        out,
                        "      {} {}: {}",
                        f.severity,
                        printable(f.path.as_deref().unwrap_or("-")),
                        printable(&f.message)
                    );
                }
                for (field, value) in &r.extra {
                    say!(
                        out,
                        "      {} = {}",
                        printable(field),
                        printable(&value.to_string())
                    );
                }
            }
        }
    }
}

/// Where a finding is: `path:line`, `path`, or `-`.
fn location(path: Option<&str>, line: Option<u32>) -> String {
    match (path, line) {
        (Some(path), Some(line)) => format!("{path}:{line}"),
        (Some(path), None) => path.to_owned(),
        _ => "-".into(),
    }
}

/// `text` with control and bidirectional-formatting characters shown escaped, so text an agent
/// wrote (a note, a report, a check's message quoting an output) cannot move the terminal's
/// cursor, recolour what follows or reorder what a reader sees.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else if is_bidi_format(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The Unicode characters that change the order text is shown in.
fn is_bidi_format(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_and_bidi_characters_are_shown_escaped() {
        assert_eq!(printable("ok: é"), "ok: é");
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("x\u{7}\u{202e}y"), "x\\u{7}\\u{202e}y");
        assert_eq!(printable("line\nnext"), "line\\nnext");
    }
}

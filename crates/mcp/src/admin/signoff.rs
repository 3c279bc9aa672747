//! The session page's sign-off panel (`docs/operations/facilitator.md` §5): for a session
//! waiting for sign-off, what the approval covers (the outputs' digests, the last round's
//! reports and check results, the findings to waive) and, for a signed-in approver, the forms
//! that approve, send back and waive. Whether this approver may decide is the engine's to say
//! when they post; the page shows the forms to every signed-in facilitator, and on a server that
//! authenticates nobody (loopback only) to the operator at the machine, who names themselves.

use maud::{Markup, html};
use rimthan_engine::{
    AuditEntry, Outcome, Session, Status, Verdict,
    approval::{Signoff, Waiver},
};
use rimthan_registry::Approval;

/// Who the forms are for: their CSRF token, and whether the decider names themselves (a name
/// asserted at the machine where nobody authenticates) or is known by their sign-in.
pub(super) struct Deciding<'a> {
    pub(super) csrf: &'a str,
    pub(super) asserted: bool,
}

/// The panel, empty unless the session waits for sign-off. Without `deciding` (nobody may
/// decide here), the page explains what deciding needs.
pub(super) fn panel(
    session: &Session,
    asked: Option<&Approval>,
    timeline: &[AuditEntry],
    deciding: Option<&Deciding<'_>>,
) -> Markup {
    let Some(pending) = session
        .approval
        .as_ref()
        .filter(|_| session.status == Status::AwaitingApproval)
    else {
        return html! {};
    };
    let step = pending.step.to_string();
    let round = session
        .report_rounds
        .get(&pending.step)
        .and_then(|rounds| rounds.last());
    let action = format!("/admin/sessions/{}/decide", session.id);
    // Every form binds its decision to the outputs' digests this page shows.
    let shown: String = pending
        .outputs
        .iter()
        .map(|(path, artifact)| format!("{path}={}\n", artifact.sha256))
        .collect();
    let hidden = |deciding: &Deciding<'_>| {
        html! {
            input type="hidden" name="csrf" value=(deciding.csrf);
            input type="hidden" name="step" value=(step);
            input type="hidden" name="revision" value=(session.revision);
            input type="hidden" name="expect_sha256" value=(shown);
            @if deciding.asserted {
                label { "Your name (recorded as asserted: nobody is signed in here) "
                    input type="text" name="as" required maxlength="128" autocomplete="name"; }
            }
        }
    };
    html! {
        section id="sign-off" aria-labelledby="sign-off-title" {
            h2 id="sign-off-title" { "Sign-off of " code { (step) } }
            p id="approvals-count" {
                "This step passed its validators and waits for approval. Approvals "
                (pending.approvals.len())
                @if let Some(asked) = asked { " of " (asked.approvers) }
                @for (i, a) in pending.approvals.iter().enumerate() {
                    (if i == 0 { ": " } else { ", " }) (a.subject)
                    @if let Some(basis) = &a.basis { " (" (basis) ")" }
                }
                "."
            }
            (thread(timeline, &step))
            @if deciding.is_some_and(|d| d.asserted) {
                p id="who-decides" { "Nobody is signed in here: the operator at this machine \
                    decides, under the name they give, recorded as asserted." }
            } @else if let Some(asked) = asked {
                p id="who-decides" { (who_may_decide(asked, session, &pending.approvals)) }
            }
            @if !pending.approvals.is_empty() {
                ul id="approvals" {
                    @for a in &pending.approvals { li { (approval(a)) } }
                }
            }
            @if !pending.waivers.is_empty() {
                h3 { "Findings waived" }
                ul id="waivers" {
                    @for w in &pending.waivers { li { (waiver(w)) } }
                }
            }
            h3 { "What you sign" }
            p { "Each output as the participant's harness attested it, with every check finding \
                beside its line." }
            (super::reading::outputs(
                &pending.outputs,
                &pending.texts,
                &pending.previous_texts,
                round.map_or(&[][..], |r| &r.checks[..]),
            ))
            @if let Some(round) = round {
                h3 { "Reports and checks of round " (round.round) }
                ul id="approval-reports" {
                    @for r in &round.reports {
                        li { (r.validator_id) " " (r.validator_version) ": "
                            (if r.verdict == Verdict::Pass { "pass" } else { "fail" })
                            " — " (r.summary) }
                    }
                    @for c in &round.checks {
                        li { "check " (c.id) ": " (if c.failed() { "fail" } else { "pass" }) " (" (c.finding_count) (if c.finding_count == 1 { " finding)" } else { " findings)" }) }
                    }
                }
            }
            @if !pending.waivable.is_empty() {
                h3 { "Check findings to waive or send back" }
                ul id="waivable" {
                    @for f in &pending.waivable {
                        li {
                            (f.check_id.as_deref().unwrap_or("")) " · " (f.rule.as_deref().unwrap_or(""))
                            " · " (f.path.as_deref().unwrap_or(""))
                            @if let Some(line) = f.line { ":" (line) }
                            ": " (f.message)
                            @if let Some(help) = &f.help { " " (super::reading::help_line(help)) }
                            @if let Some(deciding) = deciding {
                                form method="post" action=(action) class="waive" {
                                    (hidden(deciding))
                                    input type="hidden" name="action" value="waive";
                                    input type="hidden" name="check" value=(f.check_id.as_deref().unwrap_or(""));
                                    input type="hidden" name="rule" value=(f.rule.as_deref().unwrap_or(""));
                                    input type="hidden" name="path" value=(f.path.as_deref().unwrap_or(""));
                                    label { "Reason " input type="text" name="note" required maxlength="4096"; }
                                    button type="submit" { "Waive" }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(deciding) = deciding {
                form method="post" action=(action) id="approve" {
                    (hidden(deciding))
                    input type="hidden" name="action" value="approve";
                    label for="approve-note" { "Note (optional)" }
                    textarea id="approve-note" name="note" maxlength="4096" {}
                    button type="submit" { "Approve" }
                }
                form method="post" action=(action) id="send-back" {
                    (hidden(deciding))
                    input type="hidden" name="action" value="send_back";
                    label for="send-back-note" { "What to change (required)" }
                    textarea id="send-back-note" name="note" required maxlength="4096" {}
                    button type="submit" { "Send back" }
                }
            } @else {
                p.notice { "Deciding needs a signed-in approver: start the server with "
                    code { "--auth" } " and sign in." }
            }
        }
    }
}

/// What people decided on `step` so far, oldest first, refusals left out: the send-backs' notes
/// an approver reads the new round against, and the approvals and waivers given.
fn thread(timeline: &[AuditEntry], step: &str) -> Markup {
    let decided: Vec<_> = timeline
        .iter()
        .filter(|e| e.outcome != Outcome::Rejected)
        .filter_map(|e| Some((e, e.decision.as_ref().filter(|d| d.step == step)?)))
        .collect();
    if decided.is_empty() {
        return html! {};
    }
    html! {
        h3 { "Decided on this step so far" }
        ol id="thread" {
            @for (e, d) in decided {
                li {
                    strong { (e.principal.as_deref().unwrap_or("someone unauthenticated")) }
                    @if d.asserted { " (name asserted)" }
                    " · " (e.tool.as_str()) " at " (e.at)
                    @if let Some(note) = &d.note { ": " (note) }
                }
            }
        }
    }
}

/// "Who may still decide: a release-manager or a facilitator of acme; not pat (who started
/// the session), not rui (already approved)."
fn who_may_decide(asked: &Approval, session: &Session, given: &[Signoff]) -> String {
    let organization = session
        .principal
        .as_ref()
        .and_then(|p| p.organization.as_deref());
    let of = organization.map_or(String::new(), |o| format!(" of {o}"));
    let mut kinds: Vec<String> = asked
        .roles
        .iter()
        .map(|r| format!("a holder of the role {r}{of}"))
        .collect();
    if asked.facilitators {
        kinds.push(format!("a facilitator{of}"));
    }
    let mut not = Vec::new();
    if let Some(participant) = session.principal.as_ref().filter(|_| !asked.self_approval) {
        not.push(format!("{} (who started the session)", participant.subject));
    }
    not.extend(
        given
            .iter()
            .map(|a| format!("{} (already approved)", a.subject)),
    );
    let mut said = format!("Who may still decide: {}", kinds.join(" or "));
    if !not.is_empty() {
        said.push_str(&format!("; not {}", not.join(", not ")));
    }
    said.push('.');
    said
}

/// Who signed each step off, on what ground and with what note, and the findings they waived:
/// empty until a step has been signed off.
pub(super) fn given(session: &Session) -> Markup {
    if session.signoffs.is_empty() {
        return html! {};
    }
    html! {
        section id="signed-off" aria-labelledby="signed-off-title" {
            h2 id="signed-off-title" { "Signed off" }
            @for (step, signed) in &session.signoffs {
                h3 { "Step " code { (step) } }
                ul.approvals {
                    @for a in &signed.approvals { li { (approval(a)) } }
                }
                @if !signed.waivers.is_empty() {
                    p { "Findings waived:" }
                    ul.waivers {
                        @for w in &signed.waivers { li { (waiver(w)) } }
                    }
                }
            }
        }
    }
}

/// "bob (database-owner) approved at …: note".
fn approval(a: &Signoff) -> Markup {
    html! {
        strong { (a.subject) }
        @if let Some(basis) = &a.basis { " (" (basis) ")" }
        @if !a.authenticated { " (name asserted, not authenticated)" }
        " approved at " (a.at)
        @if let Some(note) = &a.note { ": " (note) }
    }
}

/// "ann (facilitator) waived check up-lint rule r in path at …: reason".
fn waiver(w: &Waiver) -> Markup {
    html! {
        strong { (w.subject) }
        @if let Some(basis) = &w.basis { " (" (basis) ")" }
        @if !w.authenticated { " (name asserted, not authenticated)" }
        " waived check " code { (w.check_id) } " rule " code { (w.rule) } " in " code { (w.path) }
        " at " (w.at) ": " (w.reason)
    }
}

//! The session page's sign-off panel (`docs/operations/facilitator.md` §5): for a session
//! waiting for sign-off, what the approval covers (the outputs' digests, the last round's
//! reports and check results, the findings to waive) and, for a signed-in approver, the forms
//! that approve, send back and waive. Whether this approver may decide is the engine's to say
//! when they post; the page shows the forms to every signed-in facilitator, and on a server that
//! authenticates nobody (loopback only) to the operator at the machine, who names themselves.

use maud::{Markup, html};
use rimthan_engine::{
    Session, Status, Verdict,
    approval::{Signoff, Waiver},
};

/// Who the forms are for: their CSRF token, and whether the decider names themselves (a name
/// asserted at the machine where nobody authenticates) or is known by their sign-in.
pub(super) struct Deciding<'a> {
    pub(super) csrf: &'a str,
    pub(super) asserted: bool,
}

/// The panel, empty unless the session waits for sign-off. Without `deciding` (nobody may
/// decide here), the page explains what deciding needs.
pub(super) fn panel(session: &Session, deciding: Option<&Deciding<'_>>) -> Markup {
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
            p { "This step passed its validators and waits for approval. Approvals given: "
                (pending.approvals.len()) "." }
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
            h3 { "Outputs" }
            table id="approval-outputs" {
                thead { tr { th scope="col" { "Path" } th scope="col" { "sha256" } th scope="col" { "Bytes" } } }
                tbody {
                    @for (path, artifact) in &pending.outputs {
                        tr { td { code { (path) } } td { code { (artifact.sha256) } } td.n { (artifact.bytes) } }
                    }
                }
            }
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

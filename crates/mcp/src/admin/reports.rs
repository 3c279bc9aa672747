//! A session's validator reports on its page: every kept round of each step, so the findings
//! that sent a step back stay readable after it passed.

use maud::{Markup, html};
use rimthan_engine::{REPORT_ROUNDS_KEPT, Session};

/// The reports section of a session page.
pub(super) fn report_rounds(session: &Session) -> Markup {
    let text = |v: serde_json::Value| v.as_str().unwrap_or("").to_owned();
    html! {
        h2 { "Validator reports" }
        p { "Every judged round per step (the last " (REPORT_ROUNDS_KEPT) "), as submitted." }
        @if session.report_rounds.is_empty() {
            p { "None judged yet." }
        } @else {
            table id="reports" {
                thead { tr {
                    th scope="col" { "Step" } th scope="col" { "Round" } th scope="col" { "Validator" }
                    th scope="col" { "Verdict" } th scope="col" { "Summary" } th scope="col" { "Findings" }
                    th scope="col" { "Further fields" }
                } }
                tbody {
                    @for (step, rounds) in &session.report_rounds {
                        @for round in rounds {
                            @for r in &round.reports {
                                tr {
                                    td { (step) } td.n { (round.round) }
                                    td { (r.validator_id) " " (r.validator_version) }
                                    td { (text(serde_json::to_value(r.verdict).unwrap_or_default())) }
                                    td { (r.summary) }
                                    td { ul {
                                        @for f in &r.findings {
                                            li {
                                                (text(serde_json::to_value(f.severity).unwrap_or_default()))
                                                ": " (f.message)
                                                @if let Some(path) = &f.path { " (" (path) ")" }
                                            }
                                        }
                                    } }
                                    td { ul {
                                        @for (field, value) in &r.extra {
                                            li { code { (field) } " = " (value.to_string()) }
                                        }
                                    } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

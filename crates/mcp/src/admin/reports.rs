//! A session's deterministic checks and validator reports on its page: every kept round of each
//! step, so the findings that sent a step back stay readable after it passed.

use maud::{Markup, html};
use rimthan_engine::{REPORT_ROUNDS_KEPT, Session};

/// The reports section of a session page.
pub(super) fn report_rounds(session: &Session) -> Markup {
    let text = |v: serde_json::Value| v.as_str().unwrap_or("").to_owned();
    html! {
        (check_rounds(session))
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
                                                (f.severity)
                                                ": " (f.message)
                                                @if let Some(path) = &f.path { " (" (path) ")" }
                                            }
                                        }
                                    } }
                                    td { ul {
                                        @for (field, value) in &r.extra {
                                            li { code { (field) } ": " (readable(value, 0)) }
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

/// How deep a report's added field is laid out before the rest is shown as JSON.
const MAX_READABLE_DEPTH: usize = 4;

/// A report's added field as a person reads it: text as text, a list of records as a table
/// (one column per key), a record as a definition list, a list of values as a list.
fn readable(value: &serde_json::Value, depth: usize) -> Markup {
    use serde_json::Value;
    if depth >= MAX_READABLE_DEPTH {
        return html! { code { (value.to_string()) } };
    }
    match value {
        Value::String(text) => html! { (text) },
        Value::Array(items) if items.iter().all(Value::is_object) && !items.is_empty() => {
            let mut columns: Vec<&String> = Vec::new();
            for item in items.iter().filter_map(Value::as_object) {
                for key in item.keys() {
                    if !columns.contains(&key) {
                        columns.push(key);
                    }
                }
            }
            html! {
                table.field {
                    thead { tr { @for c in &columns { th scope="col" { (c) } } } }
                    tbody {
                        @for item in items.iter().filter_map(Value::as_object) {
                            tr { @for c in &columns {
                                td { @if let Some(v) = item.get(*c) { (readable(v, depth + 1)) } }
                            } }
                        }
                    }
                }
            }
        }
        Value::Array(items) => html! {
            ul { @for item in items { li { (readable(item, depth + 1)) } } }
        },
        Value::Object(fields) => html! {
            dl { @for (key, v) in fields { dt { (key) } dd { (readable(v, depth + 1)) } } }
        },
        other => html! { (other.to_string()) },
    }
}

/// The deterministic checks of every kept round: verdict, the digests they read, findings.
fn check_rounds(session: &Session) -> Markup {
    let rounds: Vec<_> = session
        .report_rounds
        .iter()
        .flat_map(|(step, rounds)| rounds.iter().map(move |r| (step, r)))
        .filter(|(_, r)| !r.checks.is_empty())
        .collect();
    html! {
        h2 { "Deterministic checks" }
        @if rounds.is_empty() {
            p { "No step of this session ran checks yet." }
        } @else {
            p { "Run by the server on the attested outputs of each judged round; a failed check \
                 sends the step back whatever the reports say." }
            table id="checks" {
                thead { tr {
                    th scope="col" { "Step" } th scope="col" { "Round" } th scope="col" { "Check" }
                    th scope="col" { "Verdict" } th scope="col" { "Read (sha256)" }
                    th scope="col" { "Findings" }
                } }
                tbody {
                    @for (step, round) in &rounds {
                        @for c in &round.checks {
                            tr {
                                td { (step) } td.n { (round.round) }
                                td { (c.id) }
                                td { (serde_json::to_value(c.verdict).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
                                td { ul {
                                    @for (path, sha256) in &c.inputs {
                                        li { (path) " " code { (&sha256[..12.min(sha256.len())]) } }
                                    }
                                } }
                                td {
                                    ul {
                                        @for f in &c.findings {
                                            li {
                                                (f.severity) " " code { (f.rule) } ": " (f.message)
                                                @if let Some(path) = &f.path {
                                                    " (" (path)
                                                    @if let Some(line) = f.line { ":" (line) }
                                                    ")"
                                                }
                                                @if let Some(help) = &f.help { " " (super::reading::help_line(help)) }
                                            }
                                        }
                                    }
                                    @if c.finding_count > c.findings.len() {
                                        p { "and " (c.finding_count - c.findings.len()) " more" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

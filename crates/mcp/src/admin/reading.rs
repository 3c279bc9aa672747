//! What an approver reads before they sign (`docs/operations/facilitator.md` §5): each output
//! the sign-off covers, as text with line numbers, every check finding beside the line it names,
//! and against the round an approver sent back, a diff or "unchanged". Generic over workflows:
//! an output is text, and JSON written on one line is shown indented.

use std::collections::BTreeMap;

use maud::{Markup, html};
use rimthan_engine::{AcceptedArtifact, CheckRecord};
use rimthan_registry::RuleHelp;
use similar::TextDiff;

/// Lines of context around each change in a diff.
const DIFF_CONTEXT: usize = 3;

/// A check finding as shown beside a line.
struct Remark<'a> {
    check: &'a str,
    rule: &'a str,
    severity: &'a str,
    message: &'a str,
    help: Option<&'a RuleHelp>,
}

/// Every output of the sign-off: its text when the server kept it, else its digest alone.
pub(super) fn outputs(
    outputs: &BTreeMap<String, AcceptedArtifact>,
    texts: &BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    checks: &[CheckRecord],
) -> Markup {
    html! {
        @for (index, (path, artifact)) in outputs.iter().enumerate() {
            section.output aria-labelledby=(format!("output-{index}")) {
                h4 id=(format!("output-{index}")) {
                    code { (path) } " · " (artifact.bytes) " bytes · sha256 " code { (artifact.sha256) }
                }
                @match texts.get(path) {
                    Some(text) => {
                        (numbered(index, text, &remarks(path, checks)))
                        (changes(text, previous.get(path).map(String::as_str), !previous.is_empty()))
                    }
                    None => p { "The server kept no text of this output (the session waited for \
                        sign-off before texts were kept): compare its sha256 with the file." },
                }
            }
        }
    }
}

/// The findings of `checks` in `path`, by line (0: findings of the whole file).
fn remarks<'a>(path: &str, checks: &'a [CheckRecord]) -> BTreeMap<u32, Vec<Remark<'a>>> {
    let mut by_line: BTreeMap<u32, Vec<Remark<'a>>> = BTreeMap::new();
    for check in checks {
        for finding in &check.findings {
            if finding.path.as_deref() == Some(path) {
                by_line
                    .entry(finding.line.unwrap_or(0))
                    .or_default()
                    .push(Remark {
                        check: &check.id,
                        rule: &finding.rule,
                        severity: finding.severity.as_str(),
                        message: &finding.message,
                        help: finding.help.as_ref(),
                    });
            }
        }
    }
    by_line
}

fn remark(r: &Remark<'_>) -> Markup {
    html! {
        span.remark {
            strong { (r.severity) } " · check " code { (r.check) } " rule " code { (r.rule) } ": " (r.message)
            @if let Some(help) = r.help { " " (help_line(help)) }
        }
    }
}

/// A rule's help beside its finding: the line, and its page when the check names one.
pub(super) fn help_line(help: &RuleHelp) -> Markup {
    html! {
        span.help {
            "Fix: " (help.text)
            @if let Some(url) = &help.url { " (" a href=(url) rel="noopener noreferrer" { "about the rule" } ")" }
        }
    }
}

/// The text, one table row a line, each finding in a row under its line. JSON written on one
/// line (and carrying no line-anchored finding) is shown indented.
fn numbered(index: usize, text: &str, remarks: &BTreeMap<u32, Vec<Remark<'_>>>) -> Markup {
    let indented = (text.lines().count() <= 1 && remarks.keys().all(|l| *l <= 1))
        .then(|| serde_json::from_str::<serde_json::Value>(text).ok())
        .flatten()
        .and_then(|value| serde_json::to_string_pretty(&value).ok());
    let shown = indented.as_deref().unwrap_or(text);
    html! {
        @if let Some(whole) = remarks.get(&0) {
            ul.remarks { @for r in whole { li { (remark(r)) } } }
        }
        @if indented.is_some() { p.note { "Written on one line; shown indented." } }
        table.text aria-label=(format!("text of output {}", index + 1)) {
            thead { tr { th scope="col" { "Line" } th scope="col" { "Text" } } }
            tbody {
                @for (n, line) in shown.lines().enumerate() {
                    @let n = n as u32 + 1;
                    tr id=(format!("o{index}-l{n}")) {
                        td.n { (n) }
                        td { code { (line) } }
                    }
                    @if indented.is_none() {
                        @for r in remarks.get(&n).into_iter().flatten() {
                            tr.finding { td.n { "↑" } td { (remark(r)) } }
                        }
                    }
                }
            }
        }
    }
}

/// Against the round an approver sent back: "unchanged", or a unified diff.
fn changes(text: &str, previous: Option<&str>, after_send_back: bool) -> Markup {
    match previous {
        None if after_send_back => html! {
            p.changes { "New since the send-back: the round sent back had no such output." }
        },
        None => html! {},
        Some(previous) if previous == text => html! {
            p.changes { "Unchanged since the send-back." }
        },
        Some(previous) => {
            let diff = TextDiff::from_lines(previous, text)
                .unified_diff()
                .context_radius(DIFF_CONTEXT)
                .header("sent back", "now")
                .to_string();
            html! {
                details.changes open {
                    summary { "Changed since the send-back" }
                    pre { code { (diff) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::changes;

    #[test]
    fn a_round_is_read_against_the_one_sent_back() {
        let same = changes("a\nb\n", Some("a\nb\n"), true).into_string();
        assert!(same.contains("Unchanged since the send-back."), "{same}");
        let changed = changes("a\nc\n", Some("a\nb\n"), true).into_string();
        assert!(
            changed.contains("-b\n") && changed.contains("+c\n"),
            "{changed}"
        );
        let new = changes("a\n", None, true).into_string();
        assert!(new.contains("New since the send-back"), "{new}");
        assert!(changes("a\n", None, false).into_string().is_empty());
    }
}

//! The pages of the facilitator's view. Every value is written through `maud`, which escapes
//! it, so a principal named `<script>` reads as text.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use rimthan_engine::{
    AuditEntry, DeliveryRecord, Session, SessionSummary, StatsQuery, Status, Waiting,
    WorkflowCount, WorkflowStats, chain::AuditVerification, store::position,
};

use super::{
    Access, Filters, PAGE_ROWS, Viewer,
    charts::{self, Bar},
};

/// Timeline rows a session page shows at most (the latest).
pub(super) const TIMELINE_ROWS: u32 = 500;

const STATUSES: [Status; 5] = [
    Status::Active,
    Status::Revise,
    Status::AwaitingApproval,
    Status::Completed,
    Status::Expired,
];

// Colours meet WCAG AA contrast on white; focus is always visible.
const STYLE: &str = "
body{font-family:system-ui,sans-serif;color:#1a1a1a;background:#fff;margin:0;line-height:1.45}
header,main{padding:0 1.5rem}header{border-bottom:1px solid #767676;padding-bottom:.5rem}
nav a{margin-right:1rem}a{color:#0b4f8a}a:focus,button:focus,input:focus,select:focus{outline:3px solid #b35900;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:1rem;background:#fff;padding:.25rem}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}th,td{border:1px solid #767676;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right}code{font-size:.9em;word-break:break-all}
form.filters{display:flex;flex-wrap:wrap;gap:.75rem;align-items:end;margin:1rem 0}form label{display:block;font-weight:600}
input,select,button{font:inherit;padding:.25rem .4rem;border:1px solid #595959;border-radius:3px}button{background:#0b4f8a;color:#fff}
figure{margin:1rem 0}figcaption{font-weight:600}.chart-bar{fill:#0b4f8a}.chart-text{fill:#1a1a1a;font-size:13px}
.inline{display:inline}.notice{background:#fff4e5;border-left:4px solid #b35900;padding:.5rem}dl{display:grid;grid-template-columns:max-content auto;gap:.25rem 1rem}dt{font-weight:600}
table.text{font-family:ui-monospace,monospace;width:100%}table.text td{border-width:0 0 0 1px;padding:0 .5rem}table.text code{white-space:pre-wrap;word-break:normal}
tr.finding td{background:#fff4e5}.remark strong{color:#8a1c00}.changes pre{background:#f6f6f6;padding:.5rem;overflow-x:auto}
";

fn who(access: &Access, viewer: Option<&Viewer>) -> Markup {
    html! {
        @match (access, viewer) {
            (Access::Loopback, _) => p.notice {
                "No authentication: this view is served only because the server listens on "
                "loopback, so only this machine reaches it."
            },
            (Access::Facilitators(_), Some(v)) => p {
                "Signed in as " strong { (v.subject.as_deref().unwrap_or("?")) } " · sees "
                @match (&v.organization, v.waits_only) {
                    (_, true) => "the sessions waiting for their sign-off",
                    (Some(o), false) => { "organization " strong { (o) } " only" },
                    (None, false) => "every organization",
                }
                form.inline method="post" action="/admin/logout" {
                    " · " button type="submit" { "Sign out" }
                }
            },
            (Access::Facilitators(_), None) => {},
        }
    }
}

fn layout(title: &str, who: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · rimthan" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header {
                    nav aria-label="Facilitator" { a href="/admin" { "Sessions" } a href="/admin/waiting" { "Waiting for you" } }
                    (who)
                }
                main id="main" { (body) }
            }
        }
    }
}

/// A refused or failed request.
pub(super) fn refusal(title: &str, message: &str, login: bool) -> Markup {
    layout(
        title,
        html! {},
        html! {
            h1 { (title) }
            p { (message) }
            @if login { p { a href="/admin/login" { "Sign in with a facilitator token" } } }
        },
    )
}

/// The sign-in form (tokens travel in a cookie only the view reads).
pub(super) fn login(access: &Access, error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        who(access, None),
        html! {
            h1 { "Sign in" }
            @if let Some(error) = error { p.notice role="alert" { (error) } }
            form method="post" action="/admin/login" {
                label for="token" { "Facilitator token" }
                input type="password" id="token" name="token" autocomplete="off" required;
                " "
                button type="submit" { "Sign in" }
            }
        },
    )
}

fn query_string(filters: &Filters, page: u64) -> String {
    let mut pairs = vec![("page".to_owned(), page.to_string())];
    let mut push = |k: &str, v: Option<&str>| {
        if let Some(v) = v {
            pairs.push((k.to_owned(), v.to_owned()));
        }
    };
    push("status", filters.status.map(Status::as_str));
    push("workflow", filters.workflow.as_deref());
    push("organization", filters.organization.as_deref());
    push("since", filters.since.as_deref());
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes a query value or path segment.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn workflow_href(id: &str, version: &str) -> String {
    format!("/admin/workflows/{}/{}", encode(id), encode(version))
}

/// The sessions waiting for a sign-off the viewer may give, soonest expiry first (a role
/// holder's front page, and `/admin/waiting` for anyone who may decide).
pub(super) fn waiting(
    access: &Access,
    viewer: &Viewer,
    waiting: &[Waiting],
    now: time::OffsetDateTime,
) -> Markup {
    layout(
        "Waiting for you",
        who(access, Some(viewer)),
        html! {
            h1 { "Waiting for you" }
            p { "Sessions whose step waits for a sign-off you may give: by a role the step names, \
                or as a facilitator it admits. Those that expire soonest come first." }
            @if waiting.is_empty() {
                p id="nothing-waits" { "Nothing waits for you." }
            } @else {
                table id="waiting" {
                    caption { "Waiting for your sign-off" }
                    thead { tr {
                        th scope="col" { "Session" } th scope="col" { "Participant" }
                        th scope="col" { "Workflow" } th scope="col" { "Step" }
                        th scope="col" { "Expires" } th scope="col" { "Waiting since" }
                    } }
                    tbody {
                        @for w in waiting {
                            tr data-session-id=(w.summary.id) {
                                td { a href=(format!("/admin/sessions/{}", w.summary.id)) { code { (w.summary.id) } } }
                                td { (w.summary.principal.as_deref().unwrap_or("—")) }
                                td { (w.summary.workflow) " " (w.summary.workflow_version) }
                                td { (w.step) }
                                td.expires {
                                    @match &w.expires_at {
                                        Some(at) => { (at) " (" (time_left(at, now)) ")" }
                                        None => "never",
                                    }
                                }
                                td { (w.requested_at.as_deref().unwrap_or(&w.summary.updated_at)) }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// Webhook deliveries, when there are any: each event, its receiver, state, attempts and the
/// last error (`docs/operations/deploy.md` §9).
pub(super) fn deliveries(caption: &str, id: &str, rows: &[DeliveryRecord]) -> Markup {
    html! {
        @if !rows.is_empty() {
            table id=(id) {
                caption { (caption) }
                thead { tr {
                    th scope="col" { "Event" } th scope="col" { "Type" } th scope="col" { "Receiver" }
                    th scope="col" { "State" } th scope="col" { "Attempts" } th scope="col" { "Last error" }
                } }
                tbody {
                    @for d in rows {
                        tr {
                            td { code { (d.event_id) } } td { (d.event) } td { (d.endpoint) }
                            td { (d.state) } td.n { (d.attempts) }
                            td { (d.last_error.as_deref().unwrap_or("—")) }
                        }
                    }
                }
            }
        }
    }
}

/// How long until `at` (RFC 3339), as a person reads it: `2 d 4 h left`, `35 min left`.
pub(super) fn time_left(at: &str, now: time::OffsetDateTime) -> String {
    let Ok(at) = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
    else {
        return "unknown".into();
    };
    let left = (at - now).whole_minutes();
    if left < 0 {
        return "expiring now".into();
    }
    let (days, hours, minutes) = (left / 1440, left % 1440 / 60, left % 60);
    match (days, hours) {
        (0, 0) => format!("{minutes} min left"),
        (0, _) => format!("{hours} h {minutes} min left"),
        _ => format!("{days} d {hours} h left"),
    }
}

/// The session list with its filters, and the workflows with sessions.
pub(super) fn list(
    access: &Access,
    viewer: &Viewer,
    filters: &Filters,
    rows: &[(SessionSummary, Option<usize>)],
    workflows: &[WorkflowCount],
    failed: &[DeliveryRecord],
) -> Markup {
    layout(
        "Sessions",
        who(access, Some(viewer)),
        html! {
            h1 { "Sessions" }
            (deliveries("Webhook events given up on", "failed-webhooks", failed))
            form.filters method="get" action="/admin" aria-label="Filter sessions" {
                div {
                    label for="status" { "Status" }
                    select id="status" name="status" {
                        option value="" { "any" }
                        @for s in STATUSES {
                            option value=(s.as_str()) selected[filters.status == Some(s)] { (s.as_str()) }
                        }
                    }
                }
                div {
                    label for="workflow" { "Workflow" }
                    input id="workflow" name="workflow" value=(filters.workflow.as_deref().unwrap_or(""));
                }
                @if viewer.organization.is_none() {
                    div {
                        label for="organization" { "Organization" }
                        input id="organization" name="organization" value=(filters.organization.as_deref().unwrap_or(""));
                    }
                }
                div {
                    label for="since" { "Changed within (30m, 12h, 7d)" }
                    input id="since" name="since" value=(filters.since.as_deref().unwrap_or(""));
                }
                div { button type="submit" { "Filter" } }
            }
            @if rows.is_empty() {
                p { "No sessions match." }
            } @else {
                table id="sessions" {
                    caption { "Sessions, most recently changed first — page " (filters.page) }
                    thead { tr {
                        th scope="col" { "Session" } th scope="col" { "Principal" }
                        th scope="col" { "Organization" } th scope="col" { "Workflow" }
                        th scope="col" { "Release" } th scope="col" { "Harness" }
                        th scope="col" { "Step" } th scope="col" { "Status" }
                        th scope="col" { "Revise rounds" } th scope="col" { "Started" }
                        th scope="col" { "Last change" }
                    } }
                    tbody {
                        @for (s, steps) in rows {
                            tr data-session-id=(s.id) data-status=(s.status.as_str())
                                data-step-index=(s.step_index) data-harness=(s.harness)
                                data-workflow=(s.workflow) data-revise-rounds=(s.revise_rounds) {
                                td { a href=(format!("/admin/sessions/{}", s.id)) { code { (s.id) } } }
                                td { (s.principal.as_deref().unwrap_or("—")) }
                                td { (s.organization.as_deref().unwrap_or("—")) }
                                td { a href=(workflow_href(&s.workflow, &s.workflow_version)) { (s.workflow) " " (s.workflow_version) } }
                                td { (s.release) }
                                td { (s.harness) }
                                td.n { (s.position(*steps)) }
                                td { (s.status.as_str()) }
                                td.n { (s.revise_rounds) }
                                td { (s.created_at) }
                                td { (s.updated_at) }
                            }
                        }
                    }
                }
            }
            nav aria-label="Pages" {
                @if filters.page > 1 {
                    a href=(format!("/admin?{}", query_string(filters, filters.page - 1))) { "Previous page" } " "
                }
                @if rows.len() == PAGE_ROWS as usize {
                    a href=(format!("/admin?{}", query_string(filters, filters.page + 1))) { "Next page" }
                }
            }
            h2 { "Workflows" }
            @if workflows.is_empty() {
                p { "No workflow has sessions yet." }
            } @else {
                table id="workflows" {
                    thead { tr {
                        th scope="col" { "Workflow" } th scope="col" { "Version" }
                        th scope="col" { "Sessions" } th scope="col" { "Completed" }
                    } }
                    tbody {
                        @for w in workflows {
                            tr data-workflow=(w.workflow) data-version=(w.workflow_version) {
                                td { a href=(workflow_href(&w.workflow, &w.workflow_version)) { (w.workflow) } }
                                td { (w.workflow_version) }
                                td.n { (w.sessions) }
                                td.n { (w.completed) }
                            }
                        }
                    }
                }
            }
        },
    )
}

fn codes(entry: &AuditEntry) -> String {
    entry
        .codes
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One session: where it stands, its timeline, latest findings, validator reports and
/// accepted outputs.
pub(super) fn session(
    access: &Access,
    viewer: &Viewer,
    session: &Session,
    steps: &[String],
    timeline: &[AuditEntry],
    chain: &AuditVerification,
    sign_off: Markup,
) -> Markup {
    let id = session.id.to_string();
    let at = position(
        session.status,
        session.step_index as u64,
        (!steps.is_empty()).then_some(steps.len()),
    );
    let active_step = steps.get(session.step_index).map(String::as_str);
    let shown = &timeline[timeline.len().saturating_sub(TIMELINE_ROWS as usize)..];
    let principal = session.principal.as_ref();
    layout(
        &format!("Session {id}"),
        who(access, Some(viewer)),
        html! {
            h1 { "Session " code { (id) } }
            dl {
                dt { "Principal" } dd { (principal.map_or("—", |p| p.subject.as_str())) }
                dt { "Organization" } dd { (principal.and_then(|p| p.organization.as_deref()).unwrap_or("—")) }
                dt { "Workflow" } dd {
                    a href=(workflow_href(session.workflow.as_str(), &session.workflow_version.to_string())) {
                        (session.workflow) " " (session.workflow_version)
                    }
                }
                dt { "Release" } dd { (session.release) }
                dt { "Harness" } dd { (session.host.harness.as_str()) }
                dt { "Step" } dd { (at) @if let Some(step) = active_step { " · " (step) } }
                dt { "Status" } dd { (session.status.as_str()) }
                dt { "Revise rounds" } dd { (session.revise_rounds) }
                dt { "Started" } dd { (session.created_at) }
                dt { "Last change" } dd { (session.updated_at) }
                dt { "Audit chain" } dd id="audit-chain" {
                    @if chain.verified() {
                        "verifies (" (chain.entries) " entries)"
                    } @else {
                        strong { "broken" } ": "
                        @for (i, b) in chain.breaks.iter().enumerate() {
                            @if i > 0 { "; " }
                            (b.kind.as_str())
                            @if let Some(index) = b.index { " at entry " (index) }
                        }
                    }
                }
                @if session.status == Status::Completed {
                    dt { "Provenance" } dd {
                        a id="provenance" href={ "/admin/sessions/" (id) "/provenance.json" } { "signed statement" }
                        " (the participant keeps it as " code { ".rimthan/workflow-session.intoto.json" } ")"
                    }
                }
            }
            (sign_off)
            h2 { "Timeline" }
            @if shown.len() < timeline.len() {
                p { "The latest " (shown.len()) " calls; " code { "rimthan sessions show " (id) } " prints them all." }
            }
            table id="timeline" {
                thead { tr {
                    th scope="col" { "Time" } th scope="col" { "Call" } th scope="col" { "Step" }
                    th scope="col" { "Outcome" } th scope="col" { "Codes" } th scope="col" { "Failed validators" }
                    th scope="col" { "Decided by" }
                } }
                tbody {
                    @for e in shown {
                        tr {
                            td { (e.at) }
                            td { (e.tool.as_str()) }
                            td {
                                @if let Some(j) = &e.judgement { (j.step) }
                                @if let Some(d) = &e.decision { (d.step) }
                            }
                            td { (e.outcome.as_str()) }
                            td { (codes(e)) }
                            td { @if let Some(j) = &e.judgement { (j.failed.join(", ")) } }
                            td {
                                // A decision, refused ones too, names who made it and what they wrote.
                                @if let Some(d) = &e.decision {
                                    (e.principal.as_deref().unwrap_or("someone unauthenticated"))
                                    @if d.asserted { " (name asserted)" }
                                    @if let (Some(check), Some(rule)) = (&d.check_id, &d.rule) {
                                        ", waiving " code { (check) } " " code { (rule) }
                                    }
                                    @if let Some(note) = &d.note { ": " (note) }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Latest findings" }
            @if session.findings.is_empty() {
                p { "None: the last submission passed, or none was judged yet." }
            } @else {
                table id="findings" {
                    thead { tr {
                        th scope="col" { "Validator" } th scope="col" { "Severity" }
                        th scope="col" { "Finding" } th scope="col" { "Where" }
                    } }
                    tbody {
                        @for f in &session.findings {
                            tr {
                                td { (f.validator_id) } td { (f.severity) } td { (f.message) }
                                td { (f.path.as_deref().unwrap_or("")) (f.pointer.as_deref().map(|p| format!(" {p}")).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
            (super::reports::report_rounds(session))
            h2 { "Accepted outputs" }
            p { "What was attested and accepted; the server keeps digests, never the files." }
            @if session.ledger.is_empty() {
                p { "None yet." }
            } @else {
                table id="outputs" {
                    thead { tr {
                        th scope="col" { "Path" } th scope="col" { "Step" }
                        th scope="col" { "Bytes" } th scope="col" { "sha256" }
                    } }
                    tbody {
                        @for (path, a) in &session.ledger {
                            tr { td { code { (path) } } td { (a.owner_step) } td.n { (a.bytes) } td { code { (a.sha256) } } }
                        }
                    }
                }
            }
        },
    )
}

fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "—".to_owned()
    } else {
        format!("{:.0}%", part as f64 * 100.0 / whole as f64)
    }
}

/// One workflow version: how far sessions got, what sent them back, how long steps took, and
/// which harnesses they ran on.
pub(super) fn workflow(
    access: &Access,
    viewer: &Viewer,
    query: &StatsQuery,
    steps: &[String],
    stats: &WorkflowStats,
) -> Markup {
    let name = |i: u64| {
        steps
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| format!("step {}", i + 1))
    };
    let reached = stats.reached(steps.len());
    let completed = stats.in_status(Status::Completed);
    let started = reached.first().copied().unwrap_or(completed);
    let here = |i: usize, status: Status| -> u64 {
        stats
            .sessions
            .iter()
            .filter(|c| c.step_index == i as u64 && c.status == status)
            .map(|c| c.sessions)
            .sum()
    };
    let mut funnel: Vec<Bar> = reached
        .iter()
        .enumerate()
        .map(|(i, n)| Bar {
            label: format!("{}. {}", i + 1, name(i as u64)),
            value: *n as f64,
            shown: format!("{n} ({})", percent(*n, started)),
        })
        .collect();
    funnel.push(Bar {
        label: "Completed".into(),
        value: completed as f64,
        shown: format!("{completed} ({})", percent(completed, started)),
    });
    let judged = |i: u64| {
        stats
            .steps
            .iter()
            .find(|s| s.step_index == i)
            .map_or(0, |s| s.judged)
    };
    let revise: Vec<Bar> = stats
        .failures
        .iter()
        .map(|f| Bar {
            label: format!("{} · {}", name(f.step_index), f.validator),
            value: f.failed as f64 / judged(f.step_index).max(1) as f64,
            shown: format!(
                "{} of {} ({})",
                f.failed,
                judged(f.step_index),
                percent(f.failed, judged(f.step_index))
            ),
        })
        .collect();
    let times: Vec<Bar> = stats
        .steps
        .iter()
        .flat_map(|s| {
            [
                ("median", s.median_seconds),
                ("90th percentile", s.p90_seconds),
            ]
            .into_iter()
            .filter_map(move |(which, seconds)| seconds.map(|t| (s.step_index, which, t)))
        })
        .map(|(i, which, t)| Bar {
            label: format!("{} · {which}", name(i)),
            value: t as f64,
            shown: charts::duration(t),
        })
        .collect();
    let harnesses = stats.by_harness();
    let harness_bars: Vec<Bar> = harnesses
        .iter()
        .map(|(h, n)| Bar {
            label: (*h).to_owned(),
            value: *n as f64,
            shown: n.to_string(),
        })
        .collect();
    let title = format!("Workflow {} {}", query.workflow, query.workflow_version);
    layout(
        &title,
        who(access, Some(viewer)),
        html! {
            h1 { "Workflow " (query.workflow) " " (query.workflow_version) }
            @if let Some(o) = &query.organization { p { "Counting the sessions of organization " strong { (o) } " only." } }
            p id="started" data-count=(started) { (counted(started, "session", "sessions")) " started." }
            p id="completed" data-count=(completed) { (completed) " completed." }
            p id="refused-starts" data-count=(stats.refused_starts) {
                (counted(stats.refused_starts, "start", "starts"))
                " refused for blockers (they store no session)."
            }
            h2 { "How far sessions got" }
            figure id="funnel-chart" {
                (charts::bars("funnel-svg", "Sessions reaching each step",
                    &format!("Of {started} sessions started, {completed} completed."), &funnel, started as f64))
                figcaption { "Sessions reaching each step, and completing." }
            }
            table id="funnel" {
                thead { tr {
                    th scope="col" { "Step" } th scope="col" { "Reached" }
                    th scope="col" { "Working on it" } th scope="col" { "In revision" }
                } }
                tbody {
                    @for (i, n) in reached.iter().enumerate() {
                        tr data-step-index=(i) data-reached=(n) {
                            th scope="row" { (i + 1) ". " (name(i as u64)) }
                            td.n { (n) } td.n { (here(i, Status::Active)) } td.n { (here(i, Status::Revise)) }
                        }
                    }
                }
            }
            h2 { "What sends sessions back" }
            figure id="revise-chart" {
                (charts::bars("revise-svg", "Revise rate per validator and step",
                    "The share of a step's judged submissions each validator failed.", &revise, 1.0))
                figcaption { "Revise rate per validator and step." }
            }
            table id="revise" {
                thead { tr {
                    th scope="col" { "Step" } th scope="col" { "Submissions judged" }
                    th scope="col" { "Sent back" } th scope="col" { "Rate" }
                } }
                tbody {
                    @for s in &stats.steps {
                        tr data-step-index=(s.step_index) data-judged=(s.judged) data-revised=(s.revised) {
                            th scope="row" { (name(s.step_index)) }
                            td.n { (s.judged) } td.n { (s.revised) } td.n { (percent(s.revised, s.judged)) }
                        }
                    }
                }
            }
            @if !stats.failures.is_empty() {
                table id="validators" {
                    thead { tr {
                        th scope="col" { "Step" } th scope="col" { "Validator" } th scope="col" { "Failed" }
                    } }
                    tbody {
                        @for f in &stats.failures {
                            tr { td { (name(f.step_index)) } th scope="row" { (f.validator) } td.n { (f.failed) } }
                        }
                    }
                }
            }
            h2 { "Time per step" }
            figure id="times-chart" {
                (charts::bars("times-svg", "Time per step, median and 90th percentile",
                    "From entering a step to passing it.", &times, 0.0))
                figcaption { "Time from entering a step to passing it." }
            }
            table id="times" {
                thead { tr {
                    th scope="col" { "Step" } th scope="col" { "Passes timed" }
                    th scope="col" { "Median" } th scope="col" { "90th percentile" }
                } }
                tbody {
                    @for s in &stats.steps {
                        tr {
                            th scope="row" { (name(s.step_index)) }
                            td.n { (s.timed) }
                            td.n { (s.median_seconds.map(charts::duration).unwrap_or_default()) }
                            td.n { (s.p90_seconds.map(charts::duration).unwrap_or_default()) }
                        }
                    }
                }
            }
            h2 { "Harnesses" }
            figure id="harness-chart" {
                (charts::bars("harness-svg", "Sessions by harness",
                    "How many sessions each host program started.", &harness_bars, 0.0))
                figcaption { "Sessions by harness." }
            }
            table id="harnesses" {
                thead { tr { th scope="col" { "Harness" } th scope="col" { "Sessions" } } }
                tbody {
                    @for (h, n) in &harnesses {
                        tr data-harness=(h) data-count=(n) { th scope="row" { (h) } td.n { (n) } }
                    }
                }
            }
            @if !stats.recent_refused_starts.is_empty() {
                h2 { "Refused starts" }
                table id="refused" {
                    caption { "The most recent starts refused for blockers" }
                    thead { tr { th scope="col" { "Time" } th scope="col" { "Principal" } th scope="col" { "Blockers" } } }
                    tbody {
                        @for e in &stats.recent_refused_starts {
                            tr { td { (e.at) } td { (e.principal.as_deref().unwrap_or("—")) } td { (codes(e)) } }
                        }
                    }
                }
            }
        },
    )
}

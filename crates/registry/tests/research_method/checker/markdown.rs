//! The rules that read Markdown: the notes' sections and bullets, and the findings' sections,
//! sentences, Evidence lines, criteria and references.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{LEVELS, Report, SECTIONS, Source, Study, cited, independent, level, list, re, str_at};

/// Markdown split at its `## ` headings: (heading, the lines under it).
fn sections(text: &str) -> Vec<(String, Vec<&str>)> {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            out.push((heading.to_owned(), Vec::new()));
        } else if let Some((_, lines)) = out.last_mut() {
            lines.push(line);
        }
    }
    out
}

/// Checks the notes; returns the ids that have a section.
pub(super) fn notes(
    report: &mut Report,
    text: &str,
    sources: &BTreeMap<String, Source>,
) -> BTreeSet<String> {
    if text.lines().next() != Some("# Research notes") {
        report.breach("notes", "the notes do not start with '# Research notes'");
    }
    let parts = sections(text);
    let expected: Vec<String> = ordered(sources)
        .map(|(id, s)| format!("{id}: {}", s.title))
        .chain(["Gaps and disagreements".to_owned()])
        .collect();
    let headings: Vec<String> = parts.iter().map(|(h, _)| h.clone()).collect();
    if headings != expected {
        report.breach(
            "notes",
            format!("headings {headings:?}, expected {expected:?}"),
        );
    }
    let mut noted = BTreeSet::new();
    for (heading, lines) in &parts {
        let bullets = lines.iter().filter_map(|l| l.strip_prefix("- "));
        for id in cited(&lines.join("\n")) {
            if !sources.contains_key(&id) {
                report.breach(
                    "notes",
                    format!("section '{heading}' cites {id}, which is not a source"),
                );
            }
        }
        if heading == "Gaps and disagreements" {
            for bullet in bullets {
                if cited(bullet).is_empty()
                    && !bullet.starts_with("Gap:")
                    && !bullet.starts_with("Interpretation:")
                {
                    report.breach(
                        "notes",
                        format!("gap bullet neither cited nor marked: {bullet}"),
                    );
                }
            }
            continue;
        }
        let Some(id) = heading
            .split(':')
            .next()
            .filter(|id| sources.contains_key(*id))
        else {
            continue;
        };
        noted.insert(id.to_owned());
        let ends = re(&format!(r"\[{id}\] \([^()]+\)$"));
        let mut quoted = false;
        for bullet in bullets {
            if !ends.is_match(bullet) {
                report.breach(
                    "notes",
                    format!("{id}: bullet does not end with [{id}] and a location: {bullet}"),
                );
            }
            quoted |= re(r#""[^"]{8,}""#).is_match(bullet);
        }
        if !quoted {
            report.breach("notes", format!("{id}: no passage quoted word for word"));
        }
    }
    noted
}

/// Sources in id order (S2 before S10).
fn ordered(sources: &BTreeMap<String, Source>) -> impl Iterator<Item = (&String, &Source)> {
    let mut all: Vec<_> = sources.iter().collect();
    all.sort_by_key(|(id, _)| id[1..].parse::<u32>().unwrap_or(u32::MAX));
    all.into_iter()
}

/// Sentences of a paragraph: split after `.`, `?` or `!` when a capital or `[` follows.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        current.push(*c);
        let next = chars.get(i + 2);
        if matches!(c, '.' | '?' | '!')
            && chars.get(i + 1) == Some(&' ')
            && next.is_some_and(|n| n.is_uppercase())
        {
            out.push(std::mem::take(&mut current).trim().to_owned());
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

pub(super) fn findings(
    report: &mut Report,
    study: &Study<'_>,
    sources: &BTreeMap<String, Source>,
    noted: &BTreeSet<String>,
) {
    const RULE: &str = "findings";
    let text = study.findings;
    let question = str_at(study.question, "question");
    let as_of = str_at(study.sources, "as_of");
    let mut lines = text.lines().filter(|l| !l.is_empty());
    if lines.next() != Some(&format!("# Findings: {question}")) {
        report.breach(
            RULE,
            "the title line is not '# Findings: ' and the question verbatim",
        );
    }
    if lines.next() != Some(&format!("As of {as_of}.")) {
        report.breach(RULE, format!("the second line is not 'As of {as_of}.'"));
    }
    let split = sections(text);
    let headings: Vec<String> = split.iter().map(|(h, _)| h.clone()).collect();
    let parts: BTreeMap<String, Vec<&str>> = split.into_iter().collect();
    if headings != SECTIONS {
        report.breach(
            RULE,
            format!("sections {headings:?}, expected {SECTIONS:?}"),
        );
    }
    let body = |name: &str| parts.get(name).map(|l| l.join("\n")).unwrap_or_default();
    let all_cited = cited(
        &SECTIONS[..3]
            .iter()
            .map(|s| body(s))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    for id in &all_cited {
        if !sources.contains_key(id) || !noted.contains(id) {
            report.breach(
                RULE,
                format!("{id} is cited but has no source entry or no notes section"),
            );
        }
    }
    for name in ["Answer", "Conflicting evidence"] {
        for paragraph in body(name).split("\n\n") {
            uncited(report, &paragraph.replace('\n', " "));
        }
    }
    let key = key_findings(report, &body("Key findings"), sources);
    answer_confidence(report, &body("Answer"), &key);
    criteria(report, study.question, &body("Success criteria"));
    let method = body("Method");
    let screened: u64 = list(&study.sources["searches"])
        .iter()
        .filter_map(|q| q["screened"].as_u64())
        .sum();
    let stop = str_at(&study.sources["stop"], "rule");
    for needed in [as_of.to_owned(), screened.to_string(), stop.to_owned()] {
        if !method.contains(&needed) {
            report.breach(RULE, format!("Method does not name {needed}"));
        }
    }
    gaps(report, study.notes, &body("Success criteria"));
    references(report, &body("References"), &all_cited, sources);
    conflicts(report, study.notes, &body("Conflicting evidence"));
}

fn uncited(report: &mut Report, paragraph: &str) {
    for sentence in sentences(paragraph) {
        let exempt = sentence.starts_with("Inference:") || sentence.starts_with("Confidence:");
        if !exempt && cited(&sentence).is_empty() {
            report.breach(
                "findings",
                format!("sentence without a source id: {sentence}"),
            );
        }
    }
}

/// Checks each numbered key finding; returns their confidence levels.
fn key_findings(report: &mut Report, body: &str, sources: &BTreeMap<String, Source>) -> Vec<usize> {
    let evidence_line = re(r"^Evidence: (.+)\. Rule: (.+)\. Confidence: (high|medium|low)\.$");
    let entry_pattern = re(r"(S[1-9][0-9]*) \(([^()]*)\)");
    let item = re(r"^(high|medium|low), (full text|abstract only|participant-provided)$");
    let mut levels = Vec::new();
    let mut claim = String::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(number) = re(r"^[0-9]+\. ").find(line) {
            claim = line[number.end()..].to_owned();
            uncited(report, &claim);
            continue;
        }
        let Some(caps) = evidence_line.captures(line) else {
            report.breach(
                "findings",
                format!("key finding line is neither a claim nor an Evidence line: {line}"),
            );
            continue;
        };
        let stated = level(&caps[3]).expect("the pattern admits only levels");
        levels.push(stated);
        let mut listed = BTreeSet::new();
        let mut cited_sources = Vec::new();
        for entry in entry_pattern.captures_iter(&caps[1]) {
            let id = entry[1].to_owned();
            let Some(e) = item.captures(&entry[2]) else {
                report.breach(
                    "findings",
                    format!(
                        "Evidence entry '{}' is not 'Sn (credibility, access)'",
                        &entry[0]
                    ),
                );
                continue;
            };
            if let Some(source) = sources.get(&id) {
                let access = source
                    .access
                    .replace("full-text", "full text")
                    .replace("abstract-only", "abstract only");
                if source.credibility != e[1] || access != e[2] {
                    report.breach(
                        "findings",
                        format!(
                            "Evidence gives {id} as ({}, {}), sources.json says ({}, {access})",
                            &e[1], &e[2], source.credibility
                        ),
                    );
                }
                cited_sources.push(source);
            }
            listed.insert(id);
        }
        if listed != cited(&claim) {
            report.breach(
                "findings",
                format!(
                    "Evidence lists {listed:?} but the finding cites {:?}",
                    cited(&claim)
                ),
            );
        }
        let allowed = allowed_level(&caps[2], &cited_sources);
        if stated > allowed {
            report.breach(
                "certainty",
                format!(
                    "'{claim}' states {} where the rule allows at most {}",
                    LEVELS[stated], LEVELS[allowed]
                ),
            );
        }
    }
    levels
}

/// The highest confidence the certainty rule allows from what `sources.json` records.
fn allowed_level(rule: &str, cited: &[&Source]) -> usize {
    let full = |s: &&Source| s.access == "full-text";
    if rule == "own statement" {
        return if cited.iter().all(full) { 2 } else { 1 };
    }
    let independent_count = |credibility: &str| {
        let mut chosen: Vec<&Source> = Vec::new();
        for s in cited.iter().filter(|s| s.credibility == credibility) {
            if chosen.iter().all(|c| independent(c, s)) {
                chosen.push(s);
            }
        }
        chosen.len()
    };
    let highs = independent_count("high");
    let base: usize = if highs >= 2 {
        2
    } else if highs == 1 || independent_count("medium") >= 2 {
        1
    } else {
        0
    };
    let steps = usize::from(cited.iter().any(|s| s.conflicted))
        + usize::from(cited.iter().any(|s| s.access == "abstract-only"));
    base.saturating_sub(steps)
}

fn answer_confidence(report: &mut Report, answer: &str, key: &[usize]) {
    let stated = re(r"Confidence: (high|medium|low)\.\s*$")
        .captures(answer.trim_end())
        .and_then(|c| level(&c[1]));
    match (stated, key.iter().min()) {
        (None, _) => report.breach(
            "findings",
            "the Answer does not end with 'Confidence: <level>.'",
        ),
        (Some(s), Some(lowest)) if s != *lowest => report.breach(
            "certainty",
            format!(
                "the Answer states {} but the lowest key finding is {}",
                LEVELS[s], LEVELS[*lowest]
            ),
        ),
        _ => {}
    }
}

fn criteria(report: &mut Report, question: &Value, body: &str) {
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with("- ")).collect();
    let wanted = list(&question["success_criteria"]);
    if lines.len() != wanted.len() {
        report.breach(
            "findings",
            format!(
                "{} success criteria listed, the question has {}",
                lines.len(),
                wanted.len()
            ),
        );
    }
    for (n, (line, criterion)) in lines.iter().zip(wanted).enumerate() {
        let head = format!("- SC{} {}: ", n + 1, criterion.as_str().unwrap_or_default());
        let marked = line
            .strip_prefix(&head)
            .is_some_and(|rest| re(r"^(met|partly met|not met) \(.+\)$").is_match(rest));
        if !marked {
            report.breach(
                "findings",
                format!("SC{} is not listed verbatim and marked: {line}", n + 1),
            );
        }
    }
}

fn references(
    report: &mut Report,
    body: &str,
    cited: &BTreeSet<String>,
    sources: &BTreeMap<String, Source>,
) {
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with("- ")).collect();
    let listed: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            re(r"^- \[(S[1-9][0-9]*)\] ")
                .captures(l)
                .map(|c| c[1].to_owned())
        })
        .collect();
    let expected: Vec<String> = ordered(sources)
        .map(|(id, _)| id.clone())
        .filter(|id| cited.contains(id))
        .collect();
    if listed != expected || lines.len() != listed.len() {
        report.breach(
            "findings",
            format!("References list {listed:?}, the findings cite {expected:?}"),
        );
    }
    for (line, id) in lines.iter().zip(&listed) {
        let Some(s) = sources.get(id) else { continue };
        let locator = s
            .url
            .as_deref()
            .or(s.citation.as_deref())
            .unwrap_or_default();
        let complete = line.contains(&s.title)
            && line.contains(&format!("({})", s.published))
            && line.contains(locator)
            && line.ends_with(&format!("Accessed {}.", s.accessed));
        if !complete {
            report.breach(
                "findings",
                format!("reference {id} lacks its title, date, URL or access date"),
            );
        }
    }
}

/// Disagreements the notes record (a Gaps bullet citing two or more ids) appear, with the same
/// ids, under Conflicting evidence.
fn conflicts(report: &mut Report, notes: &str, conflicting: &str) {
    let shown = cited(conflicting);
    for (heading, lines) in sections(notes) {
        if heading != "Gaps and disagreements" {
            continue;
        }
        for bullet in lines.iter().filter_map(|l| l.strip_prefix("- ")) {
            let ids = cited(bullet);
            if ids.len() >= 2 && !ids.is_subset(&shown) {
                report.breach(
                    "findings",
                    format!("the disagreement '{bullet}' is not under Conflicting evidence"),
                );
            }
        }
    }
}

/// A gap the notes tie to a success criterion leaves it `partly met` or `not met`.
fn gaps(report: &mut Report, notes: &str, success: &str) {
    let gap = re(r"^- Gap:.*\((SC[1-9][0-9]*)\)");
    for caps in notes.lines().filter_map(|l| gap.captures(l)) {
        let marked_met = success
            .lines()
            .find(|l| l.starts_with(&format!("- {} ", &caps[1])))
            .is_some_and(|l| re(r": met \(").is_match(l));
        if marked_met {
            report.breach(
                "gap",
                format!(
                    "the notes record a gap for {} but the findings mark it met",
                    &caps[1]
                ),
            );
        }
    }
}

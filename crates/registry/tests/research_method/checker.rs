//! Every rule of `docs/research-method.md` that a program can decide, applied to the four files
//! of a research study. Each breach names its rule, so a test can say which rule a file broke.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde_json::Value;

mod markdown;

/// One broken rule: the rule's name as `docs/research-method.md` spells it, and what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Breach {
    pub(super) rule: &'static str,
    pub(super) what: String,
}

/// The four files of one study, with the schemas their JSON files claim.
pub(super) struct Study<'a> {
    pub(super) question: &'a Value,
    pub(super) question_schema: &'a Value,
    pub(super) sources: &'a Value,
    pub(super) sources_schema: &'a Value,
    pub(super) notes: &'a str,
    pub(super) findings: &'a str,
}

const LEVELS: [&str; 3] = ["low", "medium", "high"];
const VAGUE: [&str; 12] = [
    "best",
    "better",
    "large",
    "small",
    "fast",
    "slow",
    "modern",
    "recent",
    "effective",
    "good",
    "significant",
    "widely used",
];
const SECTIONS: [&str; 8] = [
    "Answer",
    "Key findings",
    "Conflicting evidence",
    "Success criteria",
    "Method",
    "Limitations",
    "Not addressed",
    "References",
];

#[derive(Default)]
struct Report(Vec<Breach>);

impl Report {
    fn breach(&mut self, rule: &'static str, what: impl Into<String>) {
        self.0.push(Breach {
            rule,
            what: what.into(),
        });
    }
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("checker patterns are valid")
}

fn cited(text: &str) -> BTreeSet<String> {
    re(r"\[(S[1-9][0-9]*)\]")
        .captures_iter(text)
        .map(|c| c[1].to_owned())
        .collect()
}

fn level(name: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == name)
}

fn str_at<'v>(value: &'v Value, key: &str) -> &'v str {
    value[key].as_str().unwrap_or_default()
}

fn list(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A YYYY-MM-DD date, when the text is one.
fn full_date(text: &str) -> Option<&str> {
    re(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
        .is_match(text)
        .then_some(text)
}

pub(super) fn check(study: &Study<'_>) -> Vec<Breach> {
    let mut report = Report::default();
    schema(
        &mut report,
        study.question_schema,
        study.question,
        "question.json",
    );
    schema(
        &mut report,
        study.sources_schema,
        study.sources,
        "sources.json",
    );
    question(&mut report, study.question);
    let criteria = list(&study.question["success_criteria"]).len();
    let sources = search(&mut report, study.sources, criteria);
    stop(&mut report, study.sources, criteria);
    let noted = markdown::notes(&mut report, study.notes, &sources);
    markdown::findings(&mut report, study, &sources, &noted);
    report.0
}

fn schema(report: &mut Report, schema: &Value, instance: &Value, file: &str) {
    let validator = jsonschema::validator_for(schema).expect("the schema compiles");
    for error in validator.iter_errors(instance) {
        report.breach(
            "schema",
            format!("{file} at {}: {error}", error.instance_path()),
        );
    }
}

fn question(report: &mut Report, q: &Value) {
    let text = str_at(q, "question").to_lowercase();
    let context = str_at(q, "context").to_lowercase();
    for word in VAGUE {
        let pattern = re(&format!(r"\b{word}\b"));
        if pattern.is_match(&text) && !pattern.is_match(&context) {
            report.breach(
                "question",
                format!("'{word}' is in the question but not defined in context"),
            );
        }
    }
    if !re(r"\b(19|20)[0-9]{2}\b").is_match(&text) {
        report.breach("question", "the question names no time frame (a year)");
    }
    let within: BTreeSet<&str> = list(&q["scope"]["in"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for out in list(&q["scope"]["out"]).iter().filter_map(Value::as_str) {
        if within.contains(out) {
            report.breach("question", format!("'{out}' is both in and out of scope"));
        }
    }
}

/// A source as the rules read it.
#[derive(Debug)]
struct Source {
    title: String,
    publisher: String,
    authors: BTreeSet<String>,
    credibility: String,
    access: String,
    accessed: String,
    published: String,
    url: Option<String>,
    citation: Option<String>,
    conflicted: bool,
}

fn independent(a: &Source, b: &Source) -> bool {
    a.publisher != b.publisher && a.authors.is_disjoint(&b.authors)
}

fn search(report: &mut Report, s: &Value, criteria: usize) -> BTreeMap<String, Source> {
    let as_of = str_at(s, "as_of");
    let mut unique = |kind: &str, ids: Vec<&str>| {
        let mut seen = BTreeSet::new();
        for id in ids {
            if !seen.insert(id) {
                report.breach("search", format!("{kind} id {id} is used twice"));
            }
        }
        seen.into_iter().map(str::to_owned).collect::<BTreeSet<_>>()
    };
    let searches = unique(
        "search",
        list(&s["searches"])
            .iter()
            .map(|q| str_at(q, "id"))
            .collect(),
    );
    let exclusions = unique(
        "exclusion",
        list(&s["eligibility"]["exclude"])
            .iter()
            .map(|x| str_at(x, "id"))
            .collect(),
    );
    let source_ids = unique(
        "source",
        list(&s["sources"])
            .iter()
            .map(|x| str_at(x, "id"))
            .collect(),
    );
    for q in list(&s["searches"]) {
        if str_at(q, "date") > as_of {
            report.breach(
                "search",
                format!("search {} is dated after as_of", str_at(q, "id")),
            );
        }
    }
    let found = |by: &str, own: &str| {
        by == "participant" || searches.contains(by) || (by != own && source_ids.contains(by))
    };
    for x in list(&s["excluded"]) {
        if !found(str_at(x, "found_by"), "") {
            report.breach(
                "search",
                format!(
                    "excluded '{}' is found_by nothing listed",
                    str_at(x, "title")
                ),
            );
        }
        if !exclusions.contains(str_at(x, "criterion")) {
            report.breach(
                "search",
                format!(
                    "excluded '{}' names no listed criterion",
                    str_at(x, "title")
                ),
            );
        }
    }
    let mut informed = vec![0usize; criteria];
    let mut sources = BTreeMap::new();
    for x in list(&s["sources"]) {
        let id = str_at(x, "id");
        if !found(str_at(x, "found_by"), id) {
            report.breach("search", format!("{id} is found_by nothing listed"));
        }
        for sc in list(&x["informs"]).iter().filter_map(Value::as_str) {
            match sc[2..]
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=criteria).contains(n))
            {
                Some(n) => informed[n - 1] += 1,
                None => report.breach(
                    "search",
                    format!("{id} informs {sc}, which the question does not have"),
                ),
            }
        }
        let accessed = str_at(x, "accessed");
        if accessed > as_of {
            report.breach("search", format!("{id} was accessed after as_of"));
        }
        if full_date(str_at(x, "published")).is_some_and(|p| p > accessed) {
            report.breach(
                "search",
                format!("{id} was accessed before it was published"),
            );
        }
        sources.insert(
            id.to_owned(),
            Source {
                title: str_at(x, "title").to_owned(),
                publisher: str_at(x, "publisher").to_owned(),
                authors: list(&x["authors"])
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                credibility: str_at(x, "credibility").to_owned(),
                access: str_at(x, "access").to_owned(),
                accessed: accessed.to_owned(),
                published: str_at(x, "published").to_owned(),
                url: x["url"].as_str().map(str::to_owned),
                citation: x["citation"].as_str().map(str::to_owned),
                conflicted: str_at(x, "conflicts") != "none declared",
            },
        );
    }
    for (n, count) in informed.iter().enumerate() {
        if *count == 0 {
            report.breach("search", format!("SC{} is informed by no source", n + 1));
        }
    }
    let mut by_publisher: BTreeMap<&str, usize> = BTreeMap::new();
    for source in sources.values() {
        *by_publisher.entry(&source.publisher).or_default() += 1;
    }
    if sources.len() < 3 || by_publisher.len() < 2 {
        report.breach(
            "search",
            "fewer than three sources or fewer than two publishers",
        );
    }
    for (publisher, count) in &by_publisher {
        if count * 2 > sources.len() {
            report.breach(
                "search",
                format!("{publisher} supplies more than half of the sources"),
            );
        }
    }
    sources
}

fn stop(report: &mut Report, s: &Value, criteria: usize) {
    let searches: Vec<&str> = list(&s["searches"])
        .iter()
        .map(|q| str_at(q, "id"))
        .collect();
    match str_at(&s["stop"], "rule") {
        "saturation" => {
            let last: BTreeSet<&str> = searches.iter().rev().take(2).copied().collect();
            for x in list(&s["sources"]) {
                if last.contains(str_at(x, "found_by")) {
                    report.breach(
                        "stop",
                        format!(
                            "saturation, but {} was found by one of the last two searches",
                            str_at(x, "id")
                        ),
                    );
                }
            }
        }
        "coverage" => {
            for n in 1..=criteria {
                let strong = list(&s["sources"])
                    .iter()
                    .filter(|x| list(&x["informs"]).iter().any(|sc| sc == &format!("SC{n}")))
                    .filter(|x| matches!(str_at(x, "credibility"), "high" | "medium"))
                    .count();
                if strong < 2 {
                    report.breach(
                        "stop",
                        format!("coverage, but SC{n} has fewer than two medium or high sources"),
                    );
                }
            }
        }
        _ => {}
    }
}

//! The method 2.0.0 of research-study (release 2026.12.0) holds to its own rules: its worked
//! examples pass every rule a program can decide, each of those checks fails on a file that
//! breaks it, and the 2.1.0 release check catches the one rule its example broke. The method
//! `docs/research-method.md` states today is held by `research_checks.rs`.

mod checker;

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::repo_root;
use checker::{Study, check};

/// The method version whose samples this file holds to its rules.
const VERSION: &str = "2.0.0";
/// The workflow version that ships the mechanical rules as a release check; its schemas and
/// validators are still the method's `VERSION`.
const CHECKED: &str = "2.1.0";

fn source() -> PathBuf {
    repo_root().join("registry/source")
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn schema(id: &str) -> Value {
    serde_json::from_str(&read(source().join(format!("schemas/{id}/{VERSION}.json")))).unwrap()
}

/// The worked examples as the build publishes them: each JSON output's schema example, and
/// the workflow's `examples/` files for the Markdown outputs.
struct Samples {
    question_schema: Value,
    sources_schema: Value,
    question: Value,
    sources: Value,
    notes: String,
    findings: String,
}

impl Samples {
    fn load() -> Self {
        Self::load_at(VERSION)
    }

    /// The samples of one workflow version.
    fn load_at(workflow: &str) -> Self {
        let question_schema = schema("research-question");
        let sources_schema = schema("source-list");
        let examples = source().join(format!(
            "workflows/research-study/{workflow}/examples/research"
        ));
        Self {
            question: question_schema["examples"][0].clone(),
            sources: sources_schema["examples"][0].clone(),
            question_schema,
            sources_schema,
            notes: read(examples.join("notes.md")),
            findings: read(examples.join("findings.md")),
        }
    }

    fn breaches(&self) -> Vec<checker::Breach> {
        check(&Study {
            question: &self.question,
            question_schema: &self.question_schema,
            sources: &self.sources,
            sources_schema: &self.sources_schema,
            notes: &self.notes,
            findings: &self.findings,
        })
    }
}

#[test]
fn the_worked_examples_pass_every_mechanical_rule() {
    let breaches = Samples::load().breaches();
    assert!(breaches.is_empty(), "{breaches:#?}");
}

/// One way to break a file, and the rule that must catch it.
struct Breaking {
    name: &'static str,
    rule: &'static str,
    edit: fn(&mut Samples),
}

fn replace(text: &mut String, from: &str, to: &str) {
    assert!(
        text.contains(from),
        "the sample no longer contains {from:?}"
    );
    *text = text.replacen(from, to, 1);
}

fn source_at(s: &mut Samples, n: usize) -> &mut Value {
    &mut s.sources["sources"][n]
}

const BREAKINGS: &[Breaking] = &[
    Breaking {
        name: "a source id S0",
        rule: "schema",
        edit: |s| source_at(s, 0)["id"] = json!("S0"),
    },
    Breaking {
        name: "a source id S01",
        rule: "schema",
        edit: |s| source_at(s, 0)["id"] = json!("S01"),
    },
    Breaking {
        name: "no exclusions in scope",
        rule: "schema",
        edit: |s| s.question["scope"]["out"] = json!([]),
    },
    Breaking {
        name: "two questions",
        rule: "schema",
        edit: |s| s.question["question"] = json!("Which code? And why, as of 2026?"),
    },
    Breaking {
        name: "an interview without consent",
        rule: "schema",
        edit: |s| source_at(s, 4)["kind"] = json!("interview"),
    },
    Breaking {
        name: "an undefined vague word",
        rule: "question",
        edit: |s| {
            let q = s.question["question"]
                .as_str()
                .unwrap()
                .replace("large API providers", "the best API providers");
            s.question["question"] = json!(q);
        },
    },
    Breaking {
        name: "no time frame",
        rule: "question",
        edit: |s| {
            let q = s.question["question"]
                .as_str()
                .unwrap()
                .replace(", as of 2026?", "?");
            s.question["question"] = json!(q);
        },
    },
    Breaking {
        name: "a duplicate source id",
        rule: "search",
        edit: |s| source_at(s, 4)["id"] = json!("S4"),
    },
    Breaking {
        name: "found by an unlisted search",
        rule: "search",
        edit: |s| source_at(s, 0)["found_by"] = json!("Q9"),
    },
    Breaking {
        name: "an exclusion without a listed criterion",
        rule: "search",
        edit: |s| s.sources["excluded"][0]["criterion"] = json!("X9"),
    },
    Breaking {
        name: "a criterion the question lacks",
        rule: "search",
        edit: |s| source_at(s, 0)["informs"] = json!(["SC1", "SC4"]),
    },
    Breaking {
        name: "one publisher supplies most sources",
        rule: "search",
        edit: |s| {
            for n in 2..5 {
                source_at(s, n)["publisher"] = json!("Internet Engineering Task Force (IETF)")
            }
        },
    },
    Breaking {
        name: "read before publication",
        rule: "search",
        edit: |s| source_at(s, 0)["published"] = json!("2026-12-15"),
    },
    Breaking {
        name: "saturation while the last search still found a source",
        rule: "stop",
        edit: |s| source_at(s, 3)["found_by"] = json!("Q7"),
    },
    Breaking {
        name: "a note bullet without a location",
        rule: "notes",
        edit: |s| replace(&mut s.notes, "[S1] (section 15.5.1)", "[S1]"),
    },
    Breaking {
        name: "a source section without a quotation",
        rule: "notes",
        edit: |s| {
            replace(
                &mut s.notes,
                "- \"HTTP Mapping: 400 Bad Request\" [S4]",
                "- The HTTP mapping is 400 [S4]",
            );
            replace(
                &mut s.notes,
                "- \"The client specified",
                "- The client specified",
            );
            replace(
                &mut s.notes,
                "malformed file name).\" [S4]",
                "malformed file name). [S4]",
            );
        },
    },
    Breaking {
        name: "an unmarked gap",
        rule: "notes",
        edit: |s| {
            replace(
                &mut s.notes,
                "- Gap: no source counts",
                "- No source counts",
            )
        },
    },
    Breaking {
        name: "notes citing an unlisted source",
        rule: "notes",
        edit: |s| replace(&mut s.notes, "[S3][S4][S5]", "[S3][S4][S9]"),
    },
    Breaking {
        name: "a criterion marked met despite a recorded gap",
        rule: "gap",
        edit: |s| {
            replace(
                &mut s.notes,
                "not a sample of all providers",
                "not a sample of all providers (SC2)",
            )
        },
    },
    Breaking {
        name: "an uncited sentence in the Answer",
        rule: "findings",
        edit: |s| {
            replace(
                &mut s.findings,
                "invalid fields [S3] and two document 400 [S4][S5].",
                "invalid fields and two document 400.",
            )
        },
    },
    Breaking {
        name: "a cited source that is not listed",
        rule: "findings",
        edit: |s| {
            replace(
                &mut s.findings,
                "without naming field validation [S1].",
                "without naming field validation [S1][S9].",
            )
        },
    },
    Breaking {
        name: "a missing Method section",
        rule: "findings",
        edit: |s| replace(&mut s.findings, "## Method\n", ""),
    },
    Breaking {
        name: "a success criterion left out",
        rule: "findings",
        edit: |s| {
            let at = s.findings.find("- SC2 ").unwrap();
            let end = at + s.findings[at..].find('\n').unwrap() + 1;
            s.findings.replace_range(at..end, "");
        },
    },
    Breaking {
        name: "a reference left out",
        rule: "findings",
        edit: |s| {
            let at = s.findings.find("- [S5] ").unwrap();
            s.findings.truncate(at);
        },
    },
    Breaking {
        name: "an Evidence line that misstates a credibility",
        rule: "findings",
        edit: |s| {
            replace(
                &mut s.findings,
                "S4 (high, full text), S5",
                "S4 (medium, full text), S5",
            )
        },
    },
    Breaking {
        name: "an Evidence line that misses a cited source",
        rule: "findings",
        edit: |s| {
            replace(
                &mut s.findings,
                "Evidence: S4 (high, full text), S5 (high, full text).",
                "Evidence: S4 (high, full text).",
            )
        },
    },
    Breaking {
        name: "high confidence on one source",
        rule: "certainty",
        edit: |s| {
            replace(
                &mut s.findings,
                "Evidence: S1 (high, full text). Rule: own statement.",
                "Evidence: S1 (high, full text). Rule: 1 high.",
            )
        },
    },
    Breaking {
        name: "high confidence on a source read as an abstract",
        rule: "certainty",
        edit: |s| {
            source_at(s, 1)["access"] = json!("abstract-only");
            replace(
                &mut s.findings,
                "Evidence: S2 (high, full text)",
                "Evidence: S2 (high, abstract only)",
            );
        },
    },
    Breaking {
        name: "an Answer more confident than its findings",
        rule: "certainty",
        edit: |s| {
            replace(
                &mut s.findings,
                "Rule: own statement. Confidence: high.\n\n## Conflicting",
                "Rule: own statement. Confidence: medium.\n\n## Conflicting",
            )
        },
    },
    Breaking {
        name: "a disagreement left out of Conflicting evidence",
        rule: "findings",
        edit: |s| {
            replace(
                &mut s.findings,
                "while Google maps invalid arguments to 400 [S4] and Stripe",
                "while Stripe",
            )
        },
    },
];

#[test]
fn every_mechanical_check_catches_a_file_that_breaks_it() {
    for breaking in BREAKINGS {
        let mut samples = Samples::load();
        (breaking.edit)(&mut samples);
        let breaches = samples.breaches();
        assert!(
            breaches.iter().any(|b| b.rule == breaking.rule),
            "{}: expected a breach of the {} rule, got {breaches:#?}",
            breaking.name,
            breaking.rule
        );
    }
}

/// The rules of `checker` that judge `findings.md`, which the release check decides too.
const FINDINGS_RULES: [&str; 3] = ["findings", "certainty", "gap"];

/// Runs the embedded release's `findings-rules` check (research-study `CHECKED`) on samples,
/// as the server does: each file under its output path, JSON as the harness wrote it.
fn release_check_errors(s: &Samples) -> Vec<rimthan_checks::Finding> {
    // Verified once: every breaking runs the same check.
    static STABLE: std::sync::OnceLock<std::sync::Arc<rimthan_registry::VerifiedRelease>> =
        std::sync::OnceLock::new();
    let release = STABLE.get_or_init(|| {
        rimthan_registry::verify_embedded()
            .expect("the embedded registry verifies")
            .channel(&"stable".parse().unwrap())
            .expect("stable channel")
            .clone()
    });
    let workflow = release
        .workflow(
            &"research-study".parse().unwrap(),
            &CHECKED.parse().unwrap(),
        )
        .expect("the checked version is in the stable release");
    let step = workflow
        .steps()
        .iter()
        .find(|st| st.doc().id.as_str() == "synthesize-findings")
        .expect("synthesize-findings");
    let check = step
        .checks()
        .iter()
        .find(|c| c.doc().id.as_str() == "findings-rules")
        .expect("the step ships findings-rules");
    let question = serde_json::to_string_pretty(&s.question).unwrap() + "\n";
    let sources = serde_json::to_string_pretty(&s.sources).unwrap() + "\n";
    let inputs = [
        rimthan_checks::Input::new("research/findings.md", s.findings.as_bytes()),
        rimthan_checks::Input::new("research/question.json", question.as_bytes()),
        rimthan_checks::Input::new("research/sources.json", sources.as_bytes()),
        rimthan_checks::Input::new("research/notes.md", s.notes.as_bytes()),
    ];
    let findings = check.compiled().run(&inputs).expect("the check runs");
    findings
        .into_iter()
        .filter(|f| f.severity == rimthan_checks::Severity::Error)
        .collect()
}

#[test]
fn the_checked_version_passes_every_mechanical_rule_and_its_release_check() {
    let samples = Samples::load_at(CHECKED);
    let breaches = samples.breaches();
    assert!(breaches.is_empty(), "{breaches:#?}");
    let errors = release_check_errors(&samples);
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn the_release_check_fails_every_breaking_of_the_findings_rules() {
    let mut covered = 0;
    for breaking in BREAKINGS
        .iter()
        .filter(|b| FINDINGS_RULES.contains(&b.rule))
    {
        let mut samples = Samples::load_at(CHECKED);
        (breaking.edit)(&mut samples);
        let errors = release_check_errors(&samples);
        assert!(
            !errors.is_empty(),
            "{}: the release check passed a file that breaks the {} rule",
            breaking.name,
            breaking.rule
        );
        covered += 1;
    }
    assert!(
        covered >= 10,
        "only {covered} breakings of the findings rules"
    );
}

#[test]
fn the_release_check_fails_the_method_versions_own_example_for_its_unquoted_criterion() {
    let errors = release_check_errors(&Samples::load());
    let rules: Vec<&str> = errors.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(rules, ["criterion-quotes"], "{errors:#?}");
}

#[test]
fn a_report_verdict_must_match_its_findings() {
    let schema = schema("validator-report");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let example = schema["examples"][0].clone();
    assert!(validator.is_valid(&example), "the example report is valid");
    let with = |edit: fn(&mut Value)| {
        let mut report = example.clone();
        edit(&mut report);
        validator.is_valid(&report)
    };
    assert!(
        !with(|r| r["verdict"] = json!("pass")),
        "pass with an error finding"
    );
    assert!(
        !with(|r| r["findings"][0]["severity"] = json!("warning")),
        "fail without an error finding"
    );
    assert!(
        !with(|r| r["findings"] = json!([])),
        "fail without findings"
    );
    assert!(
        with(|r| {
            r["verdict"] = json!("pass");
            r["findings"] = json!([{"severity": "warning", "message": "S3 is undated."}]);
        }),
        "pass with a warning"
    );
    assert!(
        !with(|r| r["inputs_read"] = json!(["research/notes.md", "research/notes.md"])),
        "an input listed twice"
    );
    assert!(
        !with(|r| r["capabilities_used"] = json!(["workspace.read", "workspace.read"])),
        "a capability listed twice"
    );
}

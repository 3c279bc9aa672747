//! The research-study method `docs/research-method.md` states (workflow 2.4.0): every rule is
//! stated word for word wherever it is quoted; the worked examples pass their schemas and every
//! release check the embedded release ships; each way of breaking a rule fails the check that
//! decides it, under that rule's id, and 2.4.0's checks (2.3.0's rules at less cost) find
//! exactly what 2.3.0's find; and the golden validator reports are reports of the example.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rimthan_checks::{Finding, Input, Severity};
use rimthan_registry::VerifiedRelease;
use serde_json::{Value, json};

use crate::common::repo_root;

/// The workflow version the method describes.
const WORKFLOW: &str = "2.4.0";
/// The version whose rules `WORKFLOW`'s checks decide, written to do less work per byte
/// (`docs/performance.md`, "The price of proof").
const SAME_RULES: &str = "2.3.0";
/// The version of its question and source-list schemas and of its three validators.
const DOCUMENTS: &str = "2.2.0";
/// The skill it pins, which quotes the untrusted-content rule.
const SKILL: &str = "2.1.0";

fn source() -> PathBuf {
    repo_root().join("registry/source")
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn schema(id: &str, version: &str) -> Value {
    serde_json::from_str(&read(source().join(format!("schemas/{id}/{version}.json")))).unwrap()
}

/// The four files of the worked example, as a participant's agent writes them.
#[derive(Clone)]
struct Samples {
    question: Value,
    sources: Value,
    notes: String,
    findings: String,
}

impl Samples {
    fn load() -> Self {
        let examples = source().join(format!(
            "workflows/research-study/{WORKFLOW}/examples/research"
        ));
        Self {
            question: schema("research-question", DOCUMENTS)["examples"][0].clone(),
            sources: schema("source-list", DOCUMENTS)["examples"][0].clone(),
            notes: read(examples.join("notes.md")),
            findings: read(examples.join("findings.md")),
        }
    }

    /// Each file under its output path, JSON pretty-printed as the harness writes it.
    fn files(&self) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            (
                "research/question.json",
                serde_json::to_string_pretty(&self.question).unwrap() + "\n",
            ),
            (
                "research/sources.json",
                serde_json::to_string_pretty(&self.sources).unwrap() + "\n",
            ),
            ("research/notes.md", self.notes.clone()),
            ("research/findings.md", self.findings.clone()),
        ])
    }

    /// Schema violations of the two JSON files.
    fn schema_errors(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for (id, instance) in [
            ("research-question", &self.question),
            ("source-list", &self.sources),
        ] {
            let compiled = jsonschema::validator_for(&schema(id, DOCUMENTS)).unwrap();
            errors.extend(
                compiled
                    .iter_errors(instance)
                    .map(|e| format!("{id} at {}: {e}", e.instance_path())),
            );
        }
        errors
    }

    /// The error findings of every release check of the workflow, by check id.
    fn check_errors(&self) -> BTreeMap<String, Vec<Finding>> {
        self.check_errors_of(WORKFLOW)
    }

    /// The error findings of every release check of one version of the workflow, by check id.
    fn check_errors_of(&self, version: &str) -> BTreeMap<String, Vec<Finding>> {
        let files = self.files();
        let workflow = release()
            .workflow(
                &"research-study".parse().unwrap(),
                &version.parse().unwrap(),
            )
            .expect("the workflow version is in the stable release");
        let mut out = BTreeMap::new();
        for step in workflow.steps() {
            for check in step.checks() {
                let inputs: Vec<Input<'_>> = files
                    .iter()
                    .map(|(path, text)| Input::new(path, text.as_bytes()))
                    .collect();
                let findings = check.compiled().run(&inputs).expect("the check runs");
                out.insert(
                    check.doc().id.to_string(),
                    findings
                        .into_iter()
                        .filter(|f| f.severity == Severity::Error)
                        .collect(),
                );
            }
        }
        out
    }
}

/// The stable release as the binary embeds it, verified once for every test here.
fn release() -> &'static Arc<VerifiedRelease> {
    static STABLE: OnceLock<Arc<VerifiedRelease>> = OnceLock::new();
    STABLE.get_or_init(|| {
        rimthan_registry::verify_embedded()
            .expect("the embedded registry verifies")
            .channel(&"stable".parse().unwrap())
            .expect("stable channel")
            .clone()
    })
}

#[test]
fn the_worked_examples_pass_their_schemas_and_every_release_check() {
    let samples = Samples::load();
    assert_eq!(samples.schema_errors(), Vec::<String>::new());
    let errors = samples.check_errors();
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        ["findings-rules", "question-rules", "sources-rules"],
        "the three checks run"
    );
    for (check, findings) in errors {
        assert!(findings.is_empty(), "{check}: {findings:#?}");
    }
}

/// One way to break the example, and the check and rule that must catch it (`schema` for what
/// the schemas decide).
struct Breaking {
    name: &'static str,
    check: &'static str,
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

fn search(s: &mut Samples, n: usize) -> &mut Value {
    &mut s.sources["searches"][n]
}

fn source_at(s: &mut Samples, n: usize) -> &mut Value {
    &mut s.sources["sources"][n]
}

const BREAKINGS: &[Breaking] = &[
    Breaking {
        name: "a source id S01",
        check: "schema",
        rule: "schema",
        edit: |s| source_at(s, 0)["id"] = json!("S01"),
    },
    Breaking {
        name: "a question without a protocol",
        check: "schema",
        rule: "schema",
        edit: |s| {
            s.question.as_object_mut().unwrap().remove("protocol");
        },
    },
    Breaking {
        name: "an unplanned search without its departure",
        check: "schema",
        rule: "schema",
        edit: |s| search(s, 2)["planned"] = json!(null),
    },
    Breaking {
        name: "a source without its risk of bias",
        check: "schema",
        rule: "schema",
        edit: |s| {
            source_at(s, 1)
                .as_object_mut()
                .unwrap()
                .remove("risk_of_bias");
        },
    },
    Breaking {
        name: "a vague word in the question that context leaves undefined",
        check: "question-rules",
        rule: "vague-word-defined",
        edit: |s| {
            let q = s.question["question"]
                .as_str()
                .unwrap()
                .replace("large", "modern");
            s.question["question"] = json!(q);
        },
    },
    Breaking {
        name: "a criterion no planned search looks for support on",
        check: "question-rules",
        rule: "protocol-for-and-against",
        edit: |s| {
            for p in s.question["protocol"]["planned_searches"]
                .as_array_mut()
                .unwrap()
            {
                if p["purpose"] == "support" {
                    p["for"] = json!(["SC2"]);
                }
            }
        },
    },
    Breaking {
        name: "a planned search for a criterion the question does not have",
        check: "question-rules",
        rule: "protocol-searches",
        edit: |s| s.question["protocol"]["planned_searches"][0]["for"] = json!(["SC7"]),
    },
    Breaking {
        name: "an exclusion criterion added after the protocol",
        check: "sources-rules",
        rule: "eligibility-from-protocol",
        edit: |s| {
            s.sources["eligibility"]["exclude"]
                .as_array_mut()
                .unwrap()
                .push(json!({"id": "X4", "text": "Published by a provider we disagree with"}))
        },
    },
    Breaking {
        name: "searches out of order",
        check: "sources-rules",
        rule: "search-reported",
        edit: |s| s.sources["searches"].as_array_mut().unwrap().swap(0, 1),
    },
    Breaking {
        name: "a search dated after as_of",
        check: "sources-rules",
        rule: "search-reported",
        edit: |s| search(s, 3)["date"] = json!("2026-12-01"),
    },
    Breaking {
        name: "an excluded candidate meeting no listed criterion",
        check: "sources-rules",
        rule: "found-by-resolves",
        edit: |s| s.sources["excluded"][0]["criterion"] = json!("X9"),
    },
    Breaking {
        name: "a not-retrieved candidate found by nothing listed",
        check: "sources-rules",
        rule: "found-by-resolves",
        edit: |s| s.sources["not_retrieved"][0]["found_by"] = json!("Q12"),
    },
    Breaking {
        name: "a source informing a criterion the question does not have",
        check: "sources-rules",
        rule: "criterion-informed",
        edit: |s| source_at(s, 2)["informs"] = json!(["SC3"]),
    },
    Breaking {
        name: "coverage claimed with one source per criterion",
        check: "sources-rules",
        rule: "stop-held",
        edit: |s| s.sources["stop"]["rule"] = json!("coverage"),
    },
    Breaking {
        name: "a time box the question does not give",
        check: "sources-rules",
        rule: "stop-held",
        edit: |s| {
            s.sources["stop"]["rule"] = json!("time-box");
            s.question.as_object_mut().unwrap().remove("constraints");
        },
    },
    Breaking {
        name: "saturation when neither of the last two searches looked for disagreement",
        check: "sources-rules",
        rule: "stop-held",
        edit: |s| {
            s.sources["stop"]["rule"] = json!("saturation");
            search(s, 5)["purpose"] = json!("support");
            search(s, 6)["purpose"] = json!("support");
        },
    },
    Breaking {
        name: "notes without their first heading",
        check: "sources-rules",
        rule: "notes-headings",
        edit: |s| replace(&mut s.notes, "# Research notes\n", ""),
    },
    Breaking {
        name: "a gaps bullet that cites nothing and is not marked",
        check: "sources-rules",
        rule: "notes-traced",
        edit: |s| replace(&mut s.notes, "- Interpretation: the", "- The"),
    },
    Breaking {
        name: "an Answer rated above its rule",
        check: "findings-rules",
        rule: "answer-confidence",
        edit: |s| {
            replace(
                &mut s.findings,
                "Rule: lowest key finding medium; inconsistency explained (the Answer states the providers' disagreement as what was found); inference. Confidence: medium.",
                "Rule: lowest key finding medium; inconsistency explained (the Answer states the providers' disagreement as what was found); inference. Confidence: high.",
            )
        },
    },
    Breaking {
        name: "an Answer naming the wrong lowest key finding",
        check: "findings-rules",
        rule: "answer-confidence",
        edit: |s| {
            replace(
                &mut s.findings,
                "Rule: lowest key finding medium; inconsistency explained (the Answer states the providers' disagreement as what was found); inference.",
                "Rule: lowest key finding high; inconsistency explained (the Answer states the providers' disagreement as what was found); inference.",
            )
        },
    },
    Breaking {
        name: "an Answer that generalises from a sample at its lowest finding's level",
        check: "findings-rules",
        rule: "answer-confidence",
        edit: |s| {
            replace(
                &mut s.findings,
                "Rule: lowest key finding medium; inconsistency explained (the Answer states the providers' disagreement as what was found); inference.",
                "Rule: lowest key finding medium; sample; inconsistency explained (the Answer states the providers' disagreement as what was found); inference.",
            )
        },
    },
    Breaking {
        name: "an indirect source rated high without the step",
        check: "findings-rules",
        rule: "certainty",
        edit: |s| {
            replace(
                &mut s.findings,
                "Rule: own statement; indirectness (a gRPC status enum with an HTTP mapping, not documentation of JSON request bodies). Confidence: medium.",
                "Rule: own statement. Confidence: high.",
            )
        },
    },
    Breaking {
        name: "a source read as an abstract and a finding that does not say so",
        check: "findings-rules",
        rule: "key-finding-evidence",
        edit: |s| source_at(s, 1)["access"] = json!("abstract-only"),
    },
    Breaking {
        name: "a biased source and a finding rated as if it were not",
        check: "findings-rules",
        rule: "certainty",
        edit: |s| {
            source_at(s, 0)["risk_of_bias"]["level"] = json!("high");
            replace(
                &mut s.findings,
                "Evidence: S1 (high, full text). Rule: own statement. Confidence: high.",
                "Evidence: S1 (high, full text). Rule: 1 high. Confidence: medium.",
            )
        },
    },
    Breaking {
        name: "Method without the duplicates set aside",
        check: "findings-rules",
        rule: "method-complete",
        edit: |s| search(s, 0)["duplicates"] = json!(2),
    },
];

/// The worked example's findings with every paragraph and item hard-wrapped at 80 columns: valid
/// Markdown that renders the same passes as the example does, so an agent that wraps its lines
/// is not sent round in revise.
#[test]
fn the_example_hard_wrapped_passes_every_check() {
    let mut samples = Samples::load();
    samples.findings = read(
        repo_root()
            .join("crates/registry/tests/research_samples/2.3.0-hard-wrapped/research/findings.md"),
    );
    assert_ne!(
        samples.findings,
        Samples::load().findings,
        "the sample is wrapped"
    );
    let failed: BTreeMap<_, _> = samples
        .check_errors()
        .into_iter()
        .filter(|(_, errors)| !errors.is_empty())
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn every_breaking_fails_the_check_that_decides_its_rule() {
    for breaking in BREAKINGS {
        let mut samples = Samples::load();
        (breaking.edit)(&mut samples);
        if breaking.check == "schema" {
            assert!(
                !samples.schema_errors().is_empty(),
                "{}: the schemas accept it",
                breaking.name
            );
            continue;
        }
        let errors = samples.check_errors();
        assert_eq!(
            errors,
            samples.check_errors_of(SAME_RULES),
            "{}: {WORKFLOW} and {SAME_RULES} decide the same rules alike",
            breaking.name
        );
        let rules: Vec<&str> = errors[breaking.check]
            .iter()
            .map(|f| f.rule.as_str())
            .collect();
        assert!(
            rules.contains(&breaking.rule),
            "{}: expected {} to fail with {}, got {errors:#?}",
            breaking.name,
            breaking.check,
            breaking.rule
        );
    }
}

/// `> **Name rule.** ...` block quotes of one file, by rule name.
fn rule_blocks(text: &str) -> BTreeMap<String, String> {
    let mut blocks = BTreeMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in text.lines().chain([""]) {
        let quoted = line.strip_prefix("> ").or((line == ">").then_some(""));
        match (quoted, current.as_mut()) {
            (Some(body), Some((_, lines))) => lines.push(body),
            (Some(body), None) => {
                if let Some(name) = body
                    .strip_prefix("**")
                    .and_then(|b| b.split(" rule.**").next())
                {
                    current = Some((name.to_owned(), vec![body]));
                }
            }
            (None, _) => {
                if let Some((name, lines)) = current.take() {
                    blocks.insert(name, lines.join("\n"));
                }
            }
        }
    }
    blocks
}

#[test]
fn each_rule_is_stated_word_for_word_wherever_it_is_quoted() {
    let docs = rule_blocks(&read(repo_root().join("docs/research-method.md")));
    assert_eq!(
        docs.len(),
        15,
        "docs/research-method.md states fifteen rules"
    );
    let steps = format!("workflows/research-study/{WORKFLOW}/steps");
    let gathering = [
        "Search",
        "Stop",
        "Credibility",
        "Bias",
        "Reach",
        "Notes",
        "Quote",
        "Missed-source",
        "Untrusted content",
        "People",
    ];
    let quoted: &[(String, Vec<&str>)] = &[
        (format!("{steps}/frame-question.md"), vec!["Question"]),
        (format!("{steps}/gather-sources.md"), gathering.to_vec()),
        (
            format!("{steps}/synthesize-findings.md"),
            vec!["Certainty", "Findings", "Gap"],
        ),
        (
            format!("validators/scope-reviewer/{DOCUMENTS}.md"),
            vec!["Question", "Report"],
        ),
        (
            format!("validators/source-auditor/{DOCUMENTS}.md"),
            [gathering.as_slice(), &["Report"]].concat(),
        ),
        (
            format!("validators/claim-checker/{DOCUMENTS}.md"),
            vec!["Findings", "Certainty", "Gap", "Report"],
        ),
        (
            format!("skills/rimthan-research/{SKILL}/SKILL.md"),
            vec!["Untrusted content"],
        ),
    ];
    for (path, names) in quoted {
        let blocks = rule_blocks(&read(source().join(path)));
        let found: Vec<&str> = blocks.keys().map(String::as_str).collect();
        let mut expected = names.clone();
        expected.sort_unstable();
        assert_eq!(found, expected, "{path} quotes these rules");
        for (name, text) in &blocks {
            assert_eq!(
                Some(text),
                docs.get(name),
                "{path}: the {name} rule differs from docs/research-method.md"
            );
        }
    }
}

#[test]
fn the_golden_reports_are_valid_passing_reports_of_the_example() {
    let report_schema = schema("validator-report", "2.0.0");
    let compiled = jsonschema::validator_for(&report_schema).unwrap();
    let outputs = Samples::load().files();
    for validator in ["scope-reviewer", "source-auditor", "claim-checker"] {
        let path = repo_root().join(format!("docs/research-method/{validator}.json"));
        let report: Value = serde_json::from_str(&read(path)).unwrap();
        let errors: Vec<String> = compiled
            .iter_errors(&report)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{validator}: {errors:#?}");
        assert_eq!(report["validator_id"], validator);
        assert_eq!(report["validator_version"], DOCUMENTS, "{validator}");
        assert_eq!(report["verdict"], "pass", "{validator}");
        for input in report["inputs_read"].as_array().unwrap() {
            assert!(
                outputs.contains_key(input.as_str().unwrap()),
                "{validator} reads {input}, which the example does not have"
            );
        }
    }
}

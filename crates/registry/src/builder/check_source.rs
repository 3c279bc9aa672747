//! Deterministic checks as an author writes them, and the proof the build asks of each: it
//! passes the step's worked examples and fails every counter-example with the rule it names,
//! so a check that cannot fail does not build (`docs/authoring.md` §11).
//!
//! ```text
//! workflows/<id>/<version>/checks/<check id>.rhai                      a script check's source
//! workflows/<id>/<version>/counter-examples/<check id>/<case>/<output path>
//! workflows/<id>/<version>/counter-examples/<check id>/<case>/expected-findings.json
//! ```
//!
//! A counter-example folder holds only the files it breaks; every other input comes from the
//! worked examples (`examples/`, or a JSON output's schema `examples`). A check that describes
//! its rules (`help`) says exactly what each counter-example must produce: the build compares
//! the findings with `expected-findings.json`, refuses a rule it does not describe, and warns
//! about described rules no counter-example produces. A check without `help` (written before
//! the field) needs only its named rule among the errors.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use serde::Deserialize;

use rimthan_checks::{Check, CheckError, Finding, Input, Limits, Severity};

use super::{
    BuildWarning,
    checks::item_line,
    source::{files_under, read_text, sorted_names, source_error},
};
use crate::{
    error::RegistryError,
    ids::{ArtifactId, CheckId, CheckKind, Enforcement},
    model::{CheckDoc, MEDIA_JSON, RuleHelp, StepDoc},
    verify::compile_check,
};

/// How many findings a build error quotes.
const QUOTED_FINDINGS: usize = 5;

/// A check as declared in a step's frontmatter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckSource {
    id: CheckId,
    title: String,
    description: String,
    kind: CheckKind,
    reads: Vec<ArtifactId>,
    /// `sql-lint` only: squawk rule → severity.
    #[serde(default)]
    rules: Option<BTreeMap<String, Severity>>,
    /// Case folder under `counter-examples/<check id>/` → the rule it must fail.
    #[serde(default)]
    counter_examples: BTreeMap<String, String>,
    /// `warn` to report its errors as warnings only (a check being rolled out).
    #[serde(default)]
    enforcement: Enforcement,
    /// Rule id → a line on fixing what it finds (or `{text, url}`).
    #[serde(default)]
    help: BTreeMap<String, HelpSource>,
}

/// A rule's help as an author writes it: the line alone, or with a URL.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum HelpSource {
    Text(String),
    Full(RuleHelp),
}

impl From<&HelpSource> for RuleHelp {
    fn from(source: &HelpSource) -> Self {
        match source {
            HelpSource::Text(text) => RuleHelp {
                text: text.clone(),
                url: None,
            },
            HelpSource::Full(help) => help.clone(),
        }
    }
}

/// The file in a counter-example folder that lists the findings it must produce.
const EXPECTED_FINDINGS: &str = "expected-findings.json";

/// One finding a counter-example must produce.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    rule: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default = "error_severity")]
    severity: Severity,
}

fn error_severity() -> Severity {
    Severity::Error
}

impl Expected {
    fn of(finding: &Finding) -> Self {
        Self {
            rule: finding.rule.clone(),
            path: finding.path.clone(),
            line: finding.line,
            severity: finding.severity,
        }
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.path, self.line) {
            (Some(p), Some(l)) => write!(f, "{p}:{l}: ")?,
            (Some(p), None) => write!(f, "{p}: ")?,
            _ => {}
        }
        write!(f, "{} ({})", self.rule, self.severity.as_str())
    }
}

/// A step's declared checks with the file they were declared in.
pub(super) struct DeclaredChecks<'a> {
    pub(super) step_path: &'a Path,
    pub(super) step_text: &'a str,
    pub(super) checks: Vec<CheckSource>,
}

/// Turns the declarations of one workflow version's steps into check documents, reading each
/// script from `checks/`; every file there must belong to a script check.
pub(super) fn documents(
    root: &Path,
    steps: &[StepDoc],
    declared: &[DeclaredChecks<'_>],
) -> Result<Vec<CheckDoc>, RegistryError> {
    let dir = root.join("checks");
    let mut scripts: BTreeSet<String> = if dir.is_dir() {
        sorted_names(&dir)?.into_iter().collect()
    } else {
        BTreeSet::new()
    };
    let mut docs: Vec<CheckDoc> = Vec::new();
    for (step, declared) in steps.iter().zip(declared) {
        for check in &declared.checks {
            let line = item_line(declared.step_text, check.id.as_str());
            if docs.iter().any(|d| d.id == check.id) {
                return Err(invalid(
                    declared.step_path,
                    line,
                    step,
                    &check.id,
                    format!(
                        "check id {} is used twice in this workflow version; give each check \
                         its own id",
                        check.id
                    ),
                ));
            }
            let file = format!("{}.rhai", check.id);
            let script = match check.kind {
                CheckKind::Script => {
                    let path = dir.join(&file);
                    if !scripts.remove(&file) {
                        return Err(invalid(
                            declared.step_path,
                            line,
                            step,
                            &check.id,
                            format!(
                                "script check {} has no source: write it at {}",
                                check.id,
                                path.display()
                            ),
                        ));
                    }
                    let text = read_text(&path)?;
                    match Check::script(&text, Limits::default()) {
                        Ok(_) => {}
                        Err(CheckError::CompileFailed {
                            line,
                            column,
                            message,
                        }) => {
                            return Err(invalid(
                                &path,
                                Some(line),
                                step,
                                &check.id,
                                format!("does not compile (column {column}): {message}"),
                            ));
                        }
                        // A script past the size or declaration limit is refused before it
                        // is compiled, naming the limit.
                        Err(other) => {
                            return Err(invalid(
                                &path,
                                None,
                                step,
                                &check.id,
                                format!("{other} ({})", other.code()),
                            ));
                        }
                    }
                    Some(text)
                }
                CheckKind::SqlLint => None,
            };
            docs.push(CheckDoc {
                workflow: step.workflow.clone(),
                workflow_version: step.workflow_version.clone(),
                step: step.id.clone(),
                id: check.id.clone(),
                title: check.title.clone(),
                description: check.description.clone(),
                reads: check.reads.clone(),
                kind: check.kind,
                script,
                rules: check.rules.clone(),
                enforcement: check.enforcement,
                help: check
                    .help
                    .iter()
                    .map(|(rule, help)| (rule.clone(), help.into()))
                    .collect(),
            });
        }
    }
    if let Some(stray) = scripts.into_iter().next() {
        return Err(source_error(
            &dir.join(stray),
            "no script check of this workflow version is named after this file (checks/<check \
             id>.rhai); declare the check in its step or delete the file"
                .into(),
        ));
    }
    Ok(docs)
}

/// Runs every check on the worked examples (each must pass: no error finding) and on each of
/// its counter-examples (each must fail with the rule it names, and produce exactly its
/// `expected-findings.json`). `steps` carry their examples; `json_examples` holds the example
/// text of each JSON output, by artifact id. Returns the rules described but never produced.
pub(super) fn prove(
    root: &Path,
    steps: &[StepDoc],
    declared: &[DeclaredChecks<'_>],
    docs: &[CheckDoc],
    json_examples: &BTreeMap<ArtifactId, String>,
) -> Result<Vec<BuildWarning>, RegistryError> {
    let outputs: BTreeMap<&ArtifactId, _> = steps
        .iter()
        .flat_map(|s| &s.outputs)
        .map(|o| (&o.artifact_id, o))
        .collect();
    let max_bytes = outputs
        .iter()
        .map(|(id, o)| (*id, o.max_bytes))
        .collect::<BTreeMap<_, _>>();
    let counter_root = root.join("counter-examples");
    let mut cases_seen = BTreeSet::new();
    let mut warnings = Vec::new();
    for doc in docs {
        let (step, declared) = steps
            .iter()
            .zip(declared)
            .find(|(s, _)| s.id == doc.step)
            .expect("documents() made each check from a declared step");
        let source = declared
            .checks
            .iter()
            .find(|c| c.id == doc.id)
            .expect("documents() made each check from its declaration");
        let line = item_line(declared.step_text, doc.id.as_str());
        let at_step = |reason: String| invalid(declared.step_path, line, step, &doc.id, reason);
        let check = compile_check(doc, step, &max_bytes)
            .map_err(|reason| at_step(format!("check {}: {reason}", doc.id)))?;
        // A check that describes its rules reports no other.
        let undescribed = |findings: &[Finding], on: &str| -> Result<(), RegistryError> {
            match findings
                .iter()
                .find(|f| !doc.help.is_empty() && !doc.help.contains_key(&f.rule))
            {
                Some(f) => Err(at_step(format!(
                    "check {} reports rule {} on {on}, which its `help` does not describe; \
                     describe every rule it reports",
                    doc.id, f.rule
                ))),
                None => Ok(()),
            }
        };

        // The worked examples, by the path each output is written at.
        let mut examples: BTreeMap<String, String> = BTreeMap::new();
        for read in &doc.reads {
            let output = outputs[read];
            let text = if output.media_type == MEDIA_JSON {
                json_examples.get(read).cloned()
            } else {
                output.example.clone()
            };
            let Some(text) = text else {
                return Err(at_step(format!(
                    "check {} reads {read}, which has no worked example to prove it on; add \
                     examples/{}",
                    doc.id, output.path
                )));
            };
            examples.insert(output.path.clone(), text);
        }
        let findings = run(&check, &examples).map_err(|e| {
            at_step(format!(
                "check {} could not run on the worked examples: {e} ({})",
                doc.id,
                e.code()
            ))
        })?;
        let errors: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        if !errors.is_empty() {
            return Err(at_step(format!(
                "check {} fails the worked examples, which must pass it: {}",
                doc.id,
                quote(&errors)
            )));
        }
        undescribed(&findings, "the worked examples")?;

        let case_dir = counter_root.join(doc.id.as_str());
        if source.counter_examples.is_empty() {
            return Err(at_step(format!(
                "check {} has no counter-example, so nothing shows it can fail; add \
                 counter_examples: {{<case>: <rule>}} and the broken file at \
                 {}/<case>/<output path>",
                doc.id,
                case_dir.display()
            )));
        }
        let mut produced: BTreeSet<String> = BTreeSet::new();
        for (case, rule) in &source.counter_examples {
            cases_seen.insert((doc.id.to_string(), case.clone()));
            let dir = case_dir.join(case);
            let mut inputs = examples.clone();
            let mut expected = None;
            let mut broken = 0;
            for (rel, path) in files_under(&dir)? {
                if rel == EXPECTED_FINDINGS {
                    expected = Some(read_expected(&path)?);
                    continue;
                }
                if !inputs.contains_key(&rel) {
                    return Err(invalid(
                        &path,
                        None,
                        step,
                        &doc.id,
                        format!(
                            "check {} reads no output at {rel}; a counter-example holds files \
                             at the paths of what its check reads ({})",
                            doc.id,
                            inputs.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                inputs.insert(rel, read_text(&path)?);
                broken += 1;
            }
            if broken == 0 {
                return Err(at_step(format!(
                    "counter-example {case} of check {} has no files; put the broken output at \
                     {}/<output path>",
                    doc.id,
                    dir.display()
                )));
            }
            let findings = run(&check, &inputs).map_err(|e| {
                at_step(format!(
                    "check {} could not run on counter-example {case}: {e} ({})",
                    doc.id,
                    e.code()
                ))
            })?;
            let failed = findings
                .iter()
                .any(|f| f.severity == Severity::Error && &f.rule == rule);
            if !failed {
                let errors: Vec<&Finding> = findings
                    .iter()
                    .filter(|f| f.severity == Severity::Error)
                    .collect();
                let got = if errors.is_empty() {
                    "it passes".to_owned()
                } else {
                    format!("it fails only with {}", quote(&errors))
                };
                return Err(at_step(format!(
                    "counter-example {case} must fail check {} with rule {rule}, but {got}",
                    doc.id
                )));
            }
            undescribed(&findings, &format!("counter-example {case}"))?;
            match expected {
                Some(expected) => {
                    compare(&expected, &findings).map_err(|difference| {
                        invalid(
                            &dir.join(EXPECTED_FINDINGS),
                            None,
                            step,
                            &doc.id,
                            format!(
                                "counter-example {case} of check {} must produce exactly the \
                                 findings listed here, but {difference}",
                                doc.id
                            ),
                        )
                    })?;
                    produced.extend(expected.into_iter().map(|e| e.rule));
                }
                None if !doc.help.is_empty() => {
                    return Err(at_step(format!(
                        "check {} describes its rules, so counter-example {case} lists the \
                         findings it must produce in {}",
                        doc.id,
                        dir.join(EXPECTED_FINDINGS).display()
                    )));
                }
                None => {}
            }
        }
        for rule in doc.help.keys().filter(|r| !produced.contains(*r)) {
            warnings.push(BuildWarning::RuleNotExercised {
                file: declared.step_path.display().to_string(),
                check: format!("{}@{}/{}", step.workflow, step.workflow_version, doc.id),
                rule: rule.clone(),
            });
        }
    }
    // Every case folder belongs to a declared case: a forgotten one proves nothing.
    for (check, case) in super::source::pairs(&counter_root)? {
        if !cases_seen.contains(&(check.clone(), case.clone())) {
            return Err(source_error(
                &counter_root.join(&check).join(&case),
                format!(
                    "no check declares counter-example {case} of check {check}; declare it in \
                     the step's counter_examples or delete the folder"
                ),
            ));
        }
    }
    Ok(warnings)
}

/// Most findings an `expected-findings.json` may list (a run's `max_findings`).
const MAX_EXPECTED: usize = 1_000;

fn read_expected(path: &Path) -> Result<Vec<Expected>, RegistryError> {
    let text = read_text(path)?;
    let mut expected: Vec<Expected> = serde_json::from_str(&text).map_err(|e| {
        source_error(
            path,
            format!(
                "expected-findings.json is a JSON array of {{\"rule\", \"path\", \"line\", \
                 \"severity\"}} objects (severity defaults to error): {e}"
            ),
        )
    })?;
    if expected.len() > MAX_EXPECTED {
        return Err(source_error(
            path,
            format!("lists {} findings; at most {MAX_EXPECTED}", expected.len()),
        ));
    }
    expected.sort();
    Ok(expected)
}

/// `Err` names what is missing and what is extra, as the author fixes either side.
fn compare(expected: &[Expected], findings: &[Finding]) -> Result<(), String> {
    let mut got: Vec<Expected> = findings.iter().map(Expected::of).collect();
    got.sort();
    if got == expected {
        return Ok(());
    }
    let mut missing = expected.to_vec();
    let mut extra = Vec::new();
    for finding in got {
        match missing.iter().position(|e| *e == finding) {
            Some(at) => {
                missing.remove(at);
            }
            None => extra.push(finding),
        }
    }
    let list = |items: &[Expected]| {
        let mut quoted: Vec<String> = items
            .iter()
            .take(QUOTED_FINDINGS)
            .map(ToString::to_string)
            .collect();
        if items.len() > QUOTED_FINDINGS {
            quoted.push(format!("and {} more", items.len() - QUOTED_FINDINGS));
        }
        quoted.join("; ")
    };
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("it does not produce {}", list(&missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("it also produces {}", list(&extra)));
    }
    Err(parts.join(", and "))
}

/// A check the build refuses, named as the manifest labels it.
fn invalid(
    file: &Path,
    line: Option<usize>,
    step: &StepDoc,
    check: &CheckId,
    reason: String,
) -> RegistryError {
    RegistryError::CheckInvalid {
        file: file.display().to_string(),
        line,
        entry: format!("check {}/{check}@{}", step.workflow, step.workflow_version),
        reason,
    }
}

fn run(check: &Check, texts: &BTreeMap<String, String>) -> Result<Vec<Finding>, CheckError> {
    let inputs: Vec<Input<'_>> = texts
        .iter()
        .map(|(path, text)| Input::new(path, text.as_bytes()))
        .collect();
    check.run(&inputs)
}

fn quote(findings: &[&Finding]) -> String {
    let mut quoted: Vec<String> = findings
        .iter()
        .take(QUOTED_FINDINGS)
        .map(|f| {
            let at = match (&f.path, f.line) {
                (Some(p), Some(l)) => format!("{p}:{l}: "),
                (Some(p), None) => format!("{p}: "),
                _ => String::new(),
            };
            format!("{at}{}: {}", f.rule, f.message)
        })
        .collect();
    if findings.len() > QUOTED_FINDINGS {
        quoted.push(format!("and {} more", findings.len() - QUOTED_FINDINGS));
    }
    quoted.join("; ")
}

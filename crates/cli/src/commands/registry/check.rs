//! `rimthan registry check SOURCE --workflow W --step S FILE…`: a step's deterministic checks
//! run on local files, as the server would run them on a participant's outputs. For authors
//! trying a check, and for a participant's own CI before a session.

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::{Path, PathBuf},
};

use clap::{Args, ValueEnum};
use rimthan_checks::{Finding, Input, Severity};
use rimthan_mcp::report::printable;
use rimthan_registry::{
    ReleaseId, RuleHelp, SigningKey, Step, VerifiedRelease, build_release, external_policy,
    verify_registry,
};
use serde::Serialize;

use super::parse;
use crate::commands::InputError;

/// Most files one run reads, as a check reads at most 32 inputs.
const MAX_FILES: usize = 64;

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The release source folder the workflow is written in.
    src: PathBuf,
    /// The workflow's id.
    #[arg(long)]
    workflow: String,
    /// The workflow version (default: the highest in the source).
    #[arg(long)]
    version: Option<String>,
    /// The step whose checks run.
    #[arg(long)]
    step: String,
    /// The files to check, each matched to the output or input whose declared path it ends with
    /// (`out/notes/report.md` is the output `notes/report.md`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// How to print the results: text, json, or sarif (SARIF 2.1.0, for code-scanning views).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

/// How `registry check` prints its results. Its values are described on `--format`: doc
/// comments on them would turn `--help` into clap's long form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    // `path:line: rule: message` per finding, then `check ID: pass|fail`.
    Text,
    // `[{id, verdict, findings}]`.
    Json,
    // One SARIF 2.1.0 log, a result per finding, located in the files as given.
    Sarif,
}

/// One check's result on the files, as `--format json` prints it.
#[derive(Debug, Serialize)]
struct CheckResult<'a> {
    id: &'a str,
    /// `pass` or `fail`.
    verdict: &'static str,
    findings: Vec<Reported<'a>>,
}

/// A finding with its rule's help, when the check describes the rule.
#[derive(Debug, Serialize)]
struct Reported<'a> {
    #[serde(flatten)]
    finding: Finding,
    #[serde(skip_serializing_if = "Option::is_none")]
    help: Option<&'a RuleHelp>,
}

/// A check reads a file that was not given: nothing ran (`check_input_missing`, exit 2), so a
/// CI job given too few files cannot pass by checking nothing.
#[derive(Debug)]
pub(crate) struct InputMissing(String);

impl std::fmt::Display for InputMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "check_input_missing: {}", self.0)
    }
}

impl std::error::Error for InputMissing {}

/// A run with an `error` finding; the findings were printed.
#[derive(Debug)]
pub(crate) struct ChecksFailed(usize);

impl std::fmt::Display for ChecksFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} deterministic check(s) failed", self.0)
    }
}

impl std::error::Error for ChecksFailed {}

pub(crate) fn check(args: CheckArgs) -> anyhow::Result<()> {
    if args.files.len() > MAX_FILES {
        return Err(InputError(format!("at most {MAX_FILES} files at once")).into());
    }
    // Building proves the source as `registry build` does, with a key nobody keeps.
    let key = SigningKey::generate()?;
    let release: ReleaseId = parse("0.0.0-check")?;
    let built = build_release(&args.src, &release, &key)?;
    let registry = verify_registry(&built.files, &external_policy())?;
    let release = registry
        .release(&release)
        .expect("the built release is in its registry");
    let step = find_step(release, &args)?;
    if step.checks().is_empty() {
        return Err(InputError(format!(
            "step {} of workflow {} declares no checks",
            args.step, args.workflow
        ))
        .into());
    }
    let texts = read_files(release, step, &args.files)?;
    let format = if args.json { Format::Json } else { args.format };

    let mut missing = Vec::new();
    for check in step.checks() {
        let doc = check.doc();
        for path in doc
            .reads
            .iter()
            .filter_map(|a| declared_path(release, step, a.as_str()))
            .filter(|p| !texts.contains_key(p))
        {
            missing.push(format!("check {} reads {path}", doc.id));
        }
    }
    if !missing.is_empty() {
        return Err(InputMissing(format!(
            "{}, which was not given; give every file the step's checks read (a file whose path \
             ends with the declared one)",
            missing.join("; ")
        ))
        .into());
    }

    let mut results = Vec::new();
    for check in step.checks() {
        let doc = check.doc();
        let inputs: Vec<Input<'_>> = doc
            .reads
            .iter()
            .filter_map(|a| declared_path(release, step, a.as_str()))
            .map(|p| {
                let (path, (_, bytes)) = texts.get_key_value(&p).expect("none is missing");
                Input::new(path, bytes)
            })
            .collect();
        let findings = check.compiled().run(&inputs).map_err(|e| {
            InputError(format!(
                "check {} could not judge these files: {e} ({})",
                doc.id,
                e.code()
            ))
        })?;
        // As the server enforces it: a check being rolled out warns only.
        let findings = doc.enforce(findings);
        let failed = findings.iter().any(|f| f.severity == Severity::Error);
        results.push(CheckResult {
            id: doc.id.as_str(),
            verdict: if failed { "fail" } else { "pass" },
            findings: findings
                .into_iter()
                .map(|finding| Reported {
                    help: doc.help_for(&finding.rule),
                    finding,
                })
                .collect(),
        });
    }

    let out = &mut std::io::stdout().lock();
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &results)?;
            writeln!(out)?;
        }
        Format::Sarif => {
            let given: BTreeMap<&str, &Path> = texts
                .iter()
                .map(|(declared, (file, _))| (declared.as_str(), file.as_path()))
                .collect();
            serde_json::to_writer_pretty(&mut *out, &sarif(&results, &given))?;
            writeln!(out)?;
        }
        Format::Text => {
            for result in &results {
                print_result(result, out)?;
            }
        }
    }
    out.flush()?;
    match results.iter().filter(|r| r.verdict == "fail").count() {
        0 => Ok(()),
        failed => Err(ChecksFailed(failed).into()),
    }
}

/// The results as one SARIF 2.1.0 log: a rule per check and rule id (`check/rule`), a result
/// per finding at the file as given and its line.
fn sarif(results: &[CheckResult<'_>], given: &BTreeMap<&str, &Path>) -> serde_json::Value {
    let mut rules = BTreeMap::new();
    let mut found = Vec::new();
    for result in results {
        for Reported { finding: f, help } in &result.findings {
            let rule = format!("{}/{}", result.id, f.rule);
            rules.insert(rule.clone(), *help);
            let mut located = serde_json::json!({
                "ruleId": rule,
                "level": if f.severity == Severity::Error { "error" } else { "warning" },
                "message": {"text": f.message},
            });
            if let Some(path) = &f.path {
                let uri = given
                    .get(path.as_str())
                    .map_or_else(|| path.clone(), |file| file.display().to_string());
                let mut physical = serde_json::json!({"artifactLocation": {"uri": uri}});
                if let Some(line) = f.line {
                    physical["region"] = serde_json::json!({"startLine": line});
                }
                located["locations"] = serde_json::json!([{"physicalLocation": physical}]);
            }
            found.push(located);
        }
    }
    serde_json::json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "rimthan",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules.iter().map(|(id, help)| sarif_rule(id, *help)).collect::<Vec<_>>(),
            }},
            "results": found,
        }],
    })
}

/// A SARIF `reportingDescriptor`: the rule's help as its text, and its page.
fn sarif_rule(id: &str, help: Option<&RuleHelp>) -> serde_json::Value {
    let mut rule = serde_json::json!({"id": id});
    if let Some(help) = help {
        rule["help"] = serde_json::json!({"text": help.text});
        if let Some(url) = &help.url {
            rule["helpUri"] = serde_json::json!(url);
        }
    }
    rule
}

fn find_step<'r>(release: &'r VerifiedRelease, args: &CheckArgs) -> anyhow::Result<&'r Step> {
    let workflow = release
        .workflows()
        .filter(|w| w.doc().id.as_str() == args.workflow)
        .filter(|w| {
            args.version
                .as_deref()
                .is_none_or(|v| w.doc().version.to_string() == v)
        })
        .max_by(|a, b| a.doc().version.cmp(&b.doc().version))
        .ok_or_else(|| {
            InputError(format!(
                "the source has no workflow {}{}",
                args.workflow,
                args.version
                    .as_deref()
                    .map(|v| format!(" version {v}"))
                    .unwrap_or_default()
            ))
        })?;
    workflow.step(&args.step).ok_or_else(|| {
        let steps: Vec<&str> = workflow
            .steps()
            .iter()
            .map(|s| s.doc().id.as_str())
            .collect();
        InputError(format!(
            "workflow {}@{} has no step {} (steps: {})",
            workflow.doc().id,
            workflow.doc().version,
            args.step,
            steps.join(", ")
        ))
        .into()
    })
}

/// The declared path of an output or input of `step`.
fn declared_path(release: &VerifiedRelease, step: &Step, artifact: &str) -> Option<String> {
    let doc = step.doc();
    release
        .workflow(&doc.workflow, &doc.workflow_version)?
        .steps()
        .iter()
        .flat_map(|s| s.doc().outputs.iter())
        .find(|o| o.artifact_id.as_str() == artifact)
        .map(|o| o.path.clone())
}

/// Each file, as given and read whole up to that output's `max_bytes`, by the declared path it
/// ends with.
fn read_files(
    release: &VerifiedRelease,
    step: &Step,
    files: &[PathBuf],
) -> anyhow::Result<BTreeMap<String, (PathBuf, Vec<u8>)>> {
    let doc = step.doc();
    let workflow = release
        .workflow(&doc.workflow, &doc.workflow_version)
        .expect("a verified step's workflow");
    let declared: Vec<(&str, u64)> = workflow
        .steps()
        .iter()
        .flat_map(|s| s.doc().outputs.iter())
        .filter(|o| {
            doc.outputs
                .iter()
                .any(|own| own.artifact_id == o.artifact_id)
                || doc.inputs.contains(&o.artifact_id)
        })
        .map(|o| (o.path.as_str(), o.max_bytes))
        .collect();
    let mut texts = BTreeMap::new();
    for file in files {
        let Some((path, max_bytes)) = declared.iter().find(|(p, _)| ends_with(file, Path::new(p)))
        else {
            let paths: Vec<&str> = declared.iter().map(|(p, _)| *p).collect();
            return Err(InputError(format!(
                "{} is none of the step's outputs or inputs ({}); name a file whose path ends \
                 with one of them",
                file.display(),
                paths.join(", ")
            ))
            .into());
        };
        let bytes = rimthan_registry::read_regular_file(file, *max_bytes)?;
        if texts
            .insert((*path).to_owned(), (file.clone(), bytes))
            .is_some()
        {
            return Err(InputError(format!("two files are given for {path}")).into());
        }
    }
    Ok(texts)
}

fn ends_with(file: &Path, declared: &Path) -> bool {
    file.ends_with(declared)
}

fn print_result(result: &CheckResult<'_>, out: &mut impl std::io::Write) -> std::io::Result<()> {
    for Reported { finding: f, help } in &result.findings {
        // A finding quotes the text it judged, which an agent wrote.
        let at = match (&f.path, f.line) {
            (Some(p), Some(l)) => format!("{}:{l}: ", printable(p)),
            (Some(p), None) => format!("{}: ", printable(p)),
            _ => String::new(),
        };
        let warning = if f.severity == Severity::Warning {
            " (warning)"
        } else {
            ""
        };
        writeln!(
            out,
            "{at}{}: {}{warning}",
            printable(&f.rule),
            printable(&f.message)
        )?;
        if let Some(help) = help {
            let url = help
                .url
                .as_deref()
                .map(|u| format!(" ({u})"))
                .unwrap_or_default();
            writeln!(out, "  help: {}{url}", help.text)?;
        }
    }
    writeln!(out, "check {}: {}", result.id, result.verdict)
}

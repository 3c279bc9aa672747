//! `rimthan registry check SOURCE --workflow W --step S FILE…`: a step's deterministic checks
//! run on local files, as the server would run them on a participant's outputs. For authors
//! trying a check, and for a participant's own CI before a session.

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::{Path, PathBuf},
};

use clap::Args;
use rimthan_checks::{Finding, Input, Severity};
use rimthan_mcp::report::printable;
use rimthan_registry::{
    ReleaseId, SigningKey, Step, VerifiedRelease, build_release, external_policy, verify_registry,
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
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// One check's result on the files, as `--json` prints it.
#[derive(Debug, Serialize)]
struct CheckResult<'a> {
    id: &'a str,
    /// `pass`, `fail`, or `skipped` when a file it reads was not given.
    verdict: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    missing: Vec<String>,
    findings: Vec<Finding>,
}

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

    let mut results = Vec::new();
    for check in step.checks() {
        let doc = check.doc();
        let missing: Vec<String> = doc
            .reads
            .iter()
            .filter_map(|a| declared_path(release, step, a.as_str()))
            .filter(|p| !texts.contains_key(p))
            .collect();
        if !missing.is_empty() {
            results.push(CheckResult {
                id: doc.id.as_str(),
                verdict: "skipped",
                missing,
                findings: Vec::new(),
            });
            continue;
        }
        let inputs: Vec<Input<'_>> = doc
            .reads
            .iter()
            .filter_map(|a| declared_path(release, step, a.as_str()))
            .map(|p| {
                let (path, bytes) = texts.get_key_value(&p).expect("present");
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
        let failed = findings.iter().any(|f| f.severity == Severity::Error);
        results.push(CheckResult {
            id: doc.id.as_str(),
            verdict: if failed { "fail" } else { "pass" },
            missing: Vec::new(),
            findings,
        });
    }

    let out = &mut std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &results)?;
        writeln!(out)?;
    } else {
        for result in &results {
            print_result(result, out)?;
        }
    }
    out.flush()?;
    match results.iter().filter(|r| r.verdict == "fail").count() {
        0 => Ok(()),
        failed => Err(ChecksFailed(failed).into()),
    }
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

/// Each file by the declared path it ends with, read whole up to that output's `max_bytes`.
fn read_files(
    release: &VerifiedRelease,
    step: &Step,
    files: &[PathBuf],
) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
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
        if texts.insert((*path).to_owned(), bytes).is_some() {
            return Err(InputError(format!("two files are given for {path}")).into());
        }
    }
    Ok(texts)
}

fn ends_with(file: &Path, declared: &Path) -> bool {
    file.ends_with(declared)
}

fn print_result(result: &CheckResult<'_>, out: &mut impl std::io::Write) -> std::io::Result<()> {
    match result.verdict {
        "skipped" => writeln!(
            out,
            "check {}: skipped, it reads {} (not given)",
            result.id,
            result.missing.join(", ")
        ),
        verdict => {
            for f in &result.findings {
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
            }
            writeln!(out, "check {}: {verdict}", result.id)
        }
    }
}

//! `rimthan registry test SOURCE`: every workflow test case of a release source
//! (`workflows/<id>/<version>/tests/<case>/case.json`, `docs/authoring.md` §13), each run as
//! `rimthan stage` runs a session, in this process, against the source built as a throwaway
//! draft: PASS, or FAIL with the first place where the session went otherwise.

use std::path::{Path, PathBuf};

use clap::Args;
use rimthan_engine::Serving;
use rimthan_registry::{
    Harness, ReleaseId, SigningKey, Version, WorkflowId, build_draft, external_policy, publish,
    verify_registry,
};
use rimthan_stage::{CASE_FILE, Case, TESTS_DIR, Target, find_cases, run_case};

use super::parse;
use crate::commands::InputError;

#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// The release source folder.
    src: PathBuf,
    /// Only this workflow's cases (with --init: the workflow to write a case for).
    #[arg(long)]
    workflow: Option<String>,
    /// Instead of running: write a case named CASE for --workflow (its highest version unless
    /// --workflow-version), the happy path through every step on the worked examples, to edit.
    #[arg(long, value_name = "CASE", requires = "workflow")]
    init: Option<String>,
    /// With --init: the workflow version.
    #[arg(long, requires = "init")]
    workflow_version: Option<String>,
    /// text; json: {"cases": [{"workflow", "version", "case", "result", "divergence"}]}; or
    /// junit: a JUnit XML report, one testcase per case, for a CI system to show.
    #[arg(long, default_value = "text")]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
}

/// Cases that did not go as they say; each was printed.
#[derive(Debug)]
pub(crate) struct CasesFailed(usize);

impl std::fmt::Display for CasesFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} workflow test case(s) failed", self.0)
    }
}

impl std::error::Error for CasesFailed {}

pub(crate) fn test(args: TestArgs) -> anyhow::Result<()> {
    let workflow = args.workflow.as_deref().map(parse).transpose()?;
    if let (Some(case), Some(workflow)) = (&args.init, &workflow) {
        return init(&args.src, workflow, args.workflow_version.as_deref(), case);
    }
    let cases = find_cases(&args.src, workflow.as_ref())?;
    if cases.is_empty() {
        return Err(InputError(format!(
            "no test case under {}/workflows/<id>/<version>/tests/<case>/case.json; \
             docs/authoring.md section 13 says how to write one",
            args.src.display()
        ))
        .into());
    }
    let results = run_cases(&args.src, &cases, &mut |case, divergence| {
        if args.format == Format::Text {
            println!("{}", line(case, divergence));
        }
    })?;
    let failed = results.iter().filter(|(_, d)| d.is_some()).count();
    match args.format {
        Format::Text => println!(
            "{} case(s): {} passed, {failed} failed",
            results.len(),
            results.len() - failed
        ),
        Format::Json => {
            let cases: Vec<_> = results
                .iter()
                .map(|(case, divergence)| {
                    serde_json::json!({
                        "workflow": case.workflow.as_str(),
                        "version": case.version.to_string(),
                        "case": case.name,
                        "result": if divergence.is_some() { "fail" } else { "pass" },
                        "divergence": divergence,
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "cases": cases }))?
            );
        }
        Format::Junit => print!("{}", junit(&results, failed)),
    }
    match failed {
        0 => Ok(()),
        failed => Err(CasesFailed(failed).into()),
    }
}

/// `PASS workflow@version case`, or `FAIL …: divergence`.
pub(super) fn line(case: &Case, divergence: Option<&str>) -> String {
    match divergence {
        None => format!("PASS {}@{} {}", case.workflow, case.version, case.name),
        Some(d) => format!("FAIL {}@{} {}: {d}", case.workflow, case.version, case.name),
    }
}

/// Runs `cases` of `source` against the source as it stands, built as a draft into a folder
/// nobody keeps and signed with a key nobody keeps (so an author's key, or the embedded
/// default's development key, is never needed), each case on a fresh store; calls `each` as a
/// case ends, and returns every case with its divergence, if any.
pub(super) fn run_cases<'c>(
    source: &Path,
    cases: &'c [Case],
    each: &mut dyn FnMut(&Case, Option<&str>),
) -> anyhow::Result<Vec<(&'c Case, Option<String>)>> {
    let release: ReleaseId = "test".parse().expect("a valid release id");
    let built = build_draft(source, &release, &SigningKey::generate()?)?;
    let work = tempfile::tempdir()?;
    let registry = work.path().join("registry");
    publish(&registry, &built)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut results = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let harness = match case.file.harness {
            Some(harness) => harness,
            None => first_pinned(source, case)?,
        };
        let target = Target::InProcess {
            database_url: format!(
                "sqlite://{}",
                work.path().join(format!("case-{i}.sqlite")).display()
            ),
            registry: Some(registry.clone()),
            serving: Serving::Release(built.release.clone()),
        };
        let project = work.path().join(format!("case-{i}"));
        let divergence = match runtime.block_on(run_case(case, harness, target, project)) {
            Ok(divergence) => divergence,
            Err(e) => Some(format!("the run stopped: {e}")),
        };
        each(case, divergence.as_deref());
        results.push((case, divergence));
    }
    Ok(results)
}

/// Writes the happy path of `workflow` as a new case: every step advances on the worked
/// examples, the last completes, or the first step people sign off waits for them and ends it.
fn init(
    source: &Path,
    workflow: &WorkflowId,
    version: Option<&str>,
    case: &str,
) -> anyhow::Result<()> {
    let version: Option<Version> = version.map(parse).transpose()?;
    if case.is_empty()
        || !case
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(InputError(format!(
            "--init {case:?}: name the case with letters, digits, - and _"
        ))
        .into());
    }
    // The source as built, so the case follows the steps the release will hold.
    let built = build_draft(
        source,
        &"init".parse().expect("a valid id"),
        &SigningKey::generate()?,
    )?;
    let files = built.files.clone();
    let registry = verify_registry(&files, &external_policy())?;
    let release = registry
        .releases()
        .values()
        .next()
        .expect("a build holds its release");
    let found = match &version {
        Some(v) => release.workflow(workflow, v),
        None => release.latest_workflow(workflow),
    };
    let Some(found) = found else {
        return Err(InputError(format!(
            "{}: no workflow {workflow}{} in the source",
            source.display(),
            version.map(|v| format!(" version {v}")).unwrap_or_default()
        ))
        .into());
    };
    let mut submissions = Vec::new();
    let steps = found.steps();
    for (i, step) in steps.iter().enumerate() {
        let id = step.doc().id.to_string();
        if step.doc().approval.is_some() {
            submissions.push(
                serde_json::json!({"step": id, "expect": "awaiting_approval", "to_waive": []}),
            );
            break;
        }
        let expect = if i + 1 == steps.len() {
            "completed"
        } else {
            "advanced"
        };
        submissions.push(serde_json::json!({"step": id, "expect": expect}));
    }
    let status = submissions
        .last()
        .and_then(|s| s["expect"].as_str())
        .map(|e| {
            if e == "awaiting_approval" {
                e
            } else {
                "completed"
            }
        });
    let dir = source
        .join("workflows")
        .join(workflow.as_str())
        .join(found.doc().version.to_string())
        .join(TESTS_DIR)
        .join(case);
    if dir.exists() {
        return Err(InputError(format!(
            "{}: exists; name another case or edit that one",
            dir.display()
        ))
        .into());
    }
    std::fs::create_dir_all(&dir)?;
    let doc = serde_json::json!({
        "description": "The happy path on the worked examples: edit the outputs, failing validators and expectations to test another path.",
        "submissions": submissions,
        "status": status,
    });
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    std::fs::write(dir.join(CASE_FILE), text)?;
    println!(
        "wrote {}\nrun it: rimthan registry test {} --workflow {workflow}",
        dir.join(CASE_FILE).display(),
        source.display()
    );
    Ok(())
}

/// The JUnit XML report: one `testcase` per case (`classname` the workflow and version), a
/// `failure` carrying the divergence.
fn junit(results: &[(&Case, Option<String>)], failed: usize) -> String {
    use quick_xml::escape::escape;
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"{n}\" failures=\"{failed}\">\n\
         <testsuite name=\"rimthan registry test\" tests=\"{n}\" failures=\"{failed}\">\n",
        n = results.len()
    );
    for (case, divergence) in results {
        let class = escape(format!("{}@{}", case.workflow, case.version)).into_owned();
        let name = escape(case.name.as_str()).into_owned();
        match divergence {
            None => xml.push_str(&format!(
                "<testcase classname=\"{class}\" name=\"{name}\"/>\n"
            )),
            Some(divergence) => xml.push_str(&format!(
                "<testcase classname=\"{class}\" name=\"{name}\"><failure message=\"{}\"/></testcase>\n",
                escape(divergence.as_str())
            )),
        }
    }
    xml.push_str("</testsuite>\n</testsuites>\n");
    xml
}

/// The first harness `workflow.json` pins, in name order.
fn first_pinned(source: &Path, case: &Case) -> anyhow::Result<Harness> {
    let path = source
        .join("workflows")
        .join(case.workflow.as_str())
        .join(case.version.to_string())
        .join("workflow.json");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    doc["harnesses"]
        .as_object()
        .and_then(|h| h.keys().next())
        .and_then(|h| h.parse().ok())
        .ok_or_else(|| {
            InputError(format!(
                "{}: pins no harness; name one in the case's `harness`",
                path.display()
            ))
            .into()
        })
}

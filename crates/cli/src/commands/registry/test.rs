//! `rimthan registry test SOURCE`: every workflow test case of a release source
//! (`workflows/<id>/<version>/tests/<case>/case.json`, `docs/authoring.md` §13), each run as
//! `rimthan stage` runs a session, in this process, against the source built as a throwaway
//! draft: PASS, or FAIL with the first place where the session went otherwise.

use std::path::{Path, PathBuf};

use clap::Args;
use rimthan_engine::Serving;
use rimthan_registry::{Harness, ReleaseId, SigningKey, build_draft, publish};
use rimthan_stage::{Case, Target, find_cases, run_case};

use super::parse;
use crate::commands::InputError;

#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// The release source folder.
    src: PathBuf,
    /// Only this workflow's cases.
    #[arg(long)]
    workflow: Option<String>,
    /// text, or json: {"cases": [{"workflow", "version", "case", "result", "divergence"}]}.
    #[arg(long, default_value = "text")]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
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
    let cases = find_cases(&args.src, workflow.as_ref())?;
    if cases.is_empty() {
        return Err(InputError(format!(
            "no test case under {}/workflows/<id>/<version>/tests/<case>/case.json; \
             docs/authoring.md section 13 says how to write one",
            args.src.display()
        ))
        .into());
    }
    // The source as it stands, built as a draft nobody keeps, signed with a key nobody keeps.
    let work = tempfile::tempdir()?;
    let registry = work.path().join("registry");
    let release: ReleaseId = "test".parse().expect("a valid release id");
    let built = build_draft(&args.src, &release, &SigningKey::generate()?)?;
    publish(&registry, &built)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut results = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let harness = match case.file.harness {
            Some(harness) => harness,
            None => first_pinned(&args.src, case)?,
        };
        let target = Target::InProcess {
            database_url: format!(
                "sqlite://{}",
                work.path().join(format!("case-{i}.sqlite")).display()
            ),
            registry: Some(registry.clone()),
            serving: Serving::Release(release.clone()),
        };
        let project = work.path().join(format!("case-{i}"));
        let divergence = match runtime.block_on(run_case(case, harness, target, project)) {
            Ok(divergence) => divergence,
            Err(e) => Some(format!("the run stopped: {e}")),
        };
        if args.format == Format::Text {
            match &divergence {
                None => println!("PASS {}@{} {}", case.workflow, case.version, case.name),
                Some(d) => println!("FAIL {}@{} {}: {d}", case.workflow, case.version, case.name),
            }
        }
        results.push((case, divergence));
    }
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
    }
    match failed {
        0 => Ok(()),
        failed => Err(CasesFailed(failed).into()),
    }
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

//! `rimthan registry init DIR`: a minimal release source that builds, verifies and stages as
//! written: one workflow with a setup step and one work step (a JSON output whose schema
//! carries an example), one validator, the base validator report schema and the pinned host
//! adapters. The template is real files under `src/init/template/`; the shared pieces are the
//! committed source's own files, so they never drift from what the default release ships.

use std::{fs, path::Path};

use crate::{
    error::RegistryError,
    ids::{Harness, WorkflowId},
};

/// The adapter version `init` pins and copies: the current one (`docs/authoring.md` §3).
pub const INIT_ADAPTER_VERSION: &str = "1.2.0";

/// `(path in the source folder, content)` of every file `init` writes but the workflow's and
/// the adapters'. Workflow files are under `workflows/my-workflow/1.0.0/` here and move to the
/// chosen workflow id.
const TEMPLATE: &[(&str, &str)] = &[
    (
        "workflows/my-workflow/1.0.0/workflow.json",
        include_str!("init/template/workflows/my-workflow/1.0.0/workflow.json"),
    ),
    (
        "workflows/my-workflow/1.0.0/steps/setup-workspace.md",
        include_str!("init/template/workflows/my-workflow/1.0.0/steps/setup-workspace.md"),
    ),
    (
        "workflows/my-workflow/1.0.0/steps/write-result.md",
        include_str!("init/template/workflows/my-workflow/1.0.0/steps/write-result.md"),
    ),
    (
        "schemas/result/1.0.0.json",
        include_str!("init/template/schemas/result/1.0.0.json"),
    ),
    (
        "validators/result-checker/1.0.0.md",
        include_str!("init/template/validators/result-checker/1.0.0.md"),
    ),
    (
        "schemas/validator-report/1.0.0.json",
        include_str!("../../../registry/source/schemas/validator-report/1.0.0.json"),
    ),
];

/// The current adapter of each harness, from the committed source.
const ADAPTERS: &[(Harness, &str)] = &[
    (
        Harness::Codex,
        include_str!("../../../registry/source/adapters/codex/1.2.0.md"),
    ),
    (
        Harness::ClaudeCode,
        include_str!("../../../registry/source/adapters/claude-code/1.2.0.md"),
    ),
    (
        Harness::Cowork,
        include_str!("../../../registry/source/adapters/cowork/1.2.0.md"),
    ),
    (
        Harness::Buzz,
        include_str!("../../../registry/source/adapters/buzz/1.2.0.md"),
    ),
];

/// The workflow id the template defines unless told otherwise.
pub const INIT_WORKFLOW_ID: &str = "my-workflow";

/// What `init` names and pins.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InitOptions {
    /// The workflow id (its folder under `workflows/`).
    pub workflow: WorkflowId,
    /// The harnesses to pin (each at [`INIT_ADAPTER_VERSION`]); only their adapters are written.
    pub harnesses: Vec<Harness>,
}

impl Default for InitOptions {
    fn default() -> Self {
        Self {
            workflow: INIT_WORKFLOW_ID.parse().expect("a valid id"),
            harnesses: Harness::ALL.to_vec(),
        }
    }
}

impl InitOptions {
    /// Names the workflow `workflow` and pins exactly `harnesses` (all four when empty).
    pub fn new(workflow: WorkflowId, harnesses: Vec<Harness>) -> Self {
        let harnesses = if harnesses.is_empty() {
            Harness::ALL.to_vec()
        } else {
            harnesses
        };
        Self {
            workflow,
            harnesses,
        }
    }
}

/// [`init_source_with`] the default options: `my-workflow`, every harness pinned.
pub fn init_source(dir: &Path) -> Result<Vec<String>, RegistryError> {
    init_source_with(dir, &InitOptions::default())
}

/// Writes the template release source into `dir` (created when absent), its workflow named and
/// pinned as `options` say, and returns the source-relative paths written. A `dir` that exists
/// and is not an empty folder is refused (`source_invalid`), so an author's files are never
/// overwritten.
pub fn init_source_with(dir: &Path, options: &InitOptions) -> Result<Vec<String>, RegistryError> {
    if dir.exists() {
        let empty = dir.is_dir()
            && fs::read_dir(dir)
                .map_err(RegistryError::io(dir))?
                .next()
                .is_none();
        if !empty {
            return Err(RegistryError::SourceInvalid {
                file: dir.display().to_string(),
                line: None,
                reason: "exists and is not an empty folder; init writes a new release source \
                         only into a new or empty folder"
                    .into(),
            });
        }
    }
    let id = options.workflow.as_str();
    let mut files: Vec<(String, String)> = TEMPLATE
        .iter()
        .map(|(rel, content)| {
            let rel = rel.replacen(INIT_WORKFLOW_ID, id, 1);
            let content = if rel.ends_with("workflow.json") {
                workflow_json(content, options)
            } else {
                (*content).to_owned()
            };
            (rel, content)
        })
        .collect();
    for (harness, content) in ADAPTERS {
        if options.harnesses.contains(harness) {
            files.push((
                format!("adapters/{harness}/{INIT_ADAPTER_VERSION}.md"),
                (*content).to_owned(),
            ));
        }
    }
    for (rel, content) in &files {
        let path = dir.join(rel);
        let parent = path.parent().expect("template paths have a folder");
        fs::create_dir_all(parent).map_err(RegistryError::io(parent))?;
        fs::write(&path, content).map_err(RegistryError::io(&path))?;
    }
    Ok(files.into_iter().map(|(rel, _)| rel).collect())
}

/// The template's `workflow.json` with the workflow's id in its text and one pin line per
/// chosen harness (the template has one line per harness, `"<harness>": {...}`).
fn workflow_json(template: &str, options: &InitOptions) -> String {
    let mut out = Vec::new();
    let mut pins = Vec::new();
    for line in template.lines() {
        let pinned = Harness::ALL
            .iter()
            .find(|h| line.trim_start().starts_with(&format!("\"{h}\":")));
        match pinned {
            Some(h) if options.harnesses.contains(h) => {
                pins.push(format!(
                    "    \"{h}\": {{\"id\": \"{h}\", \"version\": \"{INIT_ADAPTER_VERSION}\"}}"
                ));
            }
            Some(_) => {}
            None => {
                if !pins.is_empty() {
                    out.push(pins.join(",\n"));
                    pins.clear();
                }
                out.push(line.replace(INIT_WORKFLOW_ID, options.workflow.as_str()));
            }
        }
    }
    out.join("\n") + "\n"
}

//! `rimthan registry init DIR`: a minimal release source that builds, verifies and stages as
//! written: one workflow with a setup step and one work step (a JSON output whose schema
//! carries an example), one validator, the base validator report schema and the pinned host
//! adapters. The template is real files under `src/init/template/`; the shared pieces are the
//! committed source's own files, so they never drift from what the default release ships.

use std::{fs, path::Path};

use crate::error::RegistryError;

/// `(path in the source folder, content)` of every file `init` writes.
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
    (
        "adapters/codex/1.1.0.md",
        include_str!("../../../registry/source/adapters/codex/1.1.0.md"),
    ),
    (
        "adapters/claude-code/1.1.0.md",
        include_str!("../../../registry/source/adapters/claude-code/1.1.0.md"),
    ),
    (
        "adapters/cowork/1.1.0.md",
        include_str!("../../../registry/source/adapters/cowork/1.1.0.md"),
    ),
    (
        "adapters/buzz/1.1.0.md",
        include_str!("../../../registry/source/adapters/buzz/1.1.0.md"),
    ),
];

/// The workflow id the template defines.
pub const INIT_WORKFLOW_ID: &str = "my-workflow";

/// Writes the template release source into `dir` (created when absent) and returns the
/// source-relative paths written. A `dir` that exists and is not an empty folder is refused
/// (`source_invalid`), so an author's files are never overwritten.
pub fn init_source(dir: &Path) -> Result<Vec<&'static str>, RegistryError> {
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
    for (rel, content) in TEMPLATE {
        let path = dir.join(rel);
        let parent = path.parent().expect("template paths have a folder");
        fs::create_dir_all(parent).map_err(RegistryError::io(parent))?;
        fs::write(&path, content).map_err(RegistryError::io(&path))?;
    }
    Ok(TEMPLATE.iter().map(|(rel, _)| *rel).collect())
}

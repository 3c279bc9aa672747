//! The rules of a workflow version folder's layout: what may sit there, and that every step file
//! is one the workflow lists.

use std::path::Path;

use super::source::{sorted_names, source_error};
use crate::{error::RegistryError, ids::StepId};

/// A workflow version folder holds `workflow.json`, `steps/` and optionally `examples/`,
/// `checks/`, `counter-examples/` and `tests/` (the workflow test cases `rimthan registry test`
/// runs; not release content).
pub(super) fn check_version_folder(root: &Path) -> Result<(), RegistryError> {
    if !root.is_dir() {
        return Err(source_error(
            root,
            "expected a folder workflows/<id>/<version>/ holding workflow.json and steps/".into(),
        ));
    }
    for name in sorted_names(root)? {
        if !matches!(
            name.as_str(),
            "workflow.json" | "steps" | "examples" | "checks" | "counter-examples" | "tests"
        ) && !name.eq_ignore_ascii_case("workflow.json")
        {
            return Err(source_error(
                &root.join(&name),
                "not part of a workflow version folder, which holds workflow.json, steps/ and \
                 optionally examples/, checks/, counter-examples/ and tests/; move or delete it"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// Every file in `steps/` is `<id>.md` for an id the workflow lists: an unlisted step file is
/// an author's mistake, never silently dropped.
pub(super) fn check_unlisted_steps(
    dir: &Path,
    listed: &[StepId],
    def_path: &Path,
) -> Result<(), RegistryError> {
    if !dir.is_dir() {
        return Ok(());
    }
    let names = sorted_names(dir)?;
    for name in &names {
        let is_listed = name
            .strip_suffix(".md")
            .is_some_and(|stem| listed.iter().any(|s| s.as_str() == stem));
        // A near miss of a listed step whose file is absent is reported as that missing file.
        let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
        let near_listed = listed
            .iter()
            .any(|s| stem.eq_ignore_ascii_case(s.as_str()) && !names.contains(&format!("{s}.md")));
        if !is_listed && !near_listed {
            return Err(source_error(
                &dir.join(name),
                format!(
                    "not a step of this workflow: {} lists no step of this name (step files are \
                     steps/<step id>.md); add it to the steps list or delete the file",
                    def_path.display()
                ),
            ));
        }
    }
    Ok(())
}

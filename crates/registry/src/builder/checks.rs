//! The author's rules checked on the source, before the release is assembled: each failure
//! names the source file the author edits, its line where the text shows it, and the nearest
//! existing name when a reference is a near miss. The verifier checks the built release again;
//! these checks only make its refusals land on the right file, plus the two authoring rules of
//! `docs/authoring.md` §4 the built format cannot see (a work step runs at least one validator,
//! and setup delivers every validator a work step runs).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use super::source::source_error_at;
use crate::{
    error::RegistryError,
    ids::{ArtifactId, AssetKind, Harness, StepKind, Version},
    model::{AdapterPin, StepDoc, ValidatorRef},
};

/// What the workflows of a source may refer to, gathered before the workflows are read.
#[derive(Default)]
pub(super) struct Catalog {
    /// Each validator's source file, its text and the artifact ids it reads.
    pub(super) validators: BTreeMap<ValidatorRef, ValidatorSourceFile>,
    /// Host-adapter id → the versions the source holds.
    pub(super) adapters: BTreeMap<String, BTreeSet<Version>>,
}

pub(super) struct ValidatorSourceFile {
    pub(super) path: PathBuf,
    pub(super) text: String,
    pub(super) inputs: Vec<ArtifactId>,
}

/// One step as read from its source file.
pub(super) struct StepFile<'a> {
    pub(super) doc: &'a StepDoc,
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
}

impl Catalog {
    /// Checks a workflow's adapter pins against the adapters of the source.
    pub(super) fn check_pins(
        &self,
        def_path: &Path,
        def_text: &str,
        harnesses: &BTreeMap<Harness, AdapterPin>,
    ) -> Result<(), RegistryError> {
        for (harness, pin) in harnesses {
            let line = line_where(def_text, |l| l.contains(&format!("\"{harness}\"")));
            let reason = match self.adapters.get(pin.id.as_str()) {
                Some(versions) if versions.contains(&pin.version) => continue,
                Some(versions) => format!(
                    "{harness} pins adapter {}@{}, which the source does not hold; versions of {} \
                     here: {} (adapters/{}/<version>.md)",
                    pin.id,
                    pin.version,
                    pin.id,
                    join(versions.iter()),
                    pin.id
                ),
                None => format!(
                    "{harness} pins adapter {}@{}, but the source has no adapter {}{}; adapters \
                     here: {}",
                    pin.id,
                    pin.version,
                    pin.id,
                    did_you_mean(pin.id.as_str(), self.adapters.keys()),
                    join(self.adapters.keys())
                ),
            };
            return Err(source_error_at(def_path, line, reason));
        }
        Ok(())
    }

    /// Checks the steps of one workflow, in order.
    pub(super) fn check_steps(&self, steps: &[StepFile<'_>]) -> Result<(), RegistryError> {
        let mut available: BTreeSet<&ArtifactId> = BTreeSet::new();
        let setup = steps.first().filter(|s| s.doc.kind == StepKind::Setup);
        for step in steps.iter().filter(|s| s.doc.kind == StepKind::Work) {
            for input in &step.doc.inputs {
                if !available.contains(input) {
                    return Err(source_error_at(
                        step.path,
                        item_line(step.text, input.as_str()),
                        format!(
                            "input {input} is not an output of an earlier step{}",
                            did_you_mean(input.as_str(), available.iter().map(|a| a.as_str()))
                        ),
                    ));
                }
            }
            available.extend(step.doc.outputs.iter().map(|o| &o.artifact_id));
            if step.doc.validators.is_empty() {
                return Err(source_error_at(
                    step.path,
                    line_where(step.text, |l| l.starts_with("validators:")),
                    format!(
                        "work step {} runs no validator; every work step is judged by at least \
                         one: list it under validators (docs/authoring.md §4)",
                        step.doc.id
                    ),
                ));
            }
            for v in &step.doc.validators {
                self.check_validator(step, v, &available)?;
                if let Some(setup) = setup {
                    check_delivered(setup, v)?;
                }
            }
        }
        Ok(())
    }

    fn check_validator(
        &self,
        step: &StepFile<'_>,
        v: &ValidatorRef,
        available: &BTreeSet<&ArtifactId>,
    ) -> Result<(), RegistryError> {
        let Some(validator) = self.validators.get(v) else {
            let versions: Vec<_> = self
                .validators
                .keys()
                .filter(|k| k.id == v.id)
                .map(|k| &k.version)
                .collect();
            let hint = if versions.is_empty() {
                did_you_mean(v.id.as_str(), self.validators.keys().map(|k| k.id.as_str()))
            } else {
                format!("; versions of {} here: {}", v.id, join(versions.iter()))
            };
            return Err(source_error_at(
                step.path,
                item_line(step.text, v.id.as_str()),
                format!(
                    "validator {}@{} is not in the source (validators/{}/{}.md){hint}",
                    v.id, v.version, v.id, v.version
                ),
            ));
        };
        match validator.inputs.iter().find(|i| !available.contains(i)) {
            Some(missing) => Err(source_error_at(
                &validator.path,
                item_line(&validator.text, missing.as_str()),
                format!(
                    "input {missing} is not an output of step {} or an earlier step of workflow \
                     {}, which runs this validator{}",
                    step.doc.id,
                    step.doc.workflow,
                    did_you_mean(missing.as_str(), available.iter().map(|a| a.as_str()))
                ),
            )),
            None => Ok(()),
        }
    }
}

/// A validator a work step runs reaches a host only as a subagent the setup step delivers.
fn check_delivered(setup: &StepFile<'_>, v: &ValidatorRef) -> Result<(), RegistryError> {
    let delivered = setup.doc.host_assets.iter().any(|a| {
        a.kind == AssetKind::Subagent && a.id.as_str() == v.id.as_str() && a.version == v.version
    });
    if delivered {
        return Ok(());
    }
    Err(source_error_at(
        setup.path,
        line_where(setup.text, |l| l.starts_with("host_assets:")),
        format!(
            "setup does not deliver validator {}@{}, which a work step runs, so a host would have \
             no subagent to run it; add to host_assets: {{kind: subagent, id: {}, version: \"{}\"}} \
             (docs/authoring.md §4)",
            v.id, v.version, v.id, v.version
        ),
    ))
}

/// The 1-based line of the first line of `text` that `pred` accepts (given the line trimmed).
fn line_where(text: &str, pred: impl Fn(&str) -> bool) -> Option<usize> {
    text.lines().position(|l| pred(l.trim())).map(|i| i + 1)
}

/// The line that names `id` as a list item or a key's value (`- id`, `id: id`, `"id"`).
pub(super) fn item_line(text: &str, id: &str) -> Option<usize> {
    line_where(text, |l| {
        let value = l.trim_start_matches("- ");
        let value = value.strip_prefix("id:").unwrap_or(value);
        value.trim().trim_matches(['"', '\'', ',']) == id
    })
}

fn join<T: std::fmt::Display>(items: impl Iterator<Item = T>) -> String {
    let items: Vec<String> = items.map(|i| i.to_string()).collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// `"; did you mean X?"` for the candidate nearest to `word`, when one is near enough to be a
/// typo (at most a third of the word's length in edits, and at least one); otherwise empty.
pub(super) fn did_you_mean<T: AsRef<str>>(
    word: &str,
    candidates: impl Iterator<Item = T>,
) -> String {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .map(|c| (strsim::levenshtein(word, c.as_ref()), c.as_ref().to_owned()))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| format!("; did you mean {c}?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_is_suggested_and_a_stranger_is_not() {
        let ids = ["result", "summary-table"];
        assert_eq!(did_you_mean("resutl", ids.iter()), "; did you mean result?");
        assert_eq!(did_you_mean("budget", ids.iter()), "");
    }

    #[test]
    fn an_item_line_is_found_in_yaml_lists_and_ids() {
        let text = "---\ninputs:\n  - result\nvalidators:\n  - id: checker\n";
        assert_eq!(item_line(text, "result"), Some(3));
        assert_eq!(item_line(text, "checker"), Some(5));
    }
}

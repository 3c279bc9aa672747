//! Deterministic checks attached to their steps: each `check` entry is listed by exactly the
//! step it names, reads only what that step can give it (its outputs and its inputs), and
//! compiles, so a verified release never holds a check the server could not run.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use rimthan_checks::{Check, Limits};

use super::load::{Res, Structure};
use crate::{
    error::RegistryError,
    ids::{ArtifactId, CheckId, CheckKind},
    model::{CheckDoc, Entry, MAX_RULE_HELP, StepDoc},
    release::{StepCheck, VerifiedRelease},
};

/// Most artifacts one check may read (the runtime's `Limits::max_inputs`).
pub(crate) const MAX_CHECK_READS: usize = 32;

impl Structure<'_> {
    pub(super) fn attach_checks(&mut self, release: &mut VerifiedRelease) -> Res {
        let mut pending = std::mem::take(&mut self.checks);
        for versions in release.workflows.values_mut() {
            for workflow in versions.values_mut() {
                let key = (workflow.doc.id.clone(), workflow.doc.version.clone());
                let mut by_id: BTreeMap<CheckId, (CheckDoc, Entry)> = BTreeMap::new();
                for (doc, entry) in pending.remove(&key).unwrap_or_default() {
                    if by_id.contains_key(&doc.id) {
                        return Err(self.duplicate(&entry));
                    }
                    by_id.insert(doc.id.clone(), (doc, entry));
                }
                let max_bytes: BTreeMap<&ArtifactId, u64> = workflow
                    .steps
                    .iter()
                    .flat_map(|s| &s.doc.outputs)
                    .map(|o| (&o.artifact_id, o.max_bytes))
                    .collect();
                let mut attached = Vec::new();
                for (index, step) in workflow.steps.iter().enumerate() {
                    let mut checks = Vec::new();
                    for id in &step.doc.checks {
                        let Some((doc, entry)) = by_id.remove(id) else {
                            return Err(self.dangling(&step.entry, format!("check {id}")));
                        };
                        if doc.step != step.doc.id {
                            return Err(self.invalid(
                                &entry,
                                format!(
                                    "names step {} but step {} lists it; a check belongs to \
                                     the one step that lists it",
                                    doc.step, step.doc.id
                                ),
                            ));
                        }
                        let compiled = self.compile(&doc, &entry, &step.doc, &max_bytes)?;
                        checks.push(StepCheck {
                            doc,
                            entry,
                            compiled,
                        });
                    }
                    attached.push((index, checks));
                }
                if let Some((_, entry)) = by_id.into_values().next() {
                    return Err(self.invalid(
                        &entry,
                        "no step of its workflow version lists this check; add it to the step's \
                         checks or remove it"
                            .into(),
                    ));
                }
                for (index, checks) in attached {
                    workflow.steps[index].checks = checks;
                }
            }
        }
        if let Some((_, entry)) = pending.into_values().flatten().next() {
            return Err(self.dangling(
                &entry,
                format!(
                    "workflow {}@{}",
                    entry.workflow.as_ref().map_or("", |w| w.as_str()),
                    entry.version
                ),
            ));
        }
        Ok(())
    }

    fn invalid(&self, entry: &Entry, reason: String) -> RegistryError {
        RegistryError::CheckInvalid {
            file: self.file(entry),
            line: None,
            entry: entry.label(),
            reason,
        }
    }

    /// Compiles `doc` once per verification for each limits its steps give it.
    fn compile(
        &mut self,
        doc: &CheckDoc,
        entry: &Entry,
        step: &StepDoc,
        max_bytes: &BTreeMap<&ArtifactId, u64>,
    ) -> Res<Arc<Check>> {
        let limits = reads_limits(doc, step, max_bytes).map_err(|r| self.invalid(entry, r))?;
        if let Some(kept) = self.compiled.check(&entry.sha256, &limits) {
            return Ok(kept);
        }
        let check =
            Arc::new(compile_with(doc, limits.clone()).map_err(|r| self.invalid(entry, r))?);
        self.compiled
            .keep_check(entry.sha256, limits, Arc::clone(&check));
        Ok(check)
    }
}

/// Compiles `doc` as a check of `step`, with bounds from the declared sizes of what it reads;
/// `Err` says what the author changes.
pub(crate) fn compile_check(
    doc: &CheckDoc,
    step: &StepDoc,
    max_bytes: &BTreeMap<&ArtifactId, u64>,
) -> Result<Check, String> {
    compile_with(doc, reads_limits(doc, step, max_bytes)?)
}

fn compile_with(doc: &CheckDoc, limits: Limits) -> Result<Check, String> {
    check_help(doc)?;
    let compiled = match (doc.kind, &doc.script, &doc.rules) {
        (CheckKind::Script, Some(script), None) => Check::script(script, limits),
        (CheckKind::SqlLint, None, Some(rules)) if !rules.is_empty() => Check::sql_lint(
            rules
                .iter()
                .map(|(rule, severity)| (rule.as_str(), *severity)),
            limits,
        ),
        (CheckKind::Script, _, _) => {
            return Err("a script check carries its source in `script` and no `rules`".into());
        }
        (CheckKind::SqlLint, _, _) => {
            return Err(
                "a sql-lint check names at least one squawk rule in `rules` and \
                        carries no `script`"
                    .into(),
            );
        }
    };
    compiled.map_err(|e| format!("{e} ({})", e.code()))
}

/// A check describes at most [`MAX_RULE_HELP`] rules, each in one bounded line; a `sql-lint`
/// check only rules it runs.
fn check_help(doc: &CheckDoc) -> Result<(), String> {
    if doc.help.len() > MAX_RULE_HELP {
        return Err(format!(
            "describes {} rules in `help`; at most {MAX_RULE_HELP}",
            doc.help.len()
        ));
    }
    for (rule, help) in &doc.help {
        help.validate(rule)?;
        if let Some(rules) = &doc.rules
            && !rules.contains_key(rule)
        {
            return Err(format!(
                "`help` describes rule {rule}, which is not among its `rules`; add it there or \
                 remove its help"
            ));
        }
    }
    Ok(())
}

/// The bounds a check runs under: the defaults, with each input allowed the largest declared
/// size of what the check reads, so an output at its `max_bytes` is always checked.
fn reads_limits(
    doc: &CheckDoc,
    step: &StepDoc,
    max_bytes: &BTreeMap<&ArtifactId, u64>,
) -> Result<Limits, String> {
    if doc.reads.is_empty() {
        return Err("reads nothing; name the artifacts it checks in `reads`".into());
    }
    if doc.reads.len() > MAX_CHECK_READS {
        return Err(format!(
            "reads {} artifacts; at most {MAX_CHECK_READS}",
            doc.reads.len()
        ));
    }
    let mut seen = BTreeSet::new();
    let mut largest = 0u64;
    for read in &doc.reads {
        if !seen.insert(read) {
            return Err(format!("reads {read} twice"));
        }
        let own = step.outputs.iter().any(|o| &o.artifact_id == read);
        if !own && !step.inputs.contains(read) {
            return Err(format!(
                "reads {read}, which is neither an output nor an input of step {}; a check \
                 reads its step's outputs, and earlier outputs the step lists as inputs",
                step.id
            ));
        }
        largest = largest.max(max_bytes.get(read).copied().unwrap_or(0));
    }
    let largest = usize::try_from(largest).unwrap_or(usize::MAX);
    Ok(Limits::default().with_max_input_bytes(largest))
}

//! The typed model of an authenticated release: every entry's document parsed, once, into
//! its type, and steps and renditions attached to what they belong to.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use serde::de::DeserializeOwned;

use crate::{
    canonical::is_canonical,
    error::RegistryError,
    ids::{AssetId, SchemaId, ValidatorId, Version, WorkflowId},
    model::{CheckDoc, Entry, EntryKind, MEDIA_JSON, StepDoc, ValidatorDoc, WorkflowDoc},
    release::{Asset, Schema, Step, Validator, VerifiedRelease, Workflow},
    report_contract,
    rules::WorkflowRule,
    schema_check,
};

/// Structural checks over an authenticated release; fills the typed model.
pub(super) struct Structure<'a> {
    pub(super) base: &'a str,
    pub(super) compiled: &'a mut super::Compiled,
    pub(super) steps: BTreeMap<(WorkflowId, Version), Vec<Step>>,
    pub(super) checks: BTreeMap<(WorkflowId, Version), Vec<(CheckDoc, Entry)>>,
    pub(super) renditions: Vec<Entry>,
}

pub(super) type Res<T = ()> = Result<T, RegistryError>;

impl<'a> Structure<'a> {
    pub(super) fn new(base: &'a str, compiled: &'a mut super::Compiled) -> Self {
        Self {
            base,
            compiled,
            steps: BTreeMap::new(),
            checks: BTreeMap::new(),
            renditions: Vec::new(),
        }
    }

    pub(super) fn file(&self, entry: &Entry) -> String {
        format!("{}{}", self.base, entry.path)
    }

    pub(super) fn check(mut self, release: &mut VerifiedRelease) -> Res {
        // Taken out and put back rather than cloned: releases can list many entries.
        let entries = std::mem::take(&mut release.manifest.entries);
        let loaded = entries
            .iter()
            .try_for_each(|entry| self.load_entry(release, entry));
        release.manifest.entries = entries;
        loaded?;
        self.attach_renditions(release)?;
        self.attach_steps(release)?;
        self.attach_checks(release)?;
        for asset in release.assets.values() {
            self.check_asset(release, asset)?;
        }
        for validator in release.validators.values() {
            let r = &validator.doc.report_schema;
            let Some(schema) = release.schema(&r.id, &r.version) else {
                return Err(
                    self.dangling(&validator.entry, format!("schema {}@{}", r.id, r.version))
                );
            };
            report_contract::check_report_schema(schema.value()).map_err(|breach| {
                // The schema is what the author edits to fix this, so it is the file named.
                RegistryError::ReportSchemaIncompatible {
                    file: self.file(&schema.entry),
                    entry: validator.entry.label(),
                    schema: format!("{}@{}", r.id, r.version),
                    field: breach.field,
                    reason: breach.problem,
                }
            })?;
        }
        for workflow in release.workflows() {
            self.check_workflow(release, workflow)?;
        }
        Ok(())
    }

    pub(super) fn dangling(&self, entry: &Entry, reference: String) -> RegistryError {
        RegistryError::DanglingReference {
            file: self.file(entry),
            entry: entry.label(),
            reference,
        }
    }

    pub(super) fn document<T: DeserializeOwned>(
        &self,
        release: &VerifiedRelease,
        entry: &Entry,
    ) -> Res<T> {
        let invalid = |reason: String| RegistryError::DocumentInvalid {
            file: self.file(entry),
            entry: entry.label(),
            reason,
        };
        if entry.media_type != MEDIA_JSON {
            return Err(invalid(format!("media type must be {MEDIA_JSON}")));
        }
        let bytes = &release.contents[&entry.path];
        if !is_canonical(bytes) {
            return Err(invalid(
                "not canonical JSON; rebuild with `rimthan registry build`".into(),
            ));
        }
        serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))
    }

    pub(super) fn mismatch(&self, entry: &Entry, what: &str) -> RegistryError {
        RegistryError::DocumentInvalid {
            file: self.file(entry),
            entry: entry.label(),
            reason: format!("the document's {what} differs from its manifest entry"),
        }
    }

    pub(super) fn typed_id<T: std::str::FromStr<Err = crate::ids::IdError>>(
        &self,
        entry: &Entry,
    ) -> Res<T> {
        entry
            .id
            .parse()
            .map_err(|e: crate::ids::IdError| RegistryError::InvalidId {
                file: self.file(entry),
                entry: entry.label(),
                reason: e.to_string(),
            })
    }

    pub(super) fn duplicate(&self, entry: &Entry) -> RegistryError {
        RegistryError::DuplicateEntry {
            file: self.file(entry),
            entry: entry.label(),
        }
    }

    pub(super) fn load_entry(&mut self, release: &mut VerifiedRelease, entry: &Entry) -> Res {
        let stray_asset_fields = entry.asset_kind.is_some()
            || entry.rendition.is_some()
            || entry.compatible_harnesses.is_some()
            || entry.adapter_contract.is_some();
        if entry.kind != EntryKind::Asset && stray_asset_fields {
            return Err(RegistryError::ManifestInvalid {
                file: format!("{}manifest.json", self.base),
                reason: format!("{}: only asset entries carry asset fields", entry.label()),
            });
        }
        match entry.kind {
            EntryKind::Workflow => {
                let id: WorkflowId = self.typed_id(entry)?;
                let doc: WorkflowDoc = self.document(release, entry)?;
                if doc.id != id || doc.version != entry.version {
                    return Err(self.mismatch(entry, "id or version"));
                }
                let versions = release.workflows.entry(id).or_default();
                if versions.contains_key(&entry.version) {
                    return Err(self.duplicate(entry));
                }
                let workflow = Workflow {
                    doc,
                    entry: entry.clone(),
                    steps: Vec::new(),
                };
                versions.insert(entry.version.clone(), workflow);
            }
            EntryKind::Step => {
                let doc: StepDoc = self.document(release, entry)?;
                if doc.id.as_str() != entry.id
                    || Some(&doc.workflow) != entry.workflow.as_ref()
                    || doc.workflow_version != entry.version
                {
                    return Err(self.mismatch(entry, "id, workflow or workflow_version"));
                }
                let key = (doc.workflow.clone(), doc.workflow_version.clone());
                self.steps.entry(key).or_default().push(Step {
                    doc,
                    entry: entry.clone(),
                    checks: Vec::new(),
                });
            }
            EntryKind::Check => {
                let doc: CheckDoc = self.document(release, entry)?;
                if doc.id.as_str() != entry.id
                    || Some(&doc.workflow) != entry.workflow.as_ref()
                    || doc.workflow_version != entry.version
                {
                    return Err(self.mismatch(entry, "id, workflow or workflow_version"));
                }
                let key = (doc.workflow.clone(), doc.workflow_version.clone());
                self.checks
                    .entry(key)
                    .or_default()
                    .push((doc, entry.clone()));
            }
            EntryKind::Validator => {
                let id: ValidatorId = self.typed_id(entry)?;
                let doc: ValidatorDoc = self.document(release, entry)?;
                if doc.id != id || doc.version != entry.version {
                    return Err(self.mismatch(entry, "id or version"));
                }
                let validator = Validator {
                    doc,
                    entry: entry.clone(),
                };
                if release
                    .validators
                    .insert((id, entry.version.clone()), validator)
                    .is_some()
                {
                    return Err(self.duplicate(entry));
                }
            }
            EntryKind::Schema => {
                let id: SchemaId = self.typed_id(entry)?;
                let schema = self.schema(release, entry)?;
                if release
                    .schemas
                    .insert((id, entry.version.clone()), schema)
                    .is_some()
                {
                    return Err(self.duplicate(entry));
                }
            }
            EntryKind::Asset => {
                let id: AssetId = self.typed_id(entry)?;
                let kind = entry.asset_kind.expect("checked by expected_prefix");
                if entry.rendition.is_some() {
                    self.renditions.push(entry.clone());
                    return Ok(());
                }
                let asset = Asset {
                    base: entry.clone(),
                    renditions: BTreeMap::new(),
                };
                if release
                    .assets
                    .insert((kind, id, entry.version.clone()), asset)
                    .is_some()
                {
                    return Err(self.duplicate(entry));
                }
            }
            EntryKind::Bootstrap => {
                crate::bootstrap::check_entry(
                    self.file(entry),
                    entry,
                    &release.contents[&entry.path],
                )?;
            }
        }
        Ok(())
    }

    /// The schema `entry` names, compiled once per verification however many releases list
    /// the same bytes.
    fn schema(&mut self, release: &VerifiedRelease, entry: &Entry) -> Res<Schema> {
        let (value, validator) = match self.compiled.schema(&entry.sha256) {
            // The bytes passed every check below in an earlier release; the media type is the
            // entry's own and is checked again.
            Some(kept) if entry.media_type == MEDIA_JSON => kept,
            _ => {
                let value: serde_json::Value = self.document(release, entry)?;
                let invalid = |reason: String| RegistryError::SchemaInvalid {
                    file: self.file(entry),
                    entry: entry.label(),
                    reason,
                };
                let validator = schema_check::compile(&value).map_err(invalid)?;
                schema_check::check_examples(&value, &validator).map_err(invalid)?;
                let kept = (Arc::new(value), Arc::new(validator));
                self.compiled.keep_schema(entry.sha256, kept.clone());
                kept
            }
        };
        Ok(Schema {
            entry: entry.clone(),
            value,
            validator,
        })
    }

    pub(super) fn attach_renditions(&mut self, release: &mut VerifiedRelease) -> Res {
        for entry in std::mem::take(&mut self.renditions) {
            let kind = entry.asset_kind.expect("asset");
            let id: AssetId = self.typed_id(&entry)?;
            let harness = entry.rendition.expect("rendition");
            let key = (kind, id, entry.version.clone());
            let Some(asset) = release.assets.get_mut(&key) else {
                let reference = format!("base content of asset {kind}/{}@{}", key.1, key.2);
                return Err(self.dangling(&entry, reference));
            };
            if asset.renditions.insert(harness, entry.clone()).is_some() {
                return Err(self.duplicate(&entry));
            }
        }
        Ok(())
    }

    pub(super) fn attach_steps(&mut self, release: &mut VerifiedRelease) -> Res {
        for ((workflow_id, version), steps) in std::mem::take(&mut self.steps) {
            let Some(workflow) = release
                .workflows
                .get_mut(&workflow_id)
                .and_then(|v| v.get_mut(&version))
            else {
                let entry = &steps[0].entry;
                return Err(self.dangling(entry, format!("workflow {workflow_id}@{version}")));
            };
            let mut by_id: BTreeMap<String, Step> = BTreeMap::new();
            for step in steps {
                if by_id.contains_key(step.doc.id.as_str()) {
                    return Err(self.duplicate(&step.entry));
                }
                by_id.insert(step.doc.id.to_string(), step);
            }
            let listed: BTreeSet<_> = workflow.doc.steps.iter().map(|s| &s.id).collect();
            if listed.len() != workflow.doc.steps.len() {
                return Err(RegistryError::WorkflowInvalid {
                    file: self.file(&workflow.entry),
                    entry: workflow.entry.label(),
                    rule: WorkflowRule::DuplicateStep,
                    reason: "list each step once".into(),
                });
            }
            let wf_file = self.file(&workflow.entry);
            let wf_label = workflow.entry.label();
            for summary in &workflow.doc.steps {
                let Some(step) = by_id.remove(summary.id.as_str()) else {
                    return Err(RegistryError::DanglingReference {
                        file: wf_file,
                        entry: wf_label,
                        reference: format!("step {}", summary.id),
                    });
                };
                if step.doc.kind != summary.kind || step.doc.title != summary.title {
                    return Err(RegistryError::WorkflowInvalid {
                        file: self.file(&step.entry),
                        entry: step.entry.label(),
                        rule: WorkflowRule::StepSummaryMismatch,
                        reason: "kind and title must equal the workflow's step list".into(),
                    });
                }
                workflow.steps.push(step);
            }
            if let Some(step) = by_id.into_values().next() {
                return Err(RegistryError::WorkflowInvalid {
                    file: self.file(&step.entry),
                    entry: step.entry.label(),
                    rule: WorkflowRule::UnlistedStep,
                    reason: "the workflow's steps list does not name this step; add it or remove \
                             the step"
                        .into(),
                });
            }
        }
        Ok(())
    }
}

//! The structural rules over the loaded model (`docs/registry-format.md` §3): assets and
//! adapter contracts, workflows, steps and their pins.

use std::collections::BTreeSet;

use crate::{
    error::RegistryError,
    ids::{
        ArtifactId, AssetId, AssetKind, DeliveryMode, Harness, HostCapability, SETUP_STEP,
        StepKind, ValidatorExecution, Version,
    },
    model::{AdapterContract, Entry, MEDIA_JSON, StepDoc},
    path::{check_path_template, check_relative_path},
    release::{Asset, Step, VerifiedRelease, Workflow},
    renditions,
    rules::{ContractRule, WorkflowRule},
};

use super::{
    MAX_OUTPUT_BYTES,
    load::{Res, Structure},
};

impl Structure<'_> {
    pub(super) fn check_asset(&self, release: &VerifiedRelease, asset: &Asset) -> Res {
        let base = &asset.base;
        let id: AssetId = self.typed_id(base)?;
        let rendition_error =
            |entry: &Entry, harness: &str, reason: String| RegistryError::RenditionInvalid {
                file: self.file(entry),
                entry: entry.label(),
                harness: harness.into(),
                reason,
            };
        let bytes = |entry: &Entry| release.contents[&entry.path].clone();
        let is_adapter = asset.kind() == AssetKind::HostAdapter;
        if !is_adapter && (base.compatible_harnesses.is_some() || base.adapter_contract.is_some()) {
            return Err(self.contract_error(
                base,
                ContractRule::NotAnAdapter,
                "only host-adapter assets carry \
                compatible_harnesses or adapter_contract"
                    .into(),
            ));
        }
        match asset.kind() {
            AssetKind::HostAdapter => self.check_adapter(base)?,
            AssetKind::Skill => {
                renditions::check_skill(&id, &bytes(base))
                    .map_err(|r| rendition_error(base, "base", r))?;
            }
            AssetKind::Command => {
                renditions::check_claude_command(&bytes(base))
                    .map_err(|r| rendition_error(base, "base", r))?;
            }
            AssetKind::Subagent => {}
        }
        for (harness, entry) in &asset.renditions {
            let check = match (asset.kind(), harness) {
                (AssetKind::Subagent, Harness::Codex) => renditions::check_codex_subagent,
                (AssetKind::Subagent, Harness::ClaudeCode) => renditions::check_claude_subagent,
                (AssetKind::Skill, _) => renditions::check_skill,
                _ => continue,
            };
            check(&id, &bytes(entry)).map_err(|r| rendition_error(entry, harness.as_str(), r))?;
        }
        Ok(())
    }

    pub(super) fn contract_error(
        &self,
        entry: &Entry,
        rule: ContractRule,
        reason: String,
    ) -> RegistryError {
        RegistryError::AdapterContractInvalid {
            file: self.file(entry),
            entry: entry.label(),
            rule,
            reason,
        }
    }

    pub(super) fn check_adapter(&self, entry: &Entry) -> Res {
        if entry
            .compatible_harnesses
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            return Err(self.contract_error(
                entry,
                ContractRule::NoCompatibleHarness,
                "list the harnesses this adapter serves in compatible_harnesses".into(),
            ));
        }
        let Some(contract) = &entry.adapter_contract else {
            if entry.version >= Version::new(1, 1, 0) {
                return Err(self.contract_error(
                    entry,
                    ContractRule::MissingContract,
                    "host adapters from 1.1.0 on must carry a typed adapter_contract".into(),
                ));
            }
            return Ok(());
        };
        self.check_contract(entry, contract)
    }

    pub(super) fn check_contract(&self, entry: &Entry, contract: &AdapterContract) -> Res {
        let err = |rule, reason: String| self.contract_error(entry, rule, reason);
        if contract.delivery_modes.is_empty() {
            return Err(err(
                ContractRule::NoDeliveryMode,
                "declare at least one delivery mode".into(),
            ));
        }
        if has_duplicates(&contract.delivery_modes) {
            return Err(err(
                ContractRule::DuplicateDeliveryMode,
                "list each delivery mode once".into(),
            ));
        }
        if contract.validator_execution == ValidatorExecution::NativeSubagent
            && !contract
                .required_host_capabilities
                .contains(&HostCapability::NativeSubagents)
        {
            return Err(err(
                ContractRule::NativeSubagentsNotRequired,
                "native-subagent validator execution requires the native-subagents capability"
                    .into(),
            ));
        }
        let mut templates = BTreeSet::new();
        for (kind, delivery) in &contract.asset_kinds {
            if *kind == AssetKind::HostAdapter {
                return Err(err(
                    ContractRule::AdapterAssetKind,
                    "host-adapter is not a deliverable asset".into(),
                ));
            }
            if delivery.delivery_modes.is_empty() {
                return Err(err(
                    ContractRule::NoDeliveryMode,
                    format!("{kind}: list its allowed modes"),
                ));
            }
            if has_duplicates(&delivery.delivery_modes) {
                return Err(err(
                    ContractRule::DuplicateDeliveryMode,
                    format!("{kind}: list each mode once"),
                ));
            }
            if let Some(mode) = delivery
                .delivery_modes
                .iter()
                .find(|m| !contract.delivery_modes.contains(m))
            {
                return Err(err(
                    ContractRule::ModeNotInContract,
                    format!("{kind} allows {mode}, which the contract's delivery_modes lack"),
                ));
            }
            let local = delivery
                .delivery_modes
                .contains(&DeliveryMode::ProjectLocal);
            match (&delivery.path_template, local) {
                (None, true) => {
                    return Err(err(
                        ContractRule::PathTemplateRequired,
                        format!("{kind} allows project-local delivery but has no path_template"),
                    ));
                }
                (Some(_), false) => {
                    return Err(err(
                        ContractRule::PathTemplateWithoutProjectLocal,
                        format!("{kind} has a path_template but does not allow project-local"),
                    ));
                }
                (Some(template), true) => {
                    check_path_template(template).map_err(|rule| {
                        RegistryError::PathTemplateInvalid {
                            file: self.file(entry),
                            entry: entry.label(),
                            asset_kind: kind.to_string(),
                            template: template.clone(),
                            rule,
                        }
                    })?;
                    if !templates.insert(template.clone()) {
                        return Err(err(
                            ContractRule::TemplateCollision,
                            format!("{kind} shares its path_template with another asset kind"),
                        ));
                    }
                }
                (None, false) => {}
            }
        }
        Ok(())
    }

    pub(super) fn workflow_error(
        &self,
        entry: &Entry,
        rule: WorkflowRule,
        reason: String,
    ) -> RegistryError {
        RegistryError::WorkflowInvalid {
            file: self.file(entry),
            entry: entry.label(),
            rule,
            reason,
        }
    }

    pub(super) fn check_workflow(&self, release: &VerifiedRelease, workflow: &Workflow) -> Res {
        let entry = &workflow.entry;
        let steps = &workflow.steps;
        match steps.first() {
            Some(s) if s.doc.id.as_str() == SETUP_STEP && s.doc.kind == StepKind::Setup => {}
            _ => {
                return Err(self.workflow_error(
                    entry,
                    WorkflowRule::FirstStepNotSetup,
                    format!("the first step must be {SETUP_STEP} of kind setup"),
                ));
            }
        }
        let mut available: BTreeSet<ArtifactId> = BTreeSet::new();
        let mut paths = BTreeSet::new();
        for (index, step) in steps.iter().enumerate() {
            self.check_step(release, step, index == 0, &mut available, &mut paths)?;
        }
        if workflow.doc.harnesses.is_empty() {
            return Err(self.workflow_error(
                entry,
                WorkflowRule::NoHarness,
                "pin an adapter for at least one \
                harness"
                    .into(),
            ));
        }
        let setup = &steps[0].doc;
        for (harness, pin) in &workflow.doc.harnesses {
            self.check_pin(release, workflow, *harness, pin, setup)?;
        }
        Ok(())
    }

    pub(super) fn check_step(
        &self,
        release: &VerifiedRelease,
        step: &Step,
        is_setup: bool,
        available: &mut BTreeSet<ArtifactId>,
        paths: &mut BTreeSet<String>,
    ) -> Res {
        let (doc, entry) = (&step.doc, &step.entry);
        let err = |rule, reason: String| self.workflow_error(entry, rule, reason);
        if is_setup {
            if !doc.outputs.is_empty()
                || !doc.inputs.is_empty()
                || !doc.validators.is_empty()
                || doc.approval.is_some()
            {
                return Err(err(
                    WorkflowRule::SetupHasOutputs,
                    "the setup step declares host assets only; \
                    move outputs, inputs, validators and approval to a work step"
                        .into(),
                ));
            }
            for asset in &doc.host_assets {
                if asset.kind == AssetKind::HostAdapter {
                    return Err(err(
                        WorkflowRule::HostAssetKind,
                        "host adapters are pinned by harness, not \
                        listed as host assets"
                            .into(),
                    ));
                }
                if release
                    .asset(asset.kind, &asset.id, &asset.version)
                    .is_none()
                {
                    let reference = format!("asset {}/{}@{}", asset.kind, asset.id, asset.version);
                    return Err(self.dangling(entry, reference));
                }
            }
            return Ok(());
        }
        if doc.kind != StepKind::Work {
            return Err(err(
                WorkflowRule::SetupNotFirst,
                "only the first step may be of kind setup".into(),
            ));
        }
        if !doc.host_assets.is_empty() {
            return Err(err(
                WorkflowRule::WorkStepHostAssets,
                "only the setup step lists host assets".into(),
            ));
        }
        if doc.outputs.is_empty() {
            return Err(err(
                WorkflowRule::NoOutputs,
                "a work step declares at least one output".into(),
            ));
        }
        for input in &doc.inputs {
            if !available.contains(input) {
                return Err(err(
                    WorkflowRule::InputNotProducedEarlier,
                    format!("input {input} is not an output of an earlier step"),
                ));
            }
        }
        for output in &doc.outputs {
            check_relative_path(&output.path).map_err(|rule| RegistryError::OutputPathInvalid {
                file: self.file(entry),
                entry: entry.label(),
                artifact: output.artifact_id.to_string(),
                path: output.path.clone(),
                rule,
            })?;
            if !available.insert(output.artifact_id.clone()) {
                return Err(err(
                    WorkflowRule::DuplicateArtifact,
                    format!(
                        "artifact {} is declared twice in the workflow",
                        output.artifact_id
                    ),
                ));
            }
            // Case-insensitive: paths differing only in case collide on many file systems.
            if !paths.insert(output.path.to_lowercase()) {
                return Err(err(
                    WorkflowRule::DuplicateOutputPath,
                    format!("path {} is declared by two outputs", output.path),
                ));
            }
            if output.max_bytes == 0 || output.max_bytes > MAX_OUTPUT_BYTES {
                return Err(err(
                    WorkflowRule::MaxBytesOutOfRange,
                    format!(
                        "{}: max_bytes must be 1..={MAX_OUTPUT_BYTES}",
                        output.artifact_id
                    ),
                ));
            }
            match (&output.schema, output.media_type == MEDIA_JSON) {
                (Some(schema), true) => {
                    if release.schema(&schema.id, &schema.version).is_none() {
                        let reference = format!("schema {}@{}", schema.id, schema.version);
                        return Err(self.dangling(entry, reference));
                    }
                }
                (None, true) => {
                    return Err(err(
                        WorkflowRule::SchemaRequired,
                        format!("{} is JSON and needs a schema", output.artifact_id),
                    ));
                }
                (Some(_), false) => {
                    return Err(err(
                        WorkflowRule::SchemaOnNonJson,
                        format!(
                            "{} is {}; only JSON artifacts have a schema",
                            output.artifact_id, output.media_type
                        ),
                    ));
                }
                (None, false) => {}
            }
            if let Some(example) = &output.example {
                check_output_example(output, example)
                    .map_err(|(rule, reason)| err(rule, reason))?;
            }
        }
        if let Some(problem) = doc.approval.as_ref().and_then(|a| a.problem(&doc.checks)) {
            return Err(err(WorkflowRule::ApprovalInvalid, problem));
        }
        if let Some(problem) = doc.deadline_problem() {
            return Err(err(WorkflowRule::DeadlineInvalid, problem));
        }
        for v in &doc.validators {
            let Some(validator) = release.validator(&v.id, &v.version) else {
                return Err(self.dangling(entry, format!("validator {}@{}", v.id, v.version)));
            };
            if let Some(missing) = validator
                .doc
                .inputs
                .iter()
                .find(|i| !available.contains(*i))
            {
                return Err(err(
                    WorkflowRule::ValidatorInputUnavailable,
                    format!(
                        "validator {}@{} ({}) reads artifact {missing}, which no step up to \
                         this one produces; produce it in this or an earlier step, or drop it \
                         from the validator's inputs",
                        v.id,
                        v.version,
                        self.file(&validator.entry)
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn check_pin(
        &self,
        release: &VerifiedRelease,
        workflow: &Workflow,
        harness: Harness,
        pin: &crate::model::AdapterPin,
        setup: &StepDoc,
    ) -> Res {
        let entry = &workflow.entry;
        let err = |reason: String| RegistryError::AdapterPinInvalid {
            file: self.file(entry),
            entry: entry.label(),
            harness: harness.to_string(),
            reason,
        };
        let Some(adapter) = release.asset(AssetKind::HostAdapter, &pin.id, &pin.version) else {
            return Err(self.dangling(entry, format!("host-adapter {}@{}", pin.id, pin.version)));
        };
        let base = adapter.base();
        if !base
            .compatible_harnesses
            .as_ref()
            .is_some_and(|h| h.contains(&harness))
        {
            return Err(err(format!(
                "adapter {}@{} is not compatible with {harness}",
                pin.id, pin.version
            )));
        }
        let Some(contract) = &base.adapter_contract else {
            return Err(err(format!(
                "adapter {}@{} has no typed contract; pin an adapter >= 1.1.0 so starts fail closed",
                pin.id, pin.version
            )));
        };
        for asset in &setup.host_assets {
            let Some(delivery) = contract.asset_kinds.get(&asset.kind) else {
                return Err(err(format!(
                    "the contract offers no delivery for {} assets, which setup requires",
                    asset.kind
                )));
            };
            let local = delivery
                .delivery_modes
                .contains(&DeliveryMode::ProjectLocal);
            let needs_rendition = asset.kind == AssetKind::Subagent
                && matches!(harness, Harness::Codex | Harness::ClaudeCode);
            let found = release
                .asset(asset.kind, &asset.id, &asset.version)
                .expect("checked");
            if local && needs_rendition && !found.renditions().contains_key(&harness) {
                return Err(err(format!(
                    "subagent {} has no {harness} rendition for project-local delivery",
                    asset.id
                )));
            }
        }
        Ok(())
    }
}

/// An output's inline example: only for non-JSON outputs (JSON outputs illustrate themselves
/// with their schema's `examples`), and within the size the output may have.
fn check_output_example(
    output: &crate::model::OutputDecl,
    example: &str,
) -> Result<(), (WorkflowRule, String)> {
    if output.media_type == MEDIA_JSON {
        return Err((
            WorkflowRule::ExampleOnJsonOutput,
            format!(
                "{} is JSON: give its example in its schema's `examples` array, not on the output",
                output.artifact_id
            ),
        ));
    }
    if example.len() as u64 > output.max_bytes {
        return Err((
            WorkflowRule::ExampleTooLarge,
            format!(
                "{}: the example is {} bytes, over the output's max_bytes of {}; shorten the \
                 example or raise max_bytes",
                output.artifact_id,
                example.len(),
                output.max_bytes
            ),
        ));
    }
    Ok(())
}

fn has_duplicates<T: Ord>(items: &[T]) -> bool {
    items.iter().collect::<BTreeSet<_>>().len() != items.len()
}

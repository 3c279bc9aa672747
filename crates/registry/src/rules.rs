//! The names of the structural rules a workflow or an adapter contract can break, as typed
//! values: each is reported in `workflow_invalid` / `adapter_contract_invalid` and listed in
//! `docs/registry-format.md` §4 (a test keeps the two in step).

macro_rules! rules {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $variant:ident = $code:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$doc])* $variant),+
        }

        impl $name {
            /// Every rule, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stable snake_case name.
            pub fn code(self) -> &'static str {
                match self { $($name::$variant => $code),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.code())
            }
        }
    };
}

rules! {
    /// A structural rule of workflows and their steps.
    WorkflowRule {
        /// The first step is not the setup step.
        FirstStepNotSetup = "first_step_not_setup",
        /// Two steps share an id.
        DuplicateStep = "duplicate_step",
        /// The setup step declares outputs.
        SetupHasOutputs = "setup_has_outputs",
        /// A host asset is of a kind hosts cannot install.
        HostAssetKind = "host_asset_kind",
        /// A setup step is not first.
        SetupNotFirst = "setup_not_first",
        /// A work step lists host assets.
        WorkStepHostAssets = "work_step_host_assets",
        /// A work step has no outputs.
        NoOutputs = "no_outputs",
        /// A step reads an artifact no earlier step produces.
        InputNotProducedEarlier = "input_not_produced_earlier",
        /// Two outputs share an artifact id.
        DuplicateArtifact = "duplicate_artifact",
        /// Two outputs share a path.
        DuplicateOutputPath = "duplicate_output_path",
        /// An output's `max_bytes` is 0 or too large.
        MaxBytesOutOfRange = "max_bytes_out_of_range",
        /// A JSON output has no schema.
        SchemaRequired = "schema_required",
        /// A schema is declared on an output that is not JSON.
        SchemaOnNonJson = "schema_on_non_json",
        /// An inline example is given for a JSON output (its schema's `examples` holds it).
        ExampleOnJsonOutput = "example_on_json_output",
        /// An inline example exceeds the output's `max_bytes`.
        ExampleTooLarge = "example_too_large",
        /// A validator reads an input its step cannot give it.
        ValidatorInputUnavailable = "validator_input_unavailable",
        /// The workflow pins no harness.
        NoHarness = "no_harness",
        /// A step document disagrees with the workflow's summary of it.
        StepSummaryMismatch = "step_summary_mismatch",
        /// A step entry is not listed by its workflow.
        UnlistedStep = "unlisted_step",
        /// A step's approval names nobody, asks for too many approvers, or forbids waivers of
        /// a check it does not run.
        ApprovalInvalid = "approval_invalid",
        /// A step's deadline is zero, longer than a year, on the setup step, or its
        /// `on_expiry` is set without one.
        DeadlineInvalid = "deadline_invalid",
    }
}

rules! {
    /// A rule of host adapter contracts.
    ContractRule {
        /// A contract is declared on an asset that is not a host adapter.
        NotAnAdapter = "not_an_adapter",
        /// The adapter names no compatible harness.
        NoCompatibleHarness = "no_compatible_harness",
        /// The adapter has no contract.
        MissingContract = "missing_contract",
        /// An asset kind offers no delivery mode.
        NoDeliveryMode = "no_delivery_mode",
        /// A delivery mode is listed twice.
        DuplicateDeliveryMode = "duplicate_delivery_mode",
        /// Subagent isolation is declared without requiring native subagents.
        NativeSubagentsNotRequired = "native_subagents_not_required",
        /// The contract names an asset kind adapters cannot deliver.
        AdapterAssetKind = "adapter_asset_kind",
        /// A mode is used that the contract does not offer.
        ModeNotInContract = "mode_not_in_contract",
        /// Project-local delivery lacks a path template.
        PathTemplateRequired = "path_template_required",
        /// A path template is given without project-local delivery.
        PathTemplateWithoutProjectLocal = "path_template_without_project_local",
        /// Two asset kinds' templates can name the same path.
        TemplateCollision = "template_collision",
    }
}

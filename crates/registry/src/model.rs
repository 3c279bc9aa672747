//! Wire types of a built release: the manifest and the entry documents it lists (`docs/registry-format.md` §2).
//!
//! These are what `rimthan registry build` writes and the verifier parses; all reject unknown
//! fields so a typo is an error, not a silently ignored key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    digest::Sha256Digest,
    ids::{
        ArtifactId, AssetId, AssetKind, CheckId, CheckKind, DeliveryMode, Enforcement, Harness,
        HostCapability, OnExpiry, ReleaseId, SchemaId, StepId, StepKind, ValidatorCapability,
        ValidatorExecution, ValidatorId, ValidatorIsolation, Version, WorkflowId,
    },
};

/// The manifest format this crate reads and writes.
pub const MANIFEST_FORMAT: &str = "rimthan-release/1";
/// Media type of JSON documents and artifacts.
pub const MEDIA_JSON: &str = "application/json";
/// Media type of Markdown content.
pub const MEDIA_MARKDOWN: &str = "text/markdown";
/// Media type of TOML content.
pub const MEDIA_TOML: &str = "application/toml";

/// `releases/<release>/manifest.json`: every entry of the release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// The release id, equal to its folder name.
    pub release: ReleaseId,
    /// A draft (`rimthan registry build --draft`): never published, rebuilt under the same id
    /// at will, kept under `drafts/<release>/` and served only where an operator names it
    /// (`docs/registry-format.md` §1.2). Absent from a published release's manifest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draft: bool,
    /// Entries sorted by path.
    pub entries: Vec<Entry>,
}

/// The kind of a manifest entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A workflow definition document.
    Workflow,
    /// A step document of a workflow.
    Step,
    /// Asset content (the base content, or a per-harness rendition).
    Asset,
    /// A validator document.
    Validator,
    /// A JSON Schema.
    Schema,
    /// The release's own bootstrap paragraph (at most one, see `bootstrap.rs`).
    Bootstrap,
    /// A deterministic check of a workflow step's outputs.
    Check,
}

/// One file of a release, with its metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// What the file is.
    pub kind: EntryKind,
    /// The id within its kind (for steps, the step id).
    pub id: String,
    /// The version (for steps, the workflow's version).
    pub version: Version,
    /// For steps: the workflow they belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowId>,
    /// For assets: the asset kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset_kind: Option<AssetKind>,
    /// For asset renditions: the harness this rendition is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendition: Option<Harness>,
    /// For host adapters (base entry): the harnesses it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatible_harnesses: Option<Vec<Harness>>,
    /// For host adapters `>= 1.1.0` (base entry): the typed contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_contract: Option<AdapterContract>,
    /// Release-relative file path.
    pub path: String,
    /// Media type of the bytes.
    pub media_type: String,
    /// Length of the bytes.
    pub bytes: u64,
    /// SHA-256 of the bytes.
    pub sha256: Sha256Digest,
}

impl Entry {
    /// A short human label such as `asset skill/rimthan-guide@1.0.0 (codex)`.
    pub fn label(&self) -> String {
        let kind = match self.kind {
            EntryKind::Workflow => "workflow",
            EntryKind::Step => "step",
            EntryKind::Asset => "asset",
            EntryKind::Validator => "validator",
            EntryKind::Schema => "schema",
            EntryKind::Bootstrap => "bootstrap",
            EntryKind::Check => "check",
        };
        let mut label = match (&self.workflow, self.asset_kind) {
            (Some(w), _) => format!("{kind} {w}/{}@{}", self.id, self.version),
            (None, Some(k)) => format!("{kind} {k}/{}@{}", self.id, self.version),
            (None, None) => format!("{kind} {}@{}", self.id, self.version),
        };
        if let Some(h) = self.rendition {
            label.push_str(&format!(" ({h} rendition)"));
        }
        label
    }
}

/// The typed contract of a host adapter `>= 1.1.0` (`docs/registry-format.md` §2, §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterContract {
    /// Delivery modes the adapter supports at all.
    pub delivery_modes: Vec<DeliveryMode>,
    /// Per asset kind: allowed delivery modes and the project-local path template.
    pub asset_kinds: BTreeMap<AssetKind, AssetDelivery>,
    /// How validators run.
    pub validator_execution: ValidatorExecution,
    /// Whether the host enforces read-only on validators; `instructed` when not stated.
    #[serde(default, skip_serializing_if = "ValidatorIsolation::is_instructed")]
    pub validator_isolation: ValidatorIsolation,
    /// Capabilities a host must declare to use this adapter.
    pub required_host_capabilities: Vec<HostCapability>,
}

/// How one asset kind may be delivered under an adapter contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetDelivery {
    /// Allowed modes for this kind.
    pub delivery_modes: Vec<DeliveryMode>,
    /// Where a project-local copy goes; present exactly when project-local is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_template: Option<String>,
}

/// A workflow's pin of a host adapter for one harness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterPin {
    /// Adapter asset id.
    pub id: AssetId,
    /// Exact adapter version.
    pub version: Version,
}

/// A workflow definition document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDoc {
    /// Workflow id.
    pub id: WorkflowId,
    /// Workflow version.
    pub version: Version,
    /// Short title.
    pub title: String,
    /// What the workflow is for.
    pub description: String,
    /// One pinned adapter per harness.
    pub harnesses: BTreeMap<Harness, AdapterPin>,
    /// Capabilities every host must declare.
    pub required_host_capabilities: Vec<HostCapability>,
    /// The ordered steps.
    pub steps: Vec<StepSummary>,
}

/// A step as listed in its workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSummary {
    /// Step id.
    pub id: StepId,
    /// Step kind.
    pub kind: StepKind,
    /// Short title.
    pub title: String,
}

/// A reference to an asset by kind, id and version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetRef {
    /// Asset kind.
    pub kind: AssetKind,
    /// Asset id.
    pub id: AssetId,
    /// Exact version.
    pub version: Version,
}

/// A reference to a validator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorRef {
    /// Validator id.
    pub id: ValidatorId,
    /// Exact version.
    pub version: Version,
}

/// A reference to a JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaRef {
    /// Schema id.
    pub id: SchemaId,
    /// Exact version.
    pub version: Version,
}

/// A declared output artifact of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputDecl {
    /// Artifact id, unique in the workflow.
    pub artifact_id: ArtifactId,
    /// Project-relative path.
    pub path: String,
    /// Media type.
    pub media_type: String,
    /// The schema JSON artifacts must satisfy.
    pub schema: Option<SchemaRef>,
    /// Largest accepted size.
    pub max_bytes: u64,
    /// What the step may do to the path.
    pub write_policy: crate::ids::WritePolicy,
    /// A worked example of a non-JSON output's content (JSON outputs use their schema's
    /// `examples`), inlined from the source's `examples/` folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

/// A step document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDoc {
    /// The workflow it belongs to.
    pub workflow: WorkflowId,
    /// That workflow's version.
    pub workflow_version: Version,
    /// Step id.
    pub id: StepId,
    /// Step kind.
    pub kind: StepKind,
    /// Short title.
    pub title: String,
    /// Markdown instructions for the harness.
    pub instructions: String,
    /// Assets the harness must deliver (setup only).
    pub host_assets: Vec<AssetRef>,
    /// Read-only artifacts of earlier steps.
    pub inputs: Vec<ArtifactId>,
    /// Declared outputs.
    pub outputs: Vec<OutputDecl>,
    /// Validators that check the outputs.
    pub validators: Vec<ValidatorRef>,
    /// Deterministic checks of the outputs, run by the server before any report can pass the
    /// step; each is a `check` entry of this workflow version. Omitted when empty, so steps
    /// without checks keep the bytes they were first published with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckId>,
    /// Who must sign the step off after its validators and checks pass; omitted when nobody
    /// must, so steps without it keep the bytes they were first published with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::approval::Approval>,
    /// How long the step's work may take from the moment it becomes active; omitted when it
    /// has no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<crate::duration::IsoDuration>,
    /// What passing the deadline does (`send_back` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expiry: Option<OnExpiry>,
}

impl StepDoc {
    /// What is wrong with the step's deadline; none when it is sound.
    pub fn deadline_problem(&self) -> Option<String> {
        match (self.deadline, self.on_expiry) {
            (Some(_), _) if self.kind == StepKind::Setup => Some(
                "the setup step has a deadline; give deadlines to the steps whose work may \
                 run late"
                    .into(),
            ),
            (Some(deadline), _) => deadline.timer_problem("deadline"),
            (None, Some(_)) => Some(
                "on_expiry is set without a deadline; give the step a deadline (such as P2D) \
                 or drop on_expiry"
                    .into(),
            ),
            (None, None) => None,
        }
    }

    /// What passing the deadline does, when the step has one.
    pub fn deadline(&self) -> Option<(crate::duration::IsoDuration, OnExpiry)> {
        self.deadline
            .map(|after| (after, self.on_expiry.unwrap_or(OnExpiry::SendBack)))
    }
}

/// A deterministic check document (`docs/checks.md`): what it reads and what runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckDoc {
    /// The workflow it belongs to.
    pub workflow: WorkflowId,
    /// That workflow's version.
    pub workflow_version: Version,
    /// The step whose outputs it checks.
    pub step: StepId,
    /// Check id, unique in the workflow version.
    pub id: CheckId,
    /// Short title, shown to participants.
    pub title: String,
    /// What it holds the outputs to, in a sentence or two.
    pub description: String,
    /// The artifacts it reads: outputs of its step, or inputs of its step (earlier outputs).
    pub reads: Vec<ArtifactId>,
    /// What runs it.
    pub kind: CheckKind,
    /// The Rhai source (`script` checks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// squawk rule name → severity (`sql-lint` checks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<BTreeMap<String, rimthan_checks::Severity>>,
    /// What its `error` findings do; `block` (the default) is left out, so documents written
    /// before the field existed keep their bytes.
    #[serde(default, skip_serializing_if = "Enforcement::is_block")]
    pub enforcement: Enforcement,
    /// Rule id → how a participant fixes what it finds. For a script check, the rules it may
    /// report; for `sql-lint`, some of `rules`. Left out when empty, so documents written
    /// before the field existed keep their bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub help: BTreeMap<String, RuleHelp>,
}

/// Most rules one check may describe in `help`.
pub const MAX_RULE_HELP: usize = 256;
/// Longest help text, in bytes: one line a participant reads beside the finding.
pub const MAX_HELP_TEXT: usize = 200;
/// Longest help URL, in bytes.
pub const MAX_HELP_URL: usize = 512;

/// One rule's help: a line saying how to fix what it finds, and where to read more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleHelp {
    /// One line, 1 to [`MAX_HELP_TEXT`] bytes.
    pub text: String,
    /// An `https://` page about the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl RuleHelp {
    /// `Err` says what the author changes.
    pub fn validate(&self, rule: &str) -> Result<(), String> {
        if rule.is_empty() || rule.len() > 128 {
            return Err("a rule id in `help` is 1 to 128 bytes".into());
        }
        if self.text.trim().is_empty()
            || self.text.len() > MAX_HELP_TEXT
            || self.text.chars().any(char::is_control)
        {
            return Err(format!(
                "the help of rule {rule} is one line of 1 to {MAX_HELP_TEXT} bytes"
            ));
        }
        if let Some(url) = &self.url {
            let plain = url.len() <= MAX_HELP_URL
                && url.starts_with("https://")
                && url.len() > "https://".len()
                && !url.chars().any(|c| c.is_whitespace() || c.is_control());
            if !plain {
                return Err(format!(
                    "the help URL of rule {rule} is an https:// address of at most \
                     {MAX_HELP_URL} bytes"
                ));
            }
        }
        Ok(())
    }
}

impl CheckDoc {
    /// The help of the rule a finding names, when this check gives one.
    pub fn help_for(&self, rule: &str) -> Option<&RuleHelp> {
        self.help.get(rule)
    }

    /// `findings` as this check enforces them: under `warn` every error is a warning.
    pub fn enforce(
        &self,
        mut findings: Vec<rimthan_checks::Finding>,
    ) -> Vec<rimthan_checks::Finding> {
        if self.enforcement == Enforcement::Warn {
            for finding in &mut findings {
                finding.severity = rimthan_checks::Severity::Warning;
            }
        }
        findings
    }
}

/// A semantic validator document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorDoc {
    /// Validator id.
    pub id: ValidatorId,
    /// Version.
    pub version: Version,
    /// Short title.
    pub title: String,
    /// One sentence on what it checks.
    pub description: String,
    /// Instructions for the subagent that runs it.
    pub instructions: String,
    /// Capabilities it needs.
    pub capabilities: Vec<ValidatorCapability>,
    /// Artifacts it reads.
    pub inputs: Vec<ArtifactId>,
    /// Schema of its report.
    pub report_schema: SchemaRef,
}

/// `channels.json`: channel → release. The only mutable file of a registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsFile {
    /// Channel name → release id.
    pub channels: BTreeMap<crate::ids::ChannelName, ReleaseId>,
}

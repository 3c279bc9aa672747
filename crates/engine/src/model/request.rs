//! Tool arguments as the engine receives them (`docs/engine.md` §2, §5, §6). Every struct
//! rejects unknown fields except [`Report`], which keeps the fields beyond the base report for
//! its validator's own `report_schema` to judge; the MCP layer generates the tools' input
//! schemas from these types.
//!
//! The harness and adapter of a declaration are kept as strings on purpose: an unknown harness
//! or adapter is a start blocker with its own code, not an argument error.

use std::collections::BTreeMap;

use rimthan_registry::{
    AssetKind, ChannelName, DeliveryMode, Harness, HostCapability, ReleaseId, ValidatorCapability,
    Version, WorkflowId, WritePolicy,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `rimthan.start_workflow`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// The workflow to start: one the active release offers (the bootstrap text lists them).
    pub workflow_id: WorkflowId,
    /// Its version; the highest in the release when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_version: Option<Version>,
    /// An explicit release; the active channel's release when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub release: Option<ReleaseId>,
    /// A channel other than the active one (not with `release`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelName>,
    /// What the host is and can really do.
    pub host: HostDeclaration,
    /// What the repository forbids.
    #[serde(default)]
    pub repository_policy: RepositoryPolicy,
    /// A key the harness makes up for this start (a UUID, say), so that repeating the identical
    /// call after its answer was lost returns the same session instead of a second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<IdempotencyKey>,
}

/// The longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;

/// A start's idempotency key: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
        if s.is_empty() || s.len() > MAX_IDEMPOTENCY_KEY_CHARS || !s.chars().all(allowed) {
            return Err(format!(
                "an idempotency key is 1 to {MAX_IDEMPOTENCY_KEY_CHARS} of A-Z a-z 0-9 . _ : -"
            ));
        }
        Ok(Self(s))
    }
}

impl From<IdempotencyKey> for String {
    fn from(key: IdempotencyKey) -> String {
        key.0
    }
}

impl JsonSchema for IdempotencyKey {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IdempotencyKey".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_IDEMPOTENCY_KEY_CHARS,
            "pattern": "^[A-Za-z0-9._:-]+$",
        })
    }
}

/// A host's declaration of itself.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostDeclaration {
    /// The harness.
    #[schemars(with = "Harness")]
    pub harness: String,
    /// The host adapter the harness follows (id and exact version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<AdapterDeclaration>,
    /// Capabilities the host really has.
    pub capabilities: Vec<HostCapability>,
    /// Capabilities the host can give validator subagents.
    pub validator_capabilities: Vec<ValidatorCapability>,
}

/// The adapter named in a declaration or attestation.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdapterDeclaration {
    /// Adapter asset id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Exact adapter version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// What the repository's own policy forbids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepositoryPolicy {
    /// Globs of project paths nothing may write (`secrets/**`).
    #[serde(default)]
    pub forbidden_paths: Vec<String>,
    /// Host or validator capabilities that must not be used.
    #[serde(default)]
    pub forbidden_capabilities: Vec<String>,
    /// No host asset may be written into the project.
    #[serde(default)]
    pub forbids_project_local_assets: bool,
}

/// Arguments of `rimthan.get_active_step`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActiveStepRequest {
    /// The latest checkpoint.
    pub checkpoint: String,
}

/// Arguments of `rimthan.prepare_step_validation`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepareRequest {
    /// The latest checkpoint.
    pub checkpoint: String,
    /// The active step.
    pub step_id: String,
    /// For `setup-workspace` only: proof of host and asset delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_attestation: Option<HostAttestation>,
    /// For work steps only: proof of the written outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_attestation: Option<OutputAttestation>,
}

/// Proof of the host binding and of every host asset's delivery.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostAttestation {
    /// The harness.
    #[schemars(with = "Harness")]
    pub harness: String,
    /// The adapter followed.
    pub adapter: AdapterDeclaration,
    /// Host capabilities.
    pub capabilities: Vec<HostCapability>,
    /// Validator capabilities.
    pub validator_capabilities: Vec<ValidatorCapability>,
    /// One delivery per required host asset.
    pub deliveries: Vec<Delivery>,
}

/// How one host asset was delivered.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    /// Asset kind.
    pub kind: AssetKind,
    /// Asset id.
    pub id: String,
    /// Asset version.
    pub version: String,
    /// sha256 of the delivered bytes (the bound harness's rendition).
    pub sha256: String,
    /// How it was delivered.
    pub delivery_mode: DeliveryMode,
    /// The project-relative path, for project-local delivery only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Proof of a work step's outputs, read back from disk.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputAttestation {
    /// One entry per declared output.
    pub artifacts: Vec<ArtifactAttestation>,
    /// The text of each earlier output (an input of the step) that a deterministic check of
    /// the step reads; the server compares its sha256 with the digest accepted earlier.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputText>,
}

/// The text of an input of the step, as read from disk, for the step's deterministic checks.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputText {
    /// The input's artifact id.
    pub artifact_id: String,
    /// Its project-relative path.
    pub path: String,
    /// The file's bytes as UTF-8 text.
    pub text: String,
}

/// One output file as read back.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactAttestation {
    /// Declared artifact id.
    pub artifact_id: String,
    /// Project-relative path read back.
    pub path: String,
    /// The step that owns it.
    pub owner_step: String,
    /// Media type.
    pub media_type: String,
    /// sha256 of the declared schema (JSON artifacts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_sha256: Option<String>,
    /// Size in bytes.
    pub bytes: u64,
    /// sha256 of the bytes.
    pub sha256: String,
    /// No component of the path is a symlink (checked after resolving).
    pub symlink_free: bool,
    /// The harness read the file back after writing it.
    pub read_back: bool,
    /// The write policy followed.
    pub write_policy: WritePolicy,
    /// The parsed content (JSON artifacts), validated against the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
    /// The file's bytes as UTF-8 text: required when a deterministic check of the step reads
    /// the output (the payload marks it `send_text`), checked against `sha256` and `bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Arguments of `rimthan.submit_step_reports`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// The latest checkpoint.
    pub checkpoint: String,
    /// The plan the reports answer.
    pub validation_id: String,
    /// One report per planned validator.
    pub reports: Vec<Report>,
}

/// A validator's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The step passes this validator.
    Pass,
    /// The step must be revised.
    Fail,
}

/// A finding's severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// For information.
    Info,
    /// Worth fixing.
    Warning,
    /// Must be fixed.
    Error,
}

impl Severity {
    /// The lowercase spelling used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<rimthan_checks::Severity> for Severity {
    fn from(severity: rimthan_checks::Severity) -> Self {
        match severity {
            rimthan_checks::Severity::Error => Severity::Error,
            rimthan_checks::Severity::Warning => Severity::Warning,
        }
    }
}

/// One validator report: the base fields below, plus any field the validator's own
/// `report_schema` (named in the validation plan) declares beyond them. The whole report is
/// validated against that schema.
// Not `deny_unknown_fields` (serde cannot flatten and deny at once): the report schema refuses
// what it does not declare, with a pointer, and the extras are bounded before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct Report {
    /// Validator id.
    pub validator_id: String,
    /// Validator version.
    pub validator_version: String,
    /// The verdict.
    pub verdict: Verdict,
    /// One-paragraph summary.
    pub summary: String,
    /// Findings.
    pub findings: Vec<ReportFinding>,
    /// Project paths the validator read.
    pub inputs_read: Vec<String>,
    /// Capabilities it used.
    pub capabilities_used: Vec<ValidatorCapability>,
    /// Fields beyond the base report, as the validator's `report_schema` declares them.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// One finding of a report.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportFinding {
    /// Severity.
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
    /// The file concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A JSON pointer into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
}

//! Tool results (`docs/engine.md` §4–§6). Field names are the public contract harnesses code
//! against; results may grow fields, never rename them.

use rimthan_registry::{
    AssetKind, DeliveryMode, HostCapability, StepKind, ValidatorCapability, ValidatorIsolation,
    WritePolicy,
};
use schemars::JsonSchema;
use serde::Serialize;

use crate::{
    model::audit::Outcome,
    model::codes::{Code, Failure},
    model::session::{Finding, HostBinding, Status, WorkflowRef},
};

/// The MCP server's name, written into session files and provenance statements.
pub const SERVER_NAME: &str = "rimthan-workflow-engine";

/// Where the session file lives in the project.
pub const SESSION_FILE_PATH: &str = ".rimthan/workflow-session.json";

/// A workflow reference.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WorkflowPayload {
    /// Workflow id.
    pub id: String,
    /// Version.
    pub version: String,
    /// Definition resource URI.
    pub uri: String,
}

/// A schema reference with its digest.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SchemaPayload {
    /// Schema id.
    pub id: String,
    /// Version.
    pub version: String,
    /// Resource URI.
    pub uri: String,
    /// sha256 of the schema bytes.
    pub sha256: String,
}

/// A declared output of the active step.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct OutputPayload {
    /// Artifact id.
    pub artifact_id: String,
    /// Project-relative path.
    pub path: String,
    /// The step that owns it.
    pub owner_step: String,
    /// Media type.
    pub media_type: String,
    /// The schema JSON content must satisfy.
    pub schema: Option<SchemaPayload>,
    /// Largest accepted size.
    pub max_bytes: u64,
    /// What the step may do to the path.
    pub write_policy: WritePolicy,
    /// A deterministic check of the step reads this output: attest its text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub send_text: bool,
}

/// A read-only input of the active step.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct InputPayload {
    /// Artifact id.
    pub artifact_id: String,
    /// Project-relative path.
    pub path: String,
    /// sha256 accepted when its step passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A deterministic check of the step reads this input: send its text in the output
    /// attestation's `inputs`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub send_text: bool,
}

/// A validator of the active step.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ValidatorPayload {
    /// Validator id.
    pub id: String,
    /// Version.
    pub version: String,
    /// Resource URI.
    pub uri: String,
    /// sha256 of the validator document.
    pub sha256: String,
    /// Capabilities it needs.
    pub capabilities: Vec<ValidatorCapability>,
}

/// The active step.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct StepPayload {
    /// Step id.
    pub id: String,
    /// Step kind.
    pub kind: StepKind,
    /// Title.
    pub title: String,
    /// Markdown instructions.
    pub instructions: String,
    /// Resource URI.
    pub uri: String,
    /// Declared outputs.
    pub outputs: Vec<OutputPayload>,
    /// Read-only inputs.
    pub inputs: Vec<InputPayload>,
    /// Validators.
    pub validators: Vec<ValidatorPayload>,
    /// Deterministic checks the server runs on the outputs when the step is prepared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckPayload>,
}

/// A deterministic check of the active step.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CheckPayload {
    /// Check id.
    pub id: String,
    /// Short title.
    pub title: String,
    /// What it holds the outputs to.
    pub description: String,
    /// Resource URI of its signed document (rules, script).
    pub uri: String,
    /// sha256 of that document.
    pub sha256: String,
    /// The artifact ids it reads.
    pub reads: Vec<String>,
}

/// A deterministic check's result in a validation plan.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PlanCheck {
    /// Resource URI of the check's signed document.
    pub uri: String,
    /// The result: verdict, what it read and what it found.
    #[serde(flatten)]
    pub record: crate::model::checks::CheckRecord,
}

/// The bound host adapter.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct HostAdapterPayload {
    /// Adapter id.
    pub id: String,
    /// Version.
    pub version: String,
    /// Content resource URI.
    pub uri: String,
    /// sha256 of its content.
    pub sha256: String,
}

/// A host asset the setup step must deliver, and how it may be delivered.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct HostAssetPayload {
    /// Asset kind.
    pub kind: AssetKind,
    /// Asset id.
    pub id: String,
    /// Version.
    pub version: String,
    /// Resource URI of the bound harness's rendition.
    pub uri: String,
    /// sha256 of that rendition.
    pub sha256: String,
    /// Modes this host may use.
    pub delivery_modes: Vec<DeliveryMode>,
    /// Where a project-local copy goes, when that mode is offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_local_path: Option<String>,
}

/// The bound host, as written into the session file.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SessionFileHost {
    /// Harness.
    pub harness: String,
    /// Adapter id and version.
    pub adapter: AdapterRef,
    /// Host capabilities.
    pub capabilities: Vec<HostCapability>,
    /// Validator capabilities.
    pub validator_capabilities: Vec<ValidatorCapability>,
}

/// An adapter id and version.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct AdapterRef {
    /// Adapter id.
    pub id: String,
    /// Version.
    pub version: String,
}

/// `.rimthan/workflow-session.json` content (the shipped `workflow-session` schema).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SessionFileContent {
    /// The server's name.
    pub server: String,
    /// Session id.
    pub session_id: String,
    /// The checkpoint to resume with.
    pub checkpoint: String,
    /// The pinned release.
    pub release: String,
    /// The workflow.
    pub workflow: WorkflowRef,
    /// The active step (null when completed).
    pub active_step: Option<String>,
    /// Status.
    pub status: Status,
    /// The bound host.
    pub host: SessionFileHost,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

impl SessionFileHost {
    pub(crate) fn from_binding(host: &HostBinding) -> Self {
        Self {
            harness: host.harness.to_string(),
            adapter: AdapterRef {
                id: host.adapter.id.to_string(),
                version: host.adapter.version.to_string(),
            },
            capabilities: host.capabilities.clone(),
            validator_capabilities: host.validator_capabilities.clone(),
        }
    }
}

/// The file a harness persists for Git handoff.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SessionFile {
    /// Always `.rimthan/workflow-session.json`.
    pub path: String,
    /// Its JSON content.
    pub content: SessionFileContent,
}

/// The active-step payload of `start_workflow`, `get_active_step` and `submit_step_reports`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ActivePayload {
    /// `active`, `revise`, `awaiting_approval`, `completed` or `expired`.
    pub status: Status,
    /// Session id.
    pub session_id: String,
    /// The checkpoint for the next call.
    pub checkpoint: String,
    /// The pinned release.
    pub release: String,
    /// The release is a draft: never published, for trying a workflow out. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draft: bool,
    /// The workflow.
    pub workflow: WorkflowPayload,
    /// The active step; null when completed.
    pub step: Option<StepPayload>,
    /// The bound host adapter.
    pub host_adapter: HostAdapterPayload,
    /// Host assets to deliver (setup step only).
    pub host_assets: Vec<HostAssetPayload>,
    /// The session file to persist.
    pub session_file: SessionFile,
    /// Findings of the last failed submission (status `revise`); empty otherwise.
    pub findings: Vec<Finding>,
    /// When completed: the session's signed provenance statement, to write beside the session
    /// file (`docs/operations/evidence.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceFile>,
    /// When awaiting approval: who may sign the step off and what they have decided so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPayload>,
    /// When the active step's work is due, if it has a deadline: tell the participant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<crate::model::session::Deadline>,
}

/// A step waiting for sign-off, as the participant's harness sees it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ApprovalPayload {
    /// The step.
    pub step: String,
    /// Distinct approvals the step needs.
    pub approvals_needed: u8,
    /// Approvals given so far.
    pub approvals: Vec<crate::model::approval::Signoff>,
    /// Whether facilitators of the session's organization may approve.
    pub facilitators: bool,
    /// Roles whose holders may approve.
    pub roles: Vec<String>,
    /// Whether the session's own participant may approve.
    pub self_approval: bool,
    /// Failed check findings an approver must waive (or send the step back for).
    pub waivable: Vec<Finding>,
    /// Findings waived so far.
    pub waivers: Vec<crate::model::approval::Waiver>,
    /// What approvers see: the outputs' paths and digests, the reports and check results of the
    /// step's last round, in the facilitator's view or `rimthan sessions show`.
    pub outputs: Vec<ApprovalOutput>,
    /// RFC 3339 time its deciders will be reminded, if they have not been yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<String>,
    /// RFC 3339 time the sign-off expires undecided, if it expires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// What expiry does: `send_back` (the step returns to revise) or `fail` (the session ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub on_expiry: Option<rimthan_registry::OnExpiry>,
}

/// An output an approval covers.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ApprovalOutput {
    /// Its path.
    pub path: String,
    /// Its sha256.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
}

/// The signed provenance statement of a completed session, as a file to keep in Git.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ProvenanceFile {
    /// Always `.rimthan/workflow-session.intoto.json`.
    pub path: String,
    /// The DSSE envelope of the in-toto statement; write it as JSON, unchanged.
    pub content: crate::model::provenance::Envelope,
}

/// A validator in a validation plan.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PlanValidator {
    /// Validator id.
    pub id: String,
    /// Version.
    pub version: String,
    /// Resource URI.
    pub uri: String,
    /// sha256 of the validator document.
    pub sha256: String,
    /// Instructions for its subagent.
    pub instructions: String,
    /// The only files it may read.
    pub inputs: Vec<InputPayload>,
    /// Capabilities it may use: its needs within the session's binding.
    pub capabilities: Vec<ValidatorCapability>,
    /// Whether this host itself keeps the validator read-only (`host-enforced`), or only its
    /// instructions do (`instructed`), as the session's adapter records.
    pub isolation: ValidatorIsolation,
    /// The schema its report must satisfy.
    pub report_schema: SchemaPayload,
}

/// The result of a successful `prepare_step_validation`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ValidationPlan {
    /// Always `ready`.
    pub status: ReadyTag,
    /// The id to submit reports against.
    pub validation_id: String,
    /// Validators to run, each as its own subagent.
    pub validators: Vec<PlanValidator>,
    /// The step's deterministic checks, already run by the server on the attested outputs. A
    /// `fail` sends the step to `revise` at submission whatever the reports say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<PlanCheck>,
    /// How to run them.
    pub instructions: String,
}

macro_rules! tag {
    ($(#[$doc:meta])* $name:ident = $text:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
        pub enum $name {
            #[doc = concat!("`", $text, "`")]
            #[serde(rename = $text)]
            Tag,
        }
    };
}

tag!(
    /// The `status` of a validation plan.
    ReadyTag = "ready"
);
tag!(
    /// The `status` of a blocked start.
    BlockedTag = "blocked"
);
tag!(
    /// The `status` of a rejected call.
    RejectedTag = "rejected"
);

/// A blocked start: nothing was persisted and no setup payload is given.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Blocked {
    /// Always `blocked`.
    pub status: BlockedTag,
    /// Every blocker found, in the engine's fixed evaluation order.
    pub blockers: Vec<Failure>,
}

/// A rejected call: the session did not change.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Rejected {
    /// Always `rejected`.
    pub status: RejectedTag,
    /// Every failure found, in a deterministic order.
    pub failures: Vec<Failure>,
}

impl Rejected {
    /// A rejection with these failures.
    pub fn new(failures: Vec<Failure>) -> Self {
        Self {
            status: RejectedTag::Tag,
            failures,
        }
    }
}

/// Result of `start_workflow`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum StartResult {
    /// A session started.
    Active(Box<ActivePayload>),
    /// The host cannot run the workflow.
    Blocked(Blocked),
    /// The request named nothing runnable.
    Rejected(Rejected),
}

/// Result of `get_active_step` and `submit_step_reports`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum StepResult {
    /// The session's state.
    Active(Box<ActivePayload>),
    /// Nothing changed.
    Rejected(Rejected),
}

/// Result of `prepare_step_validation`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum PrepareResult {
    /// Outputs accepted; run the plan.
    Ready(ValidationPlan),
    /// Evidence refused.
    Rejected(Rejected),
}

/// What a result says for the audit log and the metrics: typed, never read back out of JSON.
pub trait ToolOutcome {
    /// True for blocked, rejected and revise: an error outcome for the harness.
    fn is_error(&self) -> bool;
    /// The codes reported, in order.
    fn codes(&self) -> Vec<Code>;
    /// The result's `status`.
    fn outcome(&self) -> Outcome;
}

fn codes_of(failures: &[Failure]) -> Vec<Code> {
    failures.iter().map(|f| f.code).collect()
}

impl ToolOutcome for StartResult {
    fn is_error(&self) -> bool {
        !matches!(self, StartResult::Active(_))
    }
    fn codes(&self) -> Vec<Code> {
        match self {
            StartResult::Active(_) => vec![],
            StartResult::Blocked(b) => codes_of(&b.blockers),
            StartResult::Rejected(r) => codes_of(&r.failures),
        }
    }
    fn outcome(&self) -> Outcome {
        match self {
            StartResult::Active(p) => p.status.into(),
            StartResult::Blocked(_) => Outcome::Blocked,
            StartResult::Rejected(_) => Outcome::Rejected,
        }
    }
}

impl ToolOutcome for StepResult {
    fn is_error(&self) -> bool {
        match self {
            StepResult::Active(p) => p.status == Status::Revise,
            StepResult::Rejected(_) => true,
        }
    }
    fn codes(&self) -> Vec<Code> {
        match self {
            StepResult::Active(_) => vec![],
            StepResult::Rejected(r) => codes_of(&r.failures),
        }
    }
    fn outcome(&self) -> Outcome {
        match self {
            StepResult::Active(p) => p.status.into(),
            StepResult::Rejected(_) => Outcome::Rejected,
        }
    }
}

impl ToolOutcome for PrepareResult {
    fn is_error(&self) -> bool {
        matches!(self, PrepareResult::Rejected(_))
    }
    fn codes(&self) -> Vec<Code> {
        match self {
            PrepareResult::Ready(_) => vec![],
            PrepareResult::Rejected(r) => codes_of(&r.failures),
        }
    }
    fn outcome(&self) -> Outcome {
        match self {
            PrepareResult::Ready(_) => Outcome::Ready,
            PrepareResult::Rejected(_) => Outcome::Rejected,
        }
    }
}

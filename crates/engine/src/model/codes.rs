//! The stable codes of every domain outcome the engine can report (`docs/engine.md` §8), and the
//! `{code, message, detail}` record that carries one.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $text:literal),+ $(,)?) => {
        /// A stable snake_case code a harness can branch on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[$doc])* $variant),+
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text),+ }
            }

            /// The code a wire spelling names, if any.
            pub fn from_wire(text: &str) -> Option<Self> {
                match text { $($text => Some(Code::$variant),)+ _ => None }
            }
        }
    };
}

codes! {
    // Start-time blockers (`docs/engine.md` §2.2), in the order they are evaluated and reported.
    /// The harness is not one of the four, or the workflow pins no adapter for it.
    UnsupportedHarness = "unsupported_harness",
    /// The declaration lacks an adapter id/version, or the adapter does not serve the harness.
    UnsupportedHostAdapter = "unsupported_host_adapter",
    /// The declared adapter is not in the release.
    HostAdapterAssetMissing = "host_adapter_asset_missing",
    /// The declared adapter has no typed contract.
    HostAdapterContractUnavailable = "host_adapter_contract_unavailable",
    /// The declared adapter is not the one the workflow pins for the harness.
    HostAdapterBindingMismatch = "host_adapter_binding_mismatch",
    /// A capability the workflow or adapter requires is not declared.
    MissingHostCapability = "missing_host_capability",
    /// A capability a validator needs is not declared.
    MissingValidatorCapability = "missing_validator_capability",
    /// The workflow cannot run without breaking the repository policy.
    RepositoryPolicyConflict = "repository_policy_conflict",

    // Arguments.
    /// An argument does not match the tool's input schema or rules; the detail names the field.
    InvalidArguments = "invalid_arguments",

    // Requests that name nothing.
    /// The release is not in the registry.
    UnknownRelease = "unknown_release",
    /// The channel is not in the registry.
    UnknownChannel = "unknown_channel",
    /// The workflow (or that version of it) is not in the release.
    UnknownWorkflow = "unknown_workflow",

    // Checkpoints and sessions (`docs/engine.md` §3).
    /// The checkpoint token is malformed or not signed by this server.
    InvalidCheckpoint = "invalid_checkpoint",
    /// The checkpoint is authentic but older than the session's current one.
    StaleCheckpoint = "stale_checkpoint",
    /// The checkpoint names a session the store does not hold.
    SessionNotFound = "session_not_found",
    /// The caller may not act on this session.
    SessionAccessDenied = "session_access_denied",
    /// A start's idempotency key already started a session, with other arguments or one that
    /// has moved on since.
    IdempotencyKeyReused = "idempotency_key_reused",

    // prepare_step_validation (`docs/engine.md` §5).
    /// The attestation type does not fit the step.
    AttestationTypeNotAllowed = "attestation_type_not_allowed",
    /// The step is not the session's active step.
    StepNotActive = "step_not_active",
    /// Harness or adapter differ from the checkpoint binding.
    HostBindingMismatch = "host_binding_mismatch",
    /// Declared capabilities differ from the checkpoint binding.
    CapabilityBindingMismatch = "capability_binding_mismatch",
    /// A required host asset has no delivery.
    AssetNotDelivered = "asset_not_delivered",
    /// A delivery names an asset the step does not require.
    UnexpectedDelivery = "unexpected_delivery",
    /// A delivery's version or sha256 is not the bound harness's rendition.
    AssetDigestMismatch = "asset_digest_mismatch",
    /// A delivery uses a mode the contract does not offer this host.
    DeliveryModeNotAllowed = "delivery_mode_not_allowed",
    /// A project-local delivery is not at the contract's path.
    ProjectLocalPathMismatch = "project_local_path_mismatch",
    /// Two deliveries, or a delivery and a declared output, share a path.
    HostAssetPathCollision = "host_asset_path_collision",
    /// A declared output is not attested.
    OutputMissing = "output_missing",
    /// An attested artifact is not a declared output of the step.
    UnexpectedOutput = "unexpected_output",
    /// An artifact was read back from another path than declared.
    OutputPathMismatch = "output_path_mismatch",
    /// A declared output path is attested under another artifact id.
    ArtifactBindingMismatch = "artifact_binding_mismatch",
    /// The attested owner step is not the step.
    OwnerStepMismatch = "owner_step_mismatch",
    /// The attested media type is not the declared one.
    MediaTypeMismatch = "media_type_mismatch",
    /// The attested schema digest is not the declared schema's.
    SchemaDigestMismatch = "schema_digest_mismatch",
    /// The artifact is larger than its max_bytes.
    MaxBytesExceeded = "max_bytes_exceeded",
    /// The attested sha256 is not 64 lowercase hex digits.
    ContentDigestMismatch = "content_digest_mismatch",
    /// The path traverses a symlink.
    SymlinkInPath = "symlink_in_path",
    /// The artifact was not read back from disk.
    OutputNotReadBack = "output_not_read_back",
    /// The write policy is not the declared one, or the file's attested history breaks it.
    WritePolicyMismatch = "write_policy_mismatch",
    /// A JSON artifact does not satisfy its schema.
    SchemaValidationFailed = "schema_validation_failed",
    /// A deterministic check of the step reads the artifact, and its text is not attested.
    OutputTextMissing = "output_text_missing",
    /// An attested text is not the attested (or, for an input, the accepted) bytes: its sha256
    /// or length differs.
    OutputTextMismatch = "output_text_mismatch",
    /// A JSON output's `content` is not the JSON its attested `text` holds: the schema judges
    /// the text, whose digest is attested and whose checks run.
    OutputContentMismatch = "output_content_mismatch",
    /// A deterministic check stopped at one of its bounds or could not read an input as text;
    /// nothing was recorded.
    CheckAborted = "check_aborted",

    // submit_step_reports (`docs/engine.md` §6).
    /// The validation id is unknown for this session.
    ValidationNotFound = "validation_not_found",
    /// A newer validation plan replaced this one.
    ValidationSuperseded = "validation_superseded",
    /// A planned validator has no report.
    ReportMissing = "report_missing",
    /// A validator has more than one report.
    ReportDuplicate = "report_duplicate",
    /// A report names a validator (or version) the plan does not hold.
    ReportUnexpected = "report_unexpected",
    /// A report does not satisfy the report schema.
    ReportSchemaInvalid = "report_schema_invalid",
    /// A report's fields beyond the base report are too many or too large to check.
    ReportExtrasExceeded = "report_extras_exceeded",
    /// A report used a capability the validator was not allowed.
    CapabilityEscalation = "capability_escalation",
    /// A report read a path that is not a declared input.
    UndeclaredInputRead = "undeclared_input_read",

    // Sign-off (`docs/engine.md` §6.2).
    /// The session waits for sign-off of its step; no tool call can advance it.
    AwaitingApproval = "awaiting_approval",
    /// The caller may not decide on this step: not named by its approval, the session's own
    /// participant, or of another organization.
    ApprovalNotAllowed = "approval_not_allowed",
    /// An asserted name (where nobody authenticates) deciding where only verified credentials
    /// may: on a server with authentication, or on a session an authenticated participant started.
    ApprovalNotAuthenticated = "approval_not_authenticated",
    /// The session is not waiting for sign-off of this step.
    ApprovalNotPending = "approval_not_pending",
    /// The session changed since the revision the approver looked at.
    ApprovalStale = "approval_stale",
    /// An output differs from the digest the approver read.
    ApprovalContentChanged = "approval_content_changed",
    /// This approver already approved this step.
    ApprovalAlreadyGiven = "approval_already_given",
    /// A send-back or waiver without its note or reason, or one too long.
    ApprovalNoteRequired = "approval_note_required",
    /// The step is approved only once every failed check's finding is waived.
    ApprovalFindingsUnwaived = "approval_findings_unwaived",
    /// The step allows no waiver of this check's findings.
    WaiverNotAllowed = "waiver_not_allowed",
    /// No unwaived finding of this check, rule and path waits for sign-off.
    WaiverNotFound = "waiver_not_found",

    // Timers (`docs/engine.md` §6.3).
    /// A sign-off or a deadline expired and ended the session; start a new one.
    SessionExpired = "session_expired",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Code".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        schemars::json_schema!({"type": "string", "enum": names})
    }
}

/// One blocker, rejection or finding with its code, a message a person can act on, and a
/// detail object (keys sorted, so output is deterministic).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Failure {
    /// The stable code.
    pub code: Code,
    /// What happened and what to do.
    pub message: String,
    /// Machine-readable specifics (field, expected, actual, path, …).
    pub detail: Map<String, Value>,
}

impl Failure {
    /// A failure with an empty detail.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            detail: Map::new(),
        }
    }

    /// Adds one detail key.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let value = serde_json::to_value(value).expect("detail values serialize");
        self.detail.insert(key.to_owned(), value);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert!(seen.insert(s), "{s} twice");
            assert_eq!(Code::from_wire(s), Some(*code));
        }
        assert_eq!(Code::from_wire("no_such_code"), None);
    }
}

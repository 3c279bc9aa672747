//! A workflow session's state: what a start bound, where the workflow stands, and the evidence
//! accepted so far. Persisted as JSON by the store; every change goes through a
//! compare-and-swap on [`Session::revision`].

use std::{collections::BTreeMap, fmt, str::FromStr};

use rimthan_registry::{
    AssetId, Harness, HostCapability, ReleaseId, Sha256Digest, StepId, ValidatorCapability,
    ValidatorId, Version, WorkflowId,
};
use serde::{Deserialize, Serialize};

use crate::model::request::Severity;

/// A session id: 32 lowercase hex digits (128 random bits).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    /// A fresh random id.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the operating system's random source works");
        Self(hex::encode(bytes))
    }

    /// The id a keyed start derives: the first 128 bits of a MAC, so it is as unguessable as
    /// a random one and the same for the same caller and key.
    pub(crate) fn from_mac(mac: &[u8]) -> Self {
        Self(hex::encode(&mac[..16]))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for SessionId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!("{s:?} is not a session id"))
        }
    }
}

impl TryFrom<String> for SessionId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who is calling, when the server authenticates callers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// The subject (user or service) id.
    pub subject: String,
    /// The organization claim; principals of one organization may hand a session over.
    pub organization: Option<String>,
}

/// Where the workflow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The active step awaits outputs and a validation plan.
    Active,
    /// A validator failed the step; the harness revises and prepares again.
    Revise,
    /// The step passed and waits for people its approval names to sign it off.
    AwaitingApproval,
    /// Every step completed.
    Completed,
    /// A sign-off or a deadline expired with `on_expiry: fail`: the session ended undone.
    Expired,
}

impl Status {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Revise => "revise",
            Status::AwaitingApproval => "awaiting_approval",
            Status::Completed => "completed",
            Status::Expired => "expired",
        }
    }

    /// Whether the session has ended: no tool call moves it again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Expired)
    }

    /// The status a wire spelling names, if any.
    pub fn from_wire(text: &str) -> Option<Self> {
        [
            Status::Active,
            Status::Revise,
            Status::AwaitingApproval,
            Status::Completed,
            Status::Expired,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// The adapter a session is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AdapterBinding {
    /// Adapter asset id.
    pub id: AssetId,
    /// Exact version.
    pub version: Version,
}

/// What a start bound into the session; later evidence must match it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostBinding {
    /// The harness.
    pub harness: Harness,
    /// The adapter.
    pub adapter: AdapterBinding,
    /// Declared host capabilities, sorted.
    pub capabilities: Vec<HostCapability>,
    /// Declared validator capabilities, sorted.
    pub validator_capabilities: Vec<ValidatorCapability>,
}

/// An artifact whose attestation a passed step accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedArtifact {
    /// Artifact id.
    pub artifact_id: String,
    /// The step that owns it.
    pub owner_step: StepId,
    /// Its sha256 when accepted.
    pub sha256: Sha256Digest,
    /// Its size when accepted.
    pub bytes: u64,
}

/// The validation plan awaiting reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// Validation id.
    pub id: String,
    /// The step it validates.
    pub step: StepId,
    /// Validators, in plan order.
    pub validators: Vec<(ValidatorId, Version)>,
    /// Attested outputs: path → artifact.
    pub outputs: BTreeMap<String, AcceptedArtifact>,
    /// The step's deterministic checks as they ran on these outputs, in the step's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::model::checks::CheckRecord>,
    /// For a step that asks for sign-off: each output's text (path → text), proven to be its
    /// attested bytes, kept so the approver reads what they sign.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub texts: BTreeMap<String, String>,
}

/// One reported finding, kept for a `revise` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// The validator that reported it (absent for a deterministic check's finding).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub validator_id: String,
    /// The deterministic check that reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_id: Option<String>,
    /// The check's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The 1-based line in `path` (checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `info`, `warning` or `error`.
    #[schemars(with = "String")]
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
    /// The file concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A JSON pointer into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// How to fix it, when the check that found it describes its rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<rimthan_registry::RuleHelp>,
}

/// A workflow id and version, as session files and the audit log name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(description = "A workflow id and version.")]
pub struct WorkflowRef {
    /// Workflow id.
    pub id: String,
    /// Version.
    pub version: String,
}

/// The tools that change a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestTool {
    /// `rimthan.start_workflow`.
    Start,
    /// `rimthan.prepare_step_validation`.
    Prepare,
    /// `rimthan.submit_step_reports`.
    Submit,
}

/// The request that made a session's latest change. An identical request (a harness retrying
/// after the answer was lost) is answered from the session as it stands, for as long as no
/// other request has changed it (`docs/engine.md` §3.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRequest {
    /// The tool.
    pub tool: RequestTool,
    /// sha256 of the request's canonical JSON, checkpoint included.
    pub request_sha256: Sha256Digest,
}

/// A session's whole state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The id.
    pub id: SessionId,
    /// Bumps on every stored change; the compare-and-swap key.
    pub revision: u64,
    /// Bumps when the checkpoint moves (advance, revise).
    pub seq: u64,
    /// The pinned release.
    pub release: ReleaseId,
    /// The workflow.
    pub workflow: WorkflowId,
    /// Its version.
    pub workflow_version: Version,
    /// The host binding.
    pub host: HostBinding,
    /// Who started it, when auth is on.
    pub principal: Option<Principal>,
    /// The repository policy declared at start.
    pub policy: crate::model::request::RepositoryPolicy,
    /// Where it stands.
    pub status: Status,
    /// Index of the active step (equal to the step count when completed).
    pub step_index: usize,
    /// The current plan, if prepared.
    pub plan: Option<PlanRecord>,
    /// Plan ids that a newer plan or a submission retired (the most recent ones).
    pub retired_plans: Vec<String>,
    /// Accepted artifacts by path.
    pub ledger: BTreeMap<String, AcceptedArtifact>,
    /// The digest last attested for each output path, kept across revise rounds so
    /// `create-or-verify-owned` can hold a file to what was first attested.
    #[serde(default)]
    pub attested: BTreeMap<String, Sha256Digest>,
    /// Findings of the last failed submission.
    pub findings: Vec<Finding>,
    /// The last accepted report set of each submitted step, as submitted: a revise round is
    /// replaced by the round that passed. Fields a validator's `report_schema` adds beyond the
    /// base report are kept here with their report.
    #[serde(default)]
    pub reports: BTreeMap<StepId, Vec<crate::model::request::Report>>,
    /// The reports of every judged round of each step, oldest first, the last
    /// [`REPORT_ROUNDS_KEPT`] per step: the failing rounds that sent a step back stay
    /// readable after it passes. Absent in sessions stored before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub report_rounds: BTreeMap<StepId, Vec<ReportRound>>,
    /// sha256 of the canonical host attestation the setup step accepted, for the provenance
    /// statement; absent in sessions stored before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_attestation_sha256: Option<Sha256Digest>,
    /// The request that made the latest change, for answering its identical retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change: Option<LastRequest>,
    /// How many times a validator sent a step back for revision.
    #[serde(default)]
    pub revise_rounds: u32,
    /// RFC 3339 time the active step was entered (the start, or the pass of the step before);
    /// absent in sessions stored before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_entered_at: Option<String>,
    /// The step waiting for sign-off (status `awaiting_approval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::model::approval::PendingApproval>,
    /// When the active step's work is due, if its step declares a deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
    /// The timers that fired, oldest first (the last [`TIMER_EVENTS_KEPT`]): what the
    /// provenance statement says of each step's reminders and expiries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timer_events: Vec<TimerEvent>,
    /// Who signed off each step that needed it, and what they waived.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub signoffs: BTreeMap<StepId, SignedOff>,
    /// The outputs' texts of each step's round an approver sent back (path → text), until the
    /// step waits for sign-off again: what its approver reads the new round against.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sent_back_texts: BTreeMap<StepId, BTreeMap<String, String>>,
    /// RFC 3339 time of creation.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

/// When a step's work is due and what passing it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Deadline {
    /// The step.
    pub step: String,
    /// RFC 3339 time it is due.
    pub at: String,
    /// `send_back` or `fail`.
    #[schemars(with = "String")]
    pub on_expiry: rimthan_registry::OnExpiry,
}

/// A timer that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimerEvent {
    /// The step it belonged to.
    pub step: String,
    /// What fired.
    pub timer: TimerKind,
    /// RFC 3339 time it was due.
    pub due_at: String,
    /// RFC 3339 time it fired.
    pub at: String,
    /// What it did: `send_back` or `fail` for an expiry; none for a reminder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub on_expiry: Option<rimthan_registry::OnExpiry>,
}

/// What kind of timer fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    /// The sign-off's deciders were reminded.
    Reminder,
    /// The sign-off expired undecided.
    SignoffExpired,
    /// The step's deadline passed.
    DeadlinePassed,
}

/// How many fired timers a session keeps: a step sent back by its deadline again and again
/// cannot grow the stored session without bound.
pub(crate) const TIMER_EVENTS_KEPT: usize = 64;

/// How a step was signed off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedOff {
    /// The approvals, in order.
    pub approvals: Vec<crate::model::approval::Signoff>,
    /// The findings waived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waivers: Vec<crate::model::approval::Waiver>,
}

/// One judged submission of a step's reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportRound {
    /// The round of this step, from 1.
    pub round: u32,
    /// RFC 3339 time it was judged.
    pub at: String,
    /// The reports as submitted, with the fields their report schemas add.
    pub reports: Vec<crate::model::request::Report>,
    /// The step's deterministic checks on the outputs this round judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::model::checks::CheckRecord>,
}

/// How many report rounds a session keeps per step: enough for every round of a step revised
/// a few times, while a step revised without end cannot grow the stored session without bound
/// (each report is bounded by the request size).
pub const REPORT_ROUNDS_KEPT: usize = 8;

/// How many retired plan ids a session remembers, to tell superseded from unknown plans.
const RETIRED_PLANS_KEPT: usize = 64;

impl Session {
    /// Records a judged round of `step`'s reports, forgetting its oldest beyond the bound.
    pub(crate) fn record_round(
        &mut self,
        step: &StepId,
        at: &str,
        reports: &[crate::model::request::Report],
        checks: &[crate::model::checks::CheckRecord],
    ) {
        // A step without validators or checks (setup) has nothing to show.
        if reports.is_empty() && checks.is_empty() {
            return;
        }
        let rounds = self.report_rounds.entry(step.clone()).or_default();
        let round = rounds.last().map_or(1, |r| r.round + 1);
        rounds.push(ReportRound {
            round,
            at: at.to_owned(),
            reports: reports.to_vec(),
            checks: checks.to_vec(),
        });
        let excess = rounds.len().saturating_sub(REPORT_ROUNDS_KEPT);
        rounds.drain(..excess);
    }

    /// Records a fired timer, forgetting the oldest beyond the bound.
    pub(crate) fn record_timer(&mut self, event: TimerEvent) {
        self.timer_events.push(event);
        let excess = self.timer_events.len().saturating_sub(TIMER_EVENTS_KEPT);
        self.timer_events.drain(..excess);
    }

    /// Records that a plan is no longer pending, forgetting the oldest beyond a bound.
    pub(crate) fn retire(&mut self, plan: String) {
        self.retired_plans.push(plan);
        let excess = self.retired_plans.len().saturating_sub(RETIRED_PLANS_KEPT);
        self.retired_plans.drain(..excess);
    }
}

impl Session {
    /// When the session's next timer is due (RFC 3339): a reminder or an expiry of the
    /// sign-off it waits for, or the deadline of the step it works on; none when nothing is
    /// timed. The store keeps it in an indexed column, so due sessions are found without
    /// reading any state (`docs/engine.md` §6.3).
    pub fn due_at(&self) -> Option<&str> {
        match self.status {
            Status::AwaitingApproval => {
                let pending = self.approval.as_ref()?;
                [pending.remind_at.as_deref(), pending.expires_at.as_deref()]
                    .into_iter()
                    .flatten()
                    .min()
            }
            Status::Active | Status::Revise => self.deadline.as_ref().map(|d| d.at.as_str()),
            Status::Completed | Status::Expired => None,
        }
    }
}

/// `at` plus `seconds`, as RFC 3339 with second precision (as [`now_rfc3339`] writes it, so
/// two such times compare as strings); `at` unchanged if it does not parse.
pub(crate) fn later_by(at: &str, seconds: u64) -> String {
    let format = &time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(at, format)
        .ok()
        .and_then(|t| t.checked_add(time::Duration::seconds(i64::try_from(seconds).ok()?)))
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| at.to_owned())
}

/// Seconds since the Unix epoch of an RFC 3339 time.
pub(crate) fn unix_seconds(at: &str) -> Option<i64> {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(time::OffsetDateTime::unix_timestamp)
}

/// Whole seconds from one RFC 3339 time to a later one, if both parse and are in order.
pub(crate) fn seconds_between(from: &str, to: &str) -> Option<u64> {
    let parse = |t: &str| {
        time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
    };
    u64::try_from((parse(to)? - parse(from)?).whole_seconds()).ok()
}

/// Current UTC time in RFC 3339 with second precision.
pub(crate) fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .expect("0 ns is valid");
    now.format(&time::format_description::well_known::Rfc3339)
        .expect("UTC times format")
}

//! What a step's deterministic checks found, as the session stores and shows it: digests and
//! findings, never the text (`docs/checks.md`). Running them is `rules/checks.rs`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use rimthan_registry::RuleHelp;

use crate::model::request::Severity;

/// The most findings of one check kept with the session and shown; `finding_count` gives the
/// total (the runtime bounds it at its `max_findings`).
pub const MAX_KEPT_CHECK_FINDINGS: usize = 50;

/// Whether a check passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckVerdict {
    /// No `error` finding.
    Pass,
    /// At least one `error` finding: the step goes back to `revise`.
    Fail,
}

/// One finding of a deterministic check, as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckFinding {
    /// The rule's id.
    pub rule: String,
    /// `error` (fails the step) or `warning`.
    #[schemars(with = "String")]
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
    /// The file concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its 1-based line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// How to fix it, when the check describes its rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<RuleHelp>,
}

/// One check's result on one preparation: what it read (by digest) and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckRecord {
    /// The check's id.
    pub id: String,
    /// sha256 of the check's signed document.
    pub sha256: String,
    /// The verdict.
    pub verdict: CheckVerdict,
    /// What it read: path → sha256.
    pub inputs: BTreeMap<String, String>,
    /// Its findings, sorted, at most [`MAX_KEPT_CHECK_FINDINGS`].
    pub findings: Vec<CheckFinding>,
    /// How many findings it reported in all.
    pub finding_count: usize,
}

impl CheckRecord {
    /// Whether the check failed the step.
    pub fn failed(&self) -> bool {
        self.verdict == CheckVerdict::Fail
    }
}

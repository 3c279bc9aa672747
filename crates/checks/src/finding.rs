//! What a check reports: findings, in one order on every run.

use serde::{Deserialize, Serialize};

/// How much a finding weighs: an `Error` fails the step, a `Warning` is shown and does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fails the step.
    Error,
    /// Shown, does not fail the step.
    Warning,
}

impl Severity {
    /// The lowercase spelling used in sources and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
        }
    }
}

impl std::str::FromStr for Severity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "error" => Ok(Self::Error),
            "warning" => Ok(Self::Warning),
            other => Err(format!(
                "unknown severity `{other}`: expected `error` or `warning`"
            )),
        }
    }
}

/// One thing a check found. Fields are declared in the order findings sort by, so a run's
/// findings come back sorted by input, line, rule, severity, message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// The input it is about, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The 1-based line in that input, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The rule's id, as the check names it.
    pub rule: String,
    /// Its weight.
    pub severity: Severity,
    /// What is wrong, for the participant.
    pub message: String,
}

impl Finding {
    /// A finding with no location.
    pub fn new(rule: impl Into<String>, severity: Severity, message: impl Into<String>) -> Self {
        Self {
            path: None,
            line: None,
            rule: rule.into(),
            severity,
            message: message.into(),
        }
    }

    /// The same finding, located at `line` of the input `path`.
    pub fn at(mut self, path: impl Into<String>, line: Option<u32>) -> Self {
        self.path = Some(path.into());
        self.line = line;
        self
    }
}

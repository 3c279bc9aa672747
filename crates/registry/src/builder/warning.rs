//! Build warnings: what a build accepts but an author should look at.

use std::fmt;

/// Something a build accepts but an author probably did not mean.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildWarning {
    /// A schema no output and no validator's `report_schema` names. Legitimate for
    /// release-level schemas a release publishes for hosts (such as a session file's).
    UnusedSchema {
        /// The schema's source file.
        file: String,
        /// `<id>@<version>`.
        schema: String,
    },
    /// A rule a check describes in `help` that no counter-example's expected findings name,
    /// so nothing shows the check can report it.
    RuleNotExercised {
        /// The step file declaring the check.
        file: String,
        /// `<workflow>@<version>/<check id>`.
        check: String,
        /// The rule.
        rule: String,
    },
}

impl BuildWarning {
    /// The stable snake_case code of this warning.
    pub fn code(&self) -> &'static str {
        match self {
            BuildWarning::UnusedSchema { .. } => "unused_schema",
            BuildWarning::RuleNotExercised { .. } => "rule_not_exercised",
        }
    }
}

impl fmt::Display for BuildWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildWarning::UnusedSchema { file, schema } => write!(
                f,
                "{file}: schema {schema} is used by no output and no validator's report_schema; \
                 reference it or delete the file (keep it if the release publishes it for hosts)"
            ),
            BuildWarning::RuleNotExercised { file, check, rule } => write!(
                f,
                "{file}: check {check} describes rule {rule}, which no counter-example \
                 produces; add a counter-example whose expected-findings.json names it"
            ),
        }
    }
}

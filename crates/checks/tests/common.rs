//! Loads one fixture folder under `tests/data/<case>/`: `case.json` names the check (a Rhai
//! file or `sql-lint` rules), the input files, optional limits, and what the run must give.

use std::path::PathBuf;
use std::time::Duration;

use rimthan_checks::{Check, CheckError, Finding, Input, Limits, Severity};
use serde::Deserialize;

pub(crate) fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    pub(crate) description: String,
    pub(crate) check: CheckSpec,
    pub(crate) inputs: Vec<String>,
    #[serde(default)]
    pub(crate) limits: LimitsSpec,
    pub(crate) expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum CheckSpec {
    /// A Rhai file in the folder.
    Script(String),
    /// squawk rules and their severities.
    SqlLint(Vec<(String, String)>),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsSpec {
    max_input_bytes: Option<usize>,
    max_operations: Option<u64>,
    max_wall_time_ms: Option<u64>,
    max_findings: Option<usize>,
    max_data: Option<(usize, usize, usize)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Expect {
    /// `[path, line, rule, severity]` per finding, in the order the run returns them.
    Findings(Vec<(Option<String>, Option<u32>, String, String)>),
    Error {
        code: String,
        #[serde(default)]
        line: Option<usize>,
        #[serde(default)]
        column: Option<usize>,
    },
}

impl LimitsSpec {
    fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        if let Some(bytes) = self.max_input_bytes {
            limits = limits.with_max_input_bytes(bytes);
        }
        if let Some(operations) = self.max_operations {
            limits = limits.with_max_operations(operations);
        }
        if let Some(ms) = self.max_wall_time_ms {
            limits = limits.with_max_wall_time(Duration::from_millis(ms));
        }
        if let Some(findings) = self.max_findings {
            limits = limits.with_max_findings(findings);
        }
        if let Some((s, a, m)) = self.max_data {
            limits = limits.with_max_data(s, a, m);
        }
        limits
    }
}

impl Case {
    pub(crate) fn load(name: &str) -> (Self, PathBuf) {
        let dir = data_dir().join(name);
        let text = std::fs::read_to_string(dir.join("case.json")).expect("case.json reads");
        (serde_json::from_str(&text).expect("case.json parses"), dir)
    }

    /// Compiles the check and runs it on the case's inputs.
    pub(crate) fn run(&self, dir: &std::path::Path) -> Result<Vec<Finding>, CheckError> {
        let limits = self.limits.limits();
        let check = match &self.check {
            CheckSpec::Script(file) => {
                let source = std::fs::read_to_string(dir.join(file)).expect("the check reads");
                Check::script(&source, limits)?
            }
            CheckSpec::SqlLint(rules) => Check::sql_lint(
                rules
                    .iter()
                    .map(|(r, s)| (r.as_str(), s.parse::<Severity>().unwrap())),
                limits,
            )?,
        };
        let bytes: Vec<Vec<u8>> = self
            .inputs
            .iter()
            .map(|name| std::fs::read(dir.join(name)).expect("an input reads"))
            .collect();
        let inputs: Vec<Input<'_>> = self
            .inputs
            .iter()
            .zip(&bytes)
            .map(|(name, bytes)| Input::new(name, bytes))
            .collect();
        check.run(&inputs)
    }
}

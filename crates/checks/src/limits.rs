//! The bounds every check runs under (`docs/checks.md` §Bounds).

use std::time::Duration;

/// Bounds on one run of one check. Each bound, when hit, ends the run with its own
/// `crate::CheckError` code; none is a silent cut.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Limits {
    /// Bytes of one input, checked before any parser runs.
    pub max_input_bytes: usize,
    /// Inputs to one run.
    pub max_inputs: usize,
    /// Interpreter operations (each expression, statement and call counts one).
    pub max_operations: u64,
    /// Bytes of any one string the check builds, nested values included.
    pub max_string_bytes: usize,
    /// Elements of any one array the check builds, nested arrays included.
    pub max_array_len: usize,
    /// Entries of any one map the check builds, nested maps included.
    pub max_map_len: usize,
    /// Estimated bytes of the parsed forms of one run's inputs together, charged as they are
    /// built and before the script starts (`docs/checks.md` §Bounds).
    pub max_parsed_bytes: usize,
    /// Function calls nested inside one another.
    pub max_call_depth: usize,
    /// Wall time of one run, parsing, linting and the script together: a backstop behind
    /// `max_operations` and `max_parsed_bytes`, which are what make the verdict the same on
    /// every machine.
    pub max_wall_time: Duration,
    /// Findings one run may report.
    pub max_findings: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_bytes: 4 << 20,
            max_inputs: 32,
            max_operations: 20_000_000,
            max_string_bytes: 16 << 20,
            max_array_len: 1 << 20,
            max_map_len: 1 << 20,
            max_parsed_bytes: 16 << 20,
            max_call_depth: 64,
            max_wall_time: Duration::from_secs(5),
            max_findings: 1_000,
        }
    }
}

impl Limits {
    /// Replace `max_input_bytes`.
    pub fn with_max_input_bytes(mut self, bytes: usize) -> Self {
        self.max_input_bytes = bytes;
        self
    }
    /// Replace `max_operations`.
    pub fn with_max_operations(mut self, operations: u64) -> Self {
        self.max_operations = operations;
        self
    }
    /// Replace `max_wall_time`.
    pub fn with_max_wall_time(mut self, wall_time: Duration) -> Self {
        self.max_wall_time = wall_time;
        self
    }
    /// Replace `max_parsed_bytes`.
    pub fn with_max_parsed_bytes(mut self, bytes: usize) -> Self {
        self.max_parsed_bytes = bytes;
        self
    }
    /// Replace `max_findings`.
    pub fn with_max_findings(mut self, findings: usize) -> Self {
        self.max_findings = findings;
        self
    }
    /// Replace `max_string_bytes`, `max_array_len` and `max_map_len` together.
    pub fn with_max_data(mut self, string_bytes: usize, array_len: usize, map_len: usize) -> Self {
        self.max_string_bytes = string_bytes;
        self.max_array_len = array_len;
        self.max_map_len = map_len;
        self
    }
}

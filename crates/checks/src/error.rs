//! The one error type of the crate: every way a check can fail to produce findings, each a
//! stable snake_case code (`CheckError::code`) so callers can branch and put it on the wire.

use std::time::Duration;

/// Why a check could not be compiled or could not run to the end.
///
/// A check that runs and reports findings is not an error: findings are the check's verdict
/// (`crate::Finding`). An error means there is no verdict, and says which bound or which input
/// stopped it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// The check's source does not compile.
    #[error("check does not compile at line {line}, column {column}: {message}")]
    CompileFailed {
        /// 1-based line in the check's source.
        line: usize,
        /// 1-based column in the check's source.
        column: usize,
        /// What the compiler said.
        message: String,
    },
    /// A `sql-lint` check names a rule squawk does not have.
    #[error(
        "sql-lint names unknown rule `{rule}`; squawk's rule names are kebab-case, e.g. `renaming-column`"
    )]
    UnknownSqlRule {
        /// The rule as written.
        rule: String,
    },
    /// More inputs than `Limits::max_inputs`, or two inputs with one name.
    #[error("inputs refused: {reason}")]
    InputsInvalid {
        /// What is wrong with the set of inputs.
        reason: String,
    },
    /// One input is larger than `Limits::max_input_bytes`; no parser ran on it.
    #[error("input `{input}` is {bytes} bytes, over the limit of {limit}")]
    InputTooLarge {
        /// The input's name.
        input: String,
        /// Its size.
        bytes: usize,
        /// The bound.
        limit: usize,
    },
    /// One input is not UTF-8 text (or holds a NUL byte); no parser ran on it.
    #[error("input `{input}` is not UTF-8 text (first bad byte at offset {offset})")]
    InputNotText {
        /// The input's name.
        input: String,
        /// Byte offset of the first byte that is not text.
        offset: usize,
    },
    /// The parsed forms of the inputs would hold more than `Limits::max_parsed_bytes`; the
    /// script did not start.
    #[error(
        "input `{input}` is too costly to read: the parsed forms of this run's inputs would hold over {limit} bytes"
    )]
    InputTooComplex {
        /// The input being parsed when the budget ran out.
        input: String,
        /// The bound.
        limit: usize,
    },
    /// The check's script is longer, or declares more variables, than a check may.
    #[error("check script refused: {reason}")]
    ScriptTooLarge {
        /// Which limit, and the script's size against it.
        reason: String,
    },
    /// The check ran more than `Limits::max_operations` operations.
    #[error("check stopped after {limit} operations")]
    OperationsExceeded {
        /// The bound.
        limit: u64,
    },
    /// The check built a string, array or map larger than its `Limits` bound.
    #[error("check stopped: {what} over its limit")]
    DataTooLarge {
        /// Which kind of value (as the interpreter names it).
        what: String,
    },
    /// The check called functions nested deeper than `Limits::max_call_depth`.
    #[error("check stopped: calls nested deeper than {limit}")]
    CallDepthExceeded {
        /// The bound.
        limit: usize,
    },
    /// The check ran longer than `Limits::max_wall_time`, parsing, linting and script together.
    #[error("check stopped after {limit:?} of wall time")]
    WallTimeExceeded {
        /// The bound.
        limit: Duration,
    },
    /// The check reported more than `Limits::max_findings` findings.
    #[error("check stopped after reporting {limit} findings")]
    TooManyFindings {
        /// The bound.
        limit: usize,
    },
    /// The check reported a finding the runtime cannot keep (empty or overlong rule or message,
    /// a line that is not a positive number).
    #[error("check reported an invalid finding at line {line}: {reason}")]
    FindingInvalid {
        /// Line in the check's source of the call.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The machine could not start the thread a run gets (`docs/checks.md` §Bounds).
    #[error("no thread to run the check on: {message}")]
    RuntimeUnavailable {
        /// What the operating system said.
        message: String,
    },
    /// The check failed at run time for a reason of its own (a type error, an unknown function,
    /// a `throw`).
    #[error("check failed at line {line}, column {column}: {message}")]
    ScriptFailed {
        /// 1-based line in the check's source (0 when the interpreter does not know).
        line: usize,
        /// 1-based column in the check's source (0 when the interpreter does not know).
        column: usize,
        /// What the interpreter said.
        message: String,
    },
}

impl CheckError {
    /// The stable snake_case code of this failure.
    pub fn code(&self) -> &'static str {
        match self {
            Self::CompileFailed { .. } => "check_compile_failed",
            Self::UnknownSqlRule { .. } => "check_unknown_sql_rule",
            Self::InputsInvalid { .. } => "check_inputs_invalid",
            Self::InputTooLarge { .. } => "check_input_too_large",
            Self::InputNotText { .. } => "check_input_not_text",
            Self::InputTooComplex { .. } => "check_input_too_complex",
            Self::ScriptTooLarge { .. } => "check_script_too_large",
            Self::OperationsExceeded { .. } => "check_operations_exceeded",
            Self::DataTooLarge { .. } => "check_data_too_large",
            Self::CallDepthExceeded { .. } => "check_call_depth_exceeded",
            Self::WallTimeExceeded { .. } => "check_wall_time_exceeded",
            Self::TooManyFindings { .. } => "check_too_many_findings",
            Self::FindingInvalid { .. } => "check_finding_invalid",
            Self::RuntimeUnavailable { .. } => "check_runtime_unavailable",
            Self::ScriptFailed { .. } => "check_script_failed",
        }
    }
}

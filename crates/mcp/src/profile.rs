//! Server profiles (`docs/mcp.md` §1): the workflow engine, or the legacy surface for older clients.

use std::{fmt, str::FromStr};

/// What the server exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// The four workflow tools, the registry resources and the bootstrap prompt.
    #[default]
    WorkflowEngine,
    /// Legacy schema resources and prompts only; none of the workflow tools.
    Legacy,
}

impl Profile {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::WorkflowEngine => "workflow-engine",
            Profile::Legacy => "legacy",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "workflow-engine" => Ok(Profile::WorkflowEngine),
            "legacy" => Ok(Profile::Legacy),
            _ => Err(format!(
                "unknown profile {s:?}: use workflow-engine or legacy"
            )),
        }
    }
}

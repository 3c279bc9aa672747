//! Identifiers and closed vocabularies of a release, parsed once at the edge.
//!
//! Every id that can become a path segment follows the Agent Skills name rule, so a
//! substituted id is always one safe segment (`docs/registry-format.md` §3).

use std::{fmt, str::FromStr, sync::LazyLock};

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error as _};

static NAME_RULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$").expect("static regex"));

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {what}: {rule}")]
pub struct IdError {
    /// What was being parsed ("asset id", "release id", ...).
    pub what: &'static str,
    /// The rejected input.
    pub value: String,
    /// The rule it breaks, in words.
    pub rule: &'static str,
}

/// Checks the Agent Skills name rule: 1–64 of `[a-z0-9-]`, no leading, trailing or double hyphen.
///
/// Windows device names (`con`, `com1`, ...) are refused too, so that an id substituted into a
/// path template is always one portable segment.
pub(crate) fn check_name(what: &'static str, value: &str) -> Result<(), IdError> {
    if crate::path::is_device_name(value) {
        return Err(IdError {
            what,
            value: value.to_owned(),
            rule: "do not use a Windows device name (con, prn, aux, nul, com1-9, lpt1-9)",
        });
    }
    if NAME_RULE.is_match(value) && !value.contains("--") {
        Ok(())
    } else {
        Err(IdError {
            what,
            value: value.to_owned(),
            rule: "use 1-64 lowercase letters, digits and single hyphens, starting and ending \
                   with a letter or digit (the Agent Skills name rule)",
        })
    }
}

macro_rules! name_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                check_name($what, s)?;
                Ok(Self(s.to_owned()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": "^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
                    "description": concat!("A ", $what, ": 1-64 lowercase letters, digits and single hyphens.")
                })
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(D::Error::custom)
            }
        }
    };
}

name_id!(
    /// A workflow id such as `incident-review`.
    WorkflowId, "workflow id"
);
name_id!(
    /// A step id such as `setup-workspace`.
    StepId, "step id"
);
name_id!(
    /// A registry asset id such as `rimthan-guide`.
    AssetId, "asset id"
);
name_id!(
    /// A semantic validator id such as `scope-reviewer`.
    ValidatorId, "validator id"
);
name_id!(
    /// A deterministic check id such as `quotes-name-source`, unique in its workflow version.
    CheckId, "check id"
);
name_id!(
    /// A JSON Schema id such as `research-question`.
    SchemaId, "schema id"
);
name_id!(
    /// A declared artifact id such as `source-list`.
    ArtifactId, "artifact id"
);
name_id!(
    /// A channel name such as `stable`.
    ChannelName, "channel name"
);
name_id!(
    /// A role a caller's credentials grant, such as `database-owner`, that a step's approval
    /// may name.
    RoleName, "role name"
);

/// The id of the step every workflow starts with.
pub const SETUP_STEP: &str = "setup-workspace";

/// A release id such as `2026.12.0`: one safe path segment of `[0-9A-Za-z._-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReleaseId(String);

impl ReleaseId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ReleaseId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
            && !s.contains("..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError {
                what: "release id",
                value: s.to_owned(),
                rule: "use 1-64 ASCII letters, digits, '.', '_' or '-', starting and ending with \
                       a letter or digit, without '..' (for example 2026.12.0)",
            })
        }
    }
}

impl fmt::Display for ReleaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ReleaseId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ReleaseId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

/// A semantic version (`1.1.0`); build metadata is refused because it does not order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(semver::Version);

impl Version {
    /// Builds a version from its three numbers.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self(semver::Version::new(major, minor, patch))
    }

    /// The semver value.
    pub fn semver(&self) -> &semver::Version {
        &self.0
    }
}

impl FromStr for Version {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        match semver::Version::parse(s) {
            Ok(v) if v.build.is_empty() => Ok(Self(v)),
            _ => Err(IdError {
                what: "version",
                value: s.to_owned(),
                rule: "use a semantic version MAJOR.MINOR.PATCH without build metadata \
                       (for example 1.0.0)",
            }),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl schemars::JsonSchema for Version {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Version".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$",
            "description": "A semantic version such as 1.0.0."
        })
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            schemars::JsonSchema,
        )]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(IdError {
                        what: stringify!($name),
                        value: s.to_owned(),
                        rule: concat!("use one of:", $(" ", $text),+),
                    }),
                }
            }
        }
    };
}

vocabulary!(
    /// What runs a deterministic check (`docs/checks.md`).
    CheckKind {
        /// A Rhai script the workflow author wrote.
        Script = "script",
        /// squawk's PostgreSQL migration linter with the rules the check names.
        SqlLint = "sql-lint",
    }
);

vocabulary!(
    /// What a deterministic check's `error` findings do (`docs/checks.md` §Rollout): `block`
    /// sends the step to `revise`; `warn` reports them as warnings only, so a new check can ship
    /// and be watched before it is enforced.
    Enforcement {
        /// Errors send the step to revise (the default).
        Block = "block",
        /// Errors are reported as warnings and block nothing.
        Warn = "warn",
    }
);

vocabulary!(
    /// What happens when a step's sign-off or deadline expires.
    OnExpiry {
        /// The step goes back to `revise` with a finding that names the expiry.
        SendBack = "send_back",
        /// The session ends with status `expired`.
        Fail = "fail",
    }
);

#[expect(
    clippy::derivable_impls,
    reason = "the vocabulary macro's derives are fixed; Default is this one's alone"
)]
impl Default for Enforcement {
    fn default() -> Self {
        Self::Block
    }
}

impl Enforcement {
    /// Whether this is the default, which documents leave out.
    pub fn is_block(&self) -> bool {
        *self == Self::Block
    }
}

vocabulary!(
    /// A host harness the shipped workflow names (the seed's four).
    Harness {
        /// OpenAI Codex.
        Codex = "codex",
        /// Anthropic Claude Code.
        ClaudeCode = "claude-code",
        /// Claude Cowork.
        Cowork = "cowork",
        /// Buzz.
        Buzz = "buzz",
    }
);

vocabulary!(
    /// A capability a host harness declares for itself.
    HostCapability {
        /// Calls MCP tools.
        McpTools = "mcp.tools",
        /// Reads MCP resources.
        McpResources = "mcp.resources",
        /// Gets MCP prompts.
        McpPrompts = "mcp.prompts",
        /// Runs native subagents in their own context.
        NativeSubagents = "native-subagents",
        /// Restricts a subagent to declared inputs.
        ScopedInputs = "scoped-inputs",
        /// Restricts a subagent to read-only tools.
        ReadOnlyCapabilities = "read-only-capabilities",
        /// Returns structured (JSON) reports from subagents.
        StructuredReports = "structured-reports",
        /// Writes host assets into the project.
        ProjectLocalAssets = "project-local-assets",
    }
);

vocabulary!(
    /// A capability a validator subagent may use.
    ValidatorCapability {
        /// Reads files of the workspace.
        WorkspaceRead = "workspace.read",
        /// Fetches web pages.
        WebRead = "web.read",
        /// Drives a browser read-only.
        BrowserRead = "browser.read",
        /// Reads git history.
        GitRead = "git.read",
        /// Reads a database.
        DatabaseRead = "database.read",
    }
);

vocabulary!(
    /// How a host asset reaches the harness.
    DeliveryMode {
        /// Written into the project at the contract's path.
        ProjectLocal = "project-local",
        /// Loaded into the agent's context from the MCP resource.
        DynamicContext = "dynamic-context",
    }
);

vocabulary!(
    /// What a harness may do to a declared output path.
    WritePolicy {
        /// The file must not exist before the step; the step creates it.
        CreateOwned = "create-owned",
        /// The step creates the file or replaces its own earlier version.
        CreateOrReplaceOwned = "create-or-replace-owned",
        /// The step creates the file, or verifies an existing one unchanged.
        CreateOrVerifyOwned = "create-or-verify-owned",
        /// The file must already exist; the step only reads it back.
        MustExist = "must-exist",
    }
);

vocabulary!(
    /// The kind of a registry asset.
    AssetKind {
        /// A host adapter: instructions plus, from 1.1.0, a typed contract.
        HostAdapter = "host-adapter",
        /// An Agent Skills skill.
        Skill = "skill",
        /// A native subagent definition.
        Subagent = "subagent",
        /// A slash command.
        Command = "command",
    }
);

vocabulary!(
    /// The kind of a workflow step.
    StepKind {
        /// The first step: deliver host assets and attest the host.
        Setup = "setup",
        /// A step that writes declared outputs and is checked by validators.
        Work = "work",
    }
);

vocabulary!(
    /// Who holds a validator subagent to read-only under an adapter.
    ValidatorIsolation {
        /// The host itself refuses a validator's writes, whatever the participant's session
        /// allows (proved with the real host in `e2e/hosts`).
        HostEnforced = "host-enforced",
        /// Only the validator's instructions say read-only; the host does not enforce it.
        Instructed = "instructed",
    }
);

impl Default for ValidatorIsolation {
    /// What an adapter that says nothing gets: fail closed.
    fn default() -> Self {
        ValidatorIsolation::Instructed
    }
}

impl ValidatorIsolation {
    /// Whether this is the default, left out of a contract's canonical form.
    pub fn is_instructed(&self) -> bool {
        *self == ValidatorIsolation::Instructed
    }
}

vocabulary!(
    /// How the adapter runs semantic validators.
    ValidatorExecution {
        /// Each validator in its own native subagent.
        NativeSubagent = "native-subagent",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_ids_follow_the_agent_skills_name_rule() {
        for ok in ["a", "rimthan-research", "a1-b2", &"a".repeat(64)] {
            assert!(ok.parse::<AssetId>().is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "A",
            "a_b",
            "a.b",
            &"a".repeat(65),
            "é",
            "con",
            "lpt1",
        ] {
            assert!(bad.parse::<AssetId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn release_ids_are_one_safe_segment() {
        assert!("2026.12.0".parse::<ReleaseId>().is_ok());
        for bad in ["", "..", "a..b", "a/b", ".a", "a.", "a b"] {
            assert!(bad.parse::<ReleaseId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_order_semantically_and_refuse_build_metadata() {
        let a: Version = "1.10.0".parse().unwrap();
        let b: Version = "1.9.0".parse().unwrap();
        assert!(a > b);
        assert!("1.0.0+build".parse::<Version>().is_err());
        assert!("1.0".parse::<Version>().is_err());
    }

    #[test]
    fn vocabularies_round_trip_their_wire_spelling() {
        for h in Harness::ALL {
            assert_eq!(h.as_str().parse::<Harness>().unwrap(), *h);
            assert_eq!(serde_json::to_string(h).unwrap(), format!("\"{h}\""));
        }
        assert!("Codex".parse::<Harness>().is_err());
        assert_eq!(HostCapability::ALL.len(), 8);
        assert_eq!(ValidatorCapability::ALL.len(), 5);
    }
}

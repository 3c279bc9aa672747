//! Per-harness renditions of assets: generated from one source, checked against each host's
//! file format (`docs/registry-format.md` §5).
//!
//! A validator's subagent is rendered as a Codex agent TOML (read-only sandbox; Codex has no
//! per-tool allow-list) and a Claude Code agent Markdown file whose `tools` allow-list is derived
//! from the validator's capabilities. The allow-list never holds Bash, in any form: Claude Code
//! 2.1 does not confine a subagent's Bash to the patterns in its `tools` line (a validator
//! allowed `Bash(git log:*)` created a file when the session allowed Bash; `e2e/hosts` proves
//! the Bash-free renditions are refused such writes by Claude Code itself).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    frontmatter,
    ids::{AssetId, ValidatorCapability},
    model::ValidatorDoc,
};

/// The Claude Code tools that realize one validator capability read-only.
pub fn claude_tools(capability: ValidatorCapability) -> &'static [&'static str] {
    match capability {
        ValidatorCapability::WorkspaceRead => &["Read", "Grep", "Glob"],
        ValidatorCapability::WebRead => &["WebFetch", "WebSearch"],
        // No built-in tool gives these read-only (git only through Bash, which a subagent's
        // `tools` patterns do not confine); the host must supply one via MCP.
        ValidatorCapability::GitRead
        | ValidatorCapability::BrowserRead
        | ValidatorCapability::DatabaseRead => &[],
    }
}

#[derive(Serialize, Deserialize)]
struct CodexAgent {
    name: String,
    description: String,
    sandbox_mode: String,
    developer_instructions: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFrontmatter {
    name: String,
    description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<String>,
}

/// The harness-neutral subagent content: Markdown with `name` and `description`.
pub(crate) fn render_base_subagent(validator: &ValidatorDoc) -> String {
    let fm = AgentFrontmatter {
        name: validator.id.to_string(),
        description: validator.description.clone(),
        tools: None,
    };
    frontmatter::render(&fm, &validator.instructions)
}

/// `.codex/agents/<id>.toml` for a validator's subagent.
pub(crate) fn render_codex_subagent(validator: &ValidatorDoc) -> String {
    toml::to_string(&CodexAgent {
        name: validator.id.to_string(),
        description: validator.description.clone(),
        sandbox_mode: "read-only".into(),
        developer_instructions: validator.instructions.trim().to_owned() + "\n",
    })
    .expect("a flat struct of strings serializes to TOML")
}

/// `.claude/agents/<id>.md` for a validator's subagent.
pub(crate) fn render_claude_subagent(validator: &ValidatorDoc) -> String {
    let tools: Vec<&str> = validator
        .capabilities
        .iter()
        .flat_map(|c| claude_tools(*c).iter().copied())
        .collect();
    let fm = AgentFrontmatter {
        name: validator.id.to_string(),
        description: validator.description.clone(),
        tools: Some(tools.join(", ")),
    };
    frontmatter::render(&fm, &validator.instructions)
}

fn text(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// Checks an Agent Skills `SKILL.md`: frontmatter `name` equal to the id, a 1–1024 character
/// `description`, and no keys outside the standard.
pub(crate) fn check_skill(id: &AssetId, bytes: &[u8]) -> Result<(), String> {
    const ALLOWED: &[&str] = &[
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
    ];
    let (fm, _) = frontmatter::parse::<BTreeMap<String, serde_norway::Value>>(text(bytes)?)?;
    if let Some(key) = fm.keys().find(|k| !ALLOWED.contains(&k.as_str())) {
        return Err(format!(
            "frontmatter key {key:?} is not part of the Agent Skills standard"
        ));
    }
    let name = fm.get("name").and_then(|v| v.as_str());
    if name != Some(id.as_str()) {
        return Err(format!(
            "frontmatter name {name:?} must equal the asset id {id:?}"
        ));
    }
    match fm.get("description").and_then(|v| v.as_str()) {
        Some(d) if (1..=1024).contains(&d.chars().count()) => Ok(()),
        _ => Err("frontmatter description must be 1-1024 characters".into()),
    }
}

/// Checks a Codex agent TOML: `name` equal to the id, non-blank `description` and
/// `developer_instructions`, and `sandbox_mode = "read-only"`.
pub(crate) fn check_codex_subagent(id: &AssetId, bytes: &[u8]) -> Result<(), String> {
    let agent: CodexAgent = toml::from_str(text(bytes)?).map_err(|e| format!("TOML: {e}"))?;
    if agent.name != id.as_str() {
        return Err(format!(
            "name {:?} must equal the asset id {id:?}",
            agent.name
        ));
    }
    if agent.description.trim().is_empty() || agent.developer_instructions.trim().is_empty() {
        return Err("description and developer_instructions must not be blank".into());
    }
    if agent.sandbox_mode != "read-only" {
        return Err(format!(
            "sandbox_mode is {:?}; validators run read-only",
            agent.sandbox_mode
        ));
    }
    Ok(())
}

/// Checks a Claude Code agent: frontmatter `name` equal to the id, a `description`, and a
/// `tools` allow-list of known read-only tools (no writing tool, no unrestricted Bash).
pub(crate) fn check_claude_subagent(id: &AssetId, bytes: &[u8]) -> Result<(), String> {
    let (fm, body) = frontmatter::parse::<AgentFrontmatter>(text(bytes)?)?;
    if fm.name != id.as_str() {
        return Err(format!(
            "frontmatter name {:?} must equal the asset id {id:?}",
            fm.name
        ));
    }
    if fm.description.trim().is_empty() || body.trim().is_empty() {
        return Err("description and the system prompt body must not be blank".into());
    }
    // An allow-list of known read-only tools only: an empty or unknown entry could mean "all
    // tools" or a writing one to some host version, so it fails closed.
    let tools = fm
        .tools
        .ok_or("a validator subagent needs a read-only tools allow-list")?;
    let allowed: Vec<&str> = ValidatorCapability::ALL
        .iter()
        .flat_map(|c| claude_tools(*c).iter().copied())
        .collect();
    let listed: Vec<&str> = tools.split(',').map(str::trim).collect();
    if listed.iter().all(|t| t.is_empty()) {
        return Err("the tools allow-list is empty; list the read-only tools it needs".into());
    }
    match listed.iter().find(|t| !allowed.contains(t)) {
        Some(t) => Err(format!(
            "tool {t:?} is not a known read-only tool; validators are read-only"
        )),
        None => Ok(()),
    }
}

/// Checks a Claude Code command: frontmatter with a non-blank `description`.
pub(crate) fn check_claude_command(bytes: &[u8]) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Command {
        description: Option<String>,
    }
    let (fm, _) = frontmatter::parse::<Command>(text(bytes)?)?;
    match fm.description {
        Some(d) if !d.trim().is_empty() => Ok(()),
        _ => Err("frontmatter description must not be blank".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validator(capabilities: Vec<ValidatorCapability>) -> ValidatorDoc {
        ValidatorDoc {
            id: "scope-reviewer".parse().unwrap(),
            version: "1.0.0".parse().unwrap(),
            title: "Scope reviewer".into(),
            description: "Checks: the question's scope \"quoted\".".into(),
            instructions: "Read the question.\n\nReturn one JSON report.\n".into(),
            capabilities,
            inputs: vec![],
            report_schema: crate::model::SchemaRef {
                id: "validator-report".parse().unwrap(),
                version: "1.0.0".parse().unwrap(),
            },
        }
    }

    fn asset_id() -> AssetId {
        "scope-reviewer".parse().unwrap()
    }

    #[test]
    fn codex_rendition_parses_as_a_read_only_agent_toml() {
        let v = validator(vec![ValidatorCapability::WorkspaceRead]);
        let toml_text = render_codex_subagent(&v);
        let parsed: toml::Table = toml::from_str(&toml_text).unwrap();
        assert_eq!(parsed["sandbox_mode"].as_str(), Some("read-only"));
        assert_eq!(parsed["name"].as_str(), Some("scope-reviewer"));
        assert!(
            parsed["developer_instructions"]
                .as_str()
                .unwrap()
                .contains("JSON report")
        );
        check_codex_subagent(&asset_id(), toml_text.as_bytes()).unwrap();
    }

    #[test]
    fn claude_rendition_allows_only_read_only_tools() {
        let v = validator(vec![
            ValidatorCapability::WorkspaceRead,
            ValidatorCapability::GitRead,
        ]);
        let md = render_claude_subagent(&v);
        let (fm, body) = frontmatter::parse::<AgentFrontmatter>(&md).unwrap();
        assert_eq!(fm.description, v.description);
        assert!(body.contains("Return one JSON report."));
        let tools = fm.tools.unwrap();
        assert_eq!(
            tools, "Read, Grep, Glob",
            "git.read has no read-only Claude Code tool"
        );
        check_claude_subagent(&asset_id(), md.as_bytes()).unwrap();
        let writable = md.replace("tools: ", "tools: Write, ");
        assert!(check_claude_subagent(&asset_id(), writable.as_bytes()).is_err());
        let bash = md.replace("tools: ", "tools: Bash, ");
        assert!(check_claude_subagent(&asset_id(), bash.as_bytes()).is_err());
        let rm = md.replace("tools: ", "tools: Bash(rm:*), ");
        assert!(check_claude_subagent(&asset_id(), rm.as_bytes()).is_err());
        let git = md.replace("tools: ", "tools: Bash(git log:*), ");
        assert!(check_claude_subagent(&asset_id(), git.as_bytes()).is_err());
        let (head, rest) = md.split_once("tools: ").unwrap();
        let empty = format!("{head}tools: ''\n{}", rest.split_once('\n').unwrap().1);
        assert!(check_claude_subagent(&asset_id(), empty.as_bytes()).is_err());
    }

    #[test]
    fn skills_need_a_matching_name_and_standard_keys() {
        let id: AssetId = "rimthan-guide".parse().unwrap();
        let ok = b"---\nname: rimthan-guide\ndescription: Use it.\n---\nbody\n";
        check_skill(&id, ok).unwrap();
        let wrong = b"---\nname: other\ndescription: Use it.\n---\nbody\n";
        assert!(check_skill(&id, wrong).is_err());
        let extra = b"---\nname: rimthan-guide\ndescription: x\nversion: 1\n---\n";
        assert!(check_skill(&id, extra).is_err());
    }
}

//! Prompts: the workflow-engine profile lists exactly one, `rimthan.start_workflow`, whose text
//! is the bootstrap text (`docs/mcp.md` §4, see `bootstrap.rs`); the legacy profile has its own.

use rmcp::model::{GetPromptResult, ListPromptsResult, Prompt, PromptMessage, Role};
use serde_json::json;

use crate::profile::Profile;

/// The workflow-engine profile's one prompt.
pub const START_PROMPT: &str = "rimthan.start_workflow";
/// The legacy profile's prompt.
pub const LEGACY_PROMPT: &str = "rimthan.legacy_schemas";

const LEGACY_TEXT: &str = "This rimthan server runs the legacy profile: it serves the current \
schemas of the active release as rimthan://schemas/{schema_name} resources and no workflow \
tools. List the resources to find a schema, read it, and validate documents against it. To run \
a workflow step by step, connect to a server with the workflow-engine profile.";

/// `prompts/list`.
/// The name of a prompt this server has, as a constant; none for any other name.
pub(crate) fn known(name: &str) -> Option<&'static str> {
    [START_PROMPT, LEGACY_PROMPT]
        .into_iter()
        .find(|known| *known == name)
}

pub(crate) fn list(profile: Profile) -> ListPromptsResult {
    let prompt = match profile {
        Profile::WorkflowEngine => Prompt::new(
            START_PROMPT,
            Some(
                "How to start and run one of the organization's workflows through this server, \
                 and which workflows the active release offers",
            ),
            None,
        ),
        Profile::Legacy => Prompt::new(
            LEGACY_PROMPT,
            Some("How to use the legacy schema resources"),
            None,
        ),
    };
    ListPromptsResult::with_all_items(vec![prompt])
}

/// `prompts/get`; `entrypoint` is the bootstrap text of the active release.
pub(crate) fn get(
    profile: Profile,
    name: &str,
    entrypoint: &str,
) -> Result<GetPromptResult, rmcp::ErrorData> {
    let text = match (profile, name) {
        (Profile::WorkflowEngine, START_PROMPT) => entrypoint,
        (Profile::Legacy, LEGACY_PROMPT) => LEGACY_TEXT,
        _ => {
            return Err(rmcp::ErrorData::invalid_params(
                format!("no prompt named {name:?}"),
                Some(json!({"name": name})),
            ));
        }
    };
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        text,
    )]))
}

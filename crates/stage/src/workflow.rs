//! Which workflow a run drives and what its definition says: the adapter pinned for the
//! harness, the steps in order, and the capabilities its validators need. All of it is read
//! from the server's own resources, so any verified workflow can be staged.

use std::collections::BTreeSet;

use rimthan_registry::{Harness, ReleaseId, ValidatorCapability, Version, WorkflowId, uri};
use serde_json::{Value, json};

use crate::{
    StageError,
    client::{Client, read_json},
};

/// A workflow definition the active release lists.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    release: ReleaseId,
    id: String,
    version: Version,
    uri: String,
}

/// Parses `rimthan://registry/{release}/workflows/{id}/{version}/definition`.
fn parse_definition_uri(text: &str) -> Option<Offered> {
    let rest = text.strip_prefix("rimthan://registry/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [release, "workflows", id, version, "definition"] => Some(Offered {
            release: release.parse().ok()?,
            id: (*id).to_owned(),
            version: version.parse().ok()?,
            uri: text.to_owned(),
        }),
        _ => None,
    }
}

/// The workflows of the active release, from `resources/list`, sorted by id then version.
async fn offered(client: &Client) -> Result<Vec<Offered>, StageError> {
    let resources = client
        .list_all_resources()
        .await
        .map_err(|e| StageError::Protocol {
            tool: "resources/list".into(),
            detail: e.to_string(),
        })?;
    let mut found: Vec<Offered> = resources
        .iter()
        .filter_map(|r| parse_definition_uri(&r.uri))
        .collect();
    found.sort_by(|a, b| (&a.id, &a.version).cmp(&(&b.id, &b.version)));
    Ok(found)
}

/// What to start: the id and version to ask for, and the definition when the release has it.
#[derive(Debug)]
pub(crate) struct Chosen {
    pub(crate) id: String,
    pub(crate) version: Option<Version>,
    pub(crate) definition: Option<Definition>,
}

/// Picks the workflow to start. Without `wanted`, the release's only workflow; an id or version
/// the release lacks is still asked for, so the operator sees the server's own code for it.
pub(crate) async fn choose(
    client: &Client,
    wanted: Option<&WorkflowId>,
    version: Option<&Version>,
) -> Result<Chosen, StageError> {
    let all = offered(client).await?;
    let id = match wanted {
        Some(id) => id.to_string(),
        None => {
            let ids: BTreeSet<&str> = all.iter().map(|o| o.id.as_str()).collect();
            match ids.into_iter().collect::<Vec<_>>().as_slice() {
                [one] => (*one).to_owned(),
                _ => return Err(StageError::WorkflowChoice(listing(&all))),
            }
        }
    };
    let pick = all
        .iter()
        .filter(|o| o.id == id && version.is_none_or(|v| &o.version == v))
        .max_by(|a, b| a.version.cmp(&b.version));
    let definition = match pick {
        Some(o) => Some(definition(client, &o.uri).await?),
        None => None,
    };
    Ok(Chosen {
        id,
        version: version.cloned(),
        definition,
    })
}

fn listing(all: &[Offered]) -> String {
    if all.is_empty() {
        return "the active release offers no workflow".into();
    }
    let names: Vec<String> = all
        .iter()
        .map(|o| format!("{}@{}", o.id, o.version))
        .collect();
    format!(
        "the active release offers several workflows; choose one with --workflow: {}",
        names.join(", ")
    )
}

/// A workflow definition as served.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    release: ReleaseId,
    id: String,
    version: Version,
    doc: Value,
}

/// Reads the definition at `uri` (from `resources/list` or an active payload's `workflow.uri`).
pub(crate) async fn definition(client: &Client, uri: &str) -> Result<Definition, StageError> {
    let offered = parse_definition_uri(uri).ok_or_else(|| StageError::Protocol {
        tool: "resources/read".into(),
        detail: format!("{uri} is not a workflow definition URI"),
    })?;
    Ok(Definition {
        doc: read_json(client, uri).await?,
        release: offered.release,
        id: offered.id,
        version: offered.version,
    })
}

impl Definition {
    /// The adapter the workflow pins for `harness` (`{"id", "version"}`), if any.
    pub(crate) fn adapter_for(&self, harness: Harness) -> Option<Value> {
        let pin = self.doc["harnesses"].get(harness.as_str())?;
        Some(json!({"id": pin["id"], "version": pin["version"]}))
    }

    /// The step ids in order.
    fn step_ids(&self) -> Vec<&str> {
        self.doc["steps"]
            .as_array()
            .map(|steps| steps.iter().filter_map(|s| s["id"].as_str()).collect())
            .unwrap_or_default()
    }

    /// `(position, total)` of a step, counting from 1.
    pub(crate) fn position(&self, step: &str) -> (usize, usize) {
        let ids = self.step_ids();
        let index = ids.iter().position(|s| *s == step).map_or(0, |i| i + 1);
        (index, ids.len())
    }

    /// Every capability a validator of this workflow may use: what a host that can run the
    /// whole workflow declares.
    pub(crate) async fn validator_capabilities(
        &self,
        client: &Client,
    ) -> Result<BTreeSet<ValidatorCapability>, StageError> {
        let mut capabilities = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for step in self.step_ids() {
            let doc = read_json(
                client,
                &uri::step(&self.release, &self.id, &self.version, &step),
            )
            .await?;
            for validator in doc["validators"].as_array().into_iter().flatten() {
                let (Some(id), Some(version)) =
                    (validator["id"].as_str(), validator["version"].as_str())
                else {
                    continue;
                };
                if !seen.insert((id.to_owned(), version.to_owned())) {
                    continue;
                }
                let version: Version = version.parse().map_err(|e| StageError::Protocol {
                    tool: "resources/read".into(),
                    detail: format!("validator {id}: {e}"),
                })?;
                let doc = read_json(client, &uri::validator(&self.release, &id, &version)).await?;
                for capability in doc["capabilities"].as_array().into_iter().flatten() {
                    if let Ok(c) = serde_json::from_value(capability.clone()) {
                        capabilities.insert(c);
                    }
                }
            }
        }
        Ok(capabilities)
    }
}

//! `rimthan://` resource URIs, built deterministically from release identity (`docs/mcp.md` §2).
//!
//! The engine puts these URIs in its payloads and the MCP server serves them, so both build
//! them here. A per-harness rendition is addressed by the asset's content URI plus
//! `?harness=<name>`; the base content has no query.

use std::fmt::Display;

use crate::{
    ids::{AssetKind, Harness, ReleaseId, Version},
    model::Entry,
};

/// The bootstrap entrypoint resource.
pub const BOOTSTRAP_URI: &str = "rimthan://bootstrap/agent-entrypoint";

/// `rimthan://registry/{release}/summary`
pub fn summary(release: &ReleaseId) -> String {
    format!("rimthan://registry/{release}/summary")
}

/// `rimthan://registry/{release}/manifest`
pub fn manifest(release: &ReleaseId) -> String {
    format!("rimthan://registry/{release}/manifest")
}

/// `rimthan://registry/{release}/workflows/{workflow_id}/{version}/definition`
pub fn workflow(release: &ReleaseId, id: &impl Display, version: &Version) -> String {
    format!("rimthan://registry/{release}/workflows/{id}/{version}/definition")
}

/// `rimthan://registry/{release}/workflows/{workflow_id}/{version}/steps/{step_id}`
pub fn step(
    release: &ReleaseId,
    workflow: &impl Display,
    version: &Version,
    step: &impl Display,
) -> String {
    format!("rimthan://registry/{release}/workflows/{workflow}/{version}/steps/{step}")
}

/// `rimthan://registry/{release}/workflows/{workflow_id}/{version}/checks/{check_id}`
pub fn check(
    release: &ReleaseId,
    workflow: &impl Display,
    version: &Version,
    check: &impl Display,
) -> String {
    format!("rimthan://registry/{release}/workflows/{workflow}/{version}/checks/{check}")
}

/// `rimthan://registry/{release}/assets/{kind}/{asset_id}/{version}/content[?harness=…]`
pub fn asset(
    release: &ReleaseId,
    kind: AssetKind,
    id: &impl Display,
    version: &Version,
    rendition: Option<Harness>,
) -> String {
    let base = format!("rimthan://registry/{release}/assets/{kind}/{id}/{version}/content");
    match rendition {
        Some(h) => format!("{base}?harness={h}"),
        None => base,
    }
}

/// `rimthan://registry/{release}/validators/{validator_id}/{version}`
pub fn validator(release: &ReleaseId, id: &impl Display, version: &Version) -> String {
    format!("rimthan://registry/{release}/validators/{id}/{version}")
}

/// `rimthan://registry/{release}/schemas/{schema_id}/{version}`
pub fn schema(release: &ReleaseId, id: &impl Display, version: &Version) -> String {
    format!("rimthan://registry/{release}/schemas/{id}/{version}")
}

/// `rimthan://registry/{release}/bootstrap/agent-entrypoint`: a release's own bootstrap
/// paragraph as signed, before the server appends its workflow list.
pub fn bootstrap(release: &ReleaseId) -> String {
    format!(
        "rimthan://registry/{release}/bootstrap/{}",
        crate::BOOTSTRAP_ID
    )
}

/// The URI that serves a manifest entry's bytes.
pub fn entry(release: &ReleaseId, entry: &Entry) -> String {
    use crate::model::EntryKind;
    match entry.kind {
        EntryKind::Workflow => workflow(release, &entry.id, &entry.version),
        EntryKind::Step => {
            let wf = entry
                .workflow
                .as_ref()
                .expect("verified steps name their workflow");
            step(release, wf, &entry.version, &entry.id)
        }
        EntryKind::Check => {
            let wf = entry
                .workflow
                .as_ref()
                .expect("verified checks name their workflow");
            check(release, wf, &entry.version, &entry.id)
        }
        EntryKind::Asset => {
            let kind = entry.asset_kind.expect("verified assets carry their kind");
            asset(release, kind, &entry.id, &entry.version, entry.rendition)
        }
        EntryKind::Validator => validator(release, &entry.id, &entry.version),
        EntryKind::Schema => schema(release, &entry.id, &entry.version),
        EntryKind::Bootstrap => bootstrap(release),
    }
}

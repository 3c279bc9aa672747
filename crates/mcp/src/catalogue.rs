//! The immutable resource catalogue (`docs/mcp.md` §2): URIs built deterministically from the verified
//! registry, listed sorted and paginated, and read from the release each URI names, whatever
//! the active channel says now.

use std::{
    collections::BTreeMap,
    sync::{Arc, PoisonError, RwLock},
};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use rimthan_registry::{
    EntryKind, MEDIA_JSON, ReleaseId, TrustAnchor, VerifiedRegistry, VerifiedRelease,
    to_canonical_bytes, uri,
};
use rmcp::model::{
    CacheScope, ListResourceTemplatesResult, ListResourcesResult, MetaObject, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate,
};
use serde_json::{Value, json};

use crate::profile::Profile;

/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 50;
/// Cache lifetime of release-pinned content: it never changes.
pub const TTL_IMMUTABLE_MS: u64 = 24 * 60 * 60 * 1000;
/// Cache lifetime of what moves with channels or deployments (lists, summary, bootstrap).
pub const TTL_MOVING_MS: u64 = 60 * 1000;
/// `_meta` key marking private cache scope for clients of the older revision.
pub const META_CACHE_SCOPE: &str = "rimthan/cache-scope";

fn meta(value: Value) -> MetaObject {
    MetaObject(rmcp::model::object(value))
}

/// One concrete resource: its listing and how to read it.
struct Item {
    uri: String,
    name: String,
    mime: String,
    size: usize,
    meta: Value,
}

/// The summary resource's JSON.
fn summary(registry: &VerifiedRegistry, release: &VerifiedRelease, profile: Profile) -> Vec<u8> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &release.manifest().entries {
        let kind = match entry.kind {
            EntryKind::Workflow => "workflow",
            EntryKind::Step => "step",
            EntryKind::Asset => "asset",
            EntryKind::Validator => "validator",
            EntryKind::Schema => "schema",
            EntryKind::Bootstrap => "bootstrap",
            EntryKind::Check => "check",
        };
        *counts.entry(kind).or_default() += 1;
    }
    let value = json!({
        "release": release.id(),
        "profile": profile.as_str(),
        "channels": registry.channels_of(release.id()),
        "entry_counts": counts,
        "manifest_sha256": release.manifest_sha256().to_string(),
        "signing_key_id": release.signing_key_id().as_str(),
        "trust": match release.trust_anchor() {
            TrustAnchor::PinnedDigest => "pinned-manifest-digest",
            TrustAnchor::Signature => "signature",
        },
        "server": {"name": rimthan_engine::SERVER_NAME, "version": env!("CARGO_PKG_VERSION")},
    });
    to_canonical_bytes(&value).expect("summary serializes")
}

fn content_meta(release: &VerifiedRelease, sha256: String, immutable: bool) -> Value {
    json!({
        META_CACHE_SCOPE: "private",
        "rimthan/sha256": sha256,
        "rimthan/release": release.id(),
        "rimthan/immutable": immutable,
    })
}

/// Every concrete resource of one release, workflow-engine profile.
fn release_items(
    registry: &VerifiedRegistry,
    release: &VerifiedRelease,
    profile: Profile,
) -> Vec<Item> {
    let id = release.id();
    let summary_bytes = summary(registry, release, profile);
    let mut items = vec![
        Item {
            uri: uri::summary(id),
            name: format!("release {id} summary"),
            mime: MEDIA_JSON.into(),
            size: summary_bytes.len(),
            meta: content_meta(
                release,
                rimthan_registry::Sha256Digest::of(&summary_bytes).to_string(),
                false,
            ),
        },
        Item {
            uri: uri::manifest(id),
            name: format!("release {id} manifest"),
            mime: MEDIA_JSON.into(),
            size: release.manifest_bytes().len(),
            meta: content_meta(release, release.manifest_sha256().to_string(), true),
        },
    ];
    for entry in &release.manifest().entries {
        items.push(Item {
            uri: uri::entry(id, entry),
            name: entry.label(),
            mime: entry.media_type.clone(),
            size: entry.bytes as usize,
            meta: content_meta(release, entry.sha256.to_string(), true),
        });
    }
    items
}

/// Legacy profile: `rimthan://schemas/{schema_name}`, the highest version of each schema.
fn legacy_items(release: &VerifiedRelease) -> Vec<Item> {
    let mut highest: BTreeMap<&str, &rimthan_registry::Schema> = BTreeMap::new();
    for schema in release.schemas() {
        highest.insert(schema.entry().id.as_str(), schema);
    }
    highest
        .into_iter()
        .map(|(name, schema)| Item {
            uri: format!("rimthan://schemas/{name}"),
            name: format!("schema {name}"),
            mime: MEDIA_JSON.into(),
            size: schema.entry().bytes as usize,
            meta: content_meta(release, schema.entry().sha256.to_string(), false),
        })
        .collect()
}

/// The bootstrap entrypoint, whose text (`entrypoint`) moves with the active release.
fn bootstrap_item(entrypoint: &str) -> Item {
    Item {
        uri: uri::BOOTSTRAP_URI.into(),
        name: "agent entrypoint".into(),
        mime: "text/markdown".into(),
        size: entrypoint.len(),
        meta: json!({META_CACHE_SCOPE: "private", "rimthan/immutable": false}),
    }
}

/// Every resource `resources/list` names for the active release (plus the bootstrap, whose text
/// is `entrypoint`), sorted by URI.
fn resources(
    registry: &VerifiedRegistry,
    active: &VerifiedRelease,
    entrypoint: &str,
    profile: Profile,
) -> Vec<Resource> {
    let mut items = match profile {
        Profile::WorkflowEngine => {
            let mut items = release_items(registry, active, profile);
            items.push(bootstrap_item(entrypoint));
            items
        }
        Profile::Legacy => legacy_items(active),
    };
    items.sort_by(|a, b| a.uri.cmp(&b.uri));
    items
        .into_iter()
        .map(|i| {
            Resource::new(i.uri, i.name)
                .with_mime_type(i.mime)
                .with_size(i.size as u64)
                .with_meta(meta(i.meta))
        })
        .collect()
}

/// The sorted listing, kept for the registry snapshot it was built from. What it lists depends
/// only on the snapshot (its active release and that release's bootstrap text) and on the
/// server's profile, fixed for its life; a reload makes a new snapshot, and the next list builds
/// the listing again. One listing is kept, the size of one release's manifest.
#[derive(Debug, Default, Clone)]
pub(crate) struct Listings {
    kept: Arc<RwLock<Option<KeptListing>>>,
}

/// A listing and the snapshot it was built from.
type KeptListing = (Arc<VerifiedRegistry>, Arc<[Resource]>);

impl Listings {
    /// `resources/list` of `registry`, whose active release is `active`: the page after
    /// `cursor`, the last URI of the previous page, so pages stay consistent when a channel moves
    /// between calls.
    pub(crate) fn list(
        &self,
        registry: &Arc<VerifiedRegistry>,
        active: &VerifiedRelease,
        entrypoint: &str,
        profile: Profile,
        cursor: Option<&str>,
    ) -> Result<ListResourcesResult, rmcp::ErrorData> {
        let after = match cursor {
            None => None,
            Some(c) => Some(
                URL_SAFE_NO_PAD
                    .decode(c)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| {
                        rmcp::ErrorData::invalid_params(
                            "invalid cursor: pass the nextCursor of the previous page, or none",
                            None,
                        )
                    })?,
            ),
        };
        let all = self.sorted(registry, || {
            resources(registry, active, entrypoint, profile)
        });
        let from = after.map_or(0, |a| all.partition_point(|r| r.uri.as_str() <= a.as_str()));
        let rest = &all[from..];
        let page = rest[..rest.len().min(PAGE_SIZE)].to_vec();
        let next = (rest.len() > PAGE_SIZE)
            .then(|| URL_SAFE_NO_PAD.encode(page.last().expect("a full page").uri.as_bytes()));
        let mut result = ListResourcesResult::with_all_items(page)
            .with_ttl_ms(TTL_MOVING_MS)
            .with_cache_scope(CacheScope::Private);
        result.next_cursor = next;
        Ok(result)
    }

    fn sorted(
        &self,
        registry: &Arc<VerifiedRegistry>,
        build: impl FnOnce() -> Vec<Resource>,
    ) -> Arc<[Resource]> {
        if let Some((kept_for, all)) = &*self.kept.read().unwrap_or_else(PoisonError::into_inner)
            && Arc::ptr_eq(kept_for, registry)
        {
            return all.clone();
        }
        let all: Arc<[Resource]> = build().into();
        *self.kept.write().unwrap_or_else(PoisonError::into_inner) =
            Some((registry.clone(), all.clone()));
        all
    }
}

/// `resources/templates/list`.
pub(crate) fn templates(profile: Profile) -> ListResourceTemplatesResult {
    let release = "rimthan://registry/{release}";
    let forms: &[(&str, String, &str, &str)] = match profile {
        Profile::WorkflowEngine => &[
            (
                "workflow-definition",
                format!("{release}/workflows/{{workflow_id}}/{{version}}/definition"),
                MEDIA_JSON,
                "A workflow definition of a release.",
            ),
            (
                "workflow-step",
                format!("{release}/workflows/{{workflow_id}}/{{version}}/steps/{{step_id}}"),
                MEDIA_JSON,
                "One step of a workflow, with its instructions.",
            ),
            (
                "workflow-check",
                format!("{release}/workflows/{{workflow_id}}/{{version}}/checks/{{check_id}}"),
                MEDIA_JSON,
                "A deterministic check the server runs on a step's outputs: what it reads and its rules.",
            ),
            (
                "workflow-asset-content",
                format!("{release}/assets/{{kind}}/{{asset_id}}/{{version}}/content{{?harness}}"),
                "text/markdown",
                "The exact bytes of a registry asset; ?harness= selects a per-harness rendition.",
            ),
            (
                "validator-definition",
                format!("{release}/validators/{{validator_id}}/{{version}}"),
                MEDIA_JSON,
                "A semantic validator and its subagent instructions.",
            ),
            (
                "workflow-versioned-schema",
                format!("{release}/schemas/{{schema_id}}/{{version}}"),
                MEDIA_JSON,
                "A JSON Schema (draft 2020-12) of a release.",
            ),
        ],
        Profile::Legacy => &[(
            "legacy-schema",
            "rimthan://schemas/{schema_name}".to_owned(),
            MEDIA_JSON,
            "The highest version of a schema in the active release.",
        )],
    };
    let items = forms
        .iter()
        .map(|(name, template, mime, description)| {
            ResourceTemplate::new(template.clone(), *name)
                .with_description(*description)
                .with_mime_type(*mime)
                .with_meta(meta(json!({META_CACHE_SCOPE: "private"})))
        })
        .collect();
    ListResourceTemplatesResult::with_all_items(items)
        .with_ttl_ms(TTL_IMMUTABLE_MS)
        .with_cache_scope(CacheScope::Private)
}

fn contents(uri: &str, mime: &str, bytes: &[u8], meta_value: Value) -> ResourceContents {
    let contents = match std::str::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(text, uri),
        Err(_) => {
            ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(bytes), uri)
        }
    };
    contents.with_mime_type(mime).with_meta(meta(meta_value))
}

/// The longest resource URI read: every URI this server serves is far shorter, and a longer one
/// is refused before any lookup, without being echoed.
pub const MAX_URI_BYTES: usize = 2048;

fn not_found(uri: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::resource_not_found(
        format!("resource {uri} is not served here"),
        Some(json!({"uri": uri})),
    )
}

/// `resources/read`, routed to the release the URI names; the bootstrap's text is `entrypoint`.
pub(crate) fn read(
    registry: &VerifiedRegistry,
    active: &VerifiedRelease,
    entrypoint: &str,
    profile: Profile,
    requested: &str,
) -> Result<ReadResourceResult, rmcp::ErrorData> {
    if requested.len() > MAX_URI_BYTES {
        return Err(rmcp::ErrorData::invalid_params(
            format!(
                "a resource URI of {} bytes; no URI served here is longer than {MAX_URI_BYTES}",
                requested.len()
            ),
            None,
        ));
    }
    let private =
        |r: ReadResourceResult, ttl| r.with_ttl_ms(ttl).with_cache_scope(CacheScope::Private);
    if profile == Profile::Legacy {
        let item = legacy_items(active)
            .into_iter()
            .find(|i| i.uri == requested)
            .ok_or_else(|| not_found(requested))?;
        let name = requested.trim_start_matches("rimthan://schemas/");
        let schema = active
            .schemas()
            .filter(|s| s.entry().id == name)
            .last()
            .expect("listed");
        let bytes = active
            .content(&schema.entry().path)
            .expect("verified content");
        return Ok(private(
            ReadResourceResult::new(vec![contents(requested, &item.mime, bytes, item.meta)]),
            TTL_MOVING_MS,
        ));
    }
    if requested == uri::BOOTSTRAP_URI {
        let item = bootstrap_item(entrypoint);
        let text = entrypoint.as_bytes();
        return Ok(private(
            ReadResourceResult::new(vec![contents(requested, &item.mime, text, item.meta)]),
            TTL_MOVING_MS,
        ));
    }
    let release_id = requested
        .strip_prefix("rimthan://registry/")
        .and_then(|rest| rest.split('/').next())
        .and_then(|id| id.parse::<ReleaseId>().ok())
        .ok_or_else(|| not_found(requested))?;
    let release = registry
        .release(&release_id)
        .ok_or_else(|| not_found(requested))?;
    if requested == uri::summary(&release_id) {
        let bytes = summary(registry, release, profile);
        let sha = rimthan_registry::Sha256Digest::of(&bytes).to_string();
        let meta_value = content_meta(release, sha, false);
        return Ok(private(
            ReadResourceResult::new(vec![contents(requested, MEDIA_JSON, &bytes, meta_value)]),
            TTL_MOVING_MS,
        ));
    }
    if requested == uri::manifest(&release_id) {
        let meta_value = content_meta(release, release.manifest_sha256().to_string(), true);
        let bytes = release.manifest_bytes();
        return Ok(private(
            ReadResourceResult::new(vec![contents(requested, MEDIA_JSON, bytes, meta_value)]),
            TTL_IMMUTABLE_MS,
        ));
    }
    let entry = release
        .manifest()
        .entries
        .iter()
        .find(|e| uri::entry(&release_id, e) == requested)
        .ok_or_else(|| not_found(requested))?;
    let bytes = release.content(&entry.path).expect("verified content");
    let meta_value = content_meta(release, entry.sha256.to_string(), true);
    Ok(private(
        ReadResourceResult::new(vec![contents(
            requested,
            &entry.media_type,
            bytes,
            meta_value,
        )]),
        TTL_IMMUTABLE_MS,
    ))
}

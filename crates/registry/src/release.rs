//! The verified release model: what the engine and the MCP server serve from.
//!
//! [`VerifiedRelease`] and [`VerifiedRegistry`] have private fields and no public constructor;
//! the only way to obtain one is [`crate::verify`], so holding one proves every digest, the
//! signature (or the pinned manifest digest) and every structural rule were checked.

use std::{collections::BTreeMap, sync::Arc};

use crate::{
    digest::Sha256Digest,
    ids::{
        AssetId, AssetKind, ChannelName, Harness, ReleaseId, SchemaId, ValidatorId, Version,
        WorkflowId,
    },
    model::{
        ChannelsFile, CheckDoc, Entry, EntryKind, Manifest, StepDoc, ValidatorDoc, WorkflowDoc,
    },
    signature::KeyId,
};

/// A verified workflow with its ordered steps.
#[derive(Debug)]
pub struct Workflow {
    pub(crate) doc: WorkflowDoc,
    pub(crate) entry: Entry,
    pub(crate) steps: Vec<Step>,
}

impl Workflow {
    /// The definition document.
    pub fn doc(&self) -> &WorkflowDoc {
        &self.doc
    }
    /// The manifest entry of the definition.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
    /// Steps in order; the first is always `setup-workspace`.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.doc.id.as_str() == id)
    }
}

/// A verified step.
#[derive(Debug)]
pub struct Step {
    pub(crate) doc: StepDoc,
    pub(crate) entry: Entry,
    pub(crate) checks: Vec<StepCheck>,
}

impl Step {
    /// The step document.
    pub fn doc(&self) -> &StepDoc {
        &self.doc
    }
    /// Its manifest entry.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
    /// Its deterministic checks, compiled, in the order the step lists them.
    pub fn checks(&self) -> &[StepCheck] {
        &self.checks
    }
}

/// A verified deterministic check, compiled once when its release was verified.
#[derive(Debug)]
pub struct StepCheck {
    pub(crate) doc: CheckDoc,
    pub(crate) entry: Entry,
    pub(crate) compiled: Arc<rimthan_checks::Check>,
}

impl StepCheck {
    /// The check document.
    pub fn doc(&self) -> &CheckDoc {
        &self.doc
    }
    /// Its manifest entry.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
    /// The compiled check, bounded by limits derived from the outputs it reads
    /// ([`crate::check_limits`]).
    pub fn compiled(&self) -> &rimthan_checks::Check {
        &self.compiled
    }
}

/// A verified validator.
#[derive(Debug)]
pub struct Validator {
    pub(crate) doc: ValidatorDoc,
    pub(crate) entry: Entry,
}

impl Validator {
    /// The validator document.
    pub fn doc(&self) -> &ValidatorDoc {
        &self.doc
    }
    /// Its manifest entry.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
}

/// A verified asset: base content plus per-harness renditions.
#[derive(Debug)]
pub struct Asset {
    pub(crate) base: Entry,
    pub(crate) renditions: BTreeMap<Harness, Entry>,
}

impl Asset {
    /// The asset kind.
    pub fn kind(&self) -> AssetKind {
        self.base
            .asset_kind
            .expect("asset entries carry their kind")
    }
    /// The base (harness-neutral) content entry; for adapters it carries the contract.
    pub fn base(&self) -> &Entry {
        &self.base
    }
    /// Per-harness renditions.
    pub fn renditions(&self) -> &BTreeMap<Harness, Entry> {
        &self.renditions
    }
    /// The content a host of `harness` uses: its rendition, or the base content.
    pub fn content_for(&self, harness: Harness) -> &Entry {
        self.renditions.get(&harness).unwrap_or(&self.base)
    }
}

/// A verified, compiled JSON Schema.
pub struct Schema {
    pub(crate) entry: Entry,
    pub(crate) value: Arc<serde_json::Value>,
    pub(crate) validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema")
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}

impl Schema {
    /// Its manifest entry.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
    /// The schema document.
    pub fn value(&self) -> &serde_json::Value {
        &self.value
    }
    /// The compiled validator (draft 2020-12, formats asserted).
    pub fn validator(&self) -> &jsonschema::Validator {
        &self.validator
    }
}

/// How a release's trust was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustAnchor {
    /// Signed by a trusted key of the registry.
    Signature,
    /// The embedded default, whose manifest digest is compiled into the binary.
    PinnedDigest,
}

/// A release whose every byte and rule was verified.
#[derive(Debug)]
pub struct VerifiedRelease {
    pub(crate) id: ReleaseId,
    pub(crate) manifest: Manifest,
    pub(crate) manifest_bytes: Arc<[u8]>,
    pub(crate) manifest_sha256: Sha256Digest,
    pub(crate) key_id: KeyId,
    pub(crate) anchor: TrustAnchor,
    pub(crate) contents: BTreeMap<String, Arc<[u8]>>,
    pub(crate) workflows: BTreeMap<WorkflowId, BTreeMap<Version, Workflow>>,
    pub(crate) validators: BTreeMap<(ValidatorId, Version), Validator>,
    pub(crate) assets: BTreeMap<(AssetKind, AssetId, Version), Asset>,
    pub(crate) schemas: BTreeMap<(SchemaId, Version), Schema>,
}

impl VerifiedRelease {
    /// The release id.
    pub fn id(&self) -> &ReleaseId {
        &self.id
    }
    /// The parsed manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    /// Whether this is a draft, never published (`Manifest::draft`, signed with the rest).
    pub fn is_draft(&self) -> bool {
        self.manifest.draft
    }
    /// The exact signed manifest bytes.
    pub fn manifest_bytes(&self) -> &Arc<[u8]> {
        &self.manifest_bytes
    }
    /// SHA-256 of the manifest bytes.
    pub fn manifest_sha256(&self) -> Sha256Digest {
        self.manifest_sha256
    }
    /// The key that signed the manifest.
    pub fn signing_key_id(&self) -> &KeyId {
        &self.key_id
    }
    /// How trust was established.
    pub fn trust_anchor(&self) -> &TrustAnchor {
        &self.anchor
    }
    /// The verified bytes of an entry, by its release-relative path.
    pub fn content(&self, path: &str) -> Option<&Arc<[u8]>> {
        self.contents.get(path)
    }
    /// The release's own bootstrap paragraph, if it carries one (checked UTF-8, bounded, not
    /// blank).
    pub fn bootstrap(&self) -> Option<&str> {
        let entry = self
            .manifest
            .entries
            .iter()
            .find(|e| e.kind == EntryKind::Bootstrap)?;
        let bytes = self.contents.get(&entry.path)?;
        Some(std::str::from_utf8(bytes).expect("a verified bootstrap entry is UTF-8"))
    }
    /// Every version of every workflow.
    pub fn workflows(&self) -> impl Iterator<Item = &Workflow> {
        self.workflows.values().flat_map(BTreeMap::values)
    }
    /// One workflow version.
    pub fn workflow(&self, id: &WorkflowId, version: &Version) -> Option<&Workflow> {
        self.workflows.get(id)?.get(version)
    }
    /// The highest version of a workflow.
    pub fn latest_workflow(&self, id: &WorkflowId) -> Option<&Workflow> {
        self.workflows.get(id)?.values().next_back()
    }
    /// Every validator.
    pub fn validators(&self) -> impl Iterator<Item = &Validator> {
        self.validators.values()
    }
    /// One validator version.
    pub fn validator(&self, id: &ValidatorId, version: &Version) -> Option<&Validator> {
        self.validators.get(&(id.clone(), version.clone()))
    }
    /// Every asset.
    pub fn assets(&self) -> impl Iterator<Item = &Asset> {
        self.assets.values()
    }
    /// One asset version.
    pub fn asset(&self, kind: AssetKind, id: &AssetId, version: &Version) -> Option<&Asset> {
        self.assets.get(&(kind, id.clone(), version.clone()))
    }
    /// Every schema.
    pub fn schemas(&self) -> impl Iterator<Item = &Schema> {
        self.schemas.values()
    }
    /// One schema version.
    pub fn schema(&self, id: &SchemaId, version: &Version) -> Option<&Schema> {
        self.schemas.get(&(id.clone(), version.clone()))
    }
}

/// A registry whose every release verified, with its channels.
#[derive(Debug)]
pub struct VerifiedRegistry {
    pub(crate) releases: BTreeMap<ReleaseId, Arc<VerifiedRelease>>,
    pub(crate) channels: ChannelsFile,
}

impl VerifiedRegistry {
    /// Every release, by id.
    pub fn releases(&self) -> &BTreeMap<ReleaseId, Arc<VerifiedRelease>> {
        &self.releases
    }
    /// One release.
    pub fn release(&self, id: &ReleaseId) -> Option<&Arc<VerifiedRelease>> {
        self.releases.get(id)
    }
    /// Channel → release.
    pub fn channels(&self) -> &BTreeMap<ChannelName, ReleaseId> {
        &self.channels.channels
    }
    /// The channel names, comma-separated, or `none`: for messages that list them.
    pub fn channel_list(&self) -> String {
        if self.channels.channels.is_empty() {
            return "none".into();
        }
        let names: Vec<&str> = self.channels.channels.keys().map(|c| c.as_str()).collect();
        names.join(", ")
    }
    /// The release ids, comma-separated, or `none`: for messages that list them.
    pub fn release_list(&self) -> String {
        if self.releases.is_empty() {
            return "none".into();
        }
        let ids: Vec<&str> = self.releases.keys().map(|r| r.as_str()).collect();
        ids.join(", ")
    }
    /// The release a channel points at.
    pub fn channel(&self, name: &ChannelName) -> Option<&Arc<VerifiedRelease>> {
        self.releases.get(self.channels.channels.get(name)?)
    }
    /// Channels pointing at `release`, sorted.
    pub fn channels_of(&self, release: &ReleaseId) -> Vec<&ChannelName> {
        self.channels
            .channels
            .iter()
            .filter(|(_, r)| *r == release)
            .map(|(c, _)| c)
            .collect()
    }
}

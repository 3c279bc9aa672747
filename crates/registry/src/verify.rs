//! Verification of a registry: digests, signatures, and every structural rule of `docs/registry-format.md` §3.
//!
//! Order matters and is fixed: the manifest is authenticated first (pinned digest or trusted
//! signature), then every entry's bytes against it, then the documents are parsed and their
//! references and rules checked. Nothing is parsed before its bytes are authenticated.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use serde::de::DeserializeOwned;

use crate::{
    canonical::{is_canonical, to_canonical_bytes},
    digest::Sha256Digest,
    error::RegistryError,
    files::{MAX_FILE_BYTES, RegistryFiles},
    ids::{
        ArtifactId, AssetId, AssetKind, DeliveryMode, Harness, HostCapability, ReleaseId,
        SETUP_STEP, SchemaId, StepKind, ValidatorExecution, ValidatorId, Version, WorkflowId,
    },
    model::{
        AdapterContract, ChannelsFile, Entry, EntryKind, MANIFEST_FORMAT, MEDIA_JSON, Manifest,
        StepDoc, ValidatorDoc, WorkflowDoc,
    },
    path::{check_path_template, check_relative_path},
    release::{
        Asset, Schema, Step, TrustAnchor, Validator, VerifiedRegistry, VerifiedRelease, Workflow,
    },
    renditions, report_contract, schema_check,
    signature::{KeyId, PublicKeyFile, SignatureCheck, SignatureFile, TrustedKeys},
};

/// The JSON Schema dialect every shipped schema uses.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// Largest declared output size a workflow may allow.
pub(crate) const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;
/// The channels file.
pub const CHANNELS_FILE: &str = "channels.json";

/// Whom to trust.
#[derive(Debug, Clone)]
pub enum TrustPolicy {
    /// An operator's registry: the keys in its `keys/`, never the embedded default's key.
    RegistryKeys {
        /// The embedded default release's development key, refused here.
        refused: KeyId,
    },
    /// The embedded default: each release's manifest sha256 is compiled in.
    Pinned(BTreeMap<ReleaseId, Sha256Digest>),
}

/// Verifies every release and the channels of a registry.
pub fn verify_registry(
    files: &RegistryFiles,
    policy: &TrustPolicy,
) -> Result<VerifiedRegistry, RegistryError> {
    let keys = load_keys(files)?;
    let channels = load_channels(files)?;
    let mut releases = BTreeMap::new();
    for id in release_ids(files)? {
        let release = verify_release(files, &id, &keys, policy)?;
        releases.insert(id, Arc::new(release));
    }
    for (channel, release) in &channels.channels {
        if !releases.contains_key(release) {
            return Err(RegistryError::ChannelUnknownRelease {
                file: CHANNELS_FILE.into(),
                channel: channel.to_string(),
                release: release.to_string(),
            });
        }
    }
    Ok(VerifiedRegistry { releases, channels })
}

/// Reads `keys/*.json` into a trust set.
pub(crate) fn load_keys(files: &RegistryFiles) -> Result<TrustedKeys, RegistryError> {
    let mut keys = TrustedKeys::default();
    for path in files.paths_under("keys/") {
        let invalid = |reason: String| RegistryError::KeyInvalid {
            file: path.into(),
            reason,
        };
        let file: PublicKeyFile = serde_json::from_slice(&files.get(path).expect("listed")[..])
            .map_err(|e| invalid(e.to_string()))?;
        if path != format!("keys/{}.json", file.key_id) {
            return Err(invalid(format!(
                "name the file keys/{}.json after its key id",
                file.key_id
            )));
        }
        keys.insert(&file).map_err(|e| invalid(e.0))?;
    }
    Ok(keys)
}

/// Reads `channels.json`; a registry without one has no channels.
pub(crate) fn load_channels(files: &RegistryFiles) -> Result<ChannelsFile, RegistryError> {
    match files.get(CHANNELS_FILE) {
        None => Ok(ChannelsFile::default()),
        Some(bytes) => serde_json::from_slice(bytes).map_err(|e| RegistryError::ChannelsInvalid {
            file: CHANNELS_FILE.into(),
            reason: format!("{e}; expected {{\"channels\": {{\"stable\": \"<release id>\"}}}}"),
        }),
    }
}

fn release_ids(files: &RegistryFiles) -> Result<BTreeSet<ReleaseId>, RegistryError> {
    let mut ids = BTreeSet::new();
    for path in files.paths_under("releases/") {
        let segment = path["releases/".len()..]
            .split('/')
            .next()
            .unwrap_or_default();
        let id = segment
            .parse()
            .map_err(|e: crate::ids::IdError| RegistryError::InvalidId {
                file: path.into(),
                entry: format!("release {segment}"),
                reason: e.to_string(),
            })?;
        ids.insert(id);
    }
    Ok(ids)
}

/// Verifies one release.
pub(crate) fn verify_release(
    files: &RegistryFiles,
    id: &ReleaseId,
    keys: &TrustedKeys,
    policy: &TrustPolicy,
) -> Result<VerifiedRelease, RegistryError> {
    let base = format!("releases/{id}/");
    let manifest_path = format!("{base}manifest.json");
    let sig_path = format!("{base}manifest.sig");
    let manifest_bytes =
        files
            .get(&manifest_path)
            .cloned()
            .ok_or_else(|| RegistryError::ManifestInvalid {
                file: manifest_path.clone(),
                reason: "missing".into(),
            })?;
    let manifest_sha256 = Sha256Digest::of(&manifest_bytes);

    // Authenticate the manifest bytes before parsing anything they say.
    let signature = read_signature(files, &sig_path)?;
    let anchor = match policy {
        TrustPolicy::Pinned(pins) => {
            let expected = pins.get(id).ok_or_else(|| RegistryError::ManifestInvalid {
                file: manifest_path.clone(),
                reason: "this release is not pinned by the binary; an embedded registry holds \
                         only the releases it was built with"
                    .into(),
            })?;
            if *expected != manifest_sha256 {
                return Err(RegistryError::ManifestDigestMismatch {
                    file: manifest_path,
                    expected: expected.to_string(),
                    actual: manifest_sha256.to_string(),
                });
            }
            TrustAnchor::PinnedDigest
        }
        TrustPolicy::RegistryKeys { refused } => {
            if signature.key_id == *refused {
                return Err(RegistryError::UntrustedSigningKey {
                    file: sig_path,
                    key_id: signature.key_id.to_string(),
                });
            }
            TrustAnchor::Signature
        }
    };
    match keys.check(&manifest_bytes, &signature) {
        SignatureCheck::Valid => {}
        SignatureCheck::UnknownKey => {
            return Err(RegistryError::UnknownSigningKey {
                file: sig_path,
                key_id: signature.key_id.to_string(),
            });
        }
        SignatureCheck::Invalid => {
            return Err(RegistryError::SignatureInvalid {
                file: sig_path,
                key_id: signature.key_id.to_string(),
            });
        }
    }

    let manifest = parse_manifest(&manifest_path, &manifest_bytes, id)?;
    let contents = check_entry_bytes(files, &base, &manifest)?;
    let mut release = VerifiedRelease {
        id: id.clone(),
        manifest,
        manifest_bytes,
        manifest_sha256,
        key_id: signature.key_id,
        anchor,
        contents,
        workflows: BTreeMap::new(),
        validators: BTreeMap::new(),
        assets: BTreeMap::new(),
        schemas: BTreeMap::new(),
    };
    Structure::new(&base).check(&mut release)?;
    Ok(release)
}

fn read_signature(files: &RegistryFiles, path: &str) -> Result<SignatureFile, RegistryError> {
    let bytes = files
        .get(path)
        .ok_or_else(|| RegistryError::SignatureMissing { file: path.into() })?;
    serde_json::from_slice(bytes).map_err(|_| RegistryError::SignatureInvalid {
        file: path.into(),
        key_id: "(unreadable signature file)".into(),
    })
}

fn parse_manifest(path: &str, bytes: &[u8], id: &ReleaseId) -> Result<Manifest, RegistryError> {
    let invalid = |reason: String| RegistryError::ManifestInvalid {
        file: path.into(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    if to_canonical_bytes(&value).ok().as_deref() != Some(bytes) {
        return Err(invalid(
            "not canonical JSON (sorted keys, no whitespace); rebuild it with `rimthan registry build`"
                .into(),
        ));
    }
    let manifest: Manifest = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
    if manifest.format != MANIFEST_FORMAT {
        return Err(invalid(format!(
            "format {:?} is not {MANIFEST_FORMAT:?}",
            manifest.format
        )));
    }
    if manifest.release != *id {
        return Err(invalid(format!(
            "names release {} but sits in releases/{id}/; a release id is never rewritten",
            manifest.release
        )));
    }
    Ok(manifest)
}

/// The folder every entry of a kind lives under, derived from its identity.
fn expected_prefix(entry: &Entry) -> String {
    match (entry.kind, &entry.workflow, entry.asset_kind) {
        (EntryKind::Workflow, _, _) => format!("workflows/{}/{}/", entry.id, entry.version),
        (EntryKind::Step, Some(w), _) => format!("workflows/{w}/{}/steps/", entry.version),
        (EntryKind::Asset, _, Some(k)) => format!("assets/{k}/{}/{}/", entry.id, entry.version),
        (EntryKind::Validator, _, _) => format!("validators/{}/{}/", entry.id, entry.version),
        (EntryKind::Schema, _, _) => format!("schemas/{}/{}/", entry.id, entry.version),
        (EntryKind::Bootstrap, _, _) => "bootstrap/".into(),
        (EntryKind::Step, None, _) | (EntryKind::Asset, _, None) => String::new(),
    }
}

fn check_entry_bytes(
    files: &RegistryFiles,
    base: &str,
    manifest: &Manifest,
) -> Result<BTreeMap<String, Arc<[u8]>>, RegistryError> {
    let manifest_file = format!("{base}manifest.json");
    let mut contents = BTreeMap::new();
    let mut previous: Option<&str> = None;
    for entry in &manifest.entries {
        let file = format!("{base}{}", entry.path);
        if previous.is_some_and(|p| p >= entry.path.as_str()) {
            return Err(if previous == Some(entry.path.as_str()) {
                RegistryError::DuplicateEntry {
                    file,
                    entry: entry.label(),
                }
            } else {
                RegistryError::ManifestInvalid {
                    file: manifest_file,
                    reason: format!(
                        "entries must be sorted by path; {} is out of order",
                        entry.path
                    ),
                }
            });
        }
        previous = Some(&entry.path);
        if let Err(e) = crate::ids::check_name("entry id", &entry.id) {
            return Err(RegistryError::InvalidId {
                file,
                entry: entry.label(),
                reason: e.to_string(),
            });
        }
        if entry.bytes > MAX_FILE_BYTES {
            return Err(RegistryError::EntryTooLarge {
                file,
                bytes: entry.bytes,
                limit: MAX_FILE_BYTES,
            });
        }
        if let Err(rule) = check_relative_path(&entry.path) {
            return Err(RegistryError::ManifestInvalid {
                file: manifest_file,
                reason: format!(
                    "{}: path {:?} breaks rule {rule}: {}",
                    entry.label(),
                    entry.path,
                    rule.advice()
                ),
            });
        }
        let prefix = expected_prefix(entry);
        if prefix.is_empty() || !entry.path.starts_with(&prefix) {
            return Err(RegistryError::ManifestInvalid {
                file: manifest_file,
                reason: format!(
                    "{}: path {:?} must lie under {prefix:?} (steps name their workflow, \
                     assets their asset_kind)",
                    entry.label(),
                    entry.path
                ),
            });
        }
        let bytes = files
            .get(&file)
            .ok_or_else(|| RegistryError::EntryMissing {
                file: file.clone(),
                entry: entry.label(),
            })?;
        if bytes.len() as u64 != entry.bytes {
            return Err(RegistryError::SizeMismatch {
                file,
                entry: entry.label(),
                expected: entry.bytes,
                actual: bytes.len() as u64,
            });
        }
        let actual = Sha256Digest::of(bytes);
        if actual != entry.sha256 {
            return Err(RegistryError::DigestMismatch {
                file,
                entry: entry.label(),
                expected: entry.sha256.to_string(),
                actual: actual.to_string(),
            });
        }
        contents.insert(entry.path.clone(), bytes.clone());
    }
    let signed = [manifest_file.as_str(), &format!("{base}manifest.sig")].map(str::to_owned);
    for path in files.paths_under(base) {
        if !signed.iter().any(|s| s == path) && !contents.contains_key(&path[base.len()..]) {
            return Err(RegistryError::UnlistedFile { file: path.into() });
        }
    }
    Ok(contents)
}

/// Structural checks over an authenticated release; fills the typed model.
struct Structure<'a> {
    base: &'a str,
    steps: BTreeMap<(WorkflowId, Version), Vec<Step>>,
    renditions: Vec<Entry>,
}

type Res<T = ()> = Result<T, RegistryError>;

impl<'a> Structure<'a> {
    fn new(base: &'a str) -> Self {
        Self {
            base,
            steps: BTreeMap::new(),
            renditions: Vec::new(),
        }
    }

    fn file(&self, entry: &Entry) -> String {
        format!("{}{}", self.base, entry.path)
    }

    fn check(mut self, release: &mut VerifiedRelease) -> Res {
        // Taken out and put back rather than cloned: releases can list many entries.
        let entries = std::mem::take(&mut release.manifest.entries);
        let loaded = entries
            .iter()
            .try_for_each(|entry| self.load_entry(release, entry));
        release.manifest.entries = entries;
        loaded?;
        self.attach_renditions(release)?;
        self.attach_steps(release)?;
        for asset in release.assets.values() {
            self.check_asset(release, asset)?;
        }
        for validator in release.validators.values() {
            let r = &validator.doc.report_schema;
            let Some(schema) = release.schema(&r.id, &r.version) else {
                return Err(
                    self.dangling(&validator.entry, format!("schema {}@{}", r.id, r.version))
                );
            };
            report_contract::check_report_schema(schema.value()).map_err(|breach| {
                RegistryError::ReportSchemaIncompatible {
                    file: self.file(&validator.entry),
                    entry: validator.entry.label(),
                    schema: format!("{}@{}", r.id, r.version),
                    field: breach.field,
                    reason: breach.problem,
                }
            })?;
        }
        for workflow in release.workflows() {
            self.check_workflow(release, workflow)?;
        }
        Ok(())
    }

    fn dangling(&self, entry: &Entry, reference: String) -> RegistryError {
        RegistryError::DanglingReference {
            file: self.file(entry),
            entry: entry.label(),
            reference,
        }
    }

    fn document<T: DeserializeOwned>(&self, release: &VerifiedRelease, entry: &Entry) -> Res<T> {
        let invalid = |reason: String| RegistryError::DocumentInvalid {
            file: self.file(entry),
            entry: entry.label(),
            reason,
        };
        if entry.media_type != MEDIA_JSON {
            return Err(invalid(format!("media type must be {MEDIA_JSON}")));
        }
        let bytes = &release.contents[&entry.path];
        if !is_canonical(bytes) {
            return Err(invalid(
                "not canonical JSON; rebuild with `rimthan registry build`".into(),
            ));
        }
        serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))
    }

    fn mismatch(&self, entry: &Entry, what: &str) -> RegistryError {
        RegistryError::DocumentInvalid {
            file: self.file(entry),
            entry: entry.label(),
            reason: format!("the document's {what} differs from its manifest entry"),
        }
    }

    fn typed_id<T: std::str::FromStr<Err = crate::ids::IdError>>(&self, entry: &Entry) -> Res<T> {
        entry
            .id
            .parse()
            .map_err(|e: crate::ids::IdError| RegistryError::InvalidId {
                file: self.file(entry),
                entry: entry.label(),
                reason: e.to_string(),
            })
    }

    fn duplicate(&self, entry: &Entry) -> RegistryError {
        RegistryError::DuplicateEntry {
            file: self.file(entry),
            entry: entry.label(),
        }
    }

    fn load_entry(&mut self, release: &mut VerifiedRelease, entry: &Entry) -> Res {
        let stray_asset_fields = entry.asset_kind.is_some()
            || entry.rendition.is_some()
            || entry.compatible_harnesses.is_some()
            || entry.adapter_contract.is_some();
        if entry.kind != EntryKind::Asset && stray_asset_fields {
            return Err(RegistryError::ManifestInvalid {
                file: format!("{}manifest.json", self.base),
                reason: format!("{}: only asset entries carry asset fields", entry.label()),
            });
        }
        match entry.kind {
            EntryKind::Workflow => {
                let id: WorkflowId = self.typed_id(entry)?;
                let doc: WorkflowDoc = self.document(release, entry)?;
                if doc.id != id || doc.version != entry.version {
                    return Err(self.mismatch(entry, "id or version"));
                }
                let versions = release.workflows.entry(id).or_default();
                if versions.contains_key(&entry.version) {
                    return Err(self.duplicate(entry));
                }
                let workflow = Workflow {
                    doc,
                    entry: entry.clone(),
                    steps: Vec::new(),
                };
                versions.insert(entry.version.clone(), workflow);
            }
            EntryKind::Step => {
                let doc: StepDoc = self.document(release, entry)?;
                if doc.id.as_str() != entry.id
                    || Some(&doc.workflow) != entry.workflow.as_ref()
                    || doc.workflow_version != entry.version
                {
                    return Err(self.mismatch(entry, "id, workflow or workflow_version"));
                }
                let key = (doc.workflow.clone(), doc.workflow_version.clone());
                self.steps.entry(key).or_default().push(Step {
                    doc,
                    entry: entry.clone(),
                });
            }
            EntryKind::Validator => {
                let id: ValidatorId = self.typed_id(entry)?;
                let doc: ValidatorDoc = self.document(release, entry)?;
                if doc.id != id || doc.version != entry.version {
                    return Err(self.mismatch(entry, "id or version"));
                }
                let validator = Validator {
                    doc,
                    entry: entry.clone(),
                };
                if release
                    .validators
                    .insert((id, entry.version.clone()), validator)
                    .is_some()
                {
                    return Err(self.duplicate(entry));
                }
            }
            EntryKind::Schema => {
                let id: SchemaId = self.typed_id(entry)?;
                let value: serde_json::Value = self.document(release, entry)?;
                let schema = self.compile_schema(entry, value)?;
                if release
                    .schemas
                    .insert((id, entry.version.clone()), schema)
                    .is_some()
                {
                    return Err(self.duplicate(entry));
                }
            }
            EntryKind::Asset => {
                let id: AssetId = self.typed_id(entry)?;
                let kind = entry.asset_kind.expect("checked by expected_prefix");
                if entry.rendition.is_some() {
                    self.renditions.push(entry.clone());
                    return Ok(());
                }
                let asset = Asset {
                    base: entry.clone(),
                    renditions: BTreeMap::new(),
                };
                if release
                    .assets
                    .insert((kind, id, entry.version.clone()), asset)
                    .is_some()
                {
                    return Err(self.duplicate(entry));
                }
            }
            EntryKind::Bootstrap => {
                crate::bootstrap::check_entry(
                    self.file(entry),
                    entry,
                    &release.contents[&entry.path],
                )?;
            }
        }
        Ok(())
    }

    fn compile_schema(&self, entry: &Entry, value: serde_json::Value) -> Res<Schema> {
        let invalid = |reason: String| RegistryError::SchemaInvalid {
            file: self.file(entry),
            entry: entry.label(),
            reason,
        };
        let validator = schema_check::compile(&value).map_err(invalid)?;
        schema_check::check_examples(&value, &validator).map_err(invalid)?;
        Ok(Schema {
            entry: entry.clone(),
            value,
            validator: Arc::new(validator),
        })
    }

    fn attach_renditions(&mut self, release: &mut VerifiedRelease) -> Res {
        for entry in std::mem::take(&mut self.renditions) {
            let kind = entry.asset_kind.expect("asset");
            let id: AssetId = self.typed_id(&entry)?;
            let harness = entry.rendition.expect("rendition");
            let key = (kind, id, entry.version.clone());
            let Some(asset) = release.assets.get_mut(&key) else {
                let reference = format!("base content of asset {kind}/{}@{}", key.1, key.2);
                return Err(self.dangling(&entry, reference));
            };
            if asset.renditions.insert(harness, entry.clone()).is_some() {
                return Err(self.duplicate(&entry));
            }
        }
        Ok(())
    }

    fn attach_steps(&mut self, release: &mut VerifiedRelease) -> Res {
        for ((workflow_id, version), steps) in std::mem::take(&mut self.steps) {
            let Some(workflow) = release
                .workflows
                .get_mut(&workflow_id)
                .and_then(|v| v.get_mut(&version))
            else {
                let entry = &steps[0].entry;
                return Err(self.dangling(entry, format!("workflow {workflow_id}@{version}")));
            };
            let mut by_id: BTreeMap<String, Step> = BTreeMap::new();
            for step in steps {
                if by_id.contains_key(step.doc.id.as_str()) {
                    return Err(self.duplicate(&step.entry));
                }
                by_id.insert(step.doc.id.to_string(), step);
            }
            let listed: BTreeSet<_> = workflow.doc.steps.iter().map(|s| &s.id).collect();
            if listed.len() != workflow.doc.steps.len() {
                return Err(RegistryError::WorkflowInvalid {
                    file: self.file(&workflow.entry),
                    entry: workflow.entry.label(),
                    rule: "duplicate_step",
                    reason: "list each step once".into(),
                });
            }
            let wf_file = self.file(&workflow.entry);
            let wf_label = workflow.entry.label();
            for summary in &workflow.doc.steps {
                let Some(step) = by_id.remove(summary.id.as_str()) else {
                    return Err(RegistryError::DanglingReference {
                        file: wf_file,
                        entry: wf_label,
                        reference: format!("step {}", summary.id),
                    });
                };
                if step.doc.kind != summary.kind || step.doc.title != summary.title {
                    return Err(RegistryError::WorkflowInvalid {
                        file: self.file(&step.entry),
                        entry: step.entry.label(),
                        rule: "step_summary_mismatch",
                        reason: "kind and title must equal the workflow's step list".into(),
                    });
                }
                workflow.steps.push(step);
            }
            if let Some(step) = by_id.into_values().next() {
                return Err(RegistryError::WorkflowInvalid {
                    file: self.file(&step.entry),
                    entry: step.entry.label(),
                    rule: "unlisted_step",
                    reason: "the workflow's steps list does not name this step; add it or remove \
                             the step"
                        .into(),
                });
            }
        }
        Ok(())
    }

    fn check_asset(&self, release: &VerifiedRelease, asset: &Asset) -> Res {
        let base = &asset.base;
        let id: AssetId = self.typed_id(base)?;
        let rendition_error =
            |entry: &Entry, harness: &str, reason: String| RegistryError::RenditionInvalid {
                file: self.file(entry),
                entry: entry.label(),
                harness: harness.into(),
                reason,
            };
        let bytes = |entry: &Entry| release.contents[&entry.path].clone();
        let is_adapter = asset.kind() == AssetKind::HostAdapter;
        if !is_adapter && (base.compatible_harnesses.is_some() || base.adapter_contract.is_some()) {
            return Err(self.contract_error(
                base,
                "not_an_adapter",
                "only host-adapter assets carry \
                compatible_harnesses or adapter_contract"
                    .into(),
            ));
        }
        match asset.kind() {
            AssetKind::HostAdapter => self.check_adapter(base)?,
            AssetKind::Skill => {
                renditions::check_skill(&id, &bytes(base))
                    .map_err(|r| rendition_error(base, "base", r))?;
            }
            AssetKind::Command => {
                renditions::check_claude_command(&bytes(base))
                    .map_err(|r| rendition_error(base, "base", r))?;
            }
            AssetKind::Subagent => {}
        }
        for (harness, entry) in &asset.renditions {
            let check = match (asset.kind(), harness) {
                (AssetKind::Subagent, Harness::Codex) => renditions::check_codex_subagent,
                (AssetKind::Subagent, Harness::ClaudeCode) => renditions::check_claude_subagent,
                (AssetKind::Skill, _) => renditions::check_skill,
                _ => continue,
            };
            check(&id, &bytes(entry)).map_err(|r| rendition_error(entry, harness.as_str(), r))?;
        }
        Ok(())
    }

    fn contract_error(&self, entry: &Entry, rule: &'static str, reason: String) -> RegistryError {
        RegistryError::AdapterContractInvalid {
            file: self.file(entry),
            entry: entry.label(),
            rule,
            reason,
        }
    }

    fn check_adapter(&self, entry: &Entry) -> Res {
        if entry
            .compatible_harnesses
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            return Err(self.contract_error(
                entry,
                "no_compatible_harness",
                "list the harnesses this adapter serves in compatible_harnesses".into(),
            ));
        }
        let Some(contract) = &entry.adapter_contract else {
            if entry.version >= Version::new(1, 1, 0) {
                return Err(self.contract_error(
                    entry,
                    "missing_contract",
                    "host adapters from 1.1.0 on must carry a typed adapter_contract".into(),
                ));
            }
            return Ok(());
        };
        self.check_contract(entry, contract)
    }

    fn check_contract(&self, entry: &Entry, contract: &AdapterContract) -> Res {
        let err = |rule, reason: String| self.contract_error(entry, rule, reason);
        if contract.delivery_modes.is_empty() {
            return Err(err(
                "no_delivery_mode",
                "declare at least one delivery mode".into(),
            ));
        }
        if has_duplicates(&contract.delivery_modes) {
            return Err(err(
                "duplicate_delivery_mode",
                "list each delivery mode once".into(),
            ));
        }
        if contract.validator_execution == ValidatorExecution::NativeSubagent
            && !contract
                .required_host_capabilities
                .contains(&HostCapability::NativeSubagents)
        {
            return Err(err(
                "native_subagents_not_required",
                "native-subagent validator execution requires the native-subagents capability"
                    .into(),
            ));
        }
        let mut templates = BTreeSet::new();
        for (kind, delivery) in &contract.asset_kinds {
            if *kind == AssetKind::HostAdapter {
                return Err(err(
                    "adapter_asset_kind",
                    "host-adapter is not a deliverable asset".into(),
                ));
            }
            if delivery.delivery_modes.is_empty() {
                return Err(err(
                    "no_delivery_mode",
                    format!("{kind}: list its allowed modes"),
                ));
            }
            if has_duplicates(&delivery.delivery_modes) {
                return Err(err(
                    "duplicate_delivery_mode",
                    format!("{kind}: list each mode once"),
                ));
            }
            if let Some(mode) = delivery
                .delivery_modes
                .iter()
                .find(|m| !contract.delivery_modes.contains(m))
            {
                return Err(err(
                    "mode_not_in_contract",
                    format!("{kind} allows {mode}, which the contract's delivery_modes lack"),
                ));
            }
            let local = delivery
                .delivery_modes
                .contains(&DeliveryMode::ProjectLocal);
            match (&delivery.path_template, local) {
                (None, true) => {
                    return Err(err(
                        "path_template_required",
                        format!("{kind} allows project-local delivery but has no path_template"),
                    ));
                }
                (Some(_), false) => {
                    return Err(err(
                        "path_template_without_project_local",
                        format!("{kind} has a path_template but does not allow project-local"),
                    ));
                }
                (Some(template), true) => {
                    check_path_template(template).map_err(|rule| {
                        RegistryError::PathTemplateInvalid {
                            file: self.file(entry),
                            entry: entry.label(),
                            asset_kind: kind.to_string(),
                            template: template.clone(),
                            rule,
                        }
                    })?;
                    if !templates.insert(template.clone()) {
                        return Err(err(
                            "template_collision",
                            format!("{kind} shares its path_template with another asset kind"),
                        ));
                    }
                }
                (None, false) => {}
            }
        }
        Ok(())
    }

    fn workflow_error(&self, entry: &Entry, rule: &'static str, reason: String) -> RegistryError {
        RegistryError::WorkflowInvalid {
            file: self.file(entry),
            entry: entry.label(),
            rule,
            reason,
        }
    }

    fn check_workflow(&self, release: &VerifiedRelease, workflow: &Workflow) -> Res {
        let entry = &workflow.entry;
        let steps = &workflow.steps;
        match steps.first() {
            Some(s) if s.doc.id.as_str() == SETUP_STEP && s.doc.kind == StepKind::Setup => {}
            _ => {
                return Err(self.workflow_error(
                    entry,
                    "first_step_not_setup",
                    format!("the first step must be {SETUP_STEP} of kind setup"),
                ));
            }
        }
        let mut available: BTreeSet<ArtifactId> = BTreeSet::new();
        let mut paths = BTreeSet::new();
        for (index, step) in steps.iter().enumerate() {
            self.check_step(release, step, index == 0, &mut available, &mut paths)?;
        }
        if workflow.doc.harnesses.is_empty() {
            return Err(self.workflow_error(
                entry,
                "no_harness",
                "pin an adapter for at least one \
                harness"
                    .into(),
            ));
        }
        let setup = &steps[0].doc;
        for (harness, pin) in &workflow.doc.harnesses {
            self.check_pin(release, workflow, *harness, pin, setup)?;
        }
        Ok(())
    }

    fn check_step(
        &self,
        release: &VerifiedRelease,
        step: &Step,
        is_setup: bool,
        available: &mut BTreeSet<ArtifactId>,
        paths: &mut BTreeSet<String>,
    ) -> Res {
        let (doc, entry) = (&step.doc, &step.entry);
        let err = |rule, reason: String| self.workflow_error(entry, rule, reason);
        if is_setup {
            if !doc.outputs.is_empty() || !doc.inputs.is_empty() || !doc.validators.is_empty() {
                return Err(err(
                    "setup_has_outputs",
                    "the setup step declares host assets only; \
                    move outputs, inputs and validators to a work step"
                        .into(),
                ));
            }
            for asset in &doc.host_assets {
                if asset.kind == AssetKind::HostAdapter {
                    return Err(err(
                        "host_asset_kind",
                        "host adapters are pinned by harness, not \
                        listed as host assets"
                            .into(),
                    ));
                }
                if release
                    .asset(asset.kind, &asset.id, &asset.version)
                    .is_none()
                {
                    let reference = format!("asset {}/{}@{}", asset.kind, asset.id, asset.version);
                    return Err(self.dangling(entry, reference));
                }
            }
            return Ok(());
        }
        if doc.kind != StepKind::Work {
            return Err(err(
                "setup_not_first",
                "only the first step may be of kind setup".into(),
            ));
        }
        if !doc.host_assets.is_empty() {
            return Err(err(
                "work_step_host_assets",
                "only the setup step lists host assets".into(),
            ));
        }
        if doc.outputs.is_empty() {
            return Err(err(
                "no_outputs",
                "a work step declares at least one output".into(),
            ));
        }
        for input in &doc.inputs {
            if !available.contains(input) {
                return Err(err(
                    "input_not_produced_earlier",
                    format!("input {input} is not an output of an earlier step"),
                ));
            }
        }
        for output in &doc.outputs {
            check_relative_path(&output.path).map_err(|rule| RegistryError::OutputPathInvalid {
                file: self.file(entry),
                entry: entry.label(),
                artifact: output.artifact_id.to_string(),
                path: output.path.clone(),
                rule,
            })?;
            if !available.insert(output.artifact_id.clone()) {
                return Err(err(
                    "duplicate_artifact",
                    format!(
                        "artifact {} is declared twice in the workflow",
                        output.artifact_id
                    ),
                ));
            }
            // Case-insensitive: paths differing only in case collide on many file systems.
            if !paths.insert(output.path.to_lowercase()) {
                return Err(err(
                    "duplicate_output_path",
                    format!("path {} is declared by two outputs", output.path),
                ));
            }
            if output.max_bytes == 0 || output.max_bytes > MAX_OUTPUT_BYTES {
                return Err(err(
                    "max_bytes_out_of_range",
                    format!(
                        "{}: max_bytes must be 1..={MAX_OUTPUT_BYTES}",
                        output.artifact_id
                    ),
                ));
            }
            match (&output.schema, output.media_type == MEDIA_JSON) {
                (Some(schema), true) => {
                    if release.schema(&schema.id, &schema.version).is_none() {
                        let reference = format!("schema {}@{}", schema.id, schema.version);
                        return Err(self.dangling(entry, reference));
                    }
                }
                (None, true) => {
                    return Err(err(
                        "schema_required",
                        format!("{} is JSON and needs a schema", output.artifact_id),
                    ));
                }
                (Some(_), false) => {
                    return Err(err(
                        "schema_on_non_json",
                        format!(
                            "{} is {}; only JSON artifacts have a schema",
                            output.artifact_id, output.media_type
                        ),
                    ));
                }
                (None, false) => {}
            }
            if let Some(example) = &output.example {
                check_output_example(output, example)
                    .map_err(|(rule, reason)| err(rule, reason))?;
            }
        }
        for v in &doc.validators {
            let Some(validator) = release.validator(&v.id, &v.version) else {
                return Err(self.dangling(entry, format!("validator {}@{}", v.id, v.version)));
            };
            if let Some(missing) = validator
                .doc
                .inputs
                .iter()
                .find(|i| !available.contains(*i))
            {
                return Err(err(
                    "validator_input_unavailable",
                    format!(
                        "validator {}@{} ({}) reads artifact {missing}, which no step up to \
                         this one produces; produce it in this or an earlier step, or drop it \
                         from the validator's inputs",
                        v.id,
                        v.version,
                        self.file(&validator.entry)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_pin(
        &self,
        release: &VerifiedRelease,
        workflow: &Workflow,
        harness: Harness,
        pin: &crate::model::AdapterPin,
        setup: &StepDoc,
    ) -> Res {
        let entry = &workflow.entry;
        let err = |reason: String| RegistryError::AdapterPinInvalid {
            file: self.file(entry),
            entry: entry.label(),
            harness: harness.to_string(),
            reason,
        };
        let Some(adapter) = release.asset(AssetKind::HostAdapter, &pin.id, &pin.version) else {
            return Err(self.dangling(entry, format!("host-adapter {}@{}", pin.id, pin.version)));
        };
        let base = adapter.base();
        if !base
            .compatible_harnesses
            .as_ref()
            .is_some_and(|h| h.contains(&harness))
        {
            return Err(err(format!(
                "adapter {}@{} is not compatible with {harness}",
                pin.id, pin.version
            )));
        }
        let Some(contract) = &base.adapter_contract else {
            return Err(err(format!(
                "adapter {}@{} has no typed contract; pin an adapter >= 1.1.0 so starts fail closed",
                pin.id, pin.version
            )));
        };
        for asset in &setup.host_assets {
            let Some(delivery) = contract.asset_kinds.get(&asset.kind) else {
                return Err(err(format!(
                    "the contract offers no delivery for {} assets, which setup requires",
                    asset.kind
                )));
            };
            let local = delivery
                .delivery_modes
                .contains(&DeliveryMode::ProjectLocal);
            let needs_rendition = asset.kind == AssetKind::Subagent
                && matches!(harness, Harness::Codex | Harness::ClaudeCode);
            let found = release
                .asset(asset.kind, &asset.id, &asset.version)
                .expect("checked");
            if local && needs_rendition && !found.renditions().contains_key(&harness) {
                return Err(err(format!(
                    "subagent {} has no {harness} rendition for project-local delivery",
                    asset.id
                )));
            }
        }
        Ok(())
    }
}

/// An output's inline example: only for non-JSON outputs (JSON outputs illustrate themselves
/// with their schema's `examples`), and within the size the output may have.
fn check_output_example(
    output: &crate::model::OutputDecl,
    example: &str,
) -> Result<(), (&'static str, String)> {
    if output.media_type == MEDIA_JSON {
        return Err((
            "example_on_json_output",
            format!(
                "{} is JSON: give its example in its schema's `examples` array, not on the output",
                output.artifact_id
            ),
        ));
    }
    if example.len() as u64 > output.max_bytes {
        return Err((
            "example_too_large",
            format!(
                "{}: the example is {} bytes, over the output's max_bytes of {}; shorten the \
                 example or raise max_bytes",
                output.artifact_id,
                example.len(),
                output.max_bytes
            ),
        ));
    }
    Ok(())
}

fn has_duplicates<T: Ord>(items: &[T]) -> bool {
    items.iter().collect::<BTreeSet<_>>().len() != items.len()
}

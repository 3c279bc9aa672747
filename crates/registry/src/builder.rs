//! Building a signed release from its readable source folder (the `rimthan registry build`
//! command), and publishing it into a registry folder without ever rewriting a release.
//!
//! Source layout (see `docs/registry-format.md`):
//!
//! ```text
//! workflows/<id>/<version>/workflow.json      steps/<step>.md (YAML frontmatter + instructions)
//! validators/<id>/<version>.md                 (also yields the subagent asset and renditions)
//! skills/<id>/<version>/SKILL.md  commands/<id>/<version>.md  adapters/<id>/<version>.md
//! schemas/<id>/<version>.json               bootstrap.md (optional)
//! ```
//!
//! The output is deterministic: the same source and key give the same bytes, which is how the
//! embedded default release is proven to come from the committed source.

use std::{collections::BTreeMap, fs, path::Path};

use serde::{Deserialize, de::DeserializeOwned};

use crate::{
    canonical::to_canonical_bytes,
    digest::Sha256Digest,
    error::RegistryError,
    files::{RegistryFiles, write_atomic},
    frontmatter,
    ids::{
        ArtifactId, AssetKind, ChannelName, Harness, HostCapability, ReleaseId, StepId, StepKind,
        ValidatorCapability, Version,
    },
    model::{
        AdapterContract, AdapterPin, AssetRef, ChannelsFile, Entry, EntryKind, MANIFEST_FORMAT,
        MEDIA_JSON, MEDIA_MARKDOWN, MEDIA_TOML, Manifest, OutputDecl, SchemaRef, StepDoc,
        StepSummary, ValidatorDoc, ValidatorRef, WorkflowDoc,
    },
    renditions,
    signature::{SigningKey, TrustedKeys},
    verify::{CHANNELS_FILE, TrustPolicy, load_channels, verify_release},
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkflowSource {
    title: String,
    description: String,
    harnesses: BTreeMap<Harness, AdapterPin>,
    required_host_capabilities: Vec<HostCapability>,
    steps: Vec<StepId>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepSource {
    title: String,
    kind: StepKind,
    host_assets: Vec<AssetRef>,
    inputs: Vec<ArtifactId>,
    outputs: Vec<OutputDecl>,
    validators: Vec<ValidatorRef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidatorSource {
    title: String,
    description: String,
    capabilities: Vec<ValidatorCapability>,
    inputs: Vec<ArtifactId>,
    report_schema: SchemaRef,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdapterSource {
    compatible_harnesses: Vec<Harness>,
    #[serde(default)]
    adapter_contract: Option<AdapterContract>,
}

/// A release built in memory: its files (registry-relative) and manifest digest.
#[derive(Debug)]
pub struct BuiltRelease {
    /// The release id.
    pub release: ReleaseId,
    /// `releases/<id>/…` and `keys/<key_id>.json`.
    pub files: RegistryFiles,
    /// SHA-256 of the manifest bytes.
    pub manifest_sha256: Sha256Digest,
}

struct Builder {
    release: ReleaseId,
    entries: Vec<Entry>,
    files: RegistryFiles,
}

/// Builds, signs and verifies a release from `source`.
pub fn build_release(
    source: &Path,
    release: &ReleaseId,
    key: &SigningKey,
) -> Result<BuiltRelease, RegistryError> {
    let mut b = Builder {
        release: release.clone(),
        entries: Vec::new(),
        files: RegistryFiles::default(),
    };
    if pairs(&source.join("workflows"))?.is_empty() {
        return Err(source_error(
            &source.join("workflows"),
            "no workflow found: a release source holds workflows/<id>/<version>/workflow.json"
                .into(),
        ));
    }
    b.schemas(&source.join("schemas"))?;
    b.validators(&source.join("validators"))?;
    b.verbatim_assets(&source.join("skills"), AssetKind::Skill)?;
    b.verbatim_assets(&source.join("commands"), AssetKind::Command)?;
    b.adapters(&source.join("adapters"))?;
    b.workflows(&source.join("workflows"))?;
    if let Some((entry, bytes)) = crate::bootstrap::from_source(source)? {
        b.add(entry, bytes);
    }
    b.finish(key)
}

impl Builder {
    fn add(&mut self, mut entry: Entry, bytes: Vec<u8>) {
        entry.bytes = bytes.len() as u64;
        entry.sha256 = Sha256Digest::of(&bytes);
        self.files
            .insert(format!("releases/{}/{}", self.release, entry.path), bytes);
        self.entries.push(entry);
    }

    fn finish(mut self, key: &SigningKey) -> Result<BuiltRelease, RegistryError> {
        self.entries.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = Manifest {
            format: MANIFEST_FORMAT.into(),
            release: self.release.clone(),
            entries: self.entries,
        };
        let bytes = to_canonical_bytes(&manifest).expect("manifest serializes");
        let signature = to_canonical_bytes(&key.sign(&bytes)).expect("signature serializes");
        let manifest_sha256 = Sha256Digest::of(&bytes);
        let base = format!("releases/{}", self.release);
        self.files.insert(format!("{base}/manifest.json"), bytes);
        self.files.insert(format!("{base}/manifest.sig"), signature);
        let public = key.public_key_file();
        let public_bytes = to_canonical_bytes(&public).expect("key serializes");
        self.files
            .insert(format!("keys/{}.json", public.key_id), public_bytes);

        // Never emit what the verifier would refuse.
        let mut keys = TrustedKeys::default();
        keys.insert(&public).expect("own key");
        let pins = TrustPolicy::Pinned(BTreeMap::from([(self.release.clone(), manifest_sha256)]));
        verify_release(&self.files, &self.release, &keys, &pins)?;
        Ok(BuiltRelease {
            release: self.release,
            files: self.files,
            manifest_sha256,
        })
    }

    fn schemas(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_file) in pairs(dir)? {
            let version = strip_version(&version_file, ".json")?;
            let path = dir.join(&id).join(&version_file);
            let value: serde_json::Value = serde_json::from_slice(&read(&path)?)
                .map_err(|e| source_error(&path, format!("not JSON: {e}")))?;
            let entry = entry(
                EntryKind::Schema,
                &id,
                &version,
                format!("schemas/{id}/{version}/schema.json"),
                MEDIA_JSON,
            );
            self.add(
                entry,
                to_canonical_bytes(&value).expect("JSON value serializes"),
            );
        }
        Ok(())
    }

    fn validators(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_file) in pairs(dir)? {
            let version = strip_version(&version_file, ".md")?;
            let path = dir.join(&id).join(&version_file);
            let text = read_text(&path)?;
            let (src, body): (ValidatorSource, _) = parse_frontmatter(&path, &text)?;
            let doc = ValidatorDoc {
                id: parse(&path, &id)?,
                version: version.clone(),
                title: src.title,
                description: src.description,
                instructions: body.trim().to_owned() + "\n",
                capabilities: src.capabilities,
                inputs: src.inputs,
                report_schema: src.report_schema,
            };
            let json = to_canonical_bytes(&doc).expect("validator serializes");
            let validator_path = format!("validators/{id}/{version}/validator.json");
            self.add(
                entry(
                    EntryKind::Validator,
                    &id,
                    &version,
                    validator_path,
                    MEDIA_JSON,
                ),
                json,
            );

            // The validator's subagent, rendered once per host from the same source.
            let asset_dir = format!("assets/subagent/{id}/{version}");
            let mut base = entry(
                EntryKind::Asset,
                &id,
                &version,
                format!("{asset_dir}/{id}.md"),
                MEDIA_MARKDOWN,
            );
            base.asset_kind = Some(AssetKind::Subagent);
            let mut codex = base.clone();
            codex.rendition = Some(Harness::Codex);
            codex.path = format!("{asset_dir}/codex/{id}.toml");
            codex.media_type = MEDIA_TOML.into();
            let mut claude = base.clone();
            claude.rendition = Some(Harness::ClaudeCode);
            claude.path = format!("{asset_dir}/claude-code/{id}.md");
            self.add(base, renditions::render_base_subagent(&doc).into_bytes());
            self.add(codex, renditions::render_codex_subagent(&doc).into_bytes());
            self.add(
                claude,
                renditions::render_claude_subagent(&doc).into_bytes(),
            );
        }
        Ok(())
    }

    fn verbatim_assets(&mut self, dir: &Path, kind: AssetKind) -> Result<(), RegistryError> {
        for (id, version_entry) in pairs(dir)? {
            let (version, path, file_name) = match kind {
                AssetKind::Skill => {
                    let version: Version = parse(&dir.join(&id), &version_entry)?;
                    (
                        version,
                        dir.join(&id).join(&version_entry).join("SKILL.md"),
                        "SKILL.md".to_owned(),
                    )
                }
                _ => (
                    strip_version(&version_entry, ".md")?,
                    dir.join(&id).join(&version_entry),
                    format!("{id}.md"),
                ),
            };
            let bytes = read(&path)?;
            let mut e = entry(
                EntryKind::Asset,
                &id,
                &version,
                format!("assets/{kind}/{id}/{version}/{file_name}"),
                MEDIA_MARKDOWN,
            );
            e.asset_kind = Some(kind);
            self.add(e, bytes);
        }
        Ok(())
    }

    fn adapters(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_file) in pairs(dir)? {
            let version = strip_version(&version_file, ".md")?;
            let path = dir.join(&id).join(&version_file);
            let text = read_text(&path)?;
            let (src, body): (AdapterSource, _) = parse_frontmatter(&path, &text)?;
            let mut e = entry(
                EntryKind::Asset,
                &id,
                &version,
                format!("assets/host-adapter/{id}/{version}/adapter.md"),
                MEDIA_MARKDOWN,
            );
            e.asset_kind = Some(AssetKind::HostAdapter);
            e.compatible_harnesses = Some(src.compatible_harnesses);
            e.adapter_contract = src.adapter_contract;
            self.add(e, (body.trim().to_owned() + "\n").into_bytes());
        }
        Ok(())
    }

    fn workflows(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_dir) in pairs(dir)? {
            let version: Version = parse(&dir.join(&id), &version_dir)?;
            let root = dir.join(&id).join(&version_dir);
            let def_path = root.join("workflow.json");
            let src: WorkflowSource = serde_json::from_slice(&read(&def_path)?)
                .map_err(|e| source_error(&def_path, e.to_string()))?;
            let workflow_id: crate::ids::WorkflowId = parse(&def_path, &id)?;
            let mut summaries = Vec::new();
            for step_id in &src.steps {
                let step_path = root.join("steps").join(format!("{step_id}.md"));
                let text = read_text(&step_path)?;
                let (step, body): (StepSource, _) = parse_frontmatter(&step_path, &text)?;
                summaries.push(StepSummary {
                    id: step_id.clone(),
                    kind: step.kind,
                    title: step.title.clone(),
                });
                let doc = StepDoc {
                    workflow: workflow_id.clone(),
                    workflow_version: version.clone(),
                    id: step_id.clone(),
                    kind: step.kind,
                    title: step.title,
                    instructions: body.trim().to_owned() + "\n",
                    host_assets: step.host_assets,
                    inputs: step.inputs,
                    outputs: step.outputs,
                    validators: step.validators,
                };
                let mut e = entry(
                    EntryKind::Step,
                    step_id.as_str(),
                    &version,
                    format!("workflows/{id}/{version}/steps/{step_id}.json"),
                    MEDIA_JSON,
                );
                e.workflow = Some(workflow_id.clone());
                self.add(e, to_canonical_bytes(&doc).expect("step serializes"));
            }
            let doc = WorkflowDoc {
                id: workflow_id,
                version: version.clone(),
                title: src.title,
                description: src.description,
                harnesses: src.harnesses,
                required_host_capabilities: src.required_host_capabilities,
                steps: summaries,
            };
            let e = entry(
                EntryKind::Workflow,
                &id,
                &version,
                format!("workflows/{id}/{version}/definition.json"),
                MEDIA_JSON,
            );
            self.add(e, to_canonical_bytes(&doc).expect("workflow serializes"));
        }
        Ok(())
    }
}

fn entry(kind: EntryKind, id: &str, version: &Version, path: String, media_type: &str) -> Entry {
    Entry {
        kind,
        id: id.to_owned(),
        version: version.clone(),
        workflow: None,
        asset_kind: None,
        rendition: None,
        compatible_harnesses: None,
        adapter_contract: None,
        path,
        media_type: media_type.into(),
        bytes: 0,
        sha256: Sha256Digest::of(b""),
    }
}

fn source_error(path: &Path, reason: String) -> RegistryError {
    RegistryError::SourceInvalid {
        file: path.display().to_string(),
        reason,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, RegistryError> {
    fs::read(path).map_err(RegistryError::io(path))
}

fn read_text(path: &Path) -> Result<String, RegistryError> {
    String::from_utf8(read(path)?).map_err(|_| source_error(path, "not UTF-8 text".into()))
}

fn parse<T: std::str::FromStr>(path: &Path, value: &str) -> Result<T, RegistryError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e: T::Err| source_error(path, e.to_string()))
}

fn parse_frontmatter<'t, T: DeserializeOwned>(
    path: &Path,
    text: &'t str,
) -> Result<(T, &'t str), RegistryError> {
    frontmatter::parse(text).map_err(|e| source_error(path, e))
}

fn strip_version(file_name: &str, extension: &str) -> Result<Version, RegistryError> {
    let stem = file_name.strip_suffix(extension).ok_or_else(|| {
        source_error(
            Path::new(file_name),
            format!("expected <version>{extension}"),
        )
    })?;
    parse(Path::new(file_name), stem)
}

/// `(child, grandchild)` names under `dir`, sorted; a missing `dir` has none.
fn pairs(dir: &Path) -> Result<Vec<(String, String)>, RegistryError> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    for child in sorted_names(dir)? {
        for grandchild in sorted_names(&dir.join(&child))? {
            out.push((child.clone(), grandchild));
        }
    }
    Ok(out)
}

fn sorted_names(dir: &Path) -> Result<Vec<String>, RegistryError> {
    let mut names = Vec::new();
    for item in fs::read_dir(dir).map_err(RegistryError::io(dir))? {
        let item = item.map_err(RegistryError::io(dir))?;
        let name = item
            .file_name()
            .into_string()
            .map_err(|_| source_error(&item.path(), "not a UTF-8 name".into()))?;
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Writes a built release into the registry at `out`. An existing release with identical bytes
/// is left alone; one with any different byte is an error, never rewritten.
pub fn publish(out: &Path, built: &BuiltRelease) -> Result<(), RegistryError> {
    let prefix = format!("releases/{}/", built.release);
    let release_dir = out.join("releases").join(built.release.as_str());
    if release_dir.exists() {
        let existing = RegistryFiles::from_dir(out)?;
        let old: Vec<_> = existing.paths_under(&prefix).collect();
        let new: Vec<_> = built.files.paths_under(&prefix).collect();
        let differing = new
            .iter()
            .find(|p| existing.get(p) != built.files.get(p))
            .or_else(|| old.iter().find(|p| built.files.get(p).is_none()));
        if let Some(file) = differing {
            return Err(RegistryError::ReleaseExists {
                file: (*file).to_owned(),
                release: built.release.to_string(),
            });
        }
        return write_keys(out, built);
    }
    write_keys(out, built)?;
    // Stage the release beside the registry and move it into place with one rename, so a
    // crash never leaves a half-written release that could neither verify nor be rebuilt.
    let staging = out.join(format!(".staging-{}", built.release));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(RegistryError::io(&staging))?;
    }
    for path in built.files.paths_under(&prefix) {
        write_atomic(
            &staging.join(&path[prefix.len()..]),
            built.files.get(path).expect("listed"),
        )?;
    }
    fs::create_dir_all(out.join("releases")).map_err(RegistryError::io(out))?;
    fs::rename(&staging, &release_dir).map_err(RegistryError::io(&release_dir))
}

fn write_keys(out: &Path, built: &BuiltRelease) -> Result<(), RegistryError> {
    built
        .files
        .paths_under("keys/")
        .try_for_each(|p| write_atomic(&out.join(p), built.files.get(p).expect("listed")))
}

/// Points `channel` at `release` in the registry at `dir`, after checking the release exists.
/// The caller decides how much verification to demand first (see `rimthan registry promote`).
pub fn set_channel(
    dir: &Path,
    channel: &ChannelName,
    release: &ReleaseId,
) -> Result<(), RegistryError> {
    if !dir
        .join("releases")
        .join(release.as_str())
        .join("manifest.json")
        .is_file()
    {
        return Err(RegistryError::ReleaseNotFound {
            release: release.to_string(),
            available: available_releases(dir),
        });
    }
    let mut files = RegistryFiles::default();
    let path = dir.join(CHANNELS_FILE);
    if path.exists() {
        files.insert(CHANNELS_FILE, read(&path)?);
    }
    let mut channels: ChannelsFile = load_channels(&files)?;
    channels.channels.insert(channel.clone(), release.clone());
    let mut bytes = serde_json::to_vec_pretty(&channels).expect("channels serialize");
    bytes.push(b'\n');
    write_atomic(&path, &bytes)
}

fn available_releases(dir: &Path) -> String {
    let names = sorted_names(&dir.join("releases")).unwrap_or_default();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

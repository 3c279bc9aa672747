//! Building a signed release from its readable source folder (the `rimthan registry build`
//! command), and publishing it into a registry folder without ever rewriting a release.
//!
//! Source layout (see `docs/registry-format.md` §5):
//!
//! ```text
//! workflows/<id>/<version>/workflow.json      steps/<step>.md (YAML frontmatter + instructions)
//!                          examples/<output path>  (optional worked examples, non-JSON outputs)
//! validators/<id>/<version>.md                 (also yields the subagent asset and renditions)
//! skills/<id>/<version>/SKILL.md  commands/<id>/<version>.md  adapters/<id>/<version>.md
//! schemas/<id>/<version>.json               bootstrap.md (optional)
//! ```
//!
//! The output is deterministic: the same source and key give the same bytes, which is how the
//! embedded default release is proven to come from the committed source. Every diagnostic names
//! the source file the author edits, also when the verifier refuses the built release.

mod check_source;
mod checks;
mod examples;
mod layout;
mod publish;
mod source;
mod warning;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use serde::Deserialize;

use self::checks::{Catalog, StepFile, ValidatorSourceFile};
use self::layout::{check_unlisted_steps, check_version_folder};
use self::source::{
    expect_file, pairs, parse, parse_frontmatter, parse_json, read, read_text, source_error,
    strip_version,
};
pub use self::{
    publish::{DRAFTS_DIR, publish, refuse_draft, set_channel, with_draft},
    warning::BuildWarning,
};
use crate::{
    canonical::to_canonical_bytes,
    digest::Sha256Digest,
    error::RegistryError,
    files::RegistryFiles,
    ids::{
        ArtifactId, AssetKind, Harness, HostCapability, ReleaseId, StepId, StepKind,
        ValidatorCapability, Version, WorkflowId, WritePolicy,
    },
    model::{
        AdapterContract, AdapterPin, AssetRef, CheckDoc, Entry, EntryKind, MANIFEST_FORMAT,
        MEDIA_JSON, MEDIA_MARKDOWN, MEDIA_TOML, Manifest, OutputDecl, SchemaRef, StepDoc,
        StepSummary, ValidatorDoc, ValidatorRef, WorkflowDoc,
    },
    renditions,
    signature::{SigningKey, TrustedKeys},
    verify::{Compiled, TrustPolicy, verify_release},
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
    outputs: Vec<OutputSource>,
    validators: Vec<ValidatorRef>,
    #[serde(default)]
    checks: Vec<check_source::CheckSource>,
    #[serde(default)]
    approval: Option<crate::approval::Approval>,
    #[serde(default)]
    deadline: Option<crate::duration::IsoDuration>,
    #[serde(default)]
    on_expiry: Option<crate::ids::OnExpiry>,
}

/// An output as an author declares it: [`OutputDecl`] without `example`, which comes only
/// from the `examples/` folder.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputSource {
    artifact_id: ArtifactId,
    path: String,
    media_type: String,
    schema: Option<SchemaRef>,
    max_bytes: u64,
    write_policy: WritePolicy,
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
    /// A draft ([`build_draft`]): published into `drafts/<id>/`, never into the lock.
    pub draft: bool,
    /// What the build accepted but the author should look at (`registry build --strict`
    /// refuses them).
    pub warnings: Vec<BuildWarning>,
    /// Built registry path → the source file it came from, so publishing names what to edit.
    pub(crate) sources: BTreeMap<String, PathBuf>,
}

struct Builder {
    release: ReleaseId,
    draft: bool,
    entries: Vec<Entry>,
    files: RegistryFiles,
    /// Built registry path → the source file it came from.
    sources: BTreeMap<String, PathBuf>,
    catalog: Catalog,
    schemas: BTreeMap<SchemaRef, PathBuf>,
    used_validators: BTreeSet<ValidatorRef>,
    used_schemas: BTreeSet<SchemaRef>,
    /// What the checks' proofs found worth an author's look.
    check_warnings: Vec<BuildWarning>,
}

/// Builds, signs and verifies a release from `source`.
pub fn build_release(
    source: &Path,
    release: &ReleaseId,
    key: &SigningKey,
) -> Result<BuiltRelease, RegistryError> {
    build(source, release, key, false)
}

/// Builds, signs and verifies a draft from `source`: a release marked `draft` in its signed
/// manifest, which [`publish`] keeps under `drafts/<id>/` and may replace at every build, which
/// no channel may name, and which a server serves only when its operator names it
/// (`docs/registry-format.md` §1.2).
pub fn build_draft(
    source: &Path,
    release: &ReleaseId,
    key: &SigningKey,
) -> Result<BuiltRelease, RegistryError> {
    build(source, release, key, true)
}

fn build(
    source: &Path,
    release: &ReleaseId,
    key: &SigningKey,
    draft: bool,
) -> Result<BuiltRelease, RegistryError> {
    let mut b = Builder {
        release: release.clone(),
        draft,
        entries: Vec::new(),
        files: RegistryFiles::default(),
        sources: BTreeMap::new(),
        catalog: Catalog::default(),
        schemas: BTreeMap::new(),
        used_validators: BTreeSet::new(),
        used_schemas: BTreeSet::new(),
        check_warnings: Vec::new(),
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
        b.add(
            entry,
            bytes,
            &source.join(crate::bootstrap::BOOTSTRAP_SOURCE),
        );
    }
    b.check_unused_validators()?;
    let mut warnings = b.unused_schemas();
    warnings.append(&mut b.check_warnings);
    let mut built = b.finish(key)?;
    built.warnings = warnings;
    Ok(built)
}

impl Builder {
    fn add(&mut self, mut entry: Entry, bytes: Vec<u8>, source: &Path) {
        entry.bytes = bytes.len() as u64;
        entry.sha256 = Sha256Digest::of(&bytes);
        let path = format!("releases/{}/{}", self.release, entry.path);
        self.sources.insert(path.clone(), source.to_owned());
        self.files.insert(path, bytes);
        self.entries.push(entry);
    }

    fn finish(mut self, key: &SigningKey) -> Result<BuiltRelease, RegistryError> {
        self.entries.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = Manifest {
            format: MANIFEST_FORMAT.into(),
            release: self.release.clone(),
            draft: self.draft,
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

        // Never emit what the verifier would refuse; when it refuses, name the source file.
        let mut keys = TrustedKeys::default();
        keys.insert(&public).expect("own key");
        let pins = TrustPolicy::Pinned(BTreeMap::from([(self.release.clone(), manifest_sha256)]));
        verify_release(
            &self.files,
            &self.release,
            &keys,
            &pins,
            &mut Compiled::default(),
        )
        .map_err(|mut e| {
            if let Some(file) = e.file_mut()
                && let Some(source) = self.sources.get(file.as_str())
            {
                *file = source.display().to_string();
            }
            e
        })?;
        Ok(BuiltRelease {
            release: self.release,
            files: self.files,
            manifest_sha256,
            draft: self.draft,
            sources: self.sources,
            warnings: Vec::new(),
        })
    }

    fn check_unused_validators(&self) -> Result<(), RegistryError> {
        match self
            .catalog
            .validators
            .iter()
            .find(|(v, _)| !self.used_validators.contains(*v))
        {
            Some((v, file)) => Err(source_error(
                &file.path,
                format!(
                    "validator {}@{} is run by no step; add it to a step's validators or delete \
                     the file",
                    v.id, v.version
                ),
            )),
            None => Ok(()),
        }
    }

    fn unused_schemas(&self) -> Vec<BuildWarning> {
        self.schemas
            .iter()
            .filter(|(s, _)| !self.used_schemas.contains(*s))
            .map(|(s, path)| BuildWarning::UnusedSchema {
                file: path.display().to_string(),
                schema: format!("{}@{}", s.id, s.version),
            })
            .collect()
    }

    fn schemas(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_file) in pairs(dir)? {
            let version = strip_version(&dir.join(&id), &version_file, ".json")?;
            let path = dir.join(&id).join(&version_file);
            let value: serde_json::Value = parse_json(&path)?;
            self.schemas.insert(
                SchemaRef {
                    id: parse(&path, &id)?,
                    version: version.clone(),
                },
                path.clone(),
            );
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
                &path,
            );
        }
        Ok(())
    }

    fn validators(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_file) in pairs(dir)? {
            let version = strip_version(&dir.join(&id), &version_file, ".md")?;
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
            self.catalog.validators.insert(
                ValidatorRef {
                    id: doc.id.clone(),
                    version: version.clone(),
                },
                ValidatorSourceFile {
                    path: path.clone(),
                    text: text.clone(),
                    inputs: doc.inputs.clone(),
                },
            );
            self.used_schemas.insert(doc.report_schema.clone());
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
                &path,
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
            self.add(
                base,
                renditions::render_base_subagent(&doc).into_bytes(),
                &path,
            );
            self.add(
                codex,
                renditions::render_codex_subagent(&doc).into_bytes(),
                &path,
            );
            self.add(
                claude,
                renditions::render_claude_subagent(&doc).into_bytes(),
                &path,
            );
        }
        Ok(())
    }

    fn verbatim_assets(&mut self, dir: &Path, kind: AssetKind) -> Result<(), RegistryError> {
        for (id, version_entry) in pairs(dir)? {
            let (version, path, file_name) = match kind {
                AssetKind::Skill => {
                    let version: Version =
                        parse(&dir.join(&id).join(&version_entry), &version_entry)?;
                    let path = expect_file(
                        &dir.join(&id).join(&version_entry),
                        "SKILL.md",
                        "a skill folder holds its instructions in SKILL.md",
                    )?;
                    (version, path, "SKILL.md".to_owned())
                }
                _ => (
                    strip_version(&dir.join(&id), &version_entry, ".md")?,
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
            self.add(e, bytes, &path);
        }
        Ok(())
    }

    fn adapters(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_file) in pairs(dir)? {
            let version = strip_version(&dir.join(&id), &version_file, ".md")?;
            let path = dir.join(&id).join(&version_file);
            let text = read_text(&path)?;
            let (src, body): (AdapterSource, _) = parse_frontmatter(&path, &text)?;
            self.catalog
                .adapters
                .entry(id.clone())
                .or_default()
                .insert(version.clone());
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
            self.add(e, (body.trim().to_owned() + "\n").into_bytes(), &path);
        }
        Ok(())
    }

    fn workflows(&mut self, dir: &Path) -> Result<(), RegistryError> {
        for (id, version_dir) in pairs(dir)? {
            let root = dir.join(&id).join(&version_dir);
            let version: Version = parse(&root, &version_dir)?;
            check_version_folder(&root)?;
            let def_path = expect_file(
                &root,
                "workflow.json",
                "every workflow version folder holds its definition in workflow.json",
            )?;
            let src: WorkflowSource = parse_json(&def_path)?;
            let workflow_id: WorkflowId = parse(&def_path, &id)?;
            check_unlisted_steps(&root.join("steps"), &src.steps, &def_path)?;
            self.catalog
                .check_pins(&def_path, &read_text(&def_path)?, &src.harnesses)?;
            let mut docs = Vec::new();
            let mut paths = Vec::new();
            let mut texts = Vec::new();
            let mut declared_checks = Vec::new();
            for step_id in &src.steps {
                let step_path = expect_file(
                    &root.join("steps"),
                    &format!("{step_id}.md"),
                    &format!("step {step_id} is listed in {}", def_path.display()),
                )?;
                let text = read_text(&step_path)?;
                let (step, body): (StepSource, _) = parse_frontmatter(&step_path, &text)?;
                self.used_validators.extend(step.validators.iter().cloned());
                declared_checks.push(step.checks);
                self.used_schemas
                    .extend(step.outputs.iter().filter_map(|o| o.schema.clone()));
                docs.push(StepDoc {
                    workflow: workflow_id.clone(),
                    workflow_version: version.clone(),
                    id: step_id.clone(),
                    kind: step.kind,
                    title: step.title,
                    instructions: body.trim().to_owned() + "\n",
                    host_assets: step.host_assets,
                    inputs: step.inputs,
                    outputs: step
                        .outputs
                        .into_iter()
                        .map(OutputSource::into_decl)
                        .collect(),
                    validators: step.validators,
                    checks: Vec::new(),
                    approval: step.approval,
                    deadline: step.deadline,
                    on_expiry: step.on_expiry,
                });
                paths.push(step_path);
                texts.push(text);
            }
            let files: Vec<StepFile<'_>> = docs
                .iter()
                .zip(&paths)
                .zip(&texts)
                .map(|((doc, path), text)| StepFile { doc, path, text })
                .collect();
            self.catalog.check_steps(&files)?;
            examples::attach(&root.join("examples"), &mut docs)?;
            let declared: Vec<_> = declared_checks
                .into_iter()
                .zip(&paths)
                .zip(&texts)
                .map(
                    |((checks, step_path), step_text)| check_source::DeclaredChecks {
                        step_path,
                        step_text,
                        checks,
                    },
                )
                .collect();
            let check_docs = check_source::documents(&root, &docs, &declared)?;
            let json_examples = self.json_examples(&docs, &check_docs)?;
            self.check_warnings.extend(check_source::prove(
                &root,
                &docs,
                &declared,
                &check_docs,
                &json_examples,
            )?);
            for (doc, step_path) in check_docs.iter().zip(
                check_docs
                    .iter()
                    .map(|c| &paths[docs.iter().position(|d| d.id == c.step).expect("own step")]),
            ) {
                let mut e = entry(
                    EntryKind::Check,
                    doc.id.as_str(),
                    &version,
                    format!("workflows/{id}/{version}/checks/{}.json", doc.id),
                    MEDIA_JSON,
                );
                e.workflow = Some(workflow_id.clone());
                // A script check's bytes are mostly its script: name that file to edit.
                let script = root.join("checks").join(format!("{}.rhai", doc.id));
                let source = if doc.script.is_some() {
                    &script
                } else {
                    step_path
                };
                self.add(
                    e,
                    to_canonical_bytes(doc).expect("check serializes"),
                    source,
                );
            }
            for doc in &mut docs {
                doc.checks = check_docs
                    .iter()
                    .filter(|c| c.step == doc.id)
                    .map(|c| c.id.clone())
                    .collect();
            }
            let mut summaries = Vec::new();
            for (doc, step_path) in docs.into_iter().zip(&paths) {
                summaries.push(StepSummary {
                    id: doc.id.clone(),
                    kind: doc.kind,
                    title: doc.title.clone(),
                });
                let mut e = entry(
                    EntryKind::Step,
                    doc.id.as_str(),
                    &version,
                    format!("workflows/{id}/{version}/steps/{}.json", doc.id),
                    MEDIA_JSON,
                );
                e.workflow = Some(workflow_id.clone());
                self.add(
                    e,
                    to_canonical_bytes(&doc).expect("step serializes"),
                    step_path,
                );
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
            self.add(
                e,
                to_canonical_bytes(&doc).expect("workflow serializes"),
                &def_path,
            );
        }
        Ok(())
    }
}

impl Builder {
    /// The worked example of each JSON output a check reads, as pretty-printed JSON: its
    /// schema's first example, or an instance generated from the schema.
    fn json_examples(
        &self,
        steps: &[StepDoc],
        checks: &[CheckDoc],
    ) -> Result<BTreeMap<ArtifactId, String>, RegistryError> {
        let read: BTreeSet<&ArtifactId> = checks.iter().flat_map(|c| &c.reads).collect();
        let mut examples = BTreeMap::new();
        for output in steps.iter().flat_map(|s| &s.outputs) {
            let Some(schema) = output.schema.as_ref() else {
                continue;
            };
            if output.media_type != MEDIA_JSON || !read.contains(&output.artifact_id) {
                continue;
            }
            let Some(path) = self.schemas.get(schema) else {
                continue;
            };
            let value: serde_json::Value = parse_json(path)?;
            if let Some(example) = crate::instance::example_or_instance(&value) {
                let text = serde_json::to_string_pretty(&example).expect("JSON serializes") + "\n";
                examples.insert(output.artifact_id.clone(), text);
            }
        }
        Ok(examples)
    }
}

impl OutputSource {
    fn into_decl(self) -> OutputDecl {
        OutputDecl {
            artifact_id: self.artifact_id,
            path: self.path,
            media_type: self.media_type,
            schema: self.schema,
            max_bytes: self.max_bytes,
            write_policy: self.write_policy,
            example: None,
        }
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

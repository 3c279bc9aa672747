//! Building result payloads from a session and its pinned release (`docs/engine.md` §4).

use std::sync::Arc;

use rimthan_registry::{
    AdapterContract, Asset, AssetKind, OutputDecl, SchemaRef, Step, StepKind, Validator,
    ValidatorCapability, ValidatorId, VerifiedRelease, Version, Workflow, uri,
};

use crate::{
    error::EngineError,
    model::checkpoint::CheckpointKey,
    model::payload::{
        ActivePayload, CheckPayload, HostAdapterPayload, HostAssetPayload, InputPayload,
        OutputPayload, SESSION_FILE_PATH, SchemaPayload, SessionFile, SessionFileContent,
        SessionFileHost, StepPayload, ValidatorPayload, WorkflowPayload,
    },
    model::session::{PlanRecord, Session, WorkflowRef},
    rules::offers::{Offer, Policy, PolicyCache, offers},
};

/// One validator of a plan: as the plan names it, as the release holds it, and what it may use.
pub(crate) struct Planned<'r, 'p> {
    pub(crate) id: &'p ValidatorId,
    pub(crate) version: &'p Version,
    pub(crate) validator: &'r Validator,
    /// Its declared capabilities that the host grants, in declared order.
    pub(crate) allowed: Vec<ValidatorCapability>,
}

/// Everything in its pinned release a stored session refers to, resolved once per call so
/// that what the store holds is checked, never assumed: anything missing is
/// `stored_session_inconsistent`, not a panic.
pub(crate) struct Pinned<'r> {
    pub(crate) release: &'r VerifiedRelease,
    pub(crate) workflow: &'r Workflow,
    adapter: &'r Asset,
    pub(crate) contract: &'r AdapterContract,
    policy: Arc<Policy>,
}

impl<'r> Pinned<'r> {
    /// Resolves `session`'s workflow, bound adapter, its contract and the compiled repository
    /// policy in `release`.
    pub(crate) fn resolve(
        release: &'r VerifiedRelease,
        session: &Session,
        policies: &PolicyCache,
    ) -> Result<Self, EngineError> {
        let inconsistent = |what: String| EngineError::SessionInconsistent {
            session: session.id.to_string(),
            what,
        };
        let workflow = release
            .workflow(&session.workflow, &session.workflow_version)
            .ok_or_else(|| {
                inconsistent(format!(
                    "workflow {}@{}",
                    session.workflow, session.workflow_version
                ))
            })?;
        if session.step_index > workflow.steps().len() {
            return Err(inconsistent(format!("step {}", session.step_index + 1)));
        }
        let binding = &session.host.adapter;
        let adapter = release
            .asset(AssetKind::HostAdapter, &binding.id, &binding.version)
            .ok_or_else(|| {
                inconsistent(format!("host adapter {}@{}", binding.id, binding.version))
            })?;
        let contract = adapter.base().adapter_contract.as_ref().ok_or_else(|| {
            inconsistent(format!(
                "a contract of host adapter {}@{}",
                binding.id, binding.version
            ))
        })?;
        let policy = policies
            .compile(&session.policy)
            .map_err(|_| inconsistent("a repository policy that compiles".into()))?;
        Ok(Self {
            release,
            workflow,
            adapter,
            contract,
            policy,
        })
    }

    /// The validators `plan` names, in plan order, each paired with its document and the
    /// capabilities this session's host lets it use: the one pairing of what a plan declared
    /// with what the release holds, for the plan's payload and the reports' check alike.
    pub(crate) fn planned<'p>(
        &self,
        session: &Session,
        plan: &'p PlanRecord,
    ) -> Result<Vec<Planned<'r, 'p>>, EngineError> {
        plan.validators
            .iter()
            .map(|(id, version)| {
                let validator = self.release.validator(id, version).ok_or_else(|| {
                    EngineError::SessionInconsistent {
                        session: session.id.to_string(),
                        what: format!("validator {id}@{version}"),
                    }
                })?;
                let allowed = validator
                    .doc()
                    .capabilities
                    .iter()
                    .filter(|c| session.host.validator_capabilities.contains(c))
                    .copied()
                    .collect();
                Ok(Planned {
                    id,
                    version,
                    validator,
                    allowed,
                })
            })
            .collect()
    }

    pub(crate) fn active_step(&self, session: &Session) -> Option<&'r Step> {
        self.workflow.steps().get(session.step_index)
    }

    pub(crate) fn schema(&self, schema: &SchemaRef) -> SchemaPayload {
        let entry = self
            .release
            .schema(&schema.id, &schema.version)
            .expect("verified reference")
            .entry();
        SchemaPayload {
            id: schema.id.to_string(),
            version: schema.version.to_string(),
            uri: uri::schema(self.release.id(), &schema.id, &schema.version),
            sha256: entry.sha256.to_string(),
        }
    }

    /// The declared output with this artifact id, anywhere in the workflow.
    pub(crate) fn output(&self, artifact_id: &str) -> Option<&'r OutputDecl> {
        self.workflow
            .steps()
            .iter()
            .flat_map(|s| s.doc().outputs.iter())
            .find(|o| o.artifact_id.as_str() == artifact_id)
    }

    pub(crate) fn input(&self, session: &Session, artifact_id: &str) -> InputPayload {
        let path = self
            .output(artifact_id)
            .map(|o| o.path.clone())
            .unwrap_or_default();
        let sha256 = session.ledger.get(&path).map(|a| a.sha256.to_string());
        InputPayload {
            artifact_id: artifact_id.to_owned(),
            path,
            sha256,
            send_text: false,
        }
    }

    pub(crate) fn offers(&self, session: &Session) -> Vec<Offer<'r>> {
        offers(
            self.release,
            self.contract,
            &session.host,
            &self.policy,
            &self.workflow.steps()[0].doc().host_assets,
        )
    }

    fn step_payload(&self, session: &Session, step: &Step) -> StepPayload {
        let doc = step.doc();
        let release = self.release.id();
        let read = |artifact: &rimthan_registry::ArtifactId| {
            step.checks()
                .iter()
                .any(|c| c.doc().reads.contains(artifact))
        };
        // The approver of a step that asks for sign-off reads every output's text.
        let signed = doc.approval.is_some();
        StepPayload {
            id: doc.id.to_string(),
            kind: doc.kind,
            title: doc.title.clone(),
            instructions: doc.instructions.clone(),
            uri: uri::step(release, &doc.workflow, &doc.workflow_version, &doc.id),
            outputs: doc
                .outputs
                .iter()
                .map(|o| OutputPayload {
                    artifact_id: o.artifact_id.to_string(),
                    path: o.path.clone(),
                    owner_step: doc.id.to_string(),
                    media_type: o.media_type.clone(),
                    schema: o.schema.as_ref().map(|s| self.schema(s)),
                    max_bytes: o.max_bytes,
                    write_policy: o.write_policy,
                    send_text: signed || read(&o.artifact_id),
                })
                .collect(),
            inputs: doc
                .inputs
                .iter()
                .map(|i| InputPayload {
                    send_text: read(i),
                    ..self.input(session, i.as_str())
                })
                .collect(),
            validators: doc
                .validators
                .iter()
                .map(|v| {
                    let validator = self
                        .release
                        .validator(&v.id, &v.version)
                        .expect("verified reference");
                    ValidatorPayload {
                        id: v.id.to_string(),
                        version: v.version.to_string(),
                        uri: uri::validator(release, &v.id, &v.version),
                        sha256: validator.entry().sha256.to_string(),
                        capabilities: validator.doc().capabilities.clone(),
                    }
                })
                .collect(),
            checks: step
                .checks()
                .iter()
                .map(|c| {
                    let check = c.doc();
                    CheckPayload {
                        id: check.id.to_string(),
                        title: check.title.clone(),
                        description: check.description.clone(),
                        uri: uri::check(
                            release,
                            &check.workflow,
                            &check.workflow_version,
                            &check.id,
                        ),
                        sha256: c.entry().sha256.to_string(),
                        reads: check.reads.iter().map(|a| a.to_string()).collect(),
                    }
                })
                .collect(),
        }
    }

    /// The session file for `session` at `checkpoint`.
    pub(crate) fn session_file(
        &self,
        session: &Session,
        checkpoint: &str,
        server: &str,
    ) -> SessionFile {
        SessionFile {
            path: SESSION_FILE_PATH.into(),
            content: SessionFileContent {
                server: server.to_owned(),
                session_id: session.id.to_string(),
                checkpoint: checkpoint.to_owned(),
                release: session.release.to_string(),
                workflow: WorkflowRef {
                    id: session.workflow.to_string(),
                    version: session.workflow_version.to_string(),
                },
                active_step: self.active_step(session).map(|s| s.doc().id.to_string()),
                status: session.status,
                host: SessionFileHost::from_binding(&session.host),
                updated_at: session.updated_at.clone(),
            },
        }
    }

    /// The active-step payload of `session`.
    pub(crate) fn active_payload(
        &self,
        session: &Session,
        key: &CheckpointKey,
        server: &str,
    ) -> ActivePayload {
        let checkpoint = key.issue(&session.id, session.seq);
        let release = self.release.id();
        let doc = self.workflow.doc();
        let step = self
            .active_step(session)
            .filter(|_| !session.status.is_terminal());
        let host_assets = match step {
            Some(s) if s.doc().kind == StepKind::Setup => self
                .offers(session)
                .iter()
                .map(|o| HostAssetPayload {
                    kind: o.asset.kind,
                    id: o.asset.id.to_string(),
                    version: o.asset.version.to_string(),
                    uri: uri::asset(
                        release,
                        o.asset.kind,
                        &o.asset.id,
                        &o.asset.version,
                        o.content.rendition,
                    ),
                    sha256: o.content.sha256.to_string(),
                    delivery_modes: o.modes.clone(),
                    project_local_path: o.offered_path().map(str::to_owned),
                })
                .collect(),
            _ => Vec::new(),
        };
        let approval = session.approval.as_ref().and_then(|pending| {
            let declared = step?.doc().approval.as_ref()?;
            Some(crate::model::payload::ApprovalPayload {
                step: pending.step.to_string(),
                approvals_needed: declared.approvers,
                approvals: pending.approvals.clone(),
                facilitators: declared.facilitators,
                roles: declared.roles.iter().map(ToString::to_string).collect(),
                self_approval: declared.self_approval,
                waivable: pending.waivable.clone(),
                waivers: pending.waivers.clone(),
                outputs: pending
                    .outputs
                    .iter()
                    .map(|(path, a)| crate::model::payload::ApprovalOutput {
                        path: path.clone(),
                        sha256: a.sha256.to_string(),
                        bytes: a.bytes,
                    })
                    .collect(),
                remind_at: pending.remind_at.clone(),
                expires_at: pending.expires_at.clone(),
                on_expiry: pending.on_expiry,
            })
        });
        ActivePayload {
            status: session.status,
            session_id: session.id.to_string(),
            checkpoint: checkpoint.clone(),
            release: release.to_string(),
            draft: self.release.is_draft(),
            workflow: WorkflowPayload {
                id: doc.id.to_string(),
                version: doc.version.to_string(),
                uri: uri::workflow(release, &doc.id, &doc.version),
            },
            step: step.map(|s| self.step_payload(session, s)),
            host_adapter: HostAdapterPayload {
                id: session.host.adapter.id.to_string(),
                version: session.host.adapter.version.to_string(),
                uri: uri::asset(
                    release,
                    AssetKind::HostAdapter,
                    &session.host.adapter.id,
                    &session.host.adapter.version,
                    None,
                ),
                sha256: self.adapter.base().sha256.to_string(),
            },
            host_assets,
            session_file: self.session_file(session, &checkpoint, server),
            findings: session.findings.clone(),
            provenance: None,
            approval,
            deadline: session
                .deadline
                .clone()
                .filter(|_| !session.status.is_terminal()),
        }
    }
}

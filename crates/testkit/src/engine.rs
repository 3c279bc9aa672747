//! Test support: engines on every store backend, and a scripted harness that declares, attests
//! and reports the way a real one would, with the worked examples the shipped release carries.

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock},
};

pub use crate::fs::copy_dir;

use rimthan_engine::{
    ActivePayload, AdapterDeclaration, ArtifactAttestation, Delivery, Engine, HostAttestation,
    HostDeclaration, InputText, OutputAttestation, PrepareRequest, PrepareResult, Releases, Report,
    ReportFinding, RepositoryPolicy, SessionId, Severity, StartRequest, StartResult, Status,
    StepResult, Store, SubmitRequest, ValidationPlan, Verdict,
    store::{PostgresStore, SqliteStore},
};
use rimthan_registry::{
    DeliveryMode, HostCapability, RegistryFiles, Sha256Digest, SigningKey, StepKind,
    ValidatorCapability, WorkflowId, build_release, external_policy, publish, set_channel,
    verify_embedded, verify_registry,
};

/// The environment variable naming the PostgreSQL server for tests.
pub const PG_ENV: &str = "RIMTHAN_TEST_DATABASE_URL";

/// The embedded default registry, channel `stable`.
pub fn releases() -> Arc<Releases> {
    Arc::new(Releases::new(
        verify_embedded().unwrap(),
        "stable".parse().unwrap(),
    ))
}

/// A release built from the source folder `source` as 2027.01.0, signed with a fresh key, as the
/// only release of `stable`.
pub fn releases_built_from(source: &std::path::Path) -> Arc<Releases> {
    Arc::new(Releases::new(
        registry_built_from(source),
        "stable".parse().unwrap(),
    ))
}

/// The registry `registry build` makes of `source`, as release 2027.01.0 on `stable`, verified
/// as an external registry is.
pub fn registry_built_from(source: &std::path::Path) -> rimthan_registry::VerifiedRegistry {
    let out = tempfile::tempdir().unwrap();
    let release = "2027.01.0".parse().unwrap();
    let key = SigningKey::generate().unwrap();
    publish(out.path(), &build_release(source, &release, &key).unwrap()).unwrap();
    set_channel(out.path(), &"stable".parse().unwrap(), &release).unwrap();
    verify_registry(
        &RegistryFiles::from_dir(out.path()).unwrap(),
        &external_policy(),
    )
    .unwrap()
}

/// An engine on the embedded default registry over `store`.
pub async fn engine_on(store: Arc<dyn Store>) -> Engine {
    Engine::new(releases(), store, None).await.unwrap()
}

/// A SQLite store in memory.
pub async fn sqlite_memory() -> Arc<dyn Store> {
    Arc::new(SqliteStore::open("sqlite::memory:").await.unwrap())
}

/// A SQLite file store in a temporary folder (kept alive by the returned guard).
pub async fn sqlite_file() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("rimthan.db").display());
    (Arc::new(SqliteStore::open(&url).await.unwrap()), dir)
}

/// A PostgreSQL store in a fresh schema, or `None` (with a notice) when no server is configured.
pub async fn postgres() -> Option<Arc<dyn Store>> {
    let Ok(url) = std::env::var(PG_ENV) else {
        eprintln!("{PG_ENV} is not set: skipping this PostgreSQL test");
        return None;
    };
    let schema = format!("t_{}", rimthan_engine::SessionId::generate());
    Some(Arc::new(
        PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    ))
}

/// Two PostgreSQL stores on one fresh schema, each with its own connections and session cache,
/// as two replicas have; `None` (with a notice) when no server is configured.
pub async fn postgres_replicas() -> Option<[Arc<dyn Store>; 2]> {
    let Ok(url) = std::env::var(PG_ENV) else {
        eprintln!("{PG_ENV} is not set: skipping this PostgreSQL test");
        return None;
    };
    let schema = format!("t_{}", rimthan_engine::SessionId::generate());
    let a = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let b = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    Some([Arc::new(a), Arc::new(b)])
}

/// The worked example the embedded release gives for the output at `path` (the step's inlined
/// example, or the output schema's first `examples` entry), as a harness would write it. Read
/// once: benchmarks and fuzz targets call this per session.
pub fn sample(path: &str) -> Vec<u8> {
    static SAMPLES: std::sync::OnceLock<std::collections::BTreeMap<String, Vec<u8>>> =
        std::sync::OnceLock::new();
    let samples = SAMPLES.get_or_init(|| {
        let registry = verify_embedded().unwrap();
        let release = registry.channel(&"stable".parse().unwrap()).unwrap();
        release
            .workflows()
            .flat_map(|w| w.steps())
            .flat_map(|s| s.doc().outputs.iter())
            .map(|output| {
                let bytes = match (&output.example, &output.schema) {
                    (Some(example), _) => example.clone().into_bytes(),
                    (None, Some(schema)) => {
                        let schema = release.schema(&schema.id, &schema.version).unwrap();
                        let mut bytes = serde_json::to_vec_pretty(&schema.value()["examples"][0])
                            .expect("JSON serializes");
                        bytes.push(b'\n');
                        bytes
                    }
                    (None, None) => panic!("shipped output {} has no example", output.path),
                };
                (output.path.clone(), bytes)
            })
            .collect()
    });
    samples
        .get(path)
        .unwrap_or_else(|| panic!("no shipped output at {path}"))
        .clone()
}

/// Every host capability there is.
pub fn all_host_capabilities() -> Vec<HostCapability> {
    HostCapability::ALL.to_vec()
}

/// The workflow the scripted harness starts: the embedded release's first by id, with the
/// adapter version its newest version pins for each harness. Read once.
fn default_workflow() -> &'static (WorkflowId, BTreeMap<String, String>) {
    static DEFAULT: OnceLock<(WorkflowId, BTreeMap<String, String>)> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        let registry = verify_embedded().unwrap();
        let release = registry.channel(&"stable".parse().unwrap()).unwrap();
        let first = release
            .workflows()
            .next()
            .expect("the release has a workflow");
        let id = first.doc().id.clone();
        let newest = release.latest_workflow(&id).expect("its newest version");
        let pins = newest
            .doc()
            .harnesses
            .iter()
            .map(|(harness, pin)| (harness.as_str().to_owned(), pin.version.to_string()))
            .collect();
        (id, pins)
    })
}

/// A start of the default workflow for `harness`, declaring the adapter it pins and every
/// capability.
pub fn start_request(harness: &str) -> StartRequest {
    let (workflow, pins) = default_workflow();
    StartRequest {
        workflow_id: workflow.clone(),
        workflow_version: None,
        release: None,
        channel: None,
        host: HostDeclaration {
            harness: harness.into(),
            adapter: Some(AdapterDeclaration {
                id: Some(harness.into()),
                version: pins.get(harness).cloned(),
            }),
            capabilities: all_host_capabilities(),
            validator_capabilities: vec![
                ValidatorCapability::WorkspaceRead,
                ValidatorCapability::WebRead,
                ValidatorCapability::GitRead,
            ],
        },
        repository_policy: RepositoryPolicy::default(),
        idempotency_key: None,
    }
}

/// The active payload of a start, or a panic naming what came back instead.
pub fn active(result: StartResult) -> ActivePayload {
    match result {
        StartResult::Active(p) => *p,
        other => panic!(
            "expected an active start, got {}",
            serde_json::to_string_pretty(&other).unwrap()
        ),
    }
}

/// The active payload of a step result, or a panic naming what came back instead.
pub fn step_active(result: StepResult) -> ActivePayload {
    match result {
        StepResult::Active(p) => *p,
        other => panic!(
            "expected an active payload, got {}",
            serde_json::to_string_pretty(&other).unwrap()
        ),
    }
}

/// The validation plan of a prepare, or a panic naming what came back instead.
pub fn ready(result: PrepareResult) -> ValidationPlan {
    match result {
        PrepareResult::Ready(p) => p,
        other => panic!(
            "expected a plan, got {}",
            serde_json::to_string_pretty(&other).unwrap()
        ),
    }
}

/// The codes of a rejected or blocked result, as JSON sees them.
pub fn codes(result: &impl serde::Serialize) -> Vec<String> {
    let value = serde_json::to_value(result).unwrap();
    let list = value.get("failures").or_else(|| value.get("blockers"));
    list.and_then(|l| l.as_array())
        .map(|l| {
            l.iter()
                .map(|f| f["code"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The host attestation a faithful harness would give for a setup payload: every asset,
/// project-local where offered, with the exact digest.
pub fn host_attestation(payload: &ActivePayload, start: &StartRequest) -> HostAttestation {
    HostAttestation {
        harness: start.host.harness.clone(),
        adapter: start.host.adapter.clone().unwrap(),
        capabilities: start.host.capabilities.clone(),
        validator_capabilities: start.host.validator_capabilities.clone(),
        deliveries: payload
            .host_assets
            .iter()
            .map(|a| {
                let local = a.project_local_path.clone();
                Delivery {
                    kind: a.kind,
                    id: a.id.clone(),
                    version: a.version.clone(),
                    sha256: a.sha256.clone(),
                    delivery_mode: if local.is_some() {
                        DeliveryMode::ProjectLocal
                    } else {
                        DeliveryMode::DynamicContext
                    },
                    path: local,
                }
            })
            .collect(),
    }
}

/// The output attestation a faithful harness gives after writing the sample files.
pub fn output_attestation(payload: &ActivePayload) -> OutputAttestation {
    let step = payload.step.as_ref().unwrap();
    OutputAttestation {
        artifacts: step
            .outputs
            .iter()
            .map(|o| {
                let bytes = sample(&o.path);
                let json = o.media_type == "application/json";
                ArtifactAttestation {
                    artifact_id: o.artifact_id.clone(),
                    path: o.path.clone(),
                    owner_step: o.owner_step.clone(),
                    media_type: o.media_type.clone(),
                    schema_sha256: o.schema.as_ref().map(|s| s.sha256.clone()),
                    bytes: bytes.len() as u64,
                    sha256: Sha256Digest::of(&bytes).to_string(),
                    symlink_free: true,
                    read_back: true,
                    write_policy: o.write_policy,
                    content: json.then(|| serde_json::from_slice(&bytes).unwrap()),
                    text: o.send_text.then(|| String::from_utf8(bytes).unwrap()),
                }
            })
            .collect(),
        inputs: step
            .inputs
            .iter()
            .filter(|i| i.send_text)
            .map(|i| InputText {
                artifact_id: i.artifact_id.clone(),
                path: i.path.clone(),
                text: String::from_utf8(sample(&i.path)).unwrap(),
            })
            .collect(),
    }
}

/// The prepare request a faithful harness makes for the active step.
pub fn prepare(payload: &ActivePayload, start: &StartRequest) -> PrepareRequest {
    let step = payload.step.as_ref().unwrap();
    let setup = step.kind == StepKind::Setup;
    PrepareRequest {
        checkpoint: payload.checkpoint.clone(),
        step_id: step.id.clone(),
        host_attestation: setup.then(|| host_attestation(payload, start)),
        output_attestation: (!setup).then(|| output_attestation(payload)),
    }
}

/// One report per planned validator, each reading exactly its inputs.
pub fn reports(plan: &ValidationPlan, verdict: Verdict) -> Vec<Report> {
    plan.validators
        .iter()
        .map(|v| Report {
            validator_id: v.id.clone(),
            validator_version: v.version.clone(),
            verdict,
            summary: format!("{} checked the declared inputs.", v.id),
            findings: match verdict {
                Verdict::Pass => vec![],
                Verdict::Fail => vec![ReportFinding {
                    severity: Severity::Error,
                    message: "The first declared input breaks a rule of this validator.".into(),
                    path: v.inputs.first().map(|i| i.path.clone()),
                    pointer: None,
                }],
            },
            inputs_read: v.inputs.iter().map(|i| i.path.clone()).collect(),
            capabilities_used: v.capabilities.clone(),
            extra: Default::default(),
        })
        .collect()
}

/// One report per planned validator, each with `verdict`.
pub fn submit(payload: &ActivePayload, plan: &ValidationPlan, verdict: Verdict) -> SubmitRequest {
    SubmitRequest {
        checkpoint: payload.checkpoint.clone(),
        validation_id: plan.validation_id.clone(),
        reports: reports(plan, verdict),
    }
}

/// Drives one step: prepare with faithful evidence, then submit passing reports.
pub async fn pass_step(
    engine: &Engine,
    payload: &ActivePayload,
    start: &StartRequest,
) -> ActivePayload {
    let plan = ready(engine.prepare(prepare(payload, start), None).await.unwrap());
    step_active(
        engine
            .submit(submit(payload, &plan, Verdict::Pass), None)
            .await
            .unwrap(),
    )
}

/// Signs off the step `session` waits for, as facilitators of every organization would: one
/// distinct approver per approval the step still needs, each deciding on the revision the store
/// holds, until the session no longer waits. Drivers of whole sessions call it where a person
/// would decide; the decisions are the engine's own, audited like any other.
pub async fn sign_off(engine: &Engine, session: &SessionId) {
    use rimthan_engine::approval::{
        Approver, Decision, DecisionRequest, DecisionResult, FacilitatorOf, Identity,
    };
    let mut approver = 0;
    loop {
        let current = engine
            .store()
            .load_session(session)
            .await
            .unwrap()
            .expect("the session exists");
        let pending = match &current.approval {
            Some(pending) if current.status == Status::AwaitingApproval => pending,
            _ => return,
        };
        approver += 1;
        let by = Approver {
            principal: rimthan_engine::Principal {
                subject: format!("testkit-approver-{approver}"),
                organization: None,
            },
            facilitator: FacilitatorOf::Everyone,
            roles: Vec::new(),
            identity: Identity::Verified,
        };
        let req = DecisionRequest {
            session: session.clone(),
            step: pending.step.clone(),
            revision: current.revision,
            expected: Default::default(),
            decision: Decision::Approve {
                note: Some("Signed off by the test harness.".into()),
            },
        };
        match engine.decide(req, &by).await.unwrap() {
            DecisionResult::Recorded { .. } => {}
            DecisionResult::Refused { failure } => panic!("sign-off refused: {failure:?}"),
        }
    }
}

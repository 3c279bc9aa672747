//! Table-driven mutations: each field of a valid host attestation and of a valid output
//! attestation is changed alone, and the exact code each change yields is asserted.

use rimthan_engine::{
    ActivePayload, ArtifactAttestation, Delivery, Engine, HostAttestation, PrepareRequest,
    StartRequest,
};
use rimthan_registry::{AssetKind, DeliveryMode, HostCapability, ValidatorCapability, WritePolicy};

use crate::common::*;

async fn at_setup() -> (Engine, StartRequest, ActivePayload) {
    let engine = engine_on(sqlite_memory().await).await;
    let start = start_request("claude-code");
    let payload = active(engine.start(start.clone(), None).await.unwrap());
    (engine, start, payload)
}

type HostMutation = (
    &'static str,
    fn(&mut HostAttestation),
    &'static [&'static str],
);

const HOST_MUTATIONS: &[HostMutation] = &[
    (
        "harness",
        |a| a.harness = "codex".into(),
        &["host_binding_mismatch"],
    ),
    (
        "adapter.id",
        |a| a.adapter.id = Some("codex".into()),
        &["host_binding_mismatch"],
    ),
    (
        "adapter.version",
        |a| a.adapter.version = Some("1.0.0".into()),
        &["host_binding_mismatch"],
    ),
    (
        "capabilities",
        |a| {
            a.capabilities.pop();
        },
        &["capability_binding_mismatch"],
    ),
    (
        "validator_capabilities",
        |a| {
            a.validator_capabilities
                .push(ValidatorCapability::BrowserRead)
        },
        &["capability_binding_mismatch"],
    ),
    (
        "deliveries[0] removed",
        |a| {
            a.deliveries.remove(0);
        },
        &["asset_not_delivered"],
    ),
    (
        "deliveries[0].kind",
        |a| a.deliveries[0].kind = AssetKind::Command,
        &["asset_not_delivered", "unexpected_delivery"],
    ),
    (
        "deliveries[0].id",
        |a| a.deliveries[0].id = "other-skill".into(),
        &["asset_not_delivered", "unexpected_delivery"],
    ),
    (
        "deliveries[0].version",
        |a| a.deliveries[0].version = "1.0.1".into(),
        &["asset_digest_mismatch"],
    ),
    (
        "deliveries[0].sha256",
        |a| a.deliveries[0].sha256 = "0".repeat(64),
        &["asset_digest_mismatch"],
    ),
    (
        "deliveries[0].delivery_mode",
        |a| {
            a.deliveries[0].delivery_mode = DeliveryMode::DynamicContext;
        },
        &["project_local_path_mismatch"],
    ),
    (
        "deliveries[0].path",
        |a| a.deliveries[0].path = Some(".claude/skills/x/SKILL.md".into()),
        &["project_local_path_mismatch"],
    ),
    (
        "deliveries[0].path removed",
        |a| a.deliveries[0].path = None,
        &["project_local_path_mismatch"],
    ),
    (
        "deliveries duplicated",
        |a| {
            let d = a.deliveries[0].clone();
            a.deliveries.push(d);
        },
        &["unexpected_delivery", "host_asset_path_collision"],
    ),
    (
        "delivery on an output path",
        |a| a.deliveries[0].path = Some("research/question.json".into()),
        &["project_local_path_mismatch", "host_asset_path_collision"],
    ),
    (
        "extra delivery",
        |a| {
            a.deliveries.push(Delivery {
                kind: AssetKind::Skill,
                id: "extra".into(),
                version: "1.0.0".into(),
                sha256: "0".repeat(64),
                delivery_mode: DeliveryMode::DynamicContext,
                path: None,
            })
        },
        &["unexpected_delivery"],
    ),
];

#[tokio::test]
async fn each_host_attestation_field_change_yields_its_code() {
    let (engine, start, payload) = at_setup().await;
    for (field, mutate, expected) in HOST_MUTATIONS {
        let mut att = host_attestation(&payload, &start);
        mutate(&mut att);
        let mut req = prepare(&payload, &start);
        req.host_attestation = Some(att);
        let result = engine.prepare(req, None).await.unwrap();
        assert_eq!(codes(&result), *expected, "mutating {field}");
    }
}

#[tokio::test]
async fn project_local_delivery_is_refused_where_only_dynamic_context_is_offered() {
    // A codex host without project-local-assets may not claim a project-local copy.
    let engine = engine_on(sqlite_memory().await).await;
    let mut start = start_request("codex");
    start
        .host
        .capabilities
        .retain(|c| *c != HostCapability::ProjectLocalAssets);
    let payload = active(engine.start(start.clone(), None).await.unwrap());
    let mut att = host_attestation(&payload, &start);
    att.deliveries[1].delivery_mode = DeliveryMode::ProjectLocal;
    att.deliveries[1].path = Some(".codex/agents/scope-reviewer.toml".into());
    let mut req = prepare(&payload, &start);
    req.host_attestation = Some(att);
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["delivery_mode_not_allowed"]
    );
}

async fn at_frame_question() -> (Engine, StartRequest, ActivePayload) {
    let (engine, start, payload) = at_setup().await;
    let next = pass_step(&engine, &payload, &start).await;
    (engine, start, next)
}

type OutputMutation = (
    &'static str,
    fn(&mut ArtifactAttestation),
    &'static [&'static str],
);

const OUTPUT_MUTATIONS: &[OutputMutation] = &[
    (
        "artifact_id",
        |a| a.artifact_id = "question".into(),
        &["output_missing", "artifact_binding_mismatch"],
    ),
    (
        "path",
        |a| a.path = "research/q.json".into(),
        &["output_path_mismatch"],
    ),
    (
        "owner_step",
        |a| a.owner_step = "gather-sources".into(),
        &["owner_step_mismatch"],
    ),
    (
        "media_type",
        |a| a.media_type = "text/plain".into(),
        &["media_type_mismatch"],
    ),
    (
        "schema_sha256",
        |a| a.schema_sha256 = Some("0".repeat(64)),
        &["schema_digest_mismatch"],
    ),
    (
        "schema_sha256 removed",
        |a| a.schema_sha256 = None,
        &["schema_digest_mismatch"],
    ),
    (
        "bytes",
        |a| a.bytes = 16 * 1024 + 1,
        &["max_bytes_exceeded"],
    ),
    (
        "sha256",
        |a| a.sha256 = "not-a-digest".into(),
        &["content_digest_mismatch"],
    ),
    (
        "symlink_free",
        |a| a.symlink_free = false,
        &["symlink_in_path"],
    ),
    (
        "read_back",
        |a| a.read_back = false,
        &["output_not_read_back"],
    ),
    (
        "write_policy",
        |a| a.write_policy = WritePolicy::CreateOwned,
        &["write_policy_mismatch"],
    ),
    (
        "content",
        |a| a.content = Some(serde_json::json!({"question": "Why?"})),
        &["output_content_mismatch"],
    ),
    (
        "text and content removed",
        |a| {
            a.content = None;
            a.text = None;
        },
        &["schema_validation_failed"],
    ),
    (
        "text not JSON",
        |a| a.text = Some("{".repeat(a.bytes as usize)),
        &["schema_validation_failed"],
    ),
];

#[tokio::test]
async fn each_output_attestation_field_change_yields_its_code() {
    let (engine, start, payload) = at_frame_question().await;
    for (field, mutate, expected) in OUTPUT_MUTATIONS {
        let mut req: PrepareRequest = prepare(&payload, &start);
        let att = req.output_attestation.as_mut().unwrap();
        mutate(&mut att.artifacts[0]);
        let result = engine.prepare(req, None).await.unwrap();
        assert_eq!(codes(&result), *expected, "mutating {field}");
    }
}

#[tokio::test]
async fn schema_failures_carry_json_pointers_in_a_stable_order() {
    let (engine, start, payload) = at_frame_question().await;
    let mut req = prepare(&payload, &start);
    // Without a text the schema judges `content` (with one, it judges the text).
    let artifact = &mut req.output_attestation.as_mut().unwrap().artifacts[0];
    artifact.text = None;
    let content = artifact.content.as_mut().unwrap();
    content["scope"]["in"] = serde_json::json!([]);
    content["success_criteria"] = serde_json::json!("one");
    let first = serde_json::to_value(engine.prepare(req.clone(), None).await.unwrap()).unwrap();
    let second = serde_json::to_value(engine.prepare(req, None).await.unwrap()).unwrap();
    assert_eq!(first, second, "same input, same output");
    let pointers: Vec<_> = first["failures"][0]["detail"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(pointers, ["/scope/in", "/success_criteria"]);
}

#[tokio::test]
async fn unexpected_and_missing_outputs_are_named() {
    let (engine, start, payload) = at_frame_question().await;
    let mut req = prepare(&payload, &start);
    let att = req.output_attestation.as_mut().unwrap();
    let mut extra = att.artifacts[0].clone();
    extra.artifact_id = "scratch".into();
    extra.path = "research/scratch.json".into();
    att.artifacts.push(extra);
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["unexpected_output"]
    );
    let mut req = prepare(&payload, &start);
    req.output_attestation.as_mut().unwrap().artifacts.clear();
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["output_missing"]
    );
}

#[tokio::test]
async fn attestation_types_are_bound_to_their_steps() {
    let (engine, start, payload) = at_setup().await;
    let mut req = prepare(&payload, &start);
    req.output_attestation = Some(rimthan_engine::OutputAttestation {
        artifacts: vec![],
        inputs: vec![],
    });
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["attestation_type_not_allowed"]
    );
    let next = pass_step(&engine, &payload, &start).await;
    let mut req = prepare(&next, &start);
    req.host_attestation = Some(host_attestation(&payload, &start));
    req.output_attestation = None;
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["attestation_type_not_allowed"]
    );
    let mut req = prepare(&next, &start);
    req.step_id = "gather-sources".into();
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["step_not_active"]
    );
}

//! Start-time blockers (`docs/engine.md` §2.2) and the seed-named start tests.

use rimthan_engine::{AdapterDeclaration, Code, StartResult};
use rimthan_registry::{DeliveryMode, HostCapability, ValidatorCapability};

use crate::common::*;

async fn blocked(request: rimthan_engine::StartRequest) -> Vec<String> {
    let engine = engine_on(sqlite_memory().await).await;
    let result = engine.start(request, None).await.unwrap();
    assert!(
        matches!(result, StartResult::Blocked(_)),
        "{}",
        serde_json::to_string(&result).unwrap()
    );
    codes(&result)
}

#[tokio::test]
async fn unknown_harness_is_unsupported() {
    let mut req = start_request("claude-code");
    req.host.harness = "vim".into();
    // The unknown harness is named, and nothing else: the pinned adapter cannot be judged.
    assert_eq!(blocked(req).await, ["unsupported_harness"]);
}

#[tokio::test]
async fn missing_adapter_declaration_is_unsupported_host_adapter() {
    let mut req = start_request("codex");
    req.host.adapter = None;
    assert_eq!(blocked(req).await, ["unsupported_host_adapter"]);
}

#[tokio::test]
async fn adapter_of_another_harness_is_unsupported_and_mismatched() {
    let mut req = start_request("codex");
    req.host.adapter = Some(AdapterDeclaration {
        id: Some("claude-code".into()),
        version: Some("1.1.0".into()),
    });
    assert_eq!(
        blocked(req).await,
        ["unsupported_host_adapter", "host_adapter_binding_mismatch"]
    );
}

#[tokio::test]
async fn adapter_not_in_release_is_missing() {
    let mut req = start_request("codex");
    req.host.adapter = Some(AdapterDeclaration {
        id: Some("codex".into()),
        version: Some("9.9.9".into()),
    });
    assert_eq!(
        blocked(req).await,
        [
            "host_adapter_asset_missing",
            "host_adapter_binding_mismatch"
        ]
    );
}

#[tokio::test]
async fn test_legacy_adapter_without_typed_contract_loads_but_cannot_start() {
    // Start half: the legacy adapter is in the verified release, yet a start selecting it is
    // blocked before any session exists.
    let mut req = start_request("codex");
    req.host.adapter = Some(AdapterDeclaration {
        id: Some("legacy-generic".into()),
        version: Some("1.0.0".into()),
    });
    let engine = engine_on(sqlite_memory().await).await;
    let result = engine.start(req, None).await.unwrap();
    let c = codes(&result);
    assert_eq!(
        c,
        [
            "host_adapter_contract_unavailable",
            "host_adapter_binding_mismatch"
        ]
    );
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["status"], "blocked");
    assert!(json.get("session_id").is_none() && json.get("host_assets").is_none());
}

#[tokio::test]
async fn every_missing_capability_is_named() {
    let mut req = start_request("claude-code");
    req.host.capabilities.retain(|c| {
        *c != HostCapability::NativeSubagents && *c != HostCapability::StructuredReports
    });
    req.host.validator_capabilities = vec![ValidatorCapability::WorkspaceRead];
    let engine = engine_on(sqlite_memory().await).await;
    let result = serde_json::to_value(engine.start(req, None).await.unwrap()).unwrap();
    let blockers: Vec<_> = result["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            format!(
                "{}:{}",
                b["code"].as_str().unwrap(),
                b["detail"]["capability"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        blockers,
        [
            "missing_host_capability:native-subagents",
            "missing_host_capability:structured-reports",
            "missing_validator_capability:web.read",
        ]
    );
}

#[tokio::test]
async fn all_blockers_come_together_in_the_fixed_order() {
    let mut req = start_request("claude-code");
    req.host.adapter = Some(AdapterDeclaration {
        id: Some("legacy-generic".into()),
        version: Some("1.0.0".into()),
    });
    req.host.capabilities = vec![HostCapability::McpTools];
    req.host.validator_capabilities = vec![];
    req.repository_policy.forbidden_paths = vec!["research/**".into()];
    let c = blocked(req).await;
    let order: Vec<_> = c
        .iter()
        .map(|s| Code::ALL.iter().position(|k| k.as_str() == s).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{c:?}");
    for code in [
        "unsupported_host_adapter",
        "host_adapter_contract_unavailable",
        "host_adapter_binding_mismatch",
        "missing_host_capability",
        "missing_validator_capability",
        "repository_policy_conflict",
    ] {
        assert!(c.iter().any(|x| x == code), "{code} missing from {c:?}");
    }
}

#[tokio::test]
async fn test_repository_policy_conflict_blocks_before_setup_write() {
    let engine = engine_on(sqlite_memory().await).await;
    // A forbidden output path has no alternative: blocked, no session, no setup payload.
    let mut req = start_request("claude-code");
    req.repository_policy.forbidden_paths = vec!["research/*.json".into()];
    let result = engine.start(req, None).await.unwrap();
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["status"], "blocked");
    assert_eq!(
        codes(&result),
        ["repository_policy_conflict", "repository_policy_conflict"]
    );
    assert_eq!(
        json["blockers"][0]["detail"]["path"],
        "research/question.json"
    );
    assert!(json.get("host_assets").is_none() && json.get("checkpoint").is_none());

    // A forbidden capability a validator needs is a conflict too.
    let mut req = start_request("claude-code");
    req.repository_policy.forbidden_capabilities = vec!["web.read".into()];
    assert_eq!(
        codes(&engine.start(req, None).await.unwrap()),
        ["repository_policy_conflict"]
    );

    // A forbidden project-local path is no conflict when dynamic delivery is allowed: the start
    // succeeds and offers only dynamic-context for the affected assets.
    let mut req = start_request("claude-code");
    req.repository_policy.forbidden_paths = vec![".claude/**".into()];
    let payload = active(engine.start(req, None).await.unwrap());
    for asset in &payload.host_assets {
        assert_eq!(
            asset.delivery_modes,
            [DeliveryMode::DynamicContext],
            "{}",
            asset.id
        );
        assert_eq!(asset.project_local_path, None);
    }
}

#[tokio::test]
async fn test_setup_attestation_binds_capabilities_and_project_local_paths() {
    let engine = engine_on(sqlite_memory().await).await;
    let start = start_request("claude-code");
    let payload = active(engine.start(start.clone(), None).await.unwrap());
    let paths: Vec<_> = payload
        .host_assets
        .iter()
        .map(|a| a.project_local_path.clone().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            ".claude/skills/rimthan-research/SKILL.md",
            ".claude/agents/scope-reviewer.md",
            ".claude/agents/source-auditor.md",
            ".claude/agents/claim-checker.md",
            ".claude/commands/rimthan-resume.md",
        ]
    );
    // The binding is in the session file.
    let host = &payload.session_file.content.host;
    assert_eq!(host.harness, "claude-code");
    assert_eq!(host.capabilities, all_host_capabilities());

    // An attestation with a capability the start did not declare is refused.
    let mut att = host_attestation(&payload, &start);
    att.validator_capabilities
        .push(ValidatorCapability::DatabaseRead);
    let mut req = prepare(&payload, &start);
    req.host_attestation = Some(att);
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["capability_binding_mismatch"]
    );

    // A project-local delivery at another path is refused.
    let mut att = host_attestation(&payload, &start);
    att.deliveries[0].path = Some(".claude/skills/other/SKILL.md".into());
    let mut req = prepare(&payload, &start);
    req.host_attestation = Some(att);
    assert_eq!(
        codes(&engine.prepare(req, None).await.unwrap()),
        ["project_local_path_mismatch"]
    );

    // The faithful attestation passes, and the empty plan of setup advances the session.
    let next = pass_step(&engine, &payload, &start).await;
    assert_eq!(next.step.unwrap().id, "frame-question");
    assert!(next.host_assets.is_empty());
}

#[tokio::test]
async fn without_project_local_assets_only_dynamic_delivery_is_offered() {
    let engine = engine_on(sqlite_memory().await).await;
    let mut req = start_request("codex");
    req.host
        .capabilities
        .retain(|c| *c != HostCapability::ProjectLocalAssets);
    let payload = active(engine.start(req, None).await.unwrap());
    assert!(
        payload
            .host_assets
            .iter()
            .all(|a| a.delivery_modes == [DeliveryMode::DynamicContext])
    );
    // Codex gets its own rendition of subagents.
    let agent = payload
        .host_assets
        .iter()
        .find(|a| a.id == "scope-reviewer")
        .unwrap();
    assert!(
        agent.uri.ends_with("/content?harness=codex"),
        "{}",
        agent.uri
    );
}

#[tokio::test]
async fn cowork_and_buzz_start_with_dynamic_delivery_only() {
    let engine = engine_on(sqlite_memory().await).await;
    for harness in ["cowork", "buzz"] {
        let payload = active(engine.start(start_request(harness), None).await.unwrap());
        assert!(
            payload
                .host_assets
                .iter()
                .all(|a| a.delivery_modes == [DeliveryMode::DynamicContext]),
            "{harness}"
        );
    }
}

#[tokio::test]
async fn unknown_release_channel_and_workflow_are_rejected() {
    let engine = engine_on(sqlite_memory().await).await;
    let mut req = start_request("codex");
    req.release = Some("2099.1.0".parse().unwrap());
    assert_eq!(
        codes(&engine.start(req, None).await.unwrap()),
        ["unknown_release"]
    );
    let mut req = start_request("codex");
    req.channel = Some("nightly".parse().unwrap());
    assert_eq!(
        codes(&engine.start(req, None).await.unwrap()),
        ["unknown_channel"]
    );
    let mut req = start_request("codex");
    req.workflow_id = "no-such-flow".parse().unwrap();
    assert_eq!(
        codes(&engine.start(req, None).await.unwrap()),
        ["unknown_workflow"]
    );
    let mut req = start_request("codex");
    req.repository_policy.forbidden_paths = vec!["a[".into()];
    let err = engine.start(req, None).await.unwrap_err();
    assert_eq!(err.code(), "invalid_argument");
    assert!(
        err.to_string()
            .contains("repository_policy.forbidden_paths[0]")
    );
}

#[tokio::test]
async fn policy_forbidding_project_local_assets_leaves_dynamic_delivery() {
    let engine = engine_on(sqlite_memory().await).await;
    let mut by_flag = start_request("claude-code");
    by_flag.repository_policy.forbids_project_local_assets = true;
    let mut by_capability = start_request("claude-code");
    by_capability.repository_policy.forbidden_capabilities = vec!["project-local-assets".into()];
    for req in [by_flag, by_capability] {
        let payload = active(engine.start(req, None).await.unwrap());
        assert!(
            payload
                .host_assets
                .iter()
                .all(|a| a.delivery_modes == [DeliveryMode::DynamicContext])
        );
    }
}

#[tokio::test]
async fn forbidden_path_globs_match_case_insensitively() {
    let mut req = start_request("claude-code");
    req.repository_policy.forbidden_paths = vec!["RESEARCH/Findings.MD".into()];
    assert_eq!(blocked(req).await, ["repository_policy_conflict"]);
}

#[tokio::test]
async fn unknown_forbidden_capability_names_are_argument_errors() {
    let engine = engine_on(sqlite_memory().await).await;
    let mut req = start_request("claude-code");
    req.repository_policy.forbidden_capabilities = vec!["web-read".into()];
    let err = engine.start(req, None).await.unwrap_err();
    assert_eq!(err.code(), "invalid_argument");
    assert!(
        err.to_string().contains("forbidden_capabilities[0]"),
        "{err}"
    );
}

#[tokio::test]
async fn release_and_channel_together_are_an_argument_error() {
    let engine = engine_on(sqlite_memory().await).await;
    let mut req = start_request("codex");
    req.release = Some("2026.12.0".parse().unwrap());
    req.channel = Some("stable".parse().unwrap());
    assert_eq!(
        engine.start(req, None).await.unwrap_err().code(),
        "invalid_argument"
    );
}

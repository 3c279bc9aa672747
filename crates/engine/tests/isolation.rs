//! Validator isolation as the session's adapter records it: every plan says per validator
//! whether the host itself keeps it read-only, and `read-only-capabilities` counts only under an
//! adapter whose host enforces it.

use std::{path::Path, sync::Arc};

use rimthan_engine::{Releases, StartResult};
use rimthan_registry::ValidatorIsolation;

use crate::common::*;

#[tokio::test]
async fn plans_say_whether_the_host_enforces_read_only_validators() {
    for (harness, isolation) in [
        ("claude-code", ValidatorIsolation::HostEnforced),
        ("codex", ValidatorIsolation::Instructed),
        ("cowork", ValidatorIsolation::Instructed),
    ] {
        let engine = engine_on(sqlite_memory().await).await;
        let start = start_request(harness);
        let setup = active(engine.start(start.clone(), None).await.unwrap());
        let work = pass_step(&engine, &setup, &start).await;
        let plan = ready(engine.prepare(prepare(&work, &start), None).await.unwrap());
        assert!(!plan.validators.is_empty());
        for validator in &plan.validators {
            assert_eq!(
                validator.isolation, isolation,
                "{harness}: {}",
                validator.id
            );
        }
    }
}

/// The report-contracts test source, its workflow requiring `read-only-capabilities`.
fn releases_requiring_read_only_validators() -> Arc<Releases> {
    let source = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report-contracts");
    copy_dir(&fixture, source.path());
    let workflow = source
        .path()
        .join("workflows/checklist/1.0.0/workflow.json");
    let text = std::fs::read_to_string(&workflow).unwrap();
    let edited = text.replace(
        r#""required_host_capabilities": ["mcp.tools", "structured-reports"]"#,
        r#""required_host_capabilities": ["mcp.tools", "structured-reports", "read-only-capabilities"]"#,
    );
    assert_ne!(edited, text, "the fixture's requirement line moved");
    std::fs::write(&workflow, edited).unwrap();
    releases_built_from(source.path())
}

#[tokio::test]
async fn a_workflow_needing_read_only_validators_blocks_where_the_host_only_instructs_them() {
    let engine = rimthan_engine::Engine::new(
        releases_requiring_read_only_validators(),
        sqlite_memory().await,
        None,
    )
    .await
    .unwrap();
    let mut start = start_request("codex");
    start.workflow_id = "checklist".parse().unwrap();
    // The checklist workflow pins the codex adapter this test release carries.
    start.host.adapter = Some(rimthan_engine::AdapterDeclaration {
        id: Some("codex".into()),
        version: Some("1.1.0".into()),
    });
    assert!(
        start
            .host
            .capabilities
            .contains(&rimthan_registry::HostCapability::ReadOnlyCapabilities),
        "the host declares it, so only the adapter's isolation can block"
    );
    let result = engine.start(start, None).await.unwrap();
    assert!(matches!(result, StartResult::Blocked(_)));
    let value = serde_json::to_value(&result).unwrap();
    let blocker = &value["blockers"][0];
    assert_eq!(blocker["code"], "missing_host_capability", "{value}");
    assert_eq!(blocker["detail"]["capability"], "read-only-capabilities");
    assert_eq!(blocker["detail"]["validator_isolation"], "instructed");
    assert_eq!(value["blockers"].as_array().unwrap().len(), 1, "{value}");
}

//! The embedded default release: verified by its pinned digest, and what it promises.

use rimthan_registry::{
    AssetKind, DeliveryMode, Harness, HostCapability, TrustAnchor, VerifiedRelease, WorkflowId,
    check_path_template, verify_embedded,
};

fn stable() -> std::sync::Arc<VerifiedRelease> {
    let registry = verify_embedded().expect("the embedded registry verifies");
    registry
        .channel(&"stable".parse().unwrap())
        .expect("stable channel")
        .clone()
}

fn research_study(release: &VerifiedRelease) -> &rimthan_registry::Workflow {
    release
        .latest_workflow(&"research-study".parse::<WorkflowId>().unwrap())
        .expect("shipped")
}

#[test]
fn embedded_registry_is_trusted_by_its_pinned_manifest_digest() {
    let release = stable();
    assert_eq!(release.trust_anchor(), &TrustAnchor::PinnedDigest);
    let lock = rimthan_registry::PublishedLock::read(&rimthan_registry::embedded_files())
        .unwrap()
        .expect("the embedded registry carries its publication lock");
    assert_eq!(lock.releases[release.id()], release.manifest_sha256());
    assert_eq!(
        release.signing_key_id().as_str(),
        rimthan_registry::DEFAULT_KEY_ID
    );
}

#[test]
fn test_every_named_host_has_one_pinned_fail_closed_adapter() {
    let release = stable();
    let workflow = research_study(&release);
    let pins = &workflow.doc().harnesses;
    assert_eq!(
        pins.keys().copied().collect::<Vec<_>>(),
        Harness::ALL.to_vec()
    );
    for (harness, pin) in pins {
        let adapter = release
            .asset(AssetKind::HostAdapter, &pin.id, &pin.version)
            .unwrap_or_else(|| panic!("{harness}: pinned adapter missing"));
        let base = adapter.base();
        assert_eq!(
            base.compatible_harnesses.as_deref(),
            Some(&[*harness][..]),
            "{harness}"
        );
        let contract = base
            .adapter_contract
            .as_ref()
            .expect("pinned adapters carry a contract");
        assert!(
            contract
                .required_host_capabilities
                .contains(&HostCapability::NativeSubagents)
        );
        let local: Vec<_> = contract
            .asset_kinds
            .iter()
            .filter_map(|(kind, d)| d.path_template.as_deref().map(|t| (*kind, t)))
            .collect();
        for (_, template) in &local {
            check_path_template(template).unwrap();
        }
        let expected: &[(AssetKind, &str)] = match harness {
            Harness::Codex => &[
                (AssetKind::Skill, ".agents/skills/{asset_id}/SKILL.md"),
                (AssetKind::Subagent, ".codex/agents/{asset_id}.toml"),
            ],
            Harness::ClaudeCode => &[
                (AssetKind::Skill, ".claude/skills/{asset_id}/SKILL.md"),
                (AssetKind::Subagent, ".claude/agents/{asset_id}.md"),
                (AssetKind::Command, ".claude/commands/{asset_id}.md"),
            ],
            // Dynamic delivery only until real staging evidence exists.
            Harness::Cowork | Harness::Buzz => &[],
        };
        let mut sorted = expected.to_vec();
        sorted.sort();
        assert_eq!(local, sorted, "{harness}");
        if local.is_empty() {
            assert_eq!(
                contract.delivery_modes,
                vec![DeliveryMode::DynamicContext],
                "{harness}"
            );
        }
    }
    // Exactly one adapter per harness is pinned; other adapters for a harness are not pinned.
    let pinned: std::collections::BTreeSet<_> = pins.values().map(|p| p.id.clone()).collect();
    assert_eq!(pinned.len(), pins.len());
}

#[test]
fn test_legacy_adapter_without_typed_contract_loads_but_cannot_start() {
    // Loading half: the legacy adapter verifies as part of the release; the start half lives in
    // the engine's tests, where a start that selects it is blocked.
    let release = stable();
    let legacy = release
        .asset(
            AssetKind::HostAdapter,
            &"legacy-generic".parse().unwrap(),
            &"1.0.0".parse().unwrap(),
        )
        .expect("the legacy adapter loads");
    assert!(legacy.base().adapter_contract.is_none());
    assert!(legacy.base().version < rimthan_registry::Version::new(1, 1, 0));
    let workflow = research_study(&release);
    assert!(
        workflow
            .doc()
            .harnesses
            .values()
            .all(|p| p.id.as_str() != "legacy-generic")
    );
}

#[test]
fn research_study_has_the_four_steps_of_the_spec() {
    let release = stable();
    let workflow = research_study(&release);
    let steps: Vec<_> = workflow
        .steps()
        .iter()
        .map(|s| s.doc().id.to_string())
        .collect();
    assert_eq!(
        steps,
        [
            "setup-workspace",
            "frame-question",
            "gather-sources",
            "synthesize-findings"
        ]
    );
    let outputs: Vec<_> = workflow
        .steps()
        .iter()
        .flat_map(|s| s.doc().outputs.iter())
        .map(|o| (o.path.as_str(), o.max_bytes, o.write_policy.as_str()))
        .collect();
    assert_eq!(
        outputs,
        [
            ("research/question.json", 16384, "create-or-replace-owned"),
            ("research/sources.json", 262144, "create-or-replace-owned"),
            ("research/notes.md", 131072, "create-or-replace-owned"),
            ("research/findings.md", 65536, "create-owned"),
        ]
    );
    let setup = &workflow.steps()[0].doc().host_assets;
    let assets: Vec<_> = setup
        .iter()
        .map(|a| format!("{}/{}", a.kind, a.id))
        .collect();
    assert_eq!(
        assets,
        [
            "skill/rimthan-research",
            "subagent/scope-reviewer",
            "subagent/source-auditor",
            "subagent/claim-checker",
            "command/rimthan-resume"
        ]
    );
}

#[derive(serde::Deserialize)]
struct ClaudeAgent {
    name: String,
    description: String,
    tools: String,
}

fn frontmatter(text: &str) -> &str {
    let rest = text
        .strip_prefix("---\n")
        .expect("frontmatter opens at byte 0");
    &rest[..rest.find("\n---\n").expect("frontmatter closes")]
}

#[test]
fn renditions_parse_as_their_hosts_formats() {
    let release = stable();
    let mut seen = 0;
    for asset in release.assets().filter(|a| a.kind() == AssetKind::Subagent) {
        let id = &asset.base().id;
        let codex = asset
            .renditions()
            .get(&Harness::Codex)
            .expect("codex rendition");
        let text = std::str::from_utf8(release.content(&codex.path).unwrap()).unwrap();
        let table: toml::Table = toml::from_str(text).expect("Codex agent TOML parses");
        assert_eq!(table["name"].as_str(), Some(id.as_str()));
        assert_eq!(table["sandbox_mode"].as_str(), Some("read-only"));
        assert!(!table["description"].as_str().unwrap().is_empty());
        assert!(
            !table["developer_instructions"]
                .as_str()
                .unwrap()
                .trim()
                .is_empty()
        );

        let claude = asset
            .renditions()
            .get(&Harness::ClaudeCode)
            .expect("claude rendition");
        let text = std::str::from_utf8(release.content(&claude.path).unwrap()).unwrap();
        let agent: ClaudeAgent = serde_norway::from_str(frontmatter(text)).expect("YAML");
        assert_eq!(&agent.name, id);
        assert!(!agent.description.is_empty());
        for tool in agent.tools.split(", ") {
            assert!(
                !["Write", "Edit", "Bash", "NotebookEdit"].contains(&tool),
                "{id}: {tool}"
            );
        }
        assert_ne!(codex.sha256, claude.sha256);
        seen += 1;
    }
    // Five subagents at 1.0.0, the three research validators again at 2.0.0, 2.1.0 and 2.2.0,
    // and the migration checker at 1.1.0.
    assert_eq!(seen, 15);
    let skill = release
        .asset(
            AssetKind::Skill,
            &"rimthan-research".parse().unwrap(),
            &"1.0.0".parse().unwrap(),
        )
        .unwrap();
    let text = std::str::from_utf8(release.content(&skill.base().path).unwrap()).unwrap();
    let fm: std::collections::BTreeMap<String, String> =
        serde_norway::from_str(frontmatter(text)).unwrap();
    assert_eq!(fm.keys().collect::<Vec<_>>(), ["description", "name"]);
    assert_eq!(fm["name"], "rimthan-research");
}

#[test]
fn shipped_schemas_include_the_session_and_report_schemas() {
    let release = stable();
    let ids: Vec<_> = release
        .schemas()
        .map(|s| format!("{}@{}", s.entry().id, s.entry().version))
        .collect();
    assert_eq!(
        ids,
        [
            "migration-change@1.0.0",
            "migration-change@1.1.0",
            "migration-change@1.2.0",
            "migration-check-report@1.0.0",
            "migration-check-report@1.1.0",
            "research-question@1.0.0",
            "research-question@2.0.0",
            "research-question@2.1.0",
            "research-question@2.2.0",
            "source-list@1.0.0",
            "source-list@2.0.0",
            "source-list@2.1.0",
            "source-list@2.2.0",
            "validator-report@1.0.0",
            "validator-report@2.0.0",
            "workflow-session@1.0.0"
        ]
    );
    let report = release
        .schema(
            &"validator-report".parse().unwrap(),
            &"1.0.0".parse().unwrap(),
        )
        .unwrap();
    let good = serde_json::json!({"validator_id": "scope-reviewer", "validator_version": "1.0.0",
        "verdict": "pass", "summary": "ok", "findings": [], "inputs_read": ["research/question.json"],
        "capabilities_used": ["workspace.read"]});
    assert!(report.validator().is_valid(&good));
    let mut bad = good.clone();
    bad["verdict"] = "maybe".into();
    assert!(!report.validator().is_valid(&bad));
}

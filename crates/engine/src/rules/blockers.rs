//! Start-time blockers (`docs/engine.md` §2.2): every one is evaluated, all are reported together in the
//! fixed order of [`Code`], and none may be decided after anything could be written.

use std::collections::BTreeSet;

use rimthan_registry::{
    AdapterContract, AssetId, AssetKind, DeliveryMode, Harness, HostCapability,
    ValidatorCapability, ValidatorIsolation, VerifiedRelease, Version, Workflow,
};

use crate::{
    model::codes::{Code, Failure},
    model::request::HostDeclaration,
    model::session::{AdapterBinding, HostBinding},
    rules::offers::{Policy, Withheld, offers},
};

/// Evaluates a host declaration against a workflow; `Ok` is the binding to store.
pub(crate) fn evaluate(
    release: &VerifiedRelease,
    workflow: &Workflow,
    host: &HostDeclaration,
    policy: &Policy,
) -> Result<HostBinding, Vec<Failure>> {
    let mut blockers = Vec::new();
    let doc = workflow.doc();

    let harness: Option<Harness> = host.harness.parse().ok();
    let pin = harness.and_then(|h| doc.harnesses.get(&h));
    if pin.is_none() {
        let pinned: Vec<_> = doc.harnesses.keys().map(|h| h.as_str()).collect();
        blockers.push(
            Failure::new(
                Code::UnsupportedHarness,
                format!(
                    "harness {:?} is not one this workflow pins an adapter for; use one of: {}",
                    host.harness,
                    pinned.join(", ")
                ),
            )
            .with("harness", &host.harness)
            .with("supported", pinned),
        );
    }

    let adapter = host.adapter.clone().unwrap_or_default();
    let declared = match (&adapter.id, &adapter.version) {
        (Some(id), Some(version)) => Some((id.clone(), version.clone())),
        _ => {
            blockers.push(Failure::new(
                Code::UnsupportedHostAdapter,
                "declare host.adapter.id and host.adapter.version: the adapter the harness follows",
            ));
            None
        }
    };
    let mut declared_contract: Option<&AdapterContract> = None;
    if let Some((id, version)) = &declared {
        let found = id
            .parse::<AssetId>()
            .ok()
            .zip(version.parse::<Version>().ok())
            .and_then(|(id, version)| release.asset(AssetKind::HostAdapter, &id, &version));
        match found {
            None => blockers.push(
                Failure::new(
                    Code::HostAdapterAssetMissing,
                    format!(
                        "host adapter {id}@{version} is not in release {}",
                        release.id()
                    ),
                )
                .with("adapter", serde_json::json!({"id": id, "version": version})),
            ),
            Some(asset) => {
                let base = asset.base();
                let compatible = base.compatible_harnesses.as_deref().unwrap_or_default();
                if let Some(h) = harness.filter(|h| !compatible.contains(h)) {
                    blockers.push(
                        Failure::new(
                            Code::UnsupportedHostAdapter,
                            format!("host adapter {id}@{version} does not serve harness {h}"),
                        )
                        .with("compatible_harnesses", compatible),
                    );
                }
                match &base.adapter_contract {
                    Some(contract) => declared_contract = Some(contract),
                    None => blockers.push(
                        Failure::new(
                            Code::HostAdapterContractUnavailable,
                            format!(
                                "host adapter {id}@{version} has no typed contract, so a start \
                                 cannot be checked; follow the adapter the workflow pins"
                            ),
                        )
                        .with("adapter", serde_json::json!({"id": id, "version": version})),
                    ),
                }
            }
        }
    }
    if let (Some(pin), Some((id, version))) = (pin, &declared)
        && (pin.id.as_str() != id || pin.version.to_string() != *version)
    {
        blockers.push(
            Failure::new(
                Code::HostAdapterBindingMismatch,
                format!(
                    "this workflow pins host adapter {}@{} for {}; declare exactly that adapter",
                    pin.id, pin.version, host.harness
                ),
            )
            .with(
                "expected",
                serde_json::json!({"id": pin.id, "version": pin.version}),
            )
            .with("actual", serde_json::json!({"id": id, "version": version})),
        );
    }

    // Capabilities come from the pinned adapter's contract: that is the one a session binds.
    let pinned_contract = pin.and_then(|p| {
        release
            .asset(AssetKind::HostAdapter, &p.id, &p.version)?
            .base()
            .adapter_contract
            .as_ref()
    });
    let contract = pinned_contract.or(declared_contract);
    let declared_caps: BTreeSet<HostCapability> = host.capabilities.iter().copied().collect();
    let mut required: BTreeSet<HostCapability> =
        doc.required_host_capabilities.iter().copied().collect();
    if let Some(c) = contract {
        required.extend(c.required_host_capabilities.iter().copied());
    }
    // Read-only validators count only where the host enforces them: under an adapter whose
    // isolation is instructed, a declaration of it cannot be true.
    let instructed =
        contract.is_none_or(|c| c.validator_isolation == ValidatorIsolation::Instructed);
    for cap in &required {
        let unenforced = *cap == HostCapability::ReadOnlyCapabilities && instructed;
        if declared_caps.contains(cap) && !unenforced {
            continue;
        }
        let message = if unenforced && declared_caps.contains(cap) {
            format!(
                "the workflow needs host capability {cap}, and this host's adapter records that \
                 validators are read-only by instruction only, which the host does not enforce"
            )
        } else {
            format!(
                "the workflow needs host capability {cap}; declare it only if the host really has it"
            )
        };
        blockers.push(
            Failure::new(Code::MissingHostCapability, message)
                .with("capability", cap)
                .with(
                    "validator_isolation",
                    contract.map(|c| c.validator_isolation),
                ),
        );
    }
    let declared_validator: BTreeSet<ValidatorCapability> =
        host.validator_capabilities.iter().copied().collect();
    let needed_validator = validator_capabilities(release, workflow);
    for cap in needed_validator.difference(&declared_validator) {
        blockers.push(
            Failure::new(
                Code::MissingValidatorCapability,
                format!(
                    "a validator of this workflow needs {cap}, which the host does not declare"
                ),
            )
            .with("capability", cap),
        );
    }

    // Repository policy, decided before the harness writes anything.
    let required_names = required
        .iter()
        .map(|c| c.as_str())
        .chain(needed_validator.iter().map(|c| c.as_str()));
    for name in required_names.filter(|n| policy.forbids_capability(n)) {
        blockers.push(
            Failure::new(
                Code::RepositoryPolicyConflict,
                format!("the workflow requires {name}, which the repository policy forbids"),
            )
            .with("capability", name),
        );
    }
    for step in workflow.steps() {
        for output in step
            .doc()
            .outputs
            .iter()
            .filter(|o| policy.forbids_path(&o.path))
        {
            blockers.push(
                Failure::new(
                    Code::RepositoryPolicyConflict,
                    format!(
                        "step {} must write {}, which the repository policy forbids",
                        step.doc().id,
                        output.path
                    ),
                )
                .with("path", &output.path)
                .with("artifact_id", &output.artifact_id),
            );
        }
    }
    let binding = HostBinding {
        harness: harness.unwrap_or(Harness::Codex),
        adapter: AdapterBinding {
            id: pin
                .map(|p| p.id.clone())
                .unwrap_or_else(|| "unbound".parse().expect("valid id")),
            version: pin
                .map(|p| p.version.clone())
                .unwrap_or_else(|| Version::new(0, 0, 0)),
        },
        capabilities: declared_caps.into_iter().collect(),
        validator_capabilities: declared_validator.into_iter().collect(),
    };
    if let (Some(_), Some(contract)) = (pin, pinned_contract) {
        let setup = &workflow.steps()[0].doc().host_assets;
        for offer in offers(release, contract, &binding, policy, setup)
            .iter()
            .filter(|o| o.modes.is_empty())
        {
            let asset = format!(
                "{} {}@{}",
                offer.asset.kind, offer.asset.id, offer.asset.version
            );
            let failure = match offer.withheld {
                Some(Withheld::Policy) => Failure::new(
                    Code::RepositoryPolicyConflict,
                    format!("{asset} can only be delivered project-local, which the repository policy forbids"),
                )
                .with("path", &offer.path),
                Some(Withheld::Capability) => Failure::new(
                    Code::MissingHostCapability,
                    format!("{asset} can only be delivered project-local; that needs project-local-assets"),
                )
                .with("capability", HostCapability::ProjectLocalAssets),
                None => Failure::new(
                    Code::HostAdapterContractUnavailable,
                    format!("the adapter contract offers no delivery mode for {asset}"),
                ),
            };
            blockers.push(
                failure
                    .with("asset", &offer.asset)
                    .with("delivery_modes", Vec::<DeliveryMode>::new()),
            );
        }
    }
    if blockers.is_empty() {
        Ok(binding)
    } else {
        blockers.sort_by_key(|b| b.code);
        Err(blockers)
    }
}

/// Every validator capability any step of the workflow needs.
pub(crate) fn validator_capabilities(
    release: &VerifiedRelease,
    workflow: &Workflow,
) -> BTreeSet<ValidatorCapability> {
    workflow
        .steps()
        .iter()
        .flat_map(|s| s.doc().validators.iter())
        .filter_map(|v| release.validator(&v.id, &v.version))
        .flat_map(|v| v.doc().capabilities.iter().copied())
        .collect()
}

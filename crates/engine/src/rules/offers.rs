//! How each host asset may reach a host: the adapter contract, the host's declared
//! capabilities and the repository policy together decide (`docs/engine.md` §2.3).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rimthan_registry::{
    AdapterContract, AssetRef, DeliveryMode, Entry, HostCapability, ValidatorCapability,
    VerifiedRelease, expand_template,
};

use crate::{
    error::EngineError,
    model::bounds::{MAX_CAUSE_CHARS, MAX_FORBIDDEN_PATHS, MAX_GLOB_BYTES, display_capped, echo},
    model::request::RepositoryPolicy,
    model::session::HostBinding,
};

/// A repository policy with its globs compiled.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    forbidden: GlobSet,
    pub(crate) forbidden_capabilities: Vec<String>,
    forbids_project_local: bool,
}

impl Policy {
    /// Compiles the policy; a bad glob is an argument error naming its index. The count and
    /// length bounds are checked first, so compiling costs what a sane policy costs.
    pub(crate) fn compile(policy: &RepositoryPolicy) -> Result<Self, EngineError> {
        let count = policy.forbidden_paths.len();
        if count > MAX_FORBIDDEN_PATHS {
            return Err(EngineError::InvalidArgument {
                field: "repository_policy.forbidden_paths".into(),
                message: format!(
                    "{count} globs; at most {MAX_FORBIDDEN_PATHS} are accepted, so forbid whole \
                     directories (`secrets/**`) rather than single files"
                ),
            });
        }
        let field = |i: usize| format!("repository_policy.forbidden_paths[{i}]");
        if let Some((i, pattern)) =
            (policy.forbidden_paths.iter().enumerate()).find(|(_, p)| p.len() > MAX_GLOB_BYTES)
        {
            return Err(EngineError::InvalidArgument {
                field: field(i),
                message: format!(
                    "a glob of {} bytes; at most {MAX_GLOB_BYTES} bytes are accepted",
                    pattern.len()
                ),
            });
        }
        let mut set = GlobSetBuilder::new();
        for (i, pattern) in policy.forbidden_paths.iter().enumerate() {
            // Case-insensitive: participants' file systems often are, so fail closed.
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .case_insensitive(true)
                .build()
                .map_err(|e| EngineError::InvalidArgument {
                    field: field(i),
                    message: format!(
                        "{} is not a glob: {}",
                        echo(pattern),
                        display_capped(e.kind(), MAX_CAUSE_CHARS)
                    ),
                })?;
            set.add(glob);
        }
        let forbidden = set.build().map_err(|e| EngineError::InvalidArgument {
            field: "repository_policy.forbidden_paths".into(),
            message: display_capped(&e, MAX_CAUSE_CHARS),
        })?;
        // Capability names are checked, not matched blindly: a typo must not forbid nothing.
        for (i, name) in policy.forbidden_capabilities.iter().enumerate() {
            if name.parse::<HostCapability>().is_err()
                && name.parse::<ValidatorCapability>().is_err()
            {
                return Err(EngineError::InvalidArgument {
                    field: format!("repository_policy.forbidden_capabilities[{i}]"),
                    message: format!("{} is not a host or validator capability", echo(name)),
                });
            }
        }
        let forbidden_capabilities = policy.forbidden_capabilities.clone();
        let forbids_project_local = policy.forbids_project_local_assets
            || forbidden_capabilities
                .iter()
                .any(|c| c == HostCapability::ProjectLocalAssets.as_str());
        Ok(Self {
            forbidden,
            forbidden_capabilities,
            forbids_project_local,
        })
    }

    /// Whether writing `path` breaks the policy.
    pub(crate) fn forbids_path(&self, path: &str) -> bool {
        self.forbidden.is_match(path)
    }

    /// Whether using the capability called `name` breaks the policy.
    pub(crate) fn forbids_capability(&self, name: &str) -> bool {
        self.forbidden_capabilities.iter().any(|c| c == name)
    }
}

/// How many compiled policies a [`PolicyCache`] keeps (each at most 64 globs of 1 KiB).
const POLICIES_KEPT: usize = 256;

/// Compiled repository policies by their declaration, so a session's globs are compiled when
/// it starts and then reused, not compiled on every call. Bounded: when full it starts over.
#[derive(Debug, Default)]
pub(crate) struct PolicyCache(Mutex<HashMap<RepositoryPolicy, Arc<Policy>>>);

impl PolicyCache {
    /// The compiled `policy`, compiling it on first use.
    pub(crate) fn compile(&self, policy: &RepositoryPolicy) -> Result<Arc<Policy>, EngineError> {
        let kept = |cache: &Self| {
            let map = cache.0.lock().unwrap_or_else(PoisonError::into_inner);
            map.get(policy).cloned()
        };
        if let Some(compiled) = kept(self) {
            return Ok(compiled);
        }
        let compiled = Arc::new(Policy::compile(policy)?);
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= POLICIES_KEPT {
            map.clear();
        }
        map.insert(policy.clone(), compiled.clone());
        Ok(compiled)
    }
}

/// Why project-local delivery was withheld, when it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Withheld {
    /// The host did not declare `project-local-assets`.
    Capability,
    /// The repository policy forbids the path or project-local assets.
    Policy,
}

/// The delivery offered to this host for one host asset.
#[derive(Debug, Clone)]
pub(crate) struct Offer<'r> {
    pub(crate) asset: AssetRef,
    /// The content entry of the bound harness's rendition.
    pub(crate) content: &'r Entry,
    pub(crate) modes: Vec<DeliveryMode>,
    /// The contract's path for this asset, whether or not project-local is offered.
    pub(crate) path: Option<String>,
    pub(crate) withheld: Option<Withheld>,
}

/// Offers for every host asset of the setup step, in the step's order.
pub(crate) fn offers<'r>(
    release: &'r VerifiedRelease,
    contract: &AdapterContract,
    host: &HostBinding,
    policy: &Policy,
    assets: &[AssetRef],
) -> Vec<Offer<'r>> {
    let project_local_declared = host
        .capabilities
        .contains(&HostCapability::ProjectLocalAssets);
    assets
        .iter()
        .filter_map(|asset| {
            let found = release.asset(asset.kind, &asset.id, &asset.version)?;
            let content = found.content_for(host.harness);
            let delivery = contract.asset_kinds.get(&asset.kind);
            let mut modes = Vec::new();
            let mut path = None;
            let mut withheld = None;
            for mode in delivery
                .map(|d| d.delivery_modes.as_slice())
                .unwrap_or_default()
            {
                match mode {
                    DeliveryMode::DynamicContext => modes.push(*mode),
                    DeliveryMode::ProjectLocal => {
                        let template = delivery.and_then(|d| d.path_template.as_deref());
                        let candidate = template.map(|t| expand_template(t, &asset.id));
                        if !project_local_declared {
                            withheld = Some(Withheld::Capability);
                        } else if policy.forbids_project_local
                            || candidate.as_deref().is_some_and(|p| policy.forbids_path(p))
                        {
                            withheld = Some(Withheld::Policy);
                        } else if candidate.is_some() {
                            modes.push(*mode);
                        }
                        path = candidate;
                    }
                }
            }
            Some(Offer {
                asset: asset.clone(),
                content,
                modes,
                path,
                withheld,
            })
        })
        .collect()
}

impl Offer<'_> {
    /// The project-local path, when that mode is offered.
    pub(crate) fn offered_path(&self) -> Option<&str> {
        self.modes
            .contains(&DeliveryMode::ProjectLocal)
            .then_some(self.path.as_deref())
            .flatten()
    }
}

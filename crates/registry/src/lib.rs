//! Verified workflow registry releases for the rimthan workflow engine.
//!
//! # Brief overview
//!
//! A registry folder holds immutable releases (`releases/<id>/manifest.json`, its ed25519
//! `manifest.sig`, and the entry files), trusted public keys (`keys/`) and `channels.json`, the
//! one mutable file. [`verify_registry`] checks every byte against the signed manifest and every
//! structural rule of the release format, and is the only way to obtain a [`VerifiedRegistry`]:
//! holding one proves the content is what its publisher signed. [`build_release`] turns readable
//! source files into a signed release; the default release is built that way and embedded.
//! [`BASE_REPORT_FIELDS`] is the part of a validator report the engine reads, which every
//! validator's report schema must keep; [`example_or_instance`] gives a worked instance of a
//! JSON Schema (its own example, or a generated one that validates).
//!
//! ```
//! let registry = rimthan_registry::verify_embedded()?;
//! let stable = registry.channel(&"stable".parse()?).expect("the default has a stable channel");
//! for workflow in stable.workflows() {
//!     assert_eq!(workflow.steps()[0].doc().id.as_str(), rimthan_registry::SETUP_STEP);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod approval;
mod bootstrap;
mod builder;
mod canonical;
mod diff;
mod digest;
mod duration;
mod embedded;
mod error;
mod files;
mod frontmatter;
mod ids;
mod init;
mod instance;
mod model;
mod path;
mod published;
mod regular;
mod release;
mod renditions;
mod report_contract;
mod rules;
mod schema_check;
mod signature;
pub mod uri;
mod verify;

pub use approval::{Approval, MAX_APPROVERS, MAX_ROLES, Waivers};
pub use bootstrap::{BOOTSTRAP_ID, BOOTSTRAP_PATH, BOOTSTRAP_SOURCE, MAX_BOOTSTRAP_BYTES};
pub use builder::{
    BuildWarning, BuiltRelease, DRAFTS_DIR, build_draft, build_release, publish, refuse_draft,
    set_channel, with_draft,
};
pub use canonical::{
    WithMembers, is_canonical, to_canonical_bytes, to_canonical_bytes_with_members,
};
pub use diff::{ChangeKind, EntryChange, ReleaseDiff, diff_releases};
pub use digest::{DigestParseError, Sha256Digest};
pub use duration::{IsoDuration, MAX_TIMER_SECONDS};
pub use embedded::{
    DEFAULT_KEY_ID, embedded_files, embedded_policy, external_policy, verify_embedded,
};
pub use error::RegistryError;
pub use files::{MAX_FILE_BYTES, RegistryFiles};
pub use ids::{
    ArtifactId, AssetId, AssetKind, ChannelName, CheckId, CheckKind, DeliveryMode, Enforcement,
    Harness, HostCapability, IdError, OnExpiry, ReleaseId, RoleName, SETUP_STEP, SchemaId, StepId,
    StepKind, ValidatorCapability, ValidatorExecution, ValidatorId, ValidatorIsolation, Version,
    WorkflowId, WritePolicy,
};
pub use init::{
    INIT_ADAPTER_VERSION, INIT_WORKFLOW_ID, InitOptions, init_source, init_source_with,
};
pub use instance::{example_or_instance, example_where_or_instance, generate_instance};
pub use model::{
    AdapterContract, AdapterPin, AssetDelivery, AssetRef, ChannelsFile, CheckDoc, Entry, EntryKind,
    MANIFEST_FORMAT, MAX_HELP_TEXT, MAX_HELP_URL, MAX_RULE_HELP, MEDIA_JSON, MEDIA_MARKDOWN,
    MEDIA_TOML, Manifest, OutputDecl, RuleHelp, SchemaRef, StepDoc, StepSummary, ValidatorDoc,
    ValidatorRef, WorkflowDoc,
};
pub use path::{PathRule, check_path_template, check_relative_path, expand_template};
pub use published::{
    PUBLISHED_FILE, PUBLISHED_FORMAT, PublishedEntry, PublishedLock, check_published, lock_of,
};
pub use regular::read_regular_file;
pub use release::{
    Asset, Schema, Step, StepCheck, TrustAnchor, Validator, VerifiedRegistry, VerifiedRelease,
    Workflow,
};
pub use renditions::claude_tools;
pub use report_contract::{
    BASE_REPORT_FIELDS, ContractBreach, FINDING_REQUIRED, JsonType, SEVERITIES, VERDICTS,
    check_report_schema,
};
pub use rules::{ContractRule, WorkflowRule};
pub use signature::{KeyId, PublicKeyFile, SignatureFile, SigningKey, SigningKeyFile};
pub use verify::{CHANNELS_FILE, DRAFT_2020_12, TrustPolicy, verify_registry};

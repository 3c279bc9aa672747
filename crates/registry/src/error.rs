//! The registry's one error type; every variant has a stable snake_case code.

use std::path::PathBuf;

use crate::path::PathRule;

/// A registry could not be loaded, verified, built or changed.
///
/// Messages name the file and entry at fault and say what to change. [`RegistryError::code`]
/// is the stable name callers branch on and report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Reading or writing the file system failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A registry folder holds a symlink; registries are plain files so digests mean something.
    #[error("{file}: symlinks are not allowed in a registry; replace it with the file itself")]
    SymlinkNotAllowed {
        /// Registry-relative path.
        file: String,
    },
    /// A name where a file belongs is a FIFO, socket, device or folder; registries and release
    /// sources hold plain files, and reading anything else could wait forever.
    #[error(
        "{file}: is a {kind}, not a regular file; registries and release sources hold plain files only: replace it with the file itself or remove it"
    )]
    NotARegularFile {
        /// Registry-relative path, or the source file at build time.
        file: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// A file the manifest lists is absent.
    #[error(
        "{file}: listed by the manifest as {entry} but missing; restore it or rebuild the release"
    )]
    EntryMissing {
        /// Registry-relative path.
        file: String,
        /// The entry naming it.
        entry: String,
    },
    /// A file is larger than the verifier accepts.
    #[error("{file}: {bytes} bytes is over the limit of {limit} bytes; split or shrink it")]
    EntryTooLarge {
        /// Registry-relative path.
        file: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A file's length differs from the manifest.
    #[error(
        "{file}: {entry} has {actual} bytes but the manifest says {expected}; restore the signed file or rebuild the release"
    )]
    SizeMismatch {
        /// Registry-relative path.
        file: String,
        /// The entry.
        entry: String,
        /// Manifest length.
        expected: u64,
        /// File length.
        actual: u64,
    },
    /// A file's sha256 differs from the manifest.
    #[error(
        "{file}: {entry} has sha256 {actual} but the manifest says {expected}; the file changed after signing: restore it or rebuild the release"
    )]
    DigestMismatch {
        /// Registry-relative path.
        file: String,
        /// The entry.
        entry: String,
        /// Manifest digest.
        expected: String,
        /// File digest.
        actual: String,
    },
    /// A file sits in a release folder without a manifest entry.
    #[error("{file}: not listed in the release manifest; remove it or rebuild the release")]
    UnlistedFile {
        /// Registry-relative path.
        file: String,
    },
    /// The embedded default registry's manifest is not the one compiled into the binary.
    #[error(
        "{file}: manifest sha256 {actual} is not the pinned {expected}; rebuild the binary from its own source tree"
    )]
    ManifestDigestMismatch {
        /// Registry-relative path.
        file: String,
        /// Pinned digest.
        expected: String,
        /// Actual digest.
        actual: String,
    },
    /// `manifest.json` is unreadable, not canonical, or breaks the manifest format.
    #[error("{file}: invalid manifest: {reason}")]
    ManifestInvalid {
        /// Registry-relative path.
        file: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// `manifest.sig` is absent.
    #[error("{file}: missing; sign the release with `rimthan registry build --key`")]
    SignatureMissing {
        /// Registry-relative path.
        file: String,
    },
    /// The signature does not verify with the named trusted key.
    #[error(
        "{file}: the signature by key {key_id} does not match the manifest bytes; the manifest changed after signing or the signature is corrupt"
    )]
    SignatureInvalid {
        /// Registry-relative path.
        file: String,
        /// The signing key id.
        key_id: String,
    },
    /// The signature names a key that is not in `keys/`.
    #[error(
        "{file}: signed by key {key_id}, which is not a trusted key in keys/; add its public key file or re-sign with a trusted key"
    )]
    UnknownSigningKey {
        /// Registry-relative path.
        file: String,
        /// The signing key id.
        key_id: String,
    },
    /// The signature is by the repository's default-release key, which only the embedded
    /// registry may use.
    #[error(
        "{file}: signed by key {key_id}, the public development key of the embedded default release, which no external registry may use; re-sign with your own key from `rimthan registry keygen`"
    )]
    UntrustedSigningKey {
        /// Registry-relative path.
        file: String,
        /// The signing key id.
        key_id: String,
    },
    /// A key file is malformed.
    #[error("{file}: invalid key file: {reason}")]
    KeyInvalid {
        /// Path of the key file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// An entry document does not parse or does not match its entry.
    #[error("{file}: {entry}: invalid document: {reason}")]
    DocumentInvalid {
        /// Registry-relative path.
        file: String,
        /// The entry.
        entry: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// An id or version breaks its rule.
    #[error("{file}: {entry}: {reason}")]
    InvalidId {
        /// Registry-relative path.
        file: String,
        /// The entry.
        entry: String,
        /// The rule, in words.
        reason: String,
    },
    /// Two entries share a key or path.
    #[error("{file}: {entry} is listed twice; keep one entry per kind, id and version")]
    DuplicateEntry {
        /// Registry-relative path.
        file: String,
        /// The entry.
        entry: String,
    },
    /// A reference names nothing in the release.
    #[error(
        "{file}: {entry} refers to {reference}, which is not in this release; add it or fix the reference"
    )]
    DanglingReference {
        /// Registry-relative path.
        file: String,
        /// The entry holding the reference.
        entry: String,
        /// What it names.
        reference: String,
    },
    /// A JSON Schema does not compile as draft 2020-12, or one of its `examples` fails it.
    #[error("{file}: {entry}: {reason}")]
    SchemaInvalid {
        /// Registry-relative path.
        file: String,
        /// The entry.
        entry: String,
        /// Every problem (bounded), each at its JSON pointer.
        reason: String,
    },
    /// A validator's report schema drops or retypes a field the engine relies on.
    #[error(
        "{file}: {entry}: report schema {schema}: {field}: {reason}; keep the base fields as the \
         validator-report schema declares them (extra fields may be added)"
    )]
    ReportSchemaIncompatible {
        /// Registry-relative path of the report schema.
        file: String,
        /// The validator (`validator <id>@<version>`).
        entry: String,
        /// The report schema (`<id>@<version>`).
        schema: String,
        /// The base field at fault (a JSON pointer into the schema when it is nested).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A workflow breaks a structural rule.
    #[error("{file}: {entry}: {rule}: {reason}")]
    WorkflowInvalid {
        /// Registry-relative path.
        file: String,
        /// The workflow or step.
        entry: String,
        /// The rule.
        rule: crate::rules::WorkflowRule,
        /// What to change.
        reason: String,
    },
    /// A deterministic check does not compile, reads what its step cannot give it, is not
    /// listed by its step, or fails a worked example or passes a counter-example at build time.
    #[error("{file}{}: {entry}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    CheckInvalid {
        /// Registry-relative path, or the source file at build time.
        file: String,
        /// The line in that file, where known.
        line: Option<usize>,
        /// The check (`check <workflow>/<id>@<version>`).
        entry: String,
        /// What to change.
        reason: String,
    },
    /// A workflow's harness pin is unusable.
    #[error("{file}: {entry}: harness {harness}: {reason}")]
    AdapterPinInvalid {
        /// Registry-relative path.
        file: String,
        /// The workflow.
        entry: String,
        /// The harness.
        harness: String,
        /// What to change.
        reason: String,
    },
    /// A host adapter's contract is missing or inconsistent.
    #[error("{file}: {entry}: adapter contract: {rule}: {reason}")]
    AdapterContractInvalid {
        /// Registry-relative path.
        file: String,
        /// The adapter.
        entry: String,
        /// The rule.
        rule: crate::rules::ContractRule,
        /// What to change.
        reason: String,
    },
    /// A path template breaks a path rule.
    #[error("{file}: {entry}: path template {template:?} for {asset_kind} breaks rule {rule}: {}", rule.advice())]
    PathTemplateInvalid {
        /// Registry-relative path.
        file: String,
        /// The adapter.
        entry: String,
        /// The asset kind whose template it is.
        asset_kind: String,
        /// The template.
        template: String,
        /// The rule.
        rule: PathRule,
    },
    /// A declared output path breaks a path rule.
    #[error("{file}: {entry}: output {artifact} path {path:?} breaks rule {rule}: {}", rule.advice())]
    OutputPathInvalid {
        /// Registry-relative path.
        file: String,
        /// The step.
        entry: String,
        /// The artifact.
        artifact: String,
        /// The path.
        path: String,
        /// The rule.
        rule: PathRule,
    },
    /// A per-harness rendition is not valid for its host.
    #[error("{file}: {entry}: {harness} rendition is not valid for its host: {reason}")]
    RenditionInvalid {
        /// Registry-relative path.
        file: String,
        /// The asset.
        entry: String,
        /// The harness (or `base`).
        harness: String,
        /// What to change.
        reason: String,
    },
    /// `channels.json` is malformed.
    #[error("{file}: invalid channels file: {reason}")]
    ChannelsInvalid {
        /// Registry-relative path.
        file: String,
        /// What to change.
        reason: String,
    },
    /// A channel points at a release the registry does not hold.
    #[error(
        "{file}: channel {channel} points at release {release}, which is not in releases/; build it first or fix the channel"
    )]
    ChannelUnknownRelease {
        /// Registry-relative path.
        file: String,
        /// The channel.
        channel: String,
        /// The release.
        release: String,
    },
    /// A release is not in the registry.
    #[error("release {release} is not in the registry (it holds: {available})")]
    ReleaseNotFound {
        /// The release asked for.
        release: String,
        /// The releases present.
        available: String,
    },
    /// A build would rewrite a published release with different bytes.
    #[error(
        "{file}: release {release} already exists with different content; published releases are immutable: build under a new release id"
    )]
    ReleaseExists {
        /// The differing file.
        file: String,
        /// The release.
        release: String,
    },
    /// A published release or versioned entry would name other bytes than it was published
    /// with (`published.json`).
    #[error(
        "{file}: {entry} was published with sha256 {published} but is now sha256 {actual}; \
         published content is immutable: {fix}"
    )]
    PublishedChanged {
        /// The differing file: registry-relative, or the source file a build made it from.
        file: String,
        /// The release manifest or entry, and the release that first published it.
        entry: String,
        /// The digest recorded when it was published.
        published: String,
        /// The digest it has now.
        actual: String,
        /// What to do instead: restore the bytes, and where a change goes (boxed: it keeps
        /// this error within the size every `Result` of the crate carries).
        fix: Box<str>,
    },
    /// A channel would name a draft, which is never published.
    #[error(
        "{file}: release {release} is a draft (drafts/{release}/, built with --draft): a draft is \
         never published, so no channel may name it; serve it by name (`serve --registry DIR \
         --release {release}`), or build it without --draft to publish it, then promote it"
    )]
    ReleaseIsDraft {
        /// `channels.json`, or the draft's manifest.
        file: String,
        /// The draft's id.
        release: String,
    },
    /// A draft would take the id of a published release.
    #[error(
        "{file}: release {release} is published; a draft takes an id no release has (try {release}-draft)"
    )]
    DraftOfPublished {
        /// The published release's folder or the lock that records it.
        file: String,
        /// The release id.
        release: String,
    },
    /// `published.json` is malformed, missing, or does not account for every release.
    #[error("{file}: {reason}")]
    PublishedLockInvalid {
        /// Registry-relative path of the lock.
        file: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// A release's bootstrap paragraph is not one a server may serve.
    #[error("{file}: {entry}: {reason}")]
    BootstrapInvalid {
        /// Registry-relative path, or the source file at build time.
        file: String,
        /// The entry.
        entry: String,
        /// What to change.
        reason: String,
    },
    /// A release source file is malformed, missing, or not used by the release.
    #[error("{file}{}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    SourceInvalid {
        /// Path of the source file.
        file: String,
        /// The 1-based line in that file, where known.
        line: Option<usize>,
        /// What to change.
        reason: String,
    },
}

impl RegistryError {
    /// The stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            RegistryError::Io { .. } => "io_error",
            RegistryError::SymlinkNotAllowed { .. } => "symlink_not_allowed",
            RegistryError::NotARegularFile { .. } => "not_a_regular_file",
            RegistryError::EntryMissing { .. } => "entry_missing",
            RegistryError::EntryTooLarge { .. } => "entry_too_large",
            RegistryError::SizeMismatch { .. } => "size_mismatch",
            RegistryError::DigestMismatch { .. } => "digest_mismatch",
            RegistryError::UnlistedFile { .. } => "unlisted_file",
            RegistryError::ManifestDigestMismatch { .. } => "manifest_digest_mismatch",
            RegistryError::ManifestInvalid { .. } => "manifest_invalid",
            RegistryError::SignatureMissing { .. } => "signature_missing",
            RegistryError::SignatureInvalid { .. } => "signature_invalid",
            RegistryError::UnknownSigningKey { .. } => "unknown_signing_key",
            RegistryError::UntrustedSigningKey { .. } => "untrusted_signing_key",
            RegistryError::KeyInvalid { .. } => "key_invalid",
            RegistryError::DocumentInvalid { .. } => "document_invalid",
            RegistryError::InvalidId { .. } => "invalid_id",
            RegistryError::DuplicateEntry { .. } => "duplicate_entry",
            RegistryError::DanglingReference { .. } => "dangling_reference",
            RegistryError::SchemaInvalid { .. } => "schema_invalid",
            RegistryError::ReportSchemaIncompatible { .. } => "report_schema_incompatible",
            RegistryError::WorkflowInvalid { .. } => "workflow_invalid",
            RegistryError::CheckInvalid { .. } => "check_invalid",
            RegistryError::AdapterPinInvalid { .. } => "adapter_pin_invalid",
            RegistryError::AdapterContractInvalid { .. } => "adapter_contract_invalid",
            RegistryError::PathTemplateInvalid { .. } => "path_template_invalid",
            RegistryError::OutputPathInvalid { .. } => "output_path_invalid",
            RegistryError::RenditionInvalid { .. } => "rendition_invalid",
            RegistryError::ChannelsInvalid { .. } => "channels_invalid",
            RegistryError::ChannelUnknownRelease { .. } => "channel_unknown_release",
            RegistryError::ReleaseNotFound { .. } => "release_not_found",
            RegistryError::ReleaseExists { .. } => "release_exists",
            RegistryError::PublishedChanged { .. } => "published_changed",
            RegistryError::ReleaseIsDraft { .. } => "release_is_draft",
            RegistryError::DraftOfPublished { .. } => "release_exists",
            RegistryError::PublishedLockInvalid { .. } => "published_lock_invalid",
            RegistryError::BootstrapInvalid { .. } => "bootstrap_invalid",
            RegistryError::SourceInvalid { .. } => "source_invalid",
        }
    }

    /// The path rule broken, for path errors.
    pub fn path_rule(&self) -> Option<PathRule> {
        match self {
            RegistryError::PathTemplateInvalid { rule, .. }
            | RegistryError::OutputPathInvalid { rule, .. } => Some(*rule),
            _ => None,
        }
    }

    /// Whether the fault is in the input (as opposed to the machine: I/O).
    pub fn is_input_error(&self) -> bool {
        !matches!(self, RegistryError::Io { .. })
    }

    /// The file this error names, for errors that name one, so a builder can point it at the
    /// source file the author edits instead of the built file.
    pub(crate) fn file_mut(&mut self) -> Option<&mut String> {
        match self {
            RegistryError::Io { .. } | RegistryError::ReleaseNotFound { .. } => None,
            RegistryError::SymlinkNotAllowed { file }
            | RegistryError::NotARegularFile { file, .. }
            | RegistryError::EntryMissing { file, .. }
            | RegistryError::EntryTooLarge { file, .. }
            | RegistryError::SizeMismatch { file, .. }
            | RegistryError::DigestMismatch { file, .. }
            | RegistryError::UnlistedFile { file }
            | RegistryError::ManifestDigestMismatch { file, .. }
            | RegistryError::ManifestInvalid { file, .. }
            | RegistryError::SignatureMissing { file }
            | RegistryError::SignatureInvalid { file, .. }
            | RegistryError::UnknownSigningKey { file, .. }
            | RegistryError::UntrustedSigningKey { file, .. }
            | RegistryError::KeyInvalid { file, .. }
            | RegistryError::DocumentInvalid { file, .. }
            | RegistryError::InvalidId { file, .. }
            | RegistryError::DuplicateEntry { file, .. }
            | RegistryError::DanglingReference { file, .. }
            | RegistryError::SchemaInvalid { file, .. }
            | RegistryError::WorkflowInvalid { file, .. }
            | RegistryError::CheckInvalid { file, .. }
            | RegistryError::AdapterPinInvalid { file, .. }
            | RegistryError::AdapterContractInvalid { file, .. }
            | RegistryError::PathTemplateInvalid { file, .. }
            | RegistryError::OutputPathInvalid { file, .. }
            | RegistryError::RenditionInvalid { file, .. }
            | RegistryError::ChannelsInvalid { file, .. }
            | RegistryError::ChannelUnknownRelease { file, .. }
            | RegistryError::ReleaseExists { file, .. }
            | RegistryError::PublishedChanged { file, .. }
            | RegistryError::ReleaseIsDraft { file, .. }
            | RegistryError::DraftOfPublished { file, .. }
            | RegistryError::PublishedLockInvalid { file, .. }
            | RegistryError::ReportSchemaIncompatible { file, .. }
            | RegistryError::BootstrapInvalid { file, .. }
            | RegistryError::SourceInvalid { file, .. } => Some(file),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RegistryError::Io { path, source }
    }
}

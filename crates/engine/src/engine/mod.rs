//! The engine: the four workflow operations and an approver's decision over a store and a
//! verified registry, one module per operation ([`start`], [`active_step`], [`prepare`],
//! [`submit`], [`approve`]), and what an approver looks at ([`look`]). Each change reads the same
//! way: parse the request, open the session ([`access`]), decide with a rule
//! (`rules/transition.rs`), and store the change in the one compare-and-swap loop
//! ([`transact`]), with its audit entry ([`record`]).
//!
//! The request behind each change is remembered in the session (`LastRequest`), so a harness
//! that repeats it after losing the answer gets that answer again, not a second change or a
//! `stale_checkpoint` it cannot recover from (`docs/engine.md` §3.1).

mod access;
mod active_step;
mod approve;
mod look;
mod prepare;
mod record;
mod start;
mod submit;
mod timers;
mod trace;
mod transact;
mod verdicts;

use std::sync::Arc;

use rimthan_registry::PublicKeyFile;

use crate::{
    error::EngineError,
    evidence::statement::statement_for,
    model::chain::ChainLink,
    model::checkpoint::CheckpointKey,
    model::payload::ProvenanceFile,
    model::provenance::{
        KeyCustody, KeysDocument, ProvenanceKey, STATEMENT_PATH, SignerRef, sign_statement,
    },
    model::session::{Session, Status},
    releases::Releases,
    rules::offers::PolicyCache,
    store::Store,
};

pub use active_step::ACTIVE_STEP_CACHE_BOUNDS;
pub use look::{MAX_WAITING_LISTED, Waiting};
pub(crate) use record::Evidence;
pub use timers::{TIMER_BATCH, TimersFired};
pub use trace::TRACE_TARGET;

/// The store secret that keys checkpoints.
const CHECKPOINT_SECRET: &str = "checkpoint-hmac-sha256";
/// The store secret that seeds the provenance key, when none is given by file.
const PROVENANCE_SECRET: &str = "provenance-ed25519-seed";

/// The workflow engine.
#[derive(Debug)]
pub struct Engine {
    releases: Arc<Releases>,
    store: Arc<dyn Store>,
    key: CheckpointKey,
    policies: PolicyCache,
    provenance: ProvenanceKey,
    custody: KeyCustody,
    retired: Vec<PublicKeyFile>,
    steps: active_step::StepCache,
    /// The findings of the checks run since start, by what determines them.
    verdicts: verdicts::Verdicts,
    /// Where webhook events go; none writes no events.
    notify: Option<crate::model::notify::NotifyConfig>,
}

impl Engine {
    /// An engine over `releases` and `store`. Without an explicit `secret`, the checkpoint secret
    /// is read from the store, generated on first use (replicas sharing a database share it).
    pub async fn new(
        releases: Arc<Releases>,
        store: Arc<dyn Store>,
        secret: Option<Vec<u8>>,
    ) -> Result<Self, EngineError> {
        Self::build(releases, store, secret, None).await
    }

    /// An engine that signs provenance with `key`, read from the operator's file (`serve
    /// --provenance-key-file`): no key is generated or read from the store, and the published
    /// keys are `key` and `retired` (public keys signed with before), never the store's list, so
    /// a key added to the store is not trusted.
    pub async fn with_configured_key(
        releases: Arc<Releases>,
        store: Arc<dyn Store>,
        secret: Option<Vec<u8>>,
        key: ProvenanceKey,
        retired: Vec<PublicKeyFile>,
    ) -> Result<Self, EngineError> {
        Self::build(releases, store, secret, Some((key, retired))).await
    }

    async fn build(
        releases: Arc<Releases>,
        store: Arc<dyn Store>,
        secret: Option<Vec<u8>>,
        configured: Option<(ProvenanceKey, Vec<PublicKeyFile>)>,
    ) -> Result<Self, EngineError> {
        let secret = match secret {
            Some(s) => s,
            None => {
                store
                    .secret(CHECKPOINT_SECRET, CheckpointKey::generate_secret())
                    .await?
            }
        };
        let key = CheckpointKey::new(secret).ok_or_else(|| EngineError::InvalidArgument {
            field: "checkpoint secret".into(),
            message: format!(
                "use at least {} bytes",
                crate::model::checkpoint::MIN_SECRET_BYTES
            ),
        })?;
        let (provenance, custody, retired) = match configured {
            Some((key, retired)) => (key, KeyCustody::File, retired),
            None => {
                let seed = store
                    .secret(PROVENANCE_SECRET, ProvenanceKey::generate_seed())
                    .await?;
                let key = ProvenanceKey::from_seed(&seed).ok_or_else(|| {
                    EngineError::InvalidArgument {
                        field: "provenance key".into(),
                        message: "the stored provenance seed is not 32 bytes".into(),
                    }
                })?;
                (key, KeyCustody::Store, Vec::new())
            }
        };
        // The store's list records every key this database signed with, for the audit trail; it
        // is published only where the key itself lives in the store.
        store
            .add_provenance_key(&provenance.public_key_file())
            .await?;
        Ok(Self {
            releases,
            store,
            key,
            policies: PolicyCache::default(),
            provenance,
            custody,
            retired,
            steps: active_step::StepCache::new(ACTIVE_STEP_CACHE_BOUNDS),
            verdicts: verdicts::Verdicts::default(),
            notify: None,
        })
    }

    /// How many times this engine has run a deterministic check since it started: once per
    /// check and set of input digests while its findings are kept, however many times a
    /// preparation is retried or a lost compare-and-swap reopens the session (exported as
    /// `rimthan_check_runs_total`).
    pub fn checks_run(&self) -> u64 {
        self.verdicts.runs()
    }

    /// What the verdict cache (check findings by check and input digests) holds and how it has
    /// served.
    pub fn verdict_cache(&self) -> crate::cache::CacheStats {
        self.verdicts.stats()
    }

    /// Seals the audit chains changed since the last seal with the provenance key
    /// (`docs/engine.md` §7.6): the seal's number, or `None` when nothing changed.
    pub async fn seal(&self) -> Result<Option<u64>, EngineError> {
        let at = crate::model::session::now_rfc3339();
        Ok(self.store.seal(&self.provenance, &at).await?)
    }

    /// Where the provenance key is held (`/readyz` and every statement say it).
    pub fn key_custody(&self) -> KeyCustody {
        self.custody
    }

    /// The key that signs provenance statements and retention anchors.
    pub fn provenance_key(&self) -> &ProvenanceKey {
        &self.provenance
    }

    /// The published provenance keys. With a key from configuration: that key and the retired
    /// keys configured beside it. With the store's key: every key this database signed with.
    pub async fn provenance_keys(&self) -> Result<KeysDocument, EngineError> {
        let keys = match self.custody {
            KeyCustody::File => {
                let mut keys = vec![self.provenance.public_key_file()];
                for retired in &self.retired {
                    if !keys.iter().any(|k| k.key_id == retired.key_id) {
                        keys.push(retired.clone());
                    }
                }
                keys
            }
            KeyCustody::Store => self.store.provenance_keys().await?,
        };
        Ok(KeysDocument { keys })
    }

    /// The signed provenance statement of a completed session, as the file a harness keeps;
    /// none for a session that is not completed. The same session gives the same file (the
    /// statement is canonical JSON and ed25519 deterministic).
    pub async fn provenance(
        &self,
        session: &Session,
    ) -> Result<Option<ProvenanceFile>, EngineError> {
        self.provenance_at(session, None).await
    }

    /// The provenance statement of `session` if it is completed, signed over its completing
    /// chain entry: `completion` when the caller just stored it, else as read from the store.
    async fn provenance_at(
        &self,
        session: &Session,
        completion: Option<ChainLink>,
    ) -> Result<Option<ProvenanceFile>, EngineError> {
        if session.status != Status::Completed {
            return Ok(None);
        }
        let completion = match completion {
            Some(link) => link,
            None => match self.store.completion_link(&session.id).await? {
                Some(link) => link,
                None => return Ok(None),
            },
        };
        let release = self.pinned_release(session)?;
        let signer = Some(SignerRef {
            key_id: self.provenance.key_id(),
            custody: self.custody,
        });
        let statement = statement_for(&release, session, completion, signer).ok_or_else(|| {
            EngineError::SessionInconsistent {
                session: session.id.to_string(),
                what: "a workflow or host adapter".into(),
            }
        })?;
        Ok(Some(ProvenanceFile {
            path: STATEMENT_PATH.into(),
            content: sign_statement(&statement, &self.provenance),
        }))
    }

    /// The registry in use.
    pub fn releases(&self) -> &Arc<Releases> {
        &self.releases
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The span of one operation on the store, a child of the request's.
    fn store_span(&self, operation: &'static str) -> tracing::Span {
        trace::store_span(self.store.system(), operation)
    }
}

//! The engine: the four workflow operations over a store and a verified registry, one module
//! per operation ([`start`], [`active_step`], [`prepare`], [`submit`]) over shared access
//! checks ([`access`]) and audit records ([`record`]).
//!
//! Every state change is a compare-and-swap on the session's revision ([`Engine::change`]),
//! retried from a fresh read when another call won; a retry re-runs every check, so a lost race
//! surfaces as the code the winner's change implies (`stale_checkpoint`,
//! `validation_superseded`).
//!
//! The request behind each change is remembered in the session ([`LastChange`]), so a harness
//! that repeats it after losing the answer gets that answer again, not a second change or a
//! `stale_checkpoint` it cannot recover from (`docs/engine.md` §3.1).

mod access;
mod active_step;
mod approve;
mod prepare;
mod record;
mod start;
mod submit;

use std::sync::Arc;

use rimthan_registry::VerifiedRelease;

use crate::{
    error::EngineError,
    evidence::statement::statement_for,
    model::audit::{AuditEntry, Operation},
    model::checkpoint::CheckpointKey,
    model::payload::{ProvenanceFile, Rejected},
    model::provenance::{KeysDocument, ProvenanceKey, STATEMENT_PATH, sign_statement},
    model::session::{LastChange, Principal, Session},
    releases::Releases,
    rules::offers::PolicyCache,
    store::Store,
};

pub use active_step::ACTIVE_STEP_CACHE_BOUNDS;
pub(crate) use record::Evidence;

/// The store secret that keys checkpoints.
const CHECKPOINT_SECRET: &str = "checkpoint-hmac-sha256";
/// The store secret that seeds the provenance key, when none is given by file.
const PROVENANCE_SECRET: &str = "provenance-ed25519-seed";
/// Compare-and-swap attempts before a call gives up.
const MAX_ATTEMPTS: u32 = 32;

/// The workflow engine.
#[derive(Debug)]
pub struct Engine {
    releases: Arc<Releases>,
    store: Arc<dyn Store>,
    key: CheckpointKey,
    policies: PolicyCache,
    provenance: ProvenanceKey,
    steps: active_step::StepCache,
}

/// What one attempt at a change decided, from the session as it was read.
enum Decision<T> {
    /// Answer without changing the session, after appending the audit entry (a replayed
    /// retry, or a refusal).
    Answer(T, AuditEntry),
    /// Store `next` one revision on, if the session is still at the revision read, with its
    /// audit entry in the same transaction, then answer; when another call changed it first,
    /// decide again. The operation leaves `next.revision` alone: [`Engine::change`] moves it.
    Change {
        next: Box<Session>,
        audit: AuditEntry,
        answer: T,
    },
}

/// The arguments every change shares: what it is, the checkpoint it names, who calls, what
/// evidence it carries and which request it is (to recognise its own retry).
struct ChangeCall<'a> {
    tool: Operation,
    checkpoint: &'a str,
    principal: Option<&'a Principal>,
    evidence: Evidence,
    change: &'a LastChange,
}

impl Engine {
    /// An engine over `releases` and `store`. Without an explicit `secret`, the checkpoint secret
    /// is read from the store, generated on first use (replicas sharing a database share it).
    pub async fn new(
        releases: Arc<Releases>,
        store: Arc<dyn Store>,
        secret: Option<Vec<u8>>,
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
        let seed = store
            .secret(PROVENANCE_SECRET, ProvenanceKey::generate_seed())
            .await?;
        let provenance =
            ProvenanceKey::from_seed(&seed).ok_or_else(|| EngineError::InvalidArgument {
                field: "provenance key".into(),
                message: "the stored provenance seed is not 32 bytes".into(),
            })?;
        store
            .add_provenance_key(&provenance.public_key_file())
            .await?;
        Ok(Self {
            releases,
            store,
            key,
            policies: PolicyCache::default(),
            provenance,
            steps: active_step::StepCache::new(ACTIVE_STEP_CACHE_BOUNDS),
        })
    }

    /// Signs provenance with `key` (`serve --provenance-key-file`) instead of the stored one.
    /// Its public key joins the published ones; keys used before stay published, so what
    /// they signed still verifies (rotation).
    pub async fn with_provenance_key(mut self, key: ProvenanceKey) -> Result<Self, EngineError> {
        self.store
            .add_provenance_key(&key.public_key_file())
            .await?;
        self.provenance = key;
        Ok(self)
    }

    /// The key that signs provenance statements and retention anchors.
    pub fn provenance_key(&self) -> &ProvenanceKey {
        &self.provenance
    }

    /// The published provenance keys: every key this database signed with.
    pub async fn provenance_keys(&self) -> Result<KeysDocument, EngineError> {
        Ok(KeysDocument {
            keys: self.store.provenance_keys().await?,
        })
    }

    /// The signed provenance statement of a completed session, as the file a harness keeps;
    /// none for a session that is not completed. The same session gives the same file (the
    /// statement is canonical JSON and ed25519 deterministic).
    pub async fn provenance(
        &self,
        session: &Session,
    ) -> Result<Option<ProvenanceFile>, EngineError> {
        if session.status != crate::model::session::Status::Completed {
            return Ok(None);
        }
        let Some(completion) = self.store.completion_link(&session.id).await? else {
            return Ok(None);
        };
        let release = self.pinned_release(session)?;
        let statement = statement_for(&release, session, completion).ok_or_else(|| {
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

    /// Attaches the provenance statement to a completed session's answer.
    async fn with_provenance(
        &self,
        mut payload: Box<crate::model::payload::ActivePayload>,
    ) -> Result<Box<crate::model::payload::ActivePayload>, EngineError> {
        if payload.status == crate::model::session::Status::Completed {
            let id = payload
                .session_id
                .parse()
                .map_err(|_| EngineError::SessionInconsistent {
                    session: payload.session_id.clone(),
                    what: "an id that does not parse".into(),
                })?;
            if let Some(session) = self.store.load_session(&id).await? {
                payload.provenance = self.provenance(&session).await?;
            }
        }
        Ok(payload)
    }

    /// The registry in use.
    pub fn releases(&self) -> &Arc<Releases> {
        &self.releases
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn pinned_release(&self, session: &Session) -> Result<Arc<VerifiedRelease>, EngineError> {
        self.releases
            .snapshot()
            .release(&session.release)
            .cloned()
            .ok_or_else(|| EngineError::PinnedReleaseMissing(session.release.to_string()))
    }

    /// The one compare-and-swap loop: opens the session the checkpoint names (refusals become
    /// `refused`'s answer), lets `decide` judge it, and stores the change it decides on. A lost
    /// race decides again from a fresh read, at most [`MAX_ATTEMPTS`] times.
    async fn change<T>(
        &self,
        call: ChangeCall<'_>,
        refused: impl Fn(Rejected) -> T,
        mut decide: impl FnMut(&Session, &Arc<VerifiedRelease>) -> Result<Decision<T>, EngineError>,
    ) -> Result<T, EngineError> {
        for _ in 0..MAX_ATTEMPTS {
            let (session, release) = match self
                .open(
                    call.tool,
                    call.checkpoint,
                    call.principal,
                    call.evidence,
                    Some(call.change),
                )
                .await?
            {
                Ok(opened) => opened,
                Err(rejected) => return Ok(refused(rejected)),
            };
            match decide(&session, &release)? {
                Decision::Answer(answer, audit) => {
                    self.store.append_audit(&audit).await?;
                    return Ok(answer);
                }
                Decision::Change {
                    mut next,
                    audit,
                    answer,
                } => {
                    // The one place a revision moves: every stored change is one revision on
                    // from the session it was decided from, whatever the operation.
                    next.revision = session.revision + 1;
                    if self
                        .store
                        .update_session(session.revision, &next, &audit)
                        .await?
                    {
                        return Ok(answer);
                    }
                }
            }
        }
        Err(EngineError::Contended {
            attempts: MAX_ATTEMPTS,
        })
    }
}

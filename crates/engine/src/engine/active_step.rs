//! `rimthan.get_active_step`: the session's active step, for the checkpoint that is current.
//!
//! The payload is a pure function of the session at one revision and of the release it pins
//! (release content is immutable; the checkpoint, the URIs and a completed session's signed
//! statement are all deterministic), so it is computed once per revision and kept in a cache
//! bounded in bytes and entries, keyed by the session id and revision, never by anything a
//! caller sent. Every call still opens the session first: the checkpoint, the caller's access
//! and the checkpoint's sequence are checked against the stored session on every call, and a
//! change moves the revision (`engine/transact.rs`), so a kept payload can never answer for a
//! session that moved on.

use std::sync::{Arc, Weak};

use rimthan_registry::VerifiedRegistry;

use super::{Engine, Evidence, access::Door};
use crate::{
    cache::{BoundedCache, CacheBounds, json_weight},
    error::EngineError,
    model::audit::Operation,
    model::payload::SERVER_NAME,
    model::payload::{ActivePayload, StepResult},
    model::request::ActiveStepRequest,
    model::session::{Principal, Session, SessionId},
    rules::view::Pinned,
};

/// The bounds of the active-step cache: a payload is a few KiB, so a fleet's thousands of live
/// sessions fit.
pub const ACTIVE_STEP_CACHE_BOUNDS: CacheBounds = CacheBounds {
    max_bytes: 32 * 1024 * 1024,
    max_entries: 65_536,
};

/// A kept payload and what it was computed from beyond its key.
#[derive(Debug)]
pub(super) struct KeptStep {
    payload: ActivePayload,
    /// A session pruned and started anew from its idempotency key has the same id and starts
    /// again at revision 0: its creation time tells the two apart.
    created_at: String,
    /// The registry snapshot the release was resolved in; a weak pointer keeps its address
    /// from being reused without keeping a replaced registry in memory.
    registry: Weak<VerifiedRegistry>,
}

/// Active-step payloads by session id and revision.
pub(super) type StepCache = BoundedCache<(SessionId, u64), Arc<KeptStep>>;

impl Engine {
    /// `rimthan.get_active_step`.
    pub async fn active_step(
        &self,
        req: ActiveStepRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
        let door = Door::Checkpoint {
            tool: Operation::GetActiveStep,
            token: &req.checkpoint,
            principal,
            evidence: Evidence::None,
            retry: None,
        };
        let opened = match self.open(&door).await? {
            Ok(opened) => opened,
            Err(rejected) => return Ok(StepResult::Rejected(rejected)),
        };
        let (session, release) = (opened.session(), opened.release());
        // A read that succeeds changes nothing and proves nothing new: it is counted in the
        // metrics, not logged row by row (docs/engine.md §7). A refused read was audited above.
        let registry = self.releases.snapshot();
        let key = (session.id.clone(), session.revision);
        let current = |kept: &Arc<KeptStep>| {
            kept.created_at == session.created_at
                && std::ptr::eq(kept.registry.as_ptr(), Arc::as_ptr(&registry))
        };
        if let Some(kept) = self.steps.get_if(&key, current) {
            return Ok(StepResult::Active(Box::new(kept.payload.clone())));
        }
        let payload = self.active_payload_of(session, release).await?;
        let kept = KeptStep {
            payload: payload.clone(),
            created_at: session.created_at.clone(),
            registry: Arc::downgrade(&registry),
        };
        self.steps
            .insert(key, Arc::new(kept), json_weight(&payload));
        Ok(StepResult::Active(Box::new(payload)))
    }

    async fn active_payload_of(
        &self,
        session: &Session,
        release: &Arc<rimthan_registry::VerifiedRelease>,
    ) -> Result<ActivePayload, EngineError> {
        let pinned = Pinned::resolve(release, session, &self.policies)?;
        let mut payload = pinned.active_payload(session, &self.key, SERVER_NAME);
        // A completed session's statement stays readable: a harness that lost the completing
        // answer gets it here.
        payload.provenance = self.provenance(session).await?;
        Ok(payload)
    }

    /// What the active-step cache holds and how it has served.
    pub fn active_step_cache(&self) -> crate::cache::CacheStats {
        self.steps.stats()
    }
}

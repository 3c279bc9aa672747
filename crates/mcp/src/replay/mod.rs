//! Replays answers from pre-serialized bytes: repeated `resources/read` requests, and repeated
//! `rimthan.get_active_step` calls while their session has not changed (`docs/mcp.md` §3.1).
//!
//! A read's answer is a pure function of the verified registry in use, the request's headers and
//! its body apart from the JSON-RPC id: release content is immutable and the handler reads
//! nothing else. A `get_active_step` answer is a pure function of those, the caller, and the
//! session at one revision. So the first answer to each distinct request comes from rmcp, after
//! every header and body check it makes, and is kept serialized; a later identical request gets
//! it back with its own id, without a trip through rmcp's per-request service, once the step
//! answer's session is proved still at the revision the answer was computed from (in memory, or
//! by a revision probe where replicas share the database). Anything else (another method, a
//! batch, an error, a refusal, an SSE stream) passes through untouched. Kept answers are dropped
//! when the registry changes (a reload or a channel move) and are bounded in size and number.

mod key;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError, RwLock},
    time::Instant,
};

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use hashlink::LruCache;
pub(crate) use key::is_json;
use key::{Read, no_uri, read_key, result_of};
use rimthan_engine::{AnsweredAt, Engine, Principal};
use rimthan_registry::VerifiedRegistry;

use crate::{metrics::Metrics, tools::ACTIVE_STEP};

/// Most bytes of kept read answers; past it, answers are still served, just not kept.
const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;
/// Most kept step answers (least recently used out), and the largest one kept.
const MAX_KEPT_STEPS: usize = 1024;
const MAX_KEPT_STEP_BYTES: usize = 64 * 1024;

/// One kept answer: status and headers as rmcp sent them, and its JSON-RPC result, serialized.
#[derive(Debug)]
struct Kept {
    status: StatusCode,
    headers: HeaderMap,
    result: Bytes,
}

impl Kept {
    /// The kept answer, addressed to the request with `id`.
    fn answer(&self, id: &[u8]) -> Response {
        let mut body = Vec::with_capacity(self.result.len() + id.len() + 32);
        body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        body.extend_from_slice(id);
        body.extend_from_slice(br#","result":"#);
        body.extend_from_slice(&self.result);
        body.push(b'}');
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers.clone();
        response
    }

    /// Keeps a response's success answering `id`, giving the response back either way.
    async fn from_response(response: Response, id: &[u8]) -> (Response, Option<Kept>) {
        if response.status() != StatusCode::OK || !is_json(response.headers()) {
            return (response, None);
        }
        let (mut parts, body) = response.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return (StatusCode::INTERNAL_SERVER_ERROR.into_response(), None);
        };
        let kept = result_of(&bytes, id).map(|result| {
            let mut headers = parts.headers.clone();
            headers.remove(header::CONTENT_LENGTH);
            headers.remove("x-request-id");
            Kept {
                status: parts.status,
                headers,
                result,
            }
        });
        parts.headers.remove(header::CONTENT_LENGTH);
        (Response::from_parts(parts, Body::from(bytes)), kept)
    }
}

/// A kept step answer and the state it was computed from.
#[derive(Debug)]
struct KeptStep {
    kept: Kept,
    registry: Arc<VerifiedRegistry>,
    at: AnsweredAt,
    /// The metrics outcome label the answer was counted with.
    outcome: &'static str,
}

/// Where the tool handler leaves the state a successful `get_active_step` answer was computed
/// from, for the replay to keep the answer against.
#[derive(Debug, Clone, Default)]
pub(crate) struct AnswerSlot(Arc<Mutex<Option<(AnsweredAt, &'static str)>>>);

impl AnswerSlot {
    pub(crate) fn fill(&self, at: AnsweredAt, outcome: &'static str) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((at, outcome));
    }

    fn take(&self) -> Option<(AnsweredAt, &'static str)> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// The answers kept for one registry snapshot.
#[derive(Debug, Default)]
struct Answers {
    registry: Option<Arc<VerifiedRegistry>>,
    by_request: HashMap<Vec<u8>, Arc<Kept>>,
    bytes: usize,
}

/// Kept answers, shared by every request of one server.
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    engine: Arc<Engine>,
    metrics: Arc<Metrics>,
    answers: Arc<RwLock<Answers>>,
    steps: Arc<Mutex<LruCache<Vec<u8>, Arc<KeptStep>>>>,
}

impl Replay {
    /// Nothing kept yet, over the engine (and its registry) a server serves.
    pub(crate) fn new(engine: Arc<Engine>, metrics: Arc<Metrics>) -> Self {
        Self {
            engine,
            metrics,
            answers: Arc::default(),
            steps: Arc::new(Mutex::new(LruCache::new(MAX_KEPT_STEPS))),
        }
    }

    fn lookup(&self, registry: &Arc<VerifiedRegistry>, key: &[u8]) -> Option<Arc<Kept>> {
        let answers = self.answers.read().expect("replay lock is never poisoned");
        let current = answers.registry.as_ref()?;
        if !Arc::ptr_eq(current, registry) {
            return None;
        }
        answers.by_request.get(key).cloned()
    }

    fn keep(&self, registry: Arc<VerifiedRegistry>, key: Vec<u8>, kept: Kept) {
        // An answer that raced a reload belongs to a registry no longer served: not worth keeping.
        if !Arc::ptr_eq(&registry, &self.engine.releases().snapshot()) {
            return;
        }
        let mut answers = self.answers.write().expect("replay lock is never poisoned");
        if !answers
            .registry
            .as_ref()
            .is_some_and(|r| Arc::ptr_eq(r, &registry))
        {
            // Holding the snapshot keeps its address from being reused by a later one.
            *answers = Answers {
                registry: Some(registry),
                ..Answers::default()
            };
        }
        let size = key.len() + kept.result.len();
        if answers.bytes + size <= MAX_KEPT_BYTES {
            answers.bytes += size;
            answers.by_request.insert(key, Arc::new(kept));
        }
    }

    fn steps(&self) -> std::sync::MutexGuard<'_, LruCache<Vec<u8>, Arc<KeptStep>>> {
        self.steps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept answer to a step request, if it still holds: same registry, and the session
    /// still at the revision the answer was computed from.
    async fn current_step(
        &self,
        registry: &Arc<VerifiedRegistry>,
        key: &[u8],
    ) -> Option<Arc<KeptStep>> {
        let kept = self.steps().get(key).cloned()?;
        if !Arc::ptr_eq(&kept.registry, registry) {
            return None;
        }
        let revision = self.engine.revision(&kept.at.session).await.ok()??;
        (revision == kept.at.revision).then_some(kept)
    }

    /// Answers a read, or keeps rmcp's answer to it.
    async fn read(
        &self,
        parts: axum::http::request::Parts,
        bytes: Bytes,
        next: Next,
        key: Vec<u8>,
        id: Vec<u8>,
    ) -> Response {
        let registry = self.engine.releases().snapshot();
        if let Some(kept) = self.lookup(&registry, &key) {
            return kept.answer(&id);
        }
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        let (response, kept) = Kept::from_response(response, &id).await;
        if let Some(kept) = kept {
            self.keep(registry, key, kept);
        }
        response
    }

    /// Answers a `get_active_step` call, counted as the tool handler counts it, or keeps
    /// rmcp's answer to it with the state the handler computed it from.
    async fn step(
        &self,
        mut parts: axum::http::request::Parts,
        bytes: Bytes,
        next: Next,
        key: Vec<u8>,
        id: Vec<u8>,
    ) -> Response {
        let started = Instant::now();
        let registry = self.engine.releases().snapshot();
        if let Some(kept) = self.current_step(&registry, &key).await {
            self.metrics
                .tool_call(ACTIVE_STEP, kept.outcome, "none", started.elapsed());
            return kept.kept.answer(&id);
        }
        let slot = AnswerSlot::default();
        parts.extensions.insert(slot.clone());
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        let (response, kept) = Kept::from_response(response, &id).await;
        let still_served = Arc::ptr_eq(&registry, &self.engine.releases().snapshot());
        if let (Some(kept), Some((at, outcome)), true) = (kept, slot.take(), still_served)
            && kept.result.len() <= MAX_KEPT_STEP_BYTES
        {
            let step = KeptStep {
                kept,
                registry,
                at,
                outcome,
            };
            self.steps().insert(key, Arc::new(step));
        }
        response
    }
}

/// Middleware on `/mcp`, inside auth and after the body was read whole (and bounded).
pub(crate) async fn replay(State(replay): State<Replay>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "unreadable request body\n").into_response();
    };
    let principal = parts.extensions.get::<Principal>();
    match read_key(&parts.headers, principal, &bytes) {
        Read::Keyed(key, id) => replay.read(parts, bytes, next, key, id).await,
        Read::Step(key, id) => replay.step(parts, bytes, next, key, id).await,
        Read::NoUri(id) => no_uri(&id),
        Read::Other => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_answer_is_addressed_to_the_new_id() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        let kept = Kept {
            status: StatusCode::OK,
            headers,
            result: Bytes::from_static(br#"{"contents":[]}"#),
        };
        let response = kept.answer(br#""abc""#);
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), 1024));
        let value: serde_json::Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"jsonrpc": "2.0", "id": "abc", "result": {"contents": []}})
        );
    }
}

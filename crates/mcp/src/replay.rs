//! Replays rmcp's own answers to repeated `resources/read` requests from pre-serialized bytes.
//!
//! A read's answer is a pure function of the verified registry in use, the request's headers and
//! its body apart from the JSON-RPC id: release content is immutable and the handler reads
//! nothing else. So the first answer to each distinct request comes from rmcp, after every header
//! and body check it makes, and is kept serialized; a later identical request gets it back with
//! its own id, without a trip through rmcp's per-request service. Anything else (another method,
//! a batch, an error, an SSE stream) passes through untouched. Kept answers are dropped when the
//! registry changes (a reload or a channel move) and are bounded in total size.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rimthan_engine::Releases;
use rimthan_registry::VerifiedRegistry;
use serde_json::Value;

/// Most bytes of kept answers; past it, answers are still served, just not kept.
const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;

/// Headers that differ between otherwise identical requests and that no answer depends on:
/// framing, the request id this server echoes, and the token the auth layer has already checked.
const IGNORED_HEADERS: &[&str] = &["content-length", "authorization", "x-request-id"];

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
}

/// The answers kept for one registry snapshot.
#[derive(Debug, Default)]
struct Answers {
    registry: Option<Arc<VerifiedRegistry>>,
    by_request: HashMap<Vec<u8>, Arc<Kept>>,
    bytes: usize,
}

/// Kept `resources/read` answers, shared by every request of one server.
#[derive(Debug, Clone)]
pub(crate) struct ReadReplay {
    releases: Arc<Releases>,
    answers: Arc<RwLock<Answers>>,
}

impl ReadReplay {
    /// An empty store of answers over the registry `releases` serves.
    pub(crate) fn new(releases: Arc<Releases>) -> Self {
        Self {
            releases,
            answers: Arc::default(),
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
        if !Arc::ptr_eq(&registry, &self.releases.snapshot()) {
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
}

/// What a POST body is to the replay.
#[derive(Debug, PartialEq)]
enum Read {
    /// A single `resources/read` request: its key (the body without the id, then the
    /// headers, sorted) and its serialized id.
    Keyed(Vec<u8>, Vec<u8>),
    /// A `resources/read` request whose `params.uri` is not a string (rmcp would call the
    /// method unknown); its serialized id.
    NoUri(Vec<u8>),
    /// Anything else.
    Other,
}

fn read_key(headers: &HeaderMap, body: &[u8]) -> Read {
    let Ok(Value::Object(mut message)) = serde_json::from_slice(body) else {
        return Read::Other;
    };
    if message.get("method").and_then(Value::as_str) != Some("resources/read") {
        return Read::Other;
    }
    let Some(id) = message.remove("id") else {
        return Read::Other;
    };
    if !(id.is_string() || id.is_number()) {
        return Read::Other;
    }
    let Ok(id_bytes) = serde_json::to_vec(&id) else {
        return Read::Other;
    };
    let uri = message.get("params").and_then(|p| p.get("uri"));
    if !uri.is_some_and(Value::is_string) {
        return Read::NoUri(id_bytes);
    }
    let mut fields: Vec<(&str, &[u8])> = headers
        .iter()
        .filter(|(name, _)| !IGNORED_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    fields.sort_unstable();
    // Compact JSON and header values hold no raw newline, so the key is unambiguous.
    let Ok(mut key) = serde_json::to_vec(&message) else {
        return Read::Other;
    };
    for (name, value) in fields {
        key.push(b'\n');
        key.extend_from_slice(name.as_bytes());
        key.push(b':');
        key.extend_from_slice(value);
    }
    Read::Keyed(key, id_bytes)
}

/// JSON-RPC's invalid params, for a read without a URI.
fn no_uri(id: &[u8]) -> Response {
    let mut body = Vec::with_capacity(id.len() + 128);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id);
    body.extend_from_slice(
        br#","error":{"code":-32602,"message":"resources/read needs params.uri, a string"}}"#,
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The serialized result of a JSON-RPC success answering `id`; `None` for anything else.
fn result_of(body: &[u8], id: &[u8]) -> Option<Bytes> {
    let Value::Object(mut message) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    let answers_id = serde_json::to_vec(message.get("id")?).ok()? == id;
    let plain = message.len() == 3 && message.get("jsonrpc")? == "2.0";
    if !(answers_id && plain) {
        return None;
    }
    serde_json::to_vec(&message.remove("result")?)
        .ok()
        .map(Bytes::from)
}

/// Whether a request or response declares a JSON body.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// Middleware on `/mcp`, inside auth and after the body was read whole (and bounded).
pub(crate) async fn replay(
    State(replay): State<ReadReplay>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "unreadable request body\n").into_response();
    };
    let (key, id) = match read_key(&parts.headers, &bytes) {
        Read::Keyed(key, id) => (key, id),
        Read::NoUri(id) => return no_uri(&id),
        Read::Other => {
            return next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
        }
    };
    let registry = replay.releases.snapshot();
    if let Some(kept) = replay.lookup(&registry, &key) {
        return kept.answer(&id);
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if response.status() != StatusCode::OK || !is_json(response.headers()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Some(result) = result_of(&bytes, &id) {
        let mut headers = parts.headers.clone();
        headers.remove(header::CONTENT_LENGTH);
        headers.remove("x-request-id");
        let kept = Kept {
            status: parts.status,
            headers,
            result,
        };
        replay.keep(registry, key, kept);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn keyed(read: Read) -> (Vec<u8>, Vec<u8>) {
        match read {
            Read::Keyed(key, id) => (key, id),
            other => panic!("not keyed: {other:?}"),
        }
    }

    const READ: &str =
        r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"rimthan://x"}}"#;

    #[test]
    fn requests_differing_only_in_id_and_ignored_headers_share_a_key() {
        let a = read_key(
            &headers(&[("content-length", "80"), ("accept", "*/*")]),
            READ.as_bytes(),
        );
        let other_id = READ.replace("\"id\":7", "\"id\":\"seven\"");
        let b = read_key(
            &headers(&[("accept", "*/*"), ("x-request-id", "r1")]),
            other_id.as_bytes(),
        );
        let (a, b) = (keyed(a), keyed(b));
        assert_eq!(a.0, b.0);
        assert_eq!(
            (a.1.as_slice(), b.1.as_slice()),
            (&b"7"[..], &b"\"seven\""[..])
        );
    }

    #[test]
    fn any_other_header_or_parameter_makes_another_key() {
        let base = keyed(read_key(&headers(&[("accept", "*/*")]), READ.as_bytes())).0;
        let version = headers(&[("accept", "*/*"), ("mcp-protocol-version", "2099-01-01")]);
        assert_ne!(keyed(read_key(&version, READ.as_bytes())).0, base);
        let uri = READ.replace("rimthan://x", "rimthan://y");
        assert_ne!(
            keyed(read_key(&headers(&[("accept", "*/*")]), uri.as_bytes())).0,
            base
        );
    }

    #[test]
    fn only_single_reads_with_an_id_are_keyed() {
        let h = HeaderMap::new();
        let other = |body: &str| read_key(&h, body.as_bytes()) == Read::Other;
        assert!(other(&READ.replace("resources/read", "tools/call")));
        assert!(other(&format!("[{READ}]")));
        assert!(other(&READ.replace("\"id\":7,", "")));
        assert!(other(&READ.replace("7", "null")));
        assert!(other("{not json"));
    }

    #[test]
    fn a_read_without_a_string_uri_is_told_so() {
        let h = HeaderMap::new();
        for body in [
            READ.replace(r#","params":{"uri":"rimthan://x"}"#, ""),
            READ.replace(r#""uri":"rimthan://x""#, r#""uri":7"#),
            READ.replace(r#""uri""#, r#""url""#),
        ] {
            assert_eq!(
                read_key(&h, body.as_bytes()),
                Read::NoUri(b"7".to_vec()),
                "{body}"
            );
        }
    }

    #[test]
    fn only_successes_answering_the_same_id_are_kept() {
        let ok = br#"{"jsonrpc":"2.0","id":7,"result":{"contents":[]}}"#;
        assert_eq!(result_of(ok, b"7").unwrap(), &br#"{"contents":[]}"#[..]);
        assert!(result_of(ok, b"8").is_none());
        let error = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"no"}}"#;
        assert!(result_of(error, b"7").is_none());
    }

    #[test]
    fn a_kept_answer_is_addressed_to_the_new_id() {
        let kept = Kept {
            status: StatusCode::OK,
            headers: headers(&[("content-type", "application/json")]),
            result: Bytes::from_static(br#"{"contents":[]}"#),
        };
        let response = kept.answer(br#""abc""#);
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), 1024));
        let value: Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"jsonrpc": "2.0", "id": "abc", "result": {"contents": []}})
        );
    }
}

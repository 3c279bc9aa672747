//! What makes two requests the same request to the replay: the body without its JSON-RPC id,
//! the headers an answer may depend on, and, for a tool call, the authenticated caller.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::{
    http::{HeaderMap, header},
    response::{IntoResponse, Response},
};
use rimthan_engine::Principal;
use serde::Deserialize;
use serde_json::Value;

use crate::tools::ACTIVE_STEP;

/// Headers that differ between otherwise identical requests and that no answer depends on:
/// framing, the request id this server echoes, and the token the auth layer has already checked
/// (a tool call's key carries the caller the token named instead).
const IGNORED_HEADERS: &[&str] = &["content-length", "authorization", "x-request-id"];

/// What a POST body is to the replay.
#[derive(Debug, PartialEq)]
pub(super) enum Read {
    /// A single `resources/read` request: its key (the body without the id, then the
    /// headers, sorted) and its serialized id.
    Keyed(Vec<u8>, Vec<u8>),
    /// A single `tools/call` of `rimthan.get_active_step`: its key (as a read's, then the
    /// caller) and its serialized id.
    Step(Vec<u8>, Vec<u8>),
    /// A `resources/read` request whose `params.uri` is not a string (rmcp would call the
    /// method unknown); its serialized id.
    NoUri(Vec<u8>),
    /// Anything else.
    Other,
}

/// The fields of a message that say whether it may be replayed, borrowed from the body; the
/// rest is skipped without being built.
#[derive(Deserialize)]
struct Method<'a> {
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
}

/// A `tools/call`'s tool name, borrowed from the body.
#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    params: Named<'a>,
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
}

/// Whether a body may be a replayable request, told by a scan that builds nothing: only those
/// are parsed here, so any other body (a large report, a body of tiny values) is parsed once,
/// by rmcp.
fn replayable(body: &[u8]) -> bool {
    let Ok(Method { method }) = serde_json::from_slice(body) else {
        return false;
    };
    match method.as_deref() {
        Some("resources/read") => true,
        Some("tools/call") => serde_json::from_slice::<Call<'_>>(body)
            .is_ok_and(|call| call.params.name.as_deref() == Some(ACTIVE_STEP)),
        _ => false,
    }
}

pub(super) fn read_key(headers: &HeaderMap, principal: Option<&Principal>, body: &[u8]) -> Read {
    if !replayable(body) {
        return Read::Other;
    }
    let Ok(Value::Object(mut message)) = serde_json::from_slice(body) else {
        return Read::Other;
    };
    let step = match message.get("method").and_then(Value::as_str) {
        Some("resources/read") => false,
        Some("tools/call") => true,
        _ => return Read::Other,
    };
    let params = message.get("params");
    if step && params.and_then(|p| p.get("name")).and_then(Value::as_str) != Some(ACTIVE_STEP) {
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
    if !step && !uri.is_some_and(Value::is_string) {
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
    if !step {
        return Read::Keyed(key, id_bytes);
    }
    // Whether a caller may read a session depends on who it is.
    let caller = principal.map(|p| (&p.subject, &p.organization));
    let Ok(caller) = serde_json::to_vec(&caller) else {
        return Read::Other;
    };
    key.push(b'\n');
    key.extend_from_slice(&caller);
    Read::Step(key, id_bytes)
}

/// JSON-RPC's invalid params, for a read without a URI.
pub(super) fn no_uri(id: &[u8]) -> Response {
    let mut body = Vec::with_capacity(id.len() + 128);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id);
    body.extend_from_slice(
        br#","error":{"code":-32602,"message":"resources/read needs params.uri, a string"}}"#,
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The serialized result of a JSON-RPC success answering `id`; `None` for anything else.
pub(super) fn result_of(body: &[u8], id: &[u8]) -> Option<Bytes> {
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
            None,
            READ.as_bytes(),
        );
        let other_id = READ.replace("\"id\":7", "\"id\":\"seven\"");
        let b = read_key(
            &headers(&[("accept", "*/*"), ("x-request-id", "r1")]),
            None,
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
        let base = keyed(read_key(
            &headers(&[("accept", "*/*")]),
            None,
            READ.as_bytes(),
        ))
        .0;
        let version = headers(&[("accept", "*/*"), ("mcp-protocol-version", "2099-01-01")]);
        assert_ne!(keyed(read_key(&version, None, READ.as_bytes())).0, base);
        let uri = READ.replace("rimthan://x", "rimthan://y");
        assert_ne!(
            keyed(read_key(
                &headers(&[("accept", "*/*")]),
                None,
                uri.as_bytes()
            ))
            .0,
            base
        );
    }

    #[test]
    fn only_single_reads_with_an_id_are_keyed() {
        let h = HeaderMap::new();
        let other = |body: &str| read_key(&h, None, body.as_bytes()) == Read::Other;
        assert!(other(&READ.replace("resources/read", "tools/call")));
        assert!(other(&format!("[{READ}]")));
        assert!(other(&READ.replace("\"id\":7,", "")));
        assert!(other(&READ.replace("7", "null")));
        assert!(other("{not json"));
        assert!(other("[0,0,0]"));
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
                read_key(&h, None, body.as_bytes()),
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

    const STEP: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rimthan.get_active_step","arguments":{"checkpoint":"c1"}}}"#;

    fn step(read: Read) -> (Vec<u8>, Vec<u8>) {
        match read {
            Read::Step(key, id) => (key, id),
            other => panic!("not a step read: {other:?}"),
        }
    }

    #[test]
    fn an_active_step_call_is_keyed_by_its_caller_and_arguments() {
        let h = HeaderMap::new();
        let ada = Principal {
            subject: "ada".into(),
            organization: Some("lab".into()),
        };
        let bob = Principal {
            subject: "bob".into(),
            organization: Some("lab".into()),
        };
        let (key, id) = step(read_key(&h, Some(&ada), STEP.as_bytes()));
        assert_eq!(id, b"3");
        let again = STEP.replace("\"id\":3", "\"id\":4");
        assert_eq!(step(read_key(&h, Some(&ada), again.as_bytes())).0, key);
        assert_ne!(step(read_key(&h, Some(&bob), STEP.as_bytes())).0, key);
        assert_ne!(step(read_key(&h, None, STEP.as_bytes())).0, key);
        let other = STEP.replace("c1", "c2");
        assert_ne!(step(read_key(&h, Some(&ada), other.as_bytes())).0, key);
        let submit = STEP.replace("get_active_step", "submit_step_reports");
        assert_eq!(read_key(&h, Some(&ada), submit.as_bytes()), Read::Other);
    }
}

//! JSON-RPC answers for bodies rmcp cannot take as one message. rmcp answers a body that does
//! not deserialize with HTTP 415, which tells a client its content type is wrong. A request
//! that declared `application/json` gets what JSON-RPC and the Streamable HTTP transport say
//! instead: HTTP 400 with an error object and `id: null`, a parse error (-32700) when the body
//! is not JSON (or not UTF-8), an invalid request (-32600) for a batch or for JSON that is no
//! JSON-RPC message. The happy path pays nothing: the body is only looked at after a 415.

use axum::{
    body::Body,
    extract::Request,
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::de::IgnoredAny;
use serde_json::json;

/// JSON-RPC's parse error.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's invalid request.
const INVALID_REQUEST: i64 = -32600;

/// The JSON-RPC error for a body rmcp refused, told without building its value: a body of
/// tiny values (`[0,0,…]`) would cost tens of times its size as a tree.
fn error_for(body: &[u8]) -> (i64, &'static str) {
    let json =
        std::str::from_utf8(body).is_ok() && serde_json::from_slice::<IgnoredAny>(body).is_ok();
    if !json {
        return (
            PARSE_ERROR,
            "Parse error: the body is not JSON text in UTF-8",
        );
    }
    if body.trim_ascii_start().starts_with(b"[") {
        return (
            INVALID_REQUEST,
            "Invalid Request: batches are not supported; send one JSON-RPC message per HTTP request",
        );
    }
    (
        INVALID_REQUEST,
        "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
    )
}

/// Whether a request declares a JSON body.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// Middleware on `/mcp`, after the body was read whole (and bounded).
pub(crate) async fn framing(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !is_json(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "unreadable request body\n").into_response();
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    let (code, message) = error_for(&bytes);
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_bodies_get_the_json_rpc_error_their_shape_calls_for() {
        assert_eq!(error_for(b"{not json").0, PARSE_ERROR);
        assert_eq!(error_for(b"\xff\xfe{}").0, PARSE_ERROR);
        assert_eq!(error_for(b"\"\xff\"").0, PARSE_ERROR);
        assert_eq!(error_for(b" [0,0]").0, INVALID_REQUEST);
        assert_eq!(
            error_for(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]").0,
            INVALID_REQUEST
        );
        assert_eq!(error_for(b"{\"jsonrpc\":\"2.0\"}").0, INVALID_REQUEST);
    }
}

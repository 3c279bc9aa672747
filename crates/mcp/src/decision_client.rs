//! The client side of `POST /admin/api/sessions/{id}/decisions` (`docs/operations/facilitator.md`
//! §6), for `rimthan sessions approve | send-back | waive`: one bounded request with the
//! approver's own bearer token.

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;

/// How long a decision may take to answer.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Posts `decision` for session `id` to the server at `server` (its base URL, such as
/// `https://mcp.example.com`), returning the HTTP status and the JSON answer.
pub async fn post_decision(
    server: &str,
    id: &str,
    token: Option<&str>,
    decision: &serde_json::Value,
) -> Result<(u16, serde_json::Value), String> {
    let url = format!(
        "{}/admin/api/sessions/{id}/decisions",
        server.trim_end_matches('/')
    );
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let mut request = hyper::Request::post(uri)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json");
    if let Some(token) = token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(Full::new(Bytes::from(decision.to_string())))
        .map_err(|e| format!("{url}: {e}"))?;
    let client = crate::oidc::http_client::<Full<Bytes>>()?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e} (at most {MAX_ANSWER_BYTES} bytes)"))?
            .to_bytes();
        let answer = serde_json::from_slice(&body)
            .map_err(|_| format!("{url} answered {status} without JSON"))?;
        Ok((status, answer))
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| format!("{url} did not answer within {}s", TIMEOUT.as_secs()))?
}

//! The client side of the programs' door to `/admin` (`docs/operations/facilitator.md` §2, §5):
//! `POST /admin/api/sessions/{id}/decisions` for `rimthan sessions approve | send-back | waive`,
//! and `GET /admin/api/sessions/{id}` for `rimthan sessions show --server`. One bounded request
//! each, with the caller's own bearer token.

use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::{Body, Bytes};

/// How long an answer may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest decision answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The largest session report read: a long timeline and eight rounds of reports per step.
const MAX_REPORT_BYTES: usize = 16 << 20;

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
    let request = request(hyper::Request::post(&url), token)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(decision.to_string())))
        .map_err(|e| format!("{url}: {e}"))?;
    let (status, body) = exchange(&url, request, MAX_ANSWER_BYTES).await?;
    let answer = serde_json::from_slice(&body)
        .map_err(|_| format!("{url} answered {status} without JSON"))?;
    Ok((status, answer))
}

/// Gets session `id`'s report from the server at `server`: the document `sessions show --json`
/// prints when `json`, else its text; with the HTTP status.
pub async fn get_report(
    server: &str,
    id: &str,
    token: Option<&str>,
    json: bool,
) -> Result<(u16, String), String> {
    let format = if json { "json" } else { "text" };
    let url = format!(
        "{}/admin/api/sessions/{id}?format={format}",
        server.trim_end_matches('/')
    );
    get_text(&url, token).await
}

/// Gets the sessions waiting for a sign-off the token's holder may give, from the server at
/// `server` (`GET /admin/api/waiting`): the JSON document, with the HTTP status.
pub async fn get_waiting(server: &str, token: Option<&str>) -> Result<(u16, String), String> {
    let url = format!("{}/admin/api/waiting", server.trim_end_matches('/'));
    get_text(&url, token).await
}

/// A bounded GET of `url` with `token`: the answer as text, with the HTTP status.
async fn get_text(url: &str, token: Option<&str>) -> Result<(u16, String), String> {
    let request = request(hyper::Request::get(url), token)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("{url}: {e}"))?;
    let (status, body) = exchange(url, request, MAX_REPORT_BYTES).await?;
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| format!("{url} answered {status} with bytes that are not UTF-8"))?;
    Ok((status, text))
}

fn request(
    builder: hyper::http::request::Builder,
    token: Option<&str>,
) -> hyper::http::request::Builder {
    let builder = builder.header(hyper::header::ACCEPT, "application/json, text/plain");
    match token {
        Some(token) => builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}")),
        None => builder,
    }
}

/// Sends `request` and reads at most `max` bytes of the answer, within [`TIMEOUT`].
async fn exchange<B>(
    url: &str,
    request: hyper::Request<B>,
    max: usize,
) -> Result<(u16, Bytes), String>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let client = crate::oidc::http_client::<B>()?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), max)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e} (at most {max} bytes)"))?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| format!("{url} did not answer within {}s", TIMEOUT.as_secs()))?
}

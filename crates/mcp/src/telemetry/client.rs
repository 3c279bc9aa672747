//! The HTTP client the OTLP exporters post with: the server's own hyper client (rustls with ring
//! and the system's roots, as the OpenID and webhook clients), run on the server's runtime.
//!
//! The exporters call it from their own threads, outside any runtime, so each request is spawned
//! onto the runtime and its join handle awaited: the export thread waits, a request never does.
//! Every request is bounded by [`EXPORT_TIMEOUT`], so a collector that accepts and never
//! answers holds one batch at most that long.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

/// The longest an export request may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest collector answer read: OTLP answers are a partial-success message at most.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// Posts export requests on a tokio runtime.
#[derive(Debug, Clone)]
pub(super) struct OtlpClient {
    client: Client,
    runtime: tokio::runtime::Handle,
}

impl OtlpClient {
    /// A client whose requests run on `runtime`.
    pub(super) fn new(runtime: tokio::runtime::Handle) -> Result<Self, String> {
        Ok(Self {
            client: crate::oidc::http_client()?,
            runtime,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = request.map(Full::new);
        let sent = self.runtime.spawn(async move {
            tokio::time::timeout(EXPORT_TIMEOUT, async move {
                let response = client.request(request).await?;
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, MAX_ANSWER_BYTES)
                    .collect()
                    .await?
                    .to_bytes();
                Ok::<_, HttpError>(Response::from_parts(parts, body))
            })
            .await
            .map_err(|_| HttpError::from("the collector did not answer in time"))?
        });
        sent.await?
    }
}

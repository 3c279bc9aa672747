//! Streamable HTTP: the MCP endpoint at `/mcp` (both protocol revisions, every request through
//! rmcp and its checks), with Host and Origin allow-lists, bodies
//! bounded by [`crate::body`] and read only once the caller is authenticated, `/healthz`,
//! `/readyz`, served on connections accepted and reaped by [`crate::conn`].

use std::{future::Future, net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware,
    response::IntoResponse,
    routing::get,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::{
    request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer},
    trace::{DefaultOnFailure, TraceLayer},
};

use crate::{
    admin,
    auth::{self, Auth},
    body::{self, Bodies},
    conn::{self, ConnectionLimits},
    framing,
    server::RimthanServer,
    sessions::BoundedSessionManager,
    traced::Transport,
};

const REQUEST_ID: &str = "x-request-id";

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// The default of [`HttpConfig::max_buffered_bytes`].
pub const DEFAULT_MAX_BUFFERED_BYTES: usize = 256 * 1024 * 1024;

/// HTTP settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Accepted `Host` values (host or host:port).
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values (scheme://host[:port|:*]); a present, unlisted Origin gets 403.
    pub allowed_origins: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Bearer authentication of `/mcp`, when on.
    pub auth: Option<Arc<Auth>>,
    /// How long a request body may take to arrive (a slow body is cut off with 408).
    pub body_timeout: std::time::Duration,
    /// Most bytes request bodies and what is parsed from them may hold at once, across every
    /// connection (further bodies get 503): this bounds the server's memory.
    pub max_buffered_bytes: usize,
    /// Most concurrent 2025-11-25 sessions (2026-07-28 requests hold none).
    pub max_sessions: usize,
    /// Mint `Mcp-Session-Id` sessions for 2025-11-25 clients (SSE answers, a GET stream);
    /// without them every request is served statelessly with plain JSON answers.
    pub legacy_sessions: bool,
    /// Connection cap, timers and shutdown grace.
    pub connections: ConnectionLimits,
    /// Who may open the facilitator's view at `/admin`; not served when none.
    pub admin: Option<admin::Access>,
}

impl HttpConfig {
    /// Loopback defaults on `listen`: only local hosts and origins are accepted.
    pub fn loopback(listen: SocketAddr) -> Self {
        Self {
            listen,
            allowed_hosts: ["localhost", "127.0.0.1", "::1", "[::1]"]
                .map(String::from)
                .to_vec(),
            allowed_origins: ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .map(String::from)
                .to_vec(),
            max_body_bytes: 4 * 1024 * 1024,
            auth: None,
            body_timeout: std::time::Duration::from_secs(30),
            max_buffered_bytes: DEFAULT_MAX_BUFFERED_BYTES,
            max_sessions: 1000,
            legacy_sessions: false,
            connections: ConnectionLimits::default(),
            admin: None,
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(
    State((server, auth)): State<(RimthanServer, Option<Arc<auth::Auth>>)>,
) -> impl IntoResponse {
    if let Some(Err(reason)) = auth.as_ref().map(|a| a.verifier.ready()) {
        tracing::warn!(%reason, "identity provider not ready");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("identity provider not ready: {reason}\n"),
        );
    }
    let engine = server.engine();
    let registry = engine.releases().snapshot();
    if engine.releases().active(&registry).is_none() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the release the server starts sessions from is not in its verified registry\n"
                .to_owned(),
        );
    }
    match engine.store().ping().await {
        // Said plainly: a key in the store signs for whoever can read the store.
        Ok(()) => match engine.key_custody() {
            rimthan_engine::provenance::KeyCustody::File => (StatusCode::OK, "ready\n".to_owned()),
            rimthan_engine::provenance::KeyCustody::Store => (
                StatusCode::OK,
                "ready\nprovenance key: kept in the store (whoever can read the store can sign \
                 as this server; see --provenance-key-file)\n"
                    .to_owned(),
            ),
        },
        Err(e) => {
            tracing::warn!(error = %e, "store not reachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "store not reachable\n".to_owned(),
            )
        }
    }
}

async fn metrics(
    State((server, auth)): State<(RimthanServer, Option<Arc<Auth>>)>,
) -> impl IntoResponse {
    let throttled = auth.map_or(0, |a| a.throttle.refused());
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        server.render_metrics(throttled).await,
    )
}

/// Mints a request id for a request that brought no usable one.
#[derive(Debug, Clone, Copy)]
struct MintRequestId;

impl MakeRequestId for MintRequestId {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let id = rimthan_engine::SessionId::generate().to_string();
        HeaderValue::from_str(&id).ok().map(RequestId::new)
    }
}

/// Drops an incoming `x-request-id` this server would not repeat in its logs and answer (empty,
/// over 64 bytes, or other than letters, digits and `-`), so a fresh one is minted instead.
fn drop_unusable_request_id(mut request: Request) -> Request {
    let usable = request.headers().get(REQUEST_ID).is_none_or(|v| {
        let v = v.as_bytes();
        !v.is_empty() && v.len() <= 64 && v.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
    });
    if !usable {
        request.headers_mut().remove(REQUEST_ID);
    }
    request
}

/// The span every log line of a request is recorded in, named by its request id.
fn request_span(request: &Request) -> tracing::Span {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!("request", request_id = %id, method = %request.method(), path = %request.uri().path())
}

/// The application router: `/mcp`, `/healthz`, `/readyz`, `/metrics`, with auth on the
/// protected-resource metadata, and `/admin` when configured.
///
/// The layers a request passes, outermost first (each `ServiceBuilder` reads top to bottom):
/// every request gets its request id, which the answer carries back, and a span named by it;
/// a request to `/mcp` is then authenticated (when auth is on) before a byte of its body is
/// read, its body is read whole within its limits and the server's budget ([`crate::body`]),
/// and a body rmcp cannot take as one message gets a JSON-RPC error ([`crate::framing`]); the
/// other routes read their bodies within the same limits and budget.
pub fn router(server: RimthanServer, config: &HttpConfig, cancel: CancellationToken) -> Router {
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_allowed_origins(config.allowed_origins.clone())
        .with_max_request_body_bytes(config.max_body_bytes)
        .with_legacy_session_mode(config.legacy_sessions)
        .with_json_response(!config.legacy_sessions)
        .with_cancellation_token(cancel);
    let factory = server.clone();
    let sessions = config.legacy_sessions;
    let mcp = StreamableHttpService::new(
        move || Ok(factory.clone().over(Transport::Tcp, sessions)),
        Arc::new(BoundedSessionManager::new(config.max_sessions)),
        mcp_config,
    );
    let bodies = Bodies::new(
        config.body_timeout,
        config.max_body_bytes,
        config.max_buffered_bytes,
    );
    let authenticate = config
        .auth
        .clone()
        .map(|auth| middleware::from_fn_with_state((auth, bodies.clone()), auth::require));
    let mcp_routes = Router::new().route_service(MCP_PATH, mcp).layer(
        ServiceBuilder::new()
            .option_layer(authenticate)
            .layer(middleware::from_fn_with_state(
                bodies.clone(),
                body::read_body,
            ))
            .layer(middleware::from_fn(framing::framing)),
    );
    let ready = Router::new()
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state((server.clone(), config.auth.clone()));
    let mut app = Router::new()
        .route(PROVENANCE_KEYS_PATH, get(provenance_keys))
        .route("/healthz", get(healthz))
        .with_state(server.clone())
        .merge(ready);
    if let Some(auth) = &config.auth {
        let metadata = auth.metadata();
        let prm = get(move || std::future::ready(axum::Json(metadata.clone())));
        app = app
            .route("/.well-known/oauth-protected-resource", prm.clone())
            .route(
                &format!("/.well-known/oauth-protected-resource{MCP_PATH}"),
                prm,
            );
    }
    if let Some(access) = &config.admin {
        app = app.merge(admin::router(
            server.engine().clone(),
            access.clone(),
            &config.allowed_hosts,
        ));
    }
    app.layer(middleware::from_fn_with_state(bodies, body::read_body))
        .merge(mcp_routes)
        .layer(
            ServiceBuilder::new()
                .map_request(drop_unusable_request_id)
                .layer(SetRequestIdLayer::x_request_id(MintRequestId))
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(request_span)
                        .on_failure(DefaultOnFailure::new().level(tracing::Level::WARN)),
                ),
        )
}

/// Where the server publishes its provenance public keys (`docs/operations/evidence.md`).
pub const PROVENANCE_KEYS_PATH: &str = "/.well-known/rimthan/provenance-keys.json";

/// Every provenance public key the store holds, current and rotated: public, so anyone can
/// verify a statement or a retention anchor offline.
async fn provenance_keys(State(server): State<RimthanServer>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match server.engine().provenance_keys().await {
        Ok(keys) => axum::Json(keys).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "provenance keys could not be read");
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "the store could not be read; retry",
            )
                .into_response()
        }
    }
}

/// A bound listener, so callers learn the port before serving (tests bind port 0).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves `server` on `listener` until `shutdown` resolves, then drains open requests for at
/// most the configured grace period.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: RimthanServer,
    config: &HttpConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cancel = CancellationToken::new();
    let app = router(server, config, cancel.clone());
    conn::serve(listener, app, config.connections, shutdown, move || {
        cancel.cancel()
    })
    .await
}

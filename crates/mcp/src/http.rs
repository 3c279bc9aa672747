//! Streamable HTTP: the MCP endpoint at `/mcp` (both protocol revisions through rmcp), with
//! Host and Origin allow-lists, a body-size limit, `/healthz`, `/readyz`, TCP_NODELAY on every
//! accepted socket, and graceful shutdown.

use std::{future::Future, net::SocketAddr, sync::Arc};

use axum::{Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use crate::server::RimthanServer;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

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
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(server): State<RimthanServer>) -> impl IntoResponse {
    let engine = server.engine();
    let registry = engine.releases().snapshot();
    if registry
        .channel(engine.releases().active_channel())
        .is_none()
    {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "active channel names no verified release\n",
        );
    }
    match engine.store().ping().await {
        Ok(()) => (StatusCode::OK, "ready\n"),
        Err(e) => {
            tracing::warn!(error = %e, "store not reachable");
            (StatusCode::SERVICE_UNAVAILABLE, "store not reachable\n")
        }
    }
}

/// The application router: `/mcp`, `/healthz`, `/readyz`.
pub fn router(server: RimthanServer, config: &HttpConfig, cancel: CancellationToken) -> Router {
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_allowed_origins(config.allowed_origins.clone())
        .with_max_request_body_bytes(config.max_body_bytes)
        .with_cancellation_token(cancel);
    let factory = server.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(factory.clone()),
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(server)
        .nest_service(MCP_PATH, mcp)
}

/// A bound listener, so callers learn the port before serving (tests bind port 0).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves `server` on `listener` until `shutdown` resolves, then drains open requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: RimthanServer,
    config: &HttpConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    let cancel = CancellationToken::new();
    let app = router(server, config, cancel.clone());
    // Small JSON-RPC replies must not wait for Nagle's algorithm.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            cancel.cancel();
        })
        .await
}

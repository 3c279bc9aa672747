//! The MCP server handler: one value per connection, all sharing one engine.

use std::sync::Arc;

use rimthan_engine::{Engine, Principal};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
        Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
        ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
        ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::json;

use crate::{
    bootstrap::{self, Entrypoints},
    catalogue,
    metrics::{Gauges, Metrics},
    profile::Profile,
    prompts,
    read_cache::ReadCache,
    tools,
};

/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = rimthan_engine::SERVER_NAME;

/// The rimthan MCP server.
#[derive(Debug, Clone)]
pub struct RimthanServer {
    engine: Arc<Engine>,
    profile: Profile,
    metrics: Arc<Metrics>,
    entrypoints: Entrypoints,
    listings: catalogue::Listings,
    reads: Arc<ReadCache>,
}

impl RimthanServer {
    /// A server over `engine` exposing `profile`.
    pub fn new(engine: Arc<Engine>, profile: Profile) -> Self {
        Self {
            engine,
            profile,
            metrics: Arc::default(),
            entrypoints: Entrypoints::default(),
            listings: catalogue::Listings::default(),
            reads: Arc::default(),
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The metrics page; `throttled` is how many credentials the HTTP layer answered 429.
    pub async fn render_metrics(&self, throttled: u64) -> String {
        let releases = self.engine.releases();
        let registry = releases.snapshot();
        let active = releases.active(&registry);
        let open_sessions = match self.engine.store().open_sessions().await {
            Ok(n) => Some(n),
            Err(_) => {
                self.metrics.store_error();
                None
            }
        };
        self.metrics.render(&Gauges {
            open_sessions,
            channel: releases
                .active_channel()
                .map(ToString::to_string)
                .unwrap_or_default(),
            release: active.map(|r| r.id().to_string()).unwrap_or_default(),
            manifest_sha256: active
                .map(|r| r.manifest_sha256().to_string())
                .unwrap_or_default(),
            caches: self.caches(),
            check_runs: self.engine.checks_run(),
            throttled,
            outbox: self.engine.store().outbox_counts().await.ok(),
        })
    }

    /// Each bounded cache the server reads through, by the name its metrics carry.
    pub fn caches(&self) -> Vec<(&'static str, rimthan_engine::cache::CacheStats)> {
        let mut caches = Vec::with_capacity(4);
        if let Some(sessions) = self.engine.store().session_cache() {
            caches.push(("session", sessions));
        }
        caches.push(("active_step", self.engine.active_step_cache()));
        caches.push(("check_verdict", self.engine.verdict_cache()));
        caches.push(("resource_read", self.reads.stats()));
        caches
    }

    fn active(
        &self,
    ) -> Result<
        (
            Arc<rimthan_registry::VerifiedRegistry>,
            Arc<rimthan_registry::VerifiedRelease>,
        ),
        ErrorData,
    > {
        let releases = self.engine.releases();
        let registry = releases.snapshot();
        let active = releases.active(&registry).cloned().ok_or_else(|| {
            let served = releases.served();
            ErrorData::internal_error(
                format!("the server's {served} names no release in the registry"),
                Some(json!({"serving": served.to_string()})),
            )
        })?;
        Ok((registry, active))
    }

    /// The bootstrap text of the registry in use: prompt, resource and instructions alike.
    fn entrypoint(
        &self,
        registry: &Arc<rimthan_registry::VerifiedRegistry>,
        active: &rimthan_registry::VerifiedRelease,
    ) -> Arc<str> {
        self.entrypoints.text(registry, active)
    }
}

/// The authenticated caller, when an HTTP layer put one on the request.
fn principal(context: &RequestContext<RoleServer>) -> Option<Principal> {
    context
        .extensions
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<Principal>()
        .cloned()
}

/// Whether the caller speaks 2026-07-28, the first revision whose results carry `ttlMs` and
/// `cacheScope`; earlier revisions do not define them.
fn speaks_cache_hints(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

impl ServerHandler for RimthanServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .build();
        let instructions: Arc<str> = match self.profile {
            Profile::WorkflowEngine => match self.active() {
                Ok((registry, active)) => self.entrypoint(&registry, &active),
                // Unreachable with a verified registry; the paragraph alone still guides.
                Err(_) => bootstrap::paragraph().into(),
            },
            Profile::Legacy => {
                "Legacy profile: schema resources only; see the rimthan.legacy_schemas prompt."
                    .into()
            }
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(&*instructions)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = match self.profile {
            Profile::WorkflowEngine => tools::list(),
            Profile::Legacy => Vec::new(),
        };
        let list = ListToolsResult::with_all_items(tools);
        Ok(if speaks_cache_hints(&context) {
            list.with_ttl_ms(catalogue::TTL_MOVING_MS)
                .with_cache_scope(rmcp::model::CacheScope::Private)
        } else {
            list
        })
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Taken, not cloned: a large call would otherwise be held twice while it is handled.
        let arguments = request.arguments.take();
        let unknown = || {
            ErrorData::invalid_params(
                format!("no tool named {:?}", request.name),
                Some(json!({"tool": request.name})),
            )
        };
        if self.profile != Profile::WorkflowEngine {
            return Err(unknown());
        }
        let who = principal(&context);
        match tools::call(
            &self.engine,
            &self.metrics,
            &request.name,
            arguments,
            who.as_ref(),
        )
        .await
        {
            Some(result) => result.map(Into::into),
            None => Err(unknown()),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (registry, active) = self.active()?;
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let entrypoint = self.entrypoint(&registry, &active);
        self.listings
            .list(&registry, &active, &entrypoint, self.profile, cursor)
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(catalogue::templates(self.profile))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (registry, active) = self.active()?;
        self.reads
            .read(&registry, &request.uri, || {
                let entrypoint = self.entrypoint(&registry, &active);
                catalogue::read(&registry, &active, &entrypoint, self.profile, &request.uri)
            })
            .map(Into::into)
    }

    /// rmcp hands a request here when its method is unknown, or when it is a method rmcp knows
    /// whose params did not parse (a `resources/read` without a string `params.uri`). The
    /// second is JSON-RPC's invalid params, not an unknown method; either way the request has
    /// passed every header and framing check rmcp makes first.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        if request.method == "resources/read" {
            return Err(ErrorData::invalid_params(
                "resources/read needs params.uri, a string",
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ))
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(prompts::list(self.profile)
            .with_ttl_ms(catalogue::TTL_MOVING_MS)
            .with_cache_scope(rmcp::model::CacheScope::Private))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (registry, active) = self.active()?;
        let entrypoint = self.entrypoint(&registry, &active);
        prompts::get(self.profile, &request.name, &entrypoint).map(Into::into)
    }
}

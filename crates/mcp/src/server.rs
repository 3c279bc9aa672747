//! The MCP server handler: one value per connection, all sharing one engine.

use std::{borrow::Cow, sync::Arc};

use rimthan_engine::{Engine, Principal};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
        Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
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
    traced::{self, Call, Reach, Transport},
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
    reach: Reach,
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
            reach: Reach::default(),
        }
    }

    /// This server as one instance reached over `transport` (`docs/operations/tracing.md`):
    /// `sessions` when the instance serves one MCP session from its `initialize` on (stdio, and
    /// each 2025-11-25 HTTP session), so its life is timed as a session's.
    pub fn over(mut self, transport: Transport, sessions: bool) -> Self {
        self.reach = Reach::new(transport, sessions, &self.metrics);
        self
    }

    /// Serves one request in its span, timed (`crate::traced`). The handler's work is boxed
    /// before anything holds it: a 2025-11-25 session's worker keeps a handler's future for as
    /// long as the session lives (rmcp answers `initialize` inside it), and the largest, a tool
    /// call's, is large.
    fn observe<'a, T: 'a>(
        &'a self,
        call: Call<'a>,
        context: &'a RequestContext<RoleServer>,
        refused: impl FnOnce(&T) -> Option<Cow<'static, str>> + Send + 'a,
        served: impl Future<Output = Result<T, ErrorData>> + Send + 'a,
    ) -> impl Future<Output = Result<T, ErrorData>> + Send + 'a {
        traced::observe(
            &self.metrics,
            &self.reach,
            call,
            context,
            refused,
            Box::pin(served),
        )
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

/// A handler's answer that is never a refusal.
fn never<T>(_: &T) -> Option<Cow<'static, str>> {
    None
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

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.observe(Call::method("initialize"), &context, never, async {
            context.peer.set_peer_info(request.clone());
            let result = self.negotiate_initialize(&request)?;
            self.reach.session_began(&result.protocol_version);
            Ok(result)
        })
        .await
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.observe(Call::method("tools/list"), &context, never, async {
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
        })
        .await
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
        let served = async {
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
                Some(result) => result,
                None => Err(unknown()),
            }
        };
        self.observe(
            Call::tool(&request.name),
            &context,
            traced::tool_refusal,
            served,
        )
        .await
        .map(Into::into)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.observe(Call::method("resources/list"), &context, never, async {
            let (registry, active) = self.active()?;
            let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
            let entrypoint = self.entrypoint(&registry, &active);
            self.listings
                .list(&registry, &active, &entrypoint, self.profile, cursor)
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.observe(
            Call::method("resources/templates/list"),
            &context,
            never,
            async { Ok(catalogue::templates(self.profile)) },
        )
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let served = async {
            let (registry, active) = self.active()?;
            self.reads.read(&registry, &request.uri, || {
                let entrypoint = self.entrypoint(&registry, &active);
                catalogue::read(&registry, &active, &entrypoint, self.profile, &request.uri)
            })
        };
        self.observe(Call::read(&request.uri), &context, never, served)
            .await
            .map(Into::into)
    }

    /// rmcp hands a request here when its method is unknown, or when it is a method rmcp knows
    /// whose params did not parse (a `resources/read` without a string `params.uri`). The
    /// second is JSON-RPC's invalid params, not an unknown method; either way the request has
    /// passed every header and framing check rmcp makes first.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let call = Call::method(if request.method == "resources/read" {
            "resources/read"
        } else {
            traced::OTHER
        });
        self.observe(call, &context, never, async {
            if request.method == "resources/read" {
                return Err(ErrorData::invalid_params(
                    "resources/read needs params.uri, a string",
                    None,
                ));
            }
            Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method.clone(),
                None,
            ))
        })
        .await
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.observe(Call::method("prompts/list"), &context, never, async {
            Ok(prompts::list(self.profile)
                .with_ttl_ms(catalogue::TTL_MOVING_MS)
                .with_cache_scope(rmcp::model::CacheScope::Private))
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let served = async {
            let (registry, active) = self.active()?;
            let entrypoint = self.entrypoint(&registry, &active);
            prompts::get(self.profile, &request.name, &entrypoint)
        };
        self.observe(Call::prompt(&request.name), &context, never, served)
            .await
            .map(Into::into)
    }
}

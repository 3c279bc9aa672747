//! The MCP side of the harness: connecting (over HTTP or to a server started in-process),
//! checking the server's identity, calling tools and reading resources.
//!
//! Over HTTP every call is retried on a transport error the way a well-behaved harness
//! should (`docs/engine.md` §3.1): the identical request again, after a growing pause, on a
//! fresh connection when the old one is gone. The server answers a repeated change with the
//! answer that was lost, so a retry never makes a second change.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient, ServiceError, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResult, PaginatedRequestParams, ProtocolVersion,
        ReadResourceRequestParams, ReadResourceResult, RequestMetaObject, Resource,
        ResourceContents, Tool,
    },
    service::{ClientLifecycleMode, ClientServiceExt, Peer, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use tokio::sync::Mutex;

use rimthan_engine::Serving;

use crate::{CallRecord, Protocol, StageError, Target, TraceParent};

type Running = RunningService<RoleClient, ()>;

/// Attempts per call over HTTP, the first included.
const ATTEMPTS: u32 = 8;
/// The pause before the first retry; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// The retry schedule of one call over HTTP (none for a server in this process, whose
/// transport cannot lose an answer).
struct Backoff {
    retries: bool,
    attempt: u32,
    pause: Duration,
}

impl Backoff {
    fn for_target(target: &Target) -> Self {
        Self {
            retries: matches!(target, Target::Url { .. }),
            attempt: 1,
            pause: FIRST_PAUSE,
        }
    }

    /// Waits before the next attempt; false when no attempt is left.
    async fn wait(&mut self) -> bool {
        if !self.retries || self.attempt >= ATTEMPTS {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        self.attempt += 1;
        true
    }
}

/// A connection to the server that reconnects and retries over HTTP.
pub(crate) struct Client {
    target: Target,
    running: Mutex<Running>,
    /// The engine of a server started in this process: the operator at this machine may sign
    /// off on it under an asserted name (`--sign-off-as`).
    engine: Option<Arc<rimthan_engine::Engine>>,
    /// Every request this connection made, in order: what a load test reports per tool.
    calls: std::sync::Mutex<Vec<CallRecord>>,
    /// The trace context every request carries.
    trace: TraceParent,
}

impl Client {
    /// The in-process server's engine; none for a server at a URL.
    pub(crate) fn local_engine(&self) -> Option<&Arc<rimthan_engine::Engine>> {
        self.engine.as_ref()
    }

    async fn peer(&self) -> Peer<RoleClient> {
        self.running.lock().await.peer().clone()
    }

    /// Runs `op` until it gets an answer from the server: a transport error is retried on a
    /// new connection, anything the server said is not. The request's wall time, retries
    /// included, is recorded under `method`.
    async fn retrying<T, F, Fut>(&self, method: &str, op: F) -> Result<T, ServiceError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let started = Instant::now();
        let mut backoff = Backoff::for_target(&self.target);
        // The error that left the connection unusable, until a fresh one is made.
        let mut broken: Option<ServiceError> = None;
        loop {
            if let Some(error) = broken.take() {
                // A transport whose worker stopped on an error (a reply cut mid-body, say) fails
                // every later send the same way, so a retry goes out only on a fresh connection;
                // a reconnect that fails is itself an attempt, and the request is not sent on
                // the dead one.
                match connect_once(&self.target, self.trace).await {
                    Ok((fresh, _)) => {
                        let old = std::mem::replace(&mut *self.running.lock().await, fresh);
                        let _ = old.cancel().await;
                    }
                    Err(_) => {
                        if !backoff.wait().await {
                            self.record(method, started, backoff.attempt);
                            return Err(error);
                        }
                        broken = Some(error);
                        continue;
                    }
                }
            }
            match op(self.peer().await).await {
                Err(e) if is_transport(&e) => {
                    if !backoff.wait().await {
                        self.record(method, started, backoff.attempt);
                        return Err(e);
                    }
                    broken = Some(e);
                }
                done => {
                    self.record(method, started, backoff.attempt);
                    return done;
                }
            }
        }
    }

    fn record(&self, method: &str, started: Instant, attempts: u32) {
        let record = CallRecord {
            method: method.to_owned(),
            micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            attempts,
        };
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(record);
    }

    /// The requests made so far, emptied.
    pub(crate) fn take_calls(&self) -> Vec<CallRecord> {
        std::mem::take(
            &mut *self
                .calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The request `_meta` that carries the trace context (`docs/operations/tracing.md`).
    fn meta(&self) -> RequestMetaObject {
        let mut meta = rmcp::model::JsonObject::new();
        meta.insert("traceparent".into(), self.trace.to_string().into());
        meta.into()
    }

    async fn call_tool(
        &self,
        mut params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        params.meta = Some(self.meta());
        let tool = params.name.clone();
        self.retrying(&tool, |peer| {
            let params = params.clone();
            async move { peer.call_tool(params).await }
        })
        .await
    }

    async fn read(&self, uri: &str) -> Result<ReadResourceResult, ServiceError> {
        let mut params = ReadResourceRequestParams::new(uri.to_owned());
        params.meta = Some(self.meta());
        self.retrying("resources/read", |peer| {
            let params = params.clone();
            async move { peer.read_resource(params).await }
        })
        .await
    }

    /// Every listed resource, page by page: a page whose answer was lost is asked for again,
    /// not the listing from its first page (a long listing would otherwise need every page to
    /// arrive in one attempt).
    pub(crate) async fn list_all_resources(&self) -> Result<Vec<Resource>, ServiceError> {
        let mut resources = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let page = self
                .retrying("resources/list", |peer| {
                    let params = params.clone();
                    async move { peer.list_resources(Some(params)).await }
                })
                .await?;
            resources.extend(page.resources);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(resources),
            }
        }
    }

    async fn list_all_tools(&self) -> Result<Vec<Tool>, ServiceError> {
        self.retrying(
            "tools/list",
            |peer| async move { peer.list_all_tools().await },
        )
        .await
    }

    async fn server_name(&self) -> Option<String> {
        let running = self.running.lock().await;
        running
            .peer_info()
            .and_then(|i| i.server_info.as_ref().map(|s| s.name.clone()))
    }

    /// Ends the connection.
    pub(crate) async fn close(self) {
        let _ = self.running.into_inner().cancel().await;
    }
}

/// Whether the request may not have reached the server, or its answer was lost on the way.
fn is_transport(e: &ServiceError) -> bool {
    matches!(
        e,
        ServiceError::TransportSend(_)
            | ServiceError::TransportClosed
            | ServiceError::Timeout { .. }
            | ServiceError::UnexpectedResponse
    )
}

/// Connects to `target`, retrying a refused or cut handshake over HTTP like any call.
pub(crate) async fn connect(target: &Target, trace: TraceParent) -> Result<Client, StageError> {
    let mut backoff = Backoff::for_target(target);
    let (running, engine) = loop {
        match connect_once(target, trace).await {
            Ok(connected) => break connected,
            Err(e @ StageError::Connect(_)) => {
                if !backoff.wait().await {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    };
    Ok(Client {
        target: target.clone(),
        running: Mutex::new(running),
        engine,
        calls: std::sync::Mutex::default(),
        trace,
    })
}

/// A connection, and the engine when the server runs in this process.
async fn connect_once(
    target: &Target,
    trace: TraceParent,
) -> Result<(Running, Option<Arc<rimthan_engine::Engine>>), StageError> {
    match target {
        Target::Url {
            url,
            protocol,
            token,
        } => {
            // rmcp names a 401 "Auth required" inside its transport error; say what to do instead.
            let err = |e: &dyn std::fmt::Display| {
                let said = e.to_string();
                if said.contains("Auth required") {
                    StageError::Unauthorized {
                        url: url.to_string(),
                        given: if token.is_some() {
                            " (the token given was refused)"
                        } else {
                            ""
                        },
                    }
                } else {
                    StageError::Connect(said)
                }
            };
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
            if let Some(token) = token {
                config = config.auth_header(token.clone());
            }
            // Every request of the session, `initialize` and listings included, joins the trace.
            config.custom_headers.insert(
                http::HeaderName::from_static("traceparent"),
                http::HeaderValue::from_str(&trace.to_string())
                    .expect("a traceparent is printable ASCII"),
            );
            let transport = StreamableHttpClientTransport::from_config(config);
            let running = match protocol {
                Protocol::V2025_11_25 => ().serve(transport).await.map_err(|e| err(&e)),
                Protocol::V2026_07_28 => ()
                    .serve_with_lifecycle(
                        transport,
                        ClientLifecycleMode::Discover {
                            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                        },
                    )
                    .await
                    .map_err(|e| err(&e)),
            }?;
            Ok((running, None))
        }
        Target::Engine(engine) => Ok((
            serve_in_process(engine.clone()).await?,
            Some(engine.clone()),
        )),
        Target::InProcess {
            database_url,
            registry,
            serving,
        } => {
            let engine = local_engine(database_url, registry.as_deref(), serving).await?;
            Ok((serve_in_process(engine.clone()).await?, Some(engine)))
        }
    }
}

/// An engine on `database_url` serving `registry` (the embedded one when none) as `serving`
/// says, as `rimthan serve` would start it.
pub(crate) async fn local_engine(
    database_url: &str,
    registry: Option<&std::path::Path>,
    serving: &Serving,
) -> Result<Arc<rimthan_engine::Engine>, StageError> {
    let err = |e: &dyn std::fmt::Display| StageError::Connect(e.to_string());
    let registry = match registry {
        None => rimthan_registry::verify_embedded(),
        Some(dir) => rimthan_registry::RegistryFiles::from_dir(dir)
            .and_then(|files| serving.files(files))
            .and_then(|files| {
                rimthan_registry::verify_registry(&files, &rimthan_registry::external_policy())
            }),
    }
    .map_err(StageError::Registry)?;
    match serving {
        Serving::Channel(channel) if registry.channel(channel).is_none() => {
            return Err(StageError::ChannelWithoutRelease {
                channel: channel.clone(),
                channels: registry.channel_list(),
            });
        }
        Serving::Release(release) if registry.release(release).is_none() => {
            return Err(StageError::Registry(
                rimthan_registry::RegistryError::ReleaseNotFound {
                    release: release.to_string(),
                    available: registry.release_list(),
                },
            ));
        }
        _ => {}
    }
    let store = rimthan_engine::store::open(database_url)
        .await
        .map_err(|e| err(&e))?;
    let releases = Arc::new(rimthan_engine::Releases::serving(registry, serving.clone()));
    let engine = Arc::new(
        rimthan_engine::Engine::new(releases, store, None)
            .await
            .map_err(|e| err(&e))?,
    );
    Ok(engine)
}

/// A server in this process on `engine`, and a client connected to it.
async fn serve_in_process(engine: Arc<rimthan_engine::Engine>) -> Result<Running, StageError> {
    let server = rimthan_mcp::RimthanServer::new(engine, rimthan_mcp::Profile::WorkflowEngine)
        .over(rimthan_mcp::Transport::Pipe, true);
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io)
        .await
        .map_err(|e| StageError::Connect(e.to_string()))
}

/// The server must call itself a rimthan workflow engine and offer exactly the four tools.
pub(crate) async fn verify_identity(client: &Client) -> Result<(), StageError> {
    let info = client.server_name().await;
    if info.as_deref() != Some(rimthan_mcp::SERVER_NAME) {
        return Err(StageError::Identity(format!("serverInfo name is {info:?}")));
    }
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| StageError::Connect(e.to_string()))?;
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    let expected = [
        rimthan_mcp::START,
        rimthan_mcp::ACTIVE_STEP,
        rimthan_mcp::PREPARE,
        rimthan_mcp::SUBMIT,
    ];
    if names != expected {
        return Err(StageError::Identity(format!(
            "tools are {names:?}, expected exactly {expected:?}"
        )));
    }
    Ok(())
}

/// A tool result: its structured content and whether it is an error outcome.
pub(crate) async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<(Value, bool), StageError> {
    let params =
        CallToolRequestParams::new(tool.to_owned()).with_arguments(rmcp::model::object(arguments));
    let result = client
        .call_tool(params)
        .await
        .map_err(|e| StageError::Protocol {
            tool: tool.into(),
            detail: e.to_string(),
        })?;
    let value = result
        .structured_content
        .ok_or_else(|| StageError::Protocol {
            tool: tool.into(),
            detail: "no structured content".into(),
        })?;
    Ok((value, result.is_error == Some(true)))
}

/// The codes of a rejected or blocked result.
pub(crate) fn codes(value: &Value) -> Vec<String> {
    let list = value
        .get("failures")
        .or_else(|| value.get("blockers"))
        .and_then(Value::as_array);
    list.map(|l| {
        l.iter()
            .filter_map(|f| f["code"].as_str().map(str::to_owned))
            .collect()
    })
    .unwrap_or_default()
}

pub(crate) fn str_field<'v>(
    value: &'v Value,
    tool: &str,
    field: &str,
) -> Result<&'v str, StageError> {
    value[field].as_str().ok_or_else(|| StageError::Protocol {
        tool: tool.into(),
        detail: format!("no {field}"),
    })
}

pub(crate) async fn read_resource(client: &Client, uri: &str) -> Result<Vec<u8>, StageError> {
    let result = client.read(uri).await.map_err(|e| StageError::Protocol {
        tool: "resources/read".into(),
        detail: format!("{uri}: {e}"),
    })?;
    match result.contents.into_iter().next() {
        Some(ResourceContents::TextResourceContents { text, .. }) => Ok(text.into_bytes()),
        _ => Err(StageError::Protocol {
            tool: "resources/read".into(),
            detail: format!("{uri}: no text content"),
        }),
    }
}

/// Reads a JSON resource (a definition, step, validator or schema).
pub(crate) async fn read_json(client: &Client, uri: &str) -> Result<Value, StageError> {
    let bytes = read_resource(client, uri).await?;
    serde_json::from_slice(&bytes).map_err(|e| StageError::Protocol {
        tool: "resources/read".into(),
        detail: format!("{uri}: not JSON: {e}"),
    })
}

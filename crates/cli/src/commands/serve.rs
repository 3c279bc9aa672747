//! `rimthan serve`: the workflow engine over Streamable HTTP on 127.0.0.1:8787/mcp, or over
//! stdio, on the embedded registry and a SQLite file in the user's data folder unless told
//! otherwise.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Args;
use rimthan_engine::{Engine, Releases, Serving, provenance::ProvenanceKey, store::Age};
use rimthan_mcp::{
    Profile, RimthanServer, Transport,
    admin::Access,
    auth::{
        Algorithm, Auth, ClaimGrant, DEFAULT_ALGORITHMS, FacilitatorClaims, JwtRules, Verifier,
    },
    conn::ConnectionLimits,
    http::{self, HttpConfig, MCP_PATH},
    oidc::OidcProvider,
    telemetry::Telemetry,
};
use rimthan_registry::{RegistryFiles, external_policy, verify_embedded, verify_registry};

use super::InputError;

/// How callers authenticate (`--auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AuthMode {
    /// No authentication: every caller is anonymous.
    None,
    /// Bearer tokens from a file of their hashes.
    Tokens,
    /// JWTs signed by keys from a JWKS file.
    Jwt,
    /// JWTs of an OpenID provider, keys from its discovery document.
    Oidc,
}

/// How the log on stderr is written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Lines for a person.
    Text,
    /// One JSON object a line.
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve one local harness over stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// Address to listen on.
    #[arg(long, env = "RIMTHAN_LISTEN", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// A registry folder to serve instead of the embedded default.
    #[arg(long, env = "RIMTHAN_REGISTRY")]
    registry: Option<PathBuf>,
    /// The channel new sessions start from.
    #[arg(long, env = "RIMTHAN_CHANNEL", default_value = "stable")]
    channel: String,
    /// Instead of a channel: the release new sessions start from, by id; with --registry, a
    /// draft (`registry build --draft`) is served only this way.
    #[arg(long, env = "RIMTHAN_RELEASE", conflicts_with = "channel")]
    release: Option<String>,
    /// sqlite://PATH or postgres://…; default: a SQLite file in the user's data folder.
    #[arg(long, env = "RIMTHAN_DATABASE_URL")]
    database_url: Option<String>,
    /// workflow-engine or legacy.
    #[arg(long, env = "RIMTHAN_PROFILE", default_value = "workflow-engine")]
    profile: Profile,
    /// Accepted Host headers, comma-separated (default: loopback only). A public deployment
    /// names its host here.
    #[arg(long, env = "RIMTHAN_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// Accepted Origin headers, comma-separated, e.g. https://app.example.com:443 (default:
    /// loopback origins). A present Origin not listed gets 403.
    #[arg(long, env = "RIMTHAN_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,
    /// Mint `Mcp-Session-Id` sessions for 2025-11-25 clients (SSE answers and a GET stream per
    /// session). Off by default: every request is then served statelessly with plain JSON, which
    /// every client supports, needs no sticky load balancing and holds no memory per client.
    #[arg(long, env = "RIMTHAN_LEGACY_SESSIONS")]
    legacy_sessions: bool,
    /// With --legacy-sessions: most concurrent sessions; beyond it new ones are refused.
    #[arg(long, env = "RIMTHAN_MAX_SESSIONS", default_value_t = 1000)]
    max_sessions: usize,
    /// Largest accepted request body in bytes.
    #[arg(long, env = "RIMTHAN_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Most bytes of request bodies held at once across every connection (at least
    /// --max-body-bytes); a body that finds them spent gets 503 with Retry-After. With what is
    /// parsed from them, this bounds the server's memory (docs/operations/deploy.md, "Memory").
    #[arg(long, env = "RIMTHAN_MAX_BUFFERED_BYTES", default_value_t = http::DEFAULT_MAX_BUFFERED_BYTES)]
    max_buffered_bytes: usize,
    /// Most client connections served at once; further clients wait in the listen backlog.
    /// Held 128 below the process's descriptor limit (`ulimit -n`) whatever is asked.
    #[arg(long, env = "RIMTHAN_MAX_CONNECTIONS", default_value_t = 4096)]
    max_connections: usize,
    /// Seconds a connection may take to send a complete request head, counted from when it
    /// opens or its previous answer ended; idle keep-alive connections close after it too.
    #[arg(long, env = "RIMTHAN_HEADER_TIMEOUT", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
    /// Seconds a connection may go with no byte moving either way while the server waits on it.
    #[arg(long, env = "RIMTHAN_IDLE_TIMEOUT", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// Seconds shutdown (SIGTERM, ctrl-c) waits for open requests before closing connections.
    #[arg(long, env = "RIMTHAN_SHUTDOWN_GRACE", default_value_t = 10)]
    shutdown_grace: u64,
    /// A file of at least 32 secret bytes that keys checkpoints; replicas share it (default:
    /// a secret generated once and kept in the database).
    #[arg(long, env = "RIMTHAN_CHECKPOINT_SECRET_FILE")]
    checkpoint_secret_file: Option<PathBuf>,
    /// An ed25519 key file (as `rimthan registry keygen` writes) that signs provenance
    /// statements and retention anchors; replicas share it. With it no key is generated in or
    /// read from the database, and only configured keys are published (default: a key generated
    /// once and kept in the database, every key it signed with published).
    #[arg(long, env = "RIMTHAN_PROVENANCE_KEY_FILE")]
    provenance_key_file: Option<PathBuf>,
    /// With --provenance-key-file: a keys document (as `/.well-known/rimthan/provenance-keys.json`)
    /// of the public keys signed with before, published beside the configured key so what they
    /// signed still verifies.
    #[arg(
        long,
        env = "RIMTHAN_PROVENANCE_RETIRED_KEYS",
        requires = "provenance_key_file"
    )]
    provenance_retired_keys: Option<PathBuf>,
    /// Caller authentication: none, tokens, jwt or oidc.
    #[arg(long, env = "RIMTHAN_AUTH", value_enum, default_value_t = AuthMode::None)]
    auth: AuthMode,
    /// With --auth oidc: the OpenID provider's issuer URL, as its discovery document names it (a
    /// trailing slash aside); its keys come from discovery, and it is advertised as the
    /// authorization server.
    #[arg(long, env = "RIMTHAN_OIDC_ISSUER")]
    oidc_issuer: Option<String>,
    /// With --auth tokens: the JSON file of hashed tokens.
    #[arg(long, env = "RIMTHAN_AUTH_TOKENS_FILE")]
    auth_tokens_file: Option<PathBuf>,
    /// With --auth jwt: the JWKS file of the issuer's keys.
    #[arg(long, env = "RIMTHAN_JWKS_FILE")]
    jwks_file: Option<PathBuf>,
    /// With --auth jwt: the required `iss`; also advertised as the authorization server.
    #[arg(long, env = "RIMTHAN_JWT_ISSUER")]
    jwt_issuer: Option<String>,
    /// With --auth jwt or oidc: the claim naming the caller's organization.
    #[arg(long, env = "RIMTHAN_JWT_ORGANIZATION_CLAIM", default_value = "org")]
    jwt_organization_claim: String,
    /// With --auth jwt or oidc: the signature algorithms keys may be pinned to, in order of
    /// preference for keys that declare no `alg` (RS256 first: an RSA key without `alg` is RS256).
    #[arg(
        long,
        env = "RIMTHAN_JWT_ALGORITHMS",
        value_delimiter = ',',
        default_value = "RS256,ES256,ES384,EdDSA,PS256,RS384,RS512,PS384,PS512"
    )]
    jwt_algorithms: Vec<String>,
    /// With --auth jwt or oidc: a claim and value (CLAIM=VALUE) that open /admin to the
    /// subject, for its own organization's sessions.
    #[arg(long, env = "RIMTHAN_FACILITATOR_CLAIM")]
    facilitator_claim: Option<String>,
    /// With --auth jwt or oidc: a claim and value (CLAIM=VALUE) that open /admin to the
    /// subject, for every organization's sessions.
    #[arg(long, env = "RIMTHAN_FACILITATOR_ALL_CLAIM")]
    facilitator_all_claim: Option<String>,
    /// With --auth jwt or oidc: the claim whose values are the caller's roles, which a step's
    /// approval may name (a string of space-separated roles or an array).
    #[arg(long, env = "RIMTHAN_ROLES_CLAIM")]
    roles_claim: Option<String>,
    /// The scope callers need.
    #[arg(long, env = "RIMTHAN_REQUIRED_SCOPE", default_value = rimthan_mcp::auth::DEFAULT_SCOPE)]
    required_scope: String,
    /// The public URL of the MCP endpoint (token audience, metadata `resource`); default:
    /// http://LISTEN/mcp.
    #[arg(long, env = "RIMTHAN_PUBLIC_URL")]
    public_url: Option<String>,
    /// How often to re-read an external registry's channels (seconds); SIGHUP re-reads at once.
    #[arg(long, env = "RIMTHAN_RELOAD_INTERVAL", default_value_t = 5)]
    reload_interval: u64,
    /// Export OpenTelemetry spans and metrics over OTLP/HTTP with protobuf to the collector at
    /// this base URL (`/v1/traces` and `/v1/metrics` are appended); the standard OTEL_*
    /// variables are honoured, and OTEL_EXPORTER_OTLP_ENDPOINT alone turns export on.
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// Log format on stderr: text or json.
    #[arg(long, env = "RIMTHAN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Delete audit entries older than this many days, and completed sessions last changed
    /// before then (hourly, and at start); default: keep everything.
    #[arg(long, env = "RIMTHAN_RETAIN_DAYS", value_parser = clap::value_parser!(u32).range(1..=MAX_RETAIN_DAYS as i64))]
    retain_days: Option<u32>,
    /// POST signed webhook events (sign-off requested, reminded, decided, expired; a session
    /// completed) to this http(s) URL; repeat for more receivers. Needs --notify-secret-file.
    #[arg(long, env = "RIMTHAN_NOTIFY_URL", value_delimiter = ',', value_parser = notify_url, requires = "notify_secret_file")]
    notify_url: Vec<String>,
    /// The file holding the webhooks' signing secret, `whsec_` and base64 (Standard Webhooks).
    #[arg(long, env = "RIMTHAN_NOTIFY_SECRET_FILE", value_parser = webhook_secret, requires = "notify_url")]
    notify_secret_file: Option<rimthan_mcp::webhooks::WebhookSecret>,
}

/// How often retention runs, after the pass at start.
const RETENTION_INTERVAL: Duration = Duration::from_secs(3600);
/// How often the audit chains' heads are sealed.
const SEAL_INTERVAL: Duration = Duration::from_secs(300);
/// How often due timers are looked for: a reminder or an expiry fires within this of its time.
const TIMER_POLL: Duration = Duration::from_secs(2);

/// The longest `--retain-days` (100 years): the cutoff of anything longer is not a time.
const MAX_RETAIN_DAYS: u32 = 36_500;

/// Runs retention now and every [`RETENTION_INTERVAL`] (`docs/engine.md` §7.3); a failed pass is
/// logged, counted, and retried at the next one; a task that dies is started again
/// (`rimthan_mcp::tasks`).
fn retain(engine: Arc<Engine>, days: u32, metrics: Arc<rimthan_mcp::Metrics>) {
    let keep = Age::days(days);
    let counted = metrics.clone();
    rimthan_mcp::tasks::supervise("retention", metrics, move || {
        let (engine, metrics) = (engine.clone(), counted.clone());
        async move {
            let mut ticks = tokio::time::interval(RETENTION_INTERVAL);
            loop {
                ticks.tick().await;
                let before = keep.cutoff();
                let signer = engine.provenance_key();
                match engine.store().prune(&before, signer).await {
                    Ok(pruned) => {
                        tracing::info!(
                            %before,
                            audit_entries = pruned.audit_entries,
                            sessions = pruned.sessions,
                            "retention pass"
                        );
                        // What retention changed is sealed at once (docs/engine.md §7.6).
                        if let Err(e) = engine.seal().await {
                            tracing::warn!(error = %e, "sealing after retention failed; the next seal covers it");
                        }
                    }
                    Err(e) => {
                        metrics.background_task_failure("retention");
                        tracing::error!(error = %e, "retention pass failed; retrying at the next one")
                    }
                }
            }
        }
    });
}

/// Seals the audit chains' heads now and every [`SEAL_INTERVAL`] (`docs/engine.md` §7.6): a
/// deletion before the last seal is named by `rimthan audit verify`. Replicas each seal; of two
/// at the same moment, one writes the seal.
fn seal_periodically(engine: Arc<Engine>, metrics: Arc<rimthan_mcp::Metrics>) {
    let counted = metrics.clone();
    rimthan_mcp::tasks::supervise("seal", metrics, move || {
        let (engine, metrics) = (engine.clone(), counted.clone());
        async move {
            let mut ticks = tokio::time::interval(SEAL_INTERVAL);
            loop {
                ticks.tick().await;
                match engine.seal().await {
                    Ok(Some(seq)) => tracing::debug!(seq, "audit chains sealed"),
                    Ok(None) => {}
                    Err(e) => {
                        metrics.background_task_failure("seal");
                        tracing::error!(error = %e, "sealing the audit chains failed; retrying at the next seal")
                    }
                }
            }
        }
    });
}

/// Fires the sessions' due timers (sign-off reminders and expiries, step deadlines) every
/// [`TIMER_POLL`], and again at once after a full batch (`docs/engine.md` §6.3). Every replica
/// runs it; of two firing the same timer, one does.
fn fire_timers(engine: Arc<Engine>, metrics: Arc<rimthan_mcp::Metrics>) {
    let counted = metrics.clone();
    rimthan_mcp::tasks::supervise("timers", metrics, move || {
        let (engine, metrics) = (engine.clone(), counted.clone());
        async move {
            let mut ticks = tokio::time::interval(TIMER_POLL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                loop {
                    match engine.fire_due_now().await {
                        Ok(pass) => {
                            metrics.timers_fired(pass.fired);
                            if pass.due < rimthan_engine::TIMER_BATCH as usize {
                                break;
                            }
                        }
                        Err(e) => {
                            metrics.background_task_failure("timers");
                            tracing::error!(error = %e, "firing due timers failed; retrying at the next poll");
                            break;
                        }
                    }
                }
            }
        }
    });
}

impl ServeArgs {
    /// The webhook receivers and the sender signing for them, when `--notify-url` names any.
    fn notify(
        &self,
    ) -> anyhow::Result<
        Option<(
            rimthan_engine::NotifyConfig,
            Arc<rimthan_mcp::webhooks::Webhooks>,
        )>,
    > {
        // clap holds the two flags together and parsed each.
        let (false, Some(secret)) = (self.notify_url.is_empty(), &self.notify_secret_file) else {
            return Ok(None);
        };
        let webhooks = rimthan_mcp::webhooks::Webhooks::new(secret.clone()).map_err(InputError)?;
        let origin = match &self.public_url {
            Some(url) => origin_of(url).ok_or_else(|| {
                InputError(format!(
                    "--public-url {url:?} is not an http:// or https:// URL"
                ))
            })?,
            None => format!("http://{}", self.listen),
        };
        let config = rimthan_engine::NotifyConfig {
            endpoints: self.notify_url.clone(),
            admin_origin: origin,
        };
        Ok(Some((config, Arc::new(webhooks))))
    }
}

/// `--notify-url`: an http(s) URL with a host.
fn notify_url(url: &str) -> Result<String, String> {
    origin_of(url)
        .map(|_| url.to_owned())
        .ok_or_else(|| "not an http:// or https:// URL with a host".to_owned())
}

/// `--notify-secret-file`: a regular file holding a `whsec_` secret.
fn webhook_secret(path: &str) -> Result<rimthan_mcp::webhooks::WebhookSecret, String> {
    let text = rimthan_registry::read_regular_file(std::path::Path::new(path), 4096)
        .map_err(|e| e.to_string())?;
    String::from_utf8_lossy(&text).parse()
}

/// `scheme://host[:port]` of an http(s) URL with a host, and nothing else in it that does not
/// belong in a URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https")
        || url.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    (!host.is_empty() && !host.starts_with(':')).then(|| format!("{scheme}://{host}"))
}

/// Reads a provenance key file: the form `rimthan registry keygen` writes.
fn read_provenance_key(path: &std::path::Path) -> anyhow::Result<ProvenanceKey> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError(format!("{}: {e}", path.display())))?;
    let file: rimthan_registry::SigningKeyFile = serde_json::from_str(&text)
        .map_err(|e| InputError(format!("{}: not a key file: {e}", path.display())))?;
    Ok(ProvenanceKey::from_file(&file)
        .map_err(|e| InputError(format!("{}: {e}", path.display())))?)
}

/// Reads the retired public keys: a keys document, as the server publishes one.
fn read_retired_keys(
    path: &std::path::Path,
) -> anyhow::Result<Vec<rimthan_registry::PublicKeyFile>> {
    let bytes = rimthan_registry::read_regular_file(path, 1 << 20)
        .map_err(|e| InputError(format!("{}: {e}", path.display())))?;
    let document: rimthan_engine::provenance::KeysDocument = serde_json::from_slice(&bytes)
        .map_err(|e| InputError(format!("{}: not a keys document: {e}", path.display())))?;
    Ok(document.keys)
}

/// Logs go to stderr (stdout carries the protocol in stdio mode), filtered by `RUST_LOG`; rmcp
/// logs every stateless request at info, so only its warnings are kept unless `RUST_LOG` says.
/// With export on, the spans meant for it go to the OpenTelemetry layer, whatever the filter.
fn init_logs(format: LogFormat, telemetry: Option<&Telemetry>) {
    use tracing_subscriber::{Layer as _, layer::SubscriberExt as _, util::SubscriberInitExt as _};
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
    };
    let logged = tracing_subscriber::registry().with(logs.with_filter(filter));
    match telemetry {
        Some(telemetry) => logged.with(telemetry.layer()).init(),
        None => logged.init(),
    }
}

pub(crate) fn default_database_url() -> anyhow::Result<String> {
    let dir = dirs::data_dir()
        .context("no user data folder on this system; pass --database-url")?
        .join("rimthan");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    Ok(format!("sqlite://{}", dir.join("rimthan.db").display()))
}

impl ServeArgs {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let telemetry = Telemetry::start(self.otlp_endpoint.as_deref(), runtime.handle().clone())
            .map_err(|e| InputError(e.to_string()))?;
        init_logs(self.log_format, telemetry.as_ref());
        let auth = self.auth()?;
        let secret = match &self.checkpoint_secret_file {
            None => None,
            Some(path) => Some(
                std::fs::read(path).map_err(|e| InputError(format!("{}: {e}", path.display())))?,
            ),
        };
        let provenance_key = match &self.provenance_key_file {
            None => None,
            Some(path) => {
                let retired = match &self.provenance_retired_keys {
                    None => Vec::new(),
                    Some(path) => read_retired_keys(path)?,
                };
                Some((read_provenance_key(path)?, retired))
            }
        };
        let notify = self.notify()?;
        let profile = self.profile;
        if self.max_buffered_bytes < self.max_body_bytes {
            return Err(InputError(format!(
                "--max-buffered-bytes ({}) is below --max-body-bytes ({}): no body of the largest accepted size could be read; raise it or lower --max-body-bytes",
                self.max_buffered_bytes, self.max_body_bytes
            ))
            .into());
        }
        let serving = match &self.release {
            Some(release) => Serving::Release(
                release
                    .parse()
                    .map_err(|e: rimthan_registry::IdError| InputError(e.to_string()))?,
            ),
            None => Serving::Channel(
                self.channel
                    .parse()
                    .map_err(|e: rimthan_registry::IdError| InputError(e.to_string()))?,
            ),
        };
        let registry = match &self.registry {
            None => verify_embedded()?,
            Some(dir) => verify_registry(
                &serving.files(RegistryFiles::from_dir(dir)?)?,
                &external_policy(),
            )?,
        };
        let active = match &serving {
            Serving::Channel(channel) => registry.channel(channel).ok_or_else(|| {
                InputError(format!(
                    "channel {channel} names no release in the registry (channels: {}); point it \
                     at a release with `rimthan registry promote REGISTRY --channel {channel} \
                     --release ID`, or pass --channel or --release",
                    registry.channel_list()
                ))
            }),
            Serving::Release(release) => registry.release(release).ok_or_else(|| {
                InputError(format!(
                    "release {release} is not in the registry (releases: {})",
                    registry.release_list()
                ))
            }),
        }?;
        if active.is_draft() {
            tracing::warn!(release = %active.id(), "serving a draft: never published, for trying a workflow out");
        }
        tracing::info!(release = %active.id(), manifest_sha256 = %active.manifest_sha256(), %serving, "registry verified");
        let database_url = match self.database_url.clone() {
            Some(url) => url,
            None => default_database_url()?,
        };
        let grace = Duration::from_secs(self.shutdown_grace);
        // The server runs as a task on a runtime worker, not on this thread: each connection
        // its accept loop takes is then spawned onto that worker's own queue, where no other
        // thread has to be woken to start it (docs/performance.md).
        let served = runtime.spawn(async move {
            let store = rimthan_engine::store::open(&database_url).await?;
            let releases = Arc::new(Releases::serving(registry, serving));
            let engine = match provenance_key {
                Some((key, retired)) => {
                    Engine::with_configured_key(releases, store.clone(), secret, key, retired)
                        .await?
                }
                None => Engine::new(releases, store.clone(), secret).await?,
            };
            let engine = match &notify {
                Some((config, _)) => engine.with_notify(config.clone()),
                None => engine,
            };
            let server = RimthanServer::new(Arc::new(engine), profile);
            if let Some((_, webhooks)) = notify {
                webhooks.spawn(server.engine().clone(), server.metrics().clone());
            }
            if let Some(days) = self.retain_days {
                retain(server.engine().clone(), days, server.metrics().clone());
            }
            seal_periodically(server.engine().clone(), server.metrics().clone());
            fire_timers(server.engine().clone(), server.metrics().clone());
            if let Some(auth) = &auth {
                auth.verifier.start();
                reload_credentials_on_hangup(auth.verifier.clone());
            }
            match self.registry.clone() {
                Some(dir) => {
                    let interval = std::time::Duration::from_secs(self.reload_interval.max(1));
                    rimthan_mcp::reload::spawn(dir, server.clone(), interval);
                }
                // SIGHUP must never end the process (systemd's reload sends it).
                None => ignore_hangup(),
            }
            if self.stdio {
                use rmcp::ServiceExt as _;
                tracing::info!(%profile, "serving on stdio");
                server
                    .over(Transport::Pipe, true)
                    .serve(rmcp::transport::stdio())
                    .await?
                    .waiting()
                    .await?;
                return Ok(());
            }
            let mut config = HttpConfig::loopback(self.listen);
            config.max_body_bytes = self.max_body_bytes;
            config.max_buffered_bytes = self.max_buffered_bytes;
            config.max_sessions = self.max_sessions;
            config.legacy_sessions = self.legacy_sessions;
            config.connections = ConnectionLimits {
                max_connections: self.max_connections,
                header_timeout: Duration::from_secs(self.header_timeout),
                idle_timeout: Duration::from_secs(self.idle_timeout),
                shutdown_grace: Duration::from_secs(self.shutdown_grace),
            };
            config.admin = match &auth {
                Some(auth) => Some(Access::Facilitators(auth.clone())),
                None if self.listen.ip().is_loopback() => Some(Access::Loopback),
                None => {
                    tracing::warn!("/admin is off: without authentication the facilitator's view is served only on a loopback address");
                    None
                }
            };
            config.auth = auth;
            if !self.allowed_hosts.is_empty() {
                config.allowed_hosts = self.allowed_hosts.clone();
            }
            if !self.allowed_origins.is_empty() {
                config.allowed_origins = self.allowed_origins.clone();
            }
            if !self.listen.ip().is_loopback() && self.allowed_hosts.is_empty() {
                tracing::warn!("listening beyond loopback with loopback-only allowed hosts; pass --allowed-hosts with your public host name");
            }
            let listener = http::bind(self.listen).await.with_context(|| format!("cannot listen on {}", self.listen))?;
            tracing::info!(%profile, url = %format!("http://{}{MCP_PATH}", listener.local_addr()?), max_connections = config.connections.effective_max_connections(), "serving Streamable HTTP");
            match &config.admin {
                Some(Access::Loopback) => tracing::info!(url = %format!("http://{}/admin", listener.local_addr()?), "facilitator's view without authentication, on loopback only"),
                Some(Access::Facilitators(_)) => tracing::info!(url = %format!("http://{}/admin", listener.local_addr()?), "facilitator's view, for facilitator tokens"),
                None => {}
            }
            http::serve(listener, server, &config, shutdown_signal()).await?;
            tracing::info!("stopped");
            anyhow::Ok(())
        });
        let served = match runtime.block_on(served) {
            Ok(served) => served,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(e.into()),
        };
        // The last spans go out while the runtime that sends them still runs.
        if let Some(telemetry) = telemetry {
            telemetry.shutdown();
        }
        // A blocking task stuck on a file (a hung network mount) must not hold the exit.
        runtime.shutdown_timeout(grace);
        served
    }
}

impl ServeArgs {
    fn jwt_rules(&self, issuer: String, audience: &str) -> anyhow::Result<JwtRules> {
        let algorithms = self
            .jwt_algorithms
            .iter()
            .map(|name| {
                name.trim()
                    .parse::<Algorithm>()
                    .ok()
                    .filter(|a| DEFAULT_ALGORITHMS.contains(a))
                    .ok_or_else(|| {
                        InputError(format!(
                            "--jwt-algorithms: {name:?} is not an asymmetric signature algorithm (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA)"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let grant = |flag: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| {
                    v.parse::<ClaimGrant>()
                        .map_err(|e| InputError(format!("{flag}: {e}")))
                })
                .transpose()
        };
        Ok(JwtRules {
            issuer,
            audience: audience.to_owned(),
            organization_claim: self.jwt_organization_claim.clone(),
            facilitator: FacilitatorClaims {
                organization: grant("--facilitator-claim", &self.facilitator_claim)?,
                all: grant("--facilitator-all-claim", &self.facilitator_all_claim)?,
            },
            roles_claim: self.roles_claim.clone(),
            algorithms,
        })
    }

    fn auth(&self) -> anyhow::Result<Option<Arc<Auth>>> {
        let resource = self
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}{MCP_PATH}", self.listen));
        let verifier = match self.auth {
            AuthMode::None => return Ok(None),
            AuthMode::Tokens => {
                let file = self
                    .auth_tokens_file
                    .as_ref()
                    .ok_or_else(|| InputError("--auth tokens needs --auth-tokens-file".into()))?;
                Verifier::tokens_from_file(file).map_err(|e| InputError(e.to_string()))?
            }
            AuthMode::Jwt => {
                let file = self
                    .jwks_file
                    .as_ref()
                    .ok_or_else(|| InputError("--auth jwt needs --jwks-file".into()))?;
                let issuer = self
                    .jwt_issuer
                    .clone()
                    .ok_or_else(|| InputError("--auth jwt needs --jwt-issuer".into()))?;
                Verifier::jwt_from_file(file, self.jwt_rules(issuer, &resource)?)
                    .map_err(|e| InputError(e.to_string()))?
            }
            AuthMode::Oidc => {
                let issuer = self
                    .oidc_issuer
                    .clone()
                    .ok_or_else(|| InputError("--auth oidc needs --oidc-issuer".into()))?;
                let provider = OidcProvider::new(self.jwt_rules(issuer, &resource)?)
                    .map_err(|e| InputError(e.to_string()))?;
                Verifier::oidc(provider)
            }
        };
        let issuer = match self.auth {
            AuthMode::Oidc => self.oidc_issuer.clone(),
            _ => self.jwt_issuer.clone(),
        };
        Ok(Some(Arc::new(Auth {
            verifier,
            resource,
            authorization_servers: issuer.into_iter().collect(),
            scope: self.required_scope.clone(),
            throttle: Default::default(),
        })))
    }
}

/// SIGHUP re-reads the token or JWKS file, or fetches the OpenID provider's keys, at once.
fn reload_credentials_on_hangup(verifier: Verifier) {
    #[cfg(unix)]
    if let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading credentials");
                verifier.reload().await;
            }
        });
    }
}

/// Logs SIGHUP instead of dying of it: the embedded registry has nothing to reload.
fn ignore_hangup() {
    #[cfg(unix)]
    if let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP: the embedded registry has nothing to reload");
            }
        });
    }
}

/// Resolves on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}

//! OpenID Connect: an issuer's signing keys found by discovery and kept current over HTTP
//! (`docs/operations/deploy.md` §5).
//!
//! The discovery document at `{issuer}/.well-known/openid-configuration` must name the
//! configured issuer (a trailing slash aside); its `jwks_uri` is fetched, checked like a JWKS file (every key
//! pinned to one algorithm) and kept until its `Cache-Control: max-age` runs out. A token whose
//! `kid` the set does not hold makes the server fetch again at once, at most once per
//! [`REFETCH_INTERVAL`], so a newly published key works on its first use. When the provider
//! cannot be reached, the last good key set keeps serving; until a first set loads, `/readyz`
//! says why the server is not ready.

use std::{
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, Instant},
};

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use serde::Deserialize;

use crate::auth::{AuthConfigError, Caller, Credentials, JwtRules, UNKNOWN_SIGNING_KEY};

/// The shortest gap between two fetches an unknown `kid` may cause.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// How long a key set is kept when the provider sends no `max-age`.
pub const DEFAULT_KEYS_TTL: Duration = Duration::from_secs(300);
/// The bounds a provider's `max-age` is held to.
const KEYS_TTL_BOUNDS: (Duration, Duration) =
    (Duration::from_secs(30), Duration::from_secs(86_400));
/// The largest discovery document or key set read.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// One request to the provider, connection included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Waits between failed fetches before a first key set: doubling up to the last.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// Why the server is not ready before the first fetch has finished.
const NOT_LOADED: &str = "the identity provider's keys are not loaded yet";

/// Why an issuer URL cannot be used.
fn issuer_error(issuer: &str, reason: impl Into<String>) -> AuthConfigError {
    AuthConfigError {
        file: format!("--oidc-issuer {issuer}"),
        reason: reason.into(),
    }
}

/// Plain HTTP only to this machine: anything else could be answered by whoever sits on the path.
fn require_tls_unless_loopback(url: &hyper::Uri) -> Result<(), String> {
    let host = url.host().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if loopback => Ok(()),
        other => Err(format!(
            "{url} uses {}: the issuer and its keys are fetched over https (plain http only on loopback)",
            other.unwrap_or("no scheme")
        )),
    }
}

#[derive(Debug, Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

#[derive(Debug)]
struct Keys {
    /// The last good key set, if one ever loaded.
    credentials: Option<Arc<Credentials>>,
    /// When the key set should be fetched again.
    refresh_at: Instant,
    /// When an unknown `kid` last caused a fetch, for the rate limit.
    kid_fetch_at: Option<Instant>,
    /// Why the last fetch failed; cleared by a success.
    failure: Option<String>,
}

/// An OpenID provider's key set, kept current.
#[derive(Debug)]
pub struct OidcProvider {
    issuer: String,
    discovery_url: hyper::Uri,
    /// Audience, organization claim and algorithms; the issuer is the provider's spelling.
    rules: JwtRules,
    client: Client,
    keys: RwLock<Keys>,
    /// One fetch at a time, whoever asks (the refresher, an unknown `kid`, SIGHUP).
    fetching: tokio::sync::Mutex<()>,
}

impl OidcProvider {
    /// Checks the issuer URL (`rules.issuer`) and prepares the client; nothing is fetched yet.
    pub fn new(rules: JwtRules) -> Result<Arc<Self>, AuthConfigError> {
        let issuer = rules.issuer.clone();
        let parsed: hyper::Uri = issuer
            .parse()
            .map_err(|e| issuer_error(&issuer, format!("not a URL: {e}")))?;
        require_tls_unless_loopback(&parsed).map_err(|e| issuer_error(&issuer, e))?;
        let discovery_url: hyper::Uri = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        )
        .parse()
        .map_err(|e| issuer_error(&issuer, format!("not a URL: {e}")))?;
        let client = http_client().map_err(|e| issuer_error(&issuer, e))?;
        Ok(Arc::new(Self {
            issuer,
            discovery_url,
            rules,
            client,
            keys: RwLock::new(Keys {
                credentials: None,
                refresh_at: Instant::now(),
                kid_fetch_at: None,
                failure: Some(NOT_LOADED.into()),
            }),
            fetching: tokio::sync::Mutex::new(()),
        }))
    }

    /// Keeps the key set current for as long as the task runs: fetches when it expires, and
    /// retries with a growing wait while none has loaded.
    pub fn spawn_refresher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let provider = self.clone();
        tokio::spawn(async move {
            let mut retry = RETRY.0;
            loop {
                let due = provider.read().refresh_at;
                tokio::time::sleep_until(due.into()).await;
                if provider.refresh().await {
                    retry = RETRY.0;
                } else if provider.read().credentials.is_none() {
                    provider.write().refresh_at = Instant::now() + retry;
                    retry = (retry * 2).min(RETRY.1);
                }
            }
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Keys> {
        self.keys.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Keys> {
        self.keys.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a key set is loaded, or why not.
    pub fn ready(&self) -> Result<(), String> {
        let keys = self.read();
        match (&keys.credentials, &keys.failure) {
            (Some(_), _) => Ok(()),
            (None, failure) => Err(failure.clone().unwrap_or_else(|| NOT_LOADED.into())),
        }
    }

    /// Fetches the discovery document and the key set now; true when a key set loaded. A
    /// failure is logged and kept for `/readyz`; the last good key set stays in force.
    pub async fn refresh(&self) -> bool {
        let _one = self.fetching.lock().await;
        match self.fetch().await {
            Ok((credentials, ttl)) => {
                tracing::info!(issuer = %self.issuer, ttl_secs = ttl.as_secs(), "identity provider keys loaded");
                let mut keys = self.write();
                keys.credentials = Some(Arc::new(credentials));
                keys.refresh_at = Instant::now() + ttl;
                keys.failure = None;
                true
            }
            Err(reason) => {
                let mut keys = self.write();
                let kept = if keys.credentials.is_some() {
                    "the last good key set stays in use"
                } else {
                    "no key set is loaded: every token is refused"
                };
                tracing::error!(issuer = %self.issuer, %reason, "identity provider keys not fetched; {kept}");
                keys.failure = Some(reason);
                // Tried again soon; before a first key set, the refresher's backoff decides.
                keys.refresh_at = Instant::now() + RETRY.1;
                false
            }
        }
    }

    async fn fetch(&self) -> Result<(Credentials, Duration), String> {
        let (body, _) = self.get(&self.discovery_url).await?;
        let discovery: Discovery = serde_json::from_slice(&body).map_err(|e| {
            format!(
                "{} is not an OpenID discovery document: {e}",
                self.discovery_url
            )
        })?;
        // Equal up to a trailing slash, which operators add or leave out; tokens must then
        // carry the issuer exactly as the provider spells it.
        if discovery.issuer.trim_end_matches('/') != self.issuer.trim_end_matches('/') {
            return Err(format!(
                "the discovery document names issuer {:?}, not {:?}: set --oidc-issuer to the provider's issuer",
                discovery.issuer, self.issuer
            ));
        }
        let jwks_uri: hyper::Uri = discovery
            .jwks_uri
            .parse()
            .map_err(|e| format!("jwks_uri {:?} is not a URL: {e}", discovery.jwks_uri))?;
        require_tls_unless_loopback(&jwks_uri)?;
        let (body, ttl) = self.get(&jwks_uri).await?;
        let text = std::str::from_utf8(&body).map_err(|_| format!("{jwks_uri}: not UTF-8"))?;
        let rules = JwtRules {
            issuer: discovery.issuer,
            ..self.rules.clone()
        };
        let credentials = Credentials::jwks(text, rules).map_err(|e| format!("{jwks_uri}: {e}"))?;
        if credentials.is_empty() {
            return Err(format!("{jwks_uri} publishes no keys"));
        }
        Ok((credentials, ttl))
    }

    /// A bounded GET: the body and how long it may be cached. Redirects are not followed: the
    /// discovery document and `jwks_uri` name where the keys are.
    async fn get(&self, url: &hyper::Uri) -> Result<(Vec<u8>, Duration), String> {
        let request = hyper::Request::get(url.clone())
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("{url}: {e}"))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("{url} answered {}", response.status()));
            }
            let ttl = max_age(response.headers()).unwrap_or(DEFAULT_KEYS_TTL);
            let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
                .collect()
                .await
                .map_err(|e| format!("{url}: {e} (at most {MAX_DOCUMENT_BYTES} bytes)"))?
                .to_bytes();
            Ok((
                body.to_vec(),
                ttl.clamp(KEYS_TTL_BOUNDS.0, KEYS_TTL_BOUNDS.1),
            ))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{url} did not answer within {}s", REQUEST_TIMEOUT.as_secs()))?
    }

    /// Who a bearer token proves, or why not. An unknown `kid` fetches
    /// the key set again first, unless that happened within [`REFETCH_INTERVAL`].
    pub(crate) async fn verify(&self, token: &str) -> Result<Caller, &'static str> {
        let current = self.read().credentials.clone();
        let Some(credentials) = current else {
            return Err("the identity provider's keys are not loaded");
        };
        match credentials.verify(token) {
            Err(UNKNOWN_SIGNING_KEY) => {
                let allowed = {
                    let mut keys = self.write();
                    let recent = keys
                        .kid_fetch_at
                        .is_some_and(|at| at.elapsed() < REFETCH_INTERVAL);
                    if !recent {
                        keys.kid_fetch_at = Some(Instant::now());
                    }
                    !recent
                };
                if allowed {
                    self.refresh().await;
                }
                let refreshed = self.read().credentials.clone();
                refreshed.map_or(Err(UNKNOWN_SIGNING_KEY), |c| c.verify(token))
            }
            done => done,
        }
    }
}

/// `Cache-Control: max-age=N` (ignoring `no-cache`/`no-store`, which would mean a fetch per
/// request: the bounds apply instead).
fn max_age(headers: &hyper::HeaderMap) -> Option<Duration> {
    let value = headers.get(hyper::header::CACHE_CONTROL)?.to_str().ok()?;
    value.split(',').find_map(|directive| {
        let (name, seconds) = directive.trim().split_once('=')?;
        (name.eq_ignore_ascii_case("max-age"))
            .then(|| seconds.trim().parse().ok().map(Duration::from_secs))
            .flatten()
    })
}

type Client<B = Empty<Bytes>> = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    B,
>;

/// rustls with the ring provider and the system's root certificates.
pub(crate) fn http_client<B>() -> Result<Client<B>, String>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
{
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| format!("no usable TLS roots on this system: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        let mut headers = hyper::HeaderMap::new();
        headers.insert(
            hyper::header::CACHE_CONTROL,
            "public, max-age=600".parse().unwrap(),
        );
        assert_eq!(max_age(&headers), Some(Duration::from_secs(600)));
        headers.insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
        assert_eq!(max_age(&headers), None);
    }

    #[test]
    fn plain_http_is_for_loopback_issuers_only() {
        for ok in [
            "https://id.example.com/",
            "http://127.0.0.1:8080/",
            "http://[::1]/",
            "http://localhost/realm",
        ] {
            assert!(
                require_tls_unless_loopback(&ok.parse().unwrap()).is_ok(),
                "{ok}"
            );
        }
        for refused in [
            "http://id.example.com/",
            "ftp://127.0.0.1/",
            "http://10.0.0.1/",
        ] {
            assert!(
                require_tls_unless_loopback(&refused.parse().unwrap()).is_err(),
                "{refused}"
            );
        }
    }
}

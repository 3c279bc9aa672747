//! Credentials that change under a running server: a token file or a JWKS is read at start,
//! and read again when it changes (or on SIGHUP), so adding a token or publishing a new signing
//! key needs no restart; an OpenID provider's keys are kept current by [`OidcProvider`]
//! (`docs/operations/deploy.md` §5).
//!
//! The file's size and modification time are looked at no more than once per
//! [`RECHECK`] on the request path, and at once when a JWT names a key the set does not hold,
//! so a token signed by a newly published key works on its first use. A file that no longer
//! parses is logged and ignored: the last good credentials keep serving.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, Instant, SystemTime},
};

use crate::{
    auth::{AuthConfigError, Caller, Credentials, JwtRules, UNKNOWN_SIGNING_KEY},
    oidc::OidcProvider,
};

/// How often the request path looks at the file for a change.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// How to parse the file's text.
#[derive(Debug, Clone)]
enum Format {
    Tokens,
    Jwks(Box<JwtRules>),
}

impl Format {
    fn parse(&self, text: &str) -> Result<Credentials, String> {
        match self {
            Format::Tokens => Credentials::tokens(text),
            Format::Jwks(rules) => Credentials::jwks(text, (**rules).clone()),
        }
    }
}

/// What identifies one version of the file.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

#[derive(Debug)]
struct Loaded {
    credentials: Arc<Credentials>,
    stamp: Stamp,
    checked: Instant,
}

/// How callers prove who they are: the credentials of one file, or of an OpenID provider,
/// kept current.
#[derive(Debug, Clone)]
pub struct Verifier(Source);

#[derive(Debug, Clone)]
enum Source {
    File(Arc<FileCredentials>),
    Oidc(Arc<OidcProvider>),
}

impl Verifier {
    /// Reads a token file: `{"tokens": [{"sha256", "principal", "organization", "scopes"}]}`.
    pub fn tokens_from_file(path: &Path) -> Result<Self, AuthConfigError> {
        FileCredentials::open(path, Format::Tokens).map(|f| Self(Source::File(Arc::new(f))))
    }

    /// Reads a JWKS file for JWT validation.
    pub fn jwt_from_file(path: &Path, rules: JwtRules) -> Result<Self, AuthConfigError> {
        FileCredentials::open(path, Format::Jwks(Box::new(rules)))
            .map(|f| Self(Source::File(Arc::new(f))))
    }

    /// JWTs checked against an OpenID provider's published keys.
    pub fn oidc(provider: Arc<OidcProvider>) -> Self {
        Self(Source::Oidc(provider))
    }

    /// Starts keeping an OpenID provider's keys current (a task on the running runtime);
    /// files need nothing started.
    pub fn start(&self) {
        if let Source::Oidc(provider) = &self.0 {
            provider.spawn_refresher();
        }
    }

    /// Whether tokens can be checked now, or why not (`/readyz`).
    pub fn ready(&self) -> Result<(), String> {
        match &self.0 {
            Source::File(_) => Ok(()),
            Source::Oidc(provider) => provider.ready(),
        }
    }

    /// Reads the file or fetches the provider's keys again now (SIGHUP).
    pub async fn reload(&self) {
        match &self.0 {
            Source::File(file) => {
                file.current(true);
            }
            Source::Oidc(provider) => {
                provider.refresh().await;
            }
        }
    }

    /// Who a bearer token proves, or why not.
    pub(crate) async fn verify(&self, token: &str) -> Result<Caller, &'static str> {
        match &self.0 {
            Source::File(file) => file.verify(token),
            Source::Oidc(provider) => provider.verify(token).await,
        }
    }
}

/// The credentials of one file, re-read when it changes.
#[derive(Debug)]
struct FileCredentials {
    path: PathBuf,
    format: Format,
    loaded: RwLock<Loaded>,
}

impl FileCredentials {
    fn open(path: &Path, format: Format) -> Result<Self, AuthConfigError> {
        let error = |reason: String| AuthConfigError {
            file: path.display().to_string(),
            reason,
        };
        let before = stamp(path);
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let credentials = format.parse(&text).map_err(error)?;
        Ok(Self {
            path: path.to_owned(),
            format,
            loaded: RwLock::new(Loaded {
                credentials: Arc::new(credentials),
                stamp: before,
                checked: Instant::now(),
            }),
        })
    }

    /// The credentials in force, re-read first when the file changed. `now` re-checks even
    /// within [`RECHECK`] of the last look.
    fn current(&self, now: bool) -> Arc<Credentials> {
        {
            let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
            if !now && loaded.checked.elapsed() < RECHECK {
                return loaded.credentials.clone();
            }
        }
        let mut loaded = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        loaded.checked = Instant::now();
        let stamp = stamp(&self.path);
        if stamp == loaded.stamp {
            return loaded.credentials.clone();
        }
        // Remembered either way: a broken file is reported once per change, not per request.
        loaded.stamp = stamp;
        let parsed = std::fs::read_to_string(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|text| self.format.parse(&text));
        match parsed {
            Ok(credentials) => {
                tracing::info!(file = %self.path.display(), "credentials reloaded");
                loaded.credentials = Arc::new(credentials);
            }
            Err(reason) => tracing::error!(
                file = %self.path.display(),
                %reason,
                "credentials file changed but does not load; the previous credentials stay in use"
            ),
        }
        loaded.credentials.clone()
    }

    fn verify(&self, token: &str) -> Result<Caller, &'static str> {
        match self.current(false).verify(token) {
            Err(UNKNOWN_SIGNING_KEY) => self.current(true).verify(token),
            done => done,
        }
    }
}

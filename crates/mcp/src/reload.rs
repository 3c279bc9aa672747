//! Live channels: re-read the registry folder on SIGHUP and whenever it changed (checked on an
//! interval), and switch the active release without a restart. A registry that does not
//! verify, that lost a release a session may be pinned to, or that holds a release id with
//! another manifest than the one in use (a release rewritten in place) is refused; the server
//! keeps serving the verified copy it has. Reading and verifying run on a blocking thread, never
//! on the async workers that answer requests.

use std::{path::PathBuf, time::Duration};

use rimthan_registry::{
    RegistryError, RegistryFiles, Sha256Digest, VerifiedRegistry, external_policy, verify_registry,
};

use crate::server::RimthanServer;

/// Why a reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The folder does not verify.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// What the server starts sessions from (its channel or named release) is not in it.
    #[error("the server's {0} names no release in the reloaded registry")]
    NoActiveRelease(String),
    /// A release disappeared; sessions pinned to it would break.
    #[error("release {0} disappeared from the registry; releases are never removed")]
    ReleaseRemoved(String),
    /// A release id came back with another manifest; sessions pinned to it would see content
    /// change under them.
    #[error(
        "release {release} was rewritten in place (manifest sha256 {found}, in use {held}); releases are immutable: publish the change under a new release id"
    )]
    ReleaseRewritten {
        /// The release.
        release: String,
        /// The manifest digest in use.
        held: String,
        /// The digest in the folder now.
        found: String,
    },
}

impl ReloadError {
    /// The stable code: the registry's own for a folder that does not verify.
    pub fn code(&self) -> &'static str {
        match self {
            ReloadError::Registry(e) => e.code(),
            ReloadError::NoActiveRelease(_) => "no_active_release",
            ReloadError::ReleaseRemoved(_) => "release_removed",
            ReloadError::ReleaseRewritten { .. } => "release_rewritten",
        }
    }
}

/// Watches one registry folder for a server.
#[derive(Debug)]
pub struct Reloader {
    dir: PathBuf,
    server: RimthanServer,
    fingerprint: Option<Sha256Digest>,
}

impl Reloader {
    /// A reloader for the registry at `dir`, serving through `server`.
    pub fn new(dir: PathBuf, server: RimthanServer) -> Self {
        Self {
            dir,
            server,
            fingerprint: None,
        }
    }

    /// A cheap fingerprint of everything in the folder: each file's path, size and
    /// modification time. Any change (a moved channel, a new release, a touched file) reloads.
    fn fingerprint(&self) -> Option<Sha256Digest> {
        fn walk(dir: &std::path::Path, out: &mut Vec<String>) -> std::io::Result<()> {
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                let meta = entry.metadata()?;
                if meta.is_dir() {
                    walk(&entry.path(), out)?;
                } else {
                    let modified = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
                    out.push(format!(
                        "{}\t{}\t{:?}",
                        entry.path().display(),
                        meta.len(),
                        modified
                    ));
                }
            }
            Ok(())
        }
        let mut lines = Vec::new();
        walk(&self.dir, &mut lines).ok()?;
        lines.sort();
        Some(Sha256Digest::of(lines.join("\n").as_bytes()))
    }

    fn load(&self) -> Result<VerifiedRegistry, ReloadError> {
        let releases = self.server.engine().releases();
        let files = releases
            .served()
            .files(RegistryFiles::from_dir(&self.dir)?)?;
        let registry = verify_registry(&files, &external_policy())?;
        if releases.active(&registry).is_none() {
            return Err(ReloadError::NoActiveRelease(releases.served().to_string()));
        }
        for (id, held) in releases.snapshot().releases() {
            let Some(found) = registry.release(id) else {
                return Err(ReloadError::ReleaseRemoved(id.to_string()));
            };
            if found.manifest_sha256() != held.manifest_sha256() {
                return Err(ReloadError::ReleaseRewritten {
                    release: id.to_string(),
                    held: held.manifest_sha256().to_string(),
                    found: found.manifest_sha256().to_string(),
                });
            }
        }
        Ok(registry)
    }

    /// Re-reads the folder if it changed (or when `force`d), swapping the registry in when it
    /// verifies. Returns whether a new registry is in use.
    pub fn reload(&mut self, force: bool) -> Result<bool, ReloadError> {
        let fingerprint = self.fingerprint();
        if !force && fingerprint == self.fingerprint {
            return Ok(false);
        }
        let span = tracing::debug_span!(
            target: rimthan_engine::TRACE_TARGET,
            "registry.reload",
            rimthan.release = tracing::field::Empty,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let _entered = span.enter();
        match self.load() {
            Ok(registry) => {
                // Remembered only on success, so a refused folder is retried every interval.
                self.fingerprint = fingerprint;
                let releases = self.server.engine().releases();
                let active = releases.active(&registry).map(|r| r.id().to_string());
                if let Some(active) = &active {
                    span.record("rimthan.release", active.as_str());
                }
                releases.replace(registry);
                tracing::info!(release = ?active, "registry reloaded");
                Ok(true)
            }
            Err(e) => {
                span.record("error.type", e.code());
                span.record("otel.status_code", "ERROR");
                let rewritten = matches!(e, ReloadError::ReleaseRewritten { .. });
                self.server.metrics().registry_reload_failure(rewritten);
                tracing::error!(error = %e, "registry reload refused; still serving the previous registry");
                Err(e)
            }
        }
    }

    /// Reloads on SIGHUP and every `interval` until the task is dropped.
    pub async fn run(mut self, interval: Duration) {
        self.fingerprint = self.fingerprint();
        let mut ticker = tokio::time::interval(interval);
        #[cfg(unix)]
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            #[cfg(unix)]
            let force = tokio::select! {
                _ = ticker.tick() => false,
                Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => true,
            };
            #[cfg(not(unix))]
            let force = {
                ticker.tick().await;
                false
            };
            let (reloader, _) = match tokio::task::spawn_blocking(move || {
                let result = self.reload(force);
                (self, result)
            })
            .await
            {
                Ok(done) => done,
                Err(e) => {
                    tracing::error!(error = %e, "registry reload task failed; reloading stops");
                    return;
                }
            };
            self = reloader;
        }
    }
}

/// Spawns a [`Reloader`] task, supervised: one that panics is counted and started again
/// (`crate::tasks`).
pub fn spawn(
    dir: PathBuf,
    server: RimthanServer,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let metrics = server.metrics().clone();
    crate::tasks::supervise("registry_reload", metrics, move || {
        Reloader::new(dir.clone(), server.clone()).run(interval)
    })
}

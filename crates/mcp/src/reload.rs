//! Live channels: re-read the registry folder on SIGHUP and on an interval, and switch the
//! active release without a restart. A registry that does not verify, or that lost a release a
//! session may be pinned to, is refused; the server keeps serving the previous one.

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
    /// The active channel names no release.
    #[error("channel {0} names no release in the reloaded registry")]
    NoActiveRelease(String),
    /// A release disappeared; sessions pinned to it would break.
    #[error("release {0} disappeared from the registry; releases are never removed")]
    ReleaseRemoved(String),
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

    /// What changes when a channel moves or a release is added: channels.json and the release
    /// folder names.
    fn fingerprint(&self) -> Option<Sha256Digest> {
        let mut material = std::fs::read(self.dir.join("channels.json")).unwrap_or_default();
        let mut names: Vec<_> = std::fs::read_dir(self.dir.join("releases"))
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        material.extend(names.join("\n").into_bytes());
        Some(Sha256Digest::of(&material))
    }

    fn load(&self) -> Result<VerifiedRegistry, ReloadError> {
        let registry = verify_registry(&RegistryFiles::from_dir(&self.dir)?, &external_policy())?;
        let releases = self.server.engine().releases();
        let channel = releases.active_channel();
        if registry.channel(channel).is_none() {
            return Err(ReloadError::NoActiveRelease(channel.to_string()));
        }
        if let Some(gone) = releases
            .snapshot()
            .releases()
            .keys()
            .find(|id| registry.release(id).is_none())
        {
            return Err(ReloadError::ReleaseRemoved(gone.to_string()));
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
        self.fingerprint = fingerprint;
        match self.load() {
            Ok(registry) => {
                let releases = self.server.engine().releases();
                let active = registry
                    .channel(releases.active_channel())
                    .map(|r| r.id().to_string());
                releases.replace(registry);
                tracing::info!(release = ?active, "registry reloaded");
                Ok(true)
            }
            Err(e) => {
                self.server.metrics().registry_reload_failure();
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
            let _ = self.reload(force);
        }
    }
}

/// Convenience: spawns a [`Reloader`] task.
pub fn spawn(
    dir: PathBuf,
    server: RimthanServer,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(Reloader::new(dir, server).run(interval))
}

//! The registry the engine serves from, swappable at run time when channels move.

use std::sync::{Arc, RwLock};

use rimthan_registry::{
    ChannelName, RegistryError, RegistryFiles, ReleaseId, VerifiedRegistry, VerifiedRelease,
    with_draft,
};

/// What new sessions start from when they name neither a release nor a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// The release a channel points at, following the channel as it moves.
    Channel(ChannelName),
    /// One release the operator named (`serve --release`): a draft is served only this way.
    Release(ReleaseId),
}

impl Serving {
    /// A registry folder's files as a server serving this reads them: a release named by id
    /// may be a draft, read in its place (`with_draft`); a channel never names one.
    pub fn files(&self, files: RegistryFiles) -> Result<RegistryFiles, RegistryError> {
        match self {
            Serving::Release(release) => with_draft(&files, release),
            Serving::Channel(_) => Ok(files),
        }
    }
}

impl std::fmt::Display for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Serving::Channel(channel) => write!(f, "channel {channel}"),
            Serving::Release(release) => write!(f, "release {release}"),
        }
    }
}

/// The verified registry in use and what new sessions start from.
#[derive(Debug)]
pub struct Releases {
    current: RwLock<Arc<VerifiedRegistry>>,
    serving: Serving,
}

impl Releases {
    /// Serves `registry`, starting new sessions from `active_channel`.
    pub fn new(registry: VerifiedRegistry, active_channel: ChannelName) -> Self {
        Self::serving(registry, Serving::Channel(active_channel))
    }

    /// Serves `registry`, starting new sessions from what `serving` names.
    pub fn serving(registry: VerifiedRegistry, serving: Serving) -> Self {
        Self {
            current: RwLock::new(Arc::new(registry)),
            serving,
        }
    }

    /// The registry now; callers keep the snapshot for the whole call.
    pub fn snapshot(&self) -> Arc<VerifiedRegistry> {
        self.current
            .read()
            .expect("registry lock is never poisoned")
            .clone()
    }

    /// Replaces the registry (a channel moved); sessions stay pinned to their release ids.
    pub fn replace(&self, registry: VerifiedRegistry) {
        *self
            .current
            .write()
            .expect("registry lock is never poisoned") = Arc::new(registry);
    }

    /// What new sessions start from.
    pub fn served(&self) -> &Serving {
        &self.serving
    }

    /// The channel new sessions start from, when a channel is served.
    pub fn active_channel(&self) -> Option<&ChannelName> {
        match &self.serving {
            Serving::Channel(channel) => Some(channel),
            Serving::Release(_) => None,
        }
    }

    /// The release new sessions start from in `registry`, if it holds it.
    pub fn active<'r>(&self, registry: &'r VerifiedRegistry) -> Option<&'r Arc<VerifiedRelease>> {
        match &self.serving {
            Serving::Channel(channel) => registry.channel(channel),
            Serving::Release(release) => registry.release(release),
        }
    }
}

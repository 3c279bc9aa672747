//! The registry the engine serves from, swappable at run time when channels move.

use std::sync::{Arc, RwLock};

use rimthan_registry::{ChannelName, VerifiedRegistry};

/// The verified registry in use and the channel new sessions start from.
#[derive(Debug)]
pub struct Releases {
    current: RwLock<Arc<VerifiedRegistry>>,
    active_channel: ChannelName,
}

impl Releases {
    /// Serves `registry`, starting new sessions from `active_channel`.
    pub fn new(registry: VerifiedRegistry, active_channel: ChannelName) -> Self {
        Self {
            current: RwLock::new(Arc::new(registry)),
            active_channel,
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

    /// The channel new sessions start from.
    pub fn active_channel(&self) -> &ChannelName {
        &self.active_channel
    }
}

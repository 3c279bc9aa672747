//! A cap on concurrent 2025-11-25 HTTP sessions. rmcp keeps every session (a worker task and its
//! buffers) until it idles out; without a cap, a flood of `initialize` calls that never come back
//! grows memory without bound. 2026-07-28 requests are stateless and never count.

use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::streamable_http_server::session::{
        ServerSseMessage, SessionId, SessionManager,
        local::{LocalSessionManager, LocalSessionManagerError},
    },
};

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BoundedSessionError {
    /// The cap is reached; the client may retry later or use the 2026-07-28 revision.
    #[error("too many open sessions ({0}); retry later")]
    Full(usize),
    /// The underlying manager failed.
    #[error(transparent)]
    Inner(#[from] LocalSessionManagerError),
}

/// rmcp's local session manager with a maximum number of open sessions.
#[derive(Debug)]
pub(crate) struct BoundedSessionManager {
    inner: LocalSessionManager,
    max_sessions: usize,
}

impl BoundedSessionManager {
    /// At most `max_sessions` open sessions.
    pub(crate) fn new(max_sessions: usize) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            max_sessions,
        }
    }
}

impl SessionManager for BoundedSessionManager {
    type Error = BoundedSessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if self.inner.sessions.read().await.len() >= self.max_sessions {
            tracing::warn!(
                max = self.max_sessions,
                "session cap reached; refusing a new session"
            );
            return Err(BoundedSessionError::Full(self.max_sessions));
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>
    {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>
    {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>
    {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

//! Accepting and reaping connections (`docs/operations/deploy.md`, "Connections").
//!
//! `axum::serve` sets no timer, so a client that opens a socket and sends nothing holds a
//! descriptor for good. Here every connection is served by hyper's HTTP/1 server with its
//! header-read timer (which runs while a request head is awaited: on a fresh connection and
//! between keep-alive requests, so it also closes idle keep-alive connections), a no-progress
//! timer on the socket (a client that stops reading its answer), and a permit from a cap kept
//! below the process's descriptor limit. Shutdown stops accepting, lets open requests finish
//! for at most a grace period, then drops whatever is left.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::Router;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
    task::JoinSet,
    time::{Instant, Sleep},
};

/// Descriptors kept free for everything that is not a client connection: the listener, the
/// store's pool, registry files read on reload, logs.
pub const DESCRIPTOR_HEADROOM: u64 = 128;

/// Most bytes hyper buffers per connection, to read a request head or pass on body chunks (its
/// default, about 400 KiB, would let every connection streaming a body hold that much before any
/// caller is authenticated). A request head larger than this gets 431.
pub const CONNECTION_BUFFER_BYTES: usize = 64 * 1024;

/// How connections are accepted, timed and ended.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Most connections served at once; further clients wait in the listen backlog. Held
    /// below the descriptor limit by [`DESCRIPTOR_HEADROOM`] whatever is asked.
    pub max_connections: usize,
    /// How long a connection may take to deliver a complete request head, counted from when
    /// it opens or its previous answer ended (so idle keep-alive connections close too).
    pub header_timeout: Duration,
    /// How long a connection may go with no byte moving either way while the server waits on
    /// it (a client that stopped reading its answer, a stalled stream).
    pub idle_timeout: Duration,
    /// How long shutdown waits for open requests before dropping their connections.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The process's soft limit on open descriptors, where the platform says.
fn descriptor_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl ConnectionLimits {
    /// The cap actually applied: `max_connections`, held below the descriptor limit.
    pub fn effective_max_connections(&self) -> usize {
        let wanted = self.max_connections.max(1);
        match descriptor_limit() {
            Some(limit) => {
                let room = usize::try_from(limit.saturating_sub(DESCRIPTOR_HEADROOM).max(1))
                    .unwrap_or(usize::MAX);
                wanted.min(room)
            }
            None => wanted,
        }
    }
}

/// Serves `app` on `listener` under `limits` until `shutdown` resolves, then ends as the
/// module documentation says; `on_shutdown` runs once accepting stops (it ends open streams).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_shutdown: impl FnOnce(),
) -> io::Result<()> {
    let cap = limits.effective_max_connections();
    if cap < limits.max_connections {
        tracing::warn!(
            asked = limits.max_connections,
            cap,
            descriptor_limit = ?descriptor_limit(),
            "connection cap lowered to fit the descriptor limit; raise `ulimit -n` to serve more"
        );
    }
    let permits = Arc::new(Semaphore::new(cap));
    let graceful = GracefulShutdown::new();
    let mut tasks = JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(CONNECTION_BUFFER_BYTES);
    tokio::pin!(shutdown);
    loop {
        while tasks.try_join_next().is_some() {}
        // A permit first: at the cap, new clients wait in the backlog rather than being
        // accepted into a process that has no descriptor to spare.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Small JSON-RPC replies must not wait for Nagle's algorithm.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
        let io = TokioIo::new(Idle::new(tcp, limits.idle_timeout));
        // Each request carries its connection's address, which failed credentials count by.
        let peer = peer.ip();
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            app.clone(),
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                let client = crate::throttle::Peer::of(peer, request.headers());
                request.extensions_mut().insert(client);
                request
            },
        ));
        let connection = graceful.watch(http.serve_connection(io, service));
        tasks.spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended");
            }
            drop(permit);
        });
    }
    drop(listener);
    on_shutdown();
    let open = graceful.count();
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            open,
            grace = ?limits.shutdown_grace,
            "connections still open after the shutdown grace period; closing them"
        );
    }
    tasks.shutdown().await;
    Ok(())
}

/// An accept error: a client that went away before it was accepted is nothing; running out
/// of descriptors or memory is logged and waited out, as the connections that hold them are
/// reaped by their timers.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed; retrying shortly");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A socket that fails with `TimedOut` once no byte has moved either way for `timeout` while
/// it is being waited on. The timer is re-armed lazily: progress only records the time.
struct Idle {
    io: TcpStream,
    timeout: Duration,
    last_progress: Instant,
    timer: Pin<Box<Sleep>>,
}

impl Idle {
    fn new(io: TcpStream, timeout: Duration) -> Self {
        let now = Instant::now();
        Self {
            io,
            timeout,
            last_progress: now,
            timer: Box::pin(tokio::time::sleep_until(now + timeout)),
        }
    }

    /// After the socket answered `Pending`: whether the connection has now been idle too long
    /// (the timer is registered with `cx` either way).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            let deadline = self.last_progress + self.timeout;
            if self.timer.deadline() != deadline {
                self.timer.as_mut().reset(deadline);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            if Instant::now() >= self.last_progress + self.timeout {
                return true;
            }
        }
    }

    /// What an I/O poll of the socket answered, as this connection answers it: a finished
    /// operation is progress; a pending one past the idle deadline is `TimedOut`.
    fn track<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.last_progress = Instant::now();
                Poll::Ready(result)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Idle {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_read(cx, buf);
        this.track(cx, poll)
    }
}

impl AsyncWrite for Idle {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        this.track(cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.track(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

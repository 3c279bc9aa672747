//! A fault-injecting TCP proxy the tests own, on loopback: between a harness and the server it
//! drops replies after the server answered, cuts requests mid-body and delays bytes, each at a
//! seeded rate per chunk, and counts what it did.

#![allow(unreachable_pub)]

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

/// Rates per forwarded chunk, between 0 and 1.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// A chunk of the server's answer is discarded and the connection closed: the server
    /// did the work, the client never hears of it.
    pub drop_reply: f64,
    /// Only part of a chunk of the request reaches the server, then the connection closes.
    pub cut_request: f64,
    /// A chunk waits up to `max_delay` before it is forwarded.
    pub delay: f64,
    /// The longest delay.
    pub max_delay: Duration,
}

/// What the proxy did.
#[derive(Debug, Default)]
pub struct Counts {
    pub connections: AtomicU64,
    pub dropped_replies: AtomicU64,
    pub cut_requests: AtomicU64,
    pub delayed_chunks: AtomicU64,
}

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// SplitMix64: a small deterministic generator, so a failing run can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    fn roll(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Proxies loopback connections to `upstream` with `faults`, seeded by `seed`.
pub async fn start(upstream: SocketAddr, faults: Faults, seed: u64) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let shared = counts.clone();
    let task = tokio::spawn(async move {
        let mut n = 0u64;
        while let Ok((client, _)) = listener.accept().await {
            n += 1;
            shared.connections.fetch_add(1, Ordering::Relaxed);
            let counts = shared.clone();
            let seed = seed ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d);
            tokio::spawn(async move {
                if let Ok(server) = TcpStream::connect(upstream).await {
                    connection(client, server, faults, seed, counts).await;
                }
            });
        }
    });
    Proxy { addr, counts, task }
}

#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The sender closed its side; the other direction may go on.
    Eof,
    /// A fault ended the connection: both sides close at once.
    Fault,
}

async fn connection(
    client: TcpStream,
    server: TcpStream,
    faults: Faults,
    seed: u64,
    counts: Arc<Counts>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        client_read,
        server_write,
        Direction::Request,
        faults,
        Rng(seed),
        counts.clone(),
    );
    let down = pump(
        server_read,
        client_write,
        Direction::Reply,
        faults,
        Rng(seed.rotate_left(17)),
        counts,
    );
    tokio::pin!(up, down);
    // Returning drops every half, which closes both sockets.
    tokio::select! {
        ended = &mut up => if ended == Ended::Eof { down.await; },
        ended = &mut down => if ended == Ended::Eof { up.await; },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    direction: Direction,
    faults: Faults,
    mut rng: Rng,
    counts: Arc<Counts>,
) -> Ended {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return Ended::Eof;
            }
            Ok(n) => n,
        };
        if rng.roll(faults.delay) {
            counts.delayed_chunks.fetch_add(1, Ordering::Relaxed);
            let millis = rng.below(faults.max_delay.as_millis() as u64) + 1;
            tokio::time::sleep(Duration::from_millis(millis)).await;
        }
        match direction {
            Direction::Reply if rng.roll(faults.drop_reply) => {
                counts.dropped_replies.fetch_add(1, Ordering::Relaxed);
                return Ended::Fault;
            }
            Direction::Request if rng.roll(faults.cut_request) => {
                counts.cut_requests.fetch_add(1, Ordering::Relaxed);
                let part = rng.below(n as u64) as usize;
                let _ = to.write_all(&buf[..part]).await;
                return Ended::Fault;
            }
            _ => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return Ended::Fault;
        }
    }
}

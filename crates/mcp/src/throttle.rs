//! Failed credentials, limited per client address (`docs/operations/deploy.md` §2, "Refused
//! tokens"). A bearer token or `/admin` sign-in that the server refuses counts against the
//! address it came from; past the allowance the address is answered `429 Too Many Requests`
//! with `Retry-After` *before* any token it sends is checked, so a guess made while blocked can
//! not succeed. Each block in a row lasts twice the one before, up to a ceiling.
//!
//! The count is governor's GCRA, keyed by address: an IPv6 address counts by its /64, the
//! smallest block one client is usually given, so rotating addresses within it gains nothing.
//! Both maps are bounded: the limiter forgets addresses whose allowance has refilled, and the
//! blocked set holds at most `MAX_BLOCKED` addresses.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv6Addr},
    num::NonZeroU32,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock as _, clock::DefaultClock,
};

/// The client address a request is counted by, set on every request by the HTTP server
/// (`crate::conn`): the connection's address, or, when that is a proxy on this machine
/// (loopback), the last address its `X-Forwarded-For` names, which that proxy appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

impl Peer {
    /// The client behind a connection from `connection` carrying `headers`.
    pub fn of(connection: IpAddr, headers: &axum::http::HeaderMap) -> Self {
        if connection.is_loopback()
            && let Some(forwarded) = headers
                .get_all("x-forwarded-for")
                .iter()
                .next_back()
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.rsplit(',').next())
                .and_then(|a| a.trim().parse::<IpAddr>().ok())
        {
            return Self(forwarded);
        }
        Self(connection)
    }
}

/// Failures an address may make at once before it is blocked.
pub const FAILURE_BURST: u32 = 10;
/// One more failure is allowed per this interval once the burst is spent.
pub const FAILURE_REFILL: Duration = Duration::from_secs(6);
/// The longest one block lasts, however many came before it.
pub const MAX_BLOCK: Duration = Duration::from_secs(15 * 60);
/// Addresses tracked (limiter) or blocked at once.
const MAX_BLOCKED: usize = 65_536;

/// A blocked address: until when, and how many blocks in a row it has had.
#[derive(Debug, Clone, Copy)]
struct Block {
    until: Instant,
    strikes: u32,
}

/// Failed-credential limits for one server: shared by `/mcp` and `/admin`.
#[derive(Debug)]
pub struct Throttle {
    failures: DefaultKeyedRateLimiter<IpAddr>,
    blocked: Mutex<HashMap<IpAddr, Block>>,
    refused: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        let burst = NonZeroU32::new(FAILURE_BURST).expect("the burst is not zero");
        let quota = Quota::with_period(FAILURE_REFILL)
            .expect("the refill interval is not zero")
            .allow_burst(burst);
        Self {
            failures: RateLimiter::hashmap(quota),
            blocked: Mutex::default(),
            refused: AtomicU64::new(0),
        }
    }
}

impl Throttle {
    /// How long `peer` must wait before its next credential is checked; `None` when it may try
    /// now. A refusal counts in `refused`.
    pub fn blocked(&self, peer: IpAddr) -> Option<Duration> {
        let key = key(peer);
        let now = Instant::now();
        let blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        let wait = blocked
            .get(&key)
            .and_then(|b| b.until.checked_duration_since(now))
            .filter(|wait| !wait.is_zero());
        if wait.is_some() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        wait
    }

    /// Counts a refused credential from `peer`; when it spends the address's allowance, the
    /// address is blocked and the wait is returned (and counted in `refused`).
    pub fn failed(&self, peer: IpAddr) -> Option<Duration> {
        let key = key(peer);
        if self.failures.len() > MAX_BLOCKED {
            self.failures.retain_recent();
        }
        let refill = match self.failures.check_key(&key) {
            Ok(()) => return None,
            Err(not_until) => not_until.wait_time_from(DefaultClock::default().now()),
        };
        let now = Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        if blocked.len() >= MAX_BLOCKED {
            // Blocks long over are forgotten first; a full set of live ones loses one.
            blocked.retain(|_, b| b.until + MAX_BLOCK > now);
            if blocked.len() >= MAX_BLOCKED
                && let Some(any) = blocked.keys().next().copied()
            {
                blocked.remove(&any);
            }
        }
        // A block that ended long ago starts the doubling over.
        let strikes = blocked
            .get(&key)
            .filter(|b| b.until + MAX_BLOCK > now)
            .map_or(0, |b| b.strikes.saturating_add(1));
        let wait = refill
            .max(FAILURE_REFILL)
            .saturating_mul(1 << strikes.min(16))
            .min(MAX_BLOCK);
        blocked.insert(
            key,
            Block {
                until: now + wait,
                strikes,
            },
        );
        self.refused.fetch_add(1, Ordering::Relaxed);
        Some(wait)
    }

    /// Credentials refused with 429 since start (`rimthan_auth_throttled_total`).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The address a client is counted by: IPv4 as is (an IPv4-mapped IPv6 address as its IPv4),
/// IPv6 by its /64.
fn key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Seconds for a `Retry-After` header: whole seconds, rounded up, at least one.
pub(crate) fn retry_after(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_proxy_names_the_client_and_nobody_else_can() {
        let mut headers = axum::http::HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            "203.0.113.9, 198.51.100.4".parse().unwrap(),
        );
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let remote: IpAddr = "192.0.2.5".parse().unwrap();
        assert_eq!(
            Peer::of(local, &headers).0,
            "198.51.100.4".parse::<IpAddr>().unwrap()
        );
        assert_eq!(Peer::of(remote, &headers).0, remote);
        assert_eq!(Peer::of(local, &axum::http::HeaderMap::new()).0, local);
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(key(a), key(b));
        assert_ne!(key(a), key(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn the_burst_is_allowed_then_blocks_double_up_to_the_ceiling() {
        let throttle = Throttle::default();
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..FAILURE_BURST {
            assert_eq!(throttle.failed(peer), None);
        }
        let first = throttle.failed(peer).expect("past the burst");
        assert!(
            first >= FAILURE_REFILL / 2 && first <= FAILURE_REFILL,
            "{first:?}"
        );
        assert!(throttle.blocked(peer).is_some());
        let second = throttle.failed(peer).expect("still past it");
        assert!(
            second >= first * 2 - Duration::from_millis(100),
            "{second:?}"
        );
        assert!(throttle.blocked("192.0.2.2".parse().unwrap()).is_none());
        for _ in 0..20 {
            throttle.failed(peer);
        }
        assert!(throttle.blocked(peer).unwrap() <= MAX_BLOCK);
        assert!(throttle.refused() >= 23);
    }
}

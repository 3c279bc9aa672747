//! Sign-ins to `/admin` from a browser. The login form checks a person's bearer token once;
//! the cookie then carries a random handle this process keeps beside that token, never the
//! token itself, so a cookie that leaks (a log, a shared machine) is worth at most one sign-in
//! that ends: at `Sign out`, after [`IDLE`] without a request, or when the process restarts
//! (the form tokens' key is drawn per process too, so a restart signs everyone out either way).
//! A handle this process did not issue, or one that ended, is refused like a forged one.
//!
//! Handles live in memory, bounded in number; a deployment of several replicas routes a
//! browser to one replica (sticky sessions) or signs in again where it lands.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

/// How long a sign-in lasts without a request.
pub(crate) const IDLE: Duration = Duration::from_secs(8 * 60 * 60);

/// The most sign-ins kept at once; the least recently used one makes room for a new one.
const MAX_SIGN_INS: usize = 10_000;

/// The open sign-ins, by handle.
#[derive(Default)]
pub(crate) struct Logins {
    open: Mutex<HashMap<String, Login>>,
}

struct Login {
    token: String,
    seen: Instant,
}

impl Logins {
    /// Opens a sign-in for `token` (already verified) and returns its handle.
    pub(crate) fn open(&self, token: &str) -> String {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the operating system's random source works");
        let handle = hex::encode(bytes);
        let now = Instant::now();
        let mut open = self.open.lock().expect("no sign-in operation panics");
        open.retain(|_, login| now.duration_since(login.seen) < IDLE);
        if open.len() >= MAX_SIGN_INS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, login)| login.seen)
                .map(|(handle, _)| handle.clone())
        {
            open.remove(&oldest);
        }
        open.insert(
            handle.clone(),
            Login {
                token: token.to_owned(),
                seen: now,
            },
        );
        handle
    }

    /// The token behind an open sign-in, which this request keeps open; `None` for a handle
    /// that was never issued here or has ended.
    pub(crate) fn token(&self, handle: &str) -> Option<String> {
        let now = Instant::now();
        let mut open = self.open.lock().expect("no sign-in operation panics");
        match open.get_mut(handle) {
            Some(login) if now.duration_since(login.seen) < IDLE => {
                login.seen = now;
                Some(login.token.clone())
            }
            Some(_) => {
                open.remove(handle);
                None
            }
            None => None,
        }
    }

    /// Ends a sign-in.
    pub(crate) fn close(&self, handle: &str) {
        self.open
            .lock()
            .expect("no sign-in operation panics")
            .remove(handle);
    }
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Logins(..)")
    }
}

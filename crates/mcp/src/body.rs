//! Request bodies, read whole before anything handles them and bounded twice: per request
//! (`max_bytes`, else 413; `timeout`, else 408) and across every request in flight (a budget of
//! bytes, else 503). The budget is what bounds the server's memory, whatever the connection cap
//! (`docs/operations/deploy.md`, "Memory"): each chunk takes its bytes from the budget before it
//! is kept; once the body is whole, it takes what parsing it will cost too (rmcp holds a JSON
//! message as several trees at once, about a hundred bytes for every value however short its
//! text: `[0,0,…]` costs some fifty times its size), and a request holds all of it until its
//! answer is ready. When the budget is spent the request is refused at once with 503 and
//! `Retry-After` rather than queued: a wait would let requests that each hold part of the budget
//! stall one another until their timeouts.

use std::{sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes, HttpBody as _},
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use futures::StreamExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Seconds a client refused for want of budget is asked to wait.
const RETRY_AFTER_SECONDS: &str = "1";

/// What handling a body costs per byte of its text, beyond the byte itself: the copies rmcp and
/// the handlers make of it (measured: `docs/operations/deploy.md`, "Memory").
const COPIES_PER_BYTE: usize = 4;

/// What handling a body costs per JSON value it holds, however short its text.
const BYTES_PER_VALUE: usize = 128;

/// How many values a JSON text holds, counted from above without parsing it: one, and one more
/// for every `[`, `{`, `,` and `:` outside a string. Any text has a count; only JSON is parsed.
fn values(body: &[u8]) -> usize {
    let (mut count, mut in_string, mut escaped) = (1usize, false, false);
    for &byte in body {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' | b',' | b':' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// How request bodies are read: per-request limits and the budget they all share.
#[derive(Debug, Clone)]
pub(crate) struct Bodies {
    timeout: Duration,
    max_bytes: usize,
    budget: Arc<Semaphore>,
    budget_bytes: usize,
}

impl Bodies {
    /// Bodies of at most `max_bytes`, complete within `timeout`, all in flight together at most
    /// `budget_bytes` (never below `max_bytes`, so a body the limit allows can be read).
    pub(crate) fn new(timeout: Duration, max_bytes: usize, budget_bytes: usize) -> Self {
        // One acquisition takes at most `u32::MAX` permits.
        let budget = budget_bytes.max(max_bytes).min(u32::MAX as usize);
        Self {
            timeout,
            max_bytes,
            budget: Arc::new(Semaphore::new(budget)),
            budget_bytes: budget,
        }
    }

    /// What handling `body` will cost from the budget, the bytes it holds included; never more
    /// than the whole budget, so any body the limit accepts can be handled alone.
    fn cost(&self, body: &[u8]) -> usize {
        let copies = body.len().saturating_mul(1 + COPIES_PER_BYTE);
        let values = values(body).saturating_mul(BYTES_PER_VALUE);
        copies.saturating_add(values).min(self.budget_bytes)
    }

    /// `bytes` more from the budget, added to `held`; `false` when the budget cannot spare them.
    fn take(&self, held: &mut Option<OwnedSemaphorePermit>, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(bytes) else {
            return false;
        };
        let Ok(permit) = self.budget.clone().try_acquire_many_owned(n) else {
            return false;
        };
        match held {
            Some(held) => held.merge(permit),
            None => *held = Some(permit),
        }
        true
    }

    /// Answers `response` to a request whose body is left unread: what is left of it is read
    /// and discarded (never kept) for at most the body timeout and four times the body limit,
    /// since many clients send their whole body before they read an answer, and closing on
    /// unread bytes would reset the connection and lose the answer on its way to them.
    pub(crate) fn refuse(&self, body: Body, mut response: Response) -> Response {
        if body.is_end_stream() {
            return response;
        }
        tokio::spawn(drain(body, self.timeout, self.max_bytes.saturating_mul(4)));
        // The unread rest of the body makes the connection unusable for another request.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    }
}

async fn drain(body: Body, timeout: Duration, budget: usize) {
    let mut stream = body.into_data_stream();
    let _ = tokio::time::timeout(timeout, async {
        let mut seen = 0usize;
        while let Some(Ok(chunk)) = stream.next().await {
            seen += chunk.len();
            if seen > budget {
                break;
            }
        }
    })
    .await;
}

/// Why a body was not read whole.
enum Refusal {
    TooSlow,
    TooLarge,
    Busy,
    Unreadable,
}

impl Refusal {
    fn response(&self) -> Response {
        match self {
            Self::TooSlow => {
                (StatusCode::REQUEST_TIMEOUT, "request body too slow\n").into_response()
            }
            Self::TooLarge => {
                (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response()
            }
            Self::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, RETRY_AFTER_SECONDS)],
                "server busy: too many request bytes in flight; retry shortly\n",
            )
                .into_response(),
            Self::Unreadable => {
                (StatusCode::BAD_REQUEST, "unreadable request body\n").into_response()
            }
        }
    }
}

/// Reads `stream` whole into one buffer, taking each chunk's bytes from the budget first.
async fn collect(
    bodies: &Bodies,
    stream: &mut axum::body::BodyDataStream,
    declared: Option<usize>,
    held: &mut Option<OwnedSemaphorePermit>,
) -> Result<Bytes, Refusal> {
    // Reserved address space only: pages become resident as chunks are written into them.
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| Refusal::Unreadable)?;
        let len = buffer.len() + chunk.len();
        if len > bodies.max_bytes {
            return Err(Refusal::TooLarge);
        }
        // Without a declared length the buffer grows by doubling: the budget pays for the
        // capacity, not only the bytes written.
        let capacity = if len <= buffer.capacity() {
            buffer.capacity()
        } else {
            len.max(buffer.capacity() * 2).min(bodies.max_bytes)
        };
        let paid = held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
        let owed = if declared.is_some() { len } else { capacity };
        if !bodies.take(held, owed.saturating_sub(paid)) {
            return Err(Refusal::Busy);
        }
        buffer.reserve_exact(capacity - buffer.len());
        buffer.extend_from_slice(&chunk);
    }
    let paid = held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
    if !bodies.take(held, bodies.cost(&buffer).saturating_sub(paid)) {
        return Err(Refusal::Busy);
    }
    Ok(Bytes::from(buffer))
}

/// Middleware: the body read whole within its limits, then the request handled with its bytes
/// held from the budget until the answer is ready.
pub(crate) async fn read_body(
    State(bodies): State<Bodies>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (parts, body) = request.into_parts();
    // A declared length over the limit is refused before a byte of the body is awaited.
    if declared.is_some_and(|n| n > bodies.max_bytes as u64) {
        return bodies.refuse(body, Refusal::TooLarge.response());
    }
    let declared = declared.and_then(|n| usize::try_from(n).ok());
    let mut held = None;
    let mut stream = body.into_data_stream();
    let read = collect(&bodies, &mut stream, declared, &mut held);
    let bytes = match tokio::time::timeout(bodies.timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(refusal)) => {
            drop(held);
            let rest = Body::from_stream(stream);
            return bodies.refuse(rest, refusal.response());
        }
        Err(_) => {
            drop(held);
            return Refusal::TooSlow.response();
        }
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    drop(held);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_outside_strings_only() {
        assert_eq!(values(b"7"), 1);
        assert_eq!(values(b"[0,0,0]"), 4);
        // Five values, counted as six: a closed `[]` or `{}` counts one too many.
        assert_eq!(values(br#"{"a":1,"b":[]}"#), 6);
        assert_eq!(values(br#"["a,b:[{", "\",:"]"#), 3);
    }

    #[test]
    fn a_body_costs_its_copies_and_values_but_never_more_than_the_budget() {
        let bodies = Bodies::new(Duration::from_secs(1), 1024, 4096);
        assert_eq!(bodies.cost(b"\"abc\""), 5 * 5 + BYTES_PER_VALUE);
        assert_eq!(bodies.cost(&[b','; 1000]), 4096);
    }
}

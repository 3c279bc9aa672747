//! Delivering webhook events (`docs/operations/deploy.md`, Webhooks) as the Standard Webhooks
//! specification lays them out: a JSON POST with `webhook-id` (the same on every retry, for the
//! receiver to deduplicate by), `webhook-timestamp` (Unix seconds of this attempt) and
//! `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the
//! `whsec_` secret). The events wait in the store's outbox, written with the change that caused
//! them, so a receiver that is down or slow delays no tool call and loses nothing: every replica
//! leases due rows, attempts them concurrently, and records each end. A 2xx delivers; anything
//! else (a redirect, which is never followed; a 4xx or 5xx; a timeout; a reset) is retried with
//! exponential backoff and jitter until a day after the event, then kept as failed.

use std::{str::FromStr, sync::Arc, time::Duration};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use rimthan_engine::{DeliveryOutcome, Engine, WebhookDelivery, store::Store};
use sha2::Sha256;
use tracing::Instrument as _;

use crate::metrics::Metrics;

/// How long one attempt may take, the response read included.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after an event it is retried before it is kept as failed.
pub const GIVE_UP_AFTER_SECONDS: i64 = 24 * 3600;
/// The most of a receiver's answer read (and dropped).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Deliveries one pass leases and attempts at once.
const BATCH: u32 = 16;
/// How long a lease lasts: past every attempt of a batch, which run at once.
const LEASE_SECONDS: i64 = 60;
/// How often the outbox is looked at when the last pass found nothing to do.
const POLL: Duration = Duration::from_secs(1);
/// The first retry's wait; each next one doubles, up to [`MAX_BACKOFF_SECONDS`].
const FIRST_BACKOFF_SECONDS: i64 = 5;
const MAX_BACKOFF_SECONDS: i64 = 3600;

/// A `whsec_` secret: its bytes, as the receiver's Standard Webhooks library reads it.
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

impl FromStr for WebhookSecret {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let encoded = text.trim().strip_prefix("whsec_").ok_or(
            "a webhook secret starts with whsec_ followed by base64 (as `openssl rand -base64 32` \
             prints it)",
        )?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("the part after whsec_ is not base64: {e}"))?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(format!(
                "the secret is {} bytes; use 24 to 64 random bytes",
                bytes.len()
            ));
        }
        Ok(Self(bytes))
    }
}

impl WebhookSecret {
    /// `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
        let signature =
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        format!("v1,{signature}")
    }
}

type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// Delivers the outbox's events for one server.
#[derive(Debug)]
pub struct Webhooks {
    secret: WebhookSecret,
    client: Client,
}

impl Webhooks {
    /// A sender signing with `secret`.
    pub fn new(secret: WebhookSecret) -> Result<Self, String> {
        Ok(Self {
            secret,
            client: crate::oidc::http_client()?,
        })
    }

    /// Starts delivering on the current runtime, supervised: a pass every second, or at once
    /// after a full one.
    pub fn spawn(self: Arc<Self>, engine: Arc<Engine>, metrics: Arc<Metrics>) {
        let counted = metrics.clone();
        crate::tasks::supervise("webhooks", metrics, move || {
            let (webhooks, engine, metrics) = (self.clone(), engine.clone(), counted.clone());
            async move {
                loop {
                    match webhooks.pass(&engine, &metrics).await {
                        Ok(claimed) if claimed == BATCH as usize => continue,
                        Ok(_) => {}
                        Err(e) => {
                            metrics.background_task_failure("webhooks");
                            tracing::error!(error = %e, "reading the webhook outbox failed; retrying");
                        }
                    }
                    tokio::time::sleep(POLL).await;
                }
            }
        });
    }

    /// Leases the due deliveries and attempts them at once; how many it leased.
    async fn pass(&self, engine: &Engine, metrics: &Metrics) -> Result<usize, String> {
        let now = now();
        let store = engine.store();
        let due = store
            .claim_deliveries(now, now + LEASE_SECONDS, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        let attempts = due.iter().map(|delivery| {
            // A root span per attempt (docs/operations/tracing.md): no request waits on it.
            let span = tracing::debug_span!(
                target: rimthan_engine::TRACE_TARGET,
                parent: None,
                "webhook.deliver",
                otel.kind = "client",
                rimthan.webhook.event_id = delivery.event_id.as_str(),
                rimthan.webhook.outcome = tracing::field::Empty,
            );
            self.deliver(delivery, store, metrics).instrument(span)
        });
        futures::future::join_all(attempts).await;
        Ok(due.len())
    }

    /// Attempts one delivery and records how it ended.
    async fn deliver(&self, delivery: &WebhookDelivery, store: &Arc<dyn Store>, metrics: &Metrics) {
        let outcome = self.attempt(delivery).await;
        let ended = match outcome {
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Retry { .. } => "retried",
            DeliveryOutcome::Failed { .. } => "failed",
        };
        metrics.webhook_delivery(ended);
        tracing::Span::current().record("rimthan.webhook.outcome", ended);
        tracing::event!(
            target: rimthan_engine::TRACE_TARGET,
            tracing::Level::DEBUG,
            rimthan.webhook.outcome = ended,
            "webhook.delivery"
        );
        if let DeliveryOutcome::Failed { error } = &outcome {
            tracing::warn!(event = %delivery.event_id, endpoint = %delivery.endpoint, %error, "webhook given up on after a day of retries; it is kept as failed");
        }
        if let Err(e) = store.finish_delivery(delivery.id, &outcome).await {
            tracing::error!(event = %delivery.event_id, error = %e, "recording a webhook attempt failed; it is attempted again when its lease runs out");
        }
    }

    /// One attempt, and what follows from how it ended.
    async fn attempt(&self, delivery: &WebhookDelivery) -> DeliveryOutcome {
        let error = match self.post(delivery).await {
            Ok(()) => return DeliveryOutcome::Delivered,
            Err(error) => error,
        };
        let now = now();
        if now - delivery.created_at >= GIVE_UP_AFTER_SECONDS {
            DeliveryOutcome::Failed { error }
        } else {
            DeliveryOutcome::Retry {
                next_attempt_at: now + backoff(delivery.attempts),
                error,
            }
        }
    }

    async fn post(&self, delivery: &WebhookDelivery) -> Result<(), String> {
        let timestamp = now();
        let signature = self
            .secret
            .sign(&delivery.event_id, timestamp, &delivery.body);
        let request = hyper::Request::post(delivery.endpoint.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(
                hyper::header::USER_AGENT,
                concat!("rimthan/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", &delivery.event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(Full::new(Bytes::from(delivery.body.clone())))
            .map_err(|e| format!("the request could not be made: {e}"))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("no answer: {e}"))?;
            let status = response.status();
            // Read (a bounded part of) the answer, so the connection can be reused.
            let _ = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the receiver answered {status}"))
            }
        };
        tokio::time::timeout(ATTEMPT_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer within {}s", ATTEMPT_TIMEOUT.as_secs()))?
    }
}

/// The wait before the attempt after the `attempts`th: doubling from five seconds, at most an
/// hour, then up to a fifth more at random, so receivers coming back are not hit in step.
pub fn backoff(attempts: u32) -> i64 {
    let doubled = FIRST_BACKOFF_SECONDS
        .saturating_mul(1i64 << attempts.saturating_sub(1).min(20))
        .min(MAX_BACKOFF_SECONDS);
    let mut byte = [0u8; 1];
    let jitter = getrandom::fill(&mut byte).map_or(0, |()| doubled * i64::from(byte[0]) / 1275);
    doubled + jitter
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_whsec_and_base64_of_24_to_64_bytes() {
        let good = format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        );
        assert!(good.parse::<WebhookSecret>().is_ok());
        for bad in [
            "plain".to_owned(),
            "whsec_!!!".to_owned(),
            format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode([7u8; 8])
            ),
        ] {
            assert!(bad.parse::<WebhookSecret>().is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_doubles_to_an_hour_with_at_most_a_fifth_more() {
        for (attempts, base) in [(1, 5), (2, 10), (3, 20), (10, 2560), (11, 3600), (40, 3600)] {
            let wait = backoff(attempts);
            assert!(
                (base..=base + base / 5).contains(&wait),
                "{attempts}: {wait}"
            );
        }
    }
}

//! Webhook events as the outbox keeps them (`docs/operations/deploy.md`, Webhooks): what
//! happened to a session that someone outside it should hear of, written in the same
//! transaction as the change that caused it, and delivered by the server until the receiver
//! takes it. Bodies carry ids, statuses, times and links; never an output's text or a note.

use std::fmt;

/// What an event says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// A step waits for sign-off: who may decide, and the link to decide at.
    ApprovalRequested,
    /// The sign-off still waits, past its `remind_after`.
    ApprovalReminder,
    /// Someone approved, sent back or waived.
    ApprovalDecided,
    /// A step went back to `revise` by an approver or an expiry.
    StepSentBack,
    /// A sign-off or deadline expired and ended the session.
    SessionExpired,
    /// The session completed.
    SessionCompleted,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 6] = [
        EventKind::ApprovalRequested,
        EventKind::ApprovalReminder,
        EventKind::ApprovalDecided,
        EventKind::StepSentBack,
        EventKind::SessionExpired,
        EventKind::SessionCompleted,
    ];

    /// The event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ApprovalRequested => "approval.requested",
            EventKind::ApprovalReminder => "approval.reminder",
            EventKind::ApprovalDecided => "approval.decided",
            EventKind::StepSentBack => "step.sent_back",
            EventKind::SessionExpired => "session.expired",
            EventKind::SessionCompleted => "session.completed",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where events go: the receivers' URLs, and the origin `/admin` links are made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Each receiver gets every event.
    pub endpoints: Vec<String>,
    /// `https://host[:port]`, the server as people reach it.
    pub admin_origin: String,
}

/// One event for one receiver, to be written to the outbox with the change that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// `msg_` and 32 hex digits: the `webhook-id` of every attempt, for the receiver to
    /// deduplicate by.
    pub event_id: String,
    /// What happened.
    pub kind: EventKind,
    /// The receiver.
    pub endpoint: String,
    /// The session.
    pub session_id: String,
    /// The JSON body, as sent.
    pub body: String,
    /// Unix seconds it was written.
    pub created_at: i64,
}

/// A delivery claimed for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDelivery {
    /// The outbox row.
    pub id: i64,
    /// The `webhook-id`.
    pub event_id: String,
    /// The receiver.
    pub endpoint: String,
    /// The body.
    pub body: String,
    /// Attempts made, this one included.
    pub attempts: u32,
    /// Unix seconds the event was written.
    pub created_at: i64,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The receiver answered 2xx.
    Delivered,
    /// Try again at `next_attempt_at` (Unix seconds).
    Retry {
        /// When.
        next_attempt_at: i64,
        /// What went wrong, bounded.
        error: String,
    },
    /// Given up on; kept as failed.
    Failed {
        /// What went wrong last, bounded.
        error: String,
    },
}

/// How many deliveries are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxCounts {
    /// Waiting for an attempt (or a retry).
    pub pending: u64,
    /// Given up on.
    pub failed: u64,
}

/// One delivery as `/admin` and `rimthan sessions show` list it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeliveryRecord {
    /// The `webhook-id`.
    pub event_id: String,
    /// The event's `type`.
    pub event: String,
    /// The receiver.
    pub endpoint: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// What went wrong last, if anything did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

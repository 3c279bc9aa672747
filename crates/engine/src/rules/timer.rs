//! What a due timer does to a session (`docs/engine.md` §6.3): a sign-off's reminder or
//! expiry, or a step's deadline. Pure like every transition (`rules/transition.rs`): the caller
//! passes the time, and a timer whose state a decision or another replica already changed finds
//! nothing to do.

use rimthan_registry::OnExpiry;

use crate::{
    model::{
        audit::{AuditDecision, Operation},
        session::{Session, Status, TimerEvent, TimerKind},
    },
    rules::{
        transition::{deadline_of, server_finding},
        view::Pinned,
    },
};

/// What a due timer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The sign-off's deciders were reminded.
    Reminded,
    /// The sign-off expired undecided; the step went back, or the session ended.
    ApprovalExpired(OnExpiry),
    /// The step's deadline passed; it went back, or the session ended.
    DeadlinePassed(OnExpiry),
}

impl Fired {
    /// The operation its audit entry records.
    pub(crate) fn operation(self) -> Operation {
        match self {
            Fired::Reminded => Operation::RemindApproval,
            Fired::ApprovalExpired(_) => Operation::ExpireApproval,
            Fired::DeadlinePassed(_) => Operation::ExpireDeadline,
        }
    }
}

/// Fires the timer of `session` due at or before `now`, if one is (an expiry before a
/// reminder due with it): the session after it, what happened, and what its audit entry
/// records. `None` when nothing is due: a decision, a submission or another replica came
/// first, and the timer went with the state it belonged to (`docs/engine.md` §6.3).
pub(crate) fn fired(
    pinned: &Pinned<'_>,
    session: &Session,
    now: &str,
) -> Option<(Session, Fired, AuditDecision)> {
    let due = |at: Option<&str>| at.is_some_and(|at| at <= now);
    let mut next = session.clone();
    let (fired, step, note, due_at) = match (session.status, &session.approval, &session.deadline) {
        (Status::AwaitingApproval, Some(pending), _) if due(pending.expires_at.as_deref()) => {
            let on_expiry = pending.on_expiry.unwrap_or(OnExpiry::SendBack);
            let asked = pending.requested_at.as_deref().unwrap_or("earlier");
            let note = format!(
                "The sign-off of step {} asked for at {asked} expired undecided at {}.",
                pending.step,
                pending.expires_at.as_deref().unwrap_or(now)
            );
            match on_expiry {
                OnExpiry::SendBack => {
                    let pending = next.approval.take().expect("matched above");
                    next.sent_back_texts
                        .insert(pending.step.clone(), pending.texts);
                    next.status = Status::Revise;
                    next.revise_rounds += 1;
                    next.findings = vec![server_finding(format!(
                        "{note} Submit the step again for sign-off, and tell the participant \
                         whom to ask."
                    ))];
                    next.deadline = deadline_of(pinned.workflow, next.step_index, now);
                }
                OnExpiry::Fail => {
                    next.status = Status::Expired;
                    next.findings = vec![server_finding(format!(
                        "{note} The session has ended; start a new one to do the work again."
                    ))];
                }
            }
            let due_at = pending.expires_at.clone();
            (
                Fired::ApprovalExpired(on_expiry),
                pending.step.to_string(),
                note,
                due_at,
            )
        }
        (Status::AwaitingApproval, Some(pending), _) if due(pending.remind_at.as_deref()) => {
            let pending_next = next.approval.as_mut().expect("matched above");
            pending_next.remind_at = None;
            pending_next.reminded_at = Some(now.to_owned());
            let note = format!("The sign-off of step {} still waits.", pending.step);
            let due_at = pending.remind_at.clone();
            (Fired::Reminded, pending.step.to_string(), note, due_at)
        }
        (Status::Active | Status::Revise, _, Some(deadline)) if due(Some(&deadline.at)) => {
            let note = format!(
                "The deadline of step {} passed at {} before its work was submitted.",
                deadline.step, deadline.at
            );
            if let Some(plan) = next.plan.take() {
                next.retire(plan.id);
            }
            match deadline.on_expiry {
                OnExpiry::SendBack => {
                    next.status = Status::Revise;
                    next.revise_rounds += 1;
                    next.findings = vec![server_finding(format!(
                        "{note} Finish the step and submit it; the deadline starts again now."
                    ))];
                    next.deadline = deadline_of(pinned.workflow, next.step_index, now);
                }
                OnExpiry::Fail => {
                    next.status = Status::Expired;
                    next.deadline = None;
                    next.findings = vec![server_finding(format!(
                        "{note} The session has ended; start a new one to do the work again."
                    ))];
                }
            }
            let due_at = Some(deadline.at.clone());
            (
                Fired::DeadlinePassed(deadline.on_expiry),
                deadline.step.clone(),
                note,
                due_at,
            )
        }
        _ => return None,
    };
    let (timer, on_expiry) = match fired {
        Fired::Reminded => (TimerKind::Reminder, None),
        Fired::ApprovalExpired(on) => (TimerKind::SignoffExpired, Some(on)),
        Fired::DeadlinePassed(on) => (TimerKind::DeadlinePassed, Some(on)),
    };
    next.record_timer(TimerEvent {
        step: step.clone(),
        timer,
        due_at: due_at.unwrap_or_else(|| now.to_owned()),
        at: now.to_owned(),
        on_expiry,
    });
    // An identical retry of the harness's last call no longer describes the session.
    next.last_change = None;
    next.updated_at = now.to_owned();
    let record = AuditDecision {
        step,
        note: Some(note),
        ..AuditDecision::default()
    };
    Some((next, fired, record))
}

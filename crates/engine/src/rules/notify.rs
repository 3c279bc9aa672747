//! Which webhook events a change makes (`docs/operations/deploy.md`, Webhooks): read from the
//! session before and after it and the operation that made it, so every path that changes a
//! session (a submission, a decision, a timer) notifies the same way. Pure, like the transition
//! it follows; the event ids are the one thing drawn at random.

use rimthan_registry::VerifiedRelease;
use serde_json::{Value, json};

use crate::model::{
    audit::Operation,
    notify::{EventKind, Notice, NotifyConfig},
    session::{Session, SessionId, Status, unix_seconds},
};

/// The events `op` made by changing `before` into `after`, one per receiver, written at `now`.
pub(crate) fn notices(
    config: &NotifyConfig,
    release: &VerifiedRelease,
    before: &Session,
    after: &Session,
    op: Operation,
    by: Option<&str>,
    now: &str,
) -> Vec<Notice> {
    let mut kinds = Vec::new();
    let decided = matches!(
        op,
        Operation::ApproveStep | Operation::SendBackStep | Operation::WaiveFinding
    );
    if decided {
        kinds.push(EventKind::ApprovalDecided);
    }
    if op == Operation::RemindApproval {
        kinds.push(EventKind::ApprovalReminder);
    }
    let entered = |status: Status| before.status != status && after.status == status;
    if entered(Status::AwaitingApproval) {
        kinds.push(EventKind::ApprovalRequested);
    }
    if entered(Status::Revise)
        && matches!(
            op,
            Operation::SendBackStep | Operation::ExpireApproval | Operation::ExpireDeadline
        )
    {
        kinds.push(EventKind::StepSentBack);
    }
    if entered(Status::Expired) {
        kinds.push(EventKind::SessionExpired);
    }
    if entered(Status::Completed) {
        kinds.push(EventKind::SessionCompleted);
    }
    let mut out = Vec::with_capacity(kinds.len() * config.endpoints.len());
    for kind in kinds {
        let event_id = format!("msg_{}", SessionId::generate());
        let body = body(config, release, before, after, kind, op, by, now).to_string();
        for endpoint in &config.endpoints {
            out.push(Notice {
                event_id: event_id.clone(),
                kind,
                endpoint: endpoint.clone(),
                session_id: after.id.to_string(),
                body: body.clone(),
                created_at: unix_seconds(now).unwrap_or_default(),
            });
        }
    }
    out
}

/// An event's body: `{type, timestamp, data}`, as Standard Webhooks lays it out.
#[expect(
    clippy::too_many_arguments,
    reason = "one event, told from each side of its change"
)]
fn body(
    config: &NotifyConfig,
    release: &VerifiedRelease,
    before: &Session,
    after: &Session,
    kind: EventKind,
    op: Operation,
    by: Option<&str>,
    now: &str,
) -> Value {
    let step = release
        .workflow(&after.workflow, &after.workflow_version)
        .and_then(|w| w.steps().get(before.step_index));
    let mut data = json!({
        "session_id": after.id.as_str(),
        "workflow": {"id": after.workflow.as_str(), "version": after.workflow_version.to_string()},
        "release": after.release.as_str(),
        "status": after.status.as_str(),
        "revision": after.revision,
        "link": format!("{}/admin/sessions/{}", config.admin_origin, after.id),
    });
    if let Some(step) = &step {
        data["step"] = json!(step.doc().id.as_str());
    }
    if let Some(organization) = after
        .principal
        .as_ref()
        .and_then(|p| p.organization.as_ref())
    {
        data["organization"] = json!(organization);
    }
    let pending = after.approval.as_ref().or(before.approval.as_ref());
    if matches!(
        kind,
        EventKind::ApprovalRequested | EventKind::ApprovalReminder
    ) && let (Some(pending), Some(approval)) =
        (pending, step.and_then(|s| s.doc().approval.as_ref()))
    {
        data["approval"] = json!({
            "approvals_needed": approval.approvers,
            "facilitators": approval.facilitators,
            "roles": approval.roles.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "requested_at": pending.requested_at,
            "remind_at": pending.remind_at,
            "expires_at": pending.expires_at,
        });
    }
    if kind == EventKind::ApprovalDecided {
        data["decision"] = json!(match op {
            Operation::ApproveStep => "approve",
            Operation::SendBackStep => "send_back",
            _ => "waive",
        });
    }
    if let Some(by) = by {
        data["by"] = json!(by);
    }
    if matches!(kind, EventKind::StepSentBack | EventKind::SessionExpired) {
        data["cause"] = json!(op.as_str());
    }
    json!({"type": kind.as_str(), "timestamp": now, "data": data})
}

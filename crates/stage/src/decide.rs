//! A sign-off decision made at this machine on an engine in this process: `--sign-off-as` and
//! the decisions of a workflow test case, under an asserted name, bound to the outputs as the
//! store holds them.

use rimthan_engine::{
    Engine, SessionId,
    approval::{Approver, Decision, DecisionRequest, DecisionResult},
};

use crate::StageError;

/// Makes `decision` on the step session `id` waits on, as `name`; the step's id and what the
/// engine answered (recorded, or refused with its code).
pub(crate) async fn decide(
    engine: &Engine,
    id: &SessionId,
    decision: Decision,
    name: &str,
) -> Result<(String, DecisionResult), StageError> {
    let store_error = |e: &dyn std::fmt::Display| StageError::Connect(e.to_string());
    let session = engine
        .store()
        .load_session(id)
        .await
        .map_err(|e| store_error(&e))?;
    let Some((session, pending)) =
        session.and_then(|s| s.approval.clone().map(|pending| (s, pending)))
    else {
        return Err(StageError::Protocol {
            tool: rimthan_mcp::ACTIVE_STEP.into(),
            detail: format!("session {id} waits for no sign-off"),
        });
    };
    let step = pending.step.to_string();
    let Some(approver) = Approver::asserted(name) else {
        return Err(StageError::SignOffRefused {
            step,
            code: "invalid_arguments".into(),
            message: "the name to sign off under is empty, too long or holds a control character"
                .into(),
        });
    };
    let request = DecisionRequest {
        session: id.clone(),
        step: pending.step.clone(),
        revision: session.revision,
        expected: pending
            .outputs
            .iter()
            .map(|(path, output)| (path.clone(), output.sha256))
            .collect(),
        decision,
    };
    let result = engine
        .decide(request, &approver)
        .await
        .map_err(|e| store_error(&e))?;
    Ok((step, result))
}

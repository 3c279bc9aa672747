//! The first write actions of the facilitator's view (`docs/operations/facilitator.md` §5):
//! approving a step, sending it back with a note, and waiving a failed check's finding.
//!
//! Two doors lead to the same `Engine::decide`. A browser posts a form from the session page,
//! authenticated by the sign-in cookie; since a browser attaches that cookie to any site's post,
//! the form must also carry a CSRF token (an HMAC of the sign-in's handle under a key this
//! process drew at start) and come from this server's origin. A program (`rimthan sessions approve`)
//! posts JSON with its own bearer token in `Authorization`, which no other site can make a
//! browser send, so it needs no CSRF token; it is refused the cookie. Who may decide is the
//! engine's to say, from the caller's verified identity.
//!
//! A server that authenticates nobody listens on loopback only, so whoever reaches `/admin` is
//! at the machine: there the decider names themselves (`as`), the form's token is bound to the
//! loopback door, and the engine records the name as asserted, never as verified. A server with
//! authentication refuses an asserted name (`approval_not_authenticated`).

use std::collections::BTreeMap;

use axum::{
    Extension, Form, Json,
    extract::{Path, State, rejection::JsonRejection},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use hmac::{Hmac, Mac};
use rimthan_engine::{
    Code, SessionId,
    approval::{
        Approver, Decision, DecisionRequest, DecisionResult, MAX_ASSERTED_NAME_BYTES,
        MAX_EXPECTED_OUTPUTS, unknown_session,
    },
};
use rimthan_registry::Sha256Digest;
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;

use super::{AdminState, Refusal, Viewer, bounded, same_origin};
use crate::auth;

/// Longest note or reason accepted, in bytes: the engine's bound, checked before it runs.
const MAX_NOTE_BYTES: usize = rimthan_engine::approval::MAX_NOTE_BYTES;

/// What the loopback door's form tokens are bound to, in place of a sign-in's handle.
pub(crate) const LOOPBACK_LOGIN: &str = "loopback operator";

/// The key CSRF tokens are made with: drawn once per process, so a restart signs everyone's
/// open forms out, which is the safe side.
#[derive(Clone)]
pub(crate) struct CsrfKey([u8; 32]);

impl CsrfKey {
    pub(crate) fn generate() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source works");
        Self(key)
    }

    fn mac(&self, login: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key size");
        mac.update(login.as_bytes());
        mac
    }

    /// The token a form of this login carries.
    pub(crate) fn token(&self, login: &str) -> String {
        hex::encode(self.mac(login).finalize().into_bytes())
    }

    /// Whether `token` is this login's, compared in constant time.
    fn holds(&self, login: &str, token: &str) -> bool {
        hex::decode(token).is_ok_and(|bytes| self.mac(login).verify_slice(&bytes).is_ok())
    }
}

impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey(..)")
    }
}

/// A decision as a form or a JSON body states it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionInput {
    /// `approve`, `send_back` or `waive`.
    action: String,
    step: String,
    /// The revision the approver looked at; a program may leave it out to decide on the
    /// session as it stands.
    #[serde(default)]
    revision: Option<u64>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    check: Option<String>,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    path: Option<String>,
    /// The outputs' digests the approver read, as `PATH=SHA256` (one per line in a form; a
    /// string or a list of them in JSON): the decision is refused if an output is another now.
    #[serde(default)]
    expect_sha256: Option<Expected>,
    /// The form's CSRF token (forms only).
    #[serde(default)]
    csrf: Option<String>,
    /// The name the operator at the machine decides under, where nobody authenticates.
    #[serde(default, rename = "as")]
    asserted: Option<String>,
}

/// The operator at the machine under the name they gave (`Approver::asserted`).
fn asserted_approver(name: Option<&str>) -> Result<Approver, Refusal> {
    Approver::asserted(name.unwrap_or_default()).ok_or_else(|| {
        Refusal::bad_input(format!(
            "This server authenticates nobody: give your name (as), at most \
             {MAX_ASSERTED_NAME_BYTES} bytes without control characters; it is recorded as \
             asserted."
        ))
    })
}

/// `expect_sha256` as a form (one string) or a program (a list) sends it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Expected {
    One(String),
    Many(Vec<String>),
}

impl Expected {
    /// The digests by path, or what is wrong with them.
    fn parse(&self) -> Result<BTreeMap<String, Sha256Digest>, Refusal> {
        let texts = match self {
            Self::One(text) => std::slice::from_ref(text),
            Self::Many(list) => list.as_slice(),
        };
        let entries: Vec<&str> = texts
            .iter()
            .flat_map(|t| t.lines())
            .filter(|l| !l.trim().is_empty())
            .collect();
        if entries.len() > MAX_EXPECTED_OUTPUTS {
            return Err(Refusal::bad_input(format!(
                "Name at most {MAX_EXPECTED_OUTPUTS} outputs' digests."
            )));
        }
        let mut expected = BTreeMap::new();
        for entry in entries {
            let entry = bounded("expect_sha256", entry)?;
            let parsed = entry
                .rsplit_once('=')
                .and_then(|(path, digest)| Some((path.trim(), digest.trim().parse().ok()?)));
            let Some((path, digest)) = parsed else {
                return Err(Refusal::bad_input(
                    "expect_sha256 is PATH=SHA256, the sha256 as 64 hex digits.",
                ));
            };
            expected.insert(path.to_owned(), digest);
        }
        Ok(expected)
    }
}

impl DecisionInput {
    /// The engine's request, or what is wrong with the input.
    fn request(&self, session: SessionId, current: u64) -> Result<DecisionRequest, Refusal> {
        let step = bounded("step", &self.step)?
            .parse()
            .map_err(|_| Refusal::bad_input("The step is not a step id."))?;
        let note = match self.note.as_deref() {
            Some(n) if n.len() > MAX_NOTE_BYTES => {
                return Err(Refusal::bad_input(format!(
                    "Keep the note to {MAX_NOTE_BYTES} bytes."
                )));
            }
            other => other.map(str::to_owned),
        };
        let field = |name: &str, value: &Option<String>| -> Result<String, Refusal> {
            let value = value.as_deref().unwrap_or("");
            Ok(bounded(name, value)?.to_owned())
        };
        let decision = match self.action.as_str() {
            "approve" => Decision::Approve { note },
            "send_back" => Decision::SendBack {
                note: note.unwrap_or_default(),
            },
            "waive" => Decision::Waive {
                check: field("check", &self.check)?
                    .parse()
                    .map_err(|_| Refusal::bad_input("The check is not a check id."))?,
                rule: field("rule", &self.rule)?,
                path: field("path", &self.path)?,
                reason: note.unwrap_or_default(),
            },
            _ => {
                return Err(Refusal::bad_input(
                    "The action is approve, send_back or waive.",
                ));
            }
        };
        let expected = match &self.expect_sha256 {
            Some(expected) => expected.parse()?,
            None => BTreeMap::new(),
        };
        Ok(DecisionRequest {
            session,
            step,
            revision: self.revision.unwrap_or(current),
            expected,
            decision,
        })
    }
}

/// The page for a session id the caller may not decide on because no session has it, or
/// because it is another organization's: the same page either way.
fn unknown_page() -> Refusal {
    Refusal::not_found("There is no session with this id.")
}

/// The session a path names, and its current revision; another organization's session is
/// not found, before anything else is looked at.
async fn session_of(
    state: &AdminState,
    id: &str,
    approver: &Approver,
) -> Result<(SessionId, u64), Refusal> {
    let id: SessionId = bounded("session id", id)?
        .parse()
        .map_err(|_| unknown_page())?;
    let session = state
        .engine
        .store()
        .load_session(&id)
        .await?
        .filter(|s| approver.may_know(s.principal.as_ref()))
        .ok_or_else(unknown_page)?;
    Ok((id, session.revision))
}

/// The HTTP status a refused decision answers with.
fn refused_status(code: &str) -> StatusCode {
    match code {
        "approval_not_allowed" | "approval_not_authenticated" => StatusCode::FORBIDDEN,
        "session_not_found" => StatusCode::NOT_FOUND,
        "approval_note_required" => StatusCode::BAD_REQUEST,
        _ => StatusCode::CONFLICT,
    }
}

/// `POST /admin/sessions/{id}/decide`: a form of the session page.
pub(crate) async fn form(
    State(state): State<AdminState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(input): Form<DecisionInput>,
) -> Result<Response, Refusal> {
    let forbidden = |message: &str| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            "This decision was refused",
            message.to_owned(),
        )
    };
    if !same_origin(&headers) {
        return Err(forbidden("The form was posted from another site."));
    }
    let (approver, login) = match (&state.access, &viewer.approver, viewer.login.as_deref()) {
        (super::Access::Loopback, _, _) => (
            asserted_approver(input.asserted.as_deref())?,
            LOOPBACK_LOGIN,
        ),
        (super::Access::Facilitators(_), _, _) if input.asserted.is_some() => {
            return Err(forbidden(
                "This server authenticates its approvers; a name given in the form decides \
                 nothing here (approval_not_authenticated).",
            ));
        }
        (super::Access::Facilitators(_), Some(approver), Some(login)) => (approver.clone(), login),
        (super::Access::Facilitators(_), _, _) => {
            return Err(forbidden("Decisions need a signed-in approver."));
        }
    };
    let valid = input
        .csrf
        .as_deref()
        .is_some_and(|t| state.csrf.holds(login, t));
    if !valid {
        return Err(forbidden(
            "The form's token does not match your sign-in; reload the page and decide again.",
        ));
    }
    let approver = &approver;
    let (session, current) = session_of(&state, &id, approver).await?;
    if input.revision.is_none() {
        return Err(Refusal::bad_input("The form names no revision."));
    }
    let request = input.request(session.clone(), current)?;
    // Post/Redirect/Get: the session page says what became of the decision, and reloading it
    // posts nothing again.
    let page = format!("/admin/sessions/{session}");
    match decide(&state, request, approver).await? {
        DecisionResult::Recorded { .. } => {
            Ok(Redirect::to(&format!("{page}?decided={}", input.action)).into_response())
        }
        DecisionResult::Refused { failure } if failure.code == Code::SessionNotFound => {
            Err(unknown_page())
        }
        DecisionResult::Refused { failure } => {
            Ok(Redirect::to(&format!("{page}?refused={}", failure.code)).into_response())
        }
    }
}

/// What a session page shown after a decision says of it, from the query its redirect carries;
/// nothing for values no decision produces (the query is anyone's to write).
pub(crate) fn outcome(decided: Option<&str>, refused: Option<&str>) -> Option<String> {
    if let Some(action) = decided {
        let done = match action {
            "approve" => "approved the step",
            "send_back" => "sent the step back with your note",
            "waive" => "waived the finding",
            _ => return None,
        };
        return Some(format!("Recorded: you {done}."));
    }
    // Only codes a decision is refused with; anything else in the query shows nothing.
    let why = match Code::from_wire(refused?)? {
        Code::ApprovalNotAllowed => "this step is signed off by someone else (see who below)",
        Code::ApprovalNotAuthenticated => {
            "an authenticated participant started this session, so only verified credentials \
             decide on it"
        }
        Code::ApprovalStale => {
            "the session changed since you opened the page; read it again and decide"
        }
        Code::ApprovalContentChanged => {
            "an output is not the one this page showed; read it again and decide"
        }
        Code::ApprovalAlreadyGiven => "you already approved this step; it needs another person",
        Code::ApprovalFindingsUnwaived => {
            "failed check findings must be waived, or the step sent back, before it is approved"
        }
        Code::ApprovalNoteRequired => "give a note (at most 4,096 bytes) saying why",
        Code::ApprovalNotPending => "the session no longer waits for this sign-off",
        Code::WaiverNotAllowed => "this step allows no waiver of that check's findings",
        Code::WaiverNotFound => "that finding no longer waits to be waived",
        _ => return None,
    };
    Some(format!("Your decision was refused: {why}."))
}

/// `POST /admin/api/sessions/{id}/decisions`: the same decision as JSON, for programs.
pub(crate) async fn api(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    input: Result<Json<DecisionInput>, JsonRejection>,
) -> Response {
    let answer = |status: StatusCode, body: serde_json::Value| (status, Json(body)).into_response();
    let refusal = |status: StatusCode, code: &str, message: &str| {
        answer(
            status,
            json!({"result": "refused", "failure": {"code": code, "message": message, "detail": {}}}),
        )
    };
    let approver = match &state.access {
        super::Access::Loopback => None,
        super::Access::Facilitators(credentials) => {
            let token = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(auth::bearer_token);
            let Some(token) = token else {
                return refusal(
                    StatusCode::UNAUTHORIZED,
                    "approval_not_allowed",
                    "send your own token as Authorization: Bearer",
                );
            };
            match credentials.verifier.verify(token).await {
                Ok(caller) => Some(caller.approver()),
                Err(reason) => {
                    return refusal(
                        StatusCode::UNAUTHORIZED,
                        "approval_not_allowed",
                        &format!("the server refused the token: {reason}"),
                    );
                }
            }
        }
    };
    // A body that is not a decision answers in the door's own shape, after authentication
    // (so nobody learns the door's fields without a token).
    let input = match input {
        Ok(Json(input)) => input,
        Err(rejection) => {
            let mut reason = rejection.body_text();
            if reason.len() > 512 {
                reason.truncate(reason.floor_char_boundary(512));
                reason.push('…');
            }
            return refusal(
                rejection.status(),
                "request_invalid",
                &format!(
                    "the body is not a decision ({reason}); send JSON with action, step and \
                     optionally revision, note, check, rule, path, expect_sha256 and as"
                ),
            );
        }
    };
    if input.csrf.is_some() {
        return refusal(
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
            "csrf belongs to forms; a program authenticates with its bearer token",
        );
    }
    let approver = match approver {
        Some(_) if input.asserted.is_some() => {
            return refusal(
                StatusCode::FORBIDDEN,
                "approval_not_authenticated",
                "this server authenticates its approvers: decide with your own token, not an \
                 asserted name (as)",
            );
        }
        Some(approver) => approver,
        None => match asserted_approver(input.asserted.as_deref()) {
            Ok(approver) => approver,
            Err(refused) => {
                return refusal(
                    StatusCode::FORBIDDEN,
                    "approval_not_authenticated",
                    &refused.message,
                );
            }
        },
    };
    let result = async {
        let (session, current) = session_of(&state, &id, &approver).await?;
        let request = input.request(session, current)?;
        decide(&state, request, &approver).await
    }
    .await;
    // No session, or another organization's: the engine's refusal, word for word.
    let result = match result {
        Err(refusal) if refusal.status == StatusCode::NOT_FOUND => {
            let id = bounded("session id", &id).unwrap_or_default();
            Ok(DecisionResult::Refused {
                failure: unknown_session(id),
            })
        }
        other => other,
    };
    match result {
        Ok(result) => {
            let status = match &result {
                DecisionResult::Recorded { .. } => StatusCode::OK,
                DecisionResult::Refused { failure } => refused_status(failure.code.as_str()),
            };
            answer(
                status,
                serde_json::to_value(result).expect("results serialize"),
            )
        }
        Err(refusal) => {
            let status = refusal.status;
            answer(
                status,
                json!({"result": "refused", "failure": {"code": "invalid_arguments", "message": refusal.message, "detail": {}}}),
            )
        }
    }
}

async fn decide(
    state: &AdminState,
    request: DecisionRequest,
    approver: &Approver,
) -> Result<DecisionResult, Refusal> {
    state.engine.decide(request, approver).await.map_err(|e| {
        tracing::warn!(error = %e, "a decision could not be recorded");
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again",
            format!("The decision could not be recorded: {e}."),
        )
    })
}

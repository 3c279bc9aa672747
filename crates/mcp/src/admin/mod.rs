//! The facilitator's view at `/admin` (`docs/operations/facilitator.md`): who started, who
//! stands where, what validators sent back, how long steps take — server-rendered HTML with
//! inline SVG charts, read from the store's indexed columns, never written.
//!
//! Only facilitators open it: a token file entry or a JWT claim grants the role, and a
//! facilitator sees their own organization's sessions unless granted all. Without
//! authentication it is served only when the server listens on loopback.

mod charts;
mod decisions;
mod logins;
mod pages;
mod reading;
mod reports;
mod signoff;

use std::sync::Arc;

use axum::{
    Extension, Form, Router,
    extract::{DefaultBodyLimit, Path, Query, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use rimthan_engine::{
    Engine, Session, SessionId, SessionQuery, StatsQuery, Status,
    store::{Age, StoreError},
};
use rimthan_registry::Workflow;
use serde::Deserialize;

use crate::auth::{self, Auth, Sight};
use crate::throttle::Peer;

/// Sessions one list page shows.
pub const PAGE_ROWS: u32 = 50;

/// Longest filter or path value accepted, in bytes.
pub const MAX_FIELD_BYTES: usize = 128;

/// Largest form or JSON body a decision may post: a note at its bound and the other fields.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// The cookie the login form sets: the facilitator's bearer token, sent back only to `/admin`.
const COOKIE: &str = "rimthan_admin";

/// Who may open the view.
#[derive(Debug, Clone)]
pub enum Access {
    /// No authentication: the server listens on loopback only, so whoever reaches it is local.
    Loopback,
    /// Facilitators proven by the server's credentials.
    Facilitators(Arc<Auth>),
}

/// Who is looking, and what they may see.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// The facilitator's subject; none without authentication.
    subject: Option<String>,
    /// Their organization, when they see only its sessions.
    organization: Option<String>,
    /// Who they are as an approver; none without authentication.
    approver: Option<rimthan_engine::approval::Approver>,
    /// The token they signed in with, which their forms' CSRF tokens are bound to.
    login: Option<String>,
    /// A holder of a role some sign-off names, not a facilitator: they see only the sessions
    /// waiting for a sign-off they may give.
    waits_only: bool,
}

impl Viewer {
    /// Whoever reaches the view on a server that authenticates nobody (loopback only).
    fn loopback() -> Self {
        Self {
            subject: None,
            organization: None,
            approver: None,
            login: None,
            waits_only: false,
        }
    }

    /// The organization every query is held to, if any.
    fn scope(&self) -> Option<&str> {
        self.organization.as_deref()
    }
}

/// A page that could not be served, as the person asking should read it.
#[derive(Debug)]
pub(crate) struct Refusal {
    status: StatusCode,
    title: &'static str,
    message: String,
    /// Seconds for `Retry-After` (429 only).
    retry_after: Option<u64>,
}

impl Refusal {
    fn new(status: StatusCode, title: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            title,
            message: message.into(),
            retry_after: None,
        }
    }

    /// This address's refused tokens spent its allowance (`crate::throttle`).
    fn throttled(wait: std::time::Duration) -> Self {
        let seconds = crate::throttle::retry_after(wait);
        Self {
            retry_after: Some(seconds),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many refused tokens",
                format!(
                    "This address sent too many tokens the server refused; try again in \
                     {seconds} s (too_many_failed_credentials)."
                ),
            )
        }
    }

    /// Adds `Retry-After` to `response` when this refusal carries one.
    fn with_retry_after(&self, mut response: Response) -> Response {
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }

    fn bad_input(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "This filter does not parse",
            message,
        )
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not found", message)
    }
}

/// The refusal of a page the engine could not read for.
fn unavailable(e: rimthan_engine::EngineError) -> Refusal {
    tracing::error!(error = %e, "the view could not read a session");
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "The store did not answer",
        "The server could not read its store; try again, and see its log if this persists.",
    )
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "the facilitator's view could not read the store");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "The store did not answer",
            "The server could not read its store; try again, and see its log if this persists.",
        )
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let login = self.status == StatusCode::UNAUTHORIZED;
        self.with_retry_after(page(
            self.status,
            pages::refusal(self.title, &self.message, login),
        ))
    }
}

/// An HTML answer with headers that keep it out of caches and frames and forbid any script.
fn page(status: StatusCode, markup: maud::Markup) -> Response {
    let mut response = (status, axum::response::Html(markup.into_string())).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: under `no-referrer` Chromium sends `Origin: null` on the
    // view's own form posts, which the same-origin check must refuse; pages elsewhere still
    // get no referrer.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[derive(Clone)]
struct AdminState {
    engine: Arc<Engine>,
    access: Access,
    csrf: decisions::CsrfKey,
    logins: Arc<logins::Logins>,
}

/// Who may look, and the `Host` values the view answers to.
#[derive(Debug, Clone)]
struct Gate {
    access: Access,
    allowed_hosts: Arc<[String]>,
    logins: Arc<logins::Logins>,
}

/// The `/admin` routes. They answer only requests whose `Host` is in `allowed_hosts` (as
/// `/mcp` does), so a page elsewhere cannot read them through a rebound DNS name.
pub fn router(engine: Arc<Engine>, access: Access, allowed_hosts: &[String]) -> Router {
    let logins = Arc::new(logins::Logins::default());
    let state = AdminState {
        engine,
        access: access.clone(),
        csrf: decisions::CsrfKey::generate(),
        logins: logins.clone(),
    };
    let gate = Gate {
        access: access.clone(),
        allowed_hosts: allowed_hosts.into(),
        logins,
    };
    let guarded = Router::new()
        .route("/admin", get(list))
        .route("/admin/waiting", get(waiting))
        .route("/admin/sessions/{id}", get(session))
        .route("/admin/sessions/{id}/provenance.json", get(provenance))
        .route("/admin/workflows/{id}/{version}", get(workflow))
        .route("/admin/sessions/{id}/decide", post(decisions::form))
        .route_layer(middleware::from_fn_with_state(gate.clone(), admit))
        .with_state(state.clone())
        .merge(
            Router::new()
                .route("/admin/api/sessions/{id}/decisions", post(decisions::api))
                .route("/admin/api/sessions/{id}", get(report))
                .route("/admin/api/waiting", get(waiting_api))
                .with_state(state.clone()),
        )
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES));
    let routes = match access {
        Access::Loopback => guarded,
        Access::Facilitators(_) => guarded.merge(
            Router::new()
                .route("/admin/login", get(login_form).post(login))
                .route("/admin/logout", post(logout))
                .with_state(state),
        ),
    };
    routes.route_layer(middleware::from_fn_with_state(gate, check_host))
}

/// Whether a `Host` value is allowed: listed as is, or its host part listed without a port.
fn host_allowed(allowed: &[String], host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name))
}

async fn check_host(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !host_allowed(&gate.allowed_hosts, host) {
        return Refusal::new(
            StatusCode::FORBIDDEN,
            "Unknown host",
            "This server does not answer to this host name.",
        )
        .into_response();
    }
    next.run(request).await
}

/// The credential a request presents: a program's bearer token, or a browser's sign-in handle.
enum Presented<'a> {
    Bearer(&'a str),
    SignIn(&'a str),
}

/// The request's credential: its `Authorization` header, else the sign-in cookie.
fn presented(headers: &HeaderMap) -> Option<Presented<'_>> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer_token);
    bearer
        .map(Presented::Bearer)
        .or_else(|| sign_in_handle(headers).map(Presented::SignIn))
}

/// The sign-in handle the `/admin` cookie carries.
fn sign_in_handle(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|t| !t.is_empty())
}

/// Who a token proves, as a viewer, or the refusal.
async fn viewer_of(
    auth: &Auth,
    token: Option<&str>,
    peer: Option<Peer>,
) -> Result<Viewer, Refusal> {
    let Some(token) = token else {
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "Sign in to see this",
            "The facilitator's view needs a facilitator's token.",
        ));
    };
    // No token is checked while its address is blocked, so a guess then cannot succeed.
    if let Some(wait) = peer.and_then(|p| auth.throttle.blocked(p.0)) {
        return Err(Refusal::throttled(wait));
    }
    let caller = auth.verifier.verify(token).await.map_err(|reason| {
        tracing::info!(reason, "facilitator token refused");
        match peer.and_then(|p| auth.throttle.failed(p.0)) {
            Some(wait) => Refusal::throttled(wait),
            None => Refusal::new(
                StatusCode::UNAUTHORIZED,
                "This token was refused",
                format!("The server refused the token: {reason}."),
            ),
        }
    })?;
    let forbidden = |message: &str| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            "Facilitators only",
            message.to_owned(),
        )
    };
    match caller.facilitator {
        // A role holder opens the view to what waits for them.
        None if !caller.roles.is_empty() => Ok(Viewer {
            approver: Some(caller.approver()),
            login: Some(token.to_owned()),
            subject: Some(caller.principal.subject.clone()),
            organization: caller.principal.organization.clone(),
            waits_only: true,
        }),
        None => Err(forbidden(
            "This token belongs to a participant. The view opens to facilitators and to holders \
             of a role a sign-off names.",
        )),
        Some(Sight::All) => Ok(Viewer {
            approver: Some(caller.approver()),
            login: Some(token.to_owned()),
            subject: Some(caller.principal.subject),
            organization: None,
            waits_only: false,
        }),
        Some(Sight::Organization) => match caller.principal.organization.clone() {
            Some(organization) => Ok(Viewer {
                approver: Some(caller.approver()),
                login: Some(token.to_owned()),
                subject: Some(caller.principal.subject),
                organization: Some(organization),
                waits_only: false,
            }),
            None => Err(forbidden(
                "This facilitator sees one organization's sessions, but the token names no \
                 organization.",
            )),
        },
    }
}

/// Lets a facilitator through with who they are, or answers the refusal page.
async fn admit(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let viewer = match &gate.access {
        Access::Loopback => Viewer::loopback(),
        Access::Facilitators(auth) => {
            let peer = request.extensions().get::<Peer>().copied();
            let viewer = match presented(request.headers()) {
                Some(Presented::Bearer(token)) => viewer_of(auth, Some(token), peer).await,
                Some(Presented::SignIn(handle)) => match gate.logins.token(handle) {
                    // Form tokens are bound to the sign-in, not to the bearer token behind it.
                    Some(token) => viewer_of(auth, Some(&token), peer)
                        .await
                        .map(|viewer| Viewer {
                            login: Some(handle.to_owned()),
                            ..viewer
                        }),
                    None => Err(Refusal::new(
                        StatusCode::FORBIDDEN,
                        "Sign in again",
                        "This sign-in has ended (signed out, 8 hours without use, or issued by \
                         another server or before a restart) (sign_in_ended).",
                    )),
                },
                None => viewer_of(auth, None, peer).await,
            };
            match viewer {
                Ok(viewer) => viewer,
                Err(refusal) => return refusal.into_response(),
            }
        }
    };
    request.extensions_mut().insert(viewer);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn hosts_match_with_or_without_their_port() {
        let allowed = [
            "localhost".to_owned(),
            "mcp.example.com:8443".to_owned(),
            "[::1]".to_owned(),
        ];
        assert!(host_allowed(&allowed, "localhost"));
        assert!(host_allowed(&allowed, "localhost:8787"));
        assert!(host_allowed(&allowed, "mcp.example.com:8443"));
        assert!(host_allowed(&allowed, "[::1]:8787"));
        assert!(!host_allowed(&allowed, "mcp.example.com"));
        assert!(!host_allowed(&allowed, "evil.example"));
        assert!(!host_allowed(&allowed, "localhost.evil.example:80"));
        assert!(!host_allowed(&allowed, ""));
    }
}

fn bounded<'a>(name: &str, value: &'a str) -> Result<&'a str, Refusal> {
    if value.len() > MAX_FIELD_BYTES {
        return Err(Refusal::bad_input(format!(
            "{name} is longer than {MAX_FIELD_BYTES} bytes."
        )));
    }
    Ok(value)
}

/// The list page's filters, as typed in the form; empty fields mean no filter.
#[derive(Debug, Default, Deserialize)]
struct ListForm {
    status: Option<String>,
    workflow: Option<String>,
    organization: Option<String>,
    since: Option<String>,
    page: Option<String>,
}

/// The list page's filters, parsed.
#[derive(Debug, Default)]
pub(crate) struct Filters {
    status: Option<Status>,
    workflow: Option<String>,
    organization: Option<String>,
    since: Option<String>,
    page: u64,
}

impl ListForm {
    fn parse(self, viewer: &Viewer) -> Result<(Filters, SessionQuery), Refusal> {
        let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        let status = match given(self.status) {
            None => None,
            Some(s) => Some(Status::from_wire(bounded("status", &s)?).ok_or_else(|| {
                Refusal::bad_input("status must be active, revise or completed.")
            })?),
        };
        let workflow = given(self.workflow);
        if let Some(w) = &workflow {
            bounded("workflow", w)?;
        }
        let organization = match viewer.scope() {
            Some(own) => Some(own.to_owned()),
            None => given(self.organization),
        };
        if let Some(o) = &organization {
            bounded("organization", o)?;
        }
        let since = given(self.since);
        let changed_since = match &since {
            None => None,
            Some(s) => Some(
                bounded("since", s)?
                    .parse::<Age>()
                    .map_err(|e| Refusal::bad_input(format!("since {e}.")))?
                    .cutoff(),
            ),
        };
        let page = match given(self.page) {
            None => 1,
            Some(p) => p
                .parse::<u64>()
                .ok()
                .filter(|p| (1..=1_000_000).contains(p))
                .ok_or_else(|| Refusal::bad_input("page must be a number from 1."))?,
        };
        let query = SessionQuery {
            status,
            workflow: workflow.clone(),
            organization: organization.clone(),
            changed_since,
            limit: PAGE_ROWS,
            offset: (page - 1) * u64::from(PAGE_ROWS),
        };
        let filters = Filters {
            status,
            workflow,
            organization,
            since,
            page,
        };
        Ok((filters, query))
    }
}

async fn list(
    State(state): State<AdminState>,
    Extension(viewer): Extension<Viewer>,
    Query(form): Query<ListForm>,
) -> Result<Response, Refusal> {
    if let (true, Some(approver)) = (viewer.waits_only, &viewer.approver) {
        let waiting = state
            .engine
            .waiting_for(approver)
            .await
            .map_err(unavailable)?;
        return Ok(page(
            StatusCode::OK,
            pages::waiting(&state.access, &viewer, &waiting, now()),
        ));
    }
    let (filters, query) = form.parse(&viewer)?;
    let store = state.engine.store();
    let sessions = store.list_sessions(&query).await?;
    if sessions.is_empty() && filters.page > 1 {
        return Err(Refusal::not_found(format!(
            "Page {} is past the end of this list.",
            filters.page
        )));
    }
    let workflows = store.workflows(viewer.scope()).await?;
    let registry = state.engine.releases().snapshot();
    let rows: Vec<_> = sessions
        .into_iter()
        .map(|s| {
            let steps = s.steps(&registry);
            (s, steps)
        })
        .collect();
    // Events given up on concern every organization's receivers: a facilitator of all sees them.
    let failed = if viewer.scope().is_none() {
        store.deliveries(None, FAILED_DELIVERIES_SHOWN).await?
    } else {
        Vec::new()
    };
    Ok(page(
        StatusCode::OK,
        pages::list(&state.access, &viewer, &filters, &rows, &workflows, &failed),
    ))
}

/// Webhook events given up on that the session list shows at most.
const FAILED_DELIVERIES_SHOWN: u32 = 20;
/// Undelivered webhook events a session page shows at most.
const SESSION_DELIVERIES_SHOWN: u32 = 50;

/// The query a decision's redirect adds to the session page.
#[derive(Debug, Default, Deserialize)]
struct AfterDecision {
    decided: Option<String>,
    refused: Option<String>,
}

async fn session(
    State(state): State<AdminState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    after: Result<Query<AfterDecision>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Refusal> {
    let unknown = || Refusal::not_found("There is no session with this id.");
    let id: SessionId = bounded("session id", &id)?.parse().map_err(|_| unknown())?;
    let store = state.engine.store();
    let session = in_sight(&state, &viewer, &id, unknown).await?;
    // One more than shown, to tell whether older calls were left out.
    let timeline = store.recent_audit(&id, pages::TIMELINE_ROWS + 1).await?;
    let registry = state.engine.releases().snapshot();
    let workflow = registry
        .release(&session.release)
        .and_then(|r| r.workflow(&session.workflow, &session.workflow_version));
    let steps: Vec<String> = workflow.map(step_ids).unwrap_or_default();
    // What the waiting step's approval asks, for "approvals 1 of 2" and who may still decide.
    let asked = session.approval.as_ref().and_then(|pending| {
        workflow?
            .steps()
            .iter()
            .find(|s| s.doc().id == pending.step)?
            .doc()
            .approval
            .clone()
    });
    let chain = rimthan_engine::chain::verify_session_chain(&**store, &id).await?;
    // Where nobody authenticates, the operator at the machine decides under a name they give;
    // their forms' token is bound to the loopback door itself.
    let (login, asserted) = match (&state.access, viewer.login.as_deref()) {
        (Access::Loopback, _) => (Some(decisions::LOOPBACK_LOGIN), true),
        (Access::Facilitators(_), login) => (login, false),
    };
    let csrf = login.map(|login| state.csrf.token(login));
    let deciding = csrf
        .as_deref()
        .map(|csrf| signoff::Deciding { csrf, asserted });
    // A query no decision wrote is no outcome to show, not an error.
    let after = after.map(|Query(a)| a).unwrap_or_default();
    let outcome = decisions::outcome(after.decided.as_deref(), after.refused.as_deref());
    let deliveries = store
        .deliveries(Some(&id), SESSION_DELIVERIES_SHOWN)
        .await?;
    let sign_off = maud::html! {
        @if let Some(outcome) = outcome {
            p.notice id="decision-outcome" role="status" { (outcome) }
        }
        (signoff::panel(&session, asked.as_ref(), &timeline, deciding.as_ref()))
        (signoff::given(&session))
        (pages::deliveries("Webhook events not delivered", "undelivered", &deliveries))
    };
    Ok(page(
        StatusCode::OK,
        pages::session(
            &state.access,
            &viewer,
            &session,
            &steps,
            &timeline,
            &chain,
            sign_off,
        ),
    ))
}

/// A completed session's signed provenance statement, as the participant's harness wrote it.
async fn provenance(
    State(state): State<AdminState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Response, Refusal> {
    let unknown = || Refusal::not_found("There is no completed session with this id.");
    if viewer.waits_only {
        return Err(unknown());
    }
    let id: SessionId = bounded("session id", &id)?.parse().map_err(|_| unknown())?;
    let session = in_sight(&state, &viewer, &id, unknown).await?;
    let file = state.engine.provenance(&session).await.map_err(|e| {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            format!("The statement could not be made: {e}"),
        )
    })?;
    let file = file.ok_or_else(unknown)?;
    Ok(axum::Json(file.content).into_response())
}

/// `?format=` of `GET /admin/api/sessions/{id}`.
#[derive(Debug, Default, Deserialize)]
struct ReportFormat {
    format: Option<String>,
}

/// The clock the pages count time left by.
fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

/// The sessions waiting for a sign-off `viewer` may give; none for a viewer who decides nothing.
async fn waiting_for(
    state: &AdminState,
    viewer: &Viewer,
) -> Result<Vec<rimthan_engine::Waiting>, Refusal> {
    match &viewer.approver {
        Some(approver) => state
            .engine
            .waiting_for(approver)
            .await
            .map_err(unavailable),
        None => Ok(Vec::new()),
    }
}

/// `/admin/waiting`: the sessions waiting for a sign-off the viewer may give.
async fn waiting(
    State(state): State<AdminState>,
    Extension(viewer): Extension<Viewer>,
) -> Result<Response, Refusal> {
    let waiting = waiting_for(&state, &viewer).await?;
    Ok(page(
        StatusCode::OK,
        pages::waiting(&state.access, &viewer, &waiting, now()),
    ))
}

/// `GET /admin/api/waiting` with the caller's own bearer token: what `rimthan sessions list
/// --waiting-for-me` prints, soonest expiry first.
async fn waiting_api(
    State(state): State<AdminState>,
    peer: Option<axum::Extension<Peer>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, Refusal> {
    let Access::Facilitators(auth) = &state.access else {
        return Err(Refusal::bad_input(
            "Nobody authenticates on this server, so nothing waits for anyone in particular; \
             list the sessions waiting for sign-off with `rimthan sessions list --status \
             awaiting_approval`.",
        ));
    };
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::bearer_token);
    let viewer = viewer_of(auth, token, peer.map(|p| p.0)).await?;
    let waiting = waiting_for(&state, &viewer).await?;
    let now = now();
    let rows: Vec<serde_json::Value> = waiting
        .iter()
        .map(|w| {
            let mut row = serde_json::to_value(w).expect("waiting sessions serialize");
            if let Some(at) = &w.expires_at {
                row["time_left"] = serde_json::json!(pages::time_left(at, now));
            }
            row["link"] = serde_json::json!(format!("/admin/sessions/{}", w.summary.id));
            row
        })
        .collect();
    Ok(axum::Json(serde_json::json!({ "waiting": rows })).into_response())
}

/// `GET /admin/api/sessions/{id}`: the session as `rimthan sessions show` prints it, for a
/// program with its own bearer token (`sessions show --server`): `?format=json` the document,
/// else the text. Who may read it is who may open its page: a facilitator of its organization or
/// of all, a role holder while it waits for their sign-off, anyone where nobody authenticates
/// (loopback only). Everyone else is answered as for an id no session has.
async fn report(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    Query(format): Query<ReportFormat>,
    peer: Option<axum::Extension<Peer>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, Refusal> {
    let unknown = || Refusal::not_found("There is no session with this id.");
    let json = match format.format.as_deref() {
        Some("json") => true,
        None | Some("text") => false,
        Some(_) => return Err(Refusal::bad_input("format is json or text.")),
    };
    let viewer = match &state.access {
        Access::Loopback => Viewer::loopback(),
        Access::Facilitators(auth) => {
            let token = headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(crate::auth::bearer_token);
            viewer_of(auth, token, peer.map(|p| p.0)).await?
        }
    };
    let id: SessionId = bounded("session id", &id)?.parse().map_err(|_| unknown())?;
    let session = in_sight(&state, &viewer, &id, unknown).await?;
    let registry = state.engine.releases().snapshot();
    let report =
        crate::report::SessionReport::of(&**state.engine.store(), &registry, session).await?;
    Ok(if json {
        axum::Json(report.json()).into_response()
    } else {
        (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            )],
            report.text(),
        )
            .into_response()
    })
}

/// The session `id` as `viewer` may see it: for a facilitator one of their organization's, or
/// any for a facilitator of all; for a role holder one waiting for a sign-off they may give.
/// Anything else answers `unknown`, as an id no session has.
async fn in_sight(
    state: &AdminState,
    viewer: &Viewer,
    id: &SessionId,
    unknown: impl Fn() -> Refusal,
) -> Result<Arc<Session>, Refusal> {
    if let (true, Some(approver)) = (viewer.waits_only, &viewer.approver) {
        return state
            .engine
            .awaiting(id, approver)
            .await
            .map_err(unavailable)?
            .ok_or_else(unknown);
    }
    let session = state
        .engine
        .store()
        .load_session(id)
        .await?
        .ok_or_else(&unknown)?;
    let owner = session
        .principal
        .as_ref()
        .and_then(|p| p.organization.as_deref());
    if viewer.scope().is_some() && viewer.scope() != owner {
        return Err(unknown());
    }
    Ok(session)
}

/// A workflow's step ids, in order.
fn step_ids(workflow: &Workflow) -> Vec<String> {
    workflow
        .steps()
        .iter()
        .map(|s| s.doc().id.to_string())
        .collect()
}

async fn workflow(
    State(state): State<AdminState>,
    Extension(viewer): Extension<Viewer>,
    Path((id, version)): Path<(String, String)>,
) -> Result<Response, Refusal> {
    if viewer.waits_only {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "Facilitators only",
            "A workflow's figures are for facilitators; this sign-in sees what waits for it.",
        ));
    }
    let query = StatsQuery {
        workflow: bounded("workflow", &id)?.to_owned(),
        workflow_version: bounded("version", &version)?.to_owned(),
        organization: viewer.scope().map(str::to_owned),
    };
    let stats = state.engine.store().workflow_stats(&query).await?;
    let registry = state.engine.releases().snapshot();
    let parsed = id.parse().ok().zip(version.parse().ok());
    let steps: Option<Vec<String>> = parsed.and_then(|(id, version)| {
        registry
            .releases()
            .values()
            .find_map(|r| r.workflow(&id, &version))
            .map(step_ids)
    });
    if steps.is_none() && stats.sessions.is_empty() && stats.refused_starts == 0 {
        return Err(Refusal::not_found(
            "No release this server holds has this workflow version, and no session used it.",
        ));
    }
    // A version no release holds any more is drawn with as many steps as sessions reached.
    let steps = steps.unwrap_or_else(|| {
        let seen = stats
            .sessions
            .iter()
            .map(|c| c.step_index)
            .max()
            .unwrap_or(0);
        (1..=seen).map(|i| format!("step {i}")).collect()
    });
    Ok(page(
        StatusCode::OK,
        pages::workflow(&state.access, &viewer, &query, &steps, &stats),
    ))
}

async fn login_form(State(state): State<AdminState>) -> Response {
    page(StatusCode::OK, pages::login(&state.access, None))
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
}

/// Whether a form post comes from this server's own pages: its `Origin` names this host; or,
/// from a browser that sent none, `Sec-Fetch-Site: same-origin` or a `Referer` on this host.
/// A post that proves neither is refused (`docs/operations/facilitator.md` §5).
fn same_origin(headers: &HeaderMap) -> bool {
    let header = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(host) = header(header::HOST) else {
        return false;
    };
    let on_this_host = |url: &str| {
        url.split_once("://").is_some_and(|(_, rest)| {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            authority.eq_ignore_ascii_case(host)
        })
    };
    match header(header::ORIGIN) {
        Some(origin) => on_this_host(origin),
        None => {
            header(header::HeaderName::from_static("sec-fetch-site")) == Some("same-origin")
                || header(header::REFERER).is_some_and(on_this_host)
        }
    }
}

/// Checks the token before setting it as a cookie, so a wrong one is told at once.
async fn login(
    State(state): State<AdminState>,
    peer: Option<axum::Extension<Peer>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let Access::Facilitators(auth) = &state.access else {
        return Redirect::to("/admin").into_response();
    };
    if !same_origin(&headers) {
        return Refusal::new(
            StatusCode::FORBIDDEN,
            "Sign in from this server's page",
            "The sign-in form was posted from another site.",
        )
        .into_response();
    }
    let token = form.token.trim();
    if let Err(refusal) = viewer_of(auth, Some(token), peer.map(|p| p.0)).await {
        return refusal.with_retry_after(page(
            refusal.status,
            pages::login(&state.access, Some(&refusal.message)),
        ));
    }
    let secure = if auth.resource.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    let handle = state.logins.open(token);
    let cookie = format!("{COOKIE}={handle}; Path=/admin; HttpOnly; SameSite=Strict{secure}");
    let mut response = Redirect::to("/admin").into_response();
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            response.headers_mut().insert(header::SET_COOKIE, value);
            response
        }
        Err(_) => page(
            StatusCode::BAD_REQUEST,
            pages::login(
                &state.access,
                Some("A token is printable text without spaces."),
            ),
        ),
    }
}

/// `POST /admin/logout`: ends the sign-in the cookie names and clears the cookie.
async fn logout(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return Refusal::new(
            StatusCode::FORBIDDEN,
            "Sign out from this server's page",
            "The sign-out form was posted from another site.",
        )
        .into_response();
    }
    if let Some(handle) = sign_in_handle(&headers) {
        state.logins.close(handle);
    }
    let mut response = Redirect::to("/admin/login").into_response();
    let cleared = format!("{COOKIE}=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cleared).expect("the cookie name is a header value"),
    );
    response
}

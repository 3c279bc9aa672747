//! Sign-off over real HTTP (`docs/operations/facilitator.md` §5): a participant's harness drives
//! a step that needs approval to `awaiting_approval` with tool calls; a facilitator sends it back
//! from the session page's form (which needs the page's CSRF token and this server's origin);
//! the harness reads `revise` with the note, resubmits, and two approvers complete it, one by
//! the form and one by the JSON door a program uses with its own token. Who may not decide is
//! refused with a named code. Runs the test workflow of `docs/examples/signed-off/`.

use std::{path::Path, sync::Arc};

use rimthan_mcp::{Profile, admin::Access};
use rimthan_registry::Sha256Digest;
use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

use crate::admin::{Answer, get_signed_in, send, sign_in};
use crate::common::*;

fn registry() -> rimthan_registry::VerifiedRegistry {
    rimthan_testkit::engine::registry_built_from(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/signed-off"),
    )
}

fn token_file(dir: &Path) -> std::path::PathBuf {
    let hash = |t: &str| Sha256Digest::of(t.as_bytes()).to_string();
    let file = json!({"tokens": [
        {"sha256": hash("pat"), "principal": "pat", "organization": "acme", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("ann"), "principal": "ann", "organization": "acme", "facilitator": "organization"},
        {"sha256": hash("rui"), "principal": "rui", "organization": "acme", "roles": ["release-manager"]},
        {"sha256": hash("oz"), "principal": "oz", "organization": "globex", "facilitator": "organization"},
    ]});
    let path = dir.join("tokens.json");
    std::fs::write(&path, file.to_string()).unwrap();
    path
}

const PLAN: &str = r#"{"title": "Add a sales channel", "risks": ["backfill load"]}"#;
const NOTE: &str =
    "# Add a sales channel\n\n## Risks\n\n- The backfill loads the primary (data team).\n";
const SQL: &str =
    "SET statement_timeout = '5s';\nALTER TABLE orders ADD COLUMN sales_channel text;\n";

fn file_of(path: &str) -> &'static str {
    match path {
        "plan/plan.json" => PLAN,
        "note/note.md" => NOTE,
        "note/migrate.sql" => SQL,
        other => panic!("no file {other}"),
    }
}

/// Prepares the active step with the files above and submits passing reports.
async fn pass(client: &Client, start: &Value, payload: &Value) -> Value {
    let step = &payload["step"];
    let mut prepare = json!({"checkpoint": payload["checkpoint"], "step_id": step["id"]});
    if step["id"] == "setup-workspace" {
        let deliveries: Vec<Value> = payload["host_assets"].as_array().unwrap().iter().map(|a| {
            let local = a.get("project_local_path").cloned();
            let mut d = json!({"kind": a["kind"], "id": a["id"], "version": a["version"], "sha256": a["sha256"],
                "delivery_mode": if local.is_some() { "project-local" } else { "dynamic-context" }});
            if let Some(path) = local { d["path"] = path; }
            d
        }).collect();
        prepare["host_attestation"] = json!({"harness": "codex", "adapter": start["host"]["adapter"],
            "capabilities": start["host"]["capabilities"],
            "validator_capabilities": start["host"]["validator_capabilities"], "deliveries": deliveries});
    } else {
        let artifacts: Vec<Value> = step["outputs"].as_array().unwrap().iter().map(|o| {
            let text = file_of(o["path"].as_str().unwrap());
            let mut a = json!({"artifact_id": o["artifact_id"], "path": o["path"], "owner_step": o["owner_step"],
                "media_type": o["media_type"], "bytes": text.len(),
                "sha256": Sha256Digest::of(text.as_bytes()).to_string(),
                "symlink_free": true, "read_back": true, "write_policy": o["write_policy"]});
            if !o["schema"].is_null() {
                a["schema_sha256"] = o["schema"]["sha256"].clone();
                a["content"] = serde_json::from_str(text).unwrap();
            }
            if o["send_text"] == true {
                a["text"] = json!(text);
            }
            a
        }).collect();
        let inputs: Vec<Value> = step["inputs"].as_array().unwrap().iter()
            .filter(|i| i["send_text"] == true)
            .map(|i| json!({"artifact_id": i["artifact_id"], "path": i["path"], "text": file_of(i["path"].as_str().unwrap())}))
            .collect();
        prepare["output_attestation"] = json!({"artifacts": artifacts, "inputs": inputs});
    }
    let plan = structured(&call(client, rimthan_mcp::PREPARE, prepare).await);
    assert_eq!(plan["status"], "ready", "{plan:#}");
    let reports: Vec<Value> = plan["validators"].as_array().unwrap().iter().map(|v| json!({
        "validator_id": v["id"], "validator_version": v["version"], "verdict": "pass",
        "summary": "Checked.", "findings": [],
        "inputs_read": v["inputs"].as_array().unwrap().iter().map(|i| i["path"].clone()).collect::<Vec<_>>(),
        "capabilities_used": v["capabilities"]})).collect();
    let submit = json!({"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports});
    structured(&call(client, rimthan_mcp::SUBMIT, submit).await)
}

async fn read(client: &Client, payload: &Value) -> Value {
    structured(
        &call(
            client,
            rimthan_mcp::ACTIVE_STEP,
            json!({"checkpoint": payload["checkpoint"]}),
        )
        .await,
    )
}

/// The value of the first `name="<name>" value="..."` input of a page.
fn field(page: &str, name: &str) -> String {
    let needle = format!(r#"name="{name}" value=""#);
    let at = page
        .find(&needle)
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        + needle.len();
    page[at..].split('"').next().unwrap().to_owned()
}

async fn post_form(
    addr: std::net::SocketAddr,
    path: &str,
    handle: &str,
    origin: &str,
    body: &str,
) -> Answer {
    send(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: rimthan_admin={handle}\r\nOrigin: {origin}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await
}

/// A POST of `body` as JSON, whatever it holds.
async fn post_body(addr: std::net::SocketAddr, path: &str, auth: &str, body: &str) -> Answer {
    send(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await
}

async fn post_json(
    addr: std::net::SocketAddr,
    path: &str,
    auth: &str,
    body: &Value,
) -> (u16, Value) {
    let answer = post_body(addr, path, auth, &body.to_string()).await;
    (
        answer.status,
        serde_json::from_str(&answer.body).unwrap_or(Value::Null),
    )
}

/// A GET of a JSON document with `auth`'s headers.
async fn get_json(addr: std::net::SocketAddr, path: &str, auth: &str) -> (u16, Value) {
    let answer = send(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"),
    )
    .await;
    (
        answer.status,
        serde_json::from_str(&answer.body).unwrap_or(Value::Null),
    )
}

/// A server with credentials and the view, and a session of `pat`'s waiting for sign-off of
/// `write-note`.
struct Waiting {
    _dir: tempfile::TempDir,
    engine: Arc<rimthan_engine::Engine>,
    served: HttpServer,
    client: Client,
    start: Value,
    waiting: Value,
}

async fn waiting_for_sign_off() -> Waiting {
    waiting_on(true).await
}

/// As [`waiting_for_sign_off`]; without `authenticated`, on a server that authenticates nobody
/// (the view open on loopback), where the session has no owner.
async fn waiting_on(authenticated: bool) -> Waiting {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let server = server_on(registry(), Profile::WorkflowEngine).await;
    let engine = server.engine().clone();
    let served = http_server_with(server, |config| {
        if !authenticated {
            config.admin = Some(Access::Loopback);
            return;
        }
        facilitators_from(&file, config);
    })
    .await;
    let mut transport = StreamableHttpClientTransportConfig::with_uri(served.url.clone());
    if authenticated {
        transport = transport.auth_header("pat".to_owned());
    }
    let client = ().serve(StreamableHttpClientTransport::from_config(transport)).await.unwrap();
    let start = json!({"workflow_id": "release-note", "host": {
        "harness": "codex", "adapter": {"id": "codex", "version": "1.1.0"},
        "capabilities": ["mcp.tools", "mcp.resources", "mcp.prompts", "native-subagents",
            "scoped-inputs", "read-only-capabilities", "structured-reports", "project-local-assets"],
        "validator_capabilities": ["workspace.read"]}});
    let mut payload = structured(&call(&client, rimthan_mcp::START, start.clone()).await);
    while payload["step"]["id"] != "write-note" {
        payload = pass(&client, &start, &payload).await;
    }
    let waiting = pass(&client, &start, &payload).await;
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting:#}");
    Waiting {
        _dir: dir,
        engine,
        served,
        client,
        start,
        waiting,
    }
}

#[tokio::test]
async fn approvers_send_back_and_approve_in_the_view_and_over_json_and_others_are_refused() {
    let Waiting {
        engine,
        served,
        client,
        start,
        waiting,
        ..
    } = waiting_for_sign_off().await;
    let addr = served.addr;
    let origin = format!("http://{addr}");
    assert_eq!(waiting["approval"]["approvals_needed"], 2);
    let session = waiting["session_id"].as_str().unwrap().to_owned();
    let page_path = format!("/admin/sessions/{session}");
    let decide = format!("{page_path}/decide");
    let api = format!("/admin/api/sessions/{session}/decisions");

    // The page shows the outputs' digests and the forms with this sign-in's token.
    let ann = sign_in(addr, "ann").await;
    let oz = sign_in(addr, "oz").await;
    let page = get_signed_in(addr, &page_path, &ann).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(r#"id="sign-off""#), "{}", page.body);
    assert!(
        page.body
            .contains(&Sha256Digest::of(NOTE.as_bytes()).to_string())
    );
    let csrf = field(&page.body, "csrf");
    let revision = field(&page.body, "revision");
    // The approver reads what they sign: every output's text, line by line.
    assert!(
        page.body
            .contains("ALTER TABLE orders ADD COLUMN sales_channel text;"),
        "{}",
        page.body
    );
    assert!(page.body.contains("The backfill loads the primary"));
    assert!(!page.body.contains("since the send-back"));

    // A form without the token, with another sign-in's token, or from another site changes nothing.
    let send_back = |csrf: &str| {
        format!(
            "csrf={csrf}&step=write-note&revision={revision}&action=send_back&note=Batch+the+backfill."
        )
    };
    for (handle, form, from) in [
        (ann.as_str(), send_back(""), origin.as_str()),
        (oz.as_str(), send_back(&csrf), origin.as_str()),
        (ann.as_str(), send_back(&csrf), "https://evil.example"),
    ] {
        let refused = post_form(addr, &decide, handle, from, &form).await;
        assert_eq!(refused.status, 403, "{}", refused.body);
    }
    assert_eq!(read(&client, &waiting).await["status"], "awaiting_approval");

    // Sent back from the view: the harness reads revise with the note, and resubmits.
    let sent = post_form(addr, &decide, &ann, &origin, &send_back(&csrf)).await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    let revise = read(&client, &waiting).await;
    assert_eq!(revise["status"], "revise", "{revise:#}");

    // Post/Redirect/Get: the page the decision redirects to says what became of it; the same
    // form posted again (a reload, a replay) is refused, and its page says why.
    let location = |answer: &Answer| {
        answer
            .head
            .lines()
            .find_map(|l| l.strip_prefix("location: "))
            .unwrap_or_else(|| panic!("no location in {}", answer.head))
            .to_owned()
    };
    assert_eq!(location(&sent), format!("{page_path}?decided=send_back"));
    let shown = get_signed_in(addr, &location(&sent), &ann).await;
    assert!(
        shown
            .body
            .contains("Recorded: you sent the step back with your note."),
        "{}",
        shown.body
    );
    // The timeline names who decided and what they wrote.
    let timeline = shown.body.split(r#"id="timeline""#).nth(1).unwrap();
    assert!(timeline.contains("ann: Batch the backfill."), "{timeline}");
    let again = post_form(addr, &decide, &ann, &origin, &send_back(&csrf)).await;
    assert_eq!(again.status, 303, "{}", again.body);
    assert_eq!(
        location(&again),
        format!("{page_path}?refused=approval_not_pending")
    );
    let shown = get_signed_in(addr, &location(&again), &ann).await;
    assert!(
        shown
            .body
            .contains("Your decision was refused: the session no longer waits for this sign-off."),
        "{}",
        shown.body
    );
    let forged = get_signed_in(addr, &format!("{page_path}?refused=%3Cscript%3E"), &ann).await;
    assert_eq!(forged.status, 200);
    assert!(!forged.body.contains("decision-outcome"), "{}", forged.body);
    let finding = revise["findings"][0]["message"].as_str().unwrap();
    assert!(
        finding.contains("Batch the backfill.") && finding.contains("ann"),
        "{finding}"
    );
    let waiting = pass(&client, &start, &revise).await;
    assert_eq!(waiting["status"], "awaiting_approval");
    // Resubmitted as it was: the page says so, output by output, beside the note that sent it
    // back.
    let again = get_signed_in(addr, &page_path, &ann).await;
    let section = again.body.split(r#"id="sign-off""#).nth(1).unwrap();
    assert!(
        section.contains(r#"id="thread""#) && section.contains("Batch the backfill."),
        "{section}"
    );
    assert_eq!(
        again.body.matches("Unchanged since the send-back.").count(),
        2,
        "{}",
        again.body
    );

    // The JSON door: the participant and a cookie are refused; another organization's
    // facilitator is answered word for word as for an id no session has, and the session's
    // chain records nothing of their attempt.
    let approve = json!({"action": "approve", "step": "write-note"});
    let (status, answer) = post_json(addr, &api, "Authorization: Bearer pat\r\n", &approve).await;
    assert_eq!(
        (status, answer["failure"]["code"].as_str()),
        (403, Some("approval_not_allowed"))
    );
    let (status, foreign) = post_json(addr, &api, "Authorization: Bearer oz\r\n", &approve).await;
    assert_eq!(status, 404, "{foreign:#}");
    let unknown_id = "0".repeat(session.len());
    let unknown_api = format!("/admin/api/sessions/{unknown_id}/decisions");
    let (status, unknown) =
        post_json(addr, &unknown_api, "Authorization: Bearer oz\r\n", &approve).await;
    assert_eq!(status, 404, "{unknown:#}");
    assert_eq!(
        foreign.to_string().replace(&session, "ID"),
        unknown.to_string().replace(&unknown_id, "ID")
    );
    assert_eq!(foreign["failure"]["code"], "session_not_found");
    // Before any other check: a decision that would be refused for its action is not found.
    let dance = json!({"action": "dance", "step": "write-note"});
    let (status, danced) = post_json(addr, &api, "Authorization: Bearer oz\r\n", &dance).await;
    assert_eq!(
        (status, danced["failure"]["code"].as_str()),
        (404, Some("session_not_found"))
    );
    let id = session.parse().unwrap();
    let log = engine.store().audit_log(&id).await.unwrap();
    assert!(
        log.iter().all(|e| e.principal.as_deref() != Some("oz")),
        "another organization's attempt was written into the session's chain"
    );
    let (status, _) = post_json(addr, &api, "Cookie: rimthan_admin=rui\r\n", &approve).await;
    assert_eq!(status, 401);
    let (status, answer) = post_json(addr, &api, "Authorization: Bearer rui\r\n", &approve).await;
    assert_eq!(status, 200, "{answer:#}");
    assert_eq!(answer["approvals"], 1);
    let (status, answer) = post_json(addr, &api, "Authorization: Bearer rui\r\n", &approve).await;
    assert_eq!(
        (status, answer["failure"]["code"].as_str()),
        (409, Some("approval_already_given"))
    );

    // The second approval, from the view, completes the session. The page says who gave the
    // first and who may still decide.
    let page = get_signed_in(addr, &page_path, &ann).await;
    assert!(
        page.body
            .contains("Approvals 1 of 2: rui (release-manager)."),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(
            "Who may still decide: a holder of the role release-manager of acme or a \
             facilitator of acme; not pat (who started the session), not rui (already approved)."
        ),
        "{}",
        page.body
    );
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=approve&note=Looks+right.",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let approved = post_form(addr, &decide, &ann, &origin, &form).await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let done = read(&client, &waiting).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert!(done["provenance"].is_object());

    // The completed page says who signed off, on what ground and with what note.
    let page = get_signed_in(addr, &page_path, &ann).await;
    let signed = page
        .body
        .split(r#"id="signed-off""#)
        .nth(1)
        .unwrap_or_else(|| panic!("no signed-off section in {}", page.body));
    assert!(
        signed.contains("<strong>rui</strong> (release-manager) approved at")
            && signed.contains("<strong>ann</strong> (facilitator) approved at")
            && signed.contains(": Looks right."),
        "{signed}"
    );
}

/// A send-back answers the approvals still standing (none), a body that is not a decision is
/// answered in the JSON door's own shape with `request_invalid`, and a form post must prove it
/// comes from this server's pages: an `Origin` on this host, or without one
/// `Sec-Fetch-Site: same-origin` or a `Referer` on this host.
#[tokio::test]
async fn send_back_counts_no_approvals_bad_bodies_are_named_and_forms_prove_their_origin() {
    let Waiting {
        served,
        client,
        start,
        waiting,
        ..
    } = waiting_for_sign_off().await;
    let addr = served.addr;
    let session = waiting["session_id"].as_str().unwrap().to_owned();
    let api = format!("/admin/api/sessions/{session}/decisions");
    let rui = "Authorization: Bearer rui\r\n";

    // A decision bound to digests that are not the outputs' is refused, naming the path, over
    // JSON and from a form alike; the page's forms carry the digests it shows.
    let zeros = "0".repeat(64);
    let bound = json!({"action": "approve", "step": "write-note",
        "expect_sha256": [format!("note/note.md={zeros}")]});
    let (status, answer) = post_json(addr, &api, rui, &bound).await;
    assert_eq!(
        (status, answer["failure"]["code"].as_str()),
        (409, Some("approval_content_changed")),
        "{answer:#}"
    );
    assert_eq!(answer["failure"]["detail"]["path"], "note/note.md");
    let ann = sign_in(addr, "ann").await;
    let page_path = format!("/admin/sessions/{session}");
    let page = get_signed_in(addr, &page_path, &ann).await;
    let shown = field(&page.body, "expect_sha256");
    assert!(
        shown.contains(&format!(
            "note/note.md={}",
            Sha256Digest::of(NOTE.as_bytes())
        )),
        "{shown}"
    );
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=approve&expect_sha256=note%2Fnote.md%3D{zeros}",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let origin = format!("http://{addr}");
    let refused = post_form(addr, &format!("{page_path}/decide"), &ann, &origin, &form).await;
    assert_eq!(refused.status, 303, "{}", refused.body);
    assert!(
        refused.head.contains("?refused=approval_content_changed"),
        "{}",
        refused.head
    );
    let shown = get_signed_in(
        addr,
        &format!("{page_path}?refused=approval_content_changed"),
        &ann,
    )
    .await;
    assert!(
        shown
            .body
            .contains("Your decision was refused: an output is not the one this page showed"),
        "{}",
        shown.body
    );

    // One approval of two stands; a send-back leaves none.
    let approve = json!({"action": "approve", "step": "write-note"});
    let (status, answer) = post_json(addr, &api, rui, &approve).await;
    assert_eq!(
        (status, answer["approvals"].as_u64()),
        (200, Some(1)),
        "{answer:#}"
    );
    let back = json!({"action": "send_back", "step": "write-note", "note": "Split the backfill."});
    let (status, answer) = post_json(addr, &api, "Authorization: Bearer ann\r\n", &back).await;
    assert_eq!(status, 200, "{answer:#}");
    assert_eq!(answer["status"], "revise");
    assert_eq!(answer["approvals"], 0, "{answer:#}");
    assert_eq!(answer["approvals_needed"], 2);
    let revise = read(&client, &waiting).await;
    let waiting = pass(&client, &start, &revise).await;
    assert_eq!(waiting["status"], "awaiting_approval");

    // Bodies that are not decisions: an unknown field, broken JSON, a wrong type.
    for body in [
        r#"{"action": "send_back", "step": "write-note", "reason": "no"}"#,
        r#"{"action": "approve", "#,
        r#"{"action": 7, "step": "write-note"}"#,
    ] {
        let answer = post_body(addr, &api, rui, body).await;
        assert!(
            (400..500).contains(&answer.status),
            "{body}: {}",
            answer.status
        );
        let refused: Value = serde_json::from_str(&answer.body)
            .unwrap_or_else(|_| panic!("{body}: not JSON: {}", answer.body));
        assert_eq!(refused["result"], "refused", "{refused:#}");
        assert_eq!(refused["failure"]["code"], "request_invalid", "{refused:#}");
    }

    // Forms: no Origin and nothing else is refused; a same-origin fetch or a Referer on this
    // host proves the page.
    let page = get_signed_in(addr, &page_path, &ann).await;
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=send_back&note=Once+more.",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let post = |proof: String| {
        let form = form.clone();
        let path = format!("{page_path}/decide");
        let ann = ann.clone();
        async move {
            send(
                addr,
                format!(
                    "POST {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: rimthan_admin={ann}\r\n{proof}\
                     Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{form}",
                    form.len()
                ),
            )
            .await
        }
    };
    for proof in [
        String::new(),
        "Sec-Fetch-Site: cross-site\r\n".to_owned(),
        "Referer: https://evil.example/page\r\n".to_owned(),
        format!("Referer: http://{addr}.evil.example/\r\n"),
    ] {
        let refused = post(proof.clone()).await;
        assert_eq!(refused.status, 403, "{proof}: {}", refused.body);
    }
    assert_eq!(read(&client, &waiting).await["status"], "awaiting_approval");
    let sent = post("Sec-Fetch-Site: same-origin\r\n".to_owned()).await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    let revise = read(&client, &waiting).await;
    assert_eq!(revise["status"], "revise");
    let waiting = pass(&client, &start, &revise).await;
    let page = get_signed_in(addr, &page_path, &ann).await;
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=send_back&note=And+again.",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let answer = send(
        addr,
        format!(
            "POST {page_path}/decide HTTP/1.1\r\nHost: {addr}\r\nCookie: rimthan_admin={ann}\r\n\
             Referer: http://{addr}{page_path}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    )
    .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(read(&client, &waiting).await["status"], "revise");
}

#[tokio::test]
async fn where_nobody_authenticates_the_operator_at_the_machine_signs_off_under_an_asserted_name() {
    let Waiting {
        engine,
        served,
        client,
        waiting,
        ..
    } = waiting_on(false).await;
    let addr = served.addr;
    let origin = format!("http://{addr}");
    let session = waiting["session_id"].as_str().unwrap().to_owned();
    let page_path = format!("/admin/sessions/{session}");
    let api = format!("/admin/api/sessions/{session}/decisions");
    let get = |path: String| {
        send(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        )
    };

    // The page offers the forms, each asking who decides.
    let page = get(page_path.clone()).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(r#"name="as""#), "{}", page.body);
    let csrf = field(&page.body, "csrf");
    let revision = field(&page.body, "revision");
    let approve = |name: &str| {
        format!("csrf={csrf}&step=write-note&revision={revision}&action=approve&as={name}")
    };

    // No name, or a forged token, decides nothing.
    let nameless = post_form(
        addr,
        &format!("{page_path}/decide"),
        "",
        &origin,
        &approve(""),
    )
    .await;
    assert_eq!(nameless.status, 400, "{}", nameless.body);
    let forged = approve("ada").replace(&csrf, &"0".repeat(64));
    let forged = post_form(addr, &format!("{page_path}/decide"), "", &origin, &forged).await;
    assert_eq!(forged.status, 403, "{}", forged.body);

    // ada approves by the form, bo by the JSON door; nothing else is needed.
    let by_form = post_form(
        addr,
        &format!("{page_path}/decide"),
        "",
        &origin,
        &approve("ada"),
    )
    .await;
    assert_eq!(by_form.status, 303, "{}", by_form.body);
    let (status, nameless) = post_json(
        addr,
        &api,
        "",
        &json!({"action": "approve", "step": "write-note"}),
    )
    .await;
    assert_eq!(status, 403, "{nameless}");
    assert_eq!(nameless["failure"]["code"], "approval_not_authenticated");
    let (status, answer) = post_json(
        addr,
        &api,
        "",
        &json!({"action": "approve", "step": "write-note", "as": "bo"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["approvals"], 2);

    // Recorded as asserted, never as proven, and the participant's harness goes on.
    let id = session.parse().unwrap();
    let stored = engine.store().load_session(&id).await.unwrap().unwrap();
    let signed = serde_json::to_value(&stored.signoffs[&"write-note".parse().unwrap()]).unwrap();
    for approval in signed["approvals"].as_array().unwrap() {
        assert_eq!(approval["authenticated"], false, "{signed:#}");
        assert_eq!(approval["basis"], "local_operator", "{signed:#}");
    }
    let page = get(page_path).await;
    assert!(
        page.body.contains("name asserted, not authenticated"),
        "{}",
        page.body
    );
    assert_ne!(read(&client, &waiting).await["status"], "awaiting_approval");
}

#[tokio::test]
async fn a_server_that_authenticates_refuses_an_asserted_name_at_both_doors() {
    let Waiting {
        served, waiting, ..
    } = waiting_for_sign_off().await;
    let addr = served.addr;
    let session = waiting["session_id"].as_str().unwrap().to_owned();
    let api = format!("/admin/api/sessions/{session}/decisions");
    let (status, answer) = post_json(
        addr,
        &api,
        "Authorization: Bearer rui\r\n",
        &json!({"action": "approve", "step": "write-note", "as": "somebody else"}),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["failure"]["code"], "approval_not_authenticated");

    let ann = sign_in(addr, "ann").await;
    let page_path = format!("/admin/sessions/{session}");
    let page = get_signed_in(addr, &page_path, &ann).await;
    assert!(!page.body.contains(r#"name="as""#));
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=approve&as=somebody",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let refused = post_form(
        addr,
        &format!("{page_path}/decide"),
        &ann,
        &format!("http://{addr}"),
        &form,
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("approval_not_authenticated"));
}

#[tokio::test]
async fn a_role_holder_signs_in_to_what_waits_for_them_and_reads_it() {
    let Waiting {
        served, waiting, ..
    } = waiting_for_sign_off().await;
    let addr = served.addr;
    let session = waiting["session_id"].as_str().unwrap().to_owned();
    let page_path = format!("/admin/sessions/{session}");

    // rui holds release-manager, the role write-note's sign-off names.
    let rui = sign_in(addr, "rui").await;
    let front = get_signed_in(addr, "/admin", &rui).await;
    assert_eq!(front.status, 200, "{}", front.body);
    assert!(front.body.contains("Waiting for you"), "{}", front.body);
    assert!(front.body.contains(&session), "{}", front.body);
    // The same list for scripts (`rimthan sessions list --waiting-for-me`), with its own token.
    let (status, listed) =
        get_json(addr, "/admin/api/waiting", "Authorization: Bearer rui\r\n").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["waiting"][0]["id"], session.as_str(), "{listed}");
    assert_eq!(listed["waiting"][0]["step"], "write-note", "{listed}");
    // A facilitator the step admits finds it waiting for them too.
    let ann = sign_in(addr, "ann").await;
    let theirs = get_signed_in(addr, "/admin/waiting", &ann).await;
    assert!(theirs.body.contains(&session), "{}", theirs.body);
    let page = get_signed_in(addr, &page_path, &rui).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(r#"id="approve""#), "{}", page.body);
    assert!(
        page.body
            .contains("ALTER TABLE orders ADD COLUMN sales_channel text;")
    );
    // A facilitator's pages are not theirs.
    let stats = get_signed_in(addr, "/admin/workflows/release-note/1.0.0", &rui).await;
    assert_eq!(stats.status, 403, "{}", stats.body);
    let statement = get_signed_in(addr, &format!("{page_path}/provenance.json"), &rui).await;
    assert_eq!(statement.status, 404);
    let unknown = get_signed_in(addr, &format!("/admin/sessions/{}", "0".repeat(32)), &rui).await;
    assert_eq!(unknown.status, 404);

    // Once they approved and the other approval completed it, it no longer waits for them.
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=approve",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let origin = format!("http://{addr}");
    let approved = post_form(addr, &format!("{page_path}/decide"), &rui, &origin, &form).await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    // Approved by them, it waits for somebody else.
    let front = get_signed_in(addr, "/admin", &rui).await;
    assert!(!front.body.contains(&session), "{}", front.body);
    let page = get_signed_in(addr, &page_path, &ann).await;
    let form = format!(
        "csrf={}&step=write-note&revision={}&action=approve",
        field(&page.body, "csrf"),
        field(&page.body, "revision")
    );
    let approved = post_form(addr, &format!("{page_path}/decide"), &ann, &origin, &form).await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let front = get_signed_in(addr, "/admin", &rui).await;
    assert!(
        front.body.contains("Nothing waits for you."),
        "{}",
        front.body
    );
    assert_eq!(get_signed_in(addr, &page_path, &rui).await.status, 404);
}

//! The facilitator's view at `/admin` over real HTTP: who may open it, what each facilitator
//! sees, escaping, bad input, the Host allow-list and the loopback rule
//! (`docs/operations/facilitator.md` §3). The browser-driven test is `e2e/admin`.

use std::sync::Arc;

use rimthan_mcp::{
    Profile,
    admin::Access,
    auth::{Auth, Verifier},
};
use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::json;

use crate::common::*;

const HOSTILE: &str = "<script>alert(1)</script>";

fn token_file(dir: &std::path::Path) -> std::path::PathBuf {
    let hash = |t: &str| rimthan_registry::Sha256Digest::of(t.as_bytes()).to_string();
    let file = json!({"tokens": [
        {"sha256": hash("ada"), "principal": HOSTILE, "organization": "lab", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("lead"), "principal": "lead", "organization": "lab", "facilitator": "organization"},
        {"sha256": hash("other-lead"), "principal": "other", "organization": "field", "facilitator": "organization"},
        {"sha256": hash("orgless"), "principal": "orgless", "facilitator": "organization"},
        {"sha256": hash("ops"), "principal": "ops", "facilitator": "all"},
    ]});
    let path = dir.join("tokens.json");
    std::fs::write(&path, file.to_string()).unwrap();
    path
}

/// The status line, headers and body of a raw GET or POST.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

pub(crate) async fn send(addr: std::net::SocketAddr, request: String) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    Answer {
        status: head.split(' ').nth(1).unwrap().parse().unwrap(),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

async fn get(addr: std::net::SocketAddr, path: &str, headers: &str) -> Answer {
    send(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n"),
    )
    .await
}

pub(crate) async fn get_as(addr: std::net::SocketAddr, path: &str, token: &str) -> Answer {
    get(addr, path, &format!("Authorization: Bearer {token}\r\n")).await
}

#[tokio::test]
async fn only_facilitators_open_the_view_and_each_sees_their_organization() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = http_server_with(server(Profile::WorkflowEngine).await, |config| {
        facilitators_from(&file, config);
    })
    .await;
    let transport = StreamableHttpClientTransportConfig::with_uri(served.url.clone())
        .auth_header("ada".to_owned());
    let client = ().serve(StreamableHttpClientTransport::from_config(transport)).await.unwrap();
    let done = run_session(&client, "codex").await;
    let session = done["session_id"].as_str().unwrap().to_owned();
    let addr = served.addr;

    // Who may open it.
    assert_eq!(get(addr, "/admin", "").await.status, 401);
    assert_eq!(get_as(addr, "/admin", "nobody").await.status, 401);
    let participant = get_as(addr, "/admin", "ada").await;
    assert_eq!(participant.status, 403);
    assert!(
        participant.body.contains("participant"),
        "{}",
        participant.body
    );
    assert_eq!(get_as(addr, "/admin", "orgless").await.status, 403);

    // A facilitator of the session's organization sees it, escaped, under a policy that runs
    // no script.
    let list = get_as(addr, "/admin", "lead").await;
    assert_eq!(list.status, 200);
    assert!(list.body.contains(&session));
    assert!(list.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!list.body.contains(HOSTILE));
    assert!(
        list.head
            .contains("content-security-policy: default-src 'none'")
    );
    let page = get_as(addr, &format!("/admin/sessions/{session}"), "lead").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(r#"id="timeline""#) && page.body.contains(r#"id="outputs""#));
    assert!(page.body.contains(r#"id="reports""#), "{}", page.body);
    assert!(page.body.contains("<td>pass</td>"), "{}", page.body);
    let workflow = done["workflow"]["id"].as_str().unwrap();
    let version = done["workflow"]["version"].as_str().unwrap();
    let stats = get_as(
        addr,
        &format!("/admin/workflows/{workflow}/{version}"),
        "lead",
    )
    .await;
    assert_eq!(stats.status, 200);
    assert!(
        stats
            .body
            .contains(r#"data-step-index="0" data-reached="1""#),
        "{}",
        stats.body
    );
    assert!(stats.body.contains(r#"id="completed" data-count="1""#));
    assert!(
        stats
            .body
            .contains(r#"data-harness="codex" data-count="1""#)
    );

    // Another organization's facilitator sees none of it; one granted all sees it.
    let other = get_as(addr, "/admin", "other-lead").await;
    assert_eq!(other.status, 200);
    assert!(!other.body.contains(&session));
    assert_eq!(
        get_as(addr, &format!("/admin/sessions/{session}"), "other-lead")
            .await
            .status,
        404
    );
    let elsewhere = get_as(
        addr,
        &format!("/admin/workflows/{workflow}/{version}"),
        "other-lead",
    )
    .await;
    assert!(elsewhere.body.contains(r#"id="started" data-count="0""#));
    assert!(get_as(addr, "/admin", "ops").await.body.contains(&session));

    // Bad input: a page naming the problem, never a trace.
    for (path, status) in [
        ("/admin?status=bogus", 400),
        ("/admin?since=7%20weeks", 400),
        ("/admin?page=0", 400),
        ("/admin?page=99", 404),
        ("/admin/sessions/nope", 404),
        ("/admin/sessions/00000000000000000000000000000000", 404),
        ("/admin/workflows/no-such/1.0.0", 404),
    ] {
        let answer = get_as(addr, path, "ops").await;
        assert_eq!(answer.status, status, "{path}");
        assert!(answer.body.contains("<h1>"), "{path}");
    }
    let long = format!("/admin?workflow={}", "w".repeat(200));
    assert_eq!(get_as(addr, &long, "ops").await.status, 400);

    // A rebound DNS name is refused.
    let rebound = send(
        addr,
        "GET /admin HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ops\r\nConnection: close\r\n\r\n".into(),
    )
    .await;
    assert_eq!(rebound.status, 403);

    // The login form checks the token, then keeps it in a cookie only /admin reads. Like every
    // form post it must prove it comes from this server's page: an Origin on this host, or
    // without one Sec-Fetch-Site: same-origin (or a Referer on this host).
    let login = |token: &str| {
        let body = format!("token={token}");
        format!(
            "POST /admin/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let from = |request: String, proof: &str| {
        request.replace(
            "Host: 127.0.0.1\r\n",
            &format!("Host: 127.0.0.1\r\n{proof}\r\n"),
        )
    };
    assert_eq!(
        send(addr, from(login("ada"), "Origin: http://127.0.0.1"))
            .await
            .status,
        403
    );
    let elsewhere = from(login("lead"), "Origin: https://evil.example");
    assert_eq!(send(addr, elsewhere).await.status, 403);
    assert_eq!(
        send(addr, login("lead")).await.status,
        403,
        "no Origin, no proof"
    );
    let here = from(login("lead"), "Origin: http://127.0.0.1");
    assert_eq!(send(addr, here).await.status, 303);
    let signed_in = send(addr, from(login("lead"), "Sec-Fetch-Site: same-origin")).await;
    assert_eq!(signed_in.status, 303);
    // The cookie carries a sign-in handle, never the token.
    let handle = cookie_of(&signed_in);
    assert_eq!(handle.len(), 64, "{handle}");
    assert_ne!(handle, "lead");
    assert!(
        signed_in.head.contains(&format!(
            "set-cookie: rimthan_admin={handle}; path=/admin; httponly; samesite=strict"
        )),
        "{}",
        signed_in.head
    );
    let by_cookie = get(
        addr,
        "/admin",
        &format!("Cookie: theme=dark; rimthan_admin={handle}\r\n"),
    )
    .await;
    assert_eq!(by_cookie.status, 200);
    assert!(by_cookie.body.contains(&session));
    assert!(by_cookie.body.contains(r#"action="/admin/logout""#));

    // A token in the cookie, or a handle this server never issued, is no sign-in.
    for cookie in ["lead".to_owned(), "ab".repeat(32)] {
        let refused = get(
            addr,
            "/admin",
            &format!("Cookie: rimthan_admin={cookie}\r\n"),
        )
        .await;
        assert_eq!(refused.status, 403, "{cookie}");
        assert!(refused.body.contains("sign_in_ended"), "{}", refused.body);
    }

    // Sign out ends the sign-in: the same cookie afterwards is refused.
    let logout = format!(
        "POST /admin/logout HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1\r\n\
         Cookie: rimthan_admin={handle}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let out = send(addr, logout).await;
    assert_eq!(out.status, 303);
    assert!(out.head.contains("rimthan_admin=;"), "{}", out.head);
    let after = get(
        addr,
        "/admin",
        &format!("Cookie: rimthan_admin={handle}\r\n"),
    )
    .await;
    assert_eq!(after.status, 403);
}

/// The sign-in handle an answer's `Set-Cookie` carries.
pub(crate) fn cookie_of(answer: &Answer) -> String {
    answer
        .head
        .split("set-cookie: rimthan_admin=")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no sign-in cookie in {}", answer.head))
        .to_owned()
}

/// Signs `token` in through the login form; the sign-in handle its cookie carries.
pub(crate) async fn sign_in(addr: std::net::SocketAddr, token: &str) -> String {
    let body = format!("token={token}");
    let answer = send(
        addr,
        format!(
            "POST /admin/login HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert_eq!(answer.status, 303, "{token}: {}", answer.body);
    cookie_of(&answer)
}

/// A page as a browser signed in with `handle` sees it.
pub(crate) async fn get_signed_in(addr: std::net::SocketAddr, path: &str, handle: &str) -> Answer {
    get(addr, path, &format!("Cookie: rimthan_admin={handle}\r\n")).await
}

#[tokio::test]
async fn refused_sign_ins_past_the_allowance_get_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = http_server_with(server(Profile::WorkflowEngine).await, |config| {
        facilitators_from(&file, config);
    })
    .await;
    let addr = served.addr;
    let login = |token: &str| {
        let body = format!("token={token}");
        format!(
            "POST /admin/login HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
    };
    for guess in 0..rimthan_mcp::throttle::FAILURE_BURST {
        let refused = send(addr, login(&format!("guess{guess}"))).await;
        assert_eq!(refused.status, 401, "{}", refused.body);
    }
    let blocked = send(addr, login("one-more-guess")).await;
    assert_eq!(blocked.status, 429, "{}", blocked.body);
    assert!(blocked.head.contains("retry-after: "), "{}", blocked.head);
    assert!(blocked.body.contains("too_many_failed_credentials"));
    // While blocked no token is checked: a right one waits too.
    assert_eq!(send(addr, login("lead")).await.status, 429);
    // The same address's bearer requests to /admin wait too.
    assert_eq!(get_as(addr, "/admin", "lead").await.status, 429);
}

#[tokio::test]
async fn jwt_claims_grant_the_facilitator_role_for_one_organization_or_all() {
    use crate::auth::{ed25519_jwk, jwt, now, rules};
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        json!({"keys": [ed25519_jwk(&key, "k1")]}).to_string(),
    )
    .unwrap();
    let served = http_server_with(server(Profile::WorkflowEngine).await, |config| {
        let resource = format!("http://{}/mcp", config.listen);
        let mut rules = rules("https://issuer.example", &resource);
        rules.facilitator.organization = Some("roles=rimthan-facilitator".parse().unwrap());
        rules.facilitator.all = Some("groups=staff".parse().unwrap());
        let auth = Arc::new(Auth {
            verifier: Verifier::jwt_from_file(&jwks, rules).unwrap(),
            resource,
            authorization_servers: vec!["https://issuer.example".into()],
            scope: "rimthan:workflow".into(),
            throttle: Default::default(),
        });
        config.admin = Some(Access::Facilitators(auth.clone()));
        config.auth = Some(auth);
    })
    .await;
    let token = |extra: serde_json::Value| {
        let mut claims = json!({"iss": "https://issuer.example", "aud": served.url,
            "exp": now() + 600, "sub": "someone", "org": "lab"});
        claims
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        jwt(&key, claims)
    };
    let participant = token(json!({"scope": "rimthan:workflow"}));
    let lead = token(json!({"roles": ["reader", "rimthan-facilitator"]}));
    let staff = token(json!({"groups": "staff other"}));
    let near_miss = token(json!({"roles": "rimthan-facilitators"}));
    assert_eq!(
        get_as(served.addr, "/admin", &participant).await.status,
        403
    );
    // A value that only resembles the facilitator claim grants no facilitator's view; as a
    // role (the roles claim reads the same claim) it opens what waits for that role: nothing.
    let near = get_as(served.addr, "/admin", &near_miss).await;
    assert_eq!(near.status, 200);
    assert!(
        near.body
            .contains("sees the sessions waiting for their sign-off")
            && near.body.contains("Nothing waits for you."),
        "{}",
        near.body
    );
    let scoped = get_as(served.addr, "/admin", &lead).await;
    assert_eq!(scoped.status, 200);
    assert!(
        scoped
            .body
            .contains("organization <strong>lab</strong> only"),
        "{}",
        scoped.body
    );
    let everyone = get_as(served.addr, "/admin", &staff).await;
    assert_eq!(everyone.status, 200);
    assert!(everyone.body.contains("every organization"));
}

#[tokio::test]
async fn a_session_refused_without_end_shows_its_latest_calls_only() {
    use rimthan_engine::{AuditEntry, Code, Operation, Outcome};
    let server = server(Profile::WorkflowEngine).await;
    let store = server.engine().store().clone();
    let served = http_server_with(server, |config| config.admin = Some(Access::Loopback)).await;
    let client = modern_http_client(&served.url).await;
    let done = run_session(&client, "codex").await;
    let session: rimthan_engine::SessionId = done["session_id"].as_str().unwrap().parse().unwrap();
    for i in 0..600 {
        let refusal = AuditEntry {
            session_id: Some(session.clone()),
            seq: None,
            tool: Operation::GetActiveStep,
            outcome: Outcome::Rejected,
            codes: vec![Code::StaleCheckpoint],
            attestation_sha256: None,
            reports_sha256: None,
            principal: Some(format!("retry-{i}")),
            organization: None,
            workflow: None,
            judgement: None,
            checks: Vec::new(),
            decision: None,
            at: "2026-12-04T00:00:00Z".into(),
        };
        store.append_audit(&refusal).await.unwrap();
    }
    let page = get(served.addr, &format!("/admin/sessions/{session}"), "").await;
    assert_eq!(page.status, 200);
    let (_, rows) = page.body.split_once(r#"id="timeline""#).unwrap();
    let rows = rows
        .split("</table>")
        .next()
        .unwrap()
        .matches("<tr>")
        .count();
    assert_eq!(rows, 1 + 500, "a header row and the latest 500 calls");
    assert!(page.body.contains("prints them all"));
    assert!(
        !page.body.contains("start_workflow"),
        "the start is older than the latest 500"
    );
}

#[tokio::test]
async fn without_authentication_the_view_says_it_is_loopback_only() {
    let served = http_server_with(server(Profile::WorkflowEngine).await, |config| {
        config.admin = Some(Access::Loopback);
    })
    .await;
    let page = get(served.addr, "/admin", "").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("No authentication"));
    assert!(page.body.contains("loopback"));
    // Sign-in exists only where there is something to sign in with.
    assert_eq!(get(served.addr, "/admin/login", "").await.status, 404);
    let off = http_server(server(Profile::WorkflowEngine).await).await;
    assert_eq!(get(off.addr, "/admin", "").await.status, 404);
}

/// A completed session's page says its audit chain verifies and links the signed statement the
/// participant was handed, which the keys published at the well-known URL verify; a refusal the
/// server appends later keeps the chain whole. (Rows edited in the database are named by the
/// engine's `tests/audit_chain.rs`.)
#[tokio::test]
async fn a_session_page_shows_its_chain_and_links_its_signed_statement() {
    use rimthan_engine::provenance::{KeysDocument, PublicKeys, verify_envelope};
    let server = server(Profile::WorkflowEngine).await;
    let store = server.engine().store().clone();
    let served = http_server_with(server, |config| config.admin = Some(Access::Loopback)).await;
    let client = modern_http_client(&served.url).await;
    let done = run_session(&client, "codex").await;
    let session = done["session_id"].as_str().unwrap();
    let page = get(served.addr, &format!("/admin/sessions/{session}"), "").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(r#"id="audit-chain">verifies ("#),
        "{}",
        page.body
    );
    let link = format!("/admin/sessions/{session}/provenance.json");
    assert!(page.body.contains(&link));

    let statement = get(served.addr, &link, "").await;
    assert_eq!(statement.status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&statement.body).unwrap(),
        done["provenance"]["content"],
        "the facilitator sees the statement the participant was handed"
    );
    let keys = get(served.addr, "/.well-known/rimthan/provenance-keys.json", "").await;
    assert_eq!(keys.status, 200);
    let keys: KeysDocument = serde_json::from_str(&keys.body).unwrap();
    verify_envelope(
        statement.body.as_bytes(),
        &PublicKeys::from_files(&keys.keys),
    )
    .unwrap();

    let refusal = rimthan_engine::AuditEntry {
        session_id: Some(session.parse().unwrap()),
        seq: None,
        tool: rimthan_engine::Operation::GetActiveStep,
        outcome: rimthan_engine::Outcome::Rejected,
        codes: Vec::new(),
        attestation_sha256: None,
        reports_sha256: None,
        principal: None,
        organization: None,
        workflow: None,
        judgement: None,
        checks: Vec::new(),
        decision: None,
        at: "2026-12-04T00:00:00Z".into(),
    };
    store.append_audit(&refusal).await.unwrap();
    let page = get(served.addr, &format!("/admin/sessions/{session}"), "").await;
    assert!(
        page.body.contains("verifies"),
        "an append by the server keeps the chain whole"
    );
    assert_eq!(
        get(
            served.addr,
            "/admin/sessions/0123456789abcdef0123456789abcdef/provenance.json",
            ""
        )
        .await
        .status,
        404
    );
}

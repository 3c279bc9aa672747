//! The organization is the tenant, over HTTP in both credential modes (`docs/engine.md` §3.2):
//! `ada` of `lab`, `ada` of `field` and an `ada` of no organization, one idempotency key, three
//! sessions; none reads another's, and each organization's facilitator sees only its own.

use std::sync::Arc;

use rimthan_mcp::{
    Profile,
    admin::Access,
    auth::{Auth, Verifier},
    http::HttpConfig,
};
use serde_json::{Value, json};

use crate::{
    admin::get_as,
    auth::{ed25519_jwk, jwt, now, rules},
    common::*,
};

/// The bearer tokens of one scenario, however the server proves them.
struct Tokens {
    ada_of_lab: String,
    ada_of_field: String,
    ada_of_none: String,
    lead_of_lab: String,
    lead_of_field: String,
}

fn with_auth(config: &mut HttpConfig, verifier: impl FnOnce(&str) -> Verifier) {
    let resource = format!("http://{}/mcp", config.listen);
    let auth = Arc::new(Auth {
        verifier: verifier(&resource),
        resource,
        authorization_servers: vec![],
        scope: "rimthan:workflow".into(),
        throttle: Default::default(),
    });
    config.admin = Some(Access::Facilitators(auth.clone()));
    config.auth = Some(auth);
}

async fn client_with(url: &str, token: &str) -> Client {
    use rmcp::{
        ServiceExt,
        transport::{
            StreamableHttpClientTransport,
            streamable_http_client::StreamableHttpClientTransportConfig,
        },
    };
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

async fn two_organizations_share_nothing_but_a_subject_name(served: &HttpServer, tokens: &Tokens) {
    let mut start = start_arguments("codex");
    start["idempotency_key"] = json!("harness-run-shared");
    let mut clients = Vec::new();
    let mut sessions = Vec::new();
    for token in [
        &tokens.ada_of_lab,
        &tokens.ada_of_field,
        &tokens.ada_of_none,
    ] {
        let client = client_with(&served.url, token).await;
        let started = structured(&call(&client, rimthan_mcp::START, start.clone()).await);
        assert_eq!(started["status"], "active", "{started}");
        sessions.push(started);
        clients.push(client);
    }
    let id = |s: &Value| s["session_id"].as_str().unwrap().to_owned();
    let [lab, field, none] = [id(&sessions[0]), id(&sessions[1]), id(&sessions[2])];
    assert!(lab != field && lab != none && field != none, "{sessions:?}");
    let again = structured(&call(&clients[0], rimthan_mcp::START, start.clone()).await);
    assert_eq!(again["session_id"], lab.as_str(), "the owner's retry");

    for (caller, client) in clients.iter().enumerate() {
        for (owner, session) in sessions.iter().enumerate().filter(|(o, _)| *o != caller) {
            let resume = json!({"checkpoint": session["checkpoint"]});
            let refused = structured(&call(client, rimthan_mcp::ACTIVE_STEP, resume).await);
            assert_eq!(
                refused["failures"][0]["code"], "session_access_denied",
                "caller {caller} on the session of {owner}: {refused}"
            );
        }
    }

    for (lead, own, others) in [
        (&tokens.lead_of_lab, &lab, [&field, &none]),
        (&tokens.lead_of_field, &field, [&lab, &none]),
    ] {
        let list = get_as(served.addr, "/admin", lead).await;
        assert_eq!(list.status, 200);
        assert!(list.body.contains(own.as_str()));
        for other in others {
            assert!(!list.body.contains(other.as_str()));
            let page = get_as(served.addr, &format!("/admin/sessions/{other}"), lead).await;
            assert_eq!(page.status, 404);
        }
        let page = get_as(served.addr, &format!("/admin/sessions/{own}"), lead).await;
        assert_eq!(page.status, 200);
    }
    for client in clients {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn equal_subject_names_of_two_organizations_are_two_tenants_with_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let hash = |t: &str| rimthan_registry::Sha256Digest::of(t.as_bytes()).to_string();
    let file = json!({"tokens": [
        {"sha256": hash("ada-lab"), "principal": "ada", "organization": "lab", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("ada-field"), "principal": "ada", "organization": "field", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("ada-none"), "principal": "ada", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("lead-lab"), "principal": "lead", "organization": "lab", "facilitator": "organization"},
        {"sha256": hash("lead-field"), "principal": "lead", "organization": "field", "facilitator": "organization"},
    ]});
    let path = dir.path().join("tokens.json");
    std::fs::write(&path, file.to_string()).unwrap();
    let served = http_server_with(server(Profile::WorkflowEngine).await, |config| {
        with_auth(config, |_| Verifier::tokens_from_file(&path).unwrap());
    })
    .await;
    let tokens = Tokens {
        ada_of_lab: "ada-lab".into(),
        ada_of_field: "ada-field".into(),
        ada_of_none: "ada-none".into(),
        lead_of_lab: "lead-lab".into(),
        lead_of_field: "lead-field".into(),
    };
    two_organizations_share_nothing_but_a_subject_name(&served, &tokens).await;
}

#[tokio::test]
async fn equal_subject_names_of_two_organizations_are_two_tenants_with_jwts() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[11; 32]);
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        json!({"keys": [ed25519_jwk(&key, "k1")]}).to_string(),
    )
    .unwrap();
    let served = http_server_with(server(Profile::WorkflowEngine).await, |config| {
        with_auth(config, |resource| {
            let mut rules = rules("https://issuer.example", resource);
            rules.facilitator.organization = Some("roles=rimthan-facilitator".parse().unwrap());
            Verifier::jwt_from_file(&jwks, rules).unwrap()
        });
    })
    .await;
    let token = |subject: &str, organization: Option<&str>, grant: Value| {
        let mut claims = json!({"iss": "https://issuer.example", "aud": served.url,
            "exp": now() + 600, "sub": subject});
        if let Some(org) = organization {
            claims["org"] = json!(org);
        }
        claims
            .as_object_mut()
            .unwrap()
            .extend(grant.as_object().unwrap().clone());
        jwt(&key, claims)
    };
    let participant = || json!({"scope": "rimthan:workflow"});
    let facilitator = || json!({"roles": ["rimthan-facilitator"]});
    let tokens = Tokens {
        ada_of_lab: token("ada", Some("lab"), participant()),
        ada_of_field: token("ada", Some("field"), participant()),
        ada_of_none: token("ada", None, participant()),
        lead_of_lab: token("lead", Some("lab"), facilitator()),
        lead_of_field: token("lead", Some("field"), facilitator()),
    };
    two_organizations_share_nothing_but_a_subject_name(&served, &tokens).await;
}

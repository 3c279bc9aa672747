//! Bearer auth on the MCP endpoint: tokens and JWTs, 401/403 challenges, protected-resource
//! metadata, and session ownership across principals (the authenticated Git handoff).

use std::{sync::Arc, time::Duration};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use ed25519_dalek::Signer as _;
use rimthan_mcp::{
    Profile,
    auth::{Auth, DEFAULT_ALGORITHMS, JwtRules, Verifier},
    http::{self, HttpConfig},
};
use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::common::*;

struct Served {
    addr: std::net::SocketAddr,
    url: String,
    _stop: oneshot::Sender<()>,
}

async fn serve_with(verifier: impl FnOnce(&str) -> Verifier) -> Served {
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}/mcp");
    let mut config = HttpConfig::loopback(addr);
    config.auth = Some(Arc::new(Auth {
        verifier: verifier(&url),
        resource: url.clone(),
        authorization_servers: vec!["https://issuer.example".into()],
        scope: "rimthan:workflow".into(),
        throttle: Default::default(),
    }));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = server(Profile::WorkflowEngine).await;
    tokio::spawn(async move {
        http::serve(listener, server, &config, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Served {
        addr,
        url,
        _stop: stop,
    }
}

fn initialize(token: Option<&str>) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Status line and headers of a raw request.
async fn head(addr: std::net::SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn token_file(dir: &std::path::Path) -> std::path::PathBuf {
    let hash = |t: &str| rimthan_registry::Sha256Digest::of(t.as_bytes()).to_string();
    let file = json!({"tokens": [
        {"sha256": hash("ada-token"), "principal": "ada", "organization": "lab", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("grace-token"), "principal": "grace", "organization": "lab", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("mallory-token"), "principal": "mallory", "organization": "elsewhere", "scopes": ["rimthan:workflow"]},
        {"sha256": hash("reader-token"), "principal": "reader", "organization": "lab", "scopes": ["other:scope"]},
    ]});
    let path = dir.join("tokens.json");
    std::fs::write(&path, file.to_string()).unwrap();
    path
}

async fn client_with(url: &str, token: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_caller_without_a_valid_token_is_refused_before_its_body_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = serve_with(|_| Verifier::tokens_from_file(&file).unwrap()).await;
    for auth in ["", "Authorization: Bearer wrong-token\r\n"] {
        let mut stream = tokio::net::TcpStream::connect(served.addr).await.unwrap();
        // A body declared at 4 MiB of which one byte ever arrives: only an answer given
        // before the body is read comes back within the body timeout.
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 4194303\r\n\r\n["
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf))
            .await
            .expect("answered before the body arrived")
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn missing_bad_and_underscoped_tokens_are_challenged() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = serve_with(|_| Verifier::tokens_from_file(&file).unwrap()).await;
    let none = head(served.addr, &initialize(None)).await;
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    let challenge = format!(
        "resource_metadata=\"http://{}/.well-known/oauth-protected-resource/mcp\"",
        served.addr
    );
    assert!(
        none.to_lowercase().contains("www-authenticate: bearer") && none.contains(&challenge),
        "{none}"
    );
    let bad = head(served.addr, &initialize(Some("guess"))).await;
    assert!(
        bad.starts_with("HTTP/1.1 401") && bad.contains("error=\"invalid_token\""),
        "{bad}"
    );
    let scoped = head(served.addr, &initialize(Some("reader-token"))).await;
    assert!(
        scoped.starts_with("HTTP/1.1 403") && scoped.contains("insufficient_scope"),
        "{scoped}"
    );
    let good = head(served.addr, &initialize(Some("ada-token"))).await;
    assert!(good.starts_with("HTTP/1.1 200"), "{good}");
    let metadata = head(served.addr, "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await;
    assert!(
        metadata.starts_with("HTTP/1.1 200")
            && metadata.contains(&format!("\"resource\":\"{}\"", served.url)),
        "{metadata}"
    );
}

#[tokio::test]
async fn refused_tokens_past_the_allowance_get_429_and_even_a_good_token_waits() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = serve_with(|_| Verifier::tokens_from_file(&file).unwrap()).await;
    for guess in 0..rimthan_mcp::throttle::FAILURE_BURST {
        let bad = head(served.addr, &initialize(Some(&format!("guess-{guess}")))).await;
        assert!(bad.starts_with("HTTP/1.1 401"), "guess {guess}: {bad}");
    }
    let blocked = head(served.addr, &initialize(Some("one-more-guess"))).await;
    assert!(blocked.starts_with("HTTP/1.1 429"), "{blocked}");
    let retry_after: u64 = blocked
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        })
        .expect("a Retry-After header")
        .trim()
        .parse()
        .unwrap();
    assert!((1..=6).contains(&retry_after), "{blocked}");
    // While blocked no token is checked, so a right guess does not get through either.
    let good = head(served.addr, &initialize(Some("ada-token"))).await;
    assert!(good.starts_with("HTTP/1.1 429"), "{good}");
    let metrics = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(served.addr).await.unwrap();
        let get = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        stream.write_all(get.as_bytes()).await.unwrap();
        let mut page = String::new();
        stream.read_to_string(&mut page).await.unwrap();
        page
    };
    assert!(
        metrics.contains("rimthan_auth_throttled_total 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_same_organization_may_resume_and_others_may_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = serve_with(|_| Verifier::tokens_from_file(&file).unwrap()).await;
    let ada = client_with(&served.url, "ada-token").await;
    let payload = structured(&call(&ada, rimthan_mcp::START, start_arguments("codex")).await);
    let resume = json!({"checkpoint": payload["session_file"]["content"]["checkpoint"]});
    let grace = client_with(&served.url, "grace-token").await;
    let handed = structured(&call(&grace, rimthan_mcp::ACTIVE_STEP, resume.clone()).await);
    assert_eq!(handed["session_id"], payload["session_id"]);
    let mallory = client_with(&served.url, "mallory-token").await;
    let refused = structured(&call(&mallory, rimthan_mcp::ACTIVE_STEP, resume).await);
    assert_eq!(refused["failures"][0]["code"], "session_access_denied");
    for c in [ada, grace, mallory] {
        c.cancel().await.unwrap();
    }
}

/// An EdDSA-signed JWT, made by hand so the test shares no code with the verifier.
pub(crate) fn jwt(key: &ed25519_dalek::SigningKey, claims: Value) -> String {
    jwt_with_kid(key, "k1", claims)
}

fn jwt_with_kid(key: &ed25519_dalek::SigningKey, kid: &str, claims: Value) -> String {
    let header =
        URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA", "typ": "JWT", "kid": kid}).to_string());
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signature = key.sign(format!("{header}.{body}").as_bytes());
    format!(
        "{header}.{body}.{}",
        URL_SAFE_NO_PAD.encode(signature.to_bytes())
    )
}

#[tokio::test]
async fn jwts_are_checked_for_signature_issuer_audience_and_expiry() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
    let (_dir, served) = serve_jwks(&json!({"keys": [ed25519_jwk(&key, "k1")]})).await;
    let now = now();
    let claims = |aud: &str, exp: u64| {
        json!({"iss": "https://issuer.example", "aud": aud, "exp": exp,
        "sub": "ada", "org": "lab", "scope": "openid rimthan:workflow"})
    };
    let good = jwt(&key, claims(&served.url, now + 600));
    let cases = [
        ("valid", good.clone(), "200"),
        (
            "bad signature",
            jwt(&other, claims(&served.url, now + 600)),
            "401",
        ),
        (
            "wrong audience",
            jwt(&key, claims("https://elsewhere.example/mcp", now + 600)),
            "401",
        ),
        ("expired", jwt(&key, claims(&served.url, now - 600)), "401"),
    ];
    for (what, token, status) in cases {
        let response = head(served.addr, &initialize(Some(&token))).await;
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}")),
            "{what}: {response}"
        );
    }
    let client = client_with(&served.url, &good).await;
    let payload = structured(&call(&client, rimthan_mcp::START, start_arguments("codex")).await);
    assert_eq!(payload["status"], "active");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn scopes_are_read_from_scope_or_from_scp_as_a_string_or_an_array() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let (_dir, served) = serve_jwks(&json!({"keys": [ed25519_jwk(&key, "k1")]})).await;
    let with = |grant: Value| {
        let mut claims = json!({"iss": "https://issuer.example", "aud": served.url,
            "exp": now() + 600, "sub": "ada", "org": "lab"});
        claims
            .as_object_mut()
            .unwrap()
            .extend(grant.as_object().unwrap().clone());
        jwt(&key, claims)
    };
    for (grant, status) in [
        (json!({"scp": "openid rimthan:workflow"}), "200"),
        (json!({"scp": ["openid", "rimthan:workflow"]}), "200"),
        (json!({"scp": ["openid"]}), "403"),
        (json!({}), "403"),
    ] {
        let response = head(served.addr, &initialize(Some(&with(grant.clone())))).await;
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}")),
            "{grant}: {response}"
        );
    }
}

/// A test-only RSA key pair (`tests/data/jwt/`, PKCS#1 DER, made for these tests and nothing else):
/// the private key to sign with, and its public JWK, which pins `alg: RS256`.
fn rsa_key() -> (jsonwebtoken::EncodingKey, Value) {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jwt");
    let der = std::fs::read(data.join("rsa-2048.der")).unwrap();
    let jwk = std::fs::read_to_string(data.join("rsa-2048.jwk.json")).unwrap();
    (
        jsonwebtoken::EncodingKey::from_rsa_der(&der),
        serde_json::from_str(&jwk).unwrap(),
    )
}

fn rsa_jwt(
    key: &jsonwebtoken::EncodingKey,
    alg: jsonwebtoken::Algorithm,
    claims: &Value,
) -> String {
    let mut header = jsonwebtoken::Header::new(alg);
    header.kid = Some("rsa1".into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub(crate) fn rules(issuer: &str, audience: &str) -> JwtRules {
    JwtRules {
        issuer: issuer.into(),
        audience: audience.into(),
        organization_claim: "org".into(),
        facilitator: Default::default(),
        roles_claim: Some("roles".into()),
        algorithms: DEFAULT_ALGORITHMS.to_vec(),
    }
}

async fn serve_jwks(jwks: &Value) -> (tempfile::TempDir, Served) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks.to_string()).unwrap();
    let served = serve_with(|url| {
        Verifier::jwt_from_file(&path, rules("https://issuer.example", url)).unwrap()
    })
    .await;
    (dir, served)
}

#[tokio::test]
async fn jwt_validation_is_pinned_by_the_key_and_checks_every_time_claim() {
    use jsonwebtoken::Algorithm::{PS256, RS256, RS512};
    let (key, jwk) = rsa_key();
    let (_dir, served) = serve_jwks(&json!({"keys": [jwk]})).await;
    let claims = |change: &dyn Fn(&mut Value)| {
        let mut claims = json!({"iss": "https://issuer.example", "aud": served.url,
            "exp": now() + 600, "iat": now(), "sub": "ada", "org": "lab",
            "scope": "rimthan:workflow"});
        change(&mut claims);
        claims
    };
    let good = rsa_jwt(&key, RS256, &claims(&|_| {}));
    let ok = head(served.addr, &initialize(Some(&good))).await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let cases: [(&str, String, &str); 6] = [
        (
            "RS512 on an RS256 key",
            rsa_jwt(&key, RS512, &claims(&|_| {})),
            "algorithm not allowed for this key",
        ),
        (
            "PS256 on an RS256 key",
            rsa_jwt(&key, PS256, &claims(&|_| {})),
            "algorithm not allowed for this key",
        ),
        (
            "not valid for 30 days",
            rsa_jwt(
                &key,
                RS256,
                &claims(&|c| c["nbf"] = json!(now() + 30 * 86_400)),
            ),
            "token not valid yet",
        ),
        (
            "issued tomorrow",
            rsa_jwt(&key, RS256, &claims(&|c| c["iat"] = json!(now() + 86_400))),
            "token issued in the future",
        ),
        (
            "empty subject",
            rsa_jwt(&key, RS256, &claims(&|c| c["sub"] = json!(""))),
            "no subject",
        ),
        (
            "expired",
            rsa_jwt(&key, RS256, &claims(&|c| c["exp"] = json!(now() - 600))),
            "token expired",
        ),
    ];
    for (what, token, reason) in cases {
        let answer = head(served.addr, &initialize(Some(&token))).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{what}: {answer}");
        assert!(
            answer.contains(&format!(
                "error=\"invalid_token\", error_description=\"{reason}\""
            )),
            "{what}: {answer}"
        );
        assert!(!answer.contains(&token), "{what}: the token is echoed");
    }
    // Within the leeway, a skewed clock is no reason to refuse.
    let skewed = rsa_jwt(&key, RS256, &claims(&|c| c["nbf"] = json!(now() + 30)));
    let answer = head(served.addr, &initialize(Some(&skewed))).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn key_sets_that_cannot_pin_an_asymmetric_algorithm_are_refused_at_load() {
    let (_, rsa) = rsa_key();
    let mut es256_on_rsa = rsa.clone();
    es256_on_rsa["alg"] = json!("ES256");
    let mut hs256_on_rsa = rsa.clone();
    hs256_on_rsa["alg"] = json!("HS256");
    let cases = [
        (
            "a shared secret",
            json!({"keys": [rsa.clone(), {"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]}),
            "shared-secret",
        ),
        (
            "ES256 on an RSA key",
            json!({"keys": [es256_on_rsa]}),
            "does not fit",
        ),
        (
            "HS256 on an RSA key",
            json!({"keys": [hs256_on_rsa]}),
            "not an asymmetric",
        ),
        ("no key", json!({"keys": []}), "no key"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, jwks, reason) in cases {
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap();
        let refused =
            Verifier::jwt_from_file(&path, rules("https://i", "https://a/mcp")).expect_err(what);
        assert!(refused.to_string().contains(reason), "{what}: {refused}");
    }
}

#[test]
fn the_algorithm_allow_list_pins_keys_without_alg_and_refuses_keys_outside_it() {
    let (_, rsa) = rsa_key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    let only = |algorithms: &[jsonwebtoken::Algorithm]| JwtRules {
        algorithms: algorithms.to_vec(),
        ..rules("https://i", "https://a/mcp")
    };
    // Declared RS256, allowed only PS256: refused at load, naming what is allowed.
    std::fs::write(&path, json!({"keys": [rsa.clone()]}).to_string()).unwrap();
    let refused =
        Verifier::jwt_from_file(&path, only(&[jsonwebtoken::Algorithm::PS256])).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("alg RS256 is not allowed (allowed: PS256)"),
        "{refused}"
    );
    // No alg: the first allowed algorithm that fits an RSA key, or a refusal when none does.
    let mut bare = rsa.clone();
    bare.as_object_mut().unwrap().remove("alg");
    std::fs::write(&path, json!({"keys": [bare]}).to_string()).unwrap();
    Verifier::jwt_from_file(
        &path,
        only(&[
            jsonwebtoken::Algorithm::ES256,
            jsonwebtoken::Algorithm::PS256,
        ]),
    )
    .unwrap();
    let refused =
        Verifier::jwt_from_file(&path, only(&[jsonwebtoken::Algorithm::ES256])).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("no allowed algorithm (ES256) fits a RSA key"),
        "{refused}"
    );
}

#[tokio::test]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = serve_with(|_| Verifier::tokens_from_file(&file).unwrap()).await;
    for scheme in ["BEARER", "bEaReR"] {
        let request = initialize(Some("ada-token"))
            .replace("Bearer ada-token", &format!("{scheme} ada-token"));
        let answer = head(served.addr, &request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{scheme}: {answer}");
    }
}

#[test]
fn static_tokens_advertise_no_authorization_server() {
    let dir = tempfile::tempdir().unwrap();
    let auth = Auth {
        verifier: Verifier::tokens_from_file(&token_file(dir.path())).unwrap(),
        resource: "https://mcp.example.com/mcp".into(),
        authorization_servers: vec![],
        scope: "rimthan:workflow".into(),
        throttle: Default::default(),
    };
    let metadata = auth.metadata();
    assert!(
        metadata.get("authorization_servers").is_none(),
        "{metadata}"
    );
    assert_eq!(metadata["resource"], "https://mcp.example.com/mcp");
}

pub(crate) fn ed25519_jwk(key: &ed25519_dalek::SigningKey, kid: &str) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig",
        "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes())})
}

#[tokio::test]
async fn a_token_signed_by_a_newly_published_key_works_on_its_first_use() {
    let (old, new) = (
        ed25519_dalek::SigningKey::from_bytes(&[7; 32]),
        ed25519_dalek::SigningKey::from_bytes(&[9; 32]),
    );
    let (dir, served) = serve_jwks(&json!({"keys": [ed25519_jwk(&old, "k1")]})).await;
    let claims = json!({"iss": "https://issuer.example", "aud": served.url, "exp": now() + 600,
        "sub": "ada", "org": "lab", "scope": "rimthan:workflow"});
    let token = jwt_with_kid(&new, "k2", claims.clone());
    let before = head(served.addr, &initialize(Some(&token))).await;
    assert!(
        before.contains("error_description=\"unknown signing key\""),
        "{before}"
    );
    // The issuer publishes its next key; the very next call signed with it is accepted.
    let jwks = json!({"keys": [ed25519_jwk(&old, "k1"), ed25519_jwk(&new, "k2")]});
    std::fs::write(dir.path().join("jwks.json"), jwks.to_string()).unwrap();
    let after = head(served.addr, &initialize(Some(&token))).await;
    assert!(after.starts_with("HTTP/1.1 200"), "{after}");
    // The old key still works until the issuer withdraws it.
    let old_token = jwt_with_kid(&old, "k1", claims);
    assert!(
        head(served.addr, &initialize(Some(&old_token)))
            .await
            .starts_with("HTTP/1.1 200")
    );
}

#[tokio::test]
async fn a_changed_token_file_takes_effect_without_a_restart_and_a_broken_one_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let file = token_file(dir.path());
    let served = serve_with(|_| Verifier::tokens_from_file(&file).unwrap()).await;
    let newcomer = initialize(Some("newcomer-token"));
    assert!(
        head(served.addr, &newcomer)
            .await
            .starts_with("HTTP/1.1 401")
    );
    let mut tokens: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    tokens["tokens"].as_array_mut().unwrap().push(json!({
        "sha256": rimthan_registry::Sha256Digest::of(b"newcomer-token").to_string(),
        "principal": "newcomer", "organization": "lab", "scopes": ["rimthan:workflow"]}));
    std::fs::write(&file, tokens.to_string()).unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        head(served.addr, &newcomer)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // A half-written file does not lock everyone out: the last good tokens stay in force.
    std::fs::write(&file, "{\"tokens\": [").unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        head(served.addr, &newcomer)
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert!(
        head(served.addr, &initialize(Some("ada-token")))
            .await
            .starts_with("HTTP/1.1 200")
    );
}

/// A discovery document and key set served from loopback as a misconfigured provider would
/// publish them (the real provider in `e2e/node/test/oidc.test.mjs` refuses to publish these).
async fn provider_publishing(
    issuer_suffix: &str,
    jwks: Value,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let discovery =
        json!({"issuer": format!("{base}{issuer_suffix}"), "jwks_uri": format!("{base}/jwks")});
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || std::future::ready(axum::Json(discovery.clone()))),
        )
        .route(
            "/jwks",
            axum::routing::get(move || std::future::ready(axum::Json(jwks.clone()))),
        );
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, task)
}

#[tokio::test]
async fn a_misconfigured_provider_keeps_the_server_unready_and_says_what_to_fix() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let cases = [
        ("", json!({"keys": []}), "no key"),
        (
            "",
            json!({"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]}),
            "shared-secret",
        ),
        (
            "/other",
            json!({"keys": [ed25519_jwk(&key, "k1")]}),
            "discovery document names issuer",
        ),
        ("", json!({"keys": [ed25519_jwk(&key, "k1")]}), ""),
    ];
    for (suffix, jwks, reason) in cases {
        let (base, task) = provider_publishing(suffix, jwks).await;
        let provider = rimthan_mcp::oidc::OidcProvider::new(rules(&base, "https://a/mcp")).unwrap();
        assert!(provider.ready().is_err(), "not ready before a first fetch");
        let loaded = provider.refresh().await;
        match provider.ready() {
            Ok(()) => assert!(loaded && reason.is_empty(), "{base}: ready"),
            Err(why) => assert!(
                !reason.is_empty() && why.contains(reason),
                "{reason}: {why}"
            ),
        }
        task.abort();
    }
}

#[tokio::test]
async fn an_unreachable_provider_keeps_the_last_good_keys_in_force() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let (base, task) = provider_publishing("", json!({"keys": [ed25519_jwk(&key, "k1")]})).await;
    let provider = rimthan_mcp::oidc::OidcProvider::new(rules(&base, "https://a/mcp")).unwrap();
    assert!(provider.refresh().await);
    task.abort();
    let _ = task.await;
    assert!(!provider.refresh().await, "the provider is gone");
    assert_eq!(
        provider.ready(),
        Ok(()),
        "the last good key set still serves"
    );
}

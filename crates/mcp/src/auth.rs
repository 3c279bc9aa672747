//! Bearer authentication for the MCP endpoint, as an OAuth 2.1 resource server (MCP
//! authorization spec): static hashed tokens or JWTs checked against a JWKS, `401` with
//! `WWW-Authenticate: Bearer resource_metadata=…`, `403` for a missing scope, and the RFC 9728
//! protected-resource metadata. The caller becomes a [`Principal`] on the request; tokens are
//! never logged.

use std::{collections::BTreeMap, sync::Arc};

use axum::{
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
pub use jsonwebtoken::Algorithm;
use jsonwebtoken::{
    DecodingKey, Validation,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm},
};
use rimthan_engine::Principal;
use rimthan_registry::{RoleName, Sha256Digest};
use serde::Deserialize;
use serde_json::json;

use crate::body::Bodies;
pub use crate::{
    caller::{Caller, ClaimGrant, FacilitatorClaims, Sight},
    credentials::Verifier,
};

/// The scope a caller needs for the workflow tools.
pub const DEFAULT_SCOPE: &str = "rimthan:workflow";

/// The refusal of a JWT whose key is not (yet) in the key set.
pub(crate) const UNKNOWN_SIGNING_KEY: &str = "unknown signing key";

/// Seconds of clock skew allowed on `exp`, `nbf` and `iat`.
pub const JWT_LEEWAY_SECONDS: u64 = 60;

/// A signing key of the issuer, with the one algorithm it may verify. The algorithm is the
/// key's, never the token's: a token whose header names another is refused before any
/// signature check.
#[derive(Clone)]
pub struct PinnedKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

impl std::fmt::Debug for PinnedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedKey")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// The algorithms accepted unless configured otherwise, in order of preference: a key without
/// `alg` gets the first one that fits its type (an RSA key: RS256).
pub const DEFAULT_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
    Algorithm::PS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// How JWTs are judged: the issuer, audience and organization claim they must carry, and the
/// signature algorithms keys may be pinned to.
#[derive(Debug, Clone)]
pub struct JwtRules {
    /// Required `iss`.
    pub issuer: String,
    /// Required `aud` (the server's resource URL).
    pub audience: String,
    /// The claim that names the organization.
    pub organization_claim: String,
    /// The claims that grant the facilitator role.
    pub facilitator: FacilitatorClaims,
    /// The claim whose values are the caller's roles, if any.
    pub roles_claim: Option<String>,
    /// Allowed algorithms, in order of preference for keys that declare none.
    pub algorithms: Vec<Algorithm>,
}

fn names(algorithms: &[Algorithm]) -> String {
    algorithms
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The asymmetric signature algorithm a JWK is for: its `alg`, which must be allowed, or without
/// one the first allowed algorithm its key type and curve fit (RSA: RS*/PS*; P-256: ES256;
/// P-384: ES384; Ed25519: EdDSA). Shared secrets (`oct`), encryption algorithms and unknown key
/// types are refused.
fn key_algorithm(jwk: &Jwk, allowed: &[Algorithm]) -> Result<Algorithm, String> {
    let family = match &jwk.algorithm {
        AlgorithmParameters::OctetKey(_) => {
            return Err("a shared-secret (oct) key: anyone who can verify with it can sign; publish the issuer's public keys only".into());
        }
        AlgorithmParameters::RSA(_) => "RSA",
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => "P-256",
            EllipticCurve::P384 => "P-384",
            _ => return Err("an elliptic curve other than P-256 or P-384".into()),
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => "Ed25519",
        _ => return Err("a key type that signs nothing this server verifies".into()),
    };
    let fits = |algorithm: Algorithm| {
        matches!(
            (family, algorithm),
            (
                "RSA",
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ) | ("P-256", Algorithm::ES256)
                | ("P-384", Algorithm::ES384)
                | ("Ed25519", Algorithm::EdDSA)
        )
    };
    let algorithm = match jwk.common.key_algorithm {
        None => allowed.iter().copied().find(|a| fits(*a)).ok_or_else(|| {
            format!(
                "no allowed algorithm ({}) fits a {family} key; give the key an alg or allow one",
                names(allowed)
            )
        })?,
        Some(alg) => {
            let algorithm = match alg {
                KeyAlgorithm::RS256 => Algorithm::RS256,
                KeyAlgorithm::RS384 => Algorithm::RS384,
                KeyAlgorithm::RS512 => Algorithm::RS512,
                KeyAlgorithm::PS256 => Algorithm::PS256,
                KeyAlgorithm::PS384 => Algorithm::PS384,
                KeyAlgorithm::PS512 => Algorithm::PS512,
                KeyAlgorithm::ES256 => Algorithm::ES256,
                KeyAlgorithm::ES384 => Algorithm::ES384,
                KeyAlgorithm::EdDSA => Algorithm::EdDSA,
                other => {
                    return Err(format!(
                        "alg {other} is not an asymmetric signature algorithm"
                    ));
                }
            };
            if !fits(algorithm) {
                return Err(format!("alg {alg} does not fit a {family} key"));
            }
            if !allowed.contains(&algorithm) {
                return Err(format!(
                    "alg {alg} is not allowed (allowed: {})",
                    names(allowed)
                ));
            }
            algorithm
        }
    };
    Ok(algorithm)
}

/// Every key of `jwks` pinned to one of the `allowed` algorithms; any unusable key refuses the
/// whole set, so a typo never silently narrows who can sign in.
pub fn pin_keys(jwks: &JwkSet, allowed: &[Algorithm]) -> Result<Vec<PinnedKey>, String> {
    if jwks.keys.is_empty() {
        return Err("the JWKS holds no key".into());
    }
    jwks.keys
        .iter()
        .enumerate()
        .map(|(i, jwk)| {
            let at = |reason: String| format!("keys[{i}]: {reason}");
            let algorithm = key_algorithm(jwk, allowed).map_err(at)?;
            let key = DecodingKey::from_jwk(jwk).map_err(|e| at(format!("unusable: {e}")))?;
            Ok(PinnedKey {
                kid: jwk.common.key_id.clone(),
                algorithm,
                key,
            })
        })
        .collect()
}

/// Why authentication could not be configured.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct AuthConfigError {
    /// The file at fault.
    pub file: String,
    /// What to change.
    pub reason: String,
}

/// One entry of a token file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    /// sha256 of the bearer token, hex.
    sha256: String,
    principal: String,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    /// Opens the facilitator's view: `organization` or `all`.
    #[serde(default)]
    facilitator: Option<Sight>,
    /// Roles a step's approval may name.
    #[serde(default)]
    roles: Vec<RoleName>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    tokens: Vec<TokenEntry>,
}

/// What a credentials file holds, parsed and checked: how callers prove who they are.
#[derive(Debug, Clone)]
pub(crate) enum Credentials {
    /// Hashed static tokens: sha256(token) → who it proves.
    Tokens(BTreeMap<Sha256Digest, Caller>),
    /// JWTs signed by a key of the JWKS, judged by the rules.
    Jwt {
        /// The keys, each pinned to its algorithm.
        keys: Vec<PinnedKey>,
        /// Issuer, audience and organization claim.
        rules: Box<JwtRules>,
    },
}

impl Credentials {
    /// Parses a token file: `{"tokens": [{"sha256", "principal", "organization", "scopes",
    /// "facilitator", "roles"}]}`.
    pub(crate) fn tokens(text: &str) -> Result<Self, String> {
        let file: TokenFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut table = BTreeMap::new();
        for (i, entry) in file.tokens.into_iter().enumerate() {
            let digest: Sha256Digest = entry.sha256.parse().map_err(|_| {
                format!(
                    "tokens[{i}].sha256 must be the 64-hex sha256 of the token, never the token"
                )
            })?;
            let caller = Caller {
                principal: Principal {
                    subject: entry.principal,
                    organization: entry.organization,
                },
                scopes: entry.scopes,
                facilitator: entry.facilitator,
                roles: entry.roles,
            };
            if table.insert(digest, caller).is_some() {
                return Err(format!("tokens[{i}] repeats a token hash"));
            }
        }
        Ok(Credentials::Tokens(table))
    }

    /// Parses a JWKS for JWT validation, every key pinned to its algorithm.
    pub(crate) fn jwks(text: &str, rules: JwtRules) -> Result<Self, String> {
        let jwks: JwkSet = serde_json::from_str(text).map_err(|e| format!("not a JWKS: {e}"))?;
        Ok(Credentials::Jwt {
            keys: pin_keys(&jwks, &rules.algorithms)?,
            rules: Box::new(rules),
        })
    }

    /// Whether this holds no key or token at all.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Credentials::Tokens(table) => table.is_empty(),
            Credentials::Jwt { keys, .. } => keys.is_empty(),
        }
    }

    /// Who a bearer token proves, or why not.
    pub(crate) fn verify(&self, token: &str) -> Result<Caller, &'static str> {
        match self {
            Credentials::Tokens(table) => table
                .get(&Sha256Digest::of(token.as_bytes()))
                .cloned()
                .ok_or("unknown token"),
            Credentials::Jwt { keys, rules } => {
                let header = jsonwebtoken::decode_header(token).map_err(|_| "malformed token")?;
                let pinned = match &header.kid {
                    Some(kid) => keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
                    None if keys.len() == 1 => keys.first(),
                    None => None,
                }
                .ok_or(UNKNOWN_SIGNING_KEY)?;
                if header.alg != pinned.algorithm {
                    return Err("algorithm not allowed for this key");
                }
                let mut validation = Validation::new(pinned.algorithm);
                validation.leeway = JWT_LEEWAY_SECONDS;
                validation.validate_nbf = true;
                validation.set_issuer(&[&rules.issuer]);
                validation.set_audience(&[&rules.audience]);
                validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
                let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                    token,
                    &pinned.key,
                    &validation,
                )
                .map_err(|e| match e.kind() {
                    jsonwebtoken::errors::ErrorKind::ExpiredSignature => "token expired",
                    jsonwebtoken::errors::ErrorKind::ImmatureSignature => "token not valid yet",
                    jsonwebtoken::errors::ErrorKind::InvalidIssuer => "wrong issuer",
                    jsonwebtoken::errors::ErrorKind::InvalidAudience => "wrong audience",
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => "bad signature",
                    jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(_) => {
                        "a required claim is missing"
                    }
                    _ => "invalid token",
                })?;
                let claims = data.claims;
                let issued_at = claims
                    .get("iat")
                    .map(|v| v.as_u64().ok_or("iat is not a time"));
                if let Some(iat) = issued_at.transpose()? {
                    let now = jsonwebtoken::get_current_timestamp();
                    if iat > now + JWT_LEEWAY_SECONDS {
                        return Err("token issued in the future");
                    }
                }
                let subject = claims
                    .get("sub")
                    .and_then(|v| v.as_str())
                    .filter(|s| !s.trim().is_empty())
                    .ok_or("no subject")?
                    .to_owned();
                let organization = claims
                    .get(&rules.organization_claim)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                Ok(Caller {
                    principal: Principal {
                        subject,
                        organization,
                    },
                    scopes: scopes_of(&claims),
                    facilitator: rules.facilitator.sight(&claims),
                    roles: crate::caller::roles_in(&claims, rules.roles_claim.as_deref()),
                })
            }
        }
    }
}

/// The granted scopes: RFC 9068's space-separated `scope`, or `scp` as Entra ID (a
/// space-separated string) and Okta (an array) write it.
fn scopes_of(claims: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    let words = |v: &serde_json::Value| -> Vec<String> {
        match v {
            serde_json::Value::String(s) => s.split_whitespace().map(str::to_owned).collect(),
            serde_json::Value::Array(items) => items
                .iter()
                .filter_map(|i| i.as_str())
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    };
    ["scope", "scp"]
        .iter()
        .filter_map(|name| claims.get(*name))
        .flat_map(words)
        .collect()
}

/// The authentication layer's settings.
#[derive(Debug, Clone)]
pub struct Auth {
    /// How tokens are checked.
    pub verifier: Verifier,
    /// The MCP endpoint's public URL (the token audience and PRM `resource`).
    pub resource: String,
    /// Authorization servers to advertise in the metadata.
    pub authorization_servers: Vec<String>,
    /// The scope the workflow tools need.
    pub scope: String,
    /// Refused credentials counted per client address, for `/mcp` and `/admin` together.
    pub throttle: Arc<crate::throttle::Throttle>,
}

impl Auth {
    fn metadata_url(&self) -> String {
        let (origin, path) = split_url(&self.resource);
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }

    fn challenge(
        &self,
        status: StatusCode,
        error: Option<&str>,
        description: Option<&str>,
    ) -> Response {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\", scope=\"{}\"",
            self.metadata_url(),
            self.scope
        );
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        // A fixed reason from this file, never the token or anything it carries.
        if let Some(description) = description {
            value.push_str(&format!(", error_description=\"{description}\""));
        }
        let mut response = (
            status,
            axum::Json(json!({"error": error.unwrap_or("unauthorized")})),
        )
            .into_response();
        if let Ok(header) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, header);
        }
        response
    }

    /// RFC 9728 protected-resource metadata.
    pub fn metadata(&self) -> serde_json::Value {
        let mut metadata = json!({
            "resource": self.resource,
            "scopes_supported": [self.scope],
            "bearer_methods_supported": ["header"],
            "resource_name": "rimthan workflow engine",
        });
        // Optional in RFC 9728: static tokens come from no authorization server, and an empty
        // list would tell OAuth clients to look for one that does not exist.
        if !self.authorization_servers.is_empty() {
            metadata["authorization_servers"] = json!(self.authorization_servers);
        }
        metadata
    }
}

/// `https://host:port/mcp` → (`https://host:port`, `/mcp`).
fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110 §11.1).
pub(crate) fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Axum middleware: authenticates the request or answers 401/403 without reading its body.
pub(crate) async fn require(
    State((auth, bodies)): State<(Arc<Auth>, Bodies)>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let peer = request
        .extensions()
        .get::<crate::throttle::Peer>()
        .map(|p| p.0);
    let blocked = peer.and_then(|p| auth.throttle.blocked(p));
    let refusal = match (token, blocked) {
        (None, _) => auth.challenge(StatusCode::UNAUTHORIZED, None, None),
        // No token is checked while its address is blocked, so a guess then cannot succeed.
        (Some(_), Some(wait)) => too_many_failures(wait),
        (Some(token), None) => match auth.verifier.verify(token).await {
            Err(reason) => {
                tracing::info!(reason, "bearer token refused");
                match peer.and_then(|p| auth.throttle.failed(p)) {
                    Some(wait) => too_many_failures(wait),
                    None => auth.challenge(
                        StatusCode::UNAUTHORIZED,
                        Some("invalid_token"),
                        Some(reason),
                    ),
                }
            }
            Ok(caller) if !caller.scopes.iter().any(|s| *s == auth.scope) => auth.challenge(
                StatusCode::FORBIDDEN,
                Some("insufficient_scope"),
                Some("the token lacks the required scope"),
            ),
            Ok(caller) => {
                tracing::debug!(subject = %caller.principal.subject, "authenticated");
                request.extensions_mut().insert(caller.principal);
                return next.run(request).await;
            }
        },
    };
    // Refused before its body was read: none of it is ever buffered.
    bodies.refuse(request.into_body(), refusal)
}

/// `429` with `Retry-After`: this address's refused tokens spent its allowance
/// (`crate::throttle`).
fn too_many_failures(wait: std::time::Duration) -> Response {
    let seconds = crate::throttle::retry_after(wait);
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        axum::Json(json!({
            "error": "too_many_failed_credentials",
            "retry_after": seconds,
        })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer t", "bearer t", "BEARER t", "bEaReR  t "] {
            assert_eq!(bearer_token(value), Some("t"), "{value}");
        }
        for value in ["Basic t", "Bearer", "Bearer ", "Bearert"] {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }

    #[test]
    fn urls_split_into_origin_and_path() {
        assert_eq!(
            split_url("https://mcp.example.com/mcp"),
            ("https://mcp.example.com", "/mcp")
        );
        assert_eq!(
            split_url("http://127.0.0.1:8787"),
            ("http://127.0.0.1:8787", "")
        );
    }
}

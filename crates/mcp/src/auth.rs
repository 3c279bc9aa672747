//! Bearer authentication for the MCP endpoint, as an OAuth 2.1 resource server (MCP
//! authorization spec): static hashed tokens or JWTs checked against a JWKS, `401` with
//! `WWW-Authenticate: Bearer resource_metadata=…`, `403` for a missing scope, and the RFC 9728
//! protected-resource metadata. The caller becomes a [`Principal`] on the request; tokens are
//! never logged.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use axum::{
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use jsonwebtoken::{DecodingKey, Validation, jwk::JwkSet};
use rimthan_engine::Principal;
use rimthan_registry::Sha256Digest;
use serde::Deserialize;
use serde_json::json;

/// The scope a caller needs for the workflow tools.
pub const DEFAULT_SCOPE: &str = "rimthan:workflow";

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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    tokens: Vec<TokenEntry>,
}

/// How callers prove who they are.
#[derive(Debug, Clone)]
pub enum Verifier {
    /// Hashed static tokens: sha256(token) → principal, organization, scopes.
    Tokens(BTreeMap<Sha256Digest, (Principal, Vec<String>)>),
    /// JWTs signed by a key of the JWKS, with this issuer and audience.
    Jwt {
        /// The keys.
        jwks: JwkSet,
        /// Required `iss`.
        issuer: String,
        /// Required `aud` (the server's resource URL).
        audience: String,
        /// The claim that names the organization.
        organization_claim: String,
    },
}

impl Verifier {
    /// Reads a token file: `{"tokens": [{"sha256", "principal", "organization", "scopes"}]}`.
    pub fn tokens_from_file(path: &Path) -> Result<Self, AuthConfigError> {
        let error = |reason: String| AuthConfigError {
            file: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let file: TokenFile = serde_json::from_str(&text).map_err(|e| error(e.to_string()))?;
        let mut table = BTreeMap::new();
        for (i, entry) in file.tokens.into_iter().enumerate() {
            let digest: Sha256Digest = entry.sha256.parse().map_err(|_| {
                error(format!(
                    "tokens[{i}].sha256 must be the 64-hex sha256 of the token, never the token"
                ))
            })?;
            let principal = Principal {
                subject: entry.principal,
                organization: entry.organization,
            };
            if table.insert(digest, (principal, entry.scopes)).is_some() {
                return Err(error(format!("tokens[{i}] repeats a token hash")));
            }
        }
        Ok(Verifier::Tokens(table))
    }

    /// Reads a JWKS file for JWT validation.
    pub fn jwt_from_file(
        path: &Path,
        issuer: String,
        audience: String,
        organization_claim: String,
    ) -> Result<Self, AuthConfigError> {
        let error = |reason: String| AuthConfigError {
            file: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let jwks: JwkSet =
            serde_json::from_str(&text).map_err(|e| error(format!("not a JWKS: {e}")))?;
        if jwks.keys.is_empty() {
            return Err(error("the JWKS holds no key".into()));
        }
        Ok(Verifier::Jwt {
            jwks,
            issuer,
            audience,
            organization_claim,
        })
    }

    /// The principal and scopes a bearer token proves, or why not.
    fn verify(&self, token: &str) -> Result<(Principal, Vec<String>), &'static str> {
        match self {
            Verifier::Tokens(table) => table
                .get(&Sha256Digest::of(token.as_bytes()))
                .cloned()
                .ok_or("unknown token"),
            Verifier::Jwt {
                jwks,
                issuer,
                audience,
                organization_claim,
            } => {
                let header = jsonwebtoken::decode_header(token).map_err(|_| "malformed token")?;
                let jwk = match &header.kid {
                    Some(kid) => jwks.find(kid),
                    None if jwks.keys.len() == 1 => jwks.keys.first(),
                    None => None,
                }
                .ok_or("unknown signing key")?;
                let key = DecodingKey::from_jwk(jwk).map_err(|_| "unusable signing key")?;
                let mut validation = Validation::new(header.alg);
                validation.set_issuer(&[issuer]);
                validation.set_audience(&[audience]);
                validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
                let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                    token,
                    &key,
                    &validation,
                )
                .map_err(|_| "invalid token")?;
                let claims = data.claims;
                let subject = claims
                    .get("sub")
                    .and_then(|v| v.as_str())
                    .ok_or("no subject")?
                    .to_owned();
                let organization = claims
                    .get(organization_claim)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                let scopes = claims
                    .get("scope")
                    .and_then(|v| v.as_str())
                    .map(|s| s.split_whitespace().map(str::to_owned).collect())
                    .unwrap_or_default();
                Ok((
                    Principal {
                        subject,
                        organization,
                    },
                    scopes,
                ))
            }
        }
    }
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
}

impl Auth {
    fn metadata_url(&self) -> String {
        let (origin, path) = split_url(&self.resource);
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }

    fn challenge(&self, status: StatusCode, error: Option<&str>) -> Response {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\", scope=\"{}\"",
            self.metadata_url(),
            self.scope
        );
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
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
        json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "scopes_supported": [self.scope],
            "bearer_methods_supported": ["header"],
            "resource_name": "rimthan workflow engine",
        })
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

/// Axum middleware: authenticates the request or answers 401/403.
pub async fn require(State(auth): State<Arc<Auth>>, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return auth.challenge(StatusCode::UNAUTHORIZED, None);
    };
    match auth.verifier.verify(token) {
        Err(reason) => {
            tracing::info!(reason, "bearer token refused");
            auth.challenge(StatusCode::UNAUTHORIZED, Some("invalid_token"))
        }
        Ok((_, scopes)) if !scopes.iter().any(|s| *s == auth.scope) => {
            auth.challenge(StatusCode::FORBIDDEN, Some("insufficient_scope"))
        }
        Ok((principal, _)) => {
            tracing::debug!(subject = %principal.subject, "authenticated");
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

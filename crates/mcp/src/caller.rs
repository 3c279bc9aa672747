//! Who a verified credential names, and whether it opens the facilitator's view
//! (`docs/operations/facilitator.md` §3): a token file entry says so itself; a JWT says so by a
//! claim carrying a configured value.

use std::str::FromStr;

use rimthan_engine::{
    Principal,
    approval::{Approver, FacilitatorOf, Identity},
};
use rimthan_registry::RoleName;
use serde::Deserialize;

/// Which sessions a facilitator sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sight {
    /// Those of the facilitator's own organization.
    Organization,
    /// Those of every organization.
    All,
}

/// What a verified credential proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who it is.
    pub principal: Principal,
    /// The scopes it grants on `/mcp`.
    pub scopes: Vec<String>,
    /// Whether, and how widely, it opens `/admin`.
    pub facilitator: Option<Sight>,
    /// The roles it grants, which a step's approval may name (`docs/engine.md` §6.2).
    pub roles: Vec<RoleName>,
}

impl Caller {
    /// The caller as an approver of steps that need sign-off.
    pub fn approver(&self) -> Approver {
        Approver {
            principal: self.principal.clone(),
            facilitator: match self.facilitator {
                None => FacilitatorOf::Nobody,
                Some(Sight::Organization) => FacilitatorOf::OwnOrganization,
                Some(Sight::All) => FacilitatorOf::Everyone,
            },
            roles: self.roles.clone(),
            identity: Identity::Verified,
        }
    }
}

/// The roles a JWT's `claim` grants: its string value split on spaces, or its array's strings;
/// a value that is not a role name is skipped.
pub(crate) fn roles_in(
    claims: &serde_json::Map<String, serde_json::Value>,
    claim: Option<&str>,
) -> Vec<RoleName> {
    let values: Vec<&str> = match claim.and_then(|c| claims.get(c)) {
        Some(serde_json::Value::String(s)) => s.split_whitespace().collect(),
        Some(serde_json::Value::Array(items)) => items.iter().filter_map(|i| i.as_str()).collect(),
        _ => Vec::new(),
    };
    let mut roles: Vec<RoleName> = values
        .into_iter()
        .take(MAX_CLAIMED_ROLES)
        .filter_map(|v| v.parse().ok())
        .collect();
    roles.sort();
    roles.dedup();
    roles
}

/// The most role values read from one token's claim.
const MAX_CLAIMED_ROLES: usize = 64;

/// A claim whose value grants a role, written `CLAIM=VALUE`: granted when the claim is that
/// string, or an array holding it, or a space-separated list naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimGrant {
    /// The claim's name (`roles`, `groups`, …).
    pub claim: String,
    /// The value that grants the role.
    pub value: String,
}

impl FromStr for ClaimGrant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('=') {
            Some((claim, value)) if !claim.trim().is_empty() && !value.trim().is_empty() => {
                Ok(Self {
                    claim: claim.trim().to_owned(),
                    value: value.trim().to_owned(),
                })
            }
            _ => Err(format!(
                "{:?} is not CLAIM=VALUE (for example roles=rimthan-facilitator)",
                text.chars().take(64).collect::<String>()
            )),
        }
    }
}

impl ClaimGrant {
    /// Whether `claims` carry the value.
    pub(crate) fn granted(&self, claims: &serde_json::Map<String, serde_json::Value>) -> bool {
        match claims.get(&self.claim) {
            Some(serde_json::Value::String(s)) => {
                *s == self.value || s.split_whitespace().any(|w| w == self.value)
            }
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .any(|i| i.as_str() == Some(self.value.as_str())),
            _ => false,
        }
    }
}

/// The claims that grant the facilitator role to a JWT's subject.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FacilitatorClaims {
    /// Grants sight of the subject's own organization.
    pub organization: Option<ClaimGrant>,
    /// Grants sight of every organization.
    pub all: Option<ClaimGrant>,
}

impl FacilitatorClaims {
    /// What `claims` grant; sight of all wins over one organization.
    pub(crate) fn sight(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<Sight> {
        let granted =
            |grant: &Option<ClaimGrant>| grant.as_ref().is_some_and(|g| g.granted(claims));
        if granted(&self.all) {
            Some(Sight::All)
        } else if granted(&self.organization) {
            Some(Sight::Organization)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_claim_grants_by_string_list_or_array_and_all_wins() {
        let rules = FacilitatorClaims {
            organization: Some("roles=facilitator".parse().unwrap()),
            all: Some("groups=staff".parse().unwrap()),
        };
        let sight = |v| rules.sight(&claims(v));
        assert_eq!(
            sight(serde_json::json!({"roles": "facilitator"})),
            Some(Sight::Organization)
        );
        assert_eq!(
            sight(serde_json::json!({"roles": "reader facilitator"})),
            Some(Sight::Organization)
        );
        assert_eq!(
            sight(serde_json::json!({"roles": ["x", "facilitator"]})),
            Some(Sight::Organization)
        );
        assert_eq!(
            sight(serde_json::json!({"roles": "facilitator", "groups": ["staff"]})),
            Some(Sight::All)
        );
        assert_eq!(sight(serde_json::json!({"roles": "facilitators"})), None);
        assert_eq!(
            sight(serde_json::json!({"roles": {"facilitator": true}})),
            None
        );
        assert_eq!(sight(serde_json::json!({})), None);
        assert!("roles".parse::<ClaimGrant>().is_err());
        assert!("=x".parse::<ClaimGrant>().is_err());
        assert!("roles=".parse::<ClaimGrant>().is_err());
    }
}

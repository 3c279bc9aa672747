//! A step's sign-off (`docs/registry-format.md` §2.4): after its validators and checks pass, a
//! step that declares `approval` waits until enough distinct people allowed to approve it have
//! done so. Who may approve is named by kind, never by person, so one release serves every
//! organization: facilitators of the session's organization, or holders of a role the server's
//! credentials grant (a token file's `roles`, or values of a configured JWT claim).

use serde::{Deserialize, Serialize};

use crate::{
    duration::IsoDuration,
    ids::{CheckId, OnExpiry, RoleName},
};

/// The most distinct approvers a step may ask for.
pub const MAX_APPROVERS: u8 = 5;
/// The most roles one step may name.
pub const MAX_ROLES: usize = 16;

/// Who must sign a step off, and what they may waive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// Distinct people who must approve, 1 to [`MAX_APPROVERS`].
    pub approvers: u8,
    /// Whether facilitators of the session's organization may approve.
    #[serde(default)]
    pub facilitators: bool,
    /// Holders of any of these roles may approve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleName>,
    /// Whether the session's own participant may approve it (default no).
    #[serde(default)]
    pub self_approval: bool,
    /// Whether an approver may waive a failed check's finding instead of sending the step back;
    /// absent, no finding can be waived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waivers: Option<Waivers>,
    /// How long after the request its deciders are reminded, once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_after: Option<IsoDuration>,
    /// How long after the request it expires, undecided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_after: Option<IsoDuration>,
    /// What expiry does (with `expires_after`; `send_back` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expiry: Option<OnExpiry>,
}

/// Which check findings an approver may waive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Waivers {
    /// Checks whose findings may never be waived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<CheckId>,
}

impl Approval {
    /// What is wrong with the declaration, given the ids of its step's checks; none when it is
    /// sound.
    pub fn problem(&self, step_checks: &[CheckId]) -> Option<String> {
        if self.approvers == 0 || self.approvers > MAX_APPROVERS {
            return Some(format!(
                "approval.approvers is {}; ask for 1 to {MAX_APPROVERS} distinct approvers",
                self.approvers
            ));
        }
        if !self.facilitators && self.roles.is_empty() {
            return Some(
                "approval names nobody who may approve; set facilitators: true or list roles"
                    .into(),
            );
        }
        if self.roles.len() > MAX_ROLES {
            return Some(format!(
                "approval lists {} roles; name at most {MAX_ROLES}",
                self.roles.len()
            ));
        }
        let mut roles = self.roles.clone();
        roles.sort();
        roles.dedup();
        if roles.len() != self.roles.len() {
            return Some("approval lists a role twice".into());
        }
        if let Some(problem) = self.timer_problem() {
            return Some(problem);
        }
        if let Some(waivers) = &self.waivers {
            if step_checks.is_empty() {
                return Some(
                    "approval.waivers is set on a step without checks; a waiver applies to a \
                     failed check's finding, so drop it or add the check"
                        .into(),
                );
            }
            if let Some(unknown) = waivers.forbidden.iter().find(|c| !step_checks.contains(c)) {
                return Some(format!(
                    "approval.waivers.forbidden names check {unknown}, which this step does not run"
                ));
            }
        }
        None
    }

    fn timer_problem(&self) -> Option<String> {
        let remind = self
            .remind_after
            .and_then(|d| d.timer_problem("approval.remind_after"));
        let expire = self
            .expires_after
            .and_then(|d| d.timer_problem("approval.expires_after"));
        if remind.is_some() || expire.is_some() {
            return remind.or(expire);
        }
        if let (Some(remind), Some(expire)) = (self.remind_after, self.expires_after)
            && remind >= expire
        {
            return Some(format!(
                "approval.remind_after ({remind}) is not before approval.expires_after \
                 ({expire}); remind before the sign-off expires, or drop remind_after"
            ));
        }
        if self.on_expiry.is_some() && self.expires_after.is_none() {
            return Some(
                "approval.on_expiry is set without approval.expires_after; say when the \
                 sign-off expires, or drop on_expiry"
                    .into(),
            );
        }
        None
    }

    /// What expiry does, when the sign-off expires at all.
    pub fn expiry(&self) -> Option<(IsoDuration, OnExpiry)> {
        self.expires_after
            .map(|after| (after, self.on_expiry.unwrap_or(OnExpiry::SendBack)))
    }

    /// Whether a finding of `check` may be waived.
    pub fn waivable(&self, check: &CheckId) -> bool {
        self.waivers
            .as_ref()
            .is_some_and(|w| !w.forbidden.contains(check))
    }
}

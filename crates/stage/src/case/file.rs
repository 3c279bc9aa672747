//! The case files (`workflows/<id>/<version>/tests/<case>/case.json`, `docs/authoring.md` §13):
//! what a case says, found and bounded before anything runs.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use rimthan_engine::approval::Decision;
use rimthan_registry::{Harness, Version, WorkflowId};
use serde::Deserialize;

use crate::StageError;

/// The folder of a workflow version's cases.
pub const TESTS_DIR: &str = "tests";
/// A case's description file.
pub const CASE_FILE: &str = "case.json";
/// Bounds on what a case file may ask, checked before anything runs.
const MAX_CASE_BYTES: u64 = 256 << 10;
const MAX_SUBMISSIONS: usize = 256;

/// One case, as its `case.json` says.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    /// What the case shows, for the person reading a failure.
    #[serde(default)]
    pub description: String,
    /// The harness to behave as (default: the first the workflow pins, in name order).
    #[serde(default)]
    pub harness: Option<Harness>,
    /// Each submission in order, with what must come of it.
    pub submissions: Vec<Submission>,
    /// The session's status after the last submission (default: whatever the last expected
    /// outcome implies).
    #[serde(default)]
    pub status: Option<String>,
}

/// One submission of a step and what must come of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    /// The step that must be active.
    pub step: String,
    /// Output path → the file to write there, relative to the case's folder and inside the
    /// workflow version's (others: the author's example).
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
    /// Validators whose report fails this round.
    #[serde(default)]
    pub fail: BTreeSet<String>,
    /// `advanced`, `revise`, `awaiting_approval`, `completed` or `rejected`.
    pub expect: Expect,
    /// With `revise`: exactly the failing checks' rules and validators' ids that send it back.
    #[serde(default)]
    pub sent_back_by: Option<BTreeSet<String>>,
    /// With `awaiting_approval`: exactly the failed checks' rules an approver must waive.
    #[serde(default)]
    pub to_waive: Option<BTreeSet<String>>,
    /// With `rejected`: the codes the server answers.
    #[serde(default)]
    pub codes: Option<BTreeSet<String>>,
    /// With `awaiting_approval`: what people decide then, in order; the next submission (or
    /// the case's `status`) says where that leaves the session.
    #[serde(default)]
    pub decisions: Vec<DecisionCase>,
    /// Then the case's clock moves on this long (ISO 8601, `PT25H`, `P3D`) and the server fires
    /// every timer that came due: a reminder, a sign-off's expiry, a step's deadline.
    #[serde(default)]
    pub wait: Option<rimthan_registry::IsoDuration>,
}

/// One sign-off decision, made under an asserted name as `rimthan stage --sign-off-as` makes
/// it (`docs/operations/facilitator.md`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionCase {
    /// The approver's name.
    pub by: String,
    /// `approve`, `send_back` or `waive`.
    pub decide: Decide,
    /// The approval's note (optional), the send-back's note or the waiver's reason.
    #[serde(default)]
    pub note: Option<String>,
    /// A waiver: the failed check, its rule and the output path of its finding.
    #[serde(default)]
    pub check: Option<String>,
    /// A waiver: the rule.
    #[serde(default)]
    pub rule: Option<String>,
    /// A waiver: the output path.
    #[serde(default)]
    pub path: Option<String>,
    /// The code the server refuses the decision with; absent: it must be recorded.
    #[serde(default)]
    pub refused: Option<String>,
}

/// A kind of sign-off decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decide {
    /// Approve the step.
    Approve,
    /// Send it back with a note.
    SendBack,
    /// Waive one failed check's finding.
    Waive,
}

impl Decide {
    /// As a case file spells it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Decide::Approve => "approve",
            Decide::SendBack => "send_back",
            Decide::Waive => "waive",
        }
    }
}

impl DecisionCase {
    pub(super) fn decision(&self, case_file: &Path) -> Result<Decision, StageError> {
        let need = |field: &Option<String>, name: &str| {
            field.clone().ok_or_else(|| {
                invalid(
                    case_file,
                    format!("a {} decision names its {name}", self.decide.as_str()),
                )
            })
        };
        Ok(match self.decide {
            Decide::Approve => Decision::Approve {
                note: self.note.clone(),
            },
            Decide::SendBack => Decision::SendBack {
                note: need(&self.note, "note")?,
            },
            Decide::Waive => Decision::Waive {
                check: need(&self.check, "check")?
                    .parse()
                    .map_err(|e: rimthan_registry::IdError| invalid(case_file, e.to_string()))?,
                rule: need(&self.rule, "rule")?,
                path: need(&self.path, "path")?,
                reason: need(&self.note, "note (the reason)")?,
            },
        })
    }
}

/// What must come of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The next step is active.
    Advanced,
    /// The step is sent back.
    Revise,
    /// The step waits for sign-off.
    AwaitingApproval,
    /// The session completed.
    Completed,
    /// The server refused the preparation or the submission.
    Rejected,
}

impl Expect {
    /// As `rimthan stage` records an outcome.
    pub(super) fn recorded(self) -> &'static str {
        match self {
            Expect::Advanced => "advanced",
            Expect::Revise => "revise",
            Expect::AwaitingApproval => "awaiting approval",
            Expect::Completed => "completed",
            Expect::Rejected => "rejected",
        }
    }
}

/// A case found in a release source.
#[derive(Debug, Clone)]
pub struct Case {
    /// The workflow.
    pub workflow: WorkflowId,
    /// Its version.
    pub version: Version,
    /// The case's folder name.
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// What it says.
    pub file: CaseFile,
}

/// Every case under `source/workflows/*/*/tests/*/case.json`, in path order; only `workflow`'s
/// when given. A case file that does not parse or breaks a bound is an error naming it.
pub fn find_cases(source: &Path, workflow: Option<&WorkflowId>) -> Result<Vec<Case>, StageError> {
    let mut cases = Vec::new();
    for (id, versions) in subdirs(&source.join("workflows"))? {
        let Ok(id) = id.parse::<WorkflowId>() else {
            continue;
        };
        if workflow.is_some_and(|w| *w != id) {
            continue;
        }
        for (version, dir) in subdirs(&versions)? {
            let Ok(version) = version.parse::<Version>() else {
                continue;
            };
            let tests = dir.join(TESTS_DIR);
            if !tests.is_dir() {
                continue;
            }
            for (name, dir) in subdirs(&tests)? {
                let path = dir.join(CASE_FILE);
                let text = rimthan_registry::read_regular_file(&path, MAX_CASE_BYTES)
                    .map_err(|e| invalid(&path, e.to_string()))?;
                let file: CaseFile =
                    serde_json::from_slice(&text).map_err(|e| invalid(&path, e.to_string()))?;
                if file.submissions.is_empty() || file.submissions.len() > MAX_SUBMISSIONS {
                    return Err(invalid(
                        &path,
                        format!("a case lists 1 to {MAX_SUBMISSIONS} submissions"),
                    ));
                }
                cases.push(Case {
                    workflow: id.clone(),
                    version: version.clone(),
                    name,
                    dir,
                    file,
                });
            }
        }
    }
    Ok(cases)
}

pub(super) fn invalid(path: &Path, reason: String) -> StageError {
    StageError::CaseInvalid {
        path: path.display().to_string(),
        reason,
    }
}

/// The folders in `dir` by name, sorted; none when `dir` does not exist.
fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, StageError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StageError::io(dir, e))?;
        if entry
            .file_type()
            .map_err(|e| StageError::io(dir, e))?
            .is_dir()
        {
            found.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ));
        }
    }
    found.sort();
    Ok(found)
}

/// `file`, relative to the case's folder `dir`, resolved by its words alone; none unless it
/// stays inside the workflow version's folder (`dir`'s grandparent), so a case reads the
/// version's own examples and counter-examples and nothing else of the machine.
pub(super) fn within_version(dir: &Path, file: &str) -> Option<PathBuf> {
    use std::path::Component;
    let version = dir.parent()?.parent()?;
    let mut resolved = dir.to_path_buf();
    for part in Path::new(file).components() {
        match part {
            Component::Normal(name) => resolved.push(name),
            Component::ParentDir if resolved != version => {
                resolved.pop();
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    (resolved.starts_with(version) && resolved != version).then_some(resolved)
}

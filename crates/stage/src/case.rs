//! Workflow test cases (`rimthan registry test`, `docs/authoring.md` §13): a case scripts what
//! the harness submits at each step (outputs of its own instead of the author's examples,
//! validators that fail) and states what must happen at each submission; [`run_case`] runs it
//! as `rimthan stage` does, in process against the real engine, and names the first place where
//! the session went otherwise.
//!
//! ```text
//! workflows/<id>/<version>/tests/<case>/case.json
//! workflows/<id>/<version>/tests/<case>/<any file the case's outputs name>
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::Arc,
};

use rimthan_registry::{Harness, Version, WorkflowId};
use serde::Deserialize;

use rimthan_engine::{
    SessionId,
    approval::{Decision, DecisionResult},
};

use crate::{Script, StageConfig, StageError, StepRecord, Target, client::local_engine};

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
    fn as_str(self) -> &'static str {
        match self {
            Decide::Approve => "approve",
            Decide::SendBack => "send_back",
            Decide::Waive => "waive",
        }
    }
}

impl DecisionCase {
    fn decision(&self, case_file: &Path) -> Result<Decision, StageError> {
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
    fn recorded(self) -> &'static str {
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

fn invalid(path: &Path, reason: String) -> StageError {
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

/// Runs `case` against `target` (a server in this process on the release under test) in
/// `project`, as `harness`: `None` when everything happened as the case says, else the first
/// divergence, in words.
pub async fn run_case(
    case: &Case,
    harness: Harness,
    target: Target,
    project: PathBuf,
) -> Result<Option<String>, StageError> {
    let submissions = &case.file.submissions;
    let case_file = case.dir.join(CASE_FILE);
    // One engine for the whole case: the harness's runs and people's decisions share it.
    let engine = match &target {
        Target::InProcess {
            database_url,
            registry,
            serving,
        } => Some(local_engine(database_url, registry.as_deref(), serving).await?),
        Target::Engine(engine) => Some(engine.clone()),
        Target::Url { .. } => None,
    };
    let target = engine.clone().map_or(target, Target::Engine);
    // Each submission as the harness saw it, and the refusal codes of a refused one.
    let mut records: Vec<(StepRecord, Vec<String>)> = Vec::new();
    let mut status = String::new();
    let mut start = 0;
    // The case's clock: how far past the real time the waits have moved it.
    let mut waited = 0u64;
    // The submissions up to one that people decide on, or after which the clock moves, run as
    // one `stage` run; the next resumes from the session file, as a harness does once people
    // have decided or time has passed.
    while start < submissions.len() {
        let end = submissions[start..]
            .iter()
            .position(|s| !s.decisions.is_empty() || s.wait.is_some())
            .map_or(submissions.len(), |p| start + p + 1);
        let segment = &submissions[start..end];
        let mut config = StageConfig::new(harness, target.clone(), project.clone());
        config.workflow = Some(case.workflow.clone());
        config.workflow_version = Some(case.version.clone());
        config.resume = start > 0;
        config.stop_after = Some(segment.len());
        config.script = Some(Arc::new(script(case, segment)?));
        let before = records.len();
        let outcome = crate::run(&config, &mut |record, _, _| {
            records.push((record.clone(), Vec::new()));
        })
        .await;
        let session = match outcome {
            Ok(summary) => {
                status = summary.status;
                Some(summary.session_id)
            }
            // A refusal ends the run; it is the outcome of the submission it refused.
            Err(StageError::Rejected { step, codes, .. }) => {
                let refused = StepRecord {
                    step,
                    outcome: "rejected".to_owned(),
                    millis: 0,
                    files: Vec::new(),
                    sent_back_by: Vec::new(),
                    to_waive: Vec::new(),
                };
                records.push((refused, codes));
                status = "rejected".to_owned();
                None
            }
            Err(e) => return Err(e),
        };
        if let Some(divergence) = diverges(start, segment, &records[before..]) {
            return Ok(Some(divergence));
        }
        let last = segment.last().expect("a segment holds a submission");
        let Some(session) = session.filter(|_| records.len() == end) else {
            break;
        };
        if last.decisions.is_empty() && last.wait.is_none() {
            start = end;
            continue;
        }
        let engine = engine.as_deref().ok_or_else(|| {
            invalid(
                &case_file,
                "decisions and waits need a server in this process".into(),
            )
        })?;
        let id: SessionId = session.parse().map_err(|_| StageError::Protocol {
            tool: rimthan_mcp::START.into(),
            detail: format!("session id {session:?} does not parse"),
        })?;
        let decisions = &last.decisions;
        for (k, decision) in decisions.iter().enumerate() {
            let what = format!(
                "submission {end}, decision {} ({} by {})",
                k + 1,
                decision.decide.as_str(),
                decision.by
            );
            let (_, result) =
                crate::decide::decide(engine, &id, decision.decision(&case_file)?, &decision.by)
                    .await?;
            match (result, &decision.refused) {
                (DecisionResult::Recorded { status: now, .. }, None) => {
                    status = now.as_str().to_owned();
                }
                (DecisionResult::Refused { failure }, Some(code))
                    if failure.code.as_str() == code => {}
                (DecisionResult::Recorded { .. }, Some(code)) => {
                    return Ok(Some(format!(
                        "{what}: expected it refused with {code}, but it was recorded"
                    )));
                }
                (DecisionResult::Refused { failure }, expected) => {
                    let expected = match expected {
                        Some(code) => format!("refused with {code}"),
                        None => "recorded".to_owned(),
                    };
                    return Ok(Some(format!(
                        "{what}: expected it {expected}, but it was refused with {}: {}",
                        failure.code.as_str(),
                        failure.message
                    )));
                }
            }
        }
        if let Some(wait) = last.wait {
            waited += wait.seconds();
            let now = time::OffsetDateTime::now_utc()
                + time::Duration::seconds(i64::try_from(waited).unwrap_or(i64::MAX));
            let now = now
                .format(&time::format_description::well_known::Rfc3339)
                .expect("UTC times format");
            let store_error = |e: &dyn std::fmt::Display| StageError::Connect(e.to_string());
            engine.fire_due(&now).await.map_err(|e| store_error(&e))?;
            let stored = engine
                .store()
                .load_session(&id)
                .await
                .map_err(|e| store_error(&e))?;
            if let Some(stored) = stored {
                status = stored.status.as_str().to_owned();
            }
        }
        start = end;
    }
    if records.len() < submissions.len() {
        let expected = &submissions[records.len()];
        return Ok(Some(format!(
            "submission {}: expected step {} to be submitted, but the session stopped in status \
             {status} after {} submission(s)",
            records.len() + 1,
            expected.step,
            records.len()
        )));
    }
    if let Some(want) = &case.file.status
        && *want != status
    {
        return Ok(Some(format!(
            "after the last submission: expected status {want}, got {status}"
        )));
    }
    Ok(None)
}

/// What the harness does instead in `segment`: rounds count from the segment's start, as a
/// resumed `stage` run counts them.
fn script(case: &Case, segment: &[Submission]) -> Result<Script, StageError> {
    let mut script = Script::default();
    let mut rounds: BTreeMap<&str, usize> = BTreeMap::new();
    for submission in segment {
        let round = rounds.entry(&submission.step).or_default();
        *round += 1;
        let key = (submission.step.clone(), *round);
        for (path, file) in &submission.outputs {
            let from = within_version(&case.dir, file).ok_or_else(|| {
                invalid(
                    &case.dir.join(CASE_FILE),
                    format!(
                        "{file:?}: name a file of the workflow version's folder, relative to \
                         the case's (a counter-example: ../../counter-examples/…)"
                    ),
                )
            })?;
            let bytes =
                rimthan_registry::read_regular_file(&from, rimthan_registry::MAX_FILE_BYTES)
                    .map_err(|e| invalid(&from, e.to_string()))?;
            script
                .outputs
                .entry(key.clone())
                .or_default()
                .insert(path.clone(), bytes);
        }
        if !submission.fail.is_empty() {
            script.failing.insert(key, submission.fail.clone());
        }
    }
    Ok(script)
}

/// The first place where `records` (the runs of `expected`, which begins with submission
/// `first + 1`) went otherwise than the case says.
fn diverges(
    first: usize,
    expected: &[Submission],
    records: &[(StepRecord, Vec<String>)],
) -> Option<String> {
    for (i, (expected, (record, codes))) in expected.iter().zip(records).enumerate() {
        let n = first + i + 1;
        let (step, outcome) = (&record.step, &record.outcome);
        if *step != expected.step {
            return Some(format!(
                "submission {n}: expected step {}, but step {step} was active",
                expected.step
            ));
        }
        if outcome != expected.expect.recorded() {
            let detail = match outcome.as_str() {
                "revise" => format!(" (sent back by {})", record.sent_back_by.join(", ")),
                "rejected" => format!(" ({})", codes.join(", ")),
                _ if !record.to_waive.is_empty() => {
                    format!(" (to waive: {})", record.to_waive.join(", "))
                }
                _ => String::new(),
            };
            return Some(format!(
                "submission {n} ({step}): expected {}, got {outcome}{detail}",
                expected.expect.recorded()
            ));
        }
        for (what, want, got) in [
            (
                "it sent back by",
                &expected.sent_back_by,
                &record.sent_back_by,
            ),
            ("to waive", &expected.to_waive, &record.to_waive),
            ("codes", &expected.codes, codes),
        ] {
            let Some(want) = want else { continue };
            let got: BTreeSet<String> = got.iter().cloned().collect();
            if got != *want {
                return Some(format!(
                    "submission {n} ({step}): expected {what} {}, got {}",
                    listed(want),
                    listed(&got)
                ));
            }
        }
    }
    None
}

/// `file`, relative to the case's folder `dir`, resolved by its words alone; none unless it
/// stays inside the workflow version's folder (`dir`'s grandparent), so a case reads the
/// version's own examples and counter-examples and nothing else of the machine.
fn within_version(dir: &Path, file: &str) -> Option<PathBuf> {
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

fn listed(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "nothing".into()
    } else {
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

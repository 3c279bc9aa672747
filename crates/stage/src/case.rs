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

mod file;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::Arc,
};

use rimthan_engine::{SessionId, approval::DecisionResult};
use rimthan_registry::Harness;

pub use self::file::{
    CASE_FILE, Case, CaseFile, Decide, DecisionCase, Expect, Submission, TESTS_DIR, find_cases,
};
use self::file::{invalid, within_version};
use crate::{Script, StageConfig, StageError, StepRecord, Target, client::local_engine};

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

fn listed(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "nothing".into()
    } else {
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

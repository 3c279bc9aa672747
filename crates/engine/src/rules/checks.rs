//! Running a step's deterministic checks on the participant's outputs (`docs/checks.md`,
//! `docs/engine.md` §5.1).
//!
//! The harness sends the text of every artifact a check reads; the text is held to the digest
//! and size it attests (or, for an earlier output, to the digest accepted then) before any
//! check sees it, so a check judges exactly the bytes the session records. A check is compiled
//! once, when its release was verified; here it only runs. Its verdict is stored with the plan
//! (digests and findings, never the text) and decides the step at submission: an `error`
//! finding sends the step to `revise` whatever the reports say.

use std::collections::BTreeMap;
use std::sync::Arc;

use rimthan_checks::{CheckError, Finding, Input, Severity};
use rimthan_registry::{Sha256Digest, Step, StepCheck};

use crate::{
    model::checks::{CheckFinding, CheckRecord, CheckVerdict, MAX_KEPT_CHECK_FINDINGS},
    model::codes::{Code, Failure},
    model::request::OutputAttestation,
    model::session::{AcceptedArtifact, Session},
    rules::view::Pinned,
};

/// What a preparation's texts came to: each check's record, and for a step that asks for
/// sign-off every output's text (path → text), kept for its approver.
#[derive(Default)]
pub(crate) struct Checked {
    pub(crate) records: Vec<CheckRecord>,
    pub(crate) signed_texts: BTreeMap<String, String>,
}

/// What runs a check on the texts it reads, or answers for it from a verdict already reached:
/// the engine keeps them (`engine/verdicts.rs`).
pub(crate) trait Judge {
    /// The findings of `check` on `inputs`, whose paths and digests are `digests`.
    fn judge(
        &self,
        check: &StepCheck,
        inputs: &[Input<'_>],
        digests: Vec<(String, Sha256Digest)>,
    ) -> Result<Arc<Vec<Finding>>, CheckError>;
}

/// Verifies the texts the step's checks read (and, for a step that asks for sign-off, every
/// output's) and runs every check on them, in the step's order. `Err` holds the failures that
/// refuse the preparation: a text missing or not the attested bytes, or a check that stopped at
/// a bound (`check_aborted`).
pub(crate) fn run_checks(
    pinned: &Pinned<'_>,
    session: &Session,
    step: &Step,
    att: &OutputAttestation,
    accepted: &BTreeMap<String, AcceptedArtifact>,
    verdicts: &impl Judge,
) -> Result<Checked, Vec<Failure>> {
    let signed = step.doc().approval.is_some();
    // A text sent for any output is held to its digest, even where no check reads it: the
    // schema of a JSON output judges that text.
    let texts_sent = att.artifacts.iter().any(|a| a.text.is_some());
    if step.checks().is_empty() && att.inputs.is_empty() && !signed && !texts_sent {
        return Ok(Checked {
            records: Vec::new(),
            signed_texts: BTreeMap::new(),
        });
    }
    let texts = texts(pinned, session, step, att, accepted)?;
    let signed_texts = if signed {
        texts
            .values()
            .filter(|t| accepted.contains_key(&t.path))
            .map(|t| (t.path.clone(), t.text.to_owned()))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut records = Vec::with_capacity(step.checks().len());
    let mut failures = Vec::new();
    for check in step.checks() {
        let doc = check.doc();
        let read: Vec<&Text<'_>> = doc
            .reads
            .iter()
            .map(|artifact| &texts[artifact.as_str()])
            .collect();
        let inputs: Vec<Input<'_>> = read
            .iter()
            .map(|t| Input::new(&t.path, t.text.as_bytes()))
            .collect();
        let outcome = verdicts.judge(
            check,
            &inputs,
            read.iter().map(|t| (t.path.clone(), t.sha256)).collect(),
        );
        let read: BTreeMap<String, String> = read
            .iter()
            .map(|t| (t.path.clone(), t.sha256.to_string()))
            .collect();
        match outcome.map(|findings| doc.enforce(Vec::clone(&findings))) {
            Ok(findings) => {
                let failed = findings.iter().any(|f| f.severity == Severity::Error);
                records.push(CheckRecord {
                    id: doc.id.to_string(),
                    sha256: check.entry().sha256.to_string(),
                    verdict: if failed {
                        CheckVerdict::Fail
                    } else {
                        CheckVerdict::Pass
                    },
                    inputs: read,
                    finding_count: findings.len(),
                    findings: findings
                        .into_iter()
                        .take(MAX_KEPT_CHECK_FINDINGS)
                        .map(|f| CheckFinding {
                            help: doc.help_for(&f.rule).cloned(),
                            rule: f.rule,
                            severity: f.severity.into(),
                            message: f.message,
                            path: f.path,
                            line: f.line,
                        })
                        .collect(),
                });
            }
            Err(e) => failures.push(
                Failure::new(
                    Code::CheckAborted,
                    format!(
                        "check {} could not judge these outputs: {e}; change the outputs so the \
                         check can read them within its bounds",
                        doc.id
                    ),
                )
                .with("check_id", doc.id.as_str())
                .with("reason_code", e.code()),
            ),
        }
    }
    if failures.is_empty() {
        Ok(Checked {
            records,
            signed_texts,
        })
    } else {
        Err(failures)
    }
}

/// The text of one artifact a check reads, proven to be the bytes of `sha256`.
struct Text<'a> {
    path: String,
    text: &'a str,
    sha256: Sha256Digest,
}

/// artifact id → its text for every artifact a check of `step` reads (and every output of a
/// step that asks for sign-off), each text proven to be the attested (or accepted) bytes. Texts
/// attested for artifacts no check reads are held to their digests too, so nothing unverified
/// is ever accepted.
fn texts<'a>(
    pinned: &Pinned<'_>,
    session: &Session,
    step: &Step,
    att: &'a OutputAttestation,
    accepted: &BTreeMap<String, AcceptedArtifact>,
) -> Result<BTreeMap<&'a str, Text<'a>>, Vec<Failure>> {
    let mut failures = Vec::new();
    let mut texts = BTreeMap::new();
    let read: std::collections::BTreeSet<&str> = step
        .checks()
        .iter()
        .flat_map(|c| c.doc().reads.iter().map(|a| a.as_str()))
        .collect();
    let signed = step.doc().approval.is_some();
    for (index, art) in att.artifacts.iter().enumerate() {
        let Some(known) = accepted.get(&art.path) else {
            continue;
        };
        let at = |f: Failure| {
            f.with("artifact", index)
                .with("artifact_id", &art.artifact_id)
        };
        match &art.text {
            None if read.contains(art.artifact_id.as_str()) => failures.push(at(Failure::new(
                Code::OutputTextMissing,
                format!(
                    "a deterministic check reads {}: attest its text as read from disk in `text`",
                    art.path
                ),
            ))),
            None if signed => failures.push(at(Failure::new(
                Code::OutputTextMissing,
                format!(
                    "this step is signed off by people who read {}: attest its text as read \
                     from disk in `text`",
                    art.path
                ),
            ))),
            None => {}
            Some(text) => match mismatch(text, known.sha256, known.bytes) {
                Some(problem) => failures.push(at(Failure::new(
                    Code::OutputTextMismatch,
                    format!("the text attested for {} {problem}", art.path),
                ))),
                None => {
                    let text = Text {
                        path: art.path.clone(),
                        text: text.as_str(),
                        sha256: known.sha256,
                    };
                    texts.insert(art.artifact_id.as_str(), text);
                }
            },
        }
    }
    for (index, input) in att.inputs.iter().enumerate() {
        let at = |f: Failure| {
            f.with("input", index)
                .with("artifact_id", &input.artifact_id)
        };
        let is_input = step
            .doc()
            .inputs
            .iter()
            .any(|a| a.as_str() == input.artifact_id);
        let path = pinned.output(&input.artifact_id).map(|o| o.path.as_str());
        let known = path.and_then(|p| session.ledger.get(p));
        let (Some(known), Some(path), true) = (known, path, is_input) else {
            failures.push(at(Failure::new(
                Code::UnexpectedOutput,
                format!(
                    "{} is not an accepted input of step {}; send only the texts of its inputs",
                    crate::model::bounds::display_capped(
                        &input.artifact_id,
                        crate::model::bounds::MAX_ECHO_CHARS
                    ),
                    step.doc().id
                ),
            )));
            continue;
        };
        if input.path != path {
            failures.push(at(Failure::new(
                Code::OutputPathMismatch,
                format!("{} is at {path}", input.artifact_id),
            )
            .with("expected", path)));
            continue;
        }
        match mismatch(&input.text, known.sha256, known.bytes) {
            Some(problem) => failures.push(at(Failure::new(
                Code::OutputTextMismatch,
                format!(
                    "the text sent for {path} {problem}; it must be the file accepted when its \
                     step passed"
                ),
            ))),
            None => {
                let text = Text {
                    path: path.to_owned(),
                    text: input.text.as_str(),
                    sha256: known.sha256,
                };
                texts.insert(input.artifact_id.as_str(), text);
            }
        }
    }
    // Outputs and inputs sent without a usable text were named above; what is left are inputs
    // never sent.
    for artifact in &read {
        let own = step
            .doc()
            .outputs
            .iter()
            .any(|o| o.artifact_id.as_str() == *artifact);
        let sent = att.inputs.iter().any(|i| i.artifact_id == *artifact);
        if own || sent || texts.contains_key(artifact) {
            continue;
        }
        let path = pinned.output(artifact).map_or("", |o| o.path.as_str());
        failures.push(
            Failure::new(
                Code::OutputTextMissing,
                format!(
                    "a deterministic check reads the input {path}: send its text in the output \
                     attestation's `inputs`"
                ),
            )
            .with("artifact_id", *artifact),
        );
    }
    if failures.is_empty() {
        Ok(texts)
    } else {
        Err(failures)
    }
}

/// What is wrong with `text` as the bytes of a file of `bytes` bytes and digest `sha256`.
fn mismatch(text: &str, sha256: Sha256Digest, bytes: u64) -> Option<String> {
    if text.len() as u64 != bytes {
        return Some(format!(
            "has {} bytes, not the {bytes} attested",
            text.len()
        ));
    }
    let actual = Sha256Digest::of(text.as_bytes());
    (actual != sha256).then(|| format!("has sha256 {actual}, not the {sha256} attested"))
}

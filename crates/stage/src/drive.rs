//! One run of a workflow session: start or resume, then each step in turn (deliver or write and
//! attest, prepare, run the validators, submit) until the session completes or a fault shows
//! its code.

use std::time::Instant;

use serde_json::{Value, json};

use crate::{
    Fault, FaultOutcome, Project, SESSION_FILE, StageConfig, StageError, StepRecord, Summary,
    client::{self, Client, call, codes, read_json, read_resource, str_field},
    content, host_capabilities, validator, workflow,
};

/// Writes the session file and, when the session completed, its signed provenance statement
/// beside it, unchanged, as the shipped skills tell a harness to (`docs/operations/evidence.md`).
/// Only the one known statement path is written: the answer names it, but does not choose
/// where in the project the harness writes.
fn save_session_file(project: &Project, payload: &Value) -> Result<(), StageError> {
    if let Some(content) = payload.get("session_file").map(|f| &f["content"]) {
        let mut text = serde_json::to_string_pretty(content).expect("JSON serializes");
        text.push('\n');
        project.write_session_file(text.as_bytes())?;
    }
    if let Some(provenance) = payload.get("provenance")
        && provenance["path"] == crate::STATEMENT_FILE
    {
        let mut text =
            serde_json::to_string_pretty(&provenance["content"]).expect("JSON serializes");
        text.push('\n');
        project.write_statement(text.as_bytes())?;
    }
    Ok(())
}

/// Starts the session; the payload and the host binding the setup attestation must repeat.
async fn start(client: &Client, config: &StageConfig) -> Result<(Value, Value), StageError> {
    let chosen = workflow::choose(
        client,
        config.workflow.as_ref(),
        config.workflow_version.as_ref(),
    )
    .await?;
    let mut host = json!({"harness": config.harness.as_str(),
        "capabilities": host_capabilities(config.harness), "validator_capabilities": []});
    if let Some(definition) = &chosen.definition {
        host["validator_capabilities"] = json!(definition.validator_capabilities(client).await?);
        if let Some(adapter) = definition.adapter_for(config.harness) {
            host["adapter"] = adapter;
        }
    }
    let declared_adapter = host.get("adapter").is_some();
    // A fresh key per start, so retrying the start after a lost answer finds its session.
    let key = rimthan_engine::SessionId::generate().to_string();
    let mut arguments = json!({"workflow_id": chosen.id, "host": host, "idempotency_key": key});
    if let Some(version) = &chosen.version {
        arguments["workflow_version"] = json!(version.to_string());
    }
    let (value, _) = call(client, rimthan_mcp::START, arguments).await?;
    match value["status"].as_str() {
        Some("blocked") => {
            let mut codes = codes(&value);
            // With no pin for this harness, stage declares no adapter; the server's
            // unsupported_host_adapter is then about that omission, not the author's workflow.
            if !declared_adapter && codes.iter().any(|c| c == "unsupported_harness") {
                codes.retain(|c| c != "unsupported_host_adapter");
            }
            Err(StageError::Blocked { codes })
        }
        Some("rejected") => Err(StageError::Rejected {
            step: "(start)".into(),
            tool: rimthan_mcp::START.into(),
            codes: codes(&value),
        }),
        _ => {
            let bound = value["session_file"]["content"]["host"].clone();
            Ok((value, bound))
        }
    }
}

/// Continues from the project's session file: the active payload and the session's binding.
async fn resume(client: &Client, project: &Project) -> Result<(Value, Value), StageError> {
    let path = project.root().join(SESSION_FILE);
    let text =
        std::fs::read(&path).map_err(|_| StageError::NoSessionFile(path.display().to_string()))?;
    let file: Value = serde_json::from_slice(&text).map_err(|e| StageError::Protocol {
        tool: "session file".into(),
        detail: e.to_string(),
    })?;
    let (value, error) = call(
        client,
        rimthan_mcp::ACTIVE_STEP,
        json!({"checkpoint": file["checkpoint"]}),
    )
    .await?;
    if error && value["status"] == "rejected" {
        return Err(StageError::Rejected {
            step: "(resume)".into(),
            tool: rimthan_mcp::ACTIVE_STEP.into(),
            codes: codes(&value),
        });
    }
    Ok((value, file["host"].clone()))
}

pub(crate) async fn drive(
    client: &Client,
    project: &Project,
    config: &StageConfig,
    on_step: &mut (dyn FnMut(&StepRecord, usize, usize) + Send),
) -> Result<Summary, StageError> {
    client::verify_identity(client).await?;
    let (mut payload, bound) = if config.resume {
        resume(client, project).await?
    } else {
        // A new session's evidence replaces the last one's: a statement left from it would
        // claim outputs this session has not accepted.
        project.remove_statement()?;
        start(client, config).await?
    };
    save_session_file(project, &payload)?;
    let session_id = str_field(&payload, rimthan_mcp::START, "session_id")?.to_owned();
    let definition = workflow::definition(
        client,
        str_field(&payload["workflow"], rimthan_mcp::START, "uri")?,
    )
    .await?;
    let workflow = format!(
        "{}@{}",
        payload["workflow"]["id"].as_str().unwrap_or_default(),
        payload["workflow"]["version"].as_str().unwrap_or_default()
    );
    let mut run = Run {
        session_id,
        workflow,
        steps: Vec::new(),
        sent_back: if config.resume {
            sent_back(&payload)
        } else {
            Vec::new()
        },
    };
    let fault = config.fault;
    let mut revise = config.revise;
    let mut previous_checkpoint: Option<Value> = None;
    let mut rounds: std::collections::BTreeMap<String, usize> = Default::default();

    while payload["status"] != "completed" {
        // A step waiting for sign-off is people's to decide, not the harness's: stop, and let
        // a `--resume` once they have read what they decided; or, in-process with
        // `--sign-off-as`, the operator at this machine signs it off under their name.
        if payload["status"] == "awaiting_approval" {
            let (Some(name), Some(engine)) = (&config.sign_off_as, client.local_engine()) else {
                return Ok(run.stopped(&payload));
            };
            let started = Instant::now();
            let step = sign_off(engine, &payload, name).await?;
            let (value, _) = call(
                client,
                rimthan_mcp::ACTIVE_STEP,
                json!({"checkpoint": payload["checkpoint"]}),
            )
            .await?;
            payload = value;
            save_session_file(project, &payload)?;
            run.steps.push(StepRecord {
                step,
                outcome: format!("signed off as {name} (asserted)"),
                millis: started.elapsed().as_millis(),
                files: Vec::new(),
                sent_back_by: Vec::new(),
                to_waive: Vec::new(),
            });
            if payload["status"] == "awaiting_approval" {
                // More approvals than one name can give: people decide the rest.
                return Ok(run.stopped(&payload));
            }
            continue;
        }
        let started = Instant::now();
        let step = payload["step"].clone();
        let step_id = str_field(&step, rimthan_mcp::ACTIVE_STEP, "id")?.to_owned();
        let (index, total) = definition.position(&step_id);
        let round = {
            let round = rounds.entry(step_id.clone()).or_default();
            *round += 1;
            (step_id.clone(), *round)
        };
        let script = config.script.as_deref();

        // The stale-checkpoint fault: reuse the checkpoint the session has moved past.
        if fault == Some(Fault::StaleCheckpoint)
            && let Some(old) = previous_checkpoint.take()
        {
            let (value, _) =
                call(client, rimthan_mcp::ACTIVE_STEP, json!({"checkpoint": old})).await?;
            return Ok(run.faulted(&payload, Fault::StaleCheckpoint, codes(&value)));
        }

        let mut files = Vec::new();
        let mut text_mismatch = false;
        let mut prepare = json!({"checkpoint": payload["checkpoint"], "step_id": step_id});
        if step["kind"] == "setup" {
            let mut deliveries = deliver(client, project, &payload, &mut files).await?;
            if fault == Some(Fault::WrongDigest) {
                let first =
                    deliveries
                        .first_mut()
                        .ok_or_else(|| StageError::FaultNotApplicable {
                            fault: Fault::WrongDigest,
                            reason: "the setup step delivers no host asset".into(),
                        })?;
                first["sha256"] = json!("0".repeat(64));
            }
            let mut attestation = bound.clone();
            attestation["deliveries"] = json!(deliveries);
            prepare["host_attestation"] = attestation;
        } else {
            let step_doc = read_json(client, str_field(&step, "step", "uri")?).await?;
            let mut artifacts = Vec::new();
            let outputs = step["outputs"].as_array().cloned().unwrap_or_default();
            for (i, output) in outputs.iter().enumerate() {
                let path = str_field(output, rimthan_mcp::ACTIVE_STEP, "path")?;
                let scripted = script
                    .and_then(|s| s.outputs.get(&round))
                    .and_then(|outputs| outputs.get(path));
                let mut bytes = match scripted {
                    Some(bytes) => bytes.clone(),
                    None => content::output_content(client, &step_id, &step_doc, output).await?,
                };
                if let Some(nonce) = config.vary {
                    content::vary(&mut bytes, output, nonce);
                }
                if i == 0 && fault == Some(Fault::SymlinkedOutput) {
                    project.symlink_to_shadow(path, &bytes)?;
                } else {
                    project.write(path, &bytes)?;
                }
                files.push(path.to_owned());
                artifacts.push(attest(project, output, path)?);
            }
            if fault == Some(Fault::TextMismatch)
                && let Some(text) = artifacts
                    .iter_mut()
                    .find_map(|a| a.get_mut("text").filter(|t| t.is_string()))
            {
                *text = json!(format!("{}\n", text.as_str().unwrap_or_default()));
                text_mismatch = true;
            }
            if fault == Some(Fault::ExtraFile) {
                let extra = extra_file_path(&outputs);
                project.write(&extra, b"# Scratch\n\nNot a declared output.\n")?;
                files.push(extra.clone());
                let declared = json!({"artifact_id": "stage-extra-file", "path": extra, "owner_step": step_id,
                    "media_type": "text/markdown", "schema": null, "write_policy": "create-or-replace-owned"});
                artifacts.push(attest(project, &declared, &extra)?);
            }
            let mut inputs = Vec::new();
            for input in step["inputs"].as_array().into_iter().flatten() {
                if input["send_text"] != true {
                    continue;
                }
                let path = str_field(input, rimthan_mcp::ACTIVE_STEP, "path")?;
                inputs.push(json!({"artifact_id": input["artifact_id"], "path": path,
                    "text": text_of(path, project.read_back(path)?.bytes)?}));
            }
            prepare["output_attestation"] = json!({"artifacts": artifacts, "inputs": inputs});
        }
        let (plan, rejected) = call(client, rimthan_mcp::PREPARE, prepare).await?;
        if rejected {
            let found = codes(&plan);
            if let Some(f) = fault.filter(|f| {
                matches!(
                    f,
                    Fault::WrongDigest | Fault::ExtraFile | Fault::SymlinkedOutput
                ) || text_mismatch
            }) {
                return Ok(run.faulted(&payload, f, found));
            }
            return Err(StageError::Rejected {
                step: step_id,
                tool: rimthan_mcp::PREPARE.into(),
                codes: found,
            });
        }

        let mut reports = Vec::new();
        for validator in plan["validators"].as_array().into_iter().flatten() {
            let scripted = script
                .and_then(|s| s.failing.get(&round))
                .zip(validator["id"].as_str())
                .is_some_and(|(failing, id)| failing.contains(id));
            reports.push(validator::report(client, project, validator, revise || scripted).await?);
            revise = false;
        }
        let missing_report = fault == Some(Fault::MissingReport) && !reports.is_empty();
        if missing_report {
            reports.remove(0);
        }
        let submit = json!({"checkpoint": payload["checkpoint"], "validation_id": plan["validation_id"], "reports": reports});
        let (next, _) = call(client, rimthan_mcp::SUBMIT, submit).await?;
        if missing_report {
            return Ok(run.faulted(&payload, Fault::MissingReport, codes(&next)));
        }
        if next["status"] == "rejected" {
            return Err(StageError::Rejected {
                step: step_id,
                tool: rimthan_mcp::SUBMIT.into(),
                codes: codes(&next),
            });
        }
        save_session_file(project, &next)?;
        let outcome = match next["status"].as_str() {
            Some("completed") => "completed",
            Some("revise") => "revise",
            Some("awaiting_approval") => "awaiting approval",
            _ => "advanced",
        };
        let record = StepRecord {
            step: step_id,
            outcome: outcome.into(),
            millis: started.elapsed().as_millis(),
            files,
            sent_back_by: if outcome == "revise" {
                rules(&next["findings"])
            } else {
                Vec::new()
            },
            to_waive: rules(&next["approval"]["waivable"]),
        };
        on_step(&record, index, total);
        run.steps.push(record);
        if config.stop_after.is_some_and(|n| run.steps.len() >= n) {
            return Ok(run.stopped(&next));
        }
        previous_checkpoint = Some(payload["checkpoint"].clone());
        payload = next;
    }
    if let Some(fault) = fault {
        return Err(StageError::FaultNotApplicable {
            fault,
            reason: format!(
                "the session completed without the fault taking effect (session {}): the \
                 workflow has nothing it applies to",
                run.session_id
            ),
        });
    }
    Ok(Summary {
        session_id: run.session_id,
        workflow: run.workflow,
        status: "completed".into(),
        steps: run.steps,
        fault: None,
        approval: None,
        sent_back: run.sent_back,
        calls: Vec::new(),
        trace: None,
    })
}

/// The notes of a send-back in a payload in `revise`: the findings no validator or check made
/// (`docs/engine.md` §6.2 writes a send-back's note as such a finding).
fn sent_back(payload: &Value) -> Vec<String> {
    if payload["status"] != "revise" {
        return Vec::new();
    }
    payload["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| {
            f["validator_id"].as_str().unwrap_or_default().is_empty() && f["check_id"].is_null()
        })
        .filter_map(|f| f["message"].as_str().map(str::to_owned))
        .collect()
}

/// Who found what in a list of findings: each failing check's rule and each failing
/// validator's id (errors only; a warning holds nothing back), sorted, once each.
fn rules(findings: &Value) -> Vec<String> {
    let mut by: Vec<String> = findings
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] == "error")
        .filter_map(|f| {
            if f["check_id"].is_string() {
                f["rule"].as_str()
            } else {
                f["validator_id"].as_str().filter(|id| !id.is_empty())
            }
        })
        .map(str::to_owned)
        .collect();
    by.sort();
    by.dedup();
    by
}

/// What a run has done so far.
struct Run {
    session_id: String,
    workflow: String,
    steps: Vec<StepRecord>,
    sent_back: Vec<String>,
}

impl Run {
    /// The summary of a run stopped before the session completed, as `payload` left it.
    fn stopped(self, payload: &Value) -> Summary {
        Summary {
            session_id: self.session_id,
            workflow: self.workflow,
            status: payload["status"].as_str().unwrap_or("unknown").to_owned(),
            steps: self.steps,
            fault: None,
            approval: Some(payload["approval"].clone()).filter(|a| a.is_object()),
            sent_back: self.sent_back,
            calls: Vec::new(),
            trace: None,
        }
    }

    fn faulted(self, payload: &Value, fault: Fault, codes: Vec<String>) -> Summary {
        Summary {
            session_id: self.session_id,
            workflow: self.workflow,
            status: payload["status"].as_str().unwrap_or("unknown").to_owned(),
            steps: self.steps,
            fault: Some(FaultOutcome { fault, codes }),
            approval: None,
            sent_back: self.sent_back,
            calls: Vec::new(),
            trace: None,
        }
    }
}

/// Delivers the active payload's host assets as the bound adapter allows; the deliveries to
/// attest.
async fn deliver(
    client: &Client,
    project: &Project,
    payload: &Value,
    files: &mut Vec<String>,
) -> Result<Vec<Value>, StageError> {
    let mut deliveries = Vec::new();
    for asset in payload["host_assets"].as_array().into_iter().flatten() {
        let uri = str_field(asset, rimthan_mcp::START, "uri")?;
        let bytes = read_resource(client, uri).await?;
        let mut delivery =
            json!({"kind": asset["kind"], "id": asset["id"], "version": asset["version"]});
        match asset["project_local_path"].as_str() {
            Some(path) => {
                project.write(path, &bytes)?;
                files.push(path.to_owned());
                delivery["sha256"] = json!(project.read_back(path)?.sha256.to_string());
                delivery["delivery_mode"] = json!("project-local");
                delivery["path"] = json!(path);
            }
            None => {
                delivery["sha256"] = json!(rimthan_registry::Sha256Digest::of(&bytes).to_string());
                delivery["delivery_mode"] = json!("dynamic-context");
            }
        }
        deliveries.push(delivery);
    }
    Ok(deliveries)
}

/// A file beside the step's first output that the step does not declare.
fn extra_file_path(outputs: &[Value]) -> String {
    let first = outputs
        .first()
        .and_then(|o| o["path"].as_str())
        .unwrap_or_default();
    match first.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/rimthan-stage-extra.md"),
        None => "rimthan-stage-extra.md".into(),
    }
}

/// A file's bytes as the text a deterministic check reads.
fn text_of(path: &str, bytes: Vec<u8>) -> Result<String, StageError> {
    String::from_utf8(bytes).map_err(|_| StageError::UnsafePath {
        path: path.into(),
        reason: "a deterministic check reads it, and it is not UTF-8 text".into(),
    })
}

/// The output attestation entry for a declared output, from what is on disk.
fn attest(project: &Project, output: &Value, path: &str) -> Result<Value, StageError> {
    let back = project.read_back(path)?;
    let mut artifact = json!({"artifact_id": output["artifact_id"], "path": path, "owner_step": output["owner_step"],
        "media_type": output["media_type"], "bytes": back.bytes.len(), "sha256": back.sha256.to_string(),
        "symlink_free": back.symlink_free, "read_back": true, "write_policy": output["write_policy"]});
    if output["send_text"] == true {
        artifact["text"] = json!(text_of(path, back.bytes.clone())?);
    }
    if !output["schema"].is_null() {
        artifact["schema_sha256"] = output["schema"]["sha256"].clone();
        artifact["content"] =
            serde_json::from_slice(&back.bytes).map_err(|e| StageError::UnsafePath {
                path: path.into(),
                reason: format!("not JSON: {e}"),
            })?;
    }
    Ok(artifact)
}

/// Approves the step `payload` waits on as `name`, the operator at this machine, binding the
/// approval to the outputs as stored; returns the step's id.
async fn sign_off(
    engine: &rimthan_engine::Engine,
    payload: &Value,
    name: &str,
) -> Result<String, StageError> {
    let tool = rimthan_mcp::ACTIVE_STEP;
    let id: rimthan_engine::SessionId =
        str_field(payload, tool, "session_id")?
            .parse()
            .map_err(|_| StageError::Protocol {
                tool: tool.into(),
                detail: "the session id does not parse".into(),
            })?;
    let note = "signed off at the machine with rimthan stage --sign-off-as".to_owned();
    let (step, result) = crate::decide::decide(
        engine,
        &id,
        rimthan_engine::approval::Decision::Approve { note: Some(note) },
        name,
    )
    .await?;
    match result {
        rimthan_engine::approval::DecisionResult::Recorded { .. } => Ok(step),
        rimthan_engine::approval::DecisionResult::Refused { failure } => {
            Err(StageError::SignOffRefused {
                step,
                code: failure.code.as_str().to_owned(),
                message: failure.message,
            })
        }
    }
}

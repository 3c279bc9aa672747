//! Checking attestations against the checkpoint binding and the pinned release (`docs/engine.md` §5).
//!
//! Checks run in a fixed order over the declared items, then over the attested ones, so the
//! same input always yields the same codes in the same order.

use std::collections::{BTreeMap, BTreeSet};

use rimthan_registry::{DeliveryMode, MEDIA_JSON, Sha256Digest, Step, WritePolicy};

use crate::{
    model::bounds::json_len,
    model::codes::{Code, Failure},
    model::request::{HostAttestation, OutputAttestation},
    model::session::{AcceptedArtifact, Session},
    rules::{schema::schema_failure, view::Pinned},
};

/// Checks a setup step's host attestation.
pub(crate) fn check_host(
    pinned: &Pinned<'_>,
    session: &Session,
    att: &HostAttestation,
) -> Vec<Failure> {
    let mut failures = Vec::new();
    let bound = &session.host;
    if att.harness != bound.harness.as_str() {
        failures.push(mismatch(
            Code::HostBindingMismatch,
            "harness",
            bound.harness.as_str(),
            &att.harness,
        ));
    }
    let adapter_id = att.adapter.id.as_deref().unwrap_or_default();
    if adapter_id != bound.adapter.id.as_str() {
        failures.push(mismatch(
            Code::HostBindingMismatch,
            "adapter.id",
            bound.adapter.id.as_str(),
            adapter_id,
        ));
    }
    let adapter_version = att.adapter.version.as_deref().unwrap_or_default();
    if adapter_version != bound.adapter.version.to_string() {
        failures.push(mismatch(
            Code::HostBindingMismatch,
            "adapter.version",
            bound.adapter.version.to_string(),
            adapter_version,
        ));
    }
    let caps: BTreeSet<_> = att.capabilities.iter().copied().collect();
    if caps.iter().ne(bound.capabilities.iter()) {
        failures.push(mismatch(
            Code::CapabilityBindingMismatch,
            "capabilities",
            &bound.capabilities,
            &caps,
        ));
    }
    let vcaps: BTreeSet<_> = att.validator_capabilities.iter().copied().collect();
    if vcaps.iter().ne(bound.validator_capabilities.iter()) {
        failures.push(mismatch(
            Code::CapabilityBindingMismatch,
            "validator_capabilities",
            &bound.validator_capabilities,
            &vcaps,
        ));
    }

    let offers = pinned.offers(session);
    let mut matched = vec![false; att.deliveries.len()];
    for offer in &offers {
        let asset = &offer.asset;
        let label = format!("{} {}@{}", asset.kind, asset.id, asset.version);
        let mut candidates = att
            .deliveries
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == asset.kind && d.id == asset.id.as_str());
        let Some((index, delivery)) = candidates.next() else {
            failures.push(
                Failure::new(
                    Code::AssetNotDelivered,
                    format!("{label} has no delivery; deliver it as the payload's host_assets say"),
                )
                .with("asset", asset),
            );
            continue;
        };
        matched[index] = true;
        let at = |f: Failure| f.with("delivery", index).with("asset", asset);
        if delivery.version != asset.version.to_string() {
            failures.push(at(Failure::new(
                Code::AssetDigestMismatch,
                format!(
                    "{label}: delivered version {} is not the required one",
                    delivery.version
                ),
            )
            .with("field", "version")
            .with("expected", asset.version.to_string())
            .with("actual", &delivery.version)));
        }
        if delivery.sha256 != offer.content.sha256.to_string() {
            failures.push(at(Failure::new(
                Code::AssetDigestMismatch,
                format!("{label}: delivered bytes are not the {} rendition; copy the resource's bytes exactly", session.host.harness),
            )
            .with("field", "sha256").with("expected", offer.content.sha256.to_string()).with("actual", &delivery.sha256)));
        }
        if !offer.modes.contains(&delivery.delivery_mode) {
            failures.push(at(Failure::new(
                Code::DeliveryModeNotAllowed,
                format!(
                    "{label}: {} is not offered to this host",
                    delivery.delivery_mode
                ),
            )
            .with("allowed", &offer.modes)
            .with("actual", delivery.delivery_mode)));
        } else {
            match (delivery.delivery_mode, &delivery.path) {
                (DeliveryMode::ProjectLocal, path) if path.as_deref() != offer.offered_path() => {
                    failures.push(at(Failure::new(
                        Code::ProjectLocalPathMismatch,
                        format!(
                            "{label}: a project-local copy belongs at {}",
                            offer.offered_path().unwrap_or_default()
                        ),
                    )
                    .with("expected", offer.offered_path())
                    .with("actual", path)));
                }
                (DeliveryMode::DynamicContext, Some(path)) => {
                    failures.push(at(Failure::new(
                        Code::ProjectLocalPathMismatch,
                        format!(
                            "{label}: dynamic-context delivery writes no file; remove path {path:?}"
                        ),
                    )
                    .with("expected", serde_json::Value::Null)
                    .with("actual", path)));
                }
                _ => {}
            }
        }
        for (extra, _) in candidates {
            matched[extra] = true;
            failures.push(
                Failure::new(
                    Code::UnexpectedDelivery,
                    format!("{label} is delivered more than once"),
                )
                .with("delivery", extra)
                .with("asset", asset),
            );
        }
    }
    for (index, delivery) in att
        .deliveries
        .iter()
        .enumerate()
        .filter(|(i, _)| !matched[*i])
    {
        failures.push(
            Failure::new(
                Code::UnexpectedDelivery,
                format!(
                    "{} {}@{} is not a host asset of this step",
                    delivery.kind, delivery.id, delivery.version
                ),
            )
            .with("delivery", index),
        );
    }

    // Collisions compare case-insensitively: many participants' file systems do.
    let mut claimed: BTreeMap<String, String> = pinned
        .workflow
        .steps()
        .iter()
        .flat_map(|s| s.doc().outputs.iter())
        .map(|o| (o.path.to_lowercase(), format!("output {}", o.artifact_id)))
        .collect();
    for (index, delivery) in att.deliveries.iter().enumerate() {
        let Some(path) = delivery
            .path
            .as_deref()
            .filter(|_| delivery.delivery_mode == DeliveryMode::ProjectLocal)
        else {
            continue;
        };
        let owner = format!("delivery {index}");
        if let Some(other) = claimed.insert(path.to_lowercase(), owner) {
            failures.push(
                Failure::new(
                    Code::HostAssetPathCollision,
                    format!("{path} is claimed by {other} as well"),
                )
                .with("delivery", index)
                .with("path", path),
            );
        }
    }
    failures
}

fn mismatch(
    code: Code,
    field: &str,
    expected: impl serde::Serialize,
    actual: impl serde::Serialize,
) -> Failure {
    Failure::new(
        code,
        format!("{field} differs from the checkpoint's binding; attest what the start declared"),
    )
    .with("field", field)
    .with("expected", expected)
    .with("actual", actual)
}

/// Checks a work step's output attestation; `Ok` holds the accepted artifacts by path.
pub(crate) fn check_outputs(
    pinned: &Pinned<'_>,
    session: &Session,
    step: &Step,
    att: &OutputAttestation,
) -> Result<BTreeMap<String, AcceptedArtifact>, Vec<Failure>> {
    let mut failures = Vec::new();
    let mut accepted = BTreeMap::new();
    let doc = step.doc();
    let mut matched = vec![false; att.artifacts.len()];
    for output in &doc.outputs {
        let mut candidates = att
            .artifacts
            .iter()
            .enumerate()
            .filter(|(_, a)| a.artifact_id == output.artifact_id.as_str());
        let Some((index, art)) = candidates.next() else {
            failures.push(
                Failure::new(
                    Code::OutputMissing,
                    format!(
                        "output {} ({}) is not attested",
                        output.artifact_id, output.path
                    ),
                )
                .with("artifact_id", &output.artifact_id)
                .with("path", &output.path),
            );
            continue;
        };
        matched[index] = true;
        let before = failures.len();
        let at = |f: Failure| {
            f.with("artifact", index)
                .with("artifact_id", &output.artifact_id)
        };
        if art.path != output.path {
            failures.push(at(Failure::new(
                Code::OutputPathMismatch,
                format!("{} is declared at {}", output.artifact_id, output.path),
            )
            .with("expected", &output.path)
            .with("actual", &art.path)));
        }
        if art.owner_step != doc.id.as_str() {
            failures.push(at(Failure::new(
                Code::OwnerStepMismatch,
                format!("{} belongs to step {}", output.artifact_id, doc.id),
            )
            .with("expected", &doc.id)
            .with("actual", &art.owner_step)));
        }
        if art.media_type != output.media_type {
            failures.push(at(Failure::new(
                Code::MediaTypeMismatch,
                format!("{} is {}", output.artifact_id, output.media_type),
            )
            .with("expected", &output.media_type)
            .with("actual", &art.media_type)));
        }
        let schema = output.schema.as_ref().map(|s| {
            pinned
                .release
                .schema(&s.id, &s.version)
                .expect("verified reference")
        });
        if let Some(schema) = schema {
            let expected = schema.entry().sha256.to_string();
            if art.schema_sha256.as_deref() != Some(expected.as_str()) {
                failures.push(at(Failure::new(
                    Code::SchemaDigestMismatch,
                    format!(
                        "{} must be checked against schema sha256 {expected}",
                        output.artifact_id
                    ),
                )
                .with("expected", &expected)
                .with("actual", &art.schema_sha256)));
            }
        }
        if art.bytes > output.max_bytes {
            failures.push(at(Failure::new(
                Code::MaxBytesExceeded,
                format!(
                    "{} has {} bytes; at most {} are allowed",
                    output.artifact_id, art.bytes, output.max_bytes
                ),
            )
            .with("max_bytes", output.max_bytes)
            .with("actual", art.bytes)));
        }
        // Content is held to the same bound before its schema runs, so the schema's work and
        // its error list stay proportional to what the output may legitimately hold.
        let content_bytes = art.content.as_ref().map(json_len);
        let content_fits = content_bytes.is_none_or(|n| n as u64 <= output.max_bytes);
        if let Some(n) = content_bytes.filter(|_| !content_fits) {
            failures.push(at(Failure::new(
                Code::MaxBytesExceeded,
                format!(
                    "the content of {} has {n} bytes as canonical JSON; at most {} are allowed",
                    output.artifact_id, output.max_bytes
                ),
            )
            .with("field", "content")
            .with("max_bytes", output.max_bytes)
            .with("actual", n)));
        }
        let digest = art.sha256.parse::<Sha256Digest>().ok();
        if digest.is_none() {
            failures.push(at(Failure::new(
                Code::ContentDigestMismatch,
                "sha256 must be 64 lowercase hex digits of the file's bytes",
            )
            .with("actual", &art.sha256)));
        }
        if !art.symlink_free {
            failures.push(at(Failure::new(
                Code::SymlinkInPath,
                format!(
                    "{} traverses a symlink; write a regular file inside the project",
                    art.path
                ),
            )));
        }
        if !art.read_back {
            failures.push(at(Failure::new(
                Code::OutputNotReadBack,
                format!("read {} back from disk and attest what was read", art.path),
            )));
        }
        if art.write_policy != output.write_policy {
            failures.push(at(Failure::new(
                Code::WritePolicyMismatch,
                format!("{} is declared {}", output.artifact_id, output.write_policy),
            )
            .with("expected", output.write_policy)
            .with("actual", art.write_policy)));
        } else if let Some(problem) =
            history_breaks_policy(session, &output.path, output.write_policy, digest)
        {
            failures.push(at(Failure::new(Code::WritePolicyMismatch, problem)
                .with("policy", output.write_policy)));
        }
        if output.media_type == MEDIA_JSON {
            // One set of bytes is judged: when the text is sent (and so held to the attested
            // digest, which the checks and the signed statement follow), the schema judges the
            // JSON it holds, and `content` may only repeat it.
            let from_text = art
                .text
                .as_deref()
                .filter(|t| t.len() as u64 <= output.max_bytes)
                .map(serde_json::from_str::<serde_json::Value>);
            let judged = match from_text {
                Some(Err(e)) => {
                    failures.push(at(Failure::new(
                        Code::SchemaValidationFailed,
                        format!("the text of {} is not JSON: {e}", output.artifact_id),
                    )
                    .with(
                        "errors",
                        serde_json::json!([{"pointer": "", "message": "text is not JSON"}]),
                    )));
                    None
                }
                Some(Ok(parsed)) => {
                    if art.content.as_ref().is_some_and(|c| *c != parsed) {
                        failures.push(at(Failure::new(
                            Code::OutputContentMismatch,
                            format!(
                                "the content attested for {} is not the JSON its text holds; \
                                 send the text alone, or the content parsed from it",
                                output.artifact_id
                            ),
                        )));
                    }
                    Some(std::borrow::Cow::Owned(parsed))
                }
                None if art.text.is_some() => None,
                None => match &art.content {
                    Some(content) if content_fits => Some(std::borrow::Cow::Borrowed(content)),
                    Some(_) => None,
                    None => {
                        failures.push(at(Failure::new(
                            Code::SchemaValidationFailed,
                            format!(
                                "attest the text (or the parsed JSON content) of {} so the \
                                 server can validate it",
                                output.artifact_id
                            ),
                        )
                        .with(
                            "errors",
                            serde_json::json!([{"pointer": "", "message": "content is missing"}]),
                        )));
                        None
                    }
                },
            };
            if let (Some(json), Some(schema)) = (judged, schema) {
                let subject = output.artifact_id.as_str();
                if let Some(f) =
                    schema_failure(Code::SchemaValidationFailed, subject, schema, &json)
                {
                    failures.push(at(f));
                }
            }
        }
        for (extra, _) in candidates {
            matched[extra] = true;
            failures.push(
                Failure::new(
                    Code::UnexpectedOutput,
                    format!("{} is attested more than once", output.artifact_id),
                )
                .with("artifact", extra),
            );
        }
        if failures.len() == before
            && let Some(sha256) = digest
        {
            accepted.insert(
                output.path.clone(),
                AcceptedArtifact {
                    artifact_id: output.artifact_id.to_string(),
                    owner_step: doc.id.clone(),
                    sha256,
                    bytes: art.bytes,
                },
            );
        }
    }
    for (index, art) in att
        .artifacts
        .iter()
        .enumerate()
        .filter(|(i, _)| !matched[*i])
    {
        let declared = doc.outputs.iter().find(|o| o.path == art.path);
        failures.push(match declared {
            Some(o) => Failure::new(
                Code::ArtifactBindingMismatch,
                format!(
                    "{} is declared as artifact {}, not {}",
                    art.path, o.artifact_id, art.artifact_id
                ),
            )
            .with("artifact", index)
            .with("expected", &o.artifact_id)
            .with("actual", &art.artifact_id),
            None => Failure::new(
                Code::UnexpectedOutput,
                format!(
                    "{} ({}) is not a declared output of step {}; write only declared files",
                    art.artifact_id, art.path, doc.id
                ),
            )
            .with("artifact", index),
        });
    }
    if failures.is_empty() {
        Ok(accepted)
    } else {
        Err(failures)
    }
}

/// What the session already knows about `path` that the write policy forbids, if anything.
///
/// Paths are unique per workflow, so only the active step ever attests a path; its history is
/// what earlier preparations of this step attested. `create-owned` and
/// `create-or-replace-owned` may rewrite the step's own file between rounds; `must-exist` is
/// proven by the read-back itself.
fn history_breaks_policy(
    session: &Session,
    path: &str,
    policy: WritePolicy,
    digest: Option<Sha256Digest>,
) -> Option<String> {
    let known = session.attested.get(path)?;
    (policy == WritePolicy::CreateOrVerifyOwned && Some(*known) != digest)
        .then(|| format!("{path} was attested with sha256 {known} and must stay unchanged"))
}

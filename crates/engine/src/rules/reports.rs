//! Checking a submitted report set against its validation plan (`docs/engine.md` §6).

use std::collections::BTreeSet;

use crate::{
    model::bounds::json_len,
    model::codes::{Code, Failure},
    model::request::Report,
    model::session::Session,
    rules::schema::schema_failure,
    rules::view::{Pinned, Planned},
};

/// The most fields a report may carry beyond the base report.
pub const MAX_REPORT_EXTRA_FIELDS: usize = 64;

/// The most bytes a report's fields beyond the base report may take, as compact JSON (names
/// and values of those fields as one object).
pub const MAX_REPORT_EXTRA_BYTES: usize = 64 * 1024;

/// A failure when `report`'s extra fields exceed the bounds, checked before its schema runs;
/// the detail carries only counts, never the fields themselves.
fn extras_out_of_bounds(report: &Report) -> Option<Failure> {
    let fields = report.extra.len();
    let bytes = json_len(&report.extra);
    (fields > MAX_REPORT_EXTRA_FIELDS || bytes > MAX_REPORT_EXTRA_BYTES).then(|| {
        Failure::new(
            Code::ReportExtrasExceeded,
            format!(
                "fields beyond the base report: {fields}, taking {bytes} bytes of JSON; at most \
                 {MAX_REPORT_EXTRA_FIELDS} fields and {MAX_REPORT_EXTRA_BYTES} bytes are accepted, \
                 so keep only what the validator's report schema declares"
            ),
        )
        .with("fields", fields)
        .with("max_fields", MAX_REPORT_EXTRA_FIELDS)
        .with("bytes", bytes)
        .with("max_bytes", MAX_REPORT_EXTRA_BYTES)
    })
}

/// Checks `reports` against the plan's validators (`planned`, in plan order); an empty result
/// means the set is complete and in bounds.
pub(crate) fn check_reports(
    pinned: &Pinned<'_>,
    session: &Session,
    planned: &[Planned<'_, '_>],
    reports: &[Report],
) -> Vec<Failure> {
    let mut failures = Vec::new();
    let mut matched = vec![false; reports.len()];
    for Planned {
        id,
        version,
        validator,
        allowed,
    } in planned
    {
        let mut candidates = reports
            .iter()
            .enumerate()
            .filter(|(_, r)| r.validator_id == id.as_str());
        let Some((index, report)) = candidates.next() else {
            failures.push(
                Failure::new(
                    Code::ReportMissing,
                    format!("validator {id}@{version} has no report; run it and submit its report"),
                )
                .with("validator_id", id),
            );
            continue;
        };
        matched[index] = true;
        for (extra, _) in candidates {
            matched[extra] = true;
            failures.push(
                Failure::new(
                    Code::ReportDuplicate,
                    format!("validator {id} is reported more than once"),
                )
                .with("report", extra)
                .with("validator_id", id),
            );
        }
        let at = |f: Failure| f.with("report", index).with("validator_id", id);
        if report.validator_version != version.to_string() {
            failures.push(at(Failure::new(
                Code::ReportUnexpected,
                format!(
                    "the plan runs {id}@{version}, not @{}",
                    report.validator_version
                ),
            )
            .with("expected", version.to_string())
            .with("actual", &report.validator_version)));
        }
        if let Some(f) = extras_out_of_bounds(report) {
            failures.push(at(f));
        } else {
            let schema_ref = &validator.doc().report_schema;
            let schema = pinned
                .release
                .schema(&schema_ref.id, &schema_ref.version)
                .expect("verified reference");
            // Serialized with its extra fields, so the schema judges the report as submitted.
            let value = serde_json::to_value(report).expect("reports serialize");
            let subject = format!("report of {id}");
            if let Some(f) = schema_failure(Code::ReportSchemaInvalid, &subject, schema, &value) {
                failures.push(at(f));
            }
        }
        let escalated: Vec<_> = report
            .capabilities_used
            .iter()
            .filter(|c| !allowed.contains(c))
            .collect();
        if !escalated.is_empty() {
            failures.push(at(Failure::new(
                Code::CapabilityEscalation,
                format!("{id} used capabilities it was not allowed"),
            )
            .with("allowed", allowed.iter().collect::<BTreeSet<_>>())
            .with("used", escalated)));
        }
        let declared: BTreeSet<String> = validator
            .doc()
            .inputs
            .iter()
            .map(|a| pinned.input(session, a.as_str()).path)
            .collect();
        let undeclared: Vec<_> = report
            .inputs_read
            .iter()
            .filter(|p| !declared.contains(*p))
            .collect();
        if !undeclared.is_empty() {
            failures.push(at(Failure::new(
                Code::UndeclaredInputRead,
                format!("{id} read files that are not its declared inputs"),
            )
            .with("declared", &declared)
            .with("read", undeclared)));
        }
    }
    for (index, report) in reports.iter().enumerate().filter(|(i, _)| !matched[*i]) {
        failures.push(
            Failure::new(
                Code::ReportUnexpected,
                format!("validator {} is not in this plan", report.validator_id),
            )
            .with("report", index)
            .with("validator_id", &report.validator_id),
        );
    }
    failures
}

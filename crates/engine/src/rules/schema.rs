//! A JSON value judged by a signed schema, as one bounded failure: the errors at the lowest
//! pointers, each message cut, and the total (`docs/engine.md` §1.1). Artifacts at preparation
//! and reports at submission are judged the same way.

use std::{cmp::Ordering, collections::BinaryHeap};

use jsonschema::ValidationError;

use crate::model::{
    bounds::{MAX_SCHEMA_ERROR_CHARS, MAX_SCHEMA_ERRORS, display_capped},
    codes::{Code, Failure},
};

/// The errors of `value` against `schema` as one failure (`None` when the value is valid): at
/// most [`MAX_SCHEMA_ERRORS`], those at the lowest JSON pointers, sorted by pointer then message,
/// each message cut to [`MAX_SCHEMA_ERROR_CHARS`], and `error_count`, the total.
pub(crate) fn schema_failure(
    code: Code,
    subject: &str,
    schema: &rimthan_registry::Schema,
    value: &serde_json::Value,
) -> Option<Failure> {
    // The validator hands over every error; a bounded max-heap keeps the lowest pointers, so
    // only those get a message rendered.
    let mut kept = BinaryHeap::with_capacity(MAX_SCHEMA_ERRORS + 1);
    let mut total = 0usize;
    for (seq, error) in schema.validator().iter_errors(value).enumerate() {
        total += 1;
        kept.push(Ranked { seq, error });
        if kept.len() > MAX_SCHEMA_ERRORS {
            kept.pop();
        }
    }
    let mut errors: Vec<(String, String)> = kept
        .into_iter()
        .map(|r| {
            let message = display_capped(&r.error, MAX_SCHEMA_ERROR_CHARS);
            (r.error.instance_path().as_str().to_owned(), message)
        })
        .collect();
    errors.sort();
    let first = errors.first()?.1.clone();
    let list: Vec<_> = errors
        .iter()
        .map(|(p, m)| serde_json::json!({"pointer": p, "message": m}))
        .collect();
    let count = if total == 1 {
        String::new()
    } else {
        format!(" ({total} errors)")
    };
    let message = format!(
        "{subject} does not satisfy schema {}{count}: {first}",
        schema.entry().id
    );
    Some(
        Failure::new(code, message)
            .with("errors", list)
            .with("error_count", total),
    )
}

/// A schema error ranked by its JSON pointer, then by the validator's order.
struct Ranked<'v> {
    seq: usize,
    error: ValidationError<'v>,
}

impl Ranked<'_> {
    fn key(&self) -> (&str, usize) {
        (self.error.instance_path().as_str(), self.seq)
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Ranked<'_> {}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

//! Compiling a release's JSON Schemas with every problem listed, each at its JSON pointer, and
//! checking a schema's own `examples` against it (docs/registry-format.md §3).
//!
//! Messages are bounded: at most [`MAX_LISTED`] problems, each cut to [`MAX_MESSAGE_CHARS`],
//! so a huge or hostile schema cannot produce a huge error.

use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::verify::DRAFT_2020_12;

/// Most problems listed in one `schema_invalid` message; the rest are counted.
pub(crate) const MAX_LISTED: usize = 20;
/// Most validation errors listed for one failing example.
pub(crate) const MAX_EXAMPLE_ERRORS: usize = 3;
const NOT_A_SCHEMA: &str = "not a valid JSON Schema (draft 2020-12)";
/// Longest single problem text, in characters.
const MAX_MESSAGE_CHARS: usize = 200;

/// One problem at a JSON pointer (`""` is the document root).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    pointer: String,
    message: String,
}

impl Problem {
    fn of(error: &ValidationError<'_>) -> Self {
        Problem {
            pointer: error.instance_path().as_str().to_owned(),
            message: bounded(&error.masked().to_string()),
        }
    }
}

fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `at /a/b: message; at /c: message; and N more`.
fn list(problems: &[Problem], more: usize) -> String {
    let mut text = problems
        .iter()
        .map(|p| {
            let at = if p.pointer.is_empty() {
                "(root)"
            } else {
                &p.pointer
            };
            format!("at {at}: {}", p.message)
        })
        .collect::<Vec<_>>()
        .join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}

/// Compiles `value` as a draft 2020-12 schema asserting formats, or says every reason it is
/// not one, each with its pointer into the schema.
pub(crate) fn compile(value: &Value) -> Result<Validator, String> {
    match value.get("$schema") {
        None => {}
        Some(Value::String(s)) if s == DRAFT_2020_12 => {}
        Some(_) => {
            return Err(format!(
                "{NOT_A_SCHEMA}: 1 problem(s): at /$schema: use {DRAFT_2020_12:?}"
            ));
        }
    }
    let meta = jsonschema::draft202012::meta::validator();
    let mut problems: Vec<Problem> = meta.iter_errors(value).map(|e| Problem::of(&e)).collect();
    problems.sort();
    problems.dedup();
    if !problems.is_empty() {
        let total = problems.len();
        let more = total.saturating_sub(MAX_LISTED);
        problems.truncate(MAX_LISTED);
        return Err(format!(
            "{NOT_A_SCHEMA}: {total} problem(s): {}",
            list(&problems, more)
        ));
    }
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(value)
        .map_err(|e| {
            format!(
                "{NOT_A_SCHEMA}: 1 problem(s): {}",
                list(&[Problem::of(&e)], 0)
            )
        })
}

/// Each entry of a top-level `examples` array must satisfy the schema it illustrates.
pub(crate) fn check_examples(value: &Value, validator: &Validator) -> Result<(), String> {
    let Some(examples) = value.get("examples").and_then(Value::as_array) else {
        return Ok(());
    };
    for (index, example) in examples.iter().enumerate() {
        let mut errors = validator.iter_errors(example);
        let problems: Vec<Problem> = errors
            .by_ref()
            .take(MAX_EXAMPLE_ERRORS)
            .map(|e| Problem::of(&e))
            .collect();
        if !problems.is_empty() {
            return Err(format!(
                "at /examples/{index}: the example does not satisfy its own schema: {}",
                list(&problems, errors.count())
            ));
        }
    }
    Ok(())
}

//! What the scripted harness writes for a declared output, in the order a workflow author
//! would want an agent to see it: the author's own example (inlined into the step for non-JSON
//! outputs; the schema's `examples` for JSON outputs), else an instance generated from the
//! output's schema, else a placeholder that names the step.

use rimthan_registry::{MEDIA_JSON, MEDIA_MARKDOWN};
use serde_json::Value;

use crate::{
    StageError,
    client::{Client, read_json, str_field},
};

/// The bytes to write for `output` (an entry of an active payload's `step.outputs`); `step_doc`
/// is the step's resource, which carries the author's examples.
pub(crate) async fn output_content(
    client: &Client,
    step_id: &str,
    step_doc: &Value,
    output: &Value,
) -> Result<Vec<u8>, StageError> {
    let artifact = str_field(output, "step", "artifact_id")?;
    let declared = step_doc["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["artifact_id"] == artifact);
    if let Some(example) = declared.and_then(|o| o["example"].as_str()) {
        return Ok(example.as_bytes().to_vec());
    }
    let Some(schema_uri) = output["schema"]["uri"].as_str() else {
        return Ok(format!(
            "Placeholder for {artifact}, written by rimthan stage for step {step_id}: \
             the workflow gives no example of this output.\n"
        )
        .into_bytes());
    };
    let schema = read_json(client, schema_uri).await?;
    let instance =
        rimthan_registry::example_or_instance(&schema).ok_or_else(|| StageError::NoContent {
            step: step_id.to_owned(),
            artifact: artifact.to_owned(),
            reason: format!(
                "its schema ({schema_uri}) has no `examples` and no valid instance could be \
                 generated from it; add an `examples` entry to the schema"
            ),
        })?;
    let mut text = serde_json::to_string_pretty(&instance).expect("JSON serializes");
    text.push('\n');
    Ok(text.into_bytes())
}

/// Appends a line of sixteen spaces and tabs spelling `nonce` in binary to a JSON or Markdown
/// output that ends with a newline: whitespace after a JSON value, and a blank line at the end
/// of a Markdown file, change the bytes and not what either parses to.
pub(crate) fn vary(bytes: &mut Vec<u8>, output: &Value, nonce: u16) {
    let media = output["media_type"].as_str().unwrap_or_default();
    if ![MEDIA_JSON, MEDIA_MARKDOWN].contains(&media) || bytes.last() != Some(&b'\n') {
        return;
    }
    bytes.extend(
        (0..16)
            .rev()
            .map(|bit| if nonce >> bit & 1 == 1 { b'\t' } else { b' ' }),
    );
    bytes.push(b'\n');
}

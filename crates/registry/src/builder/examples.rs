//! Worked examples of non-JSON outputs. An author may put one at
//! `workflows/<id>/<version>/examples/<declared output path>` (the folder mirrors the project
//! tree); the builder inlines it as text into that output's declaration. JSON outputs take
//! their example from their schema's `examples` instead.

use std::path::Path;

use super::source::{files_under, source_error};
use crate::{
    error::RegistryError,
    files::MAX_FILE_BYTES,
    model::{MEDIA_JSON, StepDoc},
    regular::read_regular,
};

/// How many declared paths an error lists before it stops.
const LISTED_PATHS: usize = 8;

/// Sets `example` on the outputs of `steps` that have a file under `dir`.
pub(super) fn attach(dir: &Path, steps: &mut [StepDoc]) -> Result<(), RegistryError> {
    let declared: Vec<String> = steps
        .iter()
        .flat_map(|s| &s.outputs)
        .map(|o| o.path.clone())
        .collect();
    for (rel, path) in files_under(dir)? {
        let Some(output) = steps
            .iter_mut()
            .flat_map(|s| s.outputs.iter_mut())
            .find(|o| o.path == rel)
        else {
            let mut listed = declared[..declared.len().min(LISTED_PATHS)].join(", ");
            if declared.len() > LISTED_PATHS {
                listed.push_str(", …");
            }
            return Err(source_error(
                &path,
                format!(
                    "example for {rel}, which no step of this workflow version declares as an \
                     output; name it examples/<declared output path> (declared: {listed}) or \
                     delete it"
                ),
            ));
        };
        if output.media_type == MEDIA_JSON {
            return Err(source_error(
                &path,
                format!(
                    "{rel} is a JSON output: JSON outputs take their example from the schema's \
                     `examples`; move it there and delete this file"
                ),
            ));
        }
        // Bounded by the file limit too, whatever max_bytes says (verification checks it later).
        let limit = output.max_bytes.min(MAX_FILE_BYTES);
        let bytes =
            read_regular(&path, &path.display().to_string(), limit).map_err(|e| match e {
                RegistryError::EntryTooLarge { bytes, .. } => source_error(
                    &path,
                    format!(
                        "{bytes} bytes is over the output's max_bytes of {}; shorten the example",
                        output.max_bytes
                    ),
                ),
                other => other,
            })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            source_error(
                &path,
                "not UTF-8 text; examples are inlined into the step document as text".into(),
            )
        })?;
        output.example = Some(text);
    }
    Ok(())
}

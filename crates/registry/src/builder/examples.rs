//! Worked examples of non-JSON outputs. An author may put one at
//! `workflows/<id>/<version>/examples/<declared output path>` (the folder mirrors the project
//! tree); the builder inlines it as text into that output's declaration. JSON outputs take
//! their example from their schema's `examples` instead.

use std::{fs, path::Path};

use super::source::{files_under, source_error};
use crate::{
    error::RegistryError,
    model::{MEDIA_JSON, StepDoc},
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
        let size = fs::metadata(&path).map_err(RegistryError::io(&path))?.len();
        if size > output.max_bytes {
            return Err(source_error(
                &path,
                format!(
                    "{size} bytes is over the output's max_bytes of {}; shorten the example",
                    output.max_bytes
                ),
            ));
        }
        let bytes = fs::read(&path).map_err(RegistryError::io(&path))?;
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

//! An operator's own bootstrap paragraph: `bootstrap.md` at the root of a release source
//! becomes the release's one `bootstrap` entry, signed like every other entry. A server whose
//! active release carries one serves it in place of its built-in paragraph (`docs/operations/workflow-engine-bootstrap.md`).

use std::{fs, path::Path};

use crate::{
    digest::Sha256Digest,
    error::RegistryError,
    ids::Version,
    model::{Entry, EntryKind, MEDIA_MARKDOWN},
};

/// The source file, at the root of a release source.
pub const BOOTSTRAP_SOURCE: &str = "bootstrap.md";
/// The entry's id; a release has at most one bootstrap entry.
pub const BOOTSTRAP_ID: &str = "agent-entrypoint";
/// The entry's release-relative path.
pub const BOOTSTRAP_PATH: &str = "bootstrap/agent-entrypoint.md";
/// Largest bootstrap paragraph: it is sent to every agent at connection time.
pub const MAX_BOOTSTRAP_BYTES: usize = 8 * 1024;

/// The entry's version: the entry has one form, so its version is fixed.
fn bootstrap_version() -> Version {
    Version::new(1, 0, 0)
}

/// The paragraph in `bytes`, or what to change: UTF-8, at most [`MAX_BOOTSTRAP_BYTES`], not blank.
fn paragraph(bytes: &[u8]) -> Result<&str, String> {
    if bytes.len() > MAX_BOOTSTRAP_BYTES {
        return Err(format!(
            "{} bytes is over the limit of {MAX_BOOTSTRAP_BYTES} bytes; shorten the paragraph",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    if text.trim().is_empty() {
        return Err("blank; write the paragraph agents follow, or remove the file".into());
    }
    Ok(text)
}

/// Checks a manifest entry of kind `bootstrap` and its authenticated bytes; `file` is the
/// registry-relative path of the entry's file.
pub(crate) fn check_entry(file: String, entry: &Entry, bytes: &[u8]) -> Result<(), RegistryError> {
    let invalid = |reason: String| RegistryError::BootstrapInvalid {
        file: file.clone(),
        entry: entry.label(),
        reason,
    };
    if entry.id != BOOTSTRAP_ID
        || entry.version != bootstrap_version()
        || entry.path != BOOTSTRAP_PATH
    {
        return Err(invalid(format!(
            "a bootstrap entry has id {BOOTSTRAP_ID}, version {} and path {BOOTSTRAP_PATH}",
            bootstrap_version()
        )));
    }
    if entry.media_type != MEDIA_MARKDOWN {
        return Err(invalid(format!("media type must be {MEDIA_MARKDOWN}")));
    }
    paragraph(bytes).map(|_| ()).map_err(invalid)
}

/// The bootstrap entry and bytes built from `source/bootstrap.md`, if the source has one (size
/// and digest are the builder's to fill in). The paragraph is trimmed and ends with one newline,
/// like every other Markdown body.
pub(crate) fn from_source(source: &Path) -> Result<Option<(Entry, Vec<u8>)>, RegistryError> {
    let path = source.join(BOOTSTRAP_SOURCE);
    if fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bytes =
        crate::regular::read_regular(&path, &path.display().to_string(), crate::MAX_FILE_BYTES)?;
    let entry = Entry {
        kind: EntryKind::Bootstrap,
        id: BOOTSTRAP_ID.into(),
        version: bootstrap_version(),
        workflow: None,
        asset_kind: None,
        rendition: None,
        compatible_harnesses: None,
        adapter_contract: None,
        path: BOOTSTRAP_PATH.into(),
        media_type: MEDIA_MARKDOWN.into(),
        bytes: 0,
        sha256: Sha256Digest::of(b""),
    };
    let text = paragraph(&bytes).map_err(|reason| RegistryError::BootstrapInvalid {
        file: path.display().to_string(),
        entry: entry.label(),
        reason,
    })?;
    let built = (text.trim().to_owned() + "\n").into_bytes();
    Ok(Some((entry, built)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paragraph_is_bounded_utf8_and_not_blank() {
        assert!(paragraph(b"Connect and start.").is_ok());
        assert!(paragraph(&vec![b'a'; MAX_BOOTSTRAP_BYTES]).is_ok());
        let over = paragraph(&vec![b'a'; MAX_BOOTSTRAP_BYTES + 1]).unwrap_err();
        assert!(over.contains("over the limit"), "{over}");
        assert_eq!(paragraph(&[0xff, 0xfe]).unwrap_err(), "not UTF-8 text");
        assert!(paragraph(b" \n\t\n").unwrap_err().starts_with("blank"));
    }
}

//! Reading a release source folder with errors an author can act on: every failure is
//! `source_invalid` naming the source file (and line, where the parser knows it), and a missing
//! file names what was expected and any near miss found instead (wrong case or extension).

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::de::DeserializeOwned;

use crate::{
    error::RegistryError, files::MAX_FILE_BYTES, frontmatter, ids::Version, regular::read_regular,
};

pub(super) fn source_error(path: &Path, reason: String) -> RegistryError {
    source_error_at(path, None, reason)
}

pub(super) fn source_error_at(path: &Path, line: Option<usize>, reason: String) -> RegistryError {
    RegistryError::SourceInvalid {
        file: path.display().to_string(),
        line,
        reason,
    }
}

/// The bytes of the source file at `path`, which must be a regular file of at most
/// `MAX_FILE_BYTES`: a symlink could pull bytes from outside the source into a signed release.
pub(super) fn read(path: &Path) -> Result<Vec<u8>, RegistryError> {
    read_regular(path, &path.display().to_string(), MAX_FILE_BYTES)
}

/// Refuses `path` if it is a symlink; an absent path passes.
fn refuse_symlink(path: &Path) -> Result<(), RegistryError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(RegistryError::SymlinkNotAllowed {
            file: path.display().to_string(),
        }),
        _ => Ok(()),
    }
}

pub(super) fn read_text(path: &Path) -> Result<String, RegistryError> {
    String::from_utf8(read(path)?).map_err(|_| source_error(path, "not UTF-8 text".into()))
}

pub(super) fn parse<T: std::str::FromStr>(path: &Path, value: &str) -> Result<T, RegistryError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e: T::Err| source_error(path, e.to_string()))
}

pub(super) fn parse_frontmatter<'t, T: DeserializeOwned>(
    path: &Path,
    text: &'t str,
) -> Result<(T, &'t str), RegistryError> {
    frontmatter::parse_located(text).map_err(|e| source_error_at(path, e.line, e.message))
}

pub(super) fn parse_json<T: DeserializeOwned>(path: &Path) -> Result<T, RegistryError> {
    serde_json::from_slice(&read(path)?).map_err(|e| {
        let line = (e.line() > 0).then_some(e.line());
        source_error_at(path, line, e.to_string())
    })
}

/// The version named by `file_name` in `dir`, which must be `<version><extension>`.
pub(super) fn strip_version(
    dir: &Path,
    file_name: &str,
    extension: &str,
) -> Result<Version, RegistryError> {
    let path = dir.join(file_name);
    let stem = file_name.strip_suffix(extension).ok_or_else(|| {
        source_error(
            &path,
            format!("expected a file named <version>{extension}, such as 1.0.0{extension}"),
        )
    })?;
    parse(&path, stem)
}

/// `dir/name`, which must be a file with exactly that name. `what` says why it is expected.
pub(super) fn expect_file(dir: &Path, name: &str, what: &str) -> Result<PathBuf, RegistryError> {
    let path = dir.join(name);
    if !dir.is_dir() {
        return Err(source_error(
            &path,
            format!("missing: {what}; its folder does not exist"),
        ));
    }
    let names = sorted_names(dir)?;
    if names.iter().any(|n| n == name) {
        // Anything but a folder is returned: reading it refuses a FIFO or device by name.
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            return Ok(path);
        }
        return Err(source_error(
            &path,
            format!("is a folder; expected a file: {what}"),
        ));
    }
    let stem = |n: &str| n.rsplit_once('.').map_or(n, |(s, _)| s).to_lowercase();
    let near = names.iter().find(|n| n.eq_ignore_ascii_case(name)).map(|n| {
        format!("found {n}, which differs only in case (names are case-sensitive): rename it to {name}")
    });
    let near = near.or_else(|| {
        names
            .iter()
            .find(|n| stem(n) == stem(name))
            .map(|n| format!("found {n}, which has another extension: rename it to {name}"))
    });
    Err(source_error(
        &path,
        match near {
            Some(near) => format!("missing: {what}; {near}"),
            None => format!("missing: {what}"),
        },
    ))
}

/// `(child, grandchild)` names under `dir`, sorted; a missing `dir` has none. Every child must
/// be a folder (`<id>/`).
pub(super) fn pairs(dir: &Path) -> Result<Vec<(String, String)>, RegistryError> {
    let mut out = Vec::new();
    refuse_symlink(dir)?;
    if !dir.exists() {
        return Ok(out);
    }
    for child in sorted_names(dir)? {
        let child_dir = dir.join(&child);
        if !child_dir.is_dir() {
            return Err(source_error(
                &child_dir,
                format!(
                    "expected a folder named after an id ({}/<id>/…); move the file into one",
                    dir.display()
                ),
            ));
        }
        for grandchild in sorted_names(&child_dir)? {
            out.push((child.clone(), grandchild));
        }
    }
    Ok(out)
}

/// The names in `dir`, sorted. A symlink among them is refused, so nothing the builder finds by
/// listing leads out of the source.
pub(super) fn sorted_names(dir: &Path) -> Result<Vec<String>, RegistryError> {
    let mut names = Vec::new();
    for item in fs::read_dir(dir).map_err(RegistryError::io(dir))? {
        let item = item.map_err(RegistryError::io(dir))?;
        if item
            .file_type()
            .map_err(RegistryError::io(dir))?
            .is_symlink()
        {
            return Err(RegistryError::SymlinkNotAllowed {
                file: item.path().display().to_string(),
            });
        }
        let name = item
            .file_name()
            .into_string()
            .map_err(|_| source_error(&item.path(), "not a UTF-8 name".into()))?;
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Every file under `dir` as (`/`-joined relative path, full path), sorted; none when absent.
pub(super) fn files_under(dir: &Path) -> Result<Vec<(String, PathBuf)>, RegistryError> {
    let mut out = Vec::new();
    refuse_symlink(dir)?;
    if dir.is_dir() {
        collect(dir, "", &mut out)?;
    }
    Ok(out)
}

fn collect(
    dir: &Path,
    prefix: &str,
    out: &mut Vec<(String, PathBuf)>,
) -> Result<(), RegistryError> {
    for name in sorted_names(dir)? {
        let path = dir.join(&name);
        let rel = format!("{prefix}{name}");
        if path.is_dir() {
            collect(&path, &format!("{rel}/"), out)?;
        } else {
            out.push((rel, path));
        }
    }
    Ok(())
}

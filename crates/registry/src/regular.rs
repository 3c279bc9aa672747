//! Reading one file without trusting its name: the name is opened without following a symlink
//! and without waiting on a FIFO, the handle (not the name) must be a regular file, and its size
//! is checked before any byte is read. A name that turns out to be a symlink, a FIFO, a socket, a
//! device or a folder is refused, naming the file (`docs/registry-format.md` §1).

use std::{
    fs::{File, OpenOptions},
    io::Read as _,
    path::Path,
};

use crate::error::RegistryError;

/// The bytes of the regular file at `path`, at most `limit` of them, read as the registry reads
/// its own files (no symlink, FIFO or device; the size checked before reading): for tools that
/// read a participant's files, such as `rimthan registry check`.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, RegistryError> {
    read_regular(path, &path.display().to_string(), limit)
}

/// The bytes of the regular file at `path`, at most `limit` of them. `file` is how errors name it.
pub(crate) fn read_regular(path: &Path, file: &str, limit: u64) -> Result<Vec<u8>, RegistryError> {
    let handle = open(path).map_err(|e| refusal(e, path, file))?;
    let meta = handle.metadata().map_err(RegistryError::io(path))?;
    if !meta.is_file() {
        return Err(RegistryError::NotARegularFile {
            file: file.into(),
            kind: kind(&meta.file_type()),
        });
    }
    if meta.len() > limit {
        return Err(too_large(file, meta.len(), limit));
    }
    // The file may grow between the fstat and the read: read one byte past the limit to see it.
    let capacity = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(capacity);
    handle
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(RegistryError::io(path))?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(too_large(file, read, limit));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;

    use rustix::fs::OFlags;
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
}

#[cfg(not(unix))]
fn open(path: &Path) -> std::io::Result<File> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::other("symlink"));
    }
    OpenOptions::new().read(true).open(path)
}

/// The error for a failed open: O_NOFOLLOW fails with ELOOP exactly when the name is a symlink.
fn refusal(error: std::io::Error, path: &Path, file: &str) -> RegistryError {
    let is_symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_symlink {
        RegistryError::SymlinkNotAllowed { file: file.into() }
    } else {
        RegistryError::io(path)(error)
    }
}

fn too_large(file: &str, bytes: u64, limit: u64) -> RegistryError {
    RegistryError::EntryTooLarge {
        file: file.into(),
        bytes,
        limit,
    }
}

/// What a non-regular file is, in the words of `ls -l`'s reader.
pub(crate) fn kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return "named pipe (FIFO)";
        }
        if file_type.is_socket() {
            return "socket";
        }
        if file_type.is_char_device() {
            return "character device";
        }
        if file_type.is_block_device() {
            return "block device";
        }
    }
    if file_type.is_dir() {
        "folder"
    } else if file_type.is_symlink() {
        "symlink"
    } else {
        "special file"
    }
}

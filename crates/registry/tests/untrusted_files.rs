//! `registry build` and registry reads trust no name: a symlink (to a file or a folder), a named
//! pipe or a file over `MAX_FILE_BYTES` is refused naming it, promptly and without reading it
//! whole. Symlinks and FIFOs cannot be committed as fixtures, so each test makes its own.

#![cfg(unix)]

use std::{
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
    sync::mpsc,
    time::{Duration, Instant},
};

use rimthan_registry::{
    MAX_FILE_BYTES, RegistryError, RegistryFiles, build_release, publish, set_channel,
};
use rimthan_testkit::fs::copy_dir;

use crate::common::{repo_root, test_key};

/// The workflow version folder every test edits, relative to the source.
const VERSION: &str = "workflows/research-study/1.0.0";

/// A copy of the shipped source, and a folder outside it.
fn source_copy() -> (tempfile::TempDir, tempfile::TempDir) {
    let source = tempfile::tempdir().unwrap();
    copy_dir(&repo_root().join("registry/source"), source.path());
    (source, tempfile::tempdir().unwrap())
}

/// Moves `rel` out of the source into `outside` and leaves a symlink to it in its place, so the
/// source reads the same bytes as before through the link.
fn replace_with_symlink(source: &Path, rel: &str, outside: &Path) -> PathBuf {
    let path = source.join(rel);
    let moved = outside.join(path.file_name().unwrap());
    std::fs::rename(&path, &moved).unwrap();
    symlink(&moved, &path).unwrap();
    path
}

fn build(source: &Path) -> Result<(), RegistryError> {
    build_release(source, &"2027.01.0".parse().unwrap(), &test_key()).map(|_| ())
}

/// Runs `f` on another thread and fails the test if it takes longer than `limit`; `unblock`
/// then frees the stuck thread so the test binary can still exit.
fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
    unblock: impl FnOnce(),
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(_) => {
            unblock();
            panic!("still running after {limit:?}");
        }
    }
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// Opens the FIFO for writing and closes it, so a reader waiting in open() sees end of file.
fn release_reader(path: &Path) {
    drop(std::fs::OpenOptions::new().write(true).open(path));
}

fn assert_names(err: &RegistryError, code: &str, file: &str) {
    assert_eq!(err.code(), code, "{err}");
    assert!(err.to_string().contains(file), "{err} should name {file}");
}

#[test]
fn a_symlinked_step_file_is_not_built() {
    let (source, outside) = source_copy();
    let rel = format!("{VERSION}/steps/gather-sources.md");
    replace_with_symlink(source.path(), &rel, outside.path());
    assert_names(
        &build(source.path()).unwrap_err(),
        "symlink_not_allowed",
        &rel,
    );
}

#[test]
fn a_symlinked_example_file_is_not_built() {
    let (source, outside) = source_copy();
    let rel = format!("{VERSION}/examples/research/notes.md");
    replace_with_symlink(source.path(), &rel, outside.path());
    assert_names(
        &build(source.path()).unwrap_err(),
        "symlink_not_allowed",
        &rel,
    );
}

#[test]
fn a_symlinked_example_folder_is_not_built() {
    let (source, outside) = source_copy();
    let rel = format!("{VERSION}/examples/research");
    replace_with_symlink(source.path(), &rel, outside.path());
    assert_names(
        &build(source.path()).unwrap_err(),
        "symlink_not_allowed",
        &rel,
    );
}

#[test]
fn an_oversize_step_file_is_refused_without_being_read() {
    let (source, _outside) = source_copy();
    let rel = format!("{VERSION}/steps/gather-sources.md");
    // Sparse: 2 GiB on paper, nothing on disk; reading it whole would need 2 GiB of memory.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(source.path().join(&rel))
        .unwrap();
    file.set_len(2 << 30).unwrap();
    let started = Instant::now();
    let err = build(source.path()).unwrap_err();
    assert_names(&err, "entry_too_large", &rel);
    assert!(
        err.to_string()
            .contains(&format!("limit of {MAX_FILE_BYTES} bytes")),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_named_pipe_step_file_is_refused_promptly() {
    let (source, _outside) = source_copy();
    let rel = format!("{VERSION}/steps/gather-sources.md");
    let fifo = source.path().join(&rel);
    std::fs::remove_file(&fifo).unwrap();
    mkfifo(&fifo);
    let dir = source.path().to_owned();
    let err = within(
        Duration::from_secs(10),
        move || build(&dir),
        || release_reader(&fifo),
    );
    assert_names(&err.unwrap_err(), "not_a_regular_file", &rel);
}

#[test]
fn a_named_pipe_in_a_registry_folder_is_refused_promptly() {
    let registry = tempfile::tempdir().unwrap();
    let source = repo_root().join("registry/source");
    let release = "2027.01.0".parse().unwrap();
    publish(
        registry.path(),
        &build_release(&source, &release, &test_key()).unwrap(),
    )
    .unwrap();
    set_channel(registry.path(), &"stable".parse().unwrap(), &release).unwrap();
    let fifo = registry.path().join("keys/pipe.json");
    mkfifo(&fifo);
    let dir = registry.path().to_owned();
    let read = within(
        Duration::from_secs(10),
        move || RegistryFiles::from_dir(&dir),
        || release_reader(&fifo),
    );
    assert_names(&read.unwrap_err(), "not_a_regular_file", "keys/pipe.json");
}

//! `rimthan stage` writes nothing through a symlink planted in the project: not at an output's,
//! the session file's or a skill's temporary name, and not at `.rimthan`, where the in-process
//! server keeps its database. Each run is refused naming the symlink, and the file it points at
//! keeps its bytes.

#![cfg(unix)]

use std::{os::unix::fs::symlink, path::Path, process::Command};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");
const PLANTED: &[u8] = b"outside the project\n";

/// Plants a symlink at `rel` in a fresh project pointing at `target`, runs an in-process stage,
/// and asserts the run is refused naming `rel`.
fn assert_refused(rel: &str, target: &Path) {
    let project = tempfile::tempdir().unwrap();
    let link = project.path().join(rel);
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    symlink(target, &link).unwrap();
    let out = Command::new(BIN)
        .args(["stage", "--workflow", "research-study", "--harness"])
        .args(["claude-code", "--project"])
        .arg(project.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{rel}: {stderr}");
    assert!(
        stderr.contains(&format!("{rel}: is a symlink")),
        "{rel}: {stderr}"
    );
}

/// A symlink planted at `rel` pointing at a file outside: the file keeps its bytes.
fn assert_file_untouched(rel: &str) {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, PLANTED).unwrap();
    assert_refused(rel, &victim);
    assert_eq!(std::fs::read(&victim).unwrap(), PLANTED, "{rel}");
}

#[test]
fn a_symlink_at_an_outputs_temporary_name_is_refused() {
    assert_file_untouched("research/notes.rimthan-stage-tmp");
}

#[test]
fn a_symlink_at_the_session_files_temporary_name_is_refused() {
    assert_file_untouched(".rimthan/workflow-session.rimthan-stage-tmp");
}

#[test]
fn a_symlink_at_a_skills_temporary_name_is_refused() {
    assert_file_untouched(".claude/skills/rimthan-research/SKILL.rimthan-stage-tmp");
}

#[test]
fn the_in_process_database_is_not_created_through_a_symlinked_state_folder() {
    let outside = tempfile::tempdir().unwrap();
    assert_refused(".rimthan", outside.path());
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

//! An operator's bootstrap paragraph: built from `bootstrap.md`, signed as the release's
//! `bootstrap` entry, and refused when it is not a paragraph a server may send to every agent.

use std::path::PathBuf;

use rimthan_registry::{
    BOOTSTRAP_PATH, EntryKind, MAX_BOOTSTRAP_BYTES, MEDIA_MARKDOWN, RegistryFiles, ReleaseId,
    build_release, external_policy, publish, verify_registry,
};
use rimthan_testkit::fs::copy_dir;

use crate::common::{repo_root, test_key};

/// A copy of the shipped release source with `bootstrap` as its `bootstrap.md`.
fn source_with(bootstrap: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    copy_dir(&repo_root().join("registry/source"), &source);
    std::fs::write(source.join("bootstrap.md"), bootstrap).unwrap();
    (dir, source)
}

#[test]
fn a_source_bootstrap_becomes_a_signed_entry_of_the_release() {
    let (_dir, source) =
        source_with(b"\n  Connect to Example Corp's engine and follow its steps.\n\n");
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    let out = tempfile::tempdir().unwrap();
    publish(
        out.path(),
        &build_release(&source, &release, &test_key()).unwrap(),
    )
    .unwrap();
    let registry = verify_registry(
        &RegistryFiles::from_dir(out.path()).unwrap(),
        &external_policy(),
    )
    .unwrap();
    let built = registry.release(&release).unwrap();
    assert_eq!(
        built.bootstrap(),
        Some("Connect to Example Corp's engine and follow its steps.\n")
    );
    let entries: Vec<_> = built
        .manifest()
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::Bootstrap)
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].id.as_str(), entries[0].version.to_string()),
        ("agent-entrypoint", "1.0.0".to_owned())
    );
    assert_eq!(
        (entries[0].path.as_str(), entries[0].media_type.as_str()),
        (BOOTSTRAP_PATH, MEDIA_MARKDOWN)
    );
}

#[test]
fn a_release_without_a_bootstrap_source_carries_none() {
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    let built = build_release(&repo_root().join("registry/source"), &release, &test_key()).unwrap();
    assert!(
        built
            .files
            .paths_under(&format!("releases/{release}/bootstrap/"))
            .next()
            .is_none()
    );
}

#[test]
fn a_blank_or_oversize_source_bootstrap_is_refused_naming_the_source_file() {
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    for (bytes, says) in [
        (b" \n\t \n".to_vec(), "blank"),
        (vec![b'a'; MAX_BOOTSTRAP_BYTES + 1], "over the limit"),
        (vec![0xff, b'a'], "not UTF-8"),
    ] {
        let (_dir, source) = source_with(&bytes);
        let err = build_release(&source, &release, &test_key()).unwrap_err();
        assert_eq!(err.code(), "bootstrap_invalid", "{err}");
        let message = err.to_string();
        assert!(message.contains("bootstrap.md"), "{message}");
        assert!(message.contains(says), "{message}");
    }
}

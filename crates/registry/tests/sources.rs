//! Building from source, publishing immutably, and reading registry folders from disk.

use rimthan_registry::{
    RegistryFiles, ReleaseId, build_release, external_policy, publish, set_channel, verify_registry,
};

use crate::common::test_key;

fn source_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source")
}

#[test]
fn a_built_release_verifies_as_an_external_registry() {
    let out = tempfile::tempdir().unwrap();
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    let built = build_release(&source_dir(), &release, &test_key()).unwrap();
    publish(out.path(), &built).unwrap();
    set_channel(out.path(), &"candidate".parse().unwrap(), &release).unwrap();
    let registry = verify_registry(
        &RegistryFiles::from_dir(out.path()).unwrap(),
        &external_policy(),
    )
    .unwrap();
    assert_eq!(
        registry
            .channel(&"candidate".parse().unwrap())
            .unwrap()
            .id(),
        &release
    );
}

#[test]
fn republishing_identical_bytes_is_a_no_op_but_different_bytes_are_refused() {
    let out = tempfile::tempdir().unwrap();
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    let built = build_release(&source_dir(), &release, &test_key()).unwrap();
    publish(out.path(), &built).unwrap();
    publish(out.path(), &built).unwrap();
    let other_key = rimthan_registry::SigningKey::generate().unwrap();
    let rebuilt = build_release(&source_dir(), &release, &other_key).unwrap();
    let err = publish(out.path(), &rebuilt).unwrap_err();
    assert_eq!(err.code(), "release_exists");
}

#[test]
fn builds_are_deterministic() {
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    let a = build_release(&source_dir(), &release, &test_key()).unwrap();
    let b = build_release(&source_dir(), &release, &test_key()).unwrap();
    assert_eq!(a.files, b.files);
    assert_eq!(a.manifest_sha256, b.manifest_sha256);
}

#[test]
fn promoting_to_a_missing_release_names_the_available_ones() {
    let out = tempfile::tempdir().unwrap();
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    publish(
        out.path(),
        &build_release(&source_dir(), &release, &test_key()).unwrap(),
    )
    .unwrap();
    let err = set_channel(
        out.path(),
        &"stable".parse().unwrap(),
        &"2099.1.0".parse().unwrap(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "release_not_found");
    assert!(err.to_string().contains("2027.01.0"));
}

#[cfg(unix)]
#[test]
fn symlinks_in_a_registry_folder_are_refused() {
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(out.path().join("keys")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", out.path().join("keys/evil.json")).unwrap();
    let err = RegistryFiles::from_dir(out.path()).unwrap_err();
    assert_eq!(err.code(), "symlink_not_allowed");
}

#[test]
fn a_source_error_names_the_file() {
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("schemas/broken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("1.0.0.json"), b"{not json").unwrap();
    let err = build_release(src.path(), &"1.0.0".parse().unwrap(), &test_key()).unwrap_err();
    assert!(err.to_string().contains("no workflow found"), "{err}");
    std::fs::create_dir_all(src.path().join("workflows/w/1.0.0")).unwrap();
    let err = build_release(src.path(), &"1.0.0".parse().unwrap(), &test_key()).unwrap_err();
    assert_eq!(err.code(), "source_invalid");
    assert!(
        err.to_string().contains("schemas/broken/1.0.0.json"),
        "{err}"
    );
}

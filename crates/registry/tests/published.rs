//! What was published stays published: the committed default registry matches its
//! `published.json`, an edit to a published asset or manifest fails the check naming the entry
//! and both digests, and a build may add releases but never give a published version new bytes.

use std::path::{Path, PathBuf};

use rimthan_registry::{
    EntryKind, Manifest, PUBLISHED_FILE, PublishedLock, RegistryFiles, ReleaseId, Sha256Digest,
    build_release, check_published, embedded_files, publish,
};
use rimthan_testkit::fs::copy_dir;

use crate::common::{repo_root, test_key};

fn default_dir() -> PathBuf {
    repo_root().join("registry/default")
}

/// A copy of the committed default registry, and its lock.
fn default_copy() -> (tempfile::TempDir, PublishedLock) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&default_dir(), dir.path());
    let lock = PublishedLock::read(&RegistryFiles::from_dir(dir.path()).unwrap())
        .unwrap()
        .expect("the default registry has a lock");
    (dir, lock)
}

fn manifest(dir: &Path, release: &ReleaseId) -> Manifest {
    let path = dir.join(format!("releases/{release}/manifest.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_committed_default_registry_matches_its_publication_lock() {
    let on_disk = check_published(&RegistryFiles::from_dir(&default_dir()).unwrap()).unwrap();
    let embedded = check_published(&embedded_files()).unwrap();
    assert_eq!(on_disk, embedded, "the binary embeds the committed lock");
    assert!(!on_disk.releases.is_empty());
}

#[test]
fn an_edited_published_asset_fails_the_lock_check_naming_the_entry_and_both_digests() {
    let (dir, lock) = default_copy();
    let release = lock.releases.keys().next().unwrap();
    let asset = manifest(dir.path(), release)
        .entries
        .into_iter()
        .find(|e| e.kind == EntryKind::Asset)
        .unwrap();
    let file = dir
        .path()
        .join(format!("releases/{release}/{}", asset.path));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"\nOne more line, edited in place.\n");
    std::fs::write(&file, &bytes).unwrap();

    let err = check_published(&RegistryFiles::from_dir(dir.path()).unwrap()).unwrap_err();
    assert_eq!(err.code(), "published_changed");
    let message = err.to_string();
    let published = lock.entries[&asset.label()].sha256;
    for part in [
        asset.label(),
        published.to_string(),
        Sha256Digest::of(&bytes).to_string(),
    ] {
        assert!(message.contains(&part), "{message} lacks {part}");
    }
}

#[test]
fn an_edited_published_manifest_fails_the_lock_check_naming_the_release_and_both_digests() {
    let (dir, lock) = default_copy();
    let (release, published) = lock.releases.iter().next().unwrap();
    let file = dir.path().join(format!("releases/{release}/manifest.json"));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.push(b'\n');
    std::fs::write(&file, &bytes).unwrap();

    let err = check_published(&RegistryFiles::from_dir(dir.path()).unwrap()).unwrap_err();
    assert_eq!(err.code(), "published_changed");
    let message = err.to_string();
    for part in [
        format!("release {release} manifest"),
        published.to_string(),
        Sha256Digest::of(&bytes).to_string(),
    ] {
        assert!(message.contains(&part), "{message} lacks {part}");
    }
}

#[test]
fn a_release_missing_from_the_lock_or_gone_from_the_folder_fails_the_check() {
    let (dir, lock) = default_copy();
    let release = lock.releases.keys().next().unwrap();
    let mut unrecorded = lock.clone();
    unrecorded.releases.clear();
    std::fs::write(dir.path().join(PUBLISHED_FILE), unrecorded.to_bytes()).unwrap();
    let err = check_published(&RegistryFiles::from_dir(dir.path()).unwrap()).unwrap_err();
    assert_eq!(err.code(), "published_lock_invalid");
    assert!(err.to_string().contains(release.as_str()), "{err}");

    std::fs::write(dir.path().join(PUBLISHED_FILE), lock.to_bytes()).unwrap();
    std::fs::remove_dir_all(dir.path().join("releases").join(release.as_str())).unwrap();
    let err = check_published(&RegistryFiles::from_dir(dir.path()).unwrap()).unwrap_err();
    assert_eq!(err.code(), "published_lock_invalid");
    assert!(err.to_string().contains("is gone"), "{err}");
}

/// A copy of the shipped source, to edit.
fn source_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo_root().join("registry/source"), dir.path());
    dir
}

#[test]
fn a_build_giving_a_published_version_new_bytes_is_refused_naming_both_digests() {
    let (source, out) = (source_copy(), tempfile::tempdir().unwrap());
    let first: ReleaseId = "2027.01.0".parse().unwrap();
    publish(
        out.path(),
        &build_release(source.path(), &first, &test_key()).unwrap(),
    )
    .unwrap();
    let lock_before = std::fs::read(out.path().join(PUBLISHED_FILE)).unwrap();

    let skill = source.path().join("skills/rimthan-research/1.0.0/SKILL.md");
    let mut text = std::fs::read_to_string(&skill).unwrap();
    text.push_str("\nA sentence added to a published version.\n");
    std::fs::write(&skill, &text).unwrap();
    let second: ReleaseId = "2027.02.0".parse().unwrap();
    let built = build_release(source.path(), &second, &test_key()).unwrap();
    let err = publish(out.path(), &built).unwrap_err();

    assert_eq!(err.code(), "published_changed");
    let message = err.to_string();
    let label = "asset skill/rimthan-research@1.0.0";
    let lock = PublishedLock::read(&RegistryFiles::from_dir(out.path()).unwrap())
        .unwrap()
        .unwrap();
    for part in [
        label.to_owned(),
        "first published in release 2027.01.0".to_owned(),
        lock.entries[label].sha256.to_string(),
        Sha256Digest::of(text.as_bytes()).to_string(),
        // The file the author edited, and the version to publish the change as.
        skill.display().to_string(),
        "publish the change as asset skill/rimthan-research version 1.0.1".to_owned(),
    ] {
        assert!(message.contains(&part), "{message} lacks {part}");
    }
    assert!(!out.path().join("releases/2027.02.0").exists());
    assert_eq!(
        std::fs::read(out.path().join(PUBLISHED_FILE)).unwrap(),
        lock_before,
        "a refused build writes nothing"
    );
}

#[test]
fn a_changed_check_of_a_published_workflow_version_names_its_source_and_the_next_workflow_version()
{
    let (source, out) = (source_copy(), tempfile::tempdir().unwrap());
    let first: ReleaseId = "2027.01.0".parse().unwrap();
    publish(
        out.path(),
        &build_release(source.path(), &first, &test_key()).unwrap(),
    )
    .unwrap();
    let script = source
        .path()
        .join("workflows/research-study/2.3.0/checks/question-rules.rhai");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("\n// A comment added to a published check.\n");
    std::fs::write(&script, &text).unwrap();
    // A new release id does not carry it: the check belongs to workflow version 2.3.0.
    let second: ReleaseId = "2027.02.0".parse().unwrap();
    let built = build_release(source.path(), &second, &test_key()).unwrap();
    let err = publish(out.path(), &built).unwrap_err();
    assert_eq!(err.code(), "published_changed");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}: ", script.display())),
        "{message}"
    );
    assert!(
        message.contains(
            "publish the change as workflow research-study version 2.3.1 (copy \
             workflows/research-study/2.3.0/ of the source to workflows/research-study/2.3.1/"
        ),
        "{message}"
    );
    assert!(!out.path().join("releases/2027.02.0").exists());
}

#[test]
fn a_new_version_is_appended_and_a_registry_without_a_lock_gets_one_from_its_releases() {
    let (source, out) = (source_copy(), tempfile::tempdir().unwrap());
    let first: ReleaseId = "2027.01.0".parse().unwrap();
    publish(
        out.path(),
        &build_release(source.path(), &first, &test_key()).unwrap(),
    )
    .unwrap();
    // As a registry written before the lock existed.
    std::fs::remove_file(out.path().join(PUBLISHED_FILE)).unwrap();

    let old = source.path().join("skills/rimthan-research/1.0.0");
    let new = source.path().join("skills/rimthan-research/1.0.1");
    copy_dir(&old, &new);
    std::fs::write(
        new.join("SKILL.md"),
        "---\nname: rimthan-research\ndescription: Research, revised.\n---\nRevised.\n",
    )
    .unwrap();
    let second: ReleaseId = "2027.02.0".parse().unwrap();
    publish(
        out.path(),
        &build_release(source.path(), &second, &test_key()).unwrap(),
    )
    .unwrap();

    let lock = check_published(&RegistryFiles::from_dir(out.path()).unwrap()).unwrap();
    assert_eq!(lock.releases.keys().collect::<Vec<_>>(), [&first, &second]);
    assert_eq!(
        lock.entries["asset skill/rimthan-research@1.0.0"].first_release,
        first
    );
    assert_eq!(
        lock.entries["asset skill/rimthan-research@1.0.1"].first_release,
        second
    );
}

#[test]
fn rebuilding_a_published_release_id_with_other_bytes_is_refused_naming_both_manifest_digests() {
    let (source, out) = (source_copy(), tempfile::tempdir().unwrap());
    let release: ReleaseId = "2027.01.0".parse().unwrap();
    let first = build_release(source.path(), &release, &test_key()).unwrap();
    publish(out.path(), &first).unwrap();
    // The bootstrap paragraph has no version of its own: only the release's digest covers it.
    std::fs::write(
        source.path().join("bootstrap.md"),
        "Start by the workflow id.\n",
    )
    .unwrap();
    let rebuilt = build_release(source.path(), &release, &test_key()).unwrap();
    let err = publish(out.path(), &rebuilt).unwrap_err();
    assert_eq!(err.code(), "published_changed");
    let message = err.to_string();
    for part in [
        "release 2027.01.0 manifest".to_owned(),
        first.manifest_sha256.to_string(),
        rebuilt.manifest_sha256.to_string(),
    ] {
        assert!(message.contains(&part), "{message} lacks {part}");
    }
}

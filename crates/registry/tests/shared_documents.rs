//! Releases that list the same document bytes share what verification compiled from them
//! (`src/verify/compiled.rs`), and each release still judges its own entry.

use rimthan_registry::{EntryKind, Manifest, Sha256Digest};

use crate::common::{reseal, test_key, test_registry, verify_external};

fn manifest(files: &rimthan_registry::RegistryFiles, release: &str) -> Manifest {
    serde_json::from_slice(
        files
            .get(&format!("releases/{release}/manifest.json"))
            .unwrap(),
    )
    .unwrap()
}

/// The first and last releases of the test registry, and the digest of a schema both list.
fn shared_schema(files: &rimthan_registry::RegistryFiles) -> (String, String, Sha256Digest) {
    let releases: Vec<String> = verify_external(files)
        .unwrap()
        .releases()
        .keys()
        .map(|id| id.to_string())
        .collect();
    let (first, last) = (releases[0].clone(), releases[releases.len() - 1].clone());
    assert_ne!(first, last, "the shipped registry holds several releases");
    let earlier = manifest(files, &first);
    let sha256 = manifest(files, &last)
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::Schema)
        .map(|e| e.sha256)
        .find(|digest| earlier.entries.iter().any(|e| e.sha256 == *digest))
        .expect("a schema the first and last releases both publish");
    (first, last, sha256)
}

#[test]
fn releases_listing_the_same_schema_bytes_share_one_compiled_schema() {
    let files = test_registry();
    let (first, last, sha256) = shared_schema(&files);
    let registry = verify_external(&files).unwrap();
    let schema_in = |release: &str| {
        registry
            .release(&release.parse().unwrap())
            .unwrap()
            .schemas()
            .find(|s| s.entry().sha256 == sha256)
            .unwrap()
    };
    let (a, b) = (schema_in(&first), schema_in(&last));
    assert!(std::ptr::eq(a.value(), b.value()));
    assert!(std::ptr::eq(a.validator(), b.validator()));
}

#[test]
fn a_shared_schema_is_still_refused_where_its_own_entry_is_wrong() {
    let mut files = test_registry();
    let (_, last, sha256) = shared_schema(&files);
    let path = format!("releases/{last}/manifest.json");
    let mut edited = manifest(&files, &last);
    let entry = edited
        .entries
        .iter_mut()
        .find(|e| e.sha256 == sha256)
        .unwrap();
    entry.media_type = "text/markdown".into();
    let file = format!("releases/{last}/{}", entry.path);
    files.insert(path, serde_json::to_vec(&edited).unwrap());
    reseal(&mut files, &last, &test_key());

    let err = verify_external(&files).unwrap_err();
    assert_eq!(err.code(), "document_invalid", "{err}");
    assert!(err.to_string().contains(&file), "{err}");
}

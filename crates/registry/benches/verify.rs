//! Registry verification of a generated 10,000-entry release, and of the shipped releases alone,
//! side by side with plain sha256 over the same bytes (the floor any verifier pays).
//! Run: `cargo bench -p rimthan-registry --bench verify`.

#![allow(missing_docs)]

use rimthan_testkit::registry as common;

use criterion::{Criterion, criterion_group, criterion_main};
use rimthan_registry::{
    AssetKind, Entry, EntryKind, Manifest, RegistryFiles, Sha256Digest, external_policy,
    verify_registry,
};

const EXTRA_ENTRIES: usize = 10_000;

/// The default release plus 10,000 subagent assets of about 1 KiB each, signed by the test key.
fn large_registry() -> RegistryFiles {
    let mut files = common::test_registry();
    let base = format!("releases/{}/", common::RELEASE);
    let manifest_path = format!("{base}manifest.json");
    let mut manifest: Manifest =
        serde_json::from_slice(files.get(&manifest_path).unwrap()).unwrap();
    let body = "Check the declared inputs read-only and report.\n".repeat(20);
    for i in 0..EXTRA_ENTRIES {
        let id = format!("generated-{i:05}");
        let path = format!("assets/subagent/{id}/1.0.0/{id}.md");
        let content =
            format!("---\nname: {id}\ndescription: Generated validator {i}.\n---\n\n{body}");
        files.insert(format!("{base}{path}"), content.into_bytes());
        manifest.entries.push(Entry {
            kind: EntryKind::Asset,
            id,
            version: "1.0.0".parse().unwrap(),
            workflow: None,
            asset_kind: Some(AssetKind::Subagent),
            rendition: None,
            compatible_harnesses: None,
            adapter_contract: None,
            path,
            media_type: "text/markdown".into(),
            bytes: 0,
            sha256: Sha256Digest::of(b""),
        });
    }
    files.insert(manifest_path, serde_json::to_vec(&manifest).unwrap());
    common::reseal(&mut files, common::RELEASE, &common::test_key());
    files
}

fn bench(c: &mut Criterion) {
    let files = large_registry();
    let registry =
        verify_registry(&files, &external_policy()).expect("generated registry verifies");
    let release = registry.releases().values().next().unwrap();
    assert!(release.manifest().entries.len() > EXTRA_ENTRIES);
    compare(c, "registry_10k", &files);
    // What every server start pays today: the shipped releases alone, each verified whole.
    compare(c, "registry_shipped", &common::test_registry());
}

/// Verification of `files` beside plain sha256 of the same bytes.
fn compare(c: &mut Criterion, name: &str, files: &RegistryFiles) {
    let all: Vec<_> = files
        .paths()
        .map(|p| files.get(p).unwrap().clone())
        .collect();
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    group.bench_function("verify_registry", |b| {
        b.iter(|| verify_registry(files, &external_policy()).unwrap())
    });
    group.bench_function("sha256_same_bytes", |b| {
        b.iter(|| {
            all.iter()
                .map(|bytes| Sha256Digest::of(bytes))
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

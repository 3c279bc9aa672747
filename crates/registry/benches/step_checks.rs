//! Every step's deterministic checks on outputs at their declared `max_bytes`, against sha256 of
//! the same bytes (`docs/performance.md`, "Deterministic checks"). Each input is the step's
//! worked example repeated up to its output's `max_bytes`, so the checks parse and walk as much
//! text as a participant may send. Steps come from the embedded default release and from the test
//! workflow `crates/engine/tests/data/checked/`. Run: `cargo bench -p rimthan-registry --bench
//! step_checks`.

#![allow(missing_docs)]

use std::collections::BTreeMap;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rimthan_checks::{Input, Severity};
use rimthan_registry::{
    MEDIA_JSON, ReleaseId, Sha256Digest, Step, VerifiedRelease, Workflow, build_release,
    verify_embedded,
};

/// The worked example of the output at `path`, repeated up to `max_bytes` (whole copies only,
/// so every copy parses; JSON is one example, it has one root).
fn filled(release: &VerifiedRelease, workflow: &Workflow, artifact: &str) -> (String, Vec<u8>) {
    let output = workflow
        .steps()
        .iter()
        .flat_map(|s| s.doc().outputs.iter())
        .find(|o| o.artifact_id.as_str() == artifact)
        .expect("a check reads a declared output");
    let example = match (&output.example, &output.schema) {
        (Some(text), _) => text.clone(),
        (None, Some(schema)) => {
            let schema = release.schema(&schema.id, &schema.version).unwrap();
            serde_json::to_string_pretty(&schema.value()["examples"][0]).unwrap() + "\n"
        }
        (None, None) => panic!("{} has no worked example", output.path),
    };
    let limit = usize::try_from(output.max_bytes).unwrap();
    let mut text = example.clone();
    if output.media_type != MEDIA_JSON {
        while text.len() + example.len() < limit {
            text.push('\n');
            text.push_str(&example);
        }
    }
    (output.path.clone(), text.into_bytes())
}

fn bench_step(
    c: &mut Criterion,
    name: &str,
    release: &VerifiedRelease,
    workflow: &Workflow,
    step: &Step,
) {
    let mut texts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut paths: BTreeMap<&str, String> = BTreeMap::new();
    for check in step.checks() {
        for read in &check.doc().reads {
            let (path, bytes) = filled(release, workflow, read.as_str());
            paths.insert(read.as_str(), path.clone());
            texts.insert(path, bytes);
        }
    }
    let total: usize = texts.values().map(Vec::len).sum();
    let run = || {
        for check in step.checks() {
            let inputs: Vec<Input<'_>> = check
                .doc()
                .reads
                .iter()
                .map(|read| {
                    let (path, bytes) = texts.get_key_value(&paths[read.as_str()]).unwrap();
                    Input::new(path, bytes)
                })
                .collect();
            let findings = check.compiled().run(&inputs).unwrap();
            // The worked examples pass, so copies of them do: the figure is the passing path.
            assert!(
                !findings.iter().any(|f| f.severity == Severity::Error),
                "{name}: {findings:?}"
            );
        }
    };
    run();
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(total as u64));
    group.sample_size(20);
    group.bench_function("sha256 of the outputs", |b| {
        b.iter(|| {
            texts
                .values()
                .map(|t| Sha256Digest::of(t))
                .collect::<Vec<_>>()
        })
    });
    group.bench_function("the step's checks", |b| b.iter(run));
    for check in step.checks() {
        let inputs: Vec<Input<'_>> = check
            .doc()
            .reads
            .iter()
            .map(|read| {
                let (path, bytes) = texts.get_key_value(&paths[read.as_str()]).unwrap();
                Input::new(path, bytes)
            })
            .collect();
        group.bench_function(format!("check {}", check.doc().id), |b| {
            b.iter(|| check.compiled().run(&inputs).unwrap())
        });
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let registry = verify_embedded().unwrap();
    let stable = registry.channel(&"stable".parse().unwrap()).unwrap();
    for workflow in stable.workflows() {
        for step in workflow.steps().iter().filter(|s| !s.checks().is_empty()) {
            let name = format!(
                "{}@{} {}",
                workflow.doc().id,
                workflow.doc().version,
                step.doc().id
            );
            bench_step(c, &name, stable, workflow, step);
        }
    }
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/checked");
    let id: ReleaseId = "0.1.0".parse().unwrap();
    let built = build_release(&source, &id, &rimthan_testkit::registry::test_key()).unwrap();
    let registry = rimthan_testkit::registry::verify_external(&built.files).unwrap();
    let release = registry.release(&id).unwrap();
    for workflow in release.workflows() {
        for step in workflow.steps().iter().filter(|s| !s.checks().is_empty()) {
            let name = format!("test workflow {} {}", workflow.doc().id, step.doc().id);
            bench_step(c, &name, release, workflow, step);
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Every step's deterministic checks against sha256 of the same bytes (`docs/performance.md`,
//! "Deterministic checks"), on two sizes of output: the step's worked example as it stands (what
//! a session sends, group `… as a session sends it`), and the example repeated up to its
//! output's `max_bytes` (group `… at max_bytes`), so the checks parse and walk as much text as a
//! participant may send. Steps come from the embedded default release and from the test
//! workflow `crates/engine/tests/data/checked/`. Run: `cargo bench -p rimthan-registry --bench
//! step_checks` (a filter after `--` picks groups).

#![allow(missing_docs)]

use std::collections::BTreeMap;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rimthan_checks::Input;
use rimthan_registry::{
    MEDIA_JSON, ReleaseId, Sha256Digest, Step, VerifiedRelease, Workflow, build_release,
    verify_embedded,
};

/// How much output a bench gives a step's checks.
#[derive(Clone, Copy)]
enum Size {
    /// The worked example once.
    Example,
    /// The worked example repeated up to the output's `max_bytes`.
    MaxBytes,
}

/// The worked example of the output at `path`, at `size`: repeated in whole copies only, so every
/// copy parses; JSON is one example, it has one root.
fn filled(
    release: &VerifiedRelease,
    workflow: &Workflow,
    artifact: &str,
    size: Size,
) -> (String, Vec<u8>) {
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
    if matches!(size, Size::MaxBytes) && output.media_type != MEDIA_JSON {
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
    size: Size,
) {
    let name = match size {
        Size::Example => format!("{name} as a session sends it"),
        Size::MaxBytes => format!("{name} at max_bytes"),
    };
    let mut texts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut paths: BTreeMap<&str, String> = BTreeMap::new();
    for check in step.checks() {
        for read in &check.doc().reads {
            let (path, bytes) = filled(release, workflow, read.as_str(), size);
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
            // Copies of a passing example may break a rule about the file's shape (a findings
            // file has its sections once), but every parse and every rule still runs: the cost
            // is the same work, and the run must finish within its bounds.
            let findings = check.compiled().run(&inputs).unwrap();
            std::hint::black_box(findings);
        }
    };
    run();
    let mut group = c.benchmark_group(&name);
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
            for size in [Size::Example, Size::MaxBytes] {
                bench_step(c, &name, stable, workflow, step, size);
            }
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
            bench_step(c, &name, release, workflow, step, Size::MaxBytes);
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

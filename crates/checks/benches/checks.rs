//! A small check over a 1 MiB output against sha256 of the same bytes: what running a step's
//! checks costs beside hashing the output, which the server does anyway
//! (`docs/checks.md` §Cost). Run: `cargo bench -p rimthan-checks --bench checks`.

#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rimthan_checks::{Check, Input, Limits, Severity};
use sha2::{Digest, Sha256};

const MIB: usize = 1 << 20;

const QUOTES_CITE: &str = r#"
for quote in inputs["findings.md"].markdown.quotes {
    if !quote.text.contains("— ") {
        error("quote-cites-source", "this quotation does not name its source", "findings.md", quote.line);
    }
}
"#;

/// Markdown of about 1 MiB: sections of prose, a quotation and a small table each.
fn markdown() -> Vec<u8> {
    let mut text = String::with_capacity(MIB + 1024);
    let mut n = 0;
    while text.len() < MIB {
        n += 1;
        text.push_str(&format!(
            "## Section {n}\n\nThe study reads the standard closely. It finds the level stated \
             plainly, and the method repeatable by a second reader. See [the source](https://example.org/{n}).\n\n\
             > Every finding shall be traceable to its source.\n> — ISO 9001:2015, clause 7.5\n\n\
             | criterion | met |\n|---|---|\n| SC{n} | yes |\n\n"
        ));
    }
    text.truncate(MIB);
    text.into_bytes()
}

/// SQL of about 1 MiB: a migration's statements repeated.
fn sql() -> Vec<u8> {
    let mut text = String::from("SET statement_timeout = '5s';\nSET lock_timeout = '1s';\n");
    let mut n = 0;
    while text.len() < MIB {
        n += 1;
        text.push_str(&format!(
            "ALTER TABLE orders_{n} ADD COLUMN note_{n} text;\nCREATE INDEX CONCURRENTLY orders_{n}_idx ON orders_{n} (created_at);\n"
        ));
    }
    text.into_bytes()
}

fn bench(c: &mut Criterion) {
    let markdown = markdown();
    let sql = sql();
    let script = Check::script(QUOTES_CITE, Limits::default()).unwrap();
    // Reads nothing: what admitting and parsing the input into the script's values costs alone.
    let empty = Check::script("let unused = 0;", Limits::default()).unwrap();
    let lint = Check::sql_lint(
        [
            ("renaming-column", Severity::Error),
            ("require-concurrent-index-creation", Severity::Error),
            ("adding-field-with-default", Severity::Error),
        ],
        Limits::default(),
    )
    .unwrap();
    assert!(
        script
            .run(&[Input::new("findings.md", &markdown)])
            .unwrap()
            .is_empty()
    );
    assert!(lint.run(&[Input::new("up.sql", &sql)]).unwrap().is_empty());

    let mut group = c.benchmark_group("one_mib");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("sha256", |b| b.iter(|| Sha256::digest(&markdown)));
    group.bench_function("markdown_quotes_cite", |b| {
        b.iter(|| script.run(&[Input::new("findings.md", &markdown)]).unwrap())
    });
    group.bench_function("markdown_parsed_only", |b| {
        b.iter(|| empty.run(&[Input::new("findings.md", &markdown)]).unwrap())
    });
    group.bench_function("sql_lint_three_rules", |b| {
        b.iter(|| lint.run(&[Input::new("up.sql", &sql)]).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

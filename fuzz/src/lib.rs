//! The properties the `cargo fuzz` targets check, one function per target.
//!
//! The targets reuse the registry's and the engine's test support (`crates/testkit`: the faithful
//! scripted harness and the re-signing helpers the behaviour tests drive) instead of a copy of it, so a
//! fuzz input exercises exactly the paths those tests prove. Every property is an invariant a
//! caller relies on: untrusted input gets a named outcome, never a panic or an internal error.

pub use rimthan_testkit::{engine as engine_support, registry as registry_support};

use std::sync::LazyLock;

use rimthan_engine::{ActivePayload, CheckpointKey, Engine, EngineError, SessionId, StartRequest};
use rimthan_registry::{
    AssetId, RegistryFiles, check_path_template, check_relative_path, expand_template,
    external_policy, verify_registry,
};
use serde::Serialize;
use serde_json::{Value, json};

use engine_support::{active, codes, engine_on, pass_step, prepare, sqlite_memory, start_request};
use registry_support::{RELEASE, contained, reseal, test_key, test_registry, with_signed_manifest};

/// Statuses a tool result may carry (`docs/engine.md` §4–§6).
const STATUSES: &[&str] = &[
    "active",
    "blocked",
    "rejected",
    "ready",
    "revise",
    "completed",
];

/// One engine on in-memory SQLite with two live sessions, driven on one runtime.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    engine: Engine,
    start: StartRequest,
    /// A session whose setup step is active.
    setup: ActivePayload,
    /// A session whose first work step (with a JSON output) is active.
    work: ActivePayload,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime starts");
    let start = start_request("codex");
    let (engine, setup, work) = runtime.block_on(async {
        let engine = engine_on(sqlite_memory().await).await;
        let setup = active(engine.start(start.clone(), None).await.unwrap());
        let second = active(engine.start(start.clone(), None).await.unwrap());
        let work = pass_step(&engine, &second, &start).await;
        (engine, setup, work)
    });
    Fixture {
        runtime,
        engine,
        start,
        setup,
        work,
    }
});

/// A tool outcome is a result with a known status, or an argument error; anything else (a
/// store or internal error) is a defect.
fn assert_named<O: Serialize>(result: Result<O, EngineError>) {
    match result {
        Ok(outcome) => {
            let value = serde_json::to_value(&outcome).expect("results serialize");
            let status = value["status"].as_str().unwrap_or_default();
            assert!(STATUSES.contains(&status), "unknown status in {value}");
        }
        Err(EngineError::InvalidArgument { .. }) => {}
        Err(other) => panic!("a tool call failed with {}: {other}", other.code()),
    }
}

/// `tool_arguments`: the first byte picks the tool, the rest is JSON whose top-level fields
/// replace those of valid arguments (a non-object replaces the arguments whole).
pub fn tool_arguments(data: &[u8]) {
    let Some((&selector, json)) = data.split_first() else {
        return;
    };
    let Ok(input) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let f = &*FIXTURE;
    let checkpoint = f.setup.checkpoint.clone();
    let mut arguments = match selector % 4 {
        0 => serde_json::to_value(&f.start),
        1 => Ok(json!({ "checkpoint": checkpoint })),
        2 => serde_json::to_value(prepare(&f.setup, &f.start)),
        _ => Ok(json!({ "checkpoint": checkpoint, "validation_id": "x", "reports": [] })),
    }
    .expect("requests serialize");
    match input {
        Value::Object(fields) => fields.into_iter().for_each(|(k, v)| arguments[k] = v),
        other => arguments = other,
    }
    let engine = &f.engine;
    // The edge's parse: a failure is the `invalid_arguments` result, and nothing runs.
    macro_rules! run {
        ($method:ident) => {
            if let Ok(request) = serde_json::from_value(arguments) {
                assert_named(f.runtime.block_on(engine.$method(request, None)));
            }
        };
    }
    match selector % 4 {
        0 => run!(start),
        1 => run!(active_step),
        2 => run!(prepare),
        _ => run!(submit),
    }
}

/// `json_artifact`: any JSON written as the work step's JSON output (its text, and the content
/// parsed from it) gets a plan or `schema_validation_failed`, and the same failure twice.
pub fn json_artifact(data: &[u8]) {
    let Ok(content) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let f = &*FIXTURE;
    let mut req = prepare(&f.work, &f.start);
    let artifact = req
        .output_attestation
        .as_mut()
        .and_then(|o| o.artifacts.iter_mut().find(|a| a.content.is_some()))
        .expect("the first work step has a JSON output");
    // The schema judges the attested text; the content beside it repeats it.
    let text = serde_json::to_string(&content).expect("values serialize");
    artifact.bytes = text.len() as u64;
    artifact.sha256 = rimthan_registry::Sha256Digest::of(text.as_bytes()).to_string();
    artifact.text = artifact.text.is_some().then_some(text);
    artifact.content = Some(content);
    let first = f
        .runtime
        .block_on(f.engine.prepare(req.clone(), None))
        .expect("prepare answers");
    let seen = codes(&first);
    assert!(
        seen.is_empty() || seen == ["schema_validation_failed"],
        "{seen:?}"
    );
    if !seen.is_empty() {
        let again = f
            .runtime
            .block_on(f.engine.prepare(req, None))
            .expect("prepare answers");
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            serde_json::to_value(&again).unwrap(),
            "the same evidence got different failures"
        );
    }
}

/// `path_template`: `template` or `template\nasset id`. An accepted template expands, for any
/// valid id, to an accepted output path; an accepted output path stays inside the project.
pub fn path_template(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (template, id) = text.split_once('\n').unwrap_or((text, "rimthan-research"));
    if check_path_template(template).is_ok() {
        let id: AssetId = id
            .parse()
            .unwrap_or_else(|_| "rimthan-research".parse().expect("a valid asset id"));
        let path = expand_template(template, &id);
        assert_eq!(check_relative_path(&path), Ok(()), "{template} → {path}");
        contained(&path).unwrap();
    }
    if check_relative_path(text).is_ok() {
        contained(text).unwrap();
    }
}

/// `checkpoint_token`: first byte 0 → the rest is a token, which verifies only if it is exactly
/// the token the key issues for what it names; otherwise the rest edits an issued token
/// (position, byte pairs) and only the unedited token verifies.
pub fn checkpoint_token(data: &[u8]) {
    let key = CheckpointKey::new(vec![7; 32]).expect("32 bytes is a valid secret");
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let Ok(token) = std::str::from_utf8(rest) else {
            return;
        };
        if let Some(checkpoint) = key.verify(token) {
            assert_eq!(key.issue(&checkpoint.session, checkpoint.seq), token);
        }
        return;
    }
    let session: SessionId = "0123456789abcdef0123456789abcdef"
        .parse()
        .expect("a valid session id");
    let seq = u64::from(mode);
    let token = key.issue(&session, seq);
    let mut edited = token.clone().into_bytes();
    for pair in rest.chunks_exact(2) {
        let i = usize::from(pair[0]) % edited.len();
        edited[i] = b'!' + pair[1] % 94; // printable ASCII keeps it a string
    }
    let edited = String::from_utf8(edited).expect("printable ASCII");
    let verified = key.verify(&edited);
    if edited == token {
        assert_eq!(verified.map(|c| (c.session, c.seq)), Some((session, seq)));
    } else {
        assert_eq!(verified, None, "an edited token verified: {edited}");
    }
}

/// The test registry cut to the one release the inputs edit, signed once; every input edits a
/// copy. The other releases would be verified again at every input without ever changing, which
/// made each input five times slower.
static REGISTRY: LazyLock<RegistryFiles> = LazyLock::new(|| {
    let full = test_registry();
    let release = format!("releases/{RELEASE}/");
    let mut files = RegistryFiles::default();
    for path in full
        .paths()
        .filter(|p| p.starts_with("keys/") || p.starts_with(&release))
    {
        files.insert(path, full.get(path).expect("listed").clone());
    }
    let channels = json!({ "channels": { "stable": RELEASE } });
    files.insert(
        "channels.json",
        serde_json::to_vec(&channels).expect("JSON"),
    );
    files
});

/// The release's files an input may replace: all but the manifest and its signature.
static ENTRY_FILES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let base = format!("releases/{RELEASE}/");
    let signed = [
        format!("{base}manifest.json"),
        format!("{base}manifest.sig"),
    ];
    REGISTRY
        .paths_under(&base)
        .filter(|p| !signed.iter().any(|s| s == p))
        .map(str::to_owned)
        .collect()
});

/// `registry_files`: first byte 0 → the rest is the manifest (correctly signed, so parsing is
/// reached); otherwise the second byte picks a release file, the rest replaces it, and the
/// manifest is resealed over it (so the file's own parsing is reached). Verification either
/// succeeds or fails with a named code.
pub fn registry_files(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let files = if mode == 0 {
        with_signed_manifest(REGISTRY.clone(), rest.to_vec())
    } else {
        let Some((&pick, bytes)) = rest.split_first() else {
            return;
        };
        let path = ENTRY_FILES[usize::from(pick) % ENTRY_FILES.len()].clone();
        let mut files = REGISTRY.clone();
        files.insert(path, bytes.to_vec());
        reseal(&mut files, RELEASE, &test_key());
        files
    };
    if let Err(e) = verify_registry(&files, &external_policy()) {
        assert!(!e.code().is_empty(), "{e}");
    }
}

/// A script check that reads every parsed form of every input, as the behaviour tests' one in
/// `crates/checks/tests/never_panics.rs` does, with a low operation bound so each input is fast.
static CHECK_SCRIPT: LazyLock<rimthan_checks::Check> = LazyLock::new(|| {
    rimthan_checks::Check::script(
        r#"
        for name in inputs.keys() {
            let input = inputs[name];
            let form = input[input.format];
            if input.format == "markdown" {
                for q in form.quotes { if q.text == "" { error("empty-quote", "empty", name, q.line); } }
                for t in form.tables { if t.header.len() == 0 { warning("t", "no header", name, t.line); } }
                for p in form.paragraphs { if p.sentences.len() > 3 { warning("p", "long", name, p.line); } }
            } else if input.format == "csv" {
                for row in form.rows { if row.values.len() == 0 { warning("r", "empty", name, row.line); } }
            } else if input.format == "sql" {
                for e in form.errors { warning("sql", "error", name, e.line); }
            }
        }
        "#,
        check_limits(),
    )
    .expect("the fuzz check compiles")
});

static SQL_LINT: LazyLock<rimthan_checks::Check> = LazyLock::new(|| {
    use rimthan_checks::Severity::{Error, Warning};
    rimthan_checks::Check::sql_lint(
        [
            ("renaming-column", Error),
            ("require-timeout-settings", Warning),
        ],
        check_limits(),
    )
    .expect("the fuzz sql-lint check compiles")
});

fn check_limits() -> rimthan_checks::Limits {
    rimthan_checks::Limits::default()
        .with_max_operations(100_000)
        .with_max_findings(100)
}

/// `check_inputs`: the first byte picks the format (text, Markdown, CSV, JSON, YAML, SQL), the
/// rest is an output's bytes. The script check and the sql-lint check give sorted findings
/// within the findings bound, or a named input or bound error, never a panic or an abort.
pub fn check_inputs(data: &[u8]) {
    use rimthan_checks::{CheckError, Format, Input};
    const FORMATS: [Format; 6] = [
        Format::Text,
        Format::Markdown,
        Format::Csv,
        Format::Json,
        Format::Yaml,
        Format::Sql,
    ];
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let format = FORMATS[usize::from(pick) % FORMATS.len()];
    let input = [Input::with_format("output", bytes, format)];
    for check in [&*CHECK_SCRIPT, &*SQL_LINT] {
        match check.run(&input) {
            Ok(findings) => {
                assert!(findings.len() <= 100);
                assert!(findings.is_sorted());
            }
            Err(
                CheckError::InputNotText { .. }
                | CheckError::OperationsExceeded { .. }
                | CheckError::WallTimeExceeded { .. }
                | CheckError::InputTooComplex { .. }
                | CheckError::TooManyFindings { .. },
            ) => {}
            Err(other) => panic!("{format:?}: unexpected {} ({other})", other.code()),
        }
    }
}

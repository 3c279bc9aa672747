//! The author's loop on a published workflow (`docs/registry-format.md` §1.2): a changed check
//! cannot be published under the same workflow version, is tried as a draft that is rebuilt at
//! will and served only by name, is never promoted, and reaches a channel only once published
//! as the workflow's next version.

use std::{
    path::Path,
    process::{Command, Output},
};

mod common;

use common::{build_signed, copy_tree, example_source};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");
const CHECK: &str = "workflows/data-fix/1.0.0/checks/notes-name-rollback.rhai";

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn build(source: &Path, registry: &Path, key: &Path, release: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "registry",
        "build",
        source.to_str().unwrap(),
        "--out",
        registry.to_str().unwrap(),
        "--release",
        release,
        "--key",
        key.to_str().unwrap(),
    ];
    args.extend(extra);
    run(&args)
}

const MESSAGE: &str = "add a `## Rollback` section listing each rollback step";

/// Rewrites the message of the check's first rule, as an author tightening its wording does.
fn edit_check(source: &Path, from: &str, to: &str) {
    let path = source.join(CHECK);
    let script = std::fs::read_to_string(&path).unwrap();
    let edited = script.replacen(from, to, 1);
    assert_ne!(
        edited, script,
        "the check's message is where the test expects it"
    );
    std::fs::write(&path, edited).unwrap();
}

fn promote_to_stable(registry: &Path, release: &str) -> Output {
    run(&[
        "registry",
        "promote",
        registry.to_str().unwrap(),
        "--channel",
        "stable",
        "--release",
        release,
    ])
}

/// The `predicate.release` of the provenance statement a staged session left in `project`.
fn statement_release(project: &Path) -> serde_json::Value {
    use base64::Engine as _;
    let envelope: serde_json::Value = serde_json::from_slice(
        &std::fs::read(project.join(".rimthan/workflow-session.intoto.json")).unwrap(),
    )
    .unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap())
        .unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    statement["predicate"]["release"].clone()
}

fn stage(registry: &Path, release: &str, project: &Path) -> Output {
    run(&[
        "stage",
        "--harness",
        "codex",
        "--registry",
        registry.to_str().unwrap(),
        "--release",
        release,
        "--project",
        project.to_str().unwrap(),
    ])
}

#[test]
fn a_changed_check_is_tried_as_a_draft_and_reaches_a_channel_only_as_the_next_workflow_version() {
    let dir = tempfile::tempdir().unwrap();
    let source = example_source("checked-workflow", dir.path());
    let original = std::fs::read(source.join(CHECK)).unwrap();
    let registry = build_signed(&source, dir.path(), &[]);
    let key = dir.path().join("author.key");
    let lock = || std::fs::read(registry.join("published.json")).unwrap();
    let published = lock();

    // The published workflow version cannot carry the change, whatever the release id.
    let tried = "add a `## Rollback` section, one item per rollback step";
    edit_check(&source, MESSAGE, tried);
    let refused = build(&source, &registry, &key, "2027.2.0", &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    let said = text(&refused.stderr);
    assert!(
        said.contains("published_changed") && said.contains("notes-name-rollback.rhai"),
        "{said}"
    );

    // A draft carries it, and is rebuilt under the same id with the next edit.
    let first = build(&source, &registry, &key, "2027.2.0-try", &["--draft"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains("built draft 2027.2.0-try"),
        "{}",
        text(&first.stdout)
    );
    let manifest = registry.join("drafts/2027.2.0-try/manifest.json");
    let first_manifest = std::fs::read(&manifest).unwrap();
    edit_check(
        &source,
        tried,
        "add a `## Rollback` section: each step, who runs it",
    );
    let again = build(&source, &registry, &key, "2027.2.0-try", &["--draft"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_ne!(
        std::fs::read(&manifest).unwrap(),
        first_manifest,
        "the rebuilt draft replaced the first"
    );
    assert_eq!(lock(), published, "a draft never extends the lock");
    assert!(
        !registry.join("releases/2027.2.0-try").exists(),
        "a draft is not a release"
    );
    let taken = build(&source, &registry, &key, "2027.1.0", &["--draft"]);
    assert_eq!(taken.status.code(), Some(1));
    assert!(
        text(&taken.stderr).contains("release_exists"),
        "{}",
        text(&taken.stderr)
    );

    // Served by name, it runs a whole session, and the evidence says it was a draft.
    let project = tempfile::tempdir().unwrap();
    let staged = stage(&registry, "2027.2.0-try", project.path());
    assert!(staged.status.success(), "{}", text(&staged.stderr));
    let release = statement_release(project.path());
    assert_eq!(release["id"], "2027.2.0-try");
    assert_eq!(release["draft"], true, "{release}");
    let project = tempfile::tempdir().unwrap();
    let staged = stage(&registry, "2027.1.0", project.path());
    assert!(staged.status.success(), "{}", text(&staged.stderr));
    assert_eq!(
        statement_release(project.path()).get("draft"),
        None,
        "a published release's statement carries no draft mark"
    );

    // Never on a channel: neither promoted nor verified in channels.json.
    let promote = promote_to_stable(&registry, "2027.2.0-try");
    assert_eq!(promote.status.code(), Some(1));
    assert!(
        text(&promote.stderr).contains("release_is_draft"),
        "{}",
        text(&promote.stderr)
    );
    let channels = registry.join("channels.json");
    let kept = std::fs::read(&channels).unwrap();
    std::fs::write(&channels, r#"{"channels": {"stable": "2027.2.0-try"}}"#).unwrap();
    let verify = run(&["registry", "verify", registry.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(1));
    assert!(
        text(&verify.stderr).contains("release_is_draft"),
        "{}",
        text(&verify.stderr)
    );
    std::fs::write(&channels, kept).unwrap();
    let verify = run(&["registry", "verify", registry.to_str().unwrap()]);
    assert!(verify.status.success(), "{}", text(&verify.stderr));

    // Published as the next workflow version, with 1.0.0 as it was, it builds and promotes.
    let next = source.join("workflows/data-fix/1.1.0");
    copy_tree(&source.join("workflows/data-fix/1.0.0"), &next);
    std::fs::write(source.join(CHECK), &original).unwrap();
    let release = build(&source, &registry, &key, "2027.2.0", &[]);
    assert!(release.status.success(), "{}", text(&release.stderr));
    let promote = promote_to_stable(&registry, "2027.2.0");
    assert!(promote.status.success(), "{}", text(&promote.stderr));
}

//! The `rimthan` binary, driven as an operator would.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn rimthan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rimthan"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The release `stable` names in the committed default registry: the newest, since
/// `registry/build-default.sh` appends a release and promotes it.
fn newest_default_release() -> String {
    let channels: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo().join("registry/default/channels.json")).unwrap(),
    )
    .unwrap();
    channels["channels"]["stable"].as_str().unwrap().to_owned()
}

#[test]
fn rebuilding_the_committed_source_reproduces_the_newest_embedded_release_byte_for_byte() {
    // Older releases are never rebuilt: the committed `published.json` holds them to their
    // bytes (crates/registry/tests/published.rs). The newest is rebuilt beside them, so the
    // lock and channels the build writes are compared too.
    let newest = newest_default_release();
    let out = tempfile::tempdir().unwrap();
    rimthan_testkit::fs::copy_dir(&repo().join("registry/default"), out.path());
    std::fs::remove_dir_all(out.path().join("releases").join(&newest)).unwrap();
    let dir = out.path().to_str().unwrap();
    let result = rimthan(&[
        "registry",
        "build",
        "registry/source",
        "--out",
        dir,
        "--release",
        &newest,
        "--key",
        "registry/default-release.key",
        "--channel",
        "stable",
    ]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let rebuilt = files_under(out.path());
    let committed = files_under(&repo().join("registry/default"));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&rebuilt), names(&committed));
    for ((name, a), (_, b)) in rebuilt.iter().zip(&committed) {
        assert!(
            a == b,
            "{name} differs: registry/source no longer builds release {newest}; publish the \
             change as a new release with registry/build-default.sh NEW_ID"
        );
    }
}

#[test]
fn verify_accepts_the_embedded_default_and_a_fresh_external_registry() {
    let embedded = rimthan(&["registry", "verify"]);
    assert!(embedded.status.success(), "{}", text(&embedded.stderr));
    assert!(text(&embedded.stdout).contains("2026.12.0"));

    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("org.key");
    let reg = work.path().join("registry");
    let (key, reg) = (key.to_str().unwrap(), reg.to_str().unwrap());
    assert!(
        rimthan(&["registry", "keygen", "--out", key])
            .status
            .success()
    );
    let build = rimthan(&[
        "registry",
        "build",
        "registry/source",
        "--out",
        reg,
        "--release",
        "2027.01.0",
        "--key",
        key,
    ]);
    assert!(build.status.success(), "{}", text(&build.stderr));
    let promote = rimthan(&[
        "registry",
        "promote",
        reg,
        "--channel",
        "stable",
        "--release",
        "2027.01.0",
    ]);
    assert!(promote.status.success(), "{}", text(&promote.stderr));
    let verify = rimthan(&["registry", "verify", reg]);
    assert!(verify.status.success(), "{}", text(&verify.stderr));
    assert!(text(&verify.stdout).contains("channels [stable]"));
    let inspect = rimthan(&["registry", "inspect", reg, "--release", "2027.01.0"]);
    assert!(text(&inspect.stdout).contains("workflow research-study@1.0.0"));
}

#[test]
fn a_tampered_registry_exits_1_naming_code_and_file() {
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("org.key");
    let reg = work.path().join("registry");
    let (key_s, reg_s) = (key.to_str().unwrap(), reg.to_str().unwrap());
    assert!(
        rimthan(&["registry", "keygen", "--out", key_s])
            .status
            .success()
    );
    let build = rimthan(&[
        "registry",
        "build",
        "registry/source",
        "--out",
        reg_s,
        "--release",
        "2027.01.0",
        "--key",
        key_s,
    ]);
    assert!(build.status.success());
    let skill = reg.join("releases/2027.01.0/assets/skill/rimthan-research/1.0.0/SKILL.md");
    let mut bytes = std::fs::read(&skill).unwrap();
    bytes.push(b'\n');
    std::fs::write(&skill, bytes).unwrap();
    let verify = rimthan(&["registry", "verify", reg_s]);
    assert_eq!(verify.status.code(), Some(1));
    let err = text(&verify.stderr);
    assert!(
        err.contains("error[size_mismatch]") && err.contains("SKILL.md"),
        "{err}"
    );
}

#[test]
fn the_committed_default_folder_is_refused_as_an_external_registry() {
    // Its key is public by being committed; only the pinned embedded copy is trusted.
    let verify = rimthan(&["registry", "verify", "registry/default"]);
    assert_eq!(verify.status.code(), Some(1));
    assert!(text(&verify.stderr).contains("untrusted_signing_key"));
}

#[test]
fn usage_errors_exit_2_and_bad_arguments_exit_1() {
    assert_eq!(rimthan(&["registry", "frobnicate"]).status.code(), Some(2));
    let bad = rimthan(&[
        "registry",
        "promote",
        "registry/default",
        "--channel",
        "Bad_Channel",
        "--release",
        "x",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(text(&bad.stderr).contains("channel name"));
}

#[test]
fn an_openid_issuer_the_server_cannot_trust_stops_start_up() {
    let serve = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ];
        args.extend_from_slice(extra);
        rimthan(&args)
    };
    let missing = serve(&["--auth", "oidc"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("--auth oidc needs --oidc-issuer"));
    // Keys fetched in the clear from another machine could come from anyone on the path.
    let plain = serve(&[
        "--auth",
        "oidc",
        "--oidc-issuer",
        "http://id.example.com/realms/lab",
    ]);
    assert_eq!(plain.status.code(), Some(1));
    assert!(
        text(&plain.stderr).contains("over https"),
        "{}",
        text(&plain.stderr)
    );
}

#[test]
fn keygen_makes_the_key_folder_readable_by_its_owner_only() {
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("keys/org/acme.key");
    let made = rimthan(&["registry", "keygen", "--out", key.to_str().unwrap()]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&work.path().join("keys/org")), 0o700);
        assert_eq!(mode(&key), 0o600);
    }
}

#[test]
fn keygen_never_overwrites_a_key() {
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("k");
    std::fs::write(&key, b"precious").unwrap();
    let result = rimthan(&["registry", "keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(result.status.code(), Some(1));
    assert_eq!(std::fs::read(&key).unwrap(), b"precious");
}

/// The long flags `rimthan <command> --help` lists, without `--help`.
fn help_flags(command: &str) -> std::collections::BTreeSet<String> {
    let help = text(&rimthan(&[command, "--help"]).stdout);
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("-")
                .and_then(|r| r.split_once(", "))
                .map_or(l, |(_, r)| r);
            l.strip_prefix("--")
                .map(|r| r.split([' ', '=']).next().unwrap_or_default().to_owned())
        })
        .filter(|f| f != "help")
        .collect()
}

/// The flags in the first column of the README table under `heading`.
fn readme_flags(heading: &str) -> std::collections::BTreeSet<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme.find(heading).expect("heading")..];
    let section = &section[heading.len()
        ..section[heading.len()..]
            .find("\n## ")
            .map_or(section.len(), |i| i + heading.len())];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .map(|r| r.split(['`', ' ']).next().unwrap().to_owned())
        .collect()
}

#[test]
fn the_readme_stage_flag_table_lists_every_stage_flag() {
    assert_eq!(
        readme_flags("## Try a whole workflow without an agent"),
        help_flags("stage")
    );
}

#[test]
fn an_initialized_source_builds_and_verifies_as_written() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("source");
    let key = work.path().join("org.key");
    let reg = work.path().join("registry");
    let (src, key, reg) = (
        src.to_str().unwrap(),
        key.to_str().unwrap(),
        reg.to_str().unwrap(),
    );
    let init = rimthan(&["registry", "init", src]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let printed = text(&init.stdout);
    assert!(
        printed.contains("workflows/my-workflow/1.0.0/workflow.json")
            && printed.contains("rimthan registry build"),
        "{printed}"
    );
    assert!(
        rimthan(&["registry", "keygen", "--out", key])
            .status
            .success()
    );
    let build = rimthan(&[
        "registry",
        "build",
        src,
        "--out",
        reg,
        "--release",
        "0.1.0",
        "--key",
        key,
        "--channel",
        "stable",
        "--strict",
    ]);
    assert!(build.status.success(), "{}", text(&build.stderr));
    assert_eq!(
        text(&build.stderr),
        "",
        "an initialized source has no warnings"
    );
    let verify = rimthan(&["registry", "verify", reg]);
    assert!(verify.status.success(), "{}", text(&verify.stderr));
    let inspect = rimthan(&["registry", "inspect", reg]);
    assert!(text(&inspect.stdout).contains("workflow my-workflow@1.0.0"));
}

#[test]
fn init_into_a_folder_that_is_not_empty_exits_1() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("mine.txt"), b"keep").unwrap();
    let init = rimthan(&["registry", "init", work.path().to_str().unwrap()]);
    assert_eq!(init.status.code(), Some(1));
    assert!(
        text(&init.stderr).contains("error[source_invalid]"),
        "{}",
        text(&init.stderr)
    );
    assert_eq!(
        std::fs::read(work.path().join("mine.txt")).unwrap(),
        b"keep"
    );
}

#[test]
fn build_prints_warnings_and_strict_refuses_them() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("source");
    let key = work.path().join("org.key");
    let (src_s, key_s) = (src.to_str().unwrap(), key.to_str().unwrap());
    assert!(rimthan(&["registry", "init", src_s]).status.success());
    std::fs::write(
        src.join("schemas/result/2.0.0.json"),
        b"{\"type\": \"object\"}",
    )
    .unwrap();
    assert!(
        rimthan(&["registry", "keygen", "--out", key_s])
            .status
            .success()
    );
    let build = |reg: &str, strict: bool| {
        let reg = work.path().join(reg);
        let mut args = vec![
            "registry",
            "build",
            src_s,
            "--out",
            reg.to_str().unwrap(),
            "--release",
            "0.1.0",
            "--key",
            key_s,
        ];
        if strict {
            args.push("--strict");
        }
        (rimthan(&args), reg.join("releases/0.1.0").exists())
    };
    let (lenient, published) = build("lenient", false);
    assert!(lenient.status.success() && published);
    assert!(
        text(&lenient.stderr).contains("warning[unused_schema]")
            && text(&lenient.stderr).contains("schemas/result/2.0.0.json"),
        "{}",
        text(&lenient.stderr)
    );
    let (strict, published) = build("strict", true);
    assert_eq!(strict.status.code(), Some(1));
    assert!(!published);
    assert!(
        text(&strict.stderr).contains("error[unused_schema]"),
        "{}",
        text(&strict.stderr)
    );
}

#[test]
fn a_missing_step_file_is_source_invalid_with_exit_1() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("source");
    let key = work.path().join("org.key");
    let (src_s, key_s) = (src.to_str().unwrap(), key.to_str().unwrap());
    assert!(rimthan(&["registry", "init", src_s]).status.success());
    let steps = src.join("workflows/my-workflow/1.0.0/steps");
    std::fs::rename(steps.join("write-result.md"), steps.join("Write-Result.md")).unwrap();
    assert!(
        rimthan(&["registry", "keygen", "--out", key_s])
            .status
            .success()
    );
    let reg = work.path().join("registry");
    let build = rimthan(&[
        "registry",
        "build",
        src_s,
        "--out",
        reg.to_str().unwrap(),
        "--release",
        "0.1.0",
        "--key",
        key_s,
    ]);
    assert_eq!(build.status.code(), Some(1));
    let err = text(&build.stderr);
    assert!(
        err.contains("error[source_invalid]")
            && err.contains("steps/write-result.md")
            && err.contains("found Write-Result.md"),
        "{err}"
    );
    assert!(!err.contains("os error"), "{err}");
}

/// Every `--flag` named in the deploy guide's tables (`docs/operations/deploy.md`).
fn deploy_guide_flags() -> std::collections::BTreeSet<String> {
    let guide = std::fs::read_to_string(repo().join("docs/operations/deploy.md")).unwrap();
    guide
        .lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|l| {
            l.match_indices("`--")
                .map(|(i, _)| l[i + 3..].to_owned())
                .collect::<Vec<_>>()
        })
        .map(|r| {
            r.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn the_deploy_guide_tables_name_every_serve_flag() {
    let missing: Vec<String> = help_flags("serve")
        .difference(&deploy_guide_flags())
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "docs/operations/deploy.md lacks {missing:?}"
    );
}

#[test]
fn a_notify_url_that_is_not_http_or_a_secret_that_is_not_whsec_exits_2_naming_the_flag() {
    let work = tempfile::tempdir().unwrap();
    let secret = work.path().join("secret");
    let db = format!("sqlite://{}", work.path().join("db.sqlite").display());
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--database-url", &db];
        args.extend_from_slice(extra);
        rimthan(&args)
    };
    let secret_path = secret.to_str().unwrap();
    std::fs::write(&secret, "hunter2").unwrap();
    for (extra, names) in [
        (
            vec![
                "--notify-url",
                "ftp://hooks.example",
                "--notify-secret-file",
                secret_path,
            ],
            "--notify-url",
        ),
        (
            vec!["--notify-url", "https://hooks.example/x"],
            "--notify-secret-file",
        ),
        (
            vec![
                "--notify-url",
                "https://hooks.example/x",
                "--notify-secret-file",
                secret_path,
            ],
            "whsec_",
        ),
        (
            vec![
                "--notify-url",
                "https://hooks.example/x",
                "--notify-secret-file",
                "/no/such/file",
            ],
            "--notify-secret-file",
        ),
    ] {
        let out = serve(&extra);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{extra:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(names),
            "{extra:?}: {}",
            text(&out.stderr)
        );
    }
}

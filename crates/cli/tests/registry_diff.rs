//! `rimthan registry diff`: what a promotion would change, listed per workflow and asset version
//! with digests, before the operator makes it; and the README's registry commands, checked
//! against clap.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Output,
};

use rimthan_testkit::fs::copy_dir;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn rimthan(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rimthan"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A registry of two releases: 2027.02.0 adds a skill version and a workflow version to
/// 2027.01.0 and replaces the bootstrap paragraph, the one entry without a version of its own.
fn two_releases(work: &Path) -> String {
    let (src, key, reg) = (
        work.join("src"),
        work.join("org.key"),
        work.join("registry"),
    );
    copy_dir(&repo().join("registry/source"), &src);
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    assert!(
        rimthan(&["registry", "keygen", "--out", &s(&key)])
            .status
            .success()
    );
    let build = |release: &str| {
        let out = rimthan(&[
            "registry",
            "build",
            &s(&src),
            "--out",
            &s(&reg),
            "--release",
            release,
            "--key",
            &s(&key),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    std::fs::write(src.join("bootstrap.md"), "Start a workflow by its id.\n").unwrap();
    build("2027.01.0");
    let skill = src.join("skills/rimthan-research/1.0.1");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: rimthan-research\ndescription: Research, revised.\n---\nRevised.\n",
    )
    .unwrap();
    copy_dir(
        &src.join("workflows/research-study/1.0.0"),
        &src.join("workflows/research-study/1.1.0"),
    );
    std::fs::write(
        src.join("bootstrap.md"),
        "Start a workflow by its id, revised.\n",
    )
    .unwrap();
    build("2027.02.0");
    s(&reg)
}

#[test]
fn diff_lists_added_and_changed_entries_per_workflow_and_asset_version_with_digests() {
    let work = tempfile::tempdir().unwrap();
    let reg = two_releases(work.path());
    let out = rimthan(&["registry", "diff", &reg, "2027.01.0", "2027.02.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    let first = listing.lines().next().unwrap();
    assert!(
        first.starts_with("release 2027.01.0 -> 2027.02.0: ")
            && first.contains(" 0 removed, 1 changed, "),
        "{listing}"
    );
    for line in [
        "workflow research-study@1.1.0\n  added    workflow research-study@1.1.0  sha256 - -> ",
        "  added    step research-study/frame-question@1.1.0  sha256 - -> ",
        "asset skill/rimthan-research@1.0.1\n  added    asset skill/rimthan-research@1.0.1  sha256 - -> ",
        "bootstrap agent-entrypoint@1.0.0\n  changed  bootstrap agent-entrypoint@1.0.0  sha256 ",
    ] {
        assert!(listing.contains(line), "{listing} lacks {line}");
    }
    assert!(!listing.contains("research-study@1.0.0"), "{listing}");

    let json = rimthan(&["registry", "diff", &reg, "2027.01.0", "2027.02.0", "--json"]);
    assert_eq!(json.status.code(), Some(0));
    let diff: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(diff["from"], "2027.01.0");
    assert!(diff["unchanged"].as_u64().unwrap() > 0);
    let changed: Vec<_> = diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["change"] == "changed")
        .collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["entry"], "bootstrap agent-entrypoint@1.0.0");
    assert_ne!(changed[0]["from_sha256"], changed[0]["to_sha256"]);
    assert_eq!(changed[0]["to_sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn diff_of_an_unknown_release_names_it_and_lists_the_releases_that_exist() {
    let work = tempfile::tempdir().unwrap();
    let reg = two_releases(work.path());
    let out = rimthan(&["registry", "diff", &reg, "2027.01.0", "2027.09.0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("error[release_not_found]")
            && err.contains("2027.09.0")
            && err.contains("it holds: 2027.01.0, 2027.02.0"),
        "{err}"
    );
}

#[test]
fn diff_reads_the_committed_default_registry_by_the_digests_the_binary_pins() {
    let channels: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo().join("registry/default/channels.json")).unwrap(),
    )
    .unwrap();
    let stable = channels["channels"]["stable"].as_str().unwrap();
    let out = rimthan(&["registry", "diff", "registry/default", stable, stable]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(" 0 added, 0 removed, 0 changed, "));
}

/// Subcommand names, or long flags, that `rimthan <args> --help` lists, without `help`.
fn help_words(args: &[&str], flags: bool) -> BTreeSet<String> {
    let mut args = args.to_vec();
    args.push("--help");
    let help = text(&rimthan(&args).stdout);
    let section = if flags { "Options:" } else { "Commands:" };
    let body = &help[help.find(section).expect(section)..];
    body.lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let word = l
                .split_whitespace()
                .find(|w| !flags || w.starts_with("--"))?;
            Some(
                word.trim_start_matches("--")
                    .trim_end_matches(',')
                    .to_owned(),
            )
        })
        .filter(|w| w != "help")
        .collect()
}

#[test]
fn the_readme_registry_commands_name_every_subcommand_with_flags_clap_knows() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = readme
        .split("## Registry commands")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a command block under ## Registry commands");
    let mut named = BTreeSet::new();
    for line in block.lines() {
        let words: Vec<&str> = line.split('#').next().unwrap().split_whitespace().collect();
        let ["rimthan", "registry", sub, rest @ ..] = words.as_slice() else {
            continue;
        };
        named.insert((*sub).to_owned());
        let known = help_words(&["registry", sub], true);
        for flag in rest
            .iter()
            .filter_map(|w| w.trim_start_matches('[').strip_prefix("--"))
        {
            let flag = flag.trim_end_matches(']');
            assert!(
                known.contains(flag),
                "README: registry {sub} has no --{flag}"
            );
        }
    }
    assert_eq!(named, help_words(&["registry"], false));
}

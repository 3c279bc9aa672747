//! What the CLI's test binaries share: a server process, killed when the test ends however it
//! ends, with the port it picked read back from its log; and registries built from a source as
//! an author builds them. Each binary uses a part.
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// A server process, killed when the test ends however it ends.
pub(crate) struct Served(pub(crate) Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` (a `rimthan serve --listen 127.0.0.1:0 …`) with its log at `info` and
/// returns it with the port it picked itself (read back from its log, so no other test can take
/// the port in between). Keeps draining the log so the server never blocks on a full pipe.
pub(crate) fn serve_on_free_port(mut command: Command) -> (Served, u16) {
    let mut child = command
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (found, port) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let _ = found.send(digits.parse::<u16>().unwrap());
            }
        }
    });
    let child = Served(child);
    let port = port
        .recv_timeout(Duration::from_secs(20))
        .expect("the server logged its address");
    (child, port)
}

/// Copies the folder `from` to `to`, leaving out the fixtures' `README.md` files.
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != "README.md" {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The complete example source `docs/examples/<example>` (what a user of the binary has),
/// copied into `dir/source`.
pub(crate) fn example_source(example: &str, dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = dir.join("source");
    copy_tree(&repo.join("docs/examples").join(example), &source);
    source
}

/// The workflow source `tests/data/<fixture>` plus what a release shares across workflows (the
/// host adapters and the base report schema), copied into `dir/source`.
pub(crate) fn outside_source(fixture: &str, dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = dir.join("source");
    copy_tree(&repo.join("crates/cli/tests/data").join(fixture), &source);
    copy_tree(
        &repo.join("registry/source/adapters"),
        &source.join("adapters"),
    );
    copy_tree(
        &repo.join("registry/source/schemas/validator-report"),
        &source.join("schemas/validator-report"),
    );
    source
}

/// Signs `source` with a fresh key and builds it as release 2027.1.0 on channel `stable` into
/// `dir/registry`, as an author does; `extra` are further `registry build` flags.
pub(crate) fn build_signed(source: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let key = dir.join("author.key");
    let registry = dir.join("registry");
    let mut build = vec![
        "registry",
        "build",
        source.to_str().unwrap(),
        "--out",
        registry.to_str().unwrap(),
        "--release",
        "2027.1.0",
        "--key",
        key.to_str().unwrap(),
        "--channel",
        "stable",
    ];
    build.extend(extra);
    for args in [
        vec!["registry", "keygen", "--out", key.to_str().unwrap()],
        build,
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    registry
}

//! The evidence a completed session leaves, checked as an auditor would: `rimthan stage` keeps
//! the signed statement beside the session file, the server publishes its keys at a well-known
//! URL, `rimthan provenance verify` accepts the statement and names each way it can be wrong,
//! and `rimthan audit verify` walks the store's chains beside the running server.

use std::{
    io::{Read as _, Write as _},
    net::TcpListener,
    path::Path,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(database: &Path) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--database-url")
        .arg(format!("sqlite://{}", database.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server { child, port }
}

fn get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer.split_once("\r\n\r\n").unwrap().1.to_owned()
}

fn rimthan(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn verify(statement: &Path, keys: &Path, project: Option<&Path>) -> (Option<i32>, String) {
    let mut args = vec![
        "provenance",
        "verify",
        statement.to_str().unwrap(),
        "--keys",
        keys.to_str().unwrap(),
    ];
    if let Some(p) = project {
        args.extend(["--project", p.to_str().unwrap()]);
    }
    let out = rimthan(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_staged_session_leaves_a_statement_the_published_keys_verify_and_each_forgery_is_named() {
    let state = tempfile::tempdir().unwrap();
    let database = state.path().join("db.sqlite");
    let server = serve(&database);
    let project = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let out = rimthan(&[
        "stage",
        "--workflow",
        "research-study",
        "--harness",
        "codex",
        "--url",
        &url,
        "--project",
        project.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let statement = project.path().join(".rimthan/workflow-session.intoto.json");
    let keys = state.path().join("keys.json");
    std::fs::write(
        &keys,
        get(server.port, "/.well-known/rimthan/provenance-keys.json"),
    )
    .unwrap();

    let (code, shown) = verify(&statement, &keys, Some(project.path()));
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("each re-hashed"), "{shown}");

    // Any JSON layout of `content` verifies (docs/operations/evidence.md): re-indented with a
    // final newline, the same envelope holds; the signed bytes are `payload`'s.
    let relaid = state.path().join("relaid.json");
    let value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&statement).unwrap()).unwrap();
    std::fs::write(
        &relaid,
        serde_json::to_string_pretty(&value).unwrap() + "\n",
    )
    .unwrap();
    let (code, shown) = verify(&relaid, &keys, Some(project.path()));
    assert_eq!(code, Some(0), "{shown}");

    // Beside the running server, the store's chains verify.
    let audit = rimthan(&[
        "audit",
        "verify",
        "--database-url",
        &format!("sqlite://{}", database.display()),
    ]);
    let printed = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(audit.status.code(), Some(0), "{printed}");
    assert!(printed.contains("every chain verifies"), "{printed}");

    let envelope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&statement).unwrap()).unwrap();
    let forged = state.path().join("forged.json");
    let named = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut changed = envelope.clone();
        edit(&mut changed);
        std::fs::write(&forged, serde_json::to_vec(&changed).unwrap()).unwrap();
        verify(&forged, &keys, None)
    };
    let (code, shown) = named(&|e| e["payloadType"] = "application/json".into());
    assert_eq!(
        (code, shown.split(':').next()),
        (Some(1), Some("wrong_payload_type"))
    );
    let (code, shown) = named(&|e| e["signatures"][0]["keyid"] = "0123456789abcdef".into());
    assert_eq!(
        (code, shown.split(':').next()),
        (Some(1), Some("unknown_key_id"))
    );
    let (code, shown) = named(&|e| {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let payload = b64.decode(e["payload"].as_str().unwrap()).unwrap();
        let text = String::from_utf8(payload)
            .unwrap()
            .replace("\"verdict\":\"pass\"", "\"verdict\":\"fail\"");
        e["payload"] = b64.encode(text).into();
    });
    assert_eq!(
        (code, shown.split(':').next()),
        (Some(1), Some("signature_invalid"))
    );

    // One byte of one accepted output changed: the statement no longer holds for the project.
    let subject = {
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(envelope["payload"].as_str().unwrap())
            .unwrap();
        let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        statement["subject"][0]["name"].as_str().unwrap().to_owned()
    };
    let path = project.path().join(&subject);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (code, shown) = verify(&statement, &keys, Some(project.path()));
    assert_eq!(code, Some(1), "{shown}");
    // Named with the digest its bytes have now (docs/operations/evidence.md).
    let now = rimthan_registry::Sha256Digest::of(&bytes);
    assert!(
        shown.starts_with(&format!(
            "subject_changed: {subject} (its sha256 is now {now})"
        )),
        "{shown}"
    );

    // The subject's folder a symlink to a copy outside the project: never followed.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let folder = path.parent().unwrap();
    let outside = state.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join(path.file_name().unwrap()), &bytes).unwrap();
    let moved = state.path().join("moved");
    std::fs::rename(folder, &moved).unwrap();
    std::os::unix::fs::symlink(&outside, folder).unwrap();
    let (code, shown) = verify(&statement, &keys, Some(project.path()));
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains(&format!("subject_unreadable: {subject}")),
        "{shown}"
    );
    std::fs::remove_file(folder).unwrap();
    std::fs::rename(&moved, folder).unwrap();

    // A named pipe where the subject was, or as the statement: refused, never waited on.
    let fifo = |at: &Path| {
        let made = Command::new("mkfifo").arg(at).status().unwrap();
        assert!(made.success());
    };
    std::fs::remove_file(&path).unwrap();
    fifo(&path);
    let (code, shown) = verify_within(&statement, &keys, Some(project.path()));
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains(&format!("subject_unreadable: {subject}")),
        "{shown}"
    );
    let piped = state.path().join("piped.json");
    fifo(&piped);
    let (code, _) = verify_within(&piped, &keys, None);
    assert_eq!(
        code,
        Some(1),
        "a statement that is a named pipe is refused as input"
    );
}

/// `verify`, failing instead of hanging when the command does not end within 30 s.
fn verify_within(statement: &Path, keys: &Path, project: Option<&Path>) -> (Option<i32>, String) {
    let (statement, keys) = (statement.to_owned(), keys.to_owned());
    let project = project.map(Path::to_owned);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(verify(&statement, &keys, project.as_deref()));
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("provenance verify waited on a named pipe")
}

/// The long flags `rimthan <args> --help` lists.
fn help_flags(args: &[&str]) -> std::collections::BTreeSet<String> {
    let mut args = args.to_vec();
    args.push("--help");
    let help = String::from_utf8(rimthan(&args).stdout).unwrap();
    help.lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .map(|r| r.split([' ', '=', '<']).next().unwrap().to_owned())
        .filter(|f| f != "help")
        .collect()
}

#[test]
fn the_readme_evidence_commands_use_only_flags_clap_knows() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let block = readme
        .split("## Evidence that outlives the server")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a command block under ## Evidence that outlives the server");
    let mut named = std::collections::BTreeSet::new();
    for line in block.lines() {
        let words: Vec<&str> = line.split('#').next().unwrap().split_whitespace().collect();
        let ["rimthan", command, sub, rest @ ..] = words.as_slice() else {
            continue;
        };
        named.insert(format!("{command} {sub}"));
        let known = help_flags(&[command, sub]);
        for flag in rest
            .iter()
            .filter_map(|w| w.trim_start_matches('[').strip_prefix("--"))
        {
            let flag = flag.trim_end_matches(']');
            assert!(
                known.contains(flag),
                "README: {command} {sub} has no --{flag}"
            );
        }
    }
    assert_eq!(
        named,
        ["audit verify", "provenance verify"]
            .map(String::from)
            .into()
    );
}

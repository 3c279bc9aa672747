//! `rimthan serve` under a descriptor limit and on SIGTERM: idle sockets beyond what the
//! process may hold are reaped so `/healthz` is answered, and neither a client that never
//! finishes its request head nor a named pipe in the registry folder keeps the process alive
//! after SIGTERM.
#![cfg(unix)]

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    time::{Duration, Instant},
};

mod common;

use common::{Served, build_signed, serve_on_free_port};

const BIN: &str = env!("CARGO_BIN_EXE_rimthan");

/// `rimthan serve` on a port it picks itself (read back from its log, so no other test can
/// take the port in between) with a memory store, its descriptor limit set to `nofile`.
fn serve(nofile: u32, extra: &[&str]) -> (Served, u16) {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ])
        .args(extra);
    serve_on_free_port(command)
}

fn healthz(port: u16, timeout: Duration) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

fn terminate(Served(child): &Served) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for the process to end; how long it took, or `None` past `limit`.
fn ended_within(Served(child): &mut Served, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn idle_sockets_beyond_the_descriptor_limit_are_reaped_and_healthz_answers() {
    let (mut child, port) = serve(1024, &["--header-timeout", "2"]);
    let held: Vec<TcpStream> = (0..1500)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let started = Instant::now();
    let answer = healthz(port, Duration::from_secs(30)).expect("healthz answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(30));
    drop(held);
    terminate(&child);
    assert!(ended_within(&mut child, Duration::from_secs(15)).is_some());
}

#[test]
fn sigterm_ends_the_process_whatever_a_client_does() {
    // A header timeout far beyond the grace period: only shutdown can end the connection.
    let (mut child, port) = serve(1024, &["--header-timeout", "600"]);
    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        .unwrap();
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.write_all(b"").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    terminate(&child);
    let took = ended_within(&mut child, Duration::from_secs(15)).expect("ended within 15 s");
    assert!(took < Duration::from_secs(15), "{took:?}");
}

/// A registry folder built from the shipped source as release 2027.1.0 on `stable`.
fn registry_folder(dir: &std::path::Path) -> std::path::PathBuf {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry/source");
    build_signed(&source, dir, &[])
}

#[test]
fn sigterm_ends_the_process_after_a_named_pipe_sat_in_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry_folder(dir.path());
    let (mut child, _port) = serve(
        1024,
        &[
            "--registry",
            registry.to_str().unwrap(),
            "--reload-interval",
            "1",
        ],
    );
    let fifo = registry.join("keys/pipe.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Long enough for several reloads to meet the pipe.
    std::thread::sleep(Duration::from_secs(3));
    terminate(&child);
    let ended = ended_within(&mut child, Duration::from_secs(15));
    assert!(ended.is_some(), "SIGTERM did not end the process");
}

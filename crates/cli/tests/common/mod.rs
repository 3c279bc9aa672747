//! What the tests that start `rimthan serve` themselves share: the server process, killed when
//! the test ends however it ends, and the port it picked, read back from its log.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

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

//! What the integration tests share: the server as a child process (as a
//! user runs it), plain HTTP requests, and a Rust SSE client.
#![allow(dead_code)] // each test file uses a different part

pub mod sse;
pub mod webdriver;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// How long any one wait in these tests may last before it is called a hang.
/// A guard against a test that never ends, not a speed claim: every wait
/// normally ends within seconds, even in a debug build on two loaded cores,
/// and none of them asserts how soon. Hitting it names what was waited for and
/// what was seen.
pub const HANG_GUARD: Duration = Duration::from_secs(300);

/// Awaits `fut`; panics naming `what` if it has not ended within [`HANG_GUARD`].
pub async fn guard<T>(what: impl std::fmt::Display, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HANG_GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("hung: {what} had not ended after {HANG_GUARD:?}"),
    }
}

/// The server binary, started with `--port 0` and the given flags; killed on drop.
pub struct Server {
    child: Child,
    /// Kept open: the server must not get EPIPE on a later print.
    _stdout: BufReader<ChildStdout>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Server {
    /// Starts it and reads the address from its first line. The server prints
    /// it after binding, so it accepts connections from then on: no start-up
    /// race, and port 0 means no port clash.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keybus-dashboard"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the keybus-dashboard binary");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        // Read on a thread of its own, so that a server that never prints is a
        // bounded failure rather than a test that hangs.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = stdout.read_line(&mut line);
            let _ = tx.send((read, line, stdout));
        });
        let (read, line, stdout) = match rx.recv_timeout(HANG_GUARD) {
            Ok(got) => got,
            Err(_) => {
                let _ = child.kill();
                panic!("the server printed no first line within {HANG_GUARD:?}")
            }
        };
        read.expect("read the server's first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in the server's first line: {line:?}"));
        Server {
            child,
            _stdout: stdout,
            addr,
        }
    }

    /// The page's URL, with `query` (may be empty).
    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    /// The server process's resident memory, from `/proc/<pid>/status`.
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/<pid>/status");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS in /proc/<pid>/status");
        kib * 1024
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `GET path`: status and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        request(self.addr, "GET", path).await
    }

    /// `GET path` as JSON; panics unless 200.
    pub async fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// `/stats`.
    pub async fn stats(&self) -> Value {
        self.get_json("/stats").await
    }

    /// Stops the workload (the server runs with `--allow-stop`) and waits,
    /// bounded, until `/stats` says it stopped.
    pub async fn stop_workload(&self) {
        let (status, body) = request(self.addr, "POST", "/workload/stop").await;
        assert_eq!(status, 200, "POST /workload/stop: {body}");
        self.wait_for("the workload to stop", |s| s["producing"] == false)
            .await;
    }

    /// Polls `/stats` until `done` holds and returns that `/stats`; panics
    /// after [`HANG_GUARD`] with the last one seen.
    pub async fn wait_for(&self, what: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
        let until = Instant::now() + HANG_GUARD;
        loop {
            let stats = self.stats().await;
            if done(&stats) {
                return stats;
            }
            assert!(
                Instant::now() < until,
                "hung: gave up after {HANG_GUARD:?} waiting for {what}; the last /stats: {stats}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends over a window of about `window`, by the server's own clock:
    /// `(sends per second, sends)`.
    pub async fn send_rate(&self, window: Duration) -> (f64, u64) {
        let a = self.stats().await;
        tokio::time::sleep(window).await;
        let b = self.stats().await;
        let sent = b["hub"]["sent"].as_u64().unwrap() - a["hub"]["sent"].as_u64().unwrap();
        let ms = b["uptime_ms"].as_u64().unwrap() - a["uptime_ms"].as_u64().unwrap();
        (sent as f64 * 1000.0 / ms.max(1) as f64, sent)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on a fresh connection: status and body as text.
/// Bounded by [`HANG_GUARD`].
pub async fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    guard(
        format!("{method} {path} (connect, request, the whole response)"),
        request_unguarded(addr, method, path),
    )
    .await
}

async fn request_unguarded(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let stream = TcpStream::connect(addr)
        .await
        .expect("connect to the server");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP handshake");
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .expect("a valid request");
    let resp = sender.send_request(req).await.expect("a response");
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .expect("the response body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Runs `f` on a fresh two-thread runtime (the machine has two cores).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(f)
}

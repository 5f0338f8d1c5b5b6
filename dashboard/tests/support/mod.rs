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
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// The server binary, started with `--port 0` and the given flags; killed on drop.
pub struct Server {
    child: Child,
    /// Kept open: the server must not get EPIPE on a later print.
    _stdout: BufReader<ChildStdout>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Server {
    /// Starts it and reads the address from its first line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keybus-dashboard"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the keybus-dashboard binary");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read the server's first line");
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

    /// Polls `/stats` until `done` holds; panics after 60 s (a liveness bound,
    /// not a speed claim: every wait in these tests normally ends in well under
    /// a second).
    pub async fn wait_for(&self, what: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let stats = self.stats().await;
            if done(&stats) {
                return stats;
            }
            assert!(
                Instant::now() < until,
                "gave up waiting for {what}: {stats}"
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
pub async fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
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

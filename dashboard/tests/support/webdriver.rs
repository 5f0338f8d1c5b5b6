//! Just enough of the W3C WebDriver protocol to drive Debian's headless
//! Chromium through chromedriver: a session, navigation, tabs, scripts and
//! screenshots. WebDriver is JSON over plain HTTP, so this is a few requests
//! rather than a client library and its dependency tree.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

use super::{guard, HANG_GUARD};

/// What the test needs installed, and how to get it.
const PROVISION: &str = "run `bash .ci/provision-chromium` (as root) to install Debian's \
                         `chromium` and `chromium-driver`, or point KEYBUS_CHROMIUM and \
                         KEYBUS_CHROMEDRIVER at them";

/// The browser binary: `$KEYBUS_CHROMIUM`, else `/usr/bin/chromium`.
/// Panics (never skips) with what to run when it is missing.
pub fn chromium() -> PathBuf {
    find(
        "KEYBUS_CHROMIUM",
        &["/usr/bin/chromium", "/usr/lib/chromium/chromium"],
    )
    .unwrap_or_else(|| panic!("headless Chromium not found: {PROVISION}"))
}

/// The driver: `$KEYBUS_CHROMEDRIVER`, else `/usr/bin/chromedriver`.
pub fn chromedriver() -> PathBuf {
    find("KEYBUS_CHROMEDRIVER", &["/usr/bin/chromedriver"])
        .unwrap_or_else(|| panic!("chromedriver not found: {PROVISION}"))
}

fn find(var: &str, defaults: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var) {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    defaults.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// A chromedriver process with one Chromium session; both end on drop.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    /// Chromium's profile, fresh per run (removed on drop).
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless
    /// session with the flags that keep Chromium off the network.
    pub async fn start() -> Browser {
        let (chromium, chromedriver) = (chromium(), chromedriver());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}; {PROVISION}", chromedriver.display()));
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let profile = std::env::temp_dir().join(format!(
            "keybus-dashboard-chromium-{}-{port}",
            std::process::id()
        ));
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            profile,
        };
        let until = Instant::now() + HANG_GUARD;
        loop {
            let status = guard(
                "chromedriver's GET /status",
                call(addr, "GET", "/status", None),
            );
            let Err(e) = status.await else { break };
            assert!(
                Instant::now() < until,
                "hung: chromedriver was not up on {addr} after {HANG_GUARD:?}: {e}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,1000",
            "--hide-scrollbars",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", browser.profile.display()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let value = guard(
            "opening a Chromium session",
            call(addr, "POST", "/session", Some(caps)),
        )
        .await
        .unwrap_or_else(|e| panic!("open a Chromium session: {e}; {PROVISION}"));
        browser.session = value["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser
    }

    async fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        guard(
            format!("WebDriver {method} {path} {body:?}"),
            call(self.addr, method, &path, body.clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// Loads `url` in the current tab.
    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// Opens a new tab, switches to it and returns its handle.
    pub async fn new_tab(&self) -> String {
        let v = self
            .cmd("POST", "/window/new", Some(json!({"type": "tab"})))
            .await;
        let handle = v["handle"].as_str().expect("a window handle").to_owned();
        self.switch_to(&handle).await;
        handle
    }

    /// The current tab's handle.
    pub async fn tab(&self) -> String {
        self.cmd("GET", "/window", None)
            .await
            .as_str()
            .expect("a handle")
            .to_owned()
    }

    /// Makes `handle` the current tab.
    pub async fn switch_to(&self, handle: &str) {
        self.cmd("POST", "/window", Some(json!({ "handle": handle })))
            .await;
    }

    /// Runs `body` as a function in the page and returns what it returns.
    pub async fn eval(&self, body: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": body, "args": []})),
        )
        .await
    }

    /// Evaluates `body` until it returns `true`; panics after [`HANG_GUARD`]
    /// with what it last returned.
    pub async fn wait_for(&self, what: &str, body: &str) {
        let until = Instant::now() + HANG_GUARD;
        loop {
            let got = self.eval(body).await;
            if got == Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < until,
                "hung: the page had not shown {what} after {HANG_GUARD:?} ({body} returned {got})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The current tab's viewport as PNG bytes.
    pub async fn screenshot(&self) -> Vec<u8> {
        let b64 = self.cmd("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64 text"))
            .expect("a base64 PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Ends Chromium; the driver is killed right after either way.
            let (addr, path) = (self.addr, format!("/session/{}", self.session));
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(rt) = rt {
                    // The timeout is made inside the runtime: its timer needs one.
                    let _ = rt.block_on(async {
                        tokio::time::timeout(
                            Duration::from_secs(10),
                            call(addr, "DELETE", &path, None),
                        )
                        .await
                    });
                }
            })
            .join();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One WebDriver command: the response's `value`, or its error message.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&bytes)))?;
    if !status.is_success() {
        return Err(format!("{status}: {}", v["value"]["message"]));
    }
    Ok(v["value"].clone())
}

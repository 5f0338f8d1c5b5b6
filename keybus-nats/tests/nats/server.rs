//! A real `nats-server` with JetStream for one test: 127.0.0.1, a free port, a
//! temporary store directory; started, waited for, killed, paused, restarted.
//!
//! The binary comes from `$NATS_SERVER`, then the directory `.ci/provision-nats`
//! fills (`$KEYBUS_NATS_HOME/bin/nats-server`), then `PATH`. No server, or one
//! older than 2.10, fails the test with how to get one: never a skip.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const HOW: &str = "run `bash .ci/provision-nats` (it installs nats-server 2.10+ and prints its \
                   path), then set NATS_SERVER to that path or rerun the tests";

/// The server binary, checked to run and to be 2.10 or newer.
pub fn binary() -> PathBuf {
    let home = std::env::var_os("KEYBUS_NATS_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
                .map(|c| c.join("keybus-nats"))
        });
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("NATS_SERVER") {
        candidates.push(p.into());
    }
    if let Some(h) = home {
        candidates.push(h.join("bin").join("nats-server"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nats-server")));
    }
    let mut seen = Vec::new();
    for c in candidates.into_iter().filter(|c| c.is_file()) {
        let Ok(out) = Command::new(&c).arg("--version").output() else {
            continue;
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if version_ok(&text) {
            return c;
        }
        seen.push(format!("{} ({})", c.display(), text.trim()));
    }
    if seen.is_empty() {
        panic!("no nats-server found (NATS_SERVER, $KEYBUS_NATS_HOME/bin, PATH): {HOW}");
    }
    panic!(
        "nats-server too old: {}; keybus-nats needs 2.10+: {HOW}",
        seen.join(", ")
    );
}

/// "nats-server: v2.14.6" is 2.10 or newer.
fn version_ok(text: &str) -> bool {
    let Some(v) = text.split_whitespace().find_map(|w| w.strip_prefix('v')) else {
        return false;
    };
    let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    major > 2 || (major == 2 && minor >= 10)
}

/// One running (or stopped) server.
pub struct Server {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    paused: bool,
}

impl Server {
    /// A server with the default limits.
    pub fn start() -> Server {
        Self::start_with("")
    }

    /// A server with extra configuration lines (`max_payload: 4096`).
    pub fn start_with(extra: &str) -> Server {
        static N: AtomicU64 = AtomicU64::new(0);
        let bin = binary(); // fails first, before anything is left on disk
        let dir = std::env::temp_dir().join(format!(
            "keybus-nats-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary store directory");
        let port = free_port();
        let conf = format!(
            "listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: {:?}\n}}\n{extra}\n",
            dir.join("js").display().to_string()
        );
        std::fs::write(dir.join("nats.conf"), conf).expect("server config");
        let mut s = Server {
            bin,
            dir,
            port,
            child: None,
            paused: false,
        };
        s.launch();
        s
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        assert!(self.child.is_none(), "server already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("server log");
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(self.dir.join("nats.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}: {HOW}", self.bin.display()));
        self.child = Some(child);
        self.wait_ready();
    }

    /// Waits (at most 20 s) until the server greets a client with INFO.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut line = String::new();
                if BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("INFO") {
                    return;
                }
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("nats-server exited ({status}); log: {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "nats-server not ready in 20 s; log: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        self.resume();
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and store.
    pub fn restart(&mut self) {
        self.launch();
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("server running").id();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} {pid} failed");
    }

    /// SIGSTOP: the process stays, its sockets open, and answers nothing.
    pub fn pause(&mut self) {
        self.signal("-STOP");
        self.paused = true;
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&mut self) {
        if self.paused {
            self.signal("-CONT");
            self.paused = false;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

#[test]
fn version_parsing() {
    assert!(version_ok("nats-server: v2.14.6\n"));
    assert!(version_ok("nats-server: v2.10.0"));
    assert!(!version_ok("nats-server: v2.9.10"));
    assert!(!version_ok("garbage"));
}

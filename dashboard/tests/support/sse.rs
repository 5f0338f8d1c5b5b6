//! A Rust SSE client of `/events`, and the tally a client keeps: its table
//! and the accounting it can check against its receiver's stats.
//!
//! The client speaks HTTP/1.1 on a plain socket (chunked transfer decoding
//! included) rather than through an HTTP library, because a library reads the
//! socket ahead into its own buffer whatever the caller consumes: a "slow"
//! client would then only be slow in user space, and the server's writes
//! would never back up. Here a slow client is a slow link: a small receive
//! buffer, and at most `read` bytes per `every`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::{guard, HANG_GUARD};

/// One SSE message.
#[derive(Debug)]
pub struct Message {
    /// Its `event:` field.
    pub event: String,
    /// Its `data:` field, parsed.
    pub data: Value,
}

/// How a client reads.
#[derive(Debug, Clone, Copy)]
pub enum Link {
    /// As fast as the data comes.
    Fast,
    /// A receive buffer of `rcvbuf` bytes, and one read of at most `read`
    /// bytes per `every`.
    Slow {
        /// SO_RCVBUF, set before connecting.
        rcvbuf: u32,
        /// Bytes per read.
        read: usize,
        /// Pause before each read.
        every: Duration,
    },
}

/// Where the chunked-transfer decoder is.
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// This many bytes of chunk data to go.
    Data(usize),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// The last chunk was read.
    Done,
}

/// An open `/events` stream.
pub struct Client {
    stream: TcpStream,
    link: Link,
    /// Bytes read from the socket, not yet decoded.
    raw: Vec<u8>,
    /// Decoded SSE text not yet parsed into messages.
    text: Vec<u8>,
    chunk: Chunk,
    /// Bytes read from the socket so far, shared so that a test can compare
    /// them with what the server says it wrote while this client reads.
    read: Arc<AtomicU64>,
}

impl Client {
    /// Opens `path` (e.g. `/events?pace_ms=100`) and reads the response head;
    /// panics unless it is `200 text/event-stream`, or after [`HANG_GUARD`].
    pub async fn connect(addr: SocketAddr, path: &str, link: Link) -> Client {
        guard(
            format!("GET {path} ({link:?}): connect and read the response head"),
            Client::connect_unguarded(addr, path, link),
        )
        .await
    }

    async fn connect_unguarded(addr: SocketAddr, path: &str, link: Link) -> Client {
        let socket = TcpSocket::new_v4().expect("a socket");
        if let Link::Slow { rcvbuf, .. } = link {
            socket.set_recv_buffer_size(rcvbuf).expect("SO_RCVBUF");
        }
        let mut stream = socket.connect(addr).await.expect("connect to the server");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("send the request");
        let mut client = Client {
            stream,
            link,
            raw: Vec::new(),
            text: Vec::new(),
            chunk: Chunk::Size,
            read: Arc::new(AtomicU64::new(0)),
        };
        let head = client.head().await;
        let status = head.lines().next().unwrap_or_default();
        assert!(status.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("content-type: text/event-stream"),
            "GET {path}: {head}"
        );
        assert!(
            lower.contains("transfer-encoding: chunked"),
            "GET {path}: {head}"
        );
        client
    }

    /// Reads up to the end of the response head and returns it.
    async fn head(&mut self) -> String {
        loop {
            if let Some(end) = find(&self.raw, b"\r\n\r\n") {
                let head: Vec<u8> = self.raw.drain(..end + 4).collect();
                return String::from_utf8_lossy(&head).into_owned();
            }
            assert!(
                self.fill().await,
                "the server closed before the response head"
            );
        }
    }

    /// One socket read (paced for a slow link); `false` at end of stream.
    async fn fill(&mut self) -> bool {
        let max = match self.link {
            Link::Fast => 64 * 1024,
            Link::Slow { read, every, .. } => {
                tokio::time::sleep(every).await;
                read
            }
        };
        self.raw.reserve(max);
        match (&mut self.stream)
            .take(max as u64)
            .read_buf(&mut self.raw)
            .await
        {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.read.fetch_add(n as u64, Ordering::Relaxed);
                true
            }
        }
    }

    /// Moves whatever chunk data `raw` holds into `text`.
    fn decode(&mut self) {
        loop {
            match self.chunk {
                Chunk::Size => {
                    let Some(end) = find(&self.raw, b"\r\n") else {
                        return;
                    };
                    let line: Vec<u8> = self.raw.drain(..end + 2).collect();
                    let hex = String::from_utf8_lossy(&line[..end]);
                    let size = usize::from_str_radix(hex.split(';').next().unwrap().trim(), 16)
                        .unwrap_or_else(|e| panic!("bad chunk size {hex:?}: {e}"));
                    self.chunk = if size == 0 {
                        Chunk::Done
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let n = left.min(self.raw.len());
                    if n == 0 {
                        return;
                    }
                    self.text.extend(self.raw.drain(..n));
                    self.chunk = if n == left {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - n)
                    };
                }
                Chunk::DataEnd => {
                    if self.raw.len() < 2 {
                        return;
                    }
                    assert_eq!(&self.raw[..2], b"\r\n", "a chunk ends with CRLF");
                    self.raw.drain(..2);
                    self.chunk = Chunk::Size;
                }
                Chunk::Done => return,
            }
        }
    }

    /// The bytes read from the socket so far (response head, chunk framing
    /// and SSE framing included), as a counter that goes on counting.
    pub fn read_counter(&self) -> Arc<AtomicU64> {
        self.read.clone()
    }

    /// The next message; `None` when the stream ends. Comments (keep-alives)
    /// are skipped. Unbounded: [`read_until`] is the bounded way to read.
    pub async fn next(&mut self) -> Option<Message> {
        loop {
            self.decode();
            if let Some(end) = find(&self.text, b"\n\n") {
                let raw: Vec<u8> = self.text.drain(..end + 2).collect();
                if let Some(msg) = parse(&raw) {
                    return Some(msg);
                }
                continue;
            }
            if matches!(self.chunk, Chunk::Done) || !self.fill().await {
                return None;
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse(raw: &[u8]) -> Option<Message> {
    let text = std::str::from_utf8(raw).expect("SSE is UTF-8");
    let (mut event, mut data) = (String::from("message"), String::new());
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            event = v.trim_start().to_owned();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if data.is_empty() {
        return None; // a comment
    }
    let data = serde_json::from_str(&data).unwrap_or_else(|e| panic!("bad JSON {e}: {data}"));
    Some(Message { event, data })
}

/// What a client has seen.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Its connection id (from `hello`).
    pub conn: u64,
    /// Each metric's latest value.
    pub table: BTreeMap<String, f64>,
    /// Batches received.
    pub batches: u64,
    /// Entries received (the receiver's `delivered`).
    pub updates: u64,
    /// Sum of `sends` over the entries (the receiver's `folded`).
    pub sends: u64,
    /// Entries in the first batch (the snapshot).
    pub first_batch: usize,
    /// The largest `sends` of one entry.
    pub max_sends: u64,
    /// The last batch's receiver stats.
    pub rx: Value,
    /// The last batch's `producing`.
    pub producing: bool,
}

impl Tally {
    /// Takes in one message.
    pub fn apply(&mut self, msg: &Message) {
        match msg.event.as_str() {
            "hello" => self.conn = msg.data["conn"].as_u64().expect("hello.conn"),
            "batch" => {
                let events = msg.data["events"].as_array().expect("batch.events");
                if self.batches == 0 {
                    self.first_batch = events.len();
                }
                self.batches += 1;
                assert_eq!(
                    msg.data["seq"].as_u64(),
                    Some(self.batches),
                    "batches in order"
                );
                for e in events {
                    let name = e[0].as_str().expect("event name").to_owned();
                    let sends = e[2].as_u64().expect("event sends");
                    self.table.insert(name, e[1].as_f64().expect("event value"));
                    self.updates += 1;
                    self.sends += sends;
                    self.max_sends = self.max_sends.max(sends);
                }
                self.rx = msg.data["rx"].clone();
                self.producing = msg.data["producing"].as_bool().expect("batch.producing");
            }
            other => panic!("unexpected SSE event {other:?}: {}", msg.data),
        }
    }

    /// Whether the last batch was taken after the workload stopped with
    /// nothing left pending: the client then has everything.
    pub fn drained(&self) -> bool {
        self.batches > 0
            && !self.producing
            && self.rx["pending_sends"] == 0
            && self.rx["pending"] == 0
    }

    /// What a hang message shows: the counts and the last batch's state,
    /// without the table.
    pub fn summary(&self) -> String {
        format!(
            "{} batches, {} updates, {} sends, last batch producing {}, rx {}",
            self.batches, self.updates, self.sends, self.producing, self.rx
        )
    }

    /// The checks every client must pass once [`drained`](Self::drained):
    /// its table is the hub's state table, and its receiver's accounting
    /// matches what it got: `received == folded + dropped + pending_sends`,
    /// nothing annihilated or overflowed, `folded` its sum of `sends`,
    /// `delivered` its count of entries.
    pub fn check(&self, who: &str, snapshot: &BTreeMap<String, f64>) {
        assert!(self.drained(), "{who}: not drained: {self:?}");
        assert_eq!(
            &self.table, snapshot,
            "{who}: the client's table is the hub's state table"
        );
        let rx = &self.rx;
        let n = |k: &str| {
            rx[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{who}: rx.{k} in {rx}"))
        };
        assert_eq!(
            n("received"),
            n("folded") + n("dropped") + n("pending_sends"),
            "{who}: conservation: {rx}"
        );
        assert_eq!((n("annihilated"), n("overflowed")), (0, 0), "{who}: {rx}");
        assert_eq!(
            n("folded"),
            self.sends,
            "{who}: folded is the client's sum of sends"
        );
        assert_eq!(
            n("delivered"),
            self.updates,
            "{who}: delivered is the client's entry count"
        );
        assert_eq!(rx["conserved"], true, "{who}: {rx}");
    }
}

/// Reads `client` into `tally` until `done(tally)` holds. Panics if the
/// stream ends first, or after [`HANG_GUARD`] (a hang, not slowness), with
/// what was waited for and what the client had seen.
pub async fn read_until(
    client: &mut Client,
    tally: &mut Tally,
    what: &str,
    done: impl Fn(&Tally) -> bool,
) {
    let until = Instant::now() + HANG_GUARD;
    while !done(tally) {
        let msg = tokio::time::timeout_at(until.into(), client.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "hung: client (conn {}) gave up after {HANG_GUARD:?} waiting for {what}; \
                     {} bytes read, seen: {}",
                    tally.conn,
                    client.read.load(Ordering::Relaxed),
                    tally.summary()
                )
            })
            .unwrap_or_else(|| {
                panic!(
                    "client (conn {}): the stream ended while waiting for {what}; seen: {}",
                    tally.conn,
                    tally.summary()
                )
            });
        tally.apply(&msg);
    }
}

/// Reads `client` until its tally is [drained](Tally::drained), bounded as
/// [`read_until`] is.
pub async fn read_until_drained(client: &mut Client, tally: &mut Tally) {
    read_until(client, tally, "its drained batch", Tally::drained).await;
}

/// `/snapshot` as a map.
pub fn snapshot_map(v: &Value) -> BTreeMap<String, f64> {
    v.as_object()
        .expect("/snapshot is an object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().expect("a number")))
        .collect()
}

//! `GET /events`: the Server-Sent Events stream of one connection.
//!
//! The connection registers a snapshot receiver, so its first batch is the
//! whole state table. Then, once per pace, it takes everything pending as one
//! cut (`try_recv_all`) and writes it as one message. The stream is polled only
//! when the socket takes more (hyper asks a response body for its next chunk
//! after writing the last), so a client on a slow link is simply polled less
//! often: meanwhile its receiver coalesces, its pending set stays bounded by
//! the key set, and each update it then gets says how many sends it stands for.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::time::{Interval, MissedTickBehavior};

use crate::app::App;
use crate::cli::{MAX_PACE_MS, MIN_PACE_MS};
use crate::connections::{Registration, StreamOptions};
use crate::json;

/// With nothing pending, a message (stats only) still goes out this often: it
/// keeps the page's rate and conservation line current, and a write is how a
/// vanished client is noticed.
const IDLE_BEAT: Duration = Duration::from_secs(1);
/// The longest prefix accepted.
const MAX_PREFIX: usize = 64;

/// The query string of `/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// One batch at most per this many milliseconds.
    pace_ms: Option<u64>,
    /// Only metrics whose name starts with this.
    prefix: Option<String>,
}

/// Validates the request, registers the connection and streams it.
pub async fn events(
    State(app): State<Arc<App>>,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Response {
    let options = match options(&app, query) {
        Ok(options) => options,
        Err(message) => return (StatusCode::BAD_REQUEST, message).into_response(),
    };
    let registration = match app.conns.open(&app.hub, &app.names, options) {
        Ok(registration) => registration,
        Err(full) => {
            let message = format!(
                "too many connections: this server serves at most {}\n",
                full.0
            );
            return (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
        }
    };
    // Comments between messages would only matter if a message could be
    // further apart than proxies' idle timeouts; IDLE_BEAT already is shorter.
    Sse::new(feed(app, registration))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The request's options, or the message of a 400 answer.
fn options(
    app: &App,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<StreamOptions, String> {
    let Query(q) = query.map_err(|e| format!("bad query string: {}\n", e.body_text()))?;
    let pace = match q.pace_ms {
        None => app.config.pace,
        Some(ms) if (MIN_PACE_MS..=MAX_PACE_MS).contains(&ms) => Duration::from_millis(ms),
        Some(ms) => {
            return Err(format!(
            "bad query string: pace_ms must be between {MIN_PACE_MS} and {MAX_PACE_MS}, got {ms}\n"
        ))
        }
    };
    if let Some(prefix) = &q.prefix {
        if prefix.len() > MAX_PREFIX {
            return Err(format!(
                "bad query string: prefix is {} bytes, at most {MAX_PREFIX}\n",
                prefix.len()
            ));
        }
    }
    Ok(StreamOptions {
        pace,
        prefix: q.prefix.filter(|p| !p.is_empty()),
    })
}

/// A connection's stream state. Dropping it (hyper drops the body when the
/// client goes away) drops the registration, which closes the receiver.
struct Feed {
    app: Arc<App>,
    reg: Registration,
    ticker: Interval,
    seq: u64,
    last_message: Instant,
    hello: bool,
}

fn feed(app: Arc<App>, reg: Registration) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut ticker = tokio::time::interval(reg.conn().options.pace);
    // A slow client polled late gets one batch at once and the next a full
    // pace later: a catch-up burst would be pointless, the batch already holds
    // everything that changed.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let state = Feed {
        app,
        reg,
        ticker,
        seq: 0,
        last_message: Instant::now(),
        hello: true,
    };
    stream::unfold(state, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok(event), feed))
    })
}

impl Feed {
    /// The next message; `None` once the receiver reports closed.
    async fn next(&mut self) -> Option<Event> {
        let conn = self.reg.conn().clone();
        if std::mem::take(&mut self.hello) {
            let hello = json::Hello {
                conn: conn.id,
                pace_ms: conn.options.pace.as_millis() as u64,
                prefix: conn.options.prefix.as_deref(),
                keys: self.app.config.keys,
            };
            return Some(self.message("hello", serde_json::to_string(&hello)));
        }
        loop {
            // The first tick is immediate: the snapshot goes out at once.
            self.ticker.tick().await;
            // Read before the take: `producing == false` then means every send
            // finished before this batch, so its stats are final (a client
            // waits for that to check its table against `/snapshot`).
            let producing = self.app.workload.producing();
            let batch = conn.take()?;
            if batch.events.is_empty() && self.last_message.elapsed() < IDLE_BEAT {
                continue;
            }
            self.seq += 1;
            let names = &self.app.names;
            let msg = json::BatchMsg {
                seq: self.seq,
                events: batch
                    .events
                    .iter()
                    .map(|e| (names[e.key as usize].as_str(), e.value, e.sends))
                    .collect(),
                rx: batch.stats.into(),
                hub: self.app.hub.stats().into(),
                rate: self.app.send_rate(),
                producing,
            };
            return Some(self.message("batch", serde_json::to_string(&msg)));
        }
    }

    fn message(&mut self, kind: &str, data: serde_json::Result<String>) -> Event {
        // Serializing these plain structs cannot fail; if it ever did, the
        // client gets an error event instead of a dead stream.
        let (kind, data) = match data {
            Ok(data) => (kind, data),
            Err(e) => ("error", format!("{{\"error\":{:?}}}", e.to_string())),
        };
        let conn = self.reg.conn();
        conn.messages.fetch_add(1, Ordering::Relaxed);
        conn.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        self.last_message = Instant::now();
        Event::default().event(kind).data(data)
    }
}

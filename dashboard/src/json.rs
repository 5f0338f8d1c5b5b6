//! The JSON shapes the server writes: the SSE messages and `/stats`.
//!
//! keybus's stats types are `#[non_exhaustive]` and carry no serde impls (the
//! crate has no serde dependency), so they are copied field by field here.

use keybus::{HubStats, ReceiverStats};
use serde::Serialize;

/// A receiver's [`ReceiverStats`], plus whether its conservation law holds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct RxStats {
    /// Sends that reached the receiver past its filter.
    pub received: u64,
    /// Sends its filter rejected.
    pub filtered: u64,
    /// Events taken.
    pub delivered: u64,
    /// Sum of `sends` over the events taken.
    pub folded: u64,
    /// Sends removed by a merge returning `None`.
    pub annihilated: u64,
    /// Sends refused by `max_pending`.
    pub overflowed: u64,
    /// Sends dropped undelivered.
    pub dropped: u64,
    /// Keys pending now.
    pub pending: u64,
    /// Sends folded into the pending values.
    pub pending_sends: u64,
    /// `received == folded + annihilated + overflowed + dropped + pending_sends`.
    pub conserved: bool,
}

impl From<ReceiverStats> for RxStats {
    fn from(s: ReceiverStats) -> Self {
        RxStats {
            received: s.received,
            filtered: s.filtered,
            delivered: s.delivered,
            folded: s.folded,
            annihilated: s.annihilated,
            overflowed: s.overflowed,
            dropped: s.dropped,
            pending: s.pending,
            pending_sends: s.pending_sends,
            conserved: s.received
                == s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends,
        }
    }
}

/// The hub's [`HubStats`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Hub {
    /// Sends accepted.
    pub sent: u64,
    /// Sends refused (send side closed).
    pub refused: u64,
    /// Receivers live now: one per open connection.
    pub receivers: u64,
}

impl From<HubStats> for Hub {
    fn from(s: HubStats) -> Self {
        Hub {
            sent: s.sent,
            refused: s.refused,
            receivers: s.receivers,
        }
    }
}

/// The first SSE message of a connection (`event: hello`).
#[derive(Debug, Serialize)]
pub struct Hello<'a> {
    /// The connection's id, as listed in `/stats`.
    pub conn: u64,
    /// Its pace in milliseconds.
    pub pace_ms: u64,
    /// Its key prefix, if any.
    pub prefix: Option<&'a str>,
    /// Metrics in the workload.
    pub keys: u32,
}

/// One SSE `batch` message: what changed since the last one, and the stats.
#[derive(Debug, Serialize)]
pub struct BatchMsg<'a> {
    /// 1 for the first batch (the snapshot), rising by one.
    pub seq: u64,
    /// `[name, value, sends]` per metric that changed; `sends` is how many
    /// sends were folded into this update (0 for a snapshot entry).
    pub events: Vec<(&'a str, f64, u64)>,
    /// This connection's receiver, read right after the batch was taken.
    pub rx: RxStats,
    /// The hub.
    pub hub: Hub,
    /// Sends per second over the last sampling interval.
    pub rate: f64,
    /// Whether the producers are still running.
    pub producing: bool,
}

/// `/stats`.
#[derive(Debug, Serialize)]
pub struct Stats {
    /// Milliseconds since the server started (a clock for rates).
    pub uptime_ms: u64,
    /// Metrics in the workload.
    pub keys: u32,
    /// Whether the producers are still running.
    pub producing: bool,
    /// Sends per second over the last sampling interval.
    pub send_rate: f64,
    /// The server's resident memory in bytes (Linux; `null` elsewhere).
    pub rss_bytes: Option<u64>,
    /// The hub's stats.
    pub hub: Hub,
    /// Connections opened since start.
    pub connections_opened: u64,
    /// Every open connection.
    pub connections: Vec<ConnStats>,
    /// How many of them satisfy the conservation law.
    pub conserved: usize,
}

/// One connection in `/stats`.
#[derive(Debug, Serialize)]
pub struct ConnStats {
    /// Its id.
    pub id: u64,
    /// Its pace in milliseconds.
    pub pace_ms: u64,
    /// Its key prefix, if any.
    pub prefix: Option<String>,
    /// Milliseconds since it opened.
    pub age_ms: u64,
    /// SSE messages written.
    pub messages: u64,
    /// Bytes of SSE data written.
    pub bytes: u64,
    /// Its receiver's stats.
    pub stats: RxStats,
}

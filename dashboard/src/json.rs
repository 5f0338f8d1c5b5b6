//! The JSON shapes the server writes: the SSE messages and `/stats`.
//!
//! keybus's stats types carry no serde impls (the crate has no serde
//! dependency), so [`RxStats`] and [`Hub`] wrap them and write their fields
//! under keybus's own field names.

use keybus::{HubStats, ReceiverStats};
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

/// A receiver's [`ReceiverStats`] as JSON: every field under its own name, plus
/// `conserved`, whether its conservation law holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxStats(pub ReceiverStats);

impl RxStats {
    /// `received == folded + annihilated + overflowed + dropped + pending_sends`.
    pub fn conserved(&self) -> bool {
        let s = &self.0;
        s.received == s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends
    }
}

impl From<ReceiverStats> for RxStats {
    fn from(s: ReceiverStats) -> Self {
        RxStats(s)
    }
}

impl Serialize for RxStats {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = &self.0;
        let counters = [
            ("received", s.received),
            ("filtered", s.filtered),
            ("delivered", s.delivered),
            ("folded", s.folded),
            ("annihilated", s.annihilated),
            ("overflowed", s.overflowed),
            ("dropped", s.dropped),
            ("pending", s.pending),
            ("pending_sends", s.pending_sends),
        ];
        let mut out = serializer.serialize_struct("RxStats", counters.len() + 1)?;
        for (name, value) in counters {
            out.serialize_field(name, &value)?;
        }
        out.serialize_field("conserved", &self.conserved())?;
        out.end()
    }
}

/// The hub's [`HubStats`] as JSON: `sent`, `refused` and `receivers` (one per
/// open connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hub(pub HubStats);

impl From<HubStats> for Hub {
    fn from(s: HubStats) -> Self {
        Hub(s)
    }
}

impl Serialize for Hub {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Hub", 3)?;
        out.serialize_field("sent", &self.0.sent)?;
        out.serialize_field("refused", &self.0.refused)?;
        out.serialize_field("receivers", &self.0.receivers)?;
        out.end()
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

#[cfg(test)]
mod tests {
    use super::{Hub, RxStats};

    #[test]
    fn stats_are_written_under_keybus_field_names_in_order() {
        let hub = keybus::conflate::Hub::<u32, u32>::new();
        let rx = hub.receiver();
        let tx = hub.sender();
        tx.send(1, 1).unwrap();
        tx.send(1, 2).unwrap();
        assert_eq!(
            serde_json::to_string(&RxStats::from(rx.stats())).unwrap(),
            r#"{"received":2,"filtered":0,"delivered":0,"folded":0,"annihilated":0,"overflowed":0,"dropped":0,"pending":1,"pending_sends":2,"conserved":true}"#
        );
        assert_eq!(
            serde_json::to_string(&Hub::from(hub.stats())).unwrap(),
            r#"{"sent":2,"refused":0,"receivers":1}"#
        );
    }
}

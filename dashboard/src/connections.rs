//! The live SSE connections: each owns one snapshot receiver of the hub, and
//! is listed here so that `/stats` can read every receiver's `stats()`.

use keybus::conflate::Receiver;
use keybus::{Event, ReceiverStats, TryRecvError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::workload::MetricHub;

/// Every connection now open, by id.
pub struct Connections {
    max: usize,
    next_id: AtomicU64,
    live: Mutex<BTreeMap<u64, Arc<Connection>>>,
    /// Connections opened since start (for /stats).
    opened: AtomicU64,
}

/// What a request asked of its stream.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// One batch at most per this long.
    pub pace: Duration,
    /// Only metrics whose name starts with this (a key filter, applied at send).
    pub prefix: Option<String>,
}

/// One open connection.
pub struct Connection {
    /// Unique for the life of the server.
    pub id: u64,
    /// What the request asked for.
    pub options: StreamOptions,
    /// When it was registered.
    pub opened: Instant,
    /// The receiver, locked by the stream to take a batch and by `/stats` to
    /// read its stats: never by a sender, so the lock never slows the producers.
    rx: Mutex<Receiver<u32, f64>>,
    /// SSE messages written so far.
    pub messages: AtomicU64,
    /// Bytes of SSE data written so far.
    pub bytes: AtomicU64,
}

/// A batch taken from a connection's receiver, with its stats read right after
/// under the same lock: `stats.folded` includes this batch, so a client's sum
/// of `sends` over everything it got equals the `folded` it was last told.
pub struct Batch {
    /// One entry per metric that changed since the last batch.
    pub events: Vec<Event<u32, f64>>,
    /// The receiver's accounting just after the take.
    pub stats: ReceiverStats,
}

/// Refused: the server already serves `--max-connections`.
#[derive(Debug)]
pub struct Full(pub usize);

impl Connections {
    /// An empty list admitting at most `max` connections at once.
    pub fn new(max: usize) -> Self {
        Connections {
            max,
            next_id: AtomicU64::new(1),
            live: Mutex::new(BTreeMap::new()),
            opened: AtomicU64::new(0),
        }
    }

    /// Registers a connection: a snapshot receiver of `hub` (born with the
    /// whole state table pending, then live), filtered by the prefix if any.
    /// Closed and removed when the returned [`Registration`] is dropped.
    pub fn open(
        self: &Arc<Self>,
        hub: &MetricHub,
        names: &Arc<[String]>,
        options: StreamOptions,
    ) -> Result<Registration, Full> {
        let mut live = self.lock();
        if live.len() >= self.max {
            return Err(Full(self.max));
        }
        let mut builder = hub.receiver_builder();
        if let Some(prefix) = &options.prefix {
            // Decided once per metric here, so the filter the producers run
            // is one index, not a string compare.
            let keep: Vec<bool> = names.iter().map(|n| n.starts_with(prefix)).collect();
            builder = builder.key_filter(move |id: &u32| keep.get(*id as usize) == Some(&true));
        }
        let rx = builder.snapshot().build();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Connection {
            id,
            options,
            opened: Instant::now(),
            rx: Mutex::new(rx),
            messages: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        });
        live.insert(id, conn.clone());
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Registration {
            list: self.clone(),
            conn,
        })
    }

    /// The connections open now, in id order.
    pub fn all(&self) -> Vec<Arc<Connection>> {
        self.lock().values().cloned().collect()
    }

    /// Connections opened since the server started.
    pub fn opened_total(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Connection>>> {
        // Nothing panics while holding it, but a poisoned list is still a list.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Connection {
    /// Everything pending, as one cut, and the stats right after it. `None`
    /// once the hub's send side is closed and this receiver drained.
    pub fn take(&self) -> Option<Batch> {
        let mut rx = self.rx();
        let events = match rx.try_recv_all() {
            Ok(events) => events,
            Err(TryRecvError::Empty) => Vec::new(),
            Err(TryRecvError::Closed) => return None,
        };
        Some(Batch {
            events,
            stats: rx.stats(),
        })
    }

    /// The receiver's accounting now.
    pub fn stats(&self) -> ReceiverStats {
        self.rx().stats()
    }

    fn rx(&self) -> MutexGuard<'_, Receiver<u32, f64>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection's place in the list; dropping it (when the SSE stream is
/// dropped, as on a client disconnect) closes the receiver and removes it.
pub struct Registration {
    list: Arc<Connections>,
    conn: Arc<Connection>,
}

impl Registration {
    /// The connection.
    pub fn conn(&self) -> &Arc<Connection> {
        &self.conn
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Close first: a `/stats` reader may still hold an `Arc` of it, and the
        // receiver must leave the hub now (`Hub::stats().receivers` goes down),
        // not when that reader lets go.
        self.conn.rx().close();
        self.list.lock().remove(&self.conn.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keybus::conflate::Hub;

    #[test]
    fn a_connection_is_a_snapshot_receiver_that_leaves_on_drop() {
        let hub: MetricHub = Hub::builder().retain_latest().build();
        let names: Arc<[String]> = (0..4).map(crate::workload::metric_name).collect();
        let tx = hub.sender();
        for id in 0..4 {
            tx.send(id, id as f64).unwrap();
        }
        let list = Arc::new(Connections::new(2));
        let options = StreamOptions {
            pace: Duration::from_millis(100),
            prefix: Some("cpu.".into()),
        };
        let all = list.open(&hub, &names, StreamOptions::default()).unwrap();
        let cpu = list.open(&hub, &names, options.clone()).unwrap();
        assert!(list.open(&hub, &names, options).is_err(), "max 2");
        assert_eq!(hub.stats().receivers, 2);

        // Born with the table: every key (or every cpu key), sends == 0.
        let batch = all.conn().take().unwrap();
        assert_eq!(batch.events.len(), 4);
        assert!(batch.events.iter().all(|e| e.sends == 0));
        let batch = cpu.conn().take().unwrap();
        assert_eq!(batch.events.len(), 1);
        assert_eq!(batch.events[0].key, 0);

        tx.send(0, 9.0).unwrap();
        tx.send(0, 10.0).unwrap();
        let batch = all.conn().take().unwrap();
        assert_eq!(batch.events.len(), 1);
        assert_eq!((batch.events[0].value, batch.events[0].sends), (10.0, 2));
        assert_eq!((batch.stats.received, batch.stats.folded), (2, 2));

        drop(all);
        assert_eq!(hub.stats().receivers, 1);
        assert_eq!(list.all().len(), 1);
        drop(cpu);
        assert_eq!(hub.stats().receivers, 0);
        assert_eq!(list.opened_total(), 2);
    }
}

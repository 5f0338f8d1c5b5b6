//! The mirror task: take dirty keys from the receiver, write them with
//! bounded pipelining, put failures back, back off.
//!
//! Every key lives in exactly one of three places, which is what bounds the
//! memory and keeps the latest value: pending at the hub receiver, `queued`
//! here (taken, not yet written), or `in_flight` (written, ack awaited; a newer
//! value taken meanwhile waits in `deferred` until that ack). A key is taken
//! from the receiver only while `in_flight + queued < max_in_flight`, so
//! under an outage the backlog stays in the receiver, coalescing.

use super::{KvMirror, Shared};
use crate::backoff::Retry;
use crate::codec::{KeyCodec, ValueCodec};
use crate::error::{chain, is_permanent, BridgeError};
use crate::mirror_task::Request;
use async_nats::jetstream::kv::Store;
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use keybus::conflate::{Hub, Receiver};
use keybus::{Event, TryRecvError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::error::Error;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// The mirror's bounds, from its builder.
struct Limits {
    max_in_flight: usize,
    flush_interval: Duration,
}

/// One write: the bytes to put, or a delete.
#[derive(Clone)]
enum Op {
    Put(Bytes),
    Delete,
}

type WriteResult = Result<u64, Box<dyn Error + Send + Sync>>;
type Write = Pin<Box<dyn Future<Output = (String, Op, WriteResult)> + Send>>;

pub(super) struct Engine<K, V, KC, VC> {
    rx: Receiver<K, V>,
    /// `from_table`: where the value to write is read.
    table: Option<Hub<K, V>>,
    store: Arc<Store>,
    keys: KC,
    values: VC,
    limits: Limits,
    shared: Arc<Shared>,
    /// The bucket's `max_value_size`, if it has one.
    max_value: Option<usize>,
    queue: VecDeque<String>,
    queued: HashMap<String, Op>,
    in_flight: HashSet<String>,
    deferred: HashMap<String, Op>,
    writes: FuturesUnordered<Write>,
    retry: Retry,
    paused_until: Option<Instant>,
    rx_closed: bool,
    waiters: Vec<oneshot::Sender<()>>,
}

impl<K, V, KC, VC> Engine<K, V, KC, VC>
where
    K: Hash + Eq + Clone + Send + Sync + Debug + 'static,
    V: Clone + Send + 'static,
    KC: KeyCodec<K>,
    VC: ValueCodec<V>,
{
    /// The task of `mirror`, taking dirty keys from `rx` (registered by
    /// [`KvMirror::spawn`]) and counting into `shared`.
    pub(super) fn new(
        mirror: KvMirror<K, V, KC, VC>,
        rx: Receiver<K, V>,
        shared: Arc<Shared>,
    ) -> Self {
        let store = Arc::new(mirror.store);
        let max_value = usize::try_from(store.stream.cached_info().config.max_message_size)
            .ok()
            .filter(|n: &usize| *n > 0);
        Engine {
            rx,
            table: mirror.from_table.then_some(mirror.hub),
            store,
            keys: mirror.keys,
            values: mirror.values,
            retry: Retry::new(mirror.backoff),
            limits: Limits {
                max_in_flight: mirror.max_in_flight,
                flush_interval: mirror.flush_interval,
            },
            shared,
            max_value,
            queue: VecDeque::new(),
            queued: HashMap::new(),
            in_flight: HashSet::new(),
            deferred: HashMap::new(),
            writes: FuturesUnordered::new(),
            paused_until: None,
            rx_closed: false,
            waiters: Vec::new(),
        }
    }

    pub(super) async fn run(mut self, mut requests: mpsc::Receiver<Request>) {
        let interval = self.limits.flush_interval;
        // With a flush interval, the receiver is drained at most once per
        // interval, so sends in between coalesce there (the cheaper send).
        let mut next_pull = Instant::now();
        loop {
            if Instant::now() >= next_pull && self.pull() && !interval.is_zero() {
                next_pull = Instant::now() + interval;
            }
            self.dispatch();
            self.publish_gauges();
            if self.idle() {
                for w in self.waiters.drain(..) {
                    let _ = w.send(());
                }
                if self.rx_closed {
                    return;
                }
            }
            let room = self.room();
            let paused_until = self.paused_until;
            let pull_wait = Instant::now() < next_pull;
            tokio::select! {
                biased;
                request = requests.recv() => match request {
                    None => return, // the handle is gone
                    Some(Request::Settle(w)) => self.waiters.push(w),
                },
                Some(done) = self.writes.next(), if !self.writes.is_empty() => self.complete(done),
                _ = sleep_until(paused_until), if paused_until.is_some() => self.paused_until = None,
                _ = tokio::time::sleep_until(next_pull), if pull_wait => {}
                event = self.rx.recv_async(), if room && !self.rx_closed && !pull_wait => match event {
                    Ok(event) => {
                        self.stage(event);
                        // Woken from idle: let the sends that follow coalesce
                        // for one interval before draining the rest.
                        next_pull = Instant::now() + interval;
                    }
                    Err(_) => self.rx_closed = true,
                },
            }
        }
    }

    fn room(&self) -> bool {
        self.in_flight.len() + self.queue.len() < self.limits.max_in_flight
    }

    fn idle(&self) -> bool {
        self.in_flight.is_empty() && self.queue.is_empty() && self.rx.is_empty()
    }

    /// Takes dirty keys while there is room; the rest keep coalescing at the
    /// receiver. Whether it took any.
    fn pull(&mut self) -> bool {
        let mut took = false;
        while !self.rx_closed && self.room() {
            match self.rx.try_recv() {
                Ok(event) => {
                    took = true;
                    self.stage(event);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => self.rx_closed = true,
            }
        }
        took
    }

    /// Encodes one taken event and queues its write (or defers it behind the
    /// key's write in flight).
    fn stage(&mut self, event: Event<K, V>) {
        self.shared.taken.add(1);
        self.shared.sends.add(event.sends);
        let key = match self.keys.encode_key(&event.key) {
            Ok(k) => match crate::validate_key(&k) {
                Ok(()) => k,
                Err(error) => return self.key_error(&event.key, error),
            },
            Err(error) => return self.key_error(&event.key, error),
        };
        let value = match &self.table {
            // The table's value, not the event's: the table merges with the
            // hub's merge, and `None` means the merge annihilated the key.
            Some(hub) => hub.latest(&event.key),
            None => Some(event.value),
        };
        let op = match value {
            None => Op::Delete,
            Some(v) => match self.values.encode_value(&v) {
                Ok(bytes) => match self.max_value {
                    Some(max) if bytes.len() > max => {
                        self.shared.rejected.add(1);
                        self.shared.last_error.set(BridgeError::Rejected {
                            key,
                            reason: format!(
                                "a {}-byte value is over the bucket's max_value_size of {max}",
                                bytes.len()
                            ),
                        });
                        return;
                    }
                    _ => Op::Put(bytes),
                },
                Err(error) => {
                    self.shared.value_errors.add(1);
                    self.shared
                        .last_error
                        .set(BridgeError::Value { key, error });
                    return;
                }
            },
        };
        if self.in_flight.contains(&key) {
            self.deferred.insert(key, op);
        } else {
            self.enqueue(key, op);
        }
    }

    fn key_error(&self, key: &K, error: crate::CodecError) {
        self.shared.key_errors.add(1);
        self.shared.last_error.set(BridgeError::Key {
            key: format!("{key:?}"),
            error,
        });
    }

    fn enqueue(&mut self, key: String, op: Op) {
        if self.queued.insert(key.clone(), op).is_none() {
            self.queue.push_back(key);
        }
    }

    /// Starts queued writes up to the in-flight bound, unless backing off.
    fn dispatch(&mut self) {
        if self.paused_until.is_some() {
            return;
        }
        while self.in_flight.len() < self.limits.max_in_flight {
            let Some(key) = self.queue.pop_front() else {
                break;
            };
            let op = self.queued.remove(&key).expect("a queued key has its op");
            self.in_flight.insert(key.clone());
            let store = self.store.clone();
            self.writes.push(Box::pin(async move {
                let result: WriteResult = match &op {
                    Op::Put(bytes) => store.put(&key, bytes.clone()).await.map_err(Into::into),
                    Op::Delete => store.delete(&key).await.map(|()| 0).map_err(Into::into),
                };
                (key, op, result)
            }));
        }
    }

    fn complete(&mut self, (key, op, result): (String, Op, WriteResult)) {
        self.in_flight.remove(&key);
        let newer = self.deferred.remove(&key);
        match result {
            Ok(revision) => {
                self.retry.succeed();
                match op {
                    Op::Put(_) => {
                        self.shared.puts.add(1);
                        if revision > self.shared.last_revision.get() {
                            self.shared.last_revision.set(revision);
                        }
                    }
                    Op::Delete => self.shared.deletes.add(1),
                }
                if let Some(newer) = newer {
                    self.enqueue(key, newer);
                }
            }
            Err(err) if is_permanent(&*err) => {
                self.shared.rejected.add(1);
                self.shared.last_error.set(BridgeError::Rejected {
                    key: key.clone(),
                    reason: chain(&*err),
                });
                if let Some(newer) = newer {
                    self.enqueue(key, newer);
                }
            }
            Err(err) => {
                self.shared.retries.add(1);
                self.shared.last_error.set(BridgeError::Transient {
                    reason: format!("writing {key}: {}", chain(&*err)),
                });
                // The newest value goes out on the retry; order is kept
                // because no other write of this key is in flight.
                self.enqueue(key, newer.unwrap_or(op));
                // One outage fails every write in flight: escalate once per
                // pause, not once per write.
                if self.paused_until.is_none() {
                    self.paused_until = Some(Instant::now() + self.retry.fail());
                }
            }
        }
    }

    fn publish_gauges(&self) {
        self.shared.in_flight.set(self.in_flight.len() as u64);
        self.shared
            .held
            .set((self.in_flight.len() + self.queue.len()) as u64);
        self.shared.receiver_pending.set(self.rx.len() as u64);
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

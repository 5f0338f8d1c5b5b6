//! The feed task: open a watch, send its entries, reopen after a failure from
//! the revision after the last one sent.

use super::{Change, Remote, Shared, Start};
use crate::backoff::{Backoff, Retry};
use crate::codec::{KeyCodec, ValueCodec};
use crate::error::{chain, BridgeError};
use async_nats::jetstream::kv::{Entry, Operation, Store, Watch};
use futures_util::StreamExt;
use keybus::conflate::Sender;
use std::hash::Hash;
use std::sync::Arc;
use tokio::sync::watch as signal;

pub(super) struct Feed<K, V, KC, VC> {
    pub(super) store: Store,
    pub(super) tx: Sender<K, Remote<V>>,
    pub(super) keys: KC,
    pub(super) values: VC,
    pub(super) start: Start,
    pub(super) filter: String,
    pub(super) backoff: Backoff,
    pub(super) shared: Arc<Shared>,
    pub(super) caught_up: signal::Sender<bool>,
}

/// Whether the hub still takes sends.
enum Sent {
    Open,
    HubClosed,
}

impl<K, V, KC, VC> Feed<K, V, KC, VC>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
    KC: KeyCodec<K>,
    VC: ValueCodec<V>,
{
    pub(super) async fn run(self) {
        let mut retry = Retry::new(self.backoff);
        // The highest revision sent (or, before the first entry, the one
        // before the start): everything at or below it is stale.
        let mut last = match self.start {
            Start::Revision(r) => r.saturating_sub(1),
            _ => 0,
        };
        let mut opened = false;
        loop {
            if self.tx.is_closed() {
                return;
            }
            match self.open(opened, &mut last).await {
                Ok(mut watch) => {
                    if opened {
                        self.shared.resumes.add(1);
                    }
                    opened = true;
                    retry.succeed();
                    loop {
                        match watch.next().await {
                            Some(Ok(entry)) => {
                                if let Sent::HubClosed = self.deliver(entry, &mut last) {
                                    return;
                                }
                            }
                            Some(Err(e)) => {
                                self.transient(format!("watch failed: {}", chain(&e)));
                                break;
                            }
                            None => {
                                self.transient("watch ended".to_owned());
                                break;
                            }
                        }
                    }
                }
                Err(reason) => self.transient(reason),
            }
            tokio::time::sleep(retry.fail()).await;
        }
    }

    fn transient(&self, reason: String) {
        self.shared
            .last_error
            .set(BridgeError::Transient { reason });
    }

    /// Opens the watch: at the configured start the first time (and again
    /// while nothing was received from a snapshot start), after `last` from
    /// then on.
    async fn open(&self, opened: bool, last: &mut u64) -> Result<Watch, String> {
        let filter = self.filter.as_str();
        let watch = match self.start {
            Start::LastPerKey if *last == 0 => self.store.watch_with_history(filter).await,
            Start::New if !opened => {
                // From the revision after the bucket's last one, rather than
                // the server's "new" policy, so a reopen knows where to resume.
                let info = self
                    .store
                    .stream
                    .get_info()
                    .await
                    .map_err(|e| format!("reading the bucket's state: {}", chain(&e)))?;
                *last = info.state.last_sequence;
                self.store.watch_from_revision(filter, *last + 1).await
            }
            _ => self.store.watch_from_revision(filter, *last + 1).await,
        }
        .map_err(|e| format!("opening the watch: {}", chain(&e)))?;
        if !*self.caught_up.borrow() {
            // Nothing to catch up on: the bucket holds nothing past the start.
            if let Ok(info) = self.store.stream.get_info().await {
                if info.state.messages == 0 || info.state.last_sequence <= *last {
                    self.caught_up.send_replace(true);
                }
            }
        }
        Ok(watch)
    }

    fn deliver(&self, entry: Entry, last: &mut u64) -> Sent {
        // Caught up once this entry is in the hub (or skipped): nothing was
        // pending behind it when the server sent it.
        let caught_up = entry.delta == 0;
        let sent = self.send(entry, last);
        if caught_up {
            self.caught_up.send_replace(true);
        }
        sent
    }

    fn send(&self, entry: Entry, last: &mut u64) -> Sent {
        let shared = &*self.shared;
        shared.entries.add(1);
        if entry.revision <= *last {
            shared.stale.add(1);
            return Sent::Open;
        }
        *last = entry.revision;
        shared.last_revision.set(entry.revision);
        let key = match self.keys.decode_key(&entry.key) {
            Ok(k) => k,
            Err(error) => {
                shared.key_errors.add(1);
                shared.last_error.set(BridgeError::Key {
                    key: entry.key,
                    error,
                });
                return Sent::Open;
            }
        };
        let change = match entry.operation {
            Operation::Put => match self.values.decode_value(&entry.value) {
                Ok(v) => Change::Put(v),
                Err(error) => {
                    shared.value_errors.add(1);
                    shared.last_error.set(BridgeError::Value {
                        key: format!("{} (revision {})", entry.key, entry.revision),
                        error,
                    });
                    return Sent::Open;
                }
            },
            Operation::Delete => Change::Delete,
            Operation::Purge => Change::Purge,
        };
        let tombstone = !matches!(change, Change::Put(_));
        let remote = Remote {
            revision: entry.revision,
            change,
        };
        if self.tx.send(key, remote).is_err() {
            return Sent::HubClosed;
        }
        if tombstone {
            shared.tombstones.add(1);
        } else {
            shared.puts.add(1);
        }
        Sent::Open
    }
}

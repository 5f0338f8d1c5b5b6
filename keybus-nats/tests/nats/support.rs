//! Clients tuned for tests (quick reconnects, short timeouts) and bounded waits.

use async_nats::jetstream::{self, kv::Store, Context};
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

/// A client that reconnects every 100 ms, and a JetStream context whose
/// requests and acks time out after 1 s, so faults surface quickly.
pub async fn connect(url: &str) -> Context {
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .reconnect_delay_callback(|_| Duration::from_millis(100))
        .connection_timeout(Duration::from_secs(1))
        .connect(url)
        .await
        .expect("connect to the test server");
    jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(1))
        .build(client)
}

/// Polls `check` every 20 ms until it returns `Some`, for at most `limit`
/// (a hang guard, not a speed assertion); panics naming `what` otherwise.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `fut` with a hang guard.
pub async fn within<T>(what: &str, limit: Duration, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("gave up after {limit:?} waiting for {what}"))
}

/// Every live key of the bucket and its value (deleted keys are absent).
pub async fn contents(store: &Store) -> HashMap<String, Bytes> {
    let mut out = HashMap::new();
    let mut watch = store.watch_with_history(">").await.expect("watch");
    // An empty bucket sends nothing: find out first.
    let info = store.stream.get_info().await.expect("bucket info");
    if info.state.messages == 0 {
        return out;
    }
    while let Some(entry) = watch.next().await {
        let entry = entry.expect("watch entry");
        match entry.operation {
            async_nats::jetstream::kv::Operation::Put => {
                out.insert(entry.key.clone(), entry.value.clone());
            }
            _ => {
                out.remove(&entry.key);
            }
        }
        if entry.delta == 0 {
            break;
        }
    }
    out
}

/// [`eventually`] for a check that needs no await (and may borrow mutably).
pub async fn until<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

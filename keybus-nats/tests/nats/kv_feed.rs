//! KV → conflate against a real server: start points, tombstones, rising
//! revisions, filters, bad input.

use crate::server::Server;
use crate::support::{connect, until, within};
use keybus::conflate::{Hub, Receiver};
use keybus_nats::codec::{DisplayValues, StrKeys};
use keybus_nats::{ensure_bucket, BridgeError, Change, KvFeed, Remote, Start};
use std::collections::HashMap;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Drains `rx` into `seen` (key → latest remote), asserting each key's
/// revisions only rise, and returns how many events it took.
pub fn drain(
    rx: &mut Receiver<String, Remote<u64>>,
    seen: &mut HashMap<String, Remote<u64>>,
) -> usize {
    let events = rx.try_recv_all().unwrap_or_default();
    for e in &events {
        if let Some(before) = seen.get(&e.key) {
            assert!(
                e.value.revision > before.revision,
                "{}: revision {} after {}",
                e.key,
                e.value.revision,
                before.revision
            );
        }
        seen.insert(e.key.clone(), e.value.clone());
    }
    events.len()
}

async fn put(store: &async_nats::jetstream::kv::Store, k: &str, v: &str) -> u64 {
    store.put(k, v.to_owned().into()).await.expect("put")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_snapshot_then_live_updates_with_tombstones() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "feed").await.unwrap();
    for i in 0..100 {
        put(&store, &format!("k.{i}"), &i.to_string()).await;
    }
    put(&store, "k.0", "1000").await; // k.0's last value
    store.delete("k.1").await.unwrap();
    store.purge("k.2").await.unwrap();

    let hub: Hub<String, Remote<u64>> = Hub::new();
    let mut rx = hub.receiver();
    let feed = KvFeed::new(store.clone(), hub.sender(), StrKeys, DisplayValues).spawn();
    within("the snapshot", LIMIT, feed.caught_up()).await;
    let mut seen = HashMap::new();
    // Caught up means sent into the hub: all 100 keys are pending now.
    assert_eq!(drain(&mut rx, &mut seen), 100);
    assert_eq!(seen["k.0"].change, Change::Put(1000));
    assert_eq!(seen["k.1"].change, Change::Delete);
    assert_eq!(seen["k.2"].change, Change::Purge);
    assert_eq!(seen["k.99"].change, Change::Put(99));

    // Live: a put, a delete, a put again, each with its revision.
    let r1 = put(&store, "k.5", "55").await;
    store.delete("k.6").await.unwrap();
    // With history 1 a put right after the delete replaces the marker on the
    // server, and an entry not yet delivered is then never delivered (the
    // server coalesces): wait for the tombstone before the next put.
    until("the tombstone", LIMIT, || {
        drain(&mut rx, &mut seen);
        (seen["k.6"].change == Change::Delete).then_some(())
    })
    .await;
    let r3 = put(&store, "k.6", "66").await;
    until("the live updates", LIMIT, || {
        drain(&mut rx, &mut seen);
        (seen["k.6"].revision == r3).then_some(())
    })
    .await;
    assert_eq!(
        seen["k.5"],
        Remote {
            revision: r1,
            change: Change::Put(55)
        }
    );
    assert_eq!(seen["k.6"].change, Change::Put(66));
    let s = feed.stats();
    assert_eq!((s.tombstones, s.key_errors, s.value_errors), (3, 0, 0));
    assert_eq!(s.last_revision, r3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_new_and_start_at_a_revision() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "starts").await.unwrap();
    put(&store, "a", "1").await;
    let rb = put(&store, "b", "2").await;
    put(&store, "c", "3").await;

    let hub: Hub<String, Remote<u64>> = Hub::new();
    let mut rx = hub.receiver();
    let _new = KvFeed::new(store.clone(), hub.sender(), StrKeys, DisplayValues)
        .start(Start::New)
        .spawn();
    let hub2: Hub<String, Remote<u64>> = Hub::new();
    let mut rx2 = hub2.receiver();
    let from_b = KvFeed::new(store.clone(), hub2.sender(), StrKeys, DisplayValues)
        .start(Start::Revision(rb))
        .spawn();
    within("catching up", LIMIT, from_b.caught_up()).await;
    let mut seen2 = HashMap::new();
    drain(&mut rx2, &mut seen2);
    let mut keys: Vec<_> = seen2.keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["b", "c"]);

    // Give the New feed time to open its watch before the next put: it must
    // see that put and nothing before it.
    until("the new feed to be open", LIMIT, || {
        _new.stats().caught_up.then_some(())
    })
    .await;
    put(&store, "d", "4").await;
    let mut seen = HashMap::new();
    until("d", LIMIT, || {
        drain(&mut rx, &mut seen);
        seen.contains_key("d").then_some(())
    })
    .await;
    assert_eq!(seen.len(), 1, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_and_undecodable_entries() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "filtered").await.unwrap();
    put(&store, "disk.sda", "1").await;
    put(&store, "disk.sdb", "not a number").await;
    put(&store, "cpu.0", "3").await;
    let last = put(&store, "disk.sdc", "4").await;

    let hub: Hub<String, Remote<u64>> = Hub::new();
    let mut rx = hub.receiver();
    let feed = KvFeed::new(store.clone(), hub.sender(), StrKeys, DisplayValues)
        .filter("disk.>")
        .unwrap()
        .spawn();
    let s = within("the snapshot", LIMIT, feed.caught_up()).await;
    let mut seen = HashMap::new();
    drain(&mut rx, &mut seen);
    let mut keys: Vec<_> = seen.keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["disk.sda", "disk.sdc"]);
    assert_eq!(s.value_errors, 1);
    assert!(
        matches!(&s.last_error, Some(BridgeError::Value { key, .. }) if key.starts_with("disk.sdb")),
        "{:?}",
        s.last_error
    );
    assert_eq!(s.last_revision, last);
    assert!(KvFeed::new(store, hub.sender(), StrKeys, DisplayValues)
        .filter("disk.>.x")
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kv_key_that_does_not_decode_is_counted_and_skipped() {
    use keybus_nats::codec::DisplayKeys;
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "numbered").await.unwrap();
    put(&store, "1", "10").await;
    put(&store, "disk.sda", "20").await; // not a u64
    put(&store, "3", "30").await;

    let hub: Hub<u64, Remote<u64>> = Hub::new();
    let mut rx = hub.receiver();
    let feed = KvFeed::new(store, hub.sender(), DisplayKeys, DisplayValues).spawn();
    let s = within("the snapshot", LIMIT, feed.caught_up()).await;
    let got: Vec<(u64, Option<u64>)> = rx
        .try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.value.into_value()))
        .collect();
    assert_eq!(got, [(1, Some(10)), (3, Some(30))]);
    assert_eq!((s.key_errors, s.puts), (1, 2));
    let msg = s.last_error.unwrap().to_string();
    assert!(msg.starts_with("key disk.sda: cannot decode: "), "{msg}");
}

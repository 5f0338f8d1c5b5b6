//! Conflate → KV against a real server: convergence, the state table, bad input.

use crate::server::Server;
use crate::support::{connect, contents, within};
use keybus::conflate::Hub;
use keybus_nats::codec::{CodecError, DisplayValues, StrKeys, Utf8, ValueCodec};
use keybus_nats::{ensure_bucket, BridgeError, KvMirror};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::collections::HashMap;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(60);

/// `n` sends over `keys` Zipf-distributed keys (`disk.<i>`), recording the
/// latest value per key.
pub fn zipf_sends(
    tx: &keybus::conflate::Sender<String, u64>,
    keys: u64,
    n: u64,
    seed: u64,
    latest: &mut HashMap<String, u64>,
) {
    let zipf = Zipf::new(keys as f64, 1.1).expect("zipf");
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..n {
        let k = format!("disk.{}", zipf.sample(&mut rng) as u64);
        let v: u64 = rng.random();
        tx.send(k.clone(), v).expect("hub open");
        latest.insert(k, v);
    }
}

pub fn expected_bytes(latest: &HashMap<String, u64>) -> HashMap<String, bytes::Bytes> {
    latest
        .iter()
        .map(|(k, v)| (k.clone(), bytes::Bytes::from(v.to_string())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zipf_sends_converge_to_the_latest_value_per_key() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "zipf").await.unwrap();
    let hub: Hub<String, u64> = Hub::new();
    let mirror = KvMirror::new(&hub, store.clone(), StrKeys, DisplayValues)
        .max_in_flight(64)
        .spawn();
    let tx = hub.sender();
    let mut latest = HashMap::new();
    for round in 0..4 {
        zipf_sends(&tx, 2_000, 10_000, round, &mut latest);
        tokio::task::yield_now().await;
    }
    let stats = within("the mirror to settle", SETTLE, mirror.settled()).await;
    assert_eq!(contents(&store).await, expected_bytes(&latest));
    // Every send reached the mirror's receiver and was folded into a write.
    assert_eq!(stats.sends, 40_000);
    // One put per key at least; at most one per event taken (an event for a
    // key whose put is in flight may be replaced by a newer one meanwhile).
    assert!(
        stats.puts >= latest.len() as u64 && stats.puts <= stats.taken,
        "{stats:?}"
    );
    assert!(stats.taken < 40_000, "coalesced: {stats:?}");
    assert_eq!(
        (stats.rejected, stats.key_errors, stats.in_flight),
        (0, 0, 0)
    );
    assert!(stats.last_revision > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_mirror_starts_with_the_table_and_deletes_annihilated_keys() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "table").await.unwrap();
    // Sums of deltas; a zero sum annihilates the key.
    let hub: Hub<String, i64> = Hub::builder()
        .merge(|a: i64, b: i64| Some(a + b).filter(|s| *s != 0))
        .retain_latest()
        .build();
    let tx = hub.sender();
    for i in 0..50 {
        tx.send(format!("pre.{i}"), 10).unwrap(); // before the mirror: the table has them
    }
    tx.send("pre.0".into(), 5).unwrap();
    let mirror = KvMirror::new(&hub, store.clone(), StrKeys, DisplayValues)
        .from_table()
        .spawn();
    within("the snapshot", SETTLE, mirror.settled()).await;
    let now = contents(&store).await;
    assert_eq!(now.len(), 50);
    assert_eq!(now["pre.0"], "15"); // the table's total, not the last delta

    for i in 0..50 {
        tx.send(format!("pre.{i}"), if i % 2 == 0 { -10 } else { 1 })
            .unwrap();
    }
    tx.send("live".into(), 3).unwrap();
    tx.send("gone".into(), 3).unwrap();
    tx.send("gone".into(), -3).unwrap(); // enters and leaves the table
    let stats = within("the live sends", SETTLE, mirror.settled()).await;

    let expected: HashMap<String, bytes::Bytes> = hub
        .snapshot()
        .into_iter()
        .map(|(k, v)| (k, bytes::Bytes::from(v.to_string())))
        .collect();
    let now = contents(&store).await;
    assert_eq!(now, expected);
    assert!(!now.contains_key("pre.2") && !now.contains_key("gone"));
    assert_eq!(now["pre.0"], "5"); // 15 - 10
    assert_eq!(now["pre.1"], "11");
    // 24 even keys besides pre.0 went to zero, and "gone" never had a put.
    assert_eq!(stats.deletes, 25);
    hub.close_now();
}

/// Refuses one value, to exercise the encode-error path.
struct PickyUtf8;

impl ValueCodec<String> for PickyUtf8 {
    fn encode_value(&self, v: &String) -> Result<bytes::Bytes, CodecError> {
        if v == "unencodable" {
            return Err(CodecError::Encode(
                "the test codec refuses this value".into(),
            ));
        }
        Utf8.encode_value(v)
    }
    fn decode_value(&self, b: &[u8]) -> Result<String, CodecError> {
        Utf8.decode_value(b)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_values_and_oversized_payloads_are_counted_and_skipped() {
    let server = Server::start_with("max_payload: 4096");
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "bad").await.unwrap();
    let hub: Hub<String, String> = Hub::new();
    let mirror = KvMirror::new(&hub, store.clone(), StrKeys, PickyUtf8).spawn();
    let tx = hub.sender();

    tx.send("ok.1".into(), "one".into()).unwrap();
    tx.send("bad key".into(), "x".into()).unwrap();
    let s = within("settle", SETTLE, mirror.settled()).await;
    assert_eq!(s.key_errors, 1);
    assert!(
        matches!(&s.last_error, Some(BridgeError::Key { key, error: CodecError::InvalidKey { .. } }) if key == "\"bad key\""),
        "{:?}",
        s.last_error
    );

    tx.send("ok.2".into(), "unencodable".into()).unwrap();
    let s = within("settle", SETTLE, mirror.settled()).await;
    assert_eq!(s.value_errors, 1);
    assert!(matches!(&s.last_error, Some(BridgeError::Value { key, .. }) if key == "ok.2"));

    tx.send("ok.3".into(), "x".repeat(10_000)).unwrap(); // over max_payload
    let s = within("settle", SETTLE, mirror.settled()).await;
    assert_eq!(s.rejected, 1, "{s:?}");
    let msg = s.last_error.as_ref().unwrap().to_string();
    assert!(msg.starts_with("server refused ok.3: "), "{msg}");

    // ...and the mirror goes on.
    tx.send("ok.2".into(), "two".into()).unwrap();
    tx.send("ok.3".into(), "three".into()).unwrap();
    let s = within("settle", SETTLE, mirror.settled()).await;
    let now = contents(&store).await;
    let mut keys: Vec<_> = now.keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["ok.1", "ok.2", "ok.3"]);
    assert_eq!(now["ok.3"], "three");
    assert_eq!(s.puts, 3);
    assert_eq!((s.key_errors, s.value_errors, s.rejected), (1, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_ends_when_the_hub_closes() {
    let server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "ends").await.unwrap();
    let hub: Hub<String, u64> = Hub::new();
    let mirror = KvMirror::new(&hub, store.clone(), StrKeys, DisplayValues).spawn();
    let tx = hub.sender();
    let mut rng = SmallRng::seed_from_u64(7);
    for i in 0..100u64 {
        tx.send(format!("k.{}", i % 10), rng.random_range(0..1000))
            .unwrap();
    }
    tx.send("k.0".into(), 4242).unwrap();
    drop(tx);
    drop(hub); // the send side closes: the receiver drains, then closes
    crate::support::eventually("the mirror to end", SETTLE, || async {
        mirror.is_finished().then_some(())
    })
    .await;
    assert_eq!(contents(&store).await["k.0"], "4242");
    assert_eq!(mirror.stats().sends, 101);
}

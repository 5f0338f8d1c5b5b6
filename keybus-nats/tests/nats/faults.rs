//! Kills, pauses and restarts of the server under each bridge. Every loop is
//! bounded in count, every wait in time.

use crate::kv_feed::drain;
use crate::kv_mirror::{expected_bytes, zipf_sends};
use crate::server::Server;
use crate::stream::{read_to, value_of};
use crate::support::{connect, contents, eventually, until, within};
use keybus::broadcast::Buffer;
use keybus::conflate::Hub;
use keybus_nats::codec::{DisplayValues, StrKeys};
use keybus_nats::{
    ensure_bucket, KvFeed, KvMirror, MirrorStats, Remote, RemoteBuffer, StreamMirror,
};
use std::collections::HashMap;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);
const KEYS: u64 = 1_000;

/// The mirror's own bounds, which must hold at any instant.
fn bounded(s: &MirrorStats, max_in_flight: u64) {
    assert!(
        s.held <= KEYS.min(max_in_flight),
        "held {} keys: {s:?}",
        s.held
    );
    assert!(
        s.receiver_pending <= KEYS,
        "receiver holds {}: {s:?}",
        s.receiver_pending
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_mirror_converges_across_a_kill_and_restart() {
    let mut server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "faults").await.unwrap();
    let hub: Hub<String, u64> = Hub::new();
    let mirror = KvMirror::new(&hub, store.clone(), StrKeys, DisplayValues)
        .max_in_flight(32)
        .spawn();
    let tx = hub.sender();
    let mut latest = HashMap::new();

    zipf_sends(&tx, KEYS, 10_000, 1, &mut latest);
    server.kill();
    // The producer goes on while the server is gone: every send returns at
    // once (`zipf_sends` unwraps each), and the mirror's backlog stays
    // bounded by the key set however many sends pile up.
    for round in 0..5 {
        zipf_sends(&tx, KEYS, 10_000, 10 + round, &mut latest);
        bounded(&mirror.stats(), 32);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Writes in flight at the kill (or taken since) time out and are retried.
    let s = eventually("a retry", LIMIT, || async {
        let s = mirror.stats();
        (s.retries > 0).then_some(s)
    })
    .await;
    bounded(&s, 32);
    server.restart();
    zipf_sends(&tx, KEYS, 10_000, 99, &mut latest);
    let s = within("convergence after the restart", LIMIT, mirror.settled()).await;
    assert_eq!(contents(&store).await, expected_bytes(&latest));
    assert_eq!(s.sends, 70_000, "every send reached a write");
    assert_eq!((s.rejected, s.in_flight, s.held), (0, 0, 0));
    assert!(s.retries > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_mirror_converges_across_a_pause() {
    let mut server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "paused").await.unwrap();
    let hub: Hub<String, u64> = Hub::new();
    let mirror = KvMirror::new(&hub, store.clone(), StrKeys, DisplayValues)
        .flush_interval(Duration::from_millis(5))
        .spawn();
    let tx = hub.sender();
    let mut latest = HashMap::new();
    zipf_sends(&tx, KEYS, 5_000, 2, &mut latest);
    within("settling", LIMIT, mirror.settled()).await;

    server.pause(); // sockets stay open, nothing answers: acks time out
    zipf_sends(&tx, KEYS, 5_000, 3, &mut latest);
    let s = eventually("a timed-out write", LIMIT, || async {
        let s = mirror.stats();
        (s.retries > 0).then_some(s)
    })
    .await;
    bounded(&s, 256);
    zipf_sends(&tx, KEYS, 5_000, 4, &mut latest);
    server.resume();
    let s = within("convergence after the pause", LIMIT, mirror.settled()).await;
    assert_eq!(contents(&store).await, expected_bytes(&latest));
    assert_eq!(s.sends, 15_000);
    assert!(s.retries > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_feed_resumes_after_a_restart_without_going_backwards() {
    let mut server = Server::start();
    let js = connect(&server.url()).await;
    let store = ensure_bucket(&js, "feedfault").await.unwrap();
    let hub: Hub<String, Remote<u64>> = Hub::new();
    let mut rx = hub.receiver();
    let feed = KvFeed::new(store.clone(), hub.sender(), StrKeys, DisplayValues).spawn();
    let mut written = HashMap::new();
    for i in 0..200u64 {
        let k = format!("k.{}", i % 50);
        store.put(&k, i.to_string().into()).await.unwrap();
        written.insert(k, i);
    }
    let mut seen = HashMap::new();
    until("the first 200 puts", LIMIT, || {
        drain(&mut rx, &mut seen);
        (seen.len() == 50 && seen["k.49"].value() == Some(&199)).then_some(())
    })
    .await;

    server.kill();
    server.restart();
    // Writes after the restart (the writer's client reconnects by itself).
    for i in 200..400u64 {
        let k = format!("k.{}", i % 60);
        within("a put after the restart", LIMIT, async {
            loop {
                match store.put(&k, i.to_string().into()).await {
                    Ok(_) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        })
        .await;
        written.insert(k, i);
    }
    until("every key's latest value", LIMIT, || {
        drain(&mut rx, &mut seen); // asserts revisions only rise per key
        (seen.len() == written.len() && written.iter().all(|(k, v)| seen[k].value() == Some(v)))
            .then_some(())
    })
    .await;
    let s = feed.stats();
    assert_eq!((s.key_errors, s.value_errors), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_ring_is_exactly_one_gap_per_reader() {
    let mut server = Server::start();
    let js = connect(&server.url()).await;
    let buf: Buffer<u64> = Buffer::new(16);
    let mirror = StreamMirror::new(&buf, js.clone(), "OUTAGE", DisplayValues).spawn();
    for r in 1..=10 {
        buf.append(value_of(r)).unwrap();
    }
    within("settling", LIMIT, mirror.settled()).await;
    let remote = RemoteBuffer::open(&js, "OUTAGE", DisplayValues)
        .await
        .unwrap();
    let mut a = remote.reader_at(remote.cursor_at(0));
    let mut b = remote.reader_at(remote.cursor_at(0));
    assert_eq!(read_to(&mut a, 10).await, []);
    assert_eq!(read_to(&mut b, 4).await, []);

    server.kill();
    for r in 11..=60 {
        buf.append(value_of(r)).unwrap(); // the ring keeps 45..=60
    }
    server.restart();
    let s = within("settling after the restart", LIMIT, mirror.settled()).await;
    // The mirror may have queued a few of 11.. before the ring overran them
    // (the client buffers while it reconnects); whatever it had not, it lost
    // to one gap, purged forward to the ring's oldest, 45.
    assert_eq!((s.cursor, s.gaps), (60, 1), "{s:?}");
    let before_gap = s.published - 16; // then 45..=60
    assert_eq!(s.skipped, 44 - before_gap, "{s:?}");
    for (reader, from) in [(&mut a, 10), (&mut b, 4)] {
        let gaps = read_to(reader, 60).await;
        assert_eq!(gaps.len(), 1, "exactly one gap: {gaps:?}");
        let (after, oldest) = gaps[0];
        assert_eq!(oldest, 45);
        // `read_to` checked that the gap names the cursor. The purge forward
        // also removed what the mirror got in before the gap (the stream, like
        // the ring, now starts at 45), so that cursor is at most 10: where
        // the reader was, or as far as the page it had fetched before the
        // outage (b fetched 5..=10 in one page).
        assert!((from..=10).contains(&after), "gap after {after}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_mirror_loses_nothing_across_a_short_kill_and_a_pause() {
    let mut server = Server::start();
    let js = connect(&server.url()).await;
    let buf: Buffer<u64> = Buffer::new(512);
    let mirror = StreamMirror::new(&buf, js.clone(), "SHORT", DisplayValues).spawn();
    for r in 1..=100 {
        buf.append(value_of(r)).unwrap();
    }
    within("settling", LIMIT, mirror.settled()).await;
    server.kill();
    for r in 101..=150 {
        buf.append(value_of(r)).unwrap();
    }
    eventually("a failed publish", LIMIT, || async {
        (mirror.stats().retries > 0).then_some(())
    })
    .await;
    server.restart();
    within("settling after the restart", LIMIT, mirror.settled()).await;
    server.pause();
    for r in 151..=200 {
        buf.append(value_of(r)).unwrap();
    }
    eventually("a timed-out publish", LIMIT, || async {
        (mirror.stats().retries > 1).then_some(())
    })
    .await;
    server.resume();
    let s = within("settling after the pause", LIMIT, mirror.settled()).await;
    assert_eq!((s.cursor, s.gaps), (200, 0), "{s:?}");
    // Stored exactly once each: 200 messages, sequence = revision.
    let info = js
        .get_stream("SHORT")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    assert_eq!((info.state.messages, info.state.last_sequence), (200, 200));
    let remote = RemoteBuffer::open(&js, "SHORT", DisplayValues)
        .await
        .unwrap();
    let mut reader = remote.reader_at(remote.cursor_at(0));
    assert_eq!(read_to(&mut reader, 200).await, []);
}

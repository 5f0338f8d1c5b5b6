//! 200 concurrent SSE clients on loopback, a quarter of them reading slowly
//! through a small receive buffer: every client ends with each key's latest
//! value and an exact account of what it got; the server's memory and the
//! producer's send rate are measured and printed (reported, never asserted on
//! as speed).

mod support;

use futures_util::future::join_all;
use std::time::Duration;
use support::sse::{read_until_drained, snapshot_map, Client, Link, Tally};
use support::{block_on, Server};

const KEYS: u64 = 200;
const CLIENTS: usize = 200;
const SLOW_EVERY: usize = 4; // every 4th client is slow
/// A slow client's link: 2 KiB per 100 ms (20 KB/s), while a fast client
/// takes a batch of about 7 KB every 100 ms.
const SLOW: Link = Link::Slow {
    rcvbuf: 4096,
    read: 2048,
    every: Duration::from_millis(100),
};
/// A generous ceiling for the server's resident memory with 200 clients: it
/// catches a server that queues per client; the measured figure is printed.
const RSS_CEILING: u64 = 256 << 20;

#[test]
fn two_hundred_clients_some_slow_end_exact_and_bounded() {
    block_on(async {
        let server = Server::start(&["--keys", &KEYS.to_string(), "--allow-stop"]);
        server
            .wait_for("the workload to seed every key", |s| {
                s["hub"]["sent"].as_u64() >= Some(KEYS)
            })
            .await;

        // The producer alone.
        let rss_idle = server.rss_bytes();
        let (rate_0, _) = server.send_rate(Duration::from_secs(2)).await;

        // 200 clients, each reading until it has drained after the stop.
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (addr, slow) = (server.addr, i % SLOW_EVERY == 0);
                tokio::spawn(async move {
                    let link = if slow { SLOW } else { Link::Fast };
                    let mut client = Client::connect(addr, "/events", link).await;
                    let mut tally = Tally::default();
                    read_until_drained(&mut client, &mut tally, Duration::from_secs(120)).await;
                    (slow, client, tally)
                })
            })
            .collect();
        server
            .wait_for("200 receivers", |s| s["hub"]["receivers"] == CLIENTS as u64)
            .await;

        // The producer with 200 clients; memory and pending sampled meanwhile.
        let mut rss_200 = Vec::new();
        let mut rate_200 = Vec::new();
        for _ in 0..3 {
            let (rate, _) = server.send_rate(Duration::from_secs(1)).await;
            rate_200.push(rate);
            rss_200.push(server.rss_bytes());
            let stats = server.stats().await;
            let conns = stats["connections"].as_array().unwrap();
            assert_eq!(conns.len(), CLIENTS);
            for c in conns {
                // Bounded by the key set, however slow the client.
                let pending = c["stats"]["pending"].as_u64().unwrap();
                assert!(
                    pending <= KEYS,
                    "connection {}: {pending} pending > {KEYS} keys",
                    c["id"]
                );
            }
        }
        let rate_samples = rate_200.clone();
        let rate_200 = rate_200.iter().sum::<f64>() / rate_200.len() as f64;
        let stats = server.stats().await;

        server.stop_workload().await;
        let snapshot = snapshot_map(&server.get_json("/snapshot").await);
        assert_eq!(snapshot.len() as u64, KEYS);
        let done: Vec<(bool, Client, Tally)> = join_all(tasks)
            .await
            .into_iter()
            .map(|r| r.expect("a client task"))
            .collect();

        // Every client: the whole table, exact accounting, and /stats agrees.
        let after = server.stats().await;
        assert_eq!(after["hub"]["receivers"], CLIENTS as u64);
        for (i, (slow, _, tally)) in done.iter().enumerate() {
            let who = format!("client {i} (conn {}, slow {slow})", tally.conn);
            tally.check(&who, &snapshot);
            assert_eq!(
                tally.first_batch as u64, KEYS,
                "{who}: born with the whole table"
            );
            let listed = after["connections"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == tally.conn)
                .unwrap_or_else(|| panic!("{who} is not in /stats"));
            assert_eq!(
                listed["stats"]["folded"], tally.sends,
                "{who}: /stats agrees"
            );
            assert_eq!(listed["stats"]["pending_sends"], 0, "{who}");
        }

        // The report.
        let per_update = |want_slow: bool| {
            let (mut updates, mut sends, mut batches, mut n) = (0, 0, 0, 0);
            for (slow, _, t) in &done {
                if *slow == want_slow {
                    (updates, sends, batches, n) = (
                        updates + t.updates,
                        sends + t.sends,
                        batches + t.batches,
                        n + 1,
                    );
                }
            }
            (sends as f64 / updates as f64, batches as f64 / n as f64)
        };
        let (fast_ratio, fast_batches) = per_update(false);
        let (slow_ratio, slow_batches) = per_update(true);
        let max_rss = *rss_200.iter().max().unwrap();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "== 200 SSE clients ({} slow: {SLOW:?}), {KEYS} keys, pace 100 ms",
            CLIENTS / SLOW_EVERY
        );
        println!("send rate, no client:   {:>12.0} sends/s", rate_0);
        println!(
            "send rate, 200 clients: {:>12.0} sends/s ({:.0}% of no client; 1 s samples {:?})",
            rate_200,
            rate_200 / rate_0 * 100.0,
            rate_samples.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
        println!("  (a send fans out to every receiver: its cost grows with the 200 receivers, not with how fast they read; 2 cores shared by the producer, the server and the clients)");
        println!(
            "server RSS: {:.1} MiB idle, {:.1} MiB max with 200 clients (samples {:?} MiB)",
            mib(rss_idle),
            mib(max_rss),
            rss_200
                .iter()
                .map(|&b| (mib(b) * 10.0).round() / 10.0)
                .collect::<Vec<_>>()
        );
        println!("fast clients: {fast_batches:.0} batches each, {fast_ratio:.1} sends per update");
        println!("slow clients: {slow_batches:.0} batches each, {slow_ratio:.1} sends per update");
        println!("hub during the 200-client phase: {}", stats["hub"]);
        assert!(
            max_rss < RSS_CEILING,
            "server RSS {:.1} MiB with 200 clients",
            mib(max_rss)
        );
        // A slow client got fewer, fuller updates: it coalesced, it did not queue.
        assert!(
            slow_batches < fast_batches,
            "slow {slow_batches} vs fast {fast_batches} batches"
        );
        assert!(
            slow_ratio > fast_ratio,
            "slow {slow_ratio} vs fast {fast_ratio} sends/update"
        );

        drop(done);
        server
            .wait_for("every receiver to leave", |s| s["hub"]["receivers"] == 0)
            .await;
    });
}

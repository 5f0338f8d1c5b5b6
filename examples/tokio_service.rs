//! A small tokio service around one conflate hub, with a clean shutdown:
//! `cargo run --example tokio_service` (a second or so).
//!
//! - a producer task updates 64 metrics in bursts;
//! - `live` follows every update with `recv_async` inside `tokio::select!`,
//!   next to a progress tick and the service's shutdown signal;
//! - `indexer` is slow: it takes `try_recv_all` batches on its own schedule,
//!   and an operator task watches its lag from outside (`Hub::receivers`);
//! - `late` joins halfway with `.snapshot()` (the hub keeps `retain_latest`),
//!   so it starts from the current table, then leaves at the shutdown signal
//!   without draining (a client that disconnects).
//!
//! Shutdown: the producer stops, the signal goes out, and
//! `Hub::close_graceful` closes the send side; `live` and `indexer` deliver
//! what is pending and then see `Closed`. The final stats say which receivers
//! drained and which were dropped, and every receiver's sends are accounted
//! for (the conservation check).

use keybus::conflate::{Hub, Receiver, ReceiverWatch};
use keybus::RecvError;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{interval, sleep, MissedTickBehavior};

type Metrics = Hub<String, f64>;

const METRICS: u32 = 64;
const BURSTS: u32 = 100;

/// Sends `BURSTS` rounds of every metric, a few milliseconds apart.
async fn produce(hub: Metrics) -> u64 {
    let tx = hub.sender();
    let mut sent = 0;
    for burst in 0..BURSTS {
        for m in 0..METRICS {
            let value = f64::from(burst * METRICS + m);
            tx.send(format!("host{}.cpu", m), value).unwrap();
            sent += 1;
        }
        sleep(Duration::from_millis(3)).await;
    }
    sent
}

/// Every update as it comes. The shutdown signal does not end the loop: after
/// it the hub is closed gracefully, and `recv_async` returns `Err` only once
/// everything pending was delivered. (Leaving the loop at the signal would
/// drop what is still pending; dropping the `recv_async` future when another
/// branch wins consumes nothing.)
async fn live(mut rx: Receiver<String, f64>, mut shutdown: watch::Receiver<bool>) -> u64 {
    let mut events = 0;
    let mut tick = interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut stopping = false;
    loop {
        tokio::select! {
            event = rx.recv_async() => match event {
                Ok(_) => events += 1,
                Err(RecvError) => break, // drained after the graceful close
            },
            _ = tick.tick(), if !stopping => println!("live: {events} events, {} pending", rx.len()),
            _ = shutdown.changed(), if !stopping => {
                stopping = true;
                println!("live: shutdown signal, draining");
            }
        }
    }
    events
}

/// A slow consumer: one `try_recv_all` batch every 40 ms, until closed.
async fn indexer(mut rx: Receiver<String, f64>) -> u64 {
    let mut batches = 0;
    loop {
        match rx.try_recv_all() {
            Ok(_batch) => batches += 1,
            Err(keybus::TryRecvError::Empty) => {}
            Err(keybus::TryRecvError::Closed) => return batches,
        }
        sleep(Duration::from_millis(40)).await;
    }
}

/// A late joiner, after its first batch (taken at join): live updates until
/// the shutdown signal, where it leaves without draining.
async fn late(mut rx: Receiver<String, f64>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            // The signal first: this client leaves as soon as it is told.
            biased;
            _ = shutdown.changed() => break, // dropped: what is pending goes
            event = rx.recv_async() => if event.is_err() { break },
        }
    }
}

/// An operator loop: reads every live receiver's backlog from outside the
/// consumers (no receiver needed) until the service stops.
async fn operator(hub: Metrics, mut shutdown: watch::Receiver<bool>) {
    let mut tick = interval(Duration::from_millis(120));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                for rx in hub.receivers() {
                    let name = rx.name.as_deref().unwrap_or("?");
                    println!("operator: {name} is {} keys / {} sends behind", rx.stats.pending, rx.stats.pending_sends);
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

fn report(name: &str, watch: &ReceiverWatch<String, f64>) -> keybus::ReceiverStats {
    let s = watch.stats();
    let settled = s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends;
    println!(
        "{name:>8}: received {:>5} = folded {:>5} + dropped {:>4} + pending {:>2}  ({} events, closed: {})",
        s.received, s.folded, s.dropped, s.pending_sends, s.delivered, watch.is_closed()
    );
    assert_eq!(s.received, settled, "{name}: every send accounted for");
    s
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let hub: Metrics = Hub::builder().retain_latest().build();
    let (stop, stopped) = watch::channel(false);

    let live_rx = hub.receiver_builder().name("live").build();
    let indexer_rx = hub.receiver_builder().name("indexer").build();
    let watches = [("live", live_rx.watch()), ("indexer", indexer_rx.watch())];
    let live = tokio::spawn(live(live_rx, stopped.clone()));
    let indexer = tokio::spawn(indexer(indexer_rx));
    let operator = tokio::spawn(operator(hub.clone(), stopped.clone()));
    let producer = tokio::spawn(produce(hub.clone()));

    sleep(Duration::from_millis(150)).await;
    let mut late_rx = hub.receiver_builder().name("late").snapshot().build();
    let late_watch = late_rx.watch();
    // Born with the whole table pending: `sends == 0` per entry, unless a send
    // merged into it since the join (then 1).
    let first = late_rx.try_recv_all().unwrap_or_default();
    let table = first.len();
    let fresh = first.iter().filter(|e| e.sends == 0).count();
    println!("late: joined with {table} metrics ({fresh} straight from the table)");
    let late = tokio::spawn(late(late_rx, stopped.clone()));

    // Shutdown: no more updates, tell the tasks, close the send side gracefully.
    // The late client leaves at the signal; the others drain after the
    // graceful close.
    let sent = producer.await.unwrap();
    stop.send(true).unwrap();
    late.await.unwrap();
    hub.close_graceful();
    let (events, batches) = (live.await.unwrap(), indexer.await.unwrap());
    operator.await.unwrap();
    println!("\nsent {sent}; live took {events} events, indexer {batches} batches, late joined with {table} keys");

    for (name, watch) in &watches {
        let s = report(name, watch);
        assert_eq!(s.received, sent, "{name} was there from the start");
        assert_eq!(s.dropped, 0, "{name} drained");
    }
    report("late", &late_watch);
    let h = hub.stats();
    println!(
        "hub: sent {}, receivers live {}, drained {}, dropped {}, hard-closed {}",
        h.sent, h.receivers, h.receivers_drained, h.receivers_dropped, h.receivers_hard_closed
    );
    assert_eq!((h.sent, h.receivers), (sent, 0));
    assert_eq!((h.receivers_drained, h.receivers_dropped), (2, 1));
    assert_eq!(
        hub.snapshot().len(),
        METRICS as usize,
        "the table keeps every metric"
    );
}

//! A first five minutes with keybus: `cargo run --example quickstart`.
//!
//! A producer thread updates a few metrics far faster than a dashboard redraws.
//! The dashboard gets the latest value of every metric it has not shown yet, with
//! a count of how many updates were folded into it; a history reader of one metric
//! sees every revision in a bounded window, and is told if it falls behind.

use keybus::broadcast::Buffer;
use keybus::conflate::Hub;
use std::thread;

fn main() {
    // conflate: latest value per key, one pending slot per key per receiver.
    let hub: Hub<&'static str, f64> = Hub::new();
    let mut dashboard = hub.receiver();
    let mut disks = hub
        .receiver_builder()
        .key_filter(|k: &&str| k.starts_with("disk."))
        .build();

    // broadcast: every revision of one stream, the last 8 retained.
    let cpu_history: Buffer<f64> = Buffer::new(8);
    let mut history = cpu_history.reader();

    let tx = hub.sender();
    let producer = thread::spawn(move || {
        for tick in 0..1_000 {
            let load = f64::from(tick % 100) / 100.0;
            tx.send("cpu", load).unwrap();
            tx.send("disk.sda", 1.0 - load).unwrap();
            cpu_history.append(load).unwrap();
        }
    });
    producer.join().unwrap();
    // The producer's sender is gone; dropping the hub too closes the send side
    // gracefully: receivers drain what is pending, then report closed.
    drop(hub);

    // Each key once, with its latest value and how many sends were folded into it.
    for event in dashboard.try_recv_all().unwrap() {
        println!(
            "dashboard  {:<9} = {:.2}  ({} updates folded)",
            event.key, event.value, event.sends
        );
    }
    let disk = disks.recv().unwrap();
    println!(
        "disks      {:<9} = {:.2}  (cpu never reached this receiver)",
        disk.key, disk.value
    );
    assert!(
        disks.recv().is_err(),
        "drained, and the send side is closed"
    );

    // The history reader fell behind the 8-entry window: it is told, not skipped.
    match history.try_next() {
        Err(keybus::ReadError::Gap { after, oldest }) => {
            println!("history    gap: cursor {after}, oldest retained {oldest}");
        }
        other => println!("history    {other:?}"),
    }
    let next = history.try_next().unwrap();
    println!(
        "history    resumes at revision {} = {:.2}",
        next.revision, next.value
    );
}

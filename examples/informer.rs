//! The informer pattern: consumers keep a copy of a fleet's state (added,
//! modified, deleted) while a writer creates, updates and deletes entities.
//!
//! One writer thread drives a `retain_latest` hub whose tombstone is
//! `Pod::Deleted`; a live informer follows from the start, a late one joins
//! halfway from the table's snapshot. At the end each informer's cache must be
//! the hub's table, and every deletion an informer saw must be of a pod it knew.
//!
//! ```text
//! cargo run --release --example informer -- [--pods N] [--changes N]
//! ```

use keybus::conflate::{Hub, Receiver};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

#[derive(Clone, Debug, PartialEq)]
enum Pod {
    Running { restarts: u32 },
    Deleted,
}

/// What one informer saw, and its copy of the fleet.
#[derive(Default)]
struct Cache {
    pods: HashMap<u32, Pod>,
    added: u64,
    modified: u64,
    deleted: u64,
}

impl Cache {
    fn apply(&mut self, name: u32, pod: Pod) {
        match pod {
            Pod::Deleted => {
                assert!(
                    self.pods.remove(&name).is_some(),
                    "a deletion of pod {name}, which this informer never saw"
                );
                self.deleted += 1;
            }
            pod => match self.pods.insert(name, pod) {
                None => self.added += 1,
                Some(_) => self.modified += 1,
            },
        }
    }
}

/// Follows `rx` until the writer is done and nothing is pending.
fn follow(mut rx: Receiver<u32, Pod>, done: &AtomicBool) -> Cache {
    let mut cache = Cache::default();
    let mut batch = Vec::new();
    loop {
        let finished = done.load(Ordering::Acquire);
        batch.clear();
        match rx.try_recv_all_into(&mut batch) {
            Ok(_) => batch.drain(..).for_each(|e| cache.apply(e.key, e.value)),
            Err(_) if finished => break,
            Err(_) => thread::yield_now(),
        }
    }
    cache
}

fn main() {
    let mut pods = 1_000u32;
    let mut changes = 1_000_000u32;
    let mut args = lexopt::Parser::from_env();
    while let Some(arg) = args.next().expect("arguments") {
        use lexopt::prelude::*;
        match arg {
            Long("pods") => pods = args.value().unwrap().parse().expect("--pods N"),
            Long("changes") => changes = args.value().unwrap().parse().expect("--changes N"),
            _ => panic!("usage: informer [--pods N] [--changes N]"),
        }
    }
    let hub = Hub::builder()
        .retain_latest()
        .tombstones(|pod: &Pod| *pod == Pod::Deleted)
        .build();
    let done = AtomicBool::new(false);
    let live = hub.receiver();
    let (live, late) = thread::scope(|s| {
        let live = s.spawn(|| follow(live, &done));
        let tx = hub.sender();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut late = None;
        for i in 0..changes {
            let name = rng.u32(0..pods);
            let pod = if rng.u8(0..8) == 0 {
                Pod::Deleted
            } else {
                Pod::Running { restarts: i }
            };
            tx.send(name, pod).unwrap();
            if i == changes / 2 {
                let rx = hub.receiver_builder().snapshot().build();
                late = Some(s.spawn(|| follow(rx, &done)));
            }
        }
        done.store(true, Ordering::Release);
        (live.join().unwrap(), late.map(|h| h.join().unwrap()))
    });
    let table: HashMap<u32, Pod> = hub.snapshot().into_iter().collect();
    for (who, cache) in [("live", Some(live)), ("late", late)] {
        let Some(cache) = cache else { continue };
        assert_eq!(
            cache.pods, table,
            "the {who} informer's cache is not the table"
        );
        println!(
            "{who:>4} informer: {} added, {} modified, {} deleted; cache = table ({} pods)",
            cache.added,
            cache.modified,
            cache.deleted,
            table.len()
        );
    }
}

//! The broadcast scenarios: appends against attached idle readers and live
//! reader threads, a slow reader, readers that read everything, and appends
//! after many threads have read another ring.

use super::{timed, Entry, Measure, Plot, Scenario};
use crate::bc;
use std::time::Duration;

/// Peers that, with no reader attached, store nothing (tokio and async-broadcast
/// answer "no receiver"; one channel per reader means no channel at all): their
/// "append" then does different work from a ring that retains history.
pub fn stores_nothing_alone(name: &str, readers: usize) -> Option<&'static str> {
    (readers == 0 && matches!(name, "tokio" | "async-broadcast" | "crossbeam"))
        .then_some("stores nothing without a reader: not comparable")
}

/// A broadcast scenario that times appends: `(threads or readers, appends)`.
pub type AppendFn = fn(usize, u64) -> Duration;

/// Every ring's entry timing `scenario(imp)(arg, n)`, appends that run with
/// `readers` attached readers that do not read (not run where such a reader
/// would block the writer).
pub fn append_entries(
    scenario: fn(&bc::BroadcastImpl) -> AppendFn,
    arg: usize,
    readers: usize,
    n: u64,
) -> Vec<Entry> {
    bc::BROADCAST_IMPLS
        .iter()
        .map(|imp| {
            let f = scenario(imp);
            let run = if imp.runs_append(readers) {
                timed(move || f(arg, n))
            } else {
                Err("a reader that does not read blocks the writer (no drop-oldest)")
            };
            Entry::new(imp.name, imp.role, run)
                .not_comparable(stores_nothing_alone(imp.name, readers))
        })
        .collect()
}

/// The broadcast scenarios but the last one, in report order.
pub fn scenarios(scale: u64) -> Vec<Scenario> {
    let mut out = Vec::new();
    let n = 500_000 * scale;
    for readers in [0usize, 1, 2, 4, 8, 16] {
        let entries = append_entries(|imp| imp.append, readers, readers, n);
        out.push(
            Scenario::new(format!("broadcast/append/{readers}_readers"), n, entries)
                .plot(Plot::WriterCost(readers as u64)),
        );
    }
    let n = 200_000 * scale;
    let entries = append_entries(|imp| imp.append_live_reader_threads, 64, 64, n);
    out.push(Scenario::new(
        "broadcast/append/64_live_reader_threads",
        n,
        entries,
    ));
    let n = 500_000 * scale;
    let entries = bc::BROADCAST_IMPLS
        .iter()
        .map(|imp| {
            let f = imp.slow_reader;
            let run: Result<Measure, _> = if imp.runs_slow_reader() {
                Ok(Box::new(move || {
                    let o = f(n, 2_000);
                    (o.elapsed, Some(o.delivered_pct(n)))
                }))
            } else {
                Err("the writer would wait for the slow reader (no drop-oldest)")
            };
            Entry::new(imp.name, imp.role, run)
        })
        .collect();
    out.push(Scenario::new("broadcast/slow_reader", n, entries).extra("delivered"));
    for readers in [1usize, 4, 16] {
        // Fewer appends with more readers: every reader gets every value.
        let n = 100_000 * scale / (1 + readers as u64 / 4);
        let entries = bc::BROADCAST_IMPLS
            .iter()
            .map(|imp| {
                let f = imp.readers;
                let run: Measure = Box::new(move || {
                    let o = f(readers, n);
                    (o.elapsed, Some(o.delivered_pct(n * readers as u64)))
                });
                Entry::new(imp.name, imp.role, Ok(run))
            })
            .collect();
        out.push(
            Scenario::new(
                format!("broadcast/readers/{readers}"),
                n * readers as u64,
                entries,
            )
            .extra("delivered")
            .plot(Plot::BroadcastReaders(readers as u64)),
        );
    }
    out
}

/// The report's last scenario: 64 threads have read another ring; this one
/// has no reader.
pub fn append_after_threads(scale: u64) -> Scenario {
    let n = 100_000 * scale;
    let entries = append_entries(|imp| imp.append_after_threads, 64, 0, n);
    Scenario::new("broadcast/append/0_readers_after_64_threads", n, entries)
}

//! The conflate scenarios: the no-receiver send, the fan-outs (senders ×
//! receivers × keys), `retain_latest`, the `try_recv_all` drain cost, and
//! registration churn.

use super::{timed, Entry, Measure, Plot, Scenario};
use crate::cf;
use crate::common::Role;
use std::time::Duration;

/// One entry per conflate implementation (the peers too, with `peers`): `run(imp)`.
pub fn conflate_entries(
    peers: bool,
    run: impl Fn(&cf::ConflateImpl) -> Result<Measure, &'static str>,
) -> Vec<Entry> {
    cf::CONFLATE_IMPLS
        .iter()
        .filter(|imp| peers || imp.role != Role::Peer)
        .map(|imp| Entry::new(imp.name, imp.role, run(imp)))
        .collect()
}

/// The conflate scenarios, in report order.
pub fn scenarios(scale: u64) -> Vec<Scenario> {
    let mut out = Vec::new();
    let n = 2_000_000 * scale;
    let entries = conflate_entries(true, |imp| {
        let f = imp.no_receiver;
        timed(move || f(n))
    });
    out.push(Scenario::new("conflate/no_receiver_send", n, entries));
    let fan_outs: [(&str, u64, u64, u64, u64, Plot); 10] = [
        ("1x1_hot64", 1, 1, 64, 2_000_000, Plot::ConflateReceivers(1)),
        ("1x1_cold10k", 1, 1, 10_000, 500_000, Plot::None),
        ("1x1_cold1M", 1, 1, 1_000_000, 1_000_000, Plot::None),
        ("1x4_hot64", 1, 4, 64, 100_000, Plot::ConflateReceivers(4)),
        ("1x4_cold10k", 1, 4, 10_000, 50_000, Plot::None),
        ("1x16_hot64", 1, 16, 64, 20_000, Plot::ConflateReceivers(16)),
        ("2x2_hot64", 2, 2, 64, 500_000, Plot::ConflateThreads(4)),
        ("2x4_hot64", 2, 4, 64, 500_000, Plot::ConflateThreads(6)),
        ("4x4_hot64", 4, 4, 64, 500_000, Plot::ConflateThreads(8)),
        (
            "4x4_oversubscribed_1k_keys",
            4,
            4,
            1_000,
            200_000,
            Plot::None,
        ),
    ];
    for (name, s, r, keys, sends, plot) in fan_outs {
        // The million-key run is one pass over the keys whatever the scale.
        let sends = if keys >= 1_000_000 {
            sends
        } else {
            sends * scale
        };
        let entries = conflate_entries(true, |imp| {
            let f = imp.fan_out_counted;
            if imp.runs_keys(keys) {
                Ok(Box::new(move || {
                    let (d, accounted) = f(s, r, keys, sends);
                    (d, Some(100.0 * accounted as f64 / (sends * r) as f64))
                }))
            } else {
                Err("more keys than it can hold sensibly (one channel per key)")
            }
        });
        out.push(Scenario {
            max_rounds: if keys >= 1_000_000 { 3 } else { usize::MAX },
            ..Scenario::new(format!("conflate/{name}"), sends, entries)
                .extra("sends accounted")
                .plot(plot)
        });
    }
    // A hub with `retain_latest`, keybus and the baseline (the peers have no
    // table): the ratio is keybus+retain_latest over baseline+retain_latest (the baseline
    // role), and the rows without a table show the table's cost on the send path.
    type RetainFn = fn(bool, u64) -> Duration;
    let retain_runs: [(&str, u64, RetainFn, RetainFn); 5] = [
        (
            "no_receiver",
            2_000_000,
            cf::keybus_retain::no_receiver,
            cf::baseline_retain::no_receiver,
        ),
        (
            "1thread_hot64",
            1_000_000,
            cf::keybus_retain::hot_1thread,
            cf::baseline_retain::hot_1thread,
        ),
        // The same work's two halves timed apart: per send, and per entry
        // the cuts take (what holds target 7, docs/performance.md).
        (
            "1thread_hot64/sends",
            1_000_000,
            cf::keybus_retain::hot_1thread_sends,
            cf::baseline_retain::hot_1thread_sends,
        ),
        (
            "1thread_hot64/cuts",
            1_000_000,
            cf::keybus_retain::hot_1thread_cuts,
            cf::baseline_retain::hot_1thread_cuts,
        ),
        (
            "1x1_hot64",
            1_000_000,
            cf::keybus_retain::hot_1x1,
            cf::baseline_retain::hot_1x1,
        ),
    ];
    for (name, sends, keybus_fn, baseline_fn) in retain_runs {
        let n = sends * scale;
        let entry = |label: &'static str, role: Role, f: RetainFn, retain: bool| {
            Entry::new(label, role, timed(move || f(retain, n))).not_comparable(
                (!retain)
                    .then_some("without a table: × baseline is against baseline+retain_latest"),
            )
        };
        let entries = vec![
            entry("keybus+retain_latest", Role::Keybus, keybus_fn, true),
            entry("baseline+retain_latest", Role::Baseline, baseline_fn, true),
            entry("keybus", Role::Peer, keybus_fn, false),
            entry("baseline", Role::Peer, baseline_fn, false),
        ];
        out.push(Scenario::new(
            format!("conflate/retain_latest/{name}"),
            n,
            entries,
        ));
    }
    // 1x1_hot64 is also the 2-thread point of the thread plot.
    // The cut per entry against the backlog; the last row, the same cut for
    // a consumer that reconnected (its hub's receiver dropped and a new one
    // registered alone).
    let drains = [
        (100u64, ""),
        (1_000, ""),
        (10_000, ""),
        (100_000, ""),
        (10_000, "_reconnected"),
    ];
    for (backlog, suffix) in drains {
        let iters = (300_000 * scale / backlog).max(3);
        let entries = conflate_entries(true, |imp| {
            let f = if suffix.is_empty() {
                imp.drain_cost
            } else {
                imp.drain_cost_reconnected
            };
            if imp.runs_backlog(backlog) {
                timed(move || f(backlog, iters))
            } else {
                Err("cannot hold a backlog this large (capacity 1,024, drop-oldest)")
            }
        });
        out.push(Scenario::new(
            format!("conflate/try_recv_all/{backlog}{suffix}"),
            backlog * iters,
            entries,
        ));
    }

    // Registration churn against the number of receivers already registered
    // (keybus and the baseline; the peers register per key or not at all).
    for standing in [10u64, 1_000, 10_000] {
        // Fewer rounds where a registration may cost O(receivers).
        let iters = (20_000 * scale / (1 + standing / 100)).max(20);
        let entries = conflate_entries(false, |imp| {
            let f = imp.register_drop;
            timed(move || f(standing, iters))
        });
        out.push(Scenario::new(
            format!("conflate/register_drop/{standing}_registered"),
            iters,
            entries,
        ));
    }
    // The coalescing send (1 to 1,000 receivers, four kinds), the new-key
    out
}

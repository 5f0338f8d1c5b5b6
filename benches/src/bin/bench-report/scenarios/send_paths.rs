//! bench-report's conflate scenarios for the send paths the redesign's targets
//! name (`--targets` runs the same functions, see `targets/`): the coalescing
//! send against the receiver count and against four kinds of receiver, the
//! new-key send with its `try_recv`, the no-receiver send with its count, and the
//! threaded fan-outs whose consumers take whole backlogs with `try_recv_all`.
//! Sized by `scale` (1 = quick, 5 = `--full`) like the rest of the report.

use super::conflate::conflate_entries;
use super::{timed, Entry, Measure, Scenario};
use crate::cf;
use crate::common::Role;

/// The receiver counts of `conflate/coalescing_send/{R}_receivers`.
pub const COALESCING_RECEIVERS: [u64; 4] = [1, 4, 16, 1_000];

/// Sends per measurement of a coalescing send to `receivers` receivers at
/// `scale`: the work per send grows with the receivers, the sends shrink.
pub fn coalescing_sends(receivers: u64, scale: u64) -> u64 {
    2_000_000 * scale / receivers
}

/// The keys `conflate/new_key_try_recv` cycles over.
pub const NEW_KEY_KEYS: u64 = 4_096;

/// The threaded fan-outs with `try_recv_all` consumers: name, senders,
/// receivers, keys, sends at scale 1.
pub const TRY_ALL_FAN_OUTS: [(&str, u64, u64, u64, u64); 3] = [
    ("1x16_hot64_try_recv_all", 1, 16, 64, 200_000),
    ("2x4_4096_keys_try_recv_all", 2, 4, 4_096, 300_000),
    ("4x4_4096_keys_try_recv_all", 4, 4, 4_096, 300_000),
];

/// keybus and the baseline only, timing `keybus(n)` / `baseline(n)`.
fn pair(
    keybus: fn(u64) -> std::time::Duration,
    baseline: fn(u64) -> std::time::Duration,
    n: u64,
) -> Vec<Entry> {
    vec![
        Entry::new("keybus", Role::Keybus, timed(move || keybus(n))),
        Entry::new("baseline", Role::Baseline, timed(move || baseline(n))),
    ]
}

/// The scenarios, in report order.
pub fn scenarios(scale: u64) -> Vec<Scenario> {
    let mut out = Vec::new();

    // One thread, every one of 64 keys pending at each of R idle receivers
    // (keybus and the baseline: the peers do not coalesce per receiver, or
    // register per key).
    for receivers in COALESCING_RECEIVERS {
        let n = coalescing_sends(receivers, scale);
        let entries = conflate_entries(false, |imp| {
            let f = imp.coalescing_send;
            timed(move || f(receivers, n))
        });
        out.push(Scenario::new(
            format!("conflate/coalescing_send/{receivers}_receivers"),
            n,
            entries,
        ));
    }
    let n = 1_000_000 * scale;
    out.push(Scenario::new(
        "conflate/coalescing_send/mixed_4_kinds_hot8",
        n,
        pair(
            cf::keybus_builder::mixed_receivers,
            cf::baseline_builder::mixed_receivers,
            n,
        ),
    ));

    // One thread, one receiver: a send of a key that is not pending, then its
    // `try_recv` (every implementation).
    let n = 1_000_000 * scale;
    let entries = conflate_entries(true, |imp| {
        let f = imp.new_key_cycle;
        timed(move || f(NEW_KEY_KEYS, n))
    });
    out.push(Scenario::new(
        format!("conflate/new_key_try_recv/{NEW_KEY_KEYS}_keys"),
        n,
        entries,
    ));

    // No receiver, and `HubStats::sent` checked afterwards.
    let n = 2_000_000 * scale;
    out.push(Scenario::new(
        "conflate/no_receiver_send_counted",
        n,
        pair(
            cf::keybus_builder::no_receiver_counted,
            cf::baseline_builder::no_receiver_counted,
            n,
        ),
    ));

    // Threads, consumers taking whole backlogs (the drain after the close
    // included, as in every fan-out).
    for (name, s, r, keys, sends) in TRY_ALL_FAN_OUTS {
        let sends = sends * scale;
        let entries = conflate_entries(true, |imp| {
            let f = imp.fan_out_try_all;
            if !imp.runs_keys(keys) {
                return Err("more keys than it can hold sensibly (one channel per key)");
            }
            let run: Measure = Box::new(move || {
                let (d, accounted) = f(s, r, keys, sends);
                (d, Some(100.0 * accounted as f64 / (sends * r) as f64))
            });
            Ok(run)
        });
        out.push(
            Scenario::new(format!("conflate/{name}"), sends, entries).extra("sends accounted"),
        );
    }
    out
}

//! The redesign issue's targets: for each, what it measures (the same scenario
//! functions as bench-report and `cargo bench`, `support/conflate_*.rs`), at
//! which size, and the ratio keybus ÷ baseline it must reach. `u64` keys and
//! values throughout.
//!
//! Every measurement returns its cost (ns per op, or the p99 in ns for the cut
//! latency; lower is better) or, where the work was not all done (sends not
//! accounted for), an error. The ratio of a round is the baseline's cost over
//! keybus's, so above 1 means keybus is faster, as in the issue.
//!
//! Sizes at `scale` 1 (the default) make one measurement take about 0.2–1 s
//! with today's code on a loaded 2-core machine, and keep keybus's side above
//! about 10 ms even where it reaches its target ratio; `--full` multiplies
//! them by 5. They are larger than bench-report's quick sizes (which take the
//! median of more, shorter rounds); the scenario code is the same.
//! The heap-bytes-per-pending-key target is `cargo test --release --test
//! memory`, not here.

use crate::cf;
use crate::common::Role;
use crate::scenarios::send_paths::{NEW_KEY_KEYS, TRY_ALL_FAN_OUTS};
use std::time::Duration;

/// One measurement: its cost, lower is better, or why it does not count.
pub type Run = Box<dyn Fn() -> Result<f64, String>>;

/// What the cost of a target is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    NsPerOp,
    /// Publisher send latency, p99, in ns.
    P99Ns,
}

impl Unit {
    pub fn label(self) -> &'static str {
        match self {
            Unit::NsPerOp => "ns/op",
            Unit::P99Ns => "p99 ns",
        }
    }
}

/// One row of the table.
pub struct Target {
    /// The wording.
    pub what: &'static str,
    /// The bench-report scenario with the same code (`--only` it for peers).
    pub scenario: String,
    pub unit: Unit,
    /// The ratio keybus ÷ baseline speed to reach.
    pub goal: f64,
    /// A ratio keybus already reaches and must keep (the "keep").
    pub keep: bool,
    pub keybus: Run,
    pub baseline: Run,
}

/// The keybus and the baseline entries of the scenario table.
fn impls() -> (cf::ConflateImpl, cf::ConflateImpl) {
    let pick = |role| {
        *cf::CONFLATE_IMPLS
            .iter()
            .find(|i| i.role == role)
            .expect("keybus and the baseline are in CONFLATE_IMPLS")
    };
    (pick(Role::Keybus), pick(Role::Baseline))
}

fn per_op(d: Duration, ops: u64) -> f64 {
    d.as_nanos() as f64 / ops as f64
}

/// A run timing `ops` operations with `f`.
fn ops_run(f: impl Fn() -> Duration + 'static, ops: u64) -> Run {
    Box::new(move || Ok(per_op(f(), ops)))
}

/// A threaded fan-out run, `repeat` fresh hubs of `shape` (senders,
/// receivers, keys, sends) one after another: ns per send, an error unless the
/// receivers' events account for every send at every receiver.
fn fan_out_run(f: fn(u64, u64, u64, u64) -> (Duration, u64), shape: [u64; 4], repeat: u64) -> Run {
    let [s, r, keys, sends] = shape;
    Box::new(move || {
        let mut total = Duration::ZERO;
        for _ in 0..repeat {
            let (d, accounted) = f(s, r, keys, sends);
            if accounted != sends * r {
                return Err(format!(
                    "events account for {accounted} of {} sends",
                    sends * r
                ));
            }
            total += d;
        }
        Ok(per_op(total, sends * repeat))
    })
}

/// Builds a target from its row of the issue and the two runs.
fn target(what: &'static str, scenario: String, goal: f64, keep: bool, runs: (Run, Run)) -> Target {
    Target {
        what,
        scenario,
        unit: Unit::NsPerOp,
        goal,
        keep,
        keybus: runs.0,
        baseline: runs.1,
    }
}

/// The table, in its order, sized by `scale`.
pub fn targets(scale: u64) -> Vec<Target> {
    let (kb, bl) = impls();
    let mut out = Vec::new();

    // Sends per measurement: the work per send grows with the receivers.
    let coalescing: [(&str, u64, u64, f64); 4] = [
        (
            "coalescing send, one thread, every key pending, 1 receiver",
            1,
            16_000_000,
            1.2,
        ),
        ("the same, 4 receivers", 4, 8_000_000, 2.5),
        ("the same, 16 receivers", 16, 1_600_000, 6.0),
        ("the same, 1,000 receivers", 1_000, 8_000, 50.0),
    ];
    for (what, r, n, goal) in coalescing {
        let n = n * scale;
        let (k, b) = (kb.coalescing_send, bl.coalescing_send);
        out.push(target(
            what,
            format!("conflate/coalescing_send/{r}_receivers"),
            goal,
            false,
            (ops_run(move || k(r, n), n), ops_run(move || b(r, n), n)),
        ));
    }

    let n = 8_000_000 * scale;
    out.push(target(
        "the same, 4 receivers of four kinds (every key; `.key(3)`; \
         `.key_filter(even)`; own summing merge), 8 hot keys",
        "conflate/coalescing_send/mixed_4_kinds_hot8".into(),
        1.2,
        false,
        (
            ops_run(move || cf::keybus_builder::mixed_receivers(n), n),
            ops_run(move || cf::baseline_builder::mixed_receivers(n), n),
        ),
    ));

    // Both with the table: keybus+retain_latest ÷ baseline+retain_latest.
    let n = 16_000_000 * scale;
    out.push(target(
        "`retain_latest` hub, no receiver (64 hot keys)",
        "conflate/retain_latest/no_receiver".into(),
        1.2,
        false,
        (
            ops_run(move || cf::keybus_retain::no_receiver(true, n), n),
            ops_run(move || cf::baseline_retain::no_receiver(true, n), n),
        ),
    ));
    let n = 8_000_000 * scale;
    out.push(target(
        "`retain_latest` hub, 1 receiver (64 hot keys, one thread, \
         `try_recv_all` every 64 sends)",
        "conflate/retain_latest/1thread_hot64".into(),
        1.5,
        false,
        (
            ops_run(move || cf::keybus_retain::hot_1thread(true, n), n),
            ops_run(move || cf::baseline_retain::hot_1thread(true, n), n),
        ),
    ));

    let n = 6_000_000 * scale;
    let (k, b) = (kb.new_key_cycle, bl.new_key_cycle);
    out.push(target(
        "send of a new key plus its `try_recv`, one thread, 1 receiver \
         (keys cycling over 4,096)",
        format!("conflate/new_key_try_recv/{NEW_KEY_KEYS}_keys"),
        1.0,
        false,
        (
            ops_run(move || k(NEW_KEY_KEYS, n), n),
            ops_run(move || b(NEW_KEY_KEYS, n), n),
        ),
    ));

    // 2M sends per hub, as the issue says; 5 hubs one after another per
    // measurement (one took about 50 ms).
    let shape = [1, 1, 64, 2_000_000];
    out.push(target(
        "1 sender → 1 `recv` consumer, 64 hot keys, 2M sends",
        "conflate/1x1_hot64".into(),
        1.5,
        false,
        (
            fan_out_run(kb.fan_out_counted, shape, 5 * scale),
            fan_out_run(bl.fan_out_counted, shape, 5 * scale),
        ),
    ));
    // bench-report's shapes, with more sends.
    let try_all: [(&str, u64, f64); 3] = [
        (
            "1 sender → 16 receivers (threads, `try_recv_all`), 64 hot keys",
            1_000_000,
            3.0,
        ),
        (
            "2 senders × 4 receivers, 4,096 keys, `try_recv_all` consumers",
            2_000_000,
            1.5,
        ),
        (
            "4 senders × 4 receivers, 4,096 keys (oversubscribed)",
            2_000_000,
            1.5,
        ),
    ];
    for ((what, sends, goal), (name, s, r, keys, _)) in try_all.into_iter().zip(TRY_ALL_FAN_OUTS) {
        let shape = [s, r, keys, sends * scale];
        out.push(target(
            what,
            format!("conflate/{name}"),
            goal,
            false,
            (
                fan_out_run(kb.fan_out_try_all, shape, 1),
                fan_out_run(bl.fan_out_try_all, shape, 1),
            ),
        ));
    }

    for (what, standing) in [
        ("register + drop one receiver, 10 registered", 10u64),
        ("register + drop one receiver, 1,000 registered", 1_000),
    ] {
        let n = 1_000_000 * scale;
        let (k, b) = (kb.register_drop, bl.register_drop);
        out.push(target(
            what,
            format!("conflate/register_drop/{standing}_registered"),
            0.7,
            false,
            (
                ops_run(move || k(standing, n), n),
                ops_run(move || b(standing, n), n),
            ),
        ));
    }

    // 1,000 timed cuts (about 30 µs each); the refills between them untimed.
    let (backlog, iters) = (10_000u64, 1_000 * scale);
    let (k, b) = (kb.drain_cost, bl.drain_cost);
    out.push(target(
        "`try_recv_all` per entry, 10,000 keys",
        "conflate/try_recv_all/10000".into(),
        0.8,
        true,
        (
            ops_run(move || k(backlog, iters), backlog * iters),
            ops_run(move || b(backlog, iters), backlog * iters),
        ),
    ));

    // The backlog refilled 5 times: 500,000 timed sends; the ratio is the
    // baseline's p99 over keybus's.
    let (backlog, refills) = (100_000u64, 5 * scale);
    let (k, b) = (kb.cut_latency, bl.cut_latency);
    out.push(Target {
        unit: Unit::P99Ns,
        ..target(
            "publisher p99 while another receiver cuts a 100,000-key backlog",
            "conflate/cut_latency".into(),
            4.0,
            true,
            (
                Box::new(move || Ok(k(backlog, refills).p99 as f64)),
                Box::new(move || Ok(b(backlog, refills).p99 as f64)),
            ),
        )
    });

    let n = 100_000_000 * scale;
    out.push(target(
        "send with no receiver, counted in `HubStats::sent`",
        "conflate/no_receiver_send_counted".into(),
        3.0,
        true,
        (
            ops_run(move || cf::keybus_builder::no_receiver_counted(n), n),
            ops_run(move || cf::baseline_builder::no_receiver_counted(n), n),
        ),
    ));
    out
}

//! What one locked read-modify-write costs on this machine: the unit the
//! targets' locks are weighed in (docs/design.md, "What the locks weigh";
//! the figures in docs/performance.md, "session fifteen"). Printed in the `--targets` header, so a report from another
//! machine carries its own figure.
//!
//! The probe runs a loop whose body does 16 stores (a send writes a few
//! lines before and between its locks, so a locked instruction there waits
//! for the store buffer to drain), then takes and releases `n` uncontended
//! spin locks as the shard locks do: a `compare_exchange` to take, a Release
//! store to let go. The cost of one lock is the slope between one and three
//! locks per iteration: the first lock of an iteration partly overlaps the
//! stores before it, the later ones do not.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Iterations per timed loop: six loops, about half a second in all here.
const ITERS: u64 = 4_000_000;

/// 16 stores over a 512-byte buffer: out of line, so every iteration runs
/// the same instructions whatever the lock count.
#[inline(never)]
fn stores(buf: &mut [u64; 64], i: u64) {
    for j in 0..16u64 {
        let k = ((i + j) & 63) as usize;
        buf[k] = buf[k].wrapping_mul(31).wrapping_add(i ^ j);
    }
}

/// A lock word on a line of its own, as each cell shard's lock is.
#[repr(align(128))]
#[derive(Default)]
struct LockWord(AtomicU64);

/// ns per iteration of the stores plus `locks` lock-and-release pairs.
fn per_iteration(locks: usize, words: &[LockWord], buf: &mut [u64; 64]) -> f64 {
    let start = Instant::now();
    for i in 0..ITERS {
        stores(black_box(buf), i);
        for l in 0..locks {
            let word = &words[(i as usize + l) % words.len()].0;
            // Acquire on success, as a shard lock's take; uncontended, so it
            // never spins.
            while word
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::hint::spin_loop();
            }
            word.store(0, Ordering::Release);
        }
    }
    start.elapsed().as_nanos() as f64 / ITERS as f64
}

/// The marginal cost of one uncontended lock (CAS + Release store) amid
/// stores, in ns: the median of three measurements of the slope between one
/// and three locks per iteration.
pub fn lock_ns() -> f64 {
    let words: Vec<LockWord> = (0..32).map(|_| LockWord::default()).collect();
    let mut buf = [1u64; 64];
    let mut slopes: Vec<f64> = (0..3)
        .map(|_| {
            let one = per_iteration(1, &words, &mut buf);
            let three = per_iteration(3, &words, &mut buf);
            (three - one) / 2.0
        })
        .collect();
    black_box(buf);
    slopes.sort_by(f64::total_cmp);
    slopes[1]
}

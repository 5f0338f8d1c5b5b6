//! A floor for target 7's scenario (a `retain_latest` hub, one receiver, 64
//! hot keys, one thread, a cut every 64 sends): the data work of its two
//! forms with nothing else, to set against keybus's and the baseline's time
//! (docs/performance.md, "session twenty-five").
//!
//! - **cells**: the table's cells in 32 spin-locked shards behind a
//!   hashbrown index; the receiver's queue holds cell ids in slots claimed
//!   by a CAS; its cut visits each entry's cell under the cell's shard lock
//!   (keybus's form today).
//! - **owned**: the same cells; the receiver owns places (key, value,
//!   position) written under the cell's shard lock and a push lock; its cut
//!   reads the places in order (the form `proto/table-sole-receiver`
//!   prototyped).
//!
//! No close, stats, tombstones, parking, registration or unwinding: one
//! thread, so each lock is uncontended but still taken. Prints ns per send
//! and per entry taken, three rounds: `cargo run --release -p
//! keybus-benches --bin floor-model`.

use std::cell::UnsafeCell;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KEYS: u64 = 64;
const SHARDS: usize = 32;
const SENDS: u64 = 4_000_000;

#[repr(align(64))]
struct SpinLock(AtomicBool);

impl SpinLock {
    fn lock(&self) {
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }

    fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

#[derive(Default)]
struct Cell {
    key: u64,
    value: u64,
    stamp: u64,
    count: u32,
    mark: u16,
    seq: u64,
    /// The owned form's place of this key: index and position.
    place: (usize, u64),
}

/// The cells of one shard behind its lock (one thread: the lock is taken
/// for its cost; the `UnsafeCell` is reached only while it is held).
struct Shard {
    lock: SpinLock,
    index: hashbrown::HashTable<u32>,
    cells: UnsafeCell<Vec<Cell>>,
}

struct Table {
    shards: Vec<Shard>,
}

fn hash(key: u64) -> u64 {
    foldhash::fast::FixedState::with_seed(7).hash_one(key)
}

fn shard_of(hash: u64) -> usize {
    (hash >> 40) as usize & (SHARDS - 1)
}

impl Table {
    fn new() -> Self {
        let mut keys: Vec<Vec<u64>> = vec![Vec::new(); SHARDS];
        for k in 0..KEYS {
            keys[shard_of(hash(k))].push(k);
        }
        let shards = keys
            .into_iter()
            .map(|ks| {
                let mut index = hashbrown::HashTable::new();
                for (i, &k) in ks.iter().enumerate() {
                    index.insert_unique(hash(k), i as u32, |&j| hash(ks[j as usize]));
                }
                let cells = ks
                    .iter()
                    .map(|&key| Cell {
                        key,
                        ..Cell::default()
                    })
                    .collect();
                Shard {
                    lock: SpinLock(AtomicBool::new(false)),
                    index,
                    cells: UnsafeCell::new(cells),
                }
            })
            .collect();
        Table { shards }
    }

    /// Runs `f` on shard `s`'s cells under its lock.
    fn with<R>(&self, s: usize, f: impl FnOnce(&Shard, &mut Vec<Cell>) -> R) -> R {
        let shard = &self.shards[s];
        shard.lock.lock();
        // SAFETY: the shard's lock is held, and the reference ends with `f`.
        let r = f(shard, unsafe { &mut *shard.cells.get() });
        shard.lock.unlock();
        r
    }
}

fn find(shard: &Shard, cells: &[Cell], h: u64, key: u64) -> usize {
    let i = shard.index.find(h, |&i| cells[i as usize].key == key);
    *i.expect("every key has a cell") as usize
}

/// Times `sends` sends in rounds of 64, one per key, each round followed by
/// `cut`: (time of the sends, time of the cuts).
fn rounds(mut send: impl FnMut(u64, u64), mut cut: impl FnMut()) -> (Duration, Duration) {
    let (mut sends, mut cuts) = (Duration::ZERO, Duration::ZERO);
    let mut i = 0;
    while i < SENDS {
        let start = Instant::now();
        for k in 0..KEYS {
            send(k, black_box(i + k));
        }
        let sent = Instant::now();
        cut();
        sends += sent - start;
        cuts += sent.elapsed();
        i += KEYS;
    }
    (sends, cuts)
}

#[inline(never)]
fn cells_form() -> (Duration, Duration) {
    let table = Table::new();
    let tail = AtomicU64::new(0);
    let slots: Vec<AtomicU32> = (0..1024).map(|_| AtomicU32::new(0)).collect();
    let head = UnsafeCell::new(0u64);
    let out = UnsafeCell::new(Vec::with_capacity(KEYS as usize));
    rounds(
        |key, value| {
            let h = hash(key);
            let s = shard_of(h);
            table.with(s, |shard, cells| {
                let i = find(shard, cells, h, key);
                let c = &mut cells[i];
                let pos = tail.load(Ordering::Relaxed);
                tail.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .expect("one thread");
                slots[(pos & 1023) as usize]
                    .store((s as u32) << 16 | (i as u32 + 1), Ordering::Release);
                c.mark = 1;
                c.count += 1;
                c.value = value;
                c.stamp = 5;
                c.seq += 1;
            });
        },
        || {
            // SAFETY: one thread; neither is referenced elsewhere.
            let (head, out) = unsafe { (&mut *head.get(), &mut *out.get()) };
            let end = tail.load(Ordering::Acquire);
            out.clear();
            while *head < end {
                let id = slots[(*head & 1023) as usize].load(Ordering::Acquire) - 1;
                *head += 1;
                let (s, i) = ((id >> 16) as usize, (id & 0xffff) as usize);
                table.with(s, |_, cells| {
                    let c = &mut cells[i];
                    if c.mark == 1 {
                        out.push((c.key, c.value, c.seq));
                        c.mark = 0;
                        c.count -= 1;
                        c.stamp = u64::MAX;
                    }
                });
            }
            black_box(&*out);
        },
    )
}

struct Place {
    position: AtomicU64,
    key: u64,
    value: u64,
    sends: u64,
}

#[inline(never)]
fn owned_form() -> (Duration, Duration) {
    let table = Table::new();
    let places: Vec<UnsafeCell<Place>> = (0..256)
        .map(|_| {
            UnsafeCell::new(Place {
                position: AtomicU64::new(u64::MAX),
                key: 0,
                value: 0,
                sends: 0,
            })
        })
        .collect();
    let push_lock = SpinLock(AtomicBool::new(false));
    let tail = UnsafeCell::new((0usize, 0u64));
    let head = UnsafeCell::new(0usize);
    let out = UnsafeCell::new(Vec::with_capacity(KEYS as usize));
    rounds(
        |key, value| {
            let h = hash(key);
            table.with(shard_of(h), |shard, cells| {
                let i = find(shard, cells, h, key);
                let c = &mut cells[i];
                c.value = value;
                c.stamp = 5;
                c.seq += 1;
                push_lock.lock();
                // SAFETY: under the push lock; one thread.
                let (idx, pos) = unsafe { &mut *tail.get() };
                // SAFETY: the place at the tail is the pusher's (the cut
                // read it before this round).
                let p = unsafe { &mut *places[*idx].get() };
                p.key = key;
                p.value = value;
                p.sends = 1;
                p.position.store(*pos, Ordering::Release);
                c.place = (*idx, *pos);
                *idx = (*idx + 1) & 255;
                *pos += 1;
                push_lock.unlock();
            });
        },
        || {
            // SAFETY: one thread; neither is referenced elsewhere.
            let (head, out) = unsafe { (&mut *head.get(), &mut *out.get()) };
            out.clear();
            for _ in 0..KEYS {
                // SAFETY: the round's sends are done: the consumer's.
                let p = unsafe { &mut *places[*head].get() };
                out.push((p.key, p.value, p.sends));
                p.position.store(u64::MAX, Ordering::Relaxed);
                *head = (*head + 1) & 255;
            }
            black_box(&*out);
        },
    )
}

fn main() {
    let per = |d: Duration| d.as_nanos() as f64 / SENDS as f64;
    for round in 1..=3 {
        let (cs, cc) = cells_form();
        let (os, oc) = owned_form();
        println!(
            "round {round}: cells: send {:.1} ns, cut {:.1} ns/entry | owned: send {:.1} ns, cut {:.1} ns/entry",
            per(cs),
            per(cc),
            per(os),
            per(oc)
        );
    }
}

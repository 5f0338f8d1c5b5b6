//! The broadcast soak, written once over [`Broadcast`] and run against both
//! implementations by `tests/soak.rs` (budget, seed and memory bounds:
//! the [parent module](super)).
//!
//! An epoch: two writers (one using `append_if_changed`), readers with every
//! read form, some slow enough to be lapped (gaps), some leaving early, a
//! snapshot-then-subscribe thread, and a close at a random moment.
//!
//! Checked, per reader: entries read + revisions reported skipped by gaps =
//! revisions appended after its first cursor; every entry carries exactly the
//! value appended under its revision; revisions are exactly the successful new
//! appends. Memory: an epoch's peak stays under capacity × readers, and
//! everything is freed when the buffer goes.

use super::{Meter, Peaks, BYTES_FIXED, DEBUG};
use crate::broadcast_api::{AppendError, Broadcast, BufferApi, Entry, ReadError, ReaderApi};
use crate::threads::Crew;
use futures::executor::block_on;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::thread;
use std::time::Duration;

/// A value that says who appended it, repeated, so a torn copy shows.
#[derive(Clone, Debug, PartialEq)]
struct Tagged {
    tag: u64,
    words: Vec<u64>,
}

impl Tagged {
    fn new(tag: u64) -> Self {
        Tagged {
            tag,
            words: vec![tag; 1 + (tag % 5) as usize],
        }
    }

    fn check(&self) {
        assert_ne!(self.tag, 0);
        assert_eq!(self.words.len(), 1 + (self.tag % 5) as usize, "torn value");
        assert!(self.words.iter().all(|&w| w == self.tag), "torn value");
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadForm {
    Next,
    TryNext,
    NextAsync,
    Blocking,
    Try,
    Timeout,
    Async,
}

/// How one reader thread of an epoch reads.
#[derive(Clone, Copy, Debug)]
struct ReaderSpec {
    form: ReadForm,
    /// Dawdles now and then, so the writers lap it (gaps).
    slow: bool,
    /// Leaves after reading this many entries.
    leave_after: Option<u64>,
    /// Starts at cursor 0 (may gap at once) instead of the tail.
    from_start: bool,
}

const READ_FORMS: [ReadForm; 7] = [
    ReadForm::Next,
    ReadForm::TryNext,
    ReadForm::NextAsync,
    ReadForm::Blocking,
    ReadForm::Try,
    ReadForm::Timeout,
    ReadForm::Async,
];

/// Run totals, printed at the end.
#[derive(Default, Debug)]
pub struct Totals {
    appends: u64,
    unchanged: u64,
    refused: u64,
    read: u64,
    skipped: u64,
    gaps: u64,
    joins: u64,
    peaks: Peaks,
}

/// Bytes allowed per value held (ring slot, a reader's batch): `Tagged` is a
/// `u64` and a `Vec` of up to 5 words, in an `Arc` in the ring.
const BYTES_PER_VALUE: usize = 160;

/// The tag appended under each revision, written by the writer once
/// `append` returned it.
struct Table(Vec<AtomicU64>);

impl Table {
    fn expect(&self, e: &Entry<Tagged>) {
        e.value.check();
        let slot = &self.0[e.revision as usize];
        let mut tag = slot.load(SeqCst);
        while tag == 0 {
            // The writer has the revision and is about to record it.
            thread::yield_now();
            tag = slot.load(SeqCst);
        }
        assert_eq!(e.value.tag, tag, "a value under the wrong revision");
    }
}

#[derive(Default)]
struct ReaderTally {
    read: u64,
    skipped: u64,
    gaps: u64,
}

/// Follows the cursor from `start` until Closed (or leaving early).
fn read_all(
    buf: &impl BufferApi<Tagged>,
    table: &Table,
    start: u64,
    spec: ReaderSpec,
    capacity: usize,
    seed: u64,
) -> ReaderTally {
    let ReaderSpec {
        form,
        slow,
        leave_after,
        ..
    } = spec;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut reader = buf.reader_at(buf.cursor_at(start));
    let mut cursor = start;
    let mut t = ReaderTally::default();
    loop {
        if leave_after.is_some_and(|n| t.read >= n) {
            return t;
        }
        if slow && rng.u8(0..4) == 0 {
            if rng.bool() {
                thread::sleep(Duration::from_micros(rng.u64(0..400)));
            } else {
                thread::yield_now();
            }
        }
        let limit = rng.usize(1..=2 * capacity);
        let answer: Result<Vec<Entry<Tagged>>, ReadError> = match form {
            ReadForm::Next => reader.next().map(|e| vec![e]),
            ReadForm::TryNext => reader.try_next().map(|e| vec![e]),
            ReadForm::NextAsync => block_on(reader.next_async()).map(|e| vec![e]),
            ReadForm::Blocking => buf.read(cursor, limit),
            ReadForm::Try => buf.try_read(cursor, limit),
            ReadForm::Timeout => {
                buf.read_timeout(cursor, limit, Duration::from_micros(rng.u64(0..300)))
            }
            ReadForm::Async => block_on(buf.read_async(cursor, limit)),
        };
        match answer {
            Ok(entries) => {
                assert!(!entries.is_empty() && entries.len() <= limit);
                for e in &entries {
                    assert_eq!(e.revision, cursor + 1, "skipped without a gap");
                    table.expect(e);
                    cursor = e.revision;
                }
                t.read += entries.len() as u64;
            }
            Err(ReadError::Gap { after, oldest }) => {
                assert_eq!(after, cursor);
                assert!(oldest > after + 1, "a gap that skips nothing");
                assert!(oldest <= buf.tail());
                t.skipped += oldest - 1 - after;
                t.gaps += 1;
                cursor = oldest - 1;
            }
            Err(ReadError::Empty) | Err(ReadError::Timeout) => thread::yield_now(),
            Err(ReadError::Closed) => {
                assert!(buf.is_closed());
                // Closed only once nothing is left past the cursor.
                assert_eq!(cursor, buf.tail(), "closed before draining");
                assert_eq!(t.read + t.skipped, cursor - start);
                return t;
            }
            Err(e) => panic!("unexpected {e:?} at cursor {cursor}"),
        }
        if matches!(
            form,
            ReadForm::Next | ReadForm::TryNext | ReadForm::NextAsync
        ) {
            assert_eq!(reader.cursor().revision(), cursor);
        }
    }
}

fn write(
    buf: &impl BufferApi<Tagged>,
    table: &Table,
    writer: u64,
    appends: u64,
    progress: &AtomicU64,
    seed: u64,
) -> (u64, u64, u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut new, mut unchanged, mut refused) = (0u64, 0u64, 0u64);
    let mut last: Option<(u64, Tagged)> = None;
    for seq in 1..=appends {
        progress.fetch_add(1, SeqCst);
        let value = Tagged::new((writer << 40) | seq);
        let repeat = writer == 0 && rng.u8(0..4) == 0;
        let (value, answer) = match (&last, repeat) {
            (Some((_, prev)), true) => (prev.clone(), buf.append_if_changed(prev.clone())),
            _ => (value.clone(), buf.append(value)),
        };
        match answer {
            Ok(revision) => {
                assert_eq!(refused, 0, "an append succeeded after one failed");
                if last.as_ref().is_some_and(|(r, _)| *r == revision) {
                    assert!(repeat);
                    unchanged += 1;
                } else {
                    let slot = &table.0[revision as usize];
                    assert_eq!(
                        slot.swap(value.tag, SeqCst),
                        0,
                        "revision {revision} given twice"
                    );
                    new += 1;
                    last = Some((revision, value));
                }
            }
            Err(AppendError(back)) => {
                assert_eq!(back, value, "append handed back another value");
                refused += 1;
            }
        }
        if rng.u16(0..256) == 0 {
            thread::yield_now();
        }
    }
    (new, unchanged, refused)
}

/// Snapshot then subscribe, over and over, until closed.
fn join_late(buf: &impl BufferApi<Tagged>, table: &Table) -> u64 {
    let mut joins = 0;
    while !buf.is_closed() {
        joins += 1;
        let snapshot = buf.latest().map_or(0, |e| {
            table.expect(&e);
            e.revision
        });
        let mut reader = buf.reader_at(buf.cursor_at(snapshot));
        match reader.try_next() {
            Ok(e) => {
                assert_eq!(e.revision, snapshot + 1);
                table.expect(&e);
            }
            Err(ReadError::Gap { after, .. }) => assert_eq!(after, snapshot),
            Err(ReadError::Empty) | Err(ReadError::Closed) => {}
            Err(e) => panic!("snapshot then subscribe: {e:?}"),
        }
        let retained = buf.retained();
        assert!(retained.len() <= buf.capacity());
        assert!(retained.windows(2).all(|w| w[0].revision < w[1].revision));
        retained.iter().for_each(|e| table.expect(e));
        assert!(matches!(
            buf.validate(u64::MAX),
            Err(ReadError::Future { .. })
        ));
        thread::yield_now();
    }
    joins
}

fn epoch<B: Broadcast>(index: usize, rng: &mut fastrand::Rng, totals: &mut Totals, meter: &Meter) {
    const WRITERS: u64 = 2;
    let per = if DEBUG {
        rng.u64(200..4_000)
    } else {
        rng.u64(5_000..60_000)
    };
    let capacity = if rng.bool() {
        rng.usize(1..8)
    } else {
        rng.usize(8..128)
    };
    let table = Table((0..=WRITERS * per).map(|_| AtomicU64::new(0)).collect());
    let before = meter.reset_peak();
    let buf = B::Buffer::<Tagged>::new(capacity);
    let readers = rng.usize(2..=5);
    let progress = AtomicU64::new(0);
    let writing = AtomicU64::new(WRITERS);
    let close_at = rng.u64(0..WRITERS * per + WRITERS * per / 4);
    let seeds: Vec<u64> = (0..16).map(|_| rng.u64(..)).collect();
    let specs: Vec<ReaderSpec> = (0..readers)
        .map(|_| ReaderSpec {
            form: READ_FORMS[rng.usize(..READ_FORMS.len())],
            slow: rng.u8(0..3) == 0,
            leave_after: (rng.u8(0..6) == 0).then(|| rng.u64(0..3_000)),
            from_start: rng.bool(),
        })
        .collect();
    let crew = Crew::new(format!("soak {} epoch {index}", B::NAME));
    // A thread that panics: close, so that readers blocked in a read end.
    crew.on_panic(|| buf.close());
    crew.scope(|s| {
        let reader_threads: Vec<_> = specs
            .iter()
            .enumerate()
            .map(|(i, &spec)| {
                let (buf, table, seed) = (&buf, &table, seeds[i]);
                // From the beginning (may gap at once) or from now.
                let start = if spec.from_start { 0 } else { buf.tail() };
                crew.spawn(s, move || read_all(buf, table, start, spec, capacity, seed))
            })
            .collect();
        let joiner = crew.spawn(s, || join_late(&buf, &table));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (buf, table, progress, writing, seed) =
                    (&buf, &table, &progress, &writing, seeds[8 + w as usize]);
                crew.spawn(s, move || {
                    let r = write(buf, table, w, per, progress, seed);
                    writing.fetch_sub(1, SeqCst);
                    r
                })
            })
            .collect();
        // A writer that panicked never counts itself out.
        while progress.load(SeqCst) < close_at && writing.load(SeqCst) > 0 && !crew.panicked() {
            thread::yield_now();
        }
        buf.close();
        buf.close(); // idempotent
        for w in writers {
            let (new, unchanged, refused) = w.join().unwrap();
            totals.appends += new;
            totals.unchanged += unchanged;
            totals.refused += refused;
        }
        totals.joins += joiner.join().unwrap();
        for r in reader_threads {
            let t = r.join().unwrap();
            totals.read += t.read;
            totals.skipped += t.skipped;
            totals.gaps += t.gaps;
        }
    });
    // Revisions are exactly the successful new appends.
    let appended = table.0.iter().filter(|t| t.load(SeqCst) != 0).count() as u64;
    assert_eq!(buf.tail(), appended);
    assert!(table.0[1..=appended as usize]
        .iter()
        .all(|t| t.load(SeqCst) != 0));
    assert!(matches!(buf.append(Tagged::new(1)), Err(AppendError(_))));
    drop(crew);
    drop(buf);
    let peak = meter.peak_above(before);
    let bound = BYTES_FIXED + (capacity + 2 + readers * (2 * capacity + 1) + 4) * BYTES_PER_VALUE;
    let shape = format!("capacity {capacity}, {readers} readers");
    totals.peaks.check(index, peak, bound, &shape);
    drop(table);
    meter.assert_back_to_start(&format!("after epoch {index}"));
}

/// One soak run of `B` (its share of `KEYBUS_SOAK_SECS`); prints its totals.
pub fn soak<B: Broadcast>() {
    let run = super::run(B::NAME, epoch::<B>);
    let t = &run.totals;
    println!(
        "soak {}: {run}, {}\n  \
         appends: {} new revisions, {} unchanged (append_if_changed), {} refused after close; \
         {} snapshot-then-subscribe joins\n  \
         readers: {} entries read + {} revisions skipped in {} gaps",
        B::NAME,
        t.peaks,
        t.appends,
        t.unchanged,
        t.refused,
        t.joins,
        t.read,
        t.skipped,
        t.gaps,
    );
}

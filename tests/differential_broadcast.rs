//! Differential test: random single-threaded operation sequences run against
//! `keybus::broadcast` and the one-mutex oracle `keybus::baseline::broadcast`; every
//! answer must be identical. (Concurrent behaviour is pinned by the conformance
//! suite and the loom models; here the point is exact agreement on every rule.)

use keybus::baseline::broadcast as oracle;
use keybus::broadcast as lockfree;

#[derive(Debug, Clone, Copy)]
enum Op {
    Append(u8),
    AppendIfChanged(u8),
    Close,
    TryRead { back: u64, limit: usize },
    Validate { back: i64 },
    Latest,
    Retained,
    ReaderStep(usize),
}

fn random_op(rng: &mut fastrand::Rng) -> Op {
    match rng.u8(0..100) {
        0..=34 => Op::Append(rng.u8(0..4)),
        35..=49 => Op::AppendIfChanged(rng.u8(0..4)),
        50 => Op::Close,
        51..=69 => Op::TryRead {
            back: rng.u64(0..8),
            limit: rng.usize(1..5),
        },
        70..=79 => Op::Validate {
            back: rng.i64(-2..8),
        },
        80..=84 => Op::Latest,
        85..=89 => Op::Retained,
        _ => Op::ReaderStep(rng.usize(0..3)),
    }
}

#[test]
fn lockfree_agrees_with_the_oracle_on_random_sequences() {
    let mut rng = fastrand::Rng::with_seed(0x6b65_7962_7573);
    for case in 0..300 {
        let capacity = rng.usize(1..5);
        let a = oracle::Buffer::<u8>::new(capacity);
        let b = lockfree::Buffer::<u8>::new(capacity);
        let mut ra: Vec<_> = (0..3).map(|_| a.reader_at(0)).collect();
        let mut rb: Vec<_> = (0..3).map(|_| b.reader_at(0)).collect();
        let mut log = Vec::new();
        for _ in 0..120 {
            let op = random_op(&mut rng);
            log.push(op);
            let tail = a.tail();
            let same = match op {
                Op::Append(v) => a.append(v) == b.append(v),
                Op::AppendIfChanged(v) => a.append_if_changed(v) == b.append_if_changed(v),
                Op::Close => {
                    a.close();
                    b.close();
                    a.is_closed() == b.is_closed()
                }
                Op::TryRead { back, limit } => {
                    let after = tail.saturating_sub(back);
                    a.try_read(after, limit) == b.try_read(after, limit)
                }
                Op::Validate { back } => {
                    let after = tail.saturating_add_signed(-back);
                    a.validate(after) == b.validate(after)
                }
                Op::Latest => a.latest() == b.latest(),
                Op::Retained => a.retained() == b.retained(),
                Op::ReaderStep(i) => {
                    ra[i].try_next() == rb[i].try_next() && ra[i].cursor() == rb[i].cursor()
                }
            };
            assert!(
                same,
                "case {case}, capacity {capacity}: diverged at {log:?}"
            );
            assert_eq!(a.tail(), b.tail());
        }
    }
}

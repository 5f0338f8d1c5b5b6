//! Rule 8: a close racing sends; a send either returns `Ok` and is delivered
//! or returns its value, never both and never lost.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;

// rule 8: close racing send
//
// What these real-thread races can and cannot catch: they check the
// whole implementation end to end, on the real primitives, over
// hundreds of rounds with the close landing near a random send. They
// are NOT what guarantees the close/send/drain protocol: the window
// in which a send can decide on a stale snapshot of the hub's state
// word is a few instructions wide, and a planted bug there ("enter
// the send with fetch_add instead of the CAS") survives them (see
// docs/verification.md, "Mutation audit"). That guarantee is carried by the
// models, which explore the interleaving itself: loom
// `close_vs_send_exactly_one_outcome` and `hub_close_vs_send`, and
// shuttle `close_races_many_senders` and
// `hub_close_races_senders_and_consumers`, each of which catches that
// bug at CI settings.

/// Sends per round of a rule-8 race.
const SENDS: u32 = 200;

/// What a rule-8 round saw: the keys sent `Ok` and refused, in send order, and
/// what the concurrent consumer returned.
struct RaceRound {
    oks: Vec<u32>,
    errs: Vec<u32>,
    consumed: Vec<u32>,
}

/// One round of a close racing a stream of sends. A sender thread sends keys
/// `0..SENDS` in order, each with `value(key)`, and records which were
/// accepted and which refused (no `Ok` after an `Err`; a refusal hands back
/// its key, and its value goes to `refused`); a consumer thread runs
/// `consume(live)`; this thread runs `close` once the sender has started a
/// random send (and so does a thread of the round that panics, so that the
/// others stop waiting).
fn close_race_round<I: Conflate, V: Value>(
    tx: &Sender<I, u32, V>,
    live: Receiver<I, u32, V>,
    value: impl Fn(u32) -> V + Sync,
    refused: impl Fn(u32, V) + Sync,
    consume: impl FnOnce(Receiver<I, u32, V>) -> Vec<u32> + Send,
    close: impl Fn() + Sync,
) -> RaceRound {
    let progress = AtomicU32::new(0);
    let target = fastrand::u32(0..SENDS);
    let crew = Crew::new("rule8_close_race_round");
    crew.on_panic(&close);
    let start = crew.barrier(2);
    crew.scope(|s| {
        let consumer = crew.spawn(s, move || consume(live));
        let sender = crew.spawn(s, || {
            let (mut oks, mut errs) = (Vec::new(), Vec::new());
            start.wait();
            for k in 0..SENDS {
                progress.store(k, SeqCst);
                match tx.send(k, value(k)) {
                    Ok(()) => {
                        assert!(errs.is_empty(), "Ok after Err");
                        oks.push(k);
                    }
                    Err(e) => {
                        let (key, v) = e.into_inner();
                        assert_eq!(key, k);
                        refused(k, v);
                        errs.push(k);
                    }
                }
            }
            (oks, errs)
        });
        start.wait();
        close_near(&progress, target, SENDS, &crew);
        close();
        let (oks, errs) = sender.join().unwrap();
        let consumed = consumer.join().unwrap();
        RaceRound {
            oks,
            errs,
            consumed,
        }
    })
}

/// Every `Ok` send is delivered before `Closed` by every receiver
/// (one consuming concurrently, one drained afterwards); no `Err`
/// send is ever delivered; once a send fails, all later ones do.
pub fn rule8_race_sender_close_vs_send<I: Conflate>() {
    with_stall_watchdog("rule8_race_sender_close_vs_send", move |beat| {
        const ROUNDS: usize = 600;
        let (mut mixed, mut both_sides) = (0, 0);
        for round in 0..ROUNDS {
            beat(round as u32);
            let hub = Hub::<I, u32, u32>::new();
            let tx = hub.sender();
            let closer = hub.sender();
            let live = hub.receiver();
            let mut after = hub.receiver();
            let RaceRound {
                oks,
                errs,
                consumed,
            } = close_race_round::<I, u32>(
                &tx,
                live,
                |k| k,
                |k, v| assert_eq!(v, k),
                |mut live| {
                    let mut got = Vec::new();
                    while let Ok(e) = live.recv() {
                        assert_eq!(e.sends, 1);
                        got.push(e.key);
                    }
                    got
                },
                || closer.close(),
            );
            assert_eq!(oks.len() + errs.len(), SENDS as usize);
            assert_eq!(consumed, oks, "round {round}: concurrent consumer");
            let drained: Vec<u32> = after.iter().map(|e| e.key).collect();
            assert_eq!(drained, oks, "round {round}: drained after close");
            assert_fully_closed(&mut after);
            if !oks.is_empty() && !errs.is_empty() {
                mixed += 1;
            }
            both_sides += usize::from(!oks.is_empty()) + usize::from(!errs.is_empty());
        }
        // Not an assertion on timing: a sanity note when run with --nocapture.
        println!("sender close vs send: {mixed}/{ROUNDS} rounds split, {both_sides} sides seen");
    });
}

/// `Hub::close` racing `send`: only `Ok`/`Err`, no hang, every
/// receiver ends `Closed`, what was delivered is a prefix of the
/// `Ok` sends, and nothing is leaked.
pub fn rule8_race_hub_close_vs_send<I: Conflate>() {
    with_stall_watchdog("rule8_race_hub_close_vs_send", move |beat| {
        const ROUNDS: usize = 400;
        let token = Arc::new(());
        for round in 0..ROUNDS {
            beat(round as u32);
            let hub = Hub::<I, u32, Arc<()>>::new();
            let tx = hub.sender();
            let live = hub.receiver();
            let mut idle = hub.receiver();
            let RaceRound { oks, consumed, .. } = close_race_round::<I, Arc<()>>(
                &tx,
                live,
                |_| token.clone(),
                |_, v| drop(v),
                |mut live| {
                    let mut got = Vec::new();
                    while let Ok(e) = live.recv() {
                        got.push(e.key);
                    }
                    assert_fully_closed(&mut live);
                    got
                },
                || hub.close_now(),
            );
            assert!(
                consumed.len() <= oks.len() && consumed[..] == oks[..consumed.len()],
                "round {round}: delivered {consumed:?} is not a prefix of Ok sends {oks:?}"
            );
            assert_fully_closed(&mut idle);
            assert!(hub.is_closed() && tx.is_closed());
            assert!(tx.send(0, token.clone()).is_err());
            drop((hub, tx, idle));
            assert_eq!(
                Arc::strong_count(&token),
                1,
                "round {round}: a value leaked"
            );
        }
    });
}

//! The model's send: what one `Sender::send` does at every receiver and in the
//! state table.

use super::*;

impl<K: Eq + Clone + 'static, V: Clone + 'static> Sender<K, V> {
    pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        let (receivers, merge, tombstones) = {
            let mut s = self.shared.borrow_mut();
            if s.tx_closed {
                s.refused += 1;
                return Err(SendError { key, value });
            }
            s.sent += 1;
            (s.receivers.clone(), s.merge.clone(), s.tombstones.clone())
        };
        let is_tomb = |v: &V| tombstones.as_ref().is_some_and(|t| t(v));
        let tomb = is_tomb(&value);
        // The table first, with the hub's merge; a panic there reaches no
        // receiver and drops the key's entry.
        let entry = {
            let mut s = self.shared.borrow_mut();
            match s.table.as_mut() {
                None => None,
                Some(table) => match table.iter().position(|(k, _)| *k == key) {
                    // A tombstone removes; the table holds none.
                    None if tomb => None,
                    None => {
                        table.push((key.clone(), value.clone()));
                        None
                    }
                    Some(pos) if tomb => {
                        table.remove(pos);
                        None
                    }
                    Some(pos) => Some((pos, table.remove(pos))),
                },
            }
        };
        if let Some((pos, (k, prev))) = entry {
            let merged = match &merge {
                None => Some(value.clone()),
                Some(m) => m(prev, value.clone()),
            };
            if let Some(v) = merged.filter(|v| !is_tomb(v)) {
                let mut s = self.shared.borrow_mut();
                s.table.as_mut().expect("retained").insert(pos, (k, v));
            }
        }
        // Fan out to the plain receivers (every key, newer wins, unbounded)
        // first, then to the others, each group in registration order. User
        // code runs with no borrow held, so a panic leaves every receiver
        // consistent: the ones before have the send, the panicking one and
        // the ones after do not.
        let plain = |rx: &Rc<RefCell<Rx<K, V>>>| rx.borrow().is_plain();
        let ordered: Vec<_> = receivers
            .iter()
            .filter(|rx| plain(rx))
            .chain(receivers.iter().filter(|rx| !plain(rx)))
            .collect();
        for rx in ordered {
            let accepted = rx.borrow().filter.accepts(&key);
            if !accepted {
                rx.borrow_mut().stats.filtered += 1;
                continue;
            }
            let mut r = rx.borrow_mut();
            let Some(pos) = r.queue.iter().position(|slot| slot.key == key) else {
                r.stats.received += 1;
                if r.max_pending.is_some_and(|n| r.queue.len() >= n) {
                    r.stats.overflowed += 1;
                    continue;
                }
                r.queue.push_back(Slot {
                    key: key.clone(),
                    value: value.clone(),
                    sends: 1,
                });
                continue;
            };
            r.stats.received += 1;
            // Take the slot out before the merge: if the merge panics, the pending
            // value is gone (conflate rule 9), exactly as here.
            let prev = r.queue.remove(pos).expect("position is in range");
            let merge = r.merge.clone();
            drop(r);
            let prev_sends = prev.sends;
            // No merge folds across a removal: a tombstone replaces what is
            // pending, and a value replaces a pending tombstone.
            let across = tomb || is_tomb(&prev.value);
            let merged = match merge {
                None => Some(value.clone()),
                Some(_) if across => Some(value.clone()),
                Some(m) => {
                    let next = value.clone();
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        m(prev.value, next)
                    })) {
                        Ok(merged) => merged,
                        Err(payload) => {
                            rx.borrow_mut().stats.dropped += prev_sends + 1;
                            std::panic::resume_unwind(payload);
                        }
                    }
                }
            };
            match merged {
                Some(merged) => rx.borrow_mut().queue.insert(
                    pos,
                    Slot {
                        key: prev.key,
                        value: merged,
                        sends: prev_sends + 1,
                    },
                ),
                None => rx.borrow_mut().stats.annihilated += prev_sends + 1,
            }
        }
        Ok(())
    }

    pub fn close(&self) {
        self.shared.borrow_mut().tx_closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.shared.borrow().tx_closed
    }
}

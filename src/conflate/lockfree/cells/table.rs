//! The state table's reads over the hub's cells: `latest`, `snapshot` and a
//! snapshot receiver's seeding (docs/design.md, "The state table is the
//! cells", "Snapshot registration is one instant").

use super::*;

impl<K: Eq + Clone, V: Clone> Cells<K, V> {
    /// The table's value for `key` (`retain_latest`).
    pub(crate) fn latest(&self, hash: u64, key: &K) -> Option<V> {
        let sh = self.lock(shard_of(hash));
        let i = sh.find(hash as u32, key)?;
        let c = sh.cell(i);
        if c.retained() {
            c.value().cloned()
        } else {
            None
        }
    }

    /// The whole table as of one instant, in first-touch order: every shard
    /// is locked (in index order, the only place that holds more than one)
    /// before the first is read.
    pub(crate) fn snapshot(&self) -> Vec<(K, V)> {
        self.table_entries(|_, k, v| (k.clone(), v.clone()))
    }

    fn table_entries<T>(&self, mut f: impl FnMut(CellId, &K, &V) -> T) -> Vec<T> {
        let (merged, guards) = self.lock_all();
        let mut out: Vec<(u64, T)> = Vec::new();
        for (s, sh) in guards.iter().enumerate() {
            for &i in sh.d_ref().index.iter() {
                let c = sh.cell(i);
                if let (true, Some(v)) = (c.retained(), c.value()) {
                    out.push((sh.d_ref().orders[i as usize], f(cell_id(s, i), &c.key, v)));
                }
            }
        }
        drop(guards);
        drop(merged);
        out.sort_unstable_by_key(|&(order, _)| order);
        out.into_iter().map(|(_, t)| t).collect()
    }

    /// Seeds a snapshot cell receiver with the whole table, in table order,
    /// `sends == 0`. Called with no send in flight (the registration holds
    /// sends off), before `rx` is registered.
    pub(crate) fn seed(&self, rx: &CellRx) {
        let cells = self.table_entries(|c, _, _| c);
        for c in cells {
            let (s, i) = split(c);
            let sh = self.lock(s);
            let seq = sh.place(i).seq.load(Ordering::Relaxed);
            let pushed = rx.queue.push(c, seq);
            let cell = sh.cell(i);
            cell.set_mark(rx.id, PENDING | u16::from(pushed.epoch));
            cell.stamp = STALE;
        }
    }
}

//! One shard's pending entries of an own-value receiver: a slab with stable
//! indices ([`Slab`]) and a hash table of those indices ([`Keys`])
//! (docs/design.md, "Own-value receivers: the core").

use hashbrown::hash_table::HashTable;
use std::mem;
use std::num::NonZeroU32;

/// Bits of a packed place that name the shard.
pub(crate) const SHARD_BITS: u32 = 3;

/// Shards per receiver (see `core/` for why eight).
pub(crate) const SHARDS: usize = 1 << SHARD_BITS;

/// Slab indices are below this, so a packed place is never `u32::MAX` (the
/// ticket list's free marker).
pub(crate) const MAX_SLAB: u32 = u32::MAX >> SHARD_BITS;

/// "No place": the end of the free list.
const NIL: u32 = u32::MAX;

/// A ticket's name for an entry: its shard and slab index in one word.
pub(crate) fn pack(shard: usize, index: u32) -> u32 {
    debug_assert!(shard < SHARDS && index < MAX_SLAB);
    index << SHARD_BITS | shard as u32
}

/// The shard and slab index a packed place names.
pub(crate) fn unpack(place: u32) -> (usize, u32) {
    ((place & (SHARDS as u32 - 1)) as usize, place >> SHARD_BITS)
}

/// The table's hash of an entry, from the 32 bits of the hub's hash it keeps
/// (the low ones; the shard comes from bits 40 and up). hashbrown takes the
/// bucket from the low bits of this and the tag from the top 7: multiplying by
/// an odd constant keeps the low bits a bijection of the stored ones and mixes
/// all of them into the top.
pub(crate) fn table_hash(hash32: u32) -> u64 {
    u64::from(hash32).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A pending value: the key (its only copy in the receiver), the value, the
/// sends folded into it, and where its ticket is. 40 bytes for `u64` keys and
/// values, and `Place` costs nothing more (the `NonZeroU32` is its niche).
pub(crate) struct Pending<K, V> {
    pub(crate) key: K,
    pub(crate) value: V,
    pub(crate) sends: u64,
    /// The low 32 bits of the hub's hash of `key` (see [`table_hash`]).
    pub(crate) hash: u32,
    /// The cut epoch the value became pending in (wrapping: live entries are of
    /// the current epoch or the one before, see `core/take.rs`, `cut_into`).
    pub(crate) epoch: u32,
    /// The segment of the ticket list its ticket was pushed into (wrapping).
    pub(crate) seg: u32,
    /// Its ticket's index in that list, plus one.
    pub(crate) ticket: NonZeroU32,
}

impl<K, V> Pending<K, V> {
    /// Whether the ticket at `index` of the list of segment `seg` is this
    /// entry's. Within one list a linked ticket's index is never reused, and an
    /// entry whose ticket went stale was freed before any entry recorded a
    /// later segment, so an index and a segment name one entry at most.
    pub(crate) fn is_ticket(&self, index: u32, seg: u32) -> bool {
        self.ticket.get() == index.wrapping_add(1) && self.seg == seg
    }
}

enum Place<K, V> {
    Full(Pending<K, V>),
    /// Next free place, or `NIL`.
    Free(u32),
}

/// Entries with stable indices; freed places are reused first.
pub(crate) struct Slab<K, V> {
    places: Vec<Place<K, V>>,
    free: u32,
    /// Full places.
    len: u32,
    /// The epoch of the newest entry made here (wrapping). A cut that finds it
    /// older than its own epoch knows every entry here is the cut's.
    pub(crate) newest: u32,
}

impl<K, V> Slab<K, V> {
    fn new() -> Self {
        Slab {
            places: Vec::new(),
            free: NIL,
            len: 0,
            newest: 0,
        }
    }

    /// Full places.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// The index the next [`Slab::insert`] will use.
    ///
    /// # Panics
    /// If the slab is full (`MAX_SLAB` entries), before anything changed.
    pub(crate) fn next_index(&self) -> u32 {
        if self.free != NIL {
            return self.free;
        }
        u32::try_from(self.places.len())
            .ok()
            .filter(|&i| i < MAX_SLAB)
            .expect("more than 2^29 keys pending in one shard of a receiver")
    }

    /// Stores `entry` at [`Slab::next_index`] and returns that index.
    pub(crate) fn insert(&mut self, entry: Pending<K, V>) -> u32 {
        let index = self.next_index();
        if self.free != NIL {
            match mem::replace(&mut self.places[index as usize], Place::Full(entry)) {
                Place::Free(next) => self.free = next,
                Place::Full(_) => unreachable!("the free list names free places"),
            }
        } else {
            self.places.push(Place::Full(entry));
        }
        self.len += 1;
        index
    }

    pub(crate) fn get(&self, index: u32) -> Option<&Pending<K, V>> {
        match self.places.get(index as usize) {
            Some(Place::Full(e)) => Some(e),
            _ => None,
        }
    }

    /// The entry at an index the table holds.
    fn indexed(&self, index: u32) -> &Pending<K, V> {
        self.get(index).expect("the table names full places")
    }

    /// Takes the entry at `index` out and frees its place.
    pub(crate) fn remove(&mut self, index: u32) -> Pending<K, V> {
        let entry = self.vacate(index);
        self.release(index);
        entry
    }

    /// Takes the entry at `index` out but keeps the place reserved (off the
    /// free list, still counted) until the caller [`Slab::release`]s it.
    pub(crate) fn vacate(&mut self, index: u32) -> Pending<K, V> {
        match mem::replace(&mut self.places[index as usize], Place::Free(NIL)) {
            Place::Full(entry) => entry,
            Place::Free(_) => unreachable!("vacating a free place"),
        }
    }

    /// Frees a place [`Slab::vacate`] reserved. Once the slab holds no entry,
    /// it forgets its free list and restarts at index 0 (keeping its
    /// capacity), so it never holds more places than the peak pending count.
    pub(crate) fn release(&mut self, index: u32) {
        self.places[index as usize] = Place::Free(self.free);
        self.free = index;
        self.len -= 1;
        if self.len == 0 {
            self.places.clear();
            self.free = NIL;
        }
    }

    /// Takes the entry the ticket at `index` of segment `seg`'s list names, if
    /// it is still here.
    pub(crate) fn take_ticket(
        &mut self,
        slab_index: u32,
        index: u32,
        seg: u32,
    ) -> Option<Pending<K, V>> {
        if self.get(slab_index)?.is_ticket(index, seg) {
            Some(self.remove(slab_index))
        } else {
            None
        }
    }

    /// [`Slab::take_ticket`] for a slab a cut took whole: frees nothing for
    /// reuse (the cut clears the slab once it has walked its tickets).
    pub(crate) fn take_ticket_whole(
        &mut self,
        slab_index: u32,
        index: u32,
        seg: u32,
    ) -> Option<Pending<K, V>> {
        let place = self.places.get_mut(slab_index as usize)?;
        if !matches!(place, Place::Full(e) if e.is_ticket(index, seg)) {
            return None;
        }
        self.len -= 1;
        match mem::replace(place, Place::Free(NIL)) {
            Place::Full(entry) => Some(entry),
            Place::Free(_) => unreachable!("checked full"),
        }
    }

    /// Every entry's sends (for a close that drops them).
    pub(crate) fn sends(&self) -> u64 {
        self.places
            .iter()
            .map(|s| match s {
                Place::Full(e) => e.sends,
                Place::Free(_) => 0,
            })
            .sum()
    }

    /// Drops every entry, keeping the capacity.
    pub(crate) fn clear(&mut self) {
        self.places.clear();
        self.free = NIL;
        self.len = 0;
    }
}

/// One shard's keys: the table of indexed entries and the slab that holds them.
/// The slab is boxed and made at the shard's first entry, so an idle shard is
/// the table's empty header and one null pointer (a shard is one cache line
/// with its lock and counter; see `core/mod.rs`, `Shard`).
pub(crate) struct Keys<K, V> {
    pub(crate) table: HashTable<u32>,
    pub(crate) slab: Option<Box<Slab<K, V>>>,
}

impl<K, V> Default for Keys<K, V> {
    fn default() -> Self {
        Keys {
            table: HashTable::new(),
            slab: None,
        }
    }
}

impl<K, V> Keys<K, V> {
    /// The slab, made on first use (the one allocation of an idle shard).
    pub(crate) fn slab_mut(&mut self) -> &mut Slab<K, V> {
        self.slab.get_or_insert_with(|| Box::new(Slab::new()))
    }

    /// Removes `index` from the table, if it is there (a detached entry is
    /// not). A probe by the stored hash, comparing indices.
    pub(crate) fn unindex(&mut self, hash32: u32, index: u32) -> bool {
        match self.table.find_entry(table_hash(hash32), |&i| i == index) {
            Ok(found) => {
                found.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Adds `index` (already in the slab) to the table. May grow the table,
    /// rehashing from the stored hashes.
    pub(crate) fn index(&mut self, hash32: u32, index: u32) {
        let Keys { table, slab } = self;
        let slab = slab.as_deref().expect("the entry is in the slab");
        table.insert_unique(table_hash(hash32), index, |&i| {
            table_hash(slab.indexed(i).hash)
        });
    }

    /// Takes the entry the ticket at `index` of segment `seg`'s list names, if
    /// it is still here, out of the slab and (if indexed) the table.
    pub(crate) fn take_ticket(
        &mut self,
        slab_index: u32,
        index: u32,
        seg: u32,
    ) -> Option<Pending<K, V>> {
        let entry = self
            .slab
            .as_deref_mut()?
            .take_ticket(slab_index, index, seg)?;
        self.unindex(entry.hash, slab_index);
        Some(entry)
    }
}

impl<K: Eq, V> Keys<K, V> {
    /// The slab index and entry of `key`'s indexed entry: one probe, one slab
    /// access. Never reserves room, so a lookup that hits allocates nothing.
    pub(crate) fn find(&mut self, hash: u64, key: &K) -> Option<(u32, &mut Pending<K, V>)> {
        let Keys { table, slab } = self;
        let slab = slab.as_deref_mut()?;
        let places = &slab.places;
        let &index = table.find(
            table_hash(hash as u32),
            |&i| matches!(places.get(i as usize), Some(Place::Full(e)) if e.key == *key),
        )?;
        match &mut slab.places[index as usize] {
            Place::Full(entry) => Some((index, entry)),
            Place::Free(_) => unreachable!("the table names full places"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: u64, ticket: u32, seg: u32) -> Pending<u64, u64> {
        Pending {
            key,
            value: key * 10,
            sends: 1,
            hash: key as u32,
            epoch: 0,
            seg,
            ticket: NonZeroU32::new(ticket + 1).unwrap(),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Place<u64, u64>>(), 40);
        assert!(std::mem::size_of::<Keys<u64, u64>>() <= 40);
    }

    #[test]
    fn pack_round_trips() {
        for shard in 0..SHARDS {
            for index in [0, 1, 12345, MAX_SLAB - 1] {
                let place = pack(shard, index);
                assert_ne!(place, u32::MAX);
                assert_eq!(unpack(place), (shard, index));
            }
        }
    }

    #[test]
    fn indices_are_stable_and_reused_and_tickets_tell_stale_from_live() {
        let mut keys: Keys<u64, u64> = Keys::default();
        for k in 0..4u64 {
            let i = keys.slab_mut().insert(entry(k, k as u32, 7));
            assert_eq!(i, k as u32);
            keys.index(k as u32, i);
        }
        assert_eq!(keys.find(2, &2).map(|(i, e)| (i, e.key)), Some((2, 2)));
        // Ticket 1 of segment 7 names entry 1; the same index in segment 6 does not.
        assert!(keys.take_ticket(1, 1, 6).is_none());
        let e = keys.take_ticket(1, 1, 7).unwrap();
        assert_eq!((e.key, e.value), (1, 10));
        assert!(keys.find(1, &1).is_none());
        // Place 1 is reused by the next insert; the old ticket stays stale.
        assert_eq!(keys.slab_mut().next_index(), 1);
        let i = keys.slab_mut().insert(entry(9, 0, 8));
        keys.index(9, i);
        assert_eq!(i, 1);
        assert!(keys.take_ticket(1, 1, 7).is_none());
        // A detached entry: in the slab, not in the table; still taken by its ticket.
        assert!(keys.unindex(3, 3));
        assert!(keys.find(3, &3).is_none());
        assert_eq!(keys.take_ticket(3, 3, 7).map(|e| e.key), Some(3));
        // Emptied, the slab restarts at index 0.
        for (slab_index, ticket, seg) in [(0, 0, 7), (2, 2, 7), (1, 0, 8)] {
            assert!(keys.take_ticket(slab_index, ticket, seg).is_some());
        }
        assert_eq!(keys.slab_mut().len(), 0);
        assert_eq!(keys.slab_mut().next_index(), 0);
        assert!(keys.table.is_empty());
    }
}

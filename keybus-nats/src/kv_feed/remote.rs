//! The value a KV feed sends into its hub: a change with its KV revision.

/// What happened to a key in the bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change<V> {
    /// A put: the key's new value.
    Put(V),
    /// A delete marker (`KV-Operation: DEL`): the key is gone.
    Delete,
    /// A purge marker (`KV-Operation: PURGE`, or a server marker for an
    /// expired key): the key is gone, its history too.
    Purge,
}

/// One KV entry as a fed hub carries it: the change and the bucket revision it
/// got. Deletes and purges arrive as tombstones ([`Remote::is_tombstone`]), so
/// a receiver learns that a key went away instead of keeping its last value.
///
/// ```
/// use keybus_nats::{Change, Remote};
///
/// let put = Remote { revision: 7, change: Change::Put(0.5) };
/// let gone: Remote<f64> = Remote { revision: 9, change: Change::Delete };
/// assert_eq!(put.value(), Some(&0.5));
/// assert!(gone.is_tombstone());
/// // A merge that keeps the higher revision, for hubs fed from more than one place.
/// assert_eq!(Remote::newest(gone.clone(), put.clone()), Some(gone));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Remote<V> {
    /// The bucket revision (the stream sequence of the KV entry).
    pub revision: u64,
    /// What happened.
    pub change: Change<V>,
}

impl<V> Remote<V> {
    /// The value, if the change is a put.
    pub fn value(&self) -> Option<&V> {
        match &self.change {
            Change::Put(v) => Some(v),
            _ => None,
        }
    }

    /// The value, if the change is a put.
    pub fn into_value(self) -> Option<V> {
        match self.change {
            Change::Put(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the key was deleted or purged.
    pub fn is_tombstone(&self) -> bool {
        !matches!(self.change, Change::Put(_))
    }

    /// A hub merge keeping the higher revision (the feed itself only ever
    /// sends rising revisions; this guards a hub fed by more than one feed).
    pub fn newest(pending: Self, incoming: Self) -> Option<Self> {
        Some(if incoming.revision >= pending.revision {
            incoming
        } else {
            pending
        })
    }
}

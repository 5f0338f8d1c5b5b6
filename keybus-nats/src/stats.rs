//! Counters a bridge task writes and any handle reads without waiting.

use crate::error::BridgeError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A monotonic counter or a gauge, written by the bridge's task only.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The latest error a bridge went on from.
#[derive(Debug, Default)]
pub(crate) struct LastError(Mutex<Option<BridgeError>>);

impl LastError {
    pub(crate) fn set(&self, e: BridgeError) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
    pub(crate) fn get(&self) -> Option<BridgeError> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

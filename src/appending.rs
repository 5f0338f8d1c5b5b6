//! [`Appending`], the caller's `Vec` while a batch read of either bus
//! appends to it (`try_recv_all_into`, `try_read_into`).

/// The caller's `Vec` while a batch read appends to it (`try_recv_all_into`,
/// `try_read_into`). A batch can unwind half-way (a user `Clone` of a value the
/// bus still holds); then what it had appended is dropped here, so the caller
/// never finds part of a batch in `out`. `done` rather than
/// `thread::panicking()`: a batch that returns normally while some outer panic
/// unwinds keeps its entries.
pub(crate) struct Appending<'a, T> {
    pub(crate) out: &'a mut Vec<T>,
    start: usize,
    pub(crate) done: bool,
}

impl<'a, T> Appending<'a, T> {
    pub(crate) fn new(out: &'a mut Vec<T>) -> Self {
        Appending {
            start: out.len(),
            out,
            done: false,
        }
    }
}

impl<T> Drop for Appending<'_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.out.truncate(self.start);
        }
    }
}

//! The model's receive side: what each receiving form returns, by the
//! precedence of conflate rule 6, and what it counts.

use super::*;

/// What a receive finds, by the precedence of conflate rule 6: closed beats empty beats value.
enum Ready {
    Closed,
    Empty,
    Value,
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> Receiver<K, V> {
    fn ready(&self) -> Ready {
        let (hub_closed, tx_closed) = {
            let s = self.shared.borrow();
            (s.hub_closed, s.tx_closed)
        };
        let (closed, pending) = {
            let r = self.rx.borrow();
            (r.closed, !r.queue.is_empty())
        };
        if closed || hub_closed {
            Ready::Closed
        } else if pending {
            Ready::Value
        } else if tx_closed {
            // Drained after a graceful close: the receiver deregisters itself.
            self.close();
            Ready::Closed
        } else {
            Ready::Empty
        }
    }

    /// Takes the head; `None` if the consumer drops it (see `Rx::took`).
    fn pop(&self) -> Option<Event<K, V>> {
        let mut r = self.rx.borrow_mut();
        let slot = r.queue.pop_front().expect("ready");
        r.took(slot)
    }

    pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
        loop {
            match self.ready() {
                Ready::Closed => return Err(TryRecvError::Closed),
                Ready::Empty => return Err(TryRecvError::Empty),
                Ready::Value => {
                    if let Some(event) = self.pop() {
                        return Ok(event);
                    }
                }
            }
        }
    }

    pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
        loop {
            match self.ready() {
                Ready::Closed => return Err(TryRecvError::Closed),
                Ready::Empty => return Err(TryRecvError::Empty),
                Ready::Value => {
                    let mut r = self.rx.borrow_mut();
                    let all = std::mem::take(&mut r.queue);
                    let batch: Vec<_> = all.into_iter().filter_map(|slot| r.took(slot)).collect();
                    if !batch.is_empty() {
                        return Ok(batch);
                    }
                }
            }
        }
    }

    pub fn peek(&mut self) -> Result<Event<K, V>, TryRecvError> {
        loop {
            match self.ready() {
                Ready::Closed => return Err(TryRecvError::Closed),
                Ready::Empty => return Err(TryRecvError::Empty),
                Ready::Value if self.rx.borrow().head_is_dropped() => {
                    let dropped = self.pop();
                    assert!(dropped.is_none());
                }
                Ready::Value => {
                    let r = self.rx.borrow();
                    let head = r.queue.front().expect("ready");
                    return Ok(Event {
                        key: head.key.clone(),
                        value: head.value.clone(),
                        sends: head.sends,
                    });
                }
            }
        }
    }

    /// Only what a single thread can observe: nothing arrives while it "waits", so
    /// any timeout answers like a zero one.
    pub fn recv_timeout(&mut self, _timeout: Duration) -> Result<Event<K, V>, RecvTimeoutError> {
        match self.try_recv() {
            Ok(event) => Ok(event),
            Err(TryRecvError::Closed) => Err(RecvTimeoutError::Closed),
            Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Ready at once unless nothing is pending; then pending forever (no other
    /// thread can send while a single-threaded sequence polls).
    pub fn recv_async(&mut self) -> impl Future<Output = Result<Event<K, V>, RecvError>> + '_ {
        let now = self.try_recv();
        async move {
            match now {
                Err(TryRecvError::Empty) => std::future::pending().await,
                Err(TryRecvError::Closed) => Err(RecvError),
                Ok(event) => Ok(event),
            }
        }
    }

    /// Only callable where it would not block: a single thread cannot wait for a
    /// send.
    pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
        match self.try_recv() {
            Ok(event) => Ok(event),
            Err(TryRecvError::Closed) => Err(RecvError),
            Err(TryRecvError::Empty) => panic!("model: recv would block forever"),
        }
    }

    pub fn recv_deadline(&mut self, _deadline: Instant) -> Result<Event<K, V>, RecvTimeoutError> {
        self.recv_timeout(Duration::ZERO)
    }

    /// A blocking iterator; only advanced where `recv` would not block.
    pub fn iter(&mut self) -> impl Iterator<Item = Event<K, V>> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }

    pub fn try_iter(&mut self) -> impl Iterator<Item = Event<K, V>> + '_ {
        std::iter::from_fn(move || self.try_recv().ok())
    }

    pub fn close(&self) {
        let mut r = self.rx.borrow_mut();
        if !r.closed {
            r.close_and_drop();
            drop(r);
            deregister(&self.shared, &self.rx);
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        let r = self.rx.borrow();
        let mut s = r.stats;
        s.pending = r.queue.len() as u64;
        s.pending_sends = r.queue.iter().map(|slot| slot.sends).sum();
        s
    }

    pub fn is_closed(&self) -> bool {
        let s = self.shared.borrow();
        let r = self.rx.borrow();
        r.closed || s.hub_closed || (s.tx_closed && r.queue.is_empty())
    }

    pub fn len(&self) -> usize {
        let r = self.rx.borrow();
        if r.closed {
            0
        } else {
            r.queue.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K, V> Drop for Receiver<K, V> {
    fn drop(&mut self) {
        let mut r = self.rx.borrow_mut();
        r.close_and_drop();
        drop(r);
        deregister(&self.shared, &self.rx);
    }
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> futures_core::Stream for Receiver<K, V> {
    type Item = Event<K, V>;

    /// Pending while empty (no other thread can send meanwhile); ends at closed.
    fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Event<K, V>>> {
        match self.get_mut().try_recv() {
            Ok(event) => Poll::Ready(Some(event)),
            Err(TryRecvError::Closed) => Poll::Ready(None),
            Err(TryRecvError::Empty) => Poll::Pending,
        }
    }
}

//! Parking for every blocking and async receive in the crate: one non-blocking
//! attempt turned into its blocking, deadline, async and `Stream` forms
//! (docs/design.md, "Parking without lost wake-ups").

#[allow(unused_imports)]
use crate::sync::ListenerExt as _;
use crate::sync::{fence, Listener, Notify, Ordering};
use crossbeam_utils::Backoff;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// Model checkers explore every retry as a new branch, and a spin teaches them
/// nothing a park does not: they park at once.
const SPIN_BEFORE_PARK: bool = !cfg!(any(loom, shuttle));

/// Blocks until `attempt` answers, or `deadline` passes.
///
/// Returns `None` only when the deadline passed and a last attempt after it still
/// had nothing: a value or a close that is ready at the deadline wins over the
/// timeout, like `std::sync::mpsc::Receiver::recv_timeout`.
pub(crate) fn block<R>(
    notify: &Notify,
    deadline: Option<Instant>,
    attempt: impl FnMut() -> Option<R>,
) -> Option<R> {
    block_armed(notify, deadline, full_fence, attempt)
}

/// The registration step of the default protocol: a `SeqCst` fence between
/// registering and the last look, paired with the fence `event-listener` emits
/// at the start of every `notify`: either the notifier sees this listener, or
/// this look sees what was published before the notify (attempts may read
/// lock-free state).
fn full_fence() {
    fence(Ordering::SeqCst);
}

/// [`block`] with the step between registering a listener and the last look
/// supplied by the caller: `arm` must make the last look and the notifier's
/// check agree (either the notifier sees this listener, or the look sees what
/// the notifier published). A caller whose notifier skips `notify` unless a
/// waiter announced itself announces itself in `arm` (see `broadcast/lockfree/ring.rs`).
pub(crate) fn block_armed<R>(
    notify: &Notify,
    deadline: Option<Instant>,
    mut arm: impl FnMut(),
    mut attempt: impl FnMut() -> Option<R>,
) -> Option<R> {
    let backoff = Backoff::new();
    loop {
        if let Some(r) = attempt() {
            return Some(r);
        }
        if SPIN_BEFORE_PARK && !backoff.is_completed() {
            backoff.snooze();
            continue;
        }
        let listener = notify.listen();
        // Registration, then `arm` (see `full_fence`), then the last look.
        arm();
        if let Some(r) = attempt() {
            return Some(r);
        }
        match deadline {
            None => listener.wait(),
            Some(deadline) => {
                if listener.wait_deadline(deadline).is_none() {
                    return attempt();
                }
            }
        }
    }
}

/// One poll of the async form: `listener` is the caller's parking state, kept
/// between polls (in a future, or in a `Stream` implementor).
///
/// Dropping the caller's state between polls consumes nothing: `attempt` only
/// takes a value when it returns it.
pub(crate) fn poll_attempt<R>(
    notify: &Notify,
    listener: &mut Option<Listener>,
    cx: &mut Context<'_>,
    attempt: impl FnMut() -> Option<R>,
) -> Poll<R> {
    poll_attempt_armed(notify, listener, cx, full_fence, attempt)
}

/// [`poll_attempt`] with the caller's registration step (see [`block_armed`]).
pub(crate) fn poll_attempt_armed<R>(
    notify: &Notify,
    listener: &mut Option<Listener>,
    cx: &mut Context<'_>,
    mut arm: impl FnMut(),
    mut attempt: impl FnMut() -> Option<R>,
) -> Poll<R> {
    loop {
        if let Some(r) = attempt() {
            *listener = None;
            return Poll::Ready(r);
        }
        match listener {
            None => {
                *listener = Some(notify.listen());
                // See `block_armed`: registration, then `arm`, then the look.
                arm();
            }
            Some(l) => match Pin::new(l).poll(cx) {
                Poll::Ready(()) => *listener = None,
                Poll::Pending => return Poll::Pending,
            },
        }
    }
}

/// A future over an attempt closure; see [`poll_attempt`] (and
/// [`poll_attempt_armed`] for `arm`).
pub(crate) struct WaitFuture<'a, F, A = fn()> {
    notify: &'a Notify,
    listener: Option<Listener>,
    arm: A,
    attempt: F,
}

impl<'a, F> WaitFuture<'a, F> {
    pub(crate) fn new(notify: &'a Notify, attempt: F) -> Self {
        WaitFuture::armed(notify, full_fence, attempt)
    }
}

impl<'a, F, A> WaitFuture<'a, F, A> {
    /// A future whose registration step is `arm` (see [`block_armed`]).
    pub(crate) fn armed(notify: &'a Notify, arm: A, attempt: F) -> Self {
        WaitFuture {
            notify,
            listener: None,
            arm,
            attempt,
        }
    }
}

impl<F, A, R> Future for WaitFuture<'_, F, A>
where
    F: FnMut() -> Option<R> + Unpin,
    A: FnMut() + Unpin,
{
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        poll_attempt_armed(
            this.notify,
            &mut this.listener,
            cx,
            &mut this.arm,
            &mut this.attempt,
        )
    }
}

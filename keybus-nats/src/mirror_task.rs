//! The task behind a mirror's handle ([`crate::MirrorHandle`],
//! [`crate::StreamMirrorHandle`]): its request channel and its join handle.
//! Dropping it aborts the task.

use std::future::Future;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// What a handle asks of its mirror's task.
pub(crate) enum Request {
    /// Answer once everything the mirror's source held at the time is
    /// written (or counted as not written).
    Settle(oneshot::Sender<()>),
}

#[derive(Debug)]
pub(crate) struct MirrorTask {
    requests: mpsc::Sender<Request>,
    /// `None` only after [`MirrorTask::stop`].
    task: Option<JoinHandle<()>>,
}

impl MirrorTask {
    /// Spawns `run(inbox)` on the current tokio runtime. Panics outside one.
    pub(crate) fn spawn<F>(run: impl FnOnce(mpsc::Receiver<Request>) -> F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (requests, inbox) = mpsc::channel(16);
        MirrorTask {
            requests,
            task: Some(tokio::spawn(run(inbox))),
        }
    }

    /// Waits until the task answers a settle request; at once if it ended.
    pub(crate) async fn settle(&self) {
        let (tx, rx) = oneshot::channel();
        if self.requests.send(Request::Settle(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Whether the task has ended (or was stopped).
    pub(crate) fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Aborts the task and waits until it has stopped.
    pub(crate) async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for MirrorTask {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

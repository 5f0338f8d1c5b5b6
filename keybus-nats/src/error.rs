//! What a bridge records when something could not cross the wire.

use crate::codec::CodecError;
use std::error::Error;
use std::fmt;

/// One failure a bridge met and went on from: counted in its stats, the latest
/// kept as `last_error`. Lowercase `Display`, naming the key (or revision) and
/// the cause.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BridgeError {
    /// A key the key codec refused (or a KV key that did not decode). The key
    /// is skipped until its next update.
    Key {
        /// The key, as `Debug` prints it (or the KV key read from the bucket).
        key: String,
        /// Why.
        error: CodecError,
    },
    /// A value the value codec refused: encoding on the way out (the key is
    /// skipped until its next update), decoding on the way in (that revision is
    /// skipped).
    Value {
        /// The KV key, or `#<revision>` for a stream entry.
        key: String,
        /// Why.
        error: CodecError,
    },
    /// The server refused the write for good (a payload over `max_payload` or
    /// the bucket's `max_value_size`, an invalid subject). Not retried: the key
    /// waits for its next update.
    Rejected {
        /// The KV key, or `#<revision>` for a stream entry.
        key: String,
        /// The server's (or client's) reason.
        reason: String,
    },
    /// A failure worth retrying (a timeout, a lost connection, a missing
    /// stream); the bridge backs off and tries again.
    Transient {
        /// What failed.
        reason: String,
    },
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::Key { key, error } => write!(f, "key {key}: {error}"),
            BridgeError::Value { key, error } => write!(f, "value of {key}: {error}"),
            BridgeError::Rejected { key, reason } => write!(f, "server refused {key}: {reason}"),
            BridgeError::Transient { reason } => write!(f, "{reason} (retrying)"),
        }
    }
}

impl Error for BridgeError {}

/// Whether a client error is the server's (or client's) final word on this
/// message, rather than a timeout or a lost connection: a JetStream error
/// reply (a size limit, a bad subject) or a payload the client refuses to send.
pub(crate) fn is_permanent(err: &(dyn Error + 'static)) -> bool {
    use async_nats::jetstream::context::{PublishError, PublishErrorKind};
    use async_nats::jetstream::kv::{PutError, PutErrorKind};
    let mut next: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(p) = e.downcast_ref::<PutError>() {
            if p.kind() == PutErrorKind::InvalidKey {
                return true;
            }
        }
        if let Some(p) = e.downcast_ref::<PublishError>() {
            match p.kind() {
                PublishErrorKind::MaxPayloadExceeded => return true,
                // Wrong last sequence is a sync question the stream mirror
                // answers itself; the rest are timeouts and lost links.
                PublishErrorKind::Other => {}
                _ => return false,
            }
        }
        if e.downcast_ref::<async_nats::jetstream::Error>().is_some() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The full chain of causes, one line: the client's errors often say only
/// "publish failed" at the top.
pub(crate) fn chain(err: &(dyn Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        next = e.source();
    }
    out
}

//! # keybus-nats
//!
//! keybus's buses, past one process: conflate hubs and broadcast buffers
//! mirrored through NATS JetStream, with the contracts they keep locally.
//!
//! | local | remote | bridge |
//! |---|---|---|
//! | a conflate hub (latest value per key) | a KV bucket, `history = 1` | [`KvMirror`] (hub → bucket), [`KvFeed`] (bucket → hub) |
//! | a broadcast buffer (a ring of revisions) | a stream, `max_messages = capacity`, discard old, sequence = revision | [`StreamMirror`] (buffer → stream), [`RemoteBuffer`] / [`RemoteReader`] (read it back) |
//!
//! What is exact across the wire, what is at-least-once and what converges is
//! in `docs/nats.md` (the mapping table). In short: the bucket converges to
//! the hub's latest value per key (or its absence); a fed hub's receivers see
//! each key's revisions only rising; a remote reader gets every revision in
//! order or a [`ReadError::Gap`](keybus::ReadError::Gap) naming exactly its
//! cursor and the oldest retained revision.
//!
//! Every bridge is a tokio task with a handle (stats, a way to wait, a way to
//! stop); none ever makes a producer wait. Keys and values cross with the
//! [`codec`] traits.
#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

mod backoff;
pub mod codec;
mod error;
mod key;
mod kv_feed;
mod kv_mirror;
mod mirror_task;
mod remote_buffer;
mod setup;
mod stats;
mod stream_mirror;

pub use backoff::Backoff;
pub use codec::CodecError;
pub use error::BridgeError;
pub use key::{validate_filter, validate_key};
pub use kv_feed::{Change, FeedHandle, FeedStats, KvFeed, Remote, Start};
pub use kv_mirror::{KvMirror, MirrorHandle, MirrorStats};
pub use remote_buffer::{RemoteBuffer, RemoteReadError, RemoteReader};
pub use setup::{ensure_bucket, SetupError};
pub use stream_mirror::{
    StreamMirror, StreamMirrorHandle, StreamMirrorStats, ERROR_HEADER, GENERATION_HEADER,
    REVISION_HEADER,
};

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

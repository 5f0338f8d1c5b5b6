//! keybus-nats against a real nats-server (one per test, on 127.0.0.1).

mod faults;
mod kv_feed;
mod kv_mirror;
mod server;
mod stream;
mod support;

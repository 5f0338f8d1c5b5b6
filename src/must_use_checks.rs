//! Doctests that pin the `#[must_use]` attributes: for each implementation and
//! each handle, builder and query, a `compile_fail` doctest under
//! `#![deny(unused_must_use)]` that drops the result, and one doctest that
//! compiles (and runs) every one of those statements with the result used,
//! so a `compile_fail` cannot pass for any other reason than the lint.
//! Compiled only by `cargo test --doc`.

/// For one implementation (`$module`: its path as a string) and one setup,
/// `$name: $expr` becomes a struct whose doctest is `$expr;` (must not
/// compile), and `$all` one whose doctest is `let _ = $expr;` for every
/// `$expr` (must compile and run).
macro_rules! must_use_checks {
    ($all:ident, $module:literal, $setup:literal, $($name:ident: $expr:literal,)+) => {
        $(
            #[doc = concat!(
                "```compile_fail\n#![deny(unused_must_use)]\nuse ", $module, "::*;\n",
                $setup, "\n", $expr, ";\n```"
            )]
            pub struct $name;
        )+
        #[doc = concat!(
            "```\n#![deny(unused_must_use)]\nuse ", $module, "::*;\n", $setup, "\n",
            $("let _ = ", $expr, ";\n",)+ "```"
        )]
        pub struct $all;
    };
}

/// The conflate statements, for both implementations.
macro_rules! conflate_checks {
    ($module:ident, $path:literal) => {
        /// `#[must_use]` of one conflate implementation.
        pub mod $module {
            must_use_checks! {
                AllUsed,
                $path,
                "let hub: Hub<u32, u32> = Hub::builder().retain_latest().build();
let tx = hub.sender();
let mut rx = hub.receiver();",
                ReceiverBuilderMaxPending: "hub.receiver_builder().max_pending(3)",
                ReceiverBuilderKey: "hub.receiver_builder().key(1)",
                ReceiverBuilderKeyFilter: "hub.receiver_builder().key_filter(|k: &u32| *k > 1)",
                ReceiverBuilderMerge: "hub.receiver_builder().merge(|a: u32, b: u32| Some(a + b))",
                ReceiverBuilderSnapshot: "hub.receiver_builder().snapshot()",
                ReceiverBuilderBuild: "hub.receiver_builder().build()",
                HubReceiverBuilder: "hub.receiver_builder()",
                HubReceiver: "hub.receiver()",
                HubSender: "hub.sender()",
                HubNew: "Hub::<u32, u32>::new()",
                HubWithMerge: "Hub::<u32, u32>::with_merge(|a, b| Some(a + b))",
                HubBuilderNew: "Hub::<u32, u32>::builder()",
                HubBuilderMerge: "Hub::<u32, u32>::builder().merge(|a, b| Some(a + b))",
                HubBuilderRetainLatest: "Hub::<u32, u32>::builder().retain_latest()",
                HubBuilderTombstones: "Hub::<u32, u32>::builder().tombstones(|v| *v == 0)",
                HubBuilderBuild: "Hub::<u32, u32>::builder().build()",
                HubLatest: "hub.latest(&1)",
                HubSnapshot: "hub.snapshot()",
                HubStats: "hub.stats()",
                HubIsClosed: "hub.is_closed()",
                SenderIsClosed: "tx.is_closed()",
                ReceiverTryRecvAll: "rx.try_recv_all()",
                ReceiverRecvAsync: "rx.recv_async()",
                ReceiverIter: "rx.iter()",
                ReceiverTryIter: "rx.try_iter()",
                ReceiverLen: "rx.len()",
                ReceiverIsEmpty: "rx.is_empty()",
                ReceiverIsClosed: "rx.is_closed()",
                ReceiverStats: "rx.stats()",
                SendErrorIntoInner: "{ hub.close(); tx.send(1, 1).unwrap_err() }.into_inner()",
            }
        }
    };
}

/// The broadcast statements, for both implementations.
macro_rules! broadcast_checks {
    ($module:ident, $path:literal) => {
        /// `#[must_use]` of one broadcast implementation.
        pub mod $module {
            must_use_checks! {
                AllUsed,
                $path,
                "let buf: Buffer<u32> = Buffer::new(4);
buf.append(1).unwrap();
let mut reader = buf.reader();",
                BufferNew: "Buffer::<u32>::new(4)",
                BufferCapacity: "buf.capacity()",
                BufferTail: "buf.tail()",
                BufferLatest: "buf.latest()",
                BufferRetained: "buf.retained()",
                BufferReadAsync: "buf.read_async(0, 1)",
                BufferReader: "buf.reader()",
                BufferReaderAt: "buf.reader_at(buf.cursor())",
                BufferIsClosed: "buf.is_closed()",
                BufferGeneration: "buf.generation()",
                ReaderCursor: "reader.cursor()",
                ReaderNextAsync: "reader.next_async()",
                AppendErrorIntoInner: "keybus::AppendError(2).into_inner()",
            }
        }
    };
}

conflate_checks!(conflate, "keybus::conflate");
conflate_checks!(baseline_conflate, "keybus::baseline::conflate");
broadcast_checks!(broadcast, "keybus::broadcast");
broadcast_checks!(baseline_broadcast, "keybus::baseline::broadcast");

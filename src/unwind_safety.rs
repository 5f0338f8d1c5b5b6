//! `UnwindSafe` and `RefUnwindSafe` for every public handle, both
//! implementations, where the auto traits fail on their own (docs/design.md,
//! "Panics in user code").

use std::panic::{RefUnwindSafe, UnwindSafe};

/// `impl UnwindSafe + RefUnwindSafe` for each listed handle type.
macro_rules! unwind_safe {
    ($([$($params:ident),+] $ty:ty),+ $(,)?) => {
        $(
            impl<$($params),+> UnwindSafe for $ty {}
            impl<$($params),+> RefUnwindSafe for $ty {}
        )+
    };
}

unwind_safe! {
    [K, V] crate::conflate::Hub<K, V>,
    [K, V] crate::conflate::HubBuilder<K, V>,
    [K, V] crate::conflate::ReceiverBuilder<K, V>,
    [K, V] crate::conflate::Sender<K, V>,
    [K, V] crate::conflate::Receiver<K, V>,
    [T] crate::broadcast::Buffer<T>,
    [T] crate::broadcast::Reader<T>,
    [K, V] crate::baseline::conflate::Hub<K, V>,
    [K, V] crate::baseline::conflate::HubBuilder<K, V>,
    [K, V] crate::baseline::conflate::ReceiverBuilder<K, V>,
    [K, V] crate::baseline::conflate::Sender<K, V>,
    [K, V] crate::baseline::conflate::Receiver<K, V>,
}

//! Finding or creating the server-side objects a bridge writes to.

use crate::error::chain;
use async_nats::jetstream::kv::{Config, Store};
use async_nats::jetstream::Context;
use std::error::Error;
use std::fmt;

/// A bucket or stream could not be found or created. Lowercase `Display`,
/// naming the object and the server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError {
    /// The bucket or stream.
    pub name: String,
    /// What the server (or client) said.
    pub reason: String,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "setting up {}: {}", self.name, self.reason)
    }
}

impl Error for SetupError {}

/// The KV bucket `name`, created with `history = 1` (a last-value-per-key
/// table, conflate's shape) if it does not exist. An existing bucket is used
/// as it is.
pub async fn ensure_bucket(js: &Context, name: &str) -> Result<Store, SetupError> {
    let err = |e: &(dyn Error + 'static)| SetupError {
        name: format!("bucket {name:?}"),
        reason: chain(e),
    };
    match js.get_key_value(name).await {
        Ok(store) => Ok(store),
        Err(_) => js
            .create_key_value(Config {
                bucket: name.to_owned(),
                history: 1,
                ..Default::default()
            })
            .await
            // Lost a race with another process creating it: use theirs.
            .or_then_get(js, name)
            .await
            .map_err(|e| err(&*e)),
    }
}

trait OrThenGet {
    async fn or_then_get(
        self,
        js: &Context,
        name: &str,
    ) -> Result<Store, Box<dyn Error + Send + Sync>>;
}

impl<E: Error + Send + Sync + 'static> OrThenGet for Result<Store, E> {
    async fn or_then_get(
        self,
        js: &Context,
        name: &str,
    ) -> Result<Store, Box<dyn Error + Send + Sync>> {
        match self {
            Ok(store) => Ok(store),
            Err(create) => js.get_key_value(name).await.map_err(|_| create.into()),
        }
    }
}

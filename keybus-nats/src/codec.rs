//! How hub keys become KV keys and values become bytes, and back.
//!
//! The bridges are generic over two small traits: [`KeyCodec`] (a key to a KV
//! key string and back) and [`ValueCodec`] (a value to bytes and back). Ready
//! codecs cover the common cases:
//!
//! | codec | keys | values |
//! |---|---|---|
//! | [`StrKeys`] | `String`, checked against the [KV key rules](crate::validate_key) | — |
//! | [`DisplayKeys`] | anything `Display + FromStr` (integers, ids) | — |
//! | [`Utf8`] | — | `String` as UTF-8 |
//! | [`DisplayValues`] | — | anything `Display + FromStr` (`f64`, `u64`…) as text |
//! | [`RawBytes`] | — | `Bytes` / `Vec<u8>` as they are |
//! | [`Json`] (feature `json`) | — | any serde type as JSON |
//!
//! Whatever a key codec returns is checked against the KV key rules again by
//! the bridge, so a custom codec cannot put an invalid key on the wire.
//!
//! ```
//! use keybus_nats::codec::{DisplayValues, KeyCodec, StrKeys, ValueCodec};
//!
//! let key = StrKeys.encode_key(&"disk.sda".to_string()).unwrap();
//! assert_eq!(key, "disk.sda");
//! assert!(StrKeys.encode_key(&"disk sda".to_string()).is_err());
//!
//! let bytes = DisplayValues.encode_value(&0.5f64).unwrap();
//! assert_eq!(&bytes[..], b"0.5");
//! let back: f64 = DisplayValues.decode_value(&bytes).unwrap();
//! assert_eq!(back, 0.5);
//! ```

use bytes::Bytes;
use std::error::Error;
use std::fmt;
use std::fmt::Display;
use std::str::FromStr;

/// Why a key or a value could not cross the wire. Lowercase `Display`, and it
/// names what it refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// The key breaks the KV key rules ([`validate_key`](crate::validate_key)).
    InvalidKey {
        /// The offending key, as the codec produced it.
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The codec could not encode the value (or key).
    Encode(String),
    /// The bytes (or key string) did not decode.
    Decode(String),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::InvalidKey { key, reason } => write!(f, "invalid kv key {key:?}: {reason}"),
            CodecError::Encode(why) => write!(f, "cannot encode: {why}"),
            CodecError::Decode(why) => write!(f, "cannot decode: {why}"),
        }
    }
}

impl Error for CodecError {}

/// A hub key to a KV key string and back. Must be injective: two keys may not
/// share a KV key (the bridges coalesce by the encoded key).
pub trait KeyCodec<K>: Send + Sync + 'static {
    /// The KV key for `key` (checked against the KV key rules after this).
    fn encode_key(&self, key: &K) -> Result<String, CodecError>;
    /// The hub key for a KV key read from the bucket.
    fn decode_key(&self, key: &str) -> Result<K, CodecError>;
}

/// A value to bytes and back.
pub trait ValueCodec<V>: Send + Sync + 'static {
    /// The payload for `value`.
    fn encode_value(&self, value: &V) -> Result<Bytes, CodecError>;
    /// The value for a payload read from the server.
    fn decode_value(&self, bytes: &[u8]) -> Result<V, CodecError>;
}

/// `String` keys used as KV keys as they are: `.` is the hierarchy
/// (`disk.sda` is matched by the remote filter `disk.>`). A key that breaks the
/// KV key rules is refused with [`CodecError::InvalidKey`], never rewritten.
#[derive(Debug, Clone, Copy, Default)]
pub struct StrKeys;

impl KeyCodec<String> for StrKeys {
    fn encode_key(&self, key: &String) -> Result<String, CodecError> {
        crate::validate_key(key)?;
        Ok(key.clone())
    }
    fn decode_key(&self, key: &str) -> Result<String, CodecError> {
        Ok(key.to_owned())
    }
}

/// Keys written with `Display` and read back with `FromStr` (integers, ids, an
/// enum with both impls). The text must obey the KV key rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct DisplayKeys;

impl<K> KeyCodec<K> for DisplayKeys
where
    K: Display + FromStr,
    K::Err: Display,
{
    fn encode_key(&self, key: &K) -> Result<String, CodecError> {
        let text = key.to_string();
        crate::validate_key(&text)?;
        Ok(text)
    }
    fn decode_key(&self, key: &str) -> Result<K, CodecError> {
        key.parse()
            .map_err(|e: K::Err| CodecError::Decode(format!("key {key:?}: {e}")))
    }
}

/// `String` values as UTF-8 bytes. Decoding refuses bytes that are not UTF-8.
#[derive(Debug, Clone, Copy, Default)]
pub struct Utf8;

impl ValueCodec<String> for Utf8 {
    fn encode_value(&self, value: &String) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(value.as_bytes()))
    }
    fn decode_value(&self, bytes: &[u8]) -> Result<String, CodecError> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| CodecError::Decode(e.to_string()))
    }
}

/// Values written with `Display` and read back with `FromStr`: `f64` as `0.57`
/// (and `NaN`, `inf`, which JSON cannot carry), integers, `bool`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DisplayValues;

impl<V> ValueCodec<V> for DisplayValues
where
    V: Display + FromStr,
    V::Err: Display,
{
    fn encode_value(&self, value: &V) -> Result<Bytes, CodecError> {
        Ok(Bytes::from(value.to_string()))
    }
    fn decode_value(&self, bytes: &[u8]) -> Result<V, CodecError> {
        let text = std::str::from_utf8(bytes).map_err(|e| CodecError::Decode(e.to_string()))?;
        text.parse()
            .map_err(|e: V::Err| CodecError::Decode(format!("{text:?}: {e}")))
    }
}

/// Payloads passed through unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawBytes;

impl ValueCodec<Bytes> for RawBytes {
    fn encode_value(&self, value: &Bytes) -> Result<Bytes, CodecError> {
        Ok(value.clone())
    }
    fn decode_value(&self, bytes: &[u8]) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(bytes))
    }
}

impl ValueCodec<Vec<u8>> for RawBytes {
    fn encode_value(&self, value: &Vec<u8>) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(value))
    }
    fn decode_value(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        Ok(bytes.to_vec())
    }
}

/// Any serde type as JSON (feature `json`, on by default). Other tools
/// (Telegraf, Redpanda Connect, the `nats` CLI) read it as it is.
///
/// ```
/// use keybus_nats::codec::{Json, ValueCodec};
///
/// let bytes = Json.encode_value(&vec![1u32, 2]).unwrap();
/// assert_eq!(&bytes[..], b"[1,2]");
/// let err = ValueCodec::<Vec<u32>>::decode_value(&Json, b"{oops").unwrap_err();
/// assert!(err.to_string().starts_with("cannot decode: "));
/// ```
#[cfg(feature = "json")]
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

#[cfg(feature = "json")]
impl<V> ValueCodec<V> for Json
where
    V: serde::Serialize + serde::de::DeserializeOwned,
{
    fn encode_value(&self, value: &V) -> Result<Bytes, CodecError> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| CodecError::Encode(e.to_string()))
    }
    fn decode_value(&self, bytes: &[u8]) -> Result<V, CodecError> {
        serde_json::from_slice(bytes).map_err(|e| CodecError::Decode(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_keys_round_trip_and_refuse() {
        let k = DisplayKeys.encode_key(&42u64).unwrap();
        assert_eq!(k, "42");
        assert_eq!(KeyCodec::<u64>::decode_key(&DisplayKeys, "42").unwrap(), 42);
        assert!(matches!(
            KeyCodec::<u64>::decode_key(&DisplayKeys, "x"),
            Err(CodecError::Decode(_))
        ));
        assert!(matches!(
            DisplayKeys.encode_key(&-1.5f64),
            Ok(ref s) if s == "-1.5"
        ));
        assert!(DisplayKeys.encode_key(&"a b".to_string()).is_err());
    }

    #[test]
    fn utf8_refuses_invalid_bytes() {
        assert!(Utf8.decode_value(&[0xff, 0xfe]).is_err());
        assert_eq!(Utf8.decode_value(b"ok").unwrap(), "ok");
    }

    #[test]
    fn display_values_carry_nan() {
        let b = DisplayValues.encode_value(&f64::NAN).unwrap();
        let back: f64 = DisplayValues.decode_value(&b).unwrap();
        assert!(back.is_nan());
        assert!(ValueCodec::<f64>::decode_value(&DisplayValues, b"x").is_err());
    }
}

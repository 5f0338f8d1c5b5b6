//! The KV key rules: which strings the bucket accepts as keys, and which as
//! watch filters.
//!
//! A JetStream KV key is the tail of a subject (`$KV.<bucket>.<key>`), so it
//! follows the subject-token rules: tokens separated by `.`, none empty, made
//! of `A-Z a-z 0-9 - _ / =` only. The `.` is the hierarchy a remote filter such
//! as `disk.>` walks. The client checks the character set but not empty tokens
//! (`a..b`), which the server then refuses, so the bridge checks both itself.

use crate::codec::CodecError;

/// Checks that `key` is a valid KV key: non-empty `.`-separated tokens of
/// `A-Z a-z 0-9 - _ / =`.
///
/// ```
/// use keybus_nats::validate_key;
///
/// assert!(validate_key("disk.sda.used").is_ok());
/// assert!(validate_key("disk..sda").is_err()); // an empty token
/// assert!(validate_key("cpu load").is_err()); // a space
/// assert!(validate_key("disk.>").is_err()); // a wildcard is a filter, not a key
/// ```
pub fn validate_key(key: &str) -> Result<(), CodecError> {
    check_tokens(key, false)
}

/// Checks that `filter` is a valid watch filter: a key whose tokens may also be
/// `*` (any one token) and whose last token may be `>` (one or more tokens).
///
/// ```
/// use keybus_nats::validate_filter;
///
/// assert!(validate_filter(">").is_ok());
/// assert!(validate_filter("disk.>").is_ok());
/// assert!(validate_filter("disk.*.used").is_ok());
/// assert!(validate_filter("disk.>.used").is_err()); // `>` only last
/// ```
pub fn validate_filter(filter: &str) -> Result<(), CodecError> {
    check_tokens(filter, true)
}

fn check_tokens(key: &str, filter: bool) -> Result<(), CodecError> {
    let invalid = |reason: &'static str| {
        Err(CodecError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    if key.is_empty() {
        return invalid("empty");
    }
    let tokens: Vec<&str> = key.split('.').collect();
    let last = tokens.len() - 1;
    for (i, token) in tokens.iter().enumerate() {
        match *token {
            "" => return invalid("empty token (leading, trailing or doubled `.`)"),
            "*" if filter => {}
            ">" if filter && i == last => {}
            ">" if filter => return invalid("`>` must be the last token"),
            t if t.bytes().all(allowed) => {}
            _ => {
                return invalid(if filter {
                    "a token holds a byte outside `A-Z a-z 0-9 - _ / =` (or a misplaced wildcard)"
                } else {
                    "a token holds a byte outside `A-Z a-z 0-9 - _ / =`"
                })
            }
        }
    }
    Ok(())
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/' | b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for ok in ["a", "a.b", "A-z_0/9=x", "disk.sda1.used"] {
            assert!(validate_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", ".", ".a", "a.", "a..b", "a b", "a*", "*", ">", "é", "a\tb",
        ] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn filters() {
        for ok in [">", "*", "a.*", "a.>", "*.b.>", "a"] {
            assert!(validate_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a.>.b", ">.a", "a..>", "a*"] {
            assert!(validate_filter(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn error_names_the_key() {
        let e = validate_key("a..b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid kv key \"a..b\": empty token (leading, trailing or doubled `.`)"
        );
    }
}

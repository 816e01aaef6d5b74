//! Opaque paging cursors.
//!
//! A cursor is the sort key of the last item a page returned, plus the arguments of the query
//! that produced it, as base64url-encoded JSON. Keyset paging means a page boundary does not
//! shift when notes are added or removed between calls, and a cursor replayed with different
//! arguments is refused instead of silently returning the wrong page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Serialize, de::DeserializeOwned};

use super::NoteError;

/// Longest cursor accepted, in bytes (a cursor holds one path and a few numbers).
const MAX_CURSOR_BYTES: usize = 12 * 1024;

/// Encodes a cursor payload.
pub fn encode<T: Serialize>(payload: &T) -> String {
    // Serialising plain structs of strings and integers cannot fail.
    let json = serde_json::to_vec(payload).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a cursor payload, with one clear error for anything malformed.
pub fn decode<T: DeserializeOwned>(cursor: &str) -> Result<T, NoteError> {
    let invalid = || {
        NoteError::invalid(
            "cursor",
            "invalid cursor: pass back the next_cursor of the previous page unchanged",
        )
    };
    if cursor.len() > MAX_CURSOR_BYTES {
        return Err(invalid());
    }
    let json = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    serde_json::from_slice(&json).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
    struct P {
        a: u64,
        b: String,
    }

    #[test]
    fn cursor_round_trips_and_garbage_is_refused() {
        let p = P {
            a: 7,
            b: "x/y.md".into(),
        };
        let c = encode(&p);
        assert_eq!(decode::<P>(&c).unwrap(), p);
        for bad in ["", "!!!", "e30", &"A".repeat(20_000)] {
            let err = decode::<P>(bad).unwrap_err().to_string();
            assert!(err.contains("invalid cursor"), "{bad}: {err}");
        }
    }
}

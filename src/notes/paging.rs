//! Offset paging for results computed from the vault model.
//!
//! The cursor holds the offset of the next item and a fingerprint of the arguments that produced
//! the list, so a cursor replayed with other arguments is refused.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};

use super::{NoteError, check_limit, cursor};

#[derive(Serialize, Deserialize)]
struct OffsetCursor {
    /// Offset of the next item.
    o: usize,
    /// Fingerprint of the query.
    q: u64,
}

/// One page cut from a full list.
#[derive(Debug)]
pub struct Page<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Items in the whole list.
    pub total: usize,
    /// Cursor for the next page, if any.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// True when more items exist than this page returns.
    pub fn truncated(&self) -> bool {
        self.next_cursor.is_some()
    }
}

/// A fingerprint of the query arguments a cursor belongs to.
pub fn fingerprint(parts: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// The offset a cursor names (0 without a cursor), refusing a cursor made for another query.
pub fn decode_offset(cursor_text: Option<&str>, query: u64) -> Result<usize, NoteError> {
    match cursor_text {
        None => Ok(0),
        Some(c) => {
            let c: OffsetCursor = cursor::decode(c)?;
            if c.q != query {
                return Err(NoteError::invalid(
                    "cursor",
                    "this cursor belongs to a call with other arguments; start again without a cursor",
                ));
            }
            Ok(c.o)
        }
    }
}

/// A cursor for the item at `offset` of the list `query` produces.
pub fn encode_offset(offset: usize, query: u64) -> String {
    cursor::encode(&OffsetCursor {
        o: offset,
        q: query,
    })
}

/// Where the page that `cursor_text` (or the start) names begins, and how long it may be.
fn window(
    limit: Option<u32>,
    default_limit: u32,
    max_limit: u32,
    cursor_text: Option<&str>,
    query: u64,
) -> Result<(usize, usize), NoteError> {
    Ok((
        decode_offset(cursor_text, query)?,
        check_limit(limit, default_limit, max_limit)?,
    ))
}

/// The page of `items` (already cut) that began at `start` in a list of `total`.
fn finish<T>(items: Vec<T>, start: usize, total: usize, query: u64) -> Page<T> {
    let end = start.saturating_add(items.len());
    let next_cursor = (end < total).then(|| encode_offset(end, query));
    Page {
        items,
        total,
        next_cursor,
    }
}

/// Cuts the page that `cursor` (or the start) names out of `items`.
pub fn page<T>(
    items: Vec<T>,
    limit: Option<u32>,
    default_limit: u32,
    max_limit: u32,
    cursor_text: Option<&str>,
    query: u64,
) -> Result<Page<T>, NoteError> {
    let (start, limit) = window(limit, default_limit, max_limit, cursor_text, query)?;
    let total = items.len();
    let items: Vec<T> = items.into_iter().skip(start).take(limit).collect();
    Ok(finish(items, start, total, query))
}

/// [`page`] over a borrowed list: only the page's items are cloned.
pub fn page_of<T: Clone>(
    items: &[T],
    limit: Option<u32>,
    default_limit: u32,
    max_limit: u32,
    cursor_text: Option<&str>,
    query: u64,
) -> Result<Page<T>, NoteError> {
    let (start, limit) = window(limit, default_limit, max_limit, cursor_text, query)?;
    let page: Vec<T> = items.iter().skip(start).take(limit).cloned().collect();
    Ok(finish(page, start, items.len(), query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_the_list_once_and_cursors_are_tied_to_the_query() {
        let q = fingerprint(&("tags", 1));
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let p = page(
                (0..25).collect::<Vec<_>>(),
                Some(10),
                10,
                100,
                cursor.as_deref(),
                q,
            )
            .unwrap();
            assert_eq!(p.total, 25);
            all.extend(p.items);
            match p.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(all, (0..25).collect::<Vec<_>>());
        let p = page(vec![1, 2, 3], Some(1), 10, 100, None, q).unwrap();
        let other = fingerprint(&("tags", 2));
        let err = page(
            vec![1, 2, 3],
            Some(1),
            10,
            100,
            p.next_cursor.as_deref(),
            other,
        )
        .unwrap_err();
        assert!(err.to_string().contains("other arguments"));
        assert!(page(vec![1], Some(0), 10, 100, None, q).is_err());
    }
}

//! `search_notes` (exact mode): case-insensitive substring search over every note.
//!
//! Scoring: a note whose file name (without `.md`) contains the query scores 10 plus its number
//! of matching lines; any other note scores its number of matching lines. Each matching line
//! is a hit; a note that matches only by name yields one hit on line 1. Hits are sorted by
//! score (high first), then path, then line. Memory stays bounded however common the query:
//! only the hits that can still make the page are kept.

use std::ops::ControlFlow;

use memchr::memmem;
use serde::Serialize;

use super::{NoteError, check_limit};
use crate::vault::{Vault, VaultPath, is_note_name};

/// Default number of hits.
pub const DEFAULT_LIMIT: u32 = 20;
/// Largest number of hits a client may ask for.
pub const MAX_LIMIT: u32 = 200;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Longest excerpt, in characters.
pub const MAX_EXCERPT_CHARS: usize = 200;
/// Score bonus for a match in the file name.
pub const NAME_MATCH_BONUS: u64 = 10;

/// What to search for.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// The text to find.
    pub query: String,
    /// Maximum number of hits.
    pub limit: Option<u32>,
    /// Match letter case exactly.
    pub case_sensitive: bool,
    /// Only notes under this folder (the root when empty).
    pub folder: VaultPath,
}

/// One matching line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct SearchHit {
    /// Vault-relative path of the note.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The matching line, cut to at most 200 characters around the first match.
    pub excerpt: String,
    /// The note's score: matching lines, plus 10 when the file name matches.
    pub score: u64,
}

/// The hits of a search.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Number of hits in all (may exceed the hits returned).
    pub total: usize,
    /// True when more hits exist than were returned.
    pub truncated: bool,
    /// How the search ran (`exact`: a scan of every note).
    pub mode: &'static str,
}

/// One note's matches.
struct NoteHits {
    score: u64,
    path: String,
    hits: Vec<SearchHit>,
}

/// Runs an exact substring search.
pub fn search_exact(vault: &Vault, q: &SearchQuery) -> Result<SearchResults, NoteError> {
    let limit = check_limit(q.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    if q.query.is_empty() {
        return Err(NoteError::InvalidArgument(
            "query is empty: give the text to search for".to_owned(),
        ));
    }
    if q.query.len() > MAX_QUERY_BYTES {
        return Err(NoteError::InvalidArgument(format!(
            "query is longer than {MAX_QUERY_BYTES} bytes"
        )));
    }
    let needle = if q.case_sensitive {
        q.query.clone()
    } else {
        q.query.to_lowercase()
    };
    let finder = memmem::Finder::new(needle.as_bytes());

    let mut kept: Vec<NoteHits> = Vec::new();
    let mut total = 0usize;
    vault.walk(&q.folder, true, &is_note_name, &mut |entry| {
        let bytes = match entry.read(vault) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::debug!(path = %entry.path, error = %e, "search skipped a note");
                return ControlFlow::Continue(());
            }
        };
        if let Some(note) = match_note(
            &entry.path,
            &bytes,
            &needle,
            &finder,
            q.case_sensitive,
            limit,
        ) {
            total += note.1;
            kept.push(note.0);
            if kept.len() >= 4 * limit + 64 {
                prune(&mut kept, limit);
            }
        }
        ControlFlow::Continue(())
    })?;
    prune(&mut kept, limit);
    let hits: Vec<SearchHit> = kept.into_iter().flat_map(|n| n.hits).take(limit).collect();
    Ok(SearchResults {
        truncated: total > hits.len(),
        hits,
        total,
        mode: "exact",
    })
}

/// Sorts notes best first and drops those that cannot reach the first `limit` hits.
fn prune(kept: &mut Vec<NoteHits>, limit: usize) {
    kept.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.path.cmp(&b.path)));
    let mut count = 0;
    let mut keep = kept.len();
    for (i, n) in kept.iter().enumerate() {
        count += n.hits.len();
        if count >= limit {
            keep = i + 1;
            break;
        }
    }
    kept.truncate(keep);
}

/// Matches one note. Returns its hits (at most `limit` kept) and its total hit count.
fn match_note(
    path: &VaultPath,
    bytes: &[u8],
    needle: &str,
    finder: &memmem::Finder<'_>,
    case_sensitive: bool,
    limit: usize,
) -> Option<(NoteHits, usize)> {
    let text = String::from_utf8_lossy(bytes);
    let folded;
    let haystack: &str = if case_sensitive {
        &text
    } else {
        folded = text.to_lowercase();
        &folded
    };
    let stem = path.stem();
    let name_match = if case_sensitive {
        stem.contains(needle)
    } else {
        stem.to_lowercase().contains(needle)
    };
    let body_match = finder.find(haystack.as_bytes()).is_some();
    if !name_match && !body_match {
        return None;
    }

    let mut hits = Vec::new();
    let mut count = 0usize;
    if body_match {
        // Lower-casing never adds or removes a line break, so the two line sequences align.
        for (i, (original, searched)) in text.lines().zip(haystack.lines()).enumerate() {
            if let Some(at) = finder.find(searched.as_bytes()) {
                count += 1;
                if hits.len() < limit {
                    let char_at = searched[..at].chars().count();
                    hits.push(SearchHit {
                        path: path.to_string(),
                        line: i + 1,
                        excerpt: excerpt(original, char_at, needle.chars().count()),
                        score: 0,
                    });
                }
            }
        }
    }
    let score = count as u64 + if name_match { NAME_MATCH_BONUS } else { 0 };
    if hits.is_empty() {
        if !name_match {
            // The query spans a line break: no line holds it.
            return None;
        }
        // Matched by name only: one hit on line 1.
        count = 1;
        hits.push(SearchHit {
            path: path.to_string(),
            line: 1,
            excerpt: excerpt(text.lines().next().unwrap_or(""), 0, 0),
            score: 0,
        });
    }
    for h in &mut hits {
        h.score = score;
    }
    Some((
        NoteHits {
            score,
            path: path.to_string(),
            hits,
        },
        count,
    ))
}

/// At most [`MAX_EXCERPT_CHARS`] characters of `line`, keeping the match (at character
/// `match_at`, `match_len` long) in view; `…` marks a cut.
pub fn excerpt(line: &str, match_at: usize, match_len: usize) -> String {
    let line = line.trim_end();
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= MAX_EXCERPT_CHARS {
        return line.to_owned();
    }
    let budget = MAX_EXCERPT_CHARS - 2; // room for two ellipses
    let center = match_at.min(chars.len()) + match_len.min(budget) / 2;
    let mut start = center.saturating_sub(budget / 2);
    if start + budget > chars.len() {
        start = chars.len() - budget;
    }
    let end = start + budget;
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_are_returned_whole() {
        assert_eq!(excerpt("hello world", 6, 5), "hello world");
    }

    #[test]
    fn long_lines_are_cut_around_the_match_to_200_chars() {
        let line = format!("{}NEEDLE{}", "a".repeat(500), "b".repeat(500));
        let e = excerpt(&line, 500, 6);
        assert!(
            e.chars().count() <= MAX_EXCERPT_CHARS,
            "{}",
            e.chars().count()
        );
        assert!(e.contains("NEEDLE"));
        assert!(e.starts_with('…') && e.ends_with('…'));
        let e = excerpt(&line, 0, 1);
        assert!(e.starts_with('a') && e.chars().count() <= MAX_EXCERPT_CHARS);
        let e = excerpt(&line, 1005, 1);
        assert!(e.ends_with('b') && e.chars().count() <= MAX_EXCERPT_CHARS);
    }

    #[test]
    fn scoring_counts_lines_and_rewards_name_matches() {
        let p = VaultPath::parse("Garden plan.md").unwrap();
        let f = memmem::Finder::new(b"garden");
        let (n, count) =
            match_note(&p, b"Garden\nnothing\nmy garden\n", "garden", &f, false, 20).unwrap();
        assert_eq!(count, 2);
        assert_eq!(n.score, 12);
        assert_eq!(
            n.hits.iter().map(|h| h.line).collect::<Vec<_>>(),
            vec![1, 3]
        );
        // Case-sensitive: only line 3 matches, and the name does not.
        let (n, _) = match_note(&p, b"Garden\nmy garden\n", "garden", &f, true, 20).unwrap();
        assert_eq!(n.score, 1);
        assert_eq!(n.hits[0].line, 2);
        // Name only: one hit on line 1.
        let (n, count) = match_note(&p, b"# Title\nbody", "garden", &f, false, 20).unwrap();
        assert_eq!(
            (n.score, count, n.hits.len(), n.hits[0].line),
            (10, 1, 1, 1)
        );
        assert_eq!(n.hits[0].excerpt, "# Title");
        assert!(
            match_note(
                &p,
                b"nothing",
                "zebra",
                &memmem::Finder::new(b"zebra"),
                false,
                20
            )
            .is_none()
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        let p = VaultPath::parse("x.md").unwrap();
        let f = memmem::Finder::new(b"caf");
        let (n, _) = match_note(&p, b"caf\xff au lait", "caf", &f, false, 20).unwrap();
        assert!(n.hits[0].excerpt.contains('\u{fffd}'));
    }

    #[test]
    fn pruning_keeps_the_best_notes_in_order() {
        let mk = |score, path: &str, n: usize| NoteHits {
            score,
            path: path.into(),
            hits: vec![
                SearchHit {
                    path: path.into(),
                    line: 1,
                    excerpt: String::new(),
                    score
                };
                n
            ],
        };
        let mut kept = vec![mk(1, "c", 1), mk(5, "b", 3), mk(5, "a", 3), mk(2, "d", 1)];
        prune(&mut kept, 4);
        let order: Vec<_> = kept.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(order, ["a", "b"]);
    }
}

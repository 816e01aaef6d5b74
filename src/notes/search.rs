//! `search_notes` (exact mode): case-insensitive substring search over every note.
//!
//! Scoring: a note whose file name (without `.md`) contains the query scores 10 plus its number
//! of matching lines; any other note scores its number of matching lines. Each matching line
//! is a hit; a note that matches only by name yields one hit on line 1. Hits are sorted by
//! score (high first), then path, then line. Memory stays bounded however common the query:
//! only the hits that can still make the page are kept.

use std::ops::ControlFlow;

use serde::Serialize;

use super::paging::{decode_offset, encode_offset, fingerprint};
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
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
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
    /// Pass back as `cursor` for the next page of hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How the search ran (`exact`: a scan of every note).
    pub mode: &'static str,
}

/// A compiled exact-text matcher: the query as an escaped literal regex, so that
/// case-insensitive matching uses Unicode simple case folding and SIMD literal search, and runs
/// on raw bytes (notes that are not valid UTF-8 are still searched).
pub struct Matcher {
    re: regex::bytes::Regex,
}

impl Matcher {
    /// Compiles `query` (validated by the caller) as a literal.
    pub fn literal(query: &str, case_sensitive: bool) -> Result<Self, NoteError> {
        let re = regex::bytes::RegexBuilder::new(&regex::escape(query))
            .case_insensitive(!case_sensitive)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| NoteError::InvalidArgument(format!("cannot search for that text: {e}")))?;
        Ok(Matcher { re })
    }
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
    let matcher = Matcher::literal(&q.query, q.case_sensitive)?;

    // Pass 1: score every note (counting is cheap; excerpts are not).
    let mut scored: Vec<(u64, VaultPath, usize)> = Vec::new();
    vault.walk(&q.folder, true, &is_note_name, &mut |entry| {
        let bytes = match entry.read(vault) {
            Ok(data) => data.bytes,
            Err(e) => {
                tracing::debug!(path = %entry.path, error = %e, "search skipped a note");
                return ControlFlow::Continue(());
            }
        };
        let name_match = matcher.re.is_match(entry.path.stem().as_bytes());
        let lines = count_matching_lines(&bytes, &matcher);
        if lines > 0 || name_match {
            let score = lines as u64 + if name_match { NAME_MATCH_BONUS } else { 0 };
            scored.push((score, entry.path.clone(), lines.max(1)));
        }
        ControlFlow::Continue(())
    })?;
    let total: usize = scored.iter().map(|n| n.2).sum();
    scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));

    // Pass 2: build the hits of the few notes that make the page, skipping whole notes (by
    // their hit counts) up to the cursor's offset.
    let query_id = fingerprint(&(&q.query, q.case_sensitive, q.folder.as_str()));
    let offset = decode_offset(q.cursor.as_deref(), query_id)?;
    let mut to_skip = offset;
    let mut hits: Vec<SearchHit> = Vec::with_capacity(limit);
    for (_, path, count) in &scored {
        if hits.len() >= limit {
            break;
        }
        if to_skip >= *count {
            to_skip -= count;
            continue;
        }
        let bytes = match vault.read_file(path) {
            Ok(data) => data.bytes,
            Err(e) => {
                tracing::debug!(path = %path, error = %e, "search skipped a note");
                continue;
            }
        };
        let want = to_skip + (limit - hits.len());
        if let Some((note_hits, _)) = match_note(path, &bytes, &matcher, want) {
            hits.extend(note_hits.into_iter().skip(to_skip));
        }
        to_skip = 0;
    }
    let end = offset + hits.len();
    let next_cursor = (end < total && !hits.is_empty()).then(|| encode_offset(end, query_id));
    Ok(SearchResults {
        truncated: next_cursor.is_some(),
        next_cursor,
        hits,
        total,
        mode: "exact",
    })
}

/// The number of lines of `bytes` that contain a match.
fn count_matching_lines(bytes: &[u8], matcher: &Matcher) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(m) = matcher.re.find_at(bytes, from) {
        count += 1;
        match memchr::memchr(b'\n', &bytes[m.start()..]) {
            Some(i) => from = m.start() + i + 1,
            None => break,
        }
    }
    count
}

/// Matches one note. Returns its hits (at most `limit` kept, each carrying the note's score)
/// and its total hit count.
fn match_note(
    path: &VaultPath,
    bytes: &[u8],
    matcher: &Matcher,
    limit: usize,
) -> Option<(Vec<SearchHit>, usize)> {
    let name_match = matcher.re.is_match(path.stem().as_bytes());
    let mut hits = Vec::new();
    let mut count = 0usize;
    let mut line_no = 1usize;
    let mut counted_to = 0usize; // newlines are counted in bytes[..counted_to]
    let mut from = 0usize;
    while let Some(m) = matcher.re.find_at(bytes, from) {
        line_no += memchr::memchr_iter(b'\n', &bytes[counted_to..m.start()]).count();
        let line_start = memchr::memrchr(b'\n', &bytes[..m.start()]).map_or(0, |i| i + 1);
        let line_end =
            memchr::memchr(b'\n', &bytes[m.start()..]).map_or(bytes.len(), |i| m.start() + i);
        count += 1;
        if hits.len() < limit {
            let line = String::from_utf8_lossy(&bytes[line_start..line_end]);
            let before = String::from_utf8_lossy(&bytes[line_start..m.start()]);
            let matched = String::from_utf8_lossy(m.as_bytes());
            hits.push(SearchHit {
                path: path.to_string(),
                line: line_no,
                excerpt: excerpt(&line, before.chars().count(), matched.chars().count()),
                score: 0,
            });
        }
        // Next search starts on the next line: one hit per matching line.
        counted_to = m.start();
        from = line_end + 1;
        if from > bytes.len() {
            break;
        }
    }
    if count == 0 {
        if !name_match {
            return None;
        }
        // Matched by name only: one hit on line 1.
        let first_line_end = memchr::memchr(b'\n', bytes).unwrap_or(bytes.len());
        count = 1;
        hits.push(SearchHit {
            path: path.to_string(),
            line: 1,
            excerpt: excerpt(&String::from_utf8_lossy(&bytes[..first_line_end]), 0, 0),
            score: 0,
        });
        let score = NAME_MATCH_BONUS;
        hits[0].score = score;
        return Some((hits, count));
    }
    let score = count as u64 + if name_match { NAME_MATCH_BONUS } else { 0 };
    for h in &mut hits {
        h.score = score;
    }
    Some((hits, count))
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
        let f = Matcher::literal("garden", false).unwrap();
        let (n, count) = match_note(&p, b"Garden\nnothing\nmy garden garden\n", &f, 20).unwrap();
        assert_eq!(count, 2, "one hit per matching line");
        assert_eq!(n[0].score, 12);
        assert_eq!(n.iter().map(|h| h.line).collect::<Vec<_>>(), vec![1, 3]);
        // Case-sensitive: only line 2 matches, and the name does not.
        let f = Matcher::literal("garden", true).unwrap();
        let (n, _) = match_note(&p, b"Garden\nmy garden\n", &f, 20).unwrap();
        assert_eq!(n[0].score, 1);
        assert_eq!(n[0].line, 2);
        // Name only: one hit on line 1.
        let f = Matcher::literal("garden", false).unwrap();
        let (n, count) = match_note(&p, b"# Title\nbody", &f, 20).unwrap();
        assert_eq!((n[0].score, count, n.len(), n[0].line), (10, 1, 1, 1));
        assert_eq!(n[0].excerpt, "# Title");
        let f = Matcher::literal("zebra", false).unwrap();
        assert!(match_note(&p, b"nothing", &f, 20).is_none());
    }

    #[test]
    fn case_insensitive_matching_folds_unicode_and_keeps_line_numbers() {
        let p = VaultPath::parse("x.md").unwrap();
        let f = Matcher::literal("ÉTÉ", false).unwrap();
        let (n, _) = match_note(&p, b"a\r\nb\r\nun \xc3\xa9t\xc3\xa9 chaud\r\n", &f, 20).unwrap();
        assert_eq!(n[0].line, 3);
        assert_eq!(n[0].excerpt, "un été chaud");
        // Regex metacharacters are literal text.
        let f = Matcher::literal("a.b(", false).unwrap();
        assert!(match_note(&p, b"axb(", &f, 20).is_none());
        assert!(match_note(&p, b"a.b(", &f, 20).is_some());
    }

    #[test]
    fn only_limit_hits_are_kept_but_all_are_counted() {
        let p = VaultPath::parse("x.md").unwrap();
        let f = Matcher::literal("w", false).unwrap();
        let text = "w\n".repeat(1000);
        let (n, count) = match_note(&p, text.as_bytes(), &f, 5).unwrap();
        assert_eq!((count, n.len(), n[0].score), (1000, 5, 1000));
        assert_eq!(n[4].line, 5);
    }

    #[test]
    fn counting_agrees_with_hit_extraction() {
        let p = VaultPath::parse("x.md").unwrap();
        for (text, query) in [
            ("a\nab\nb\nabab\n", "ab"),
            ("x\ny\nx\ny", "x\ny"),
            ("no newline at end", "end"),
            ("", "a"),
            ("\n\n\n", "\n"),
        ] {
            let f = Matcher::literal(query, false).unwrap();
            let counted = count_matching_lines(text.as_bytes(), &f);
            let extracted = match_note(&p, text.as_bytes(), &f, 100).map_or(0, |(_, c)| c);
            assert_eq!(counted, extracted, "{text:?} / {query:?}");
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        let p = VaultPath::parse("x.md").unwrap();
        let f = Matcher::literal("caf", false).unwrap();
        let (n, _) = match_note(&p, b"caf\xff au lait", &f, 20).unwrap();
        assert!(n[0].excerpt.contains('\u{fffd}'));
    }
}

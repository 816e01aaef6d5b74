//! `search_notes`: ranked search over the index, and exact or regex search by scanning.
//!
//! - `ranked` (default): BM25 over the index ([`crate::index`]); one hit per note, showing the
//!   line that best matches the query, with match ranges and the heading above it. While the
//!   index is being built the same query is answered by a scan (every word as a
//!   case-insensitive substring) and the reply says so.
//! - `exact`: substring search, case-insensitive unless `case_sensitive`. One hit per matching
//!   line. A note scores its number of matching lines, plus 10 when its file name matches.
//! - `regex`: the same with a Rust regular expression (linear time: no backreferences or
//!   look-around), whose length and compiled size are capped.
//!
//! Every mode honours the filters (folder, tag with nested tags, property and value, modification
//! time), pages with a cursor, and bounds its reply in bytes. Scans stop at a time budget and
//! mark the reply `partial`.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::filter::NoteFilter;
use super::paging::{decode_offset, encode_offset, fingerprint};
use super::{NoteError, check_limit};
use crate::engine::{Engine, IndexStatus, NoteText};
use crate::index::query::{self, Query};
use crate::index::text::{self, HeadingTracker, Needles};
use crate::index::{IndexFilter, millis};
use crate::markdown;
use crate::obsidian::config::IgnoreFilters;
use crate::vault::{Vault, VaultPath, is_note_name};

/// Default number of hits.
pub const DEFAULT_LIMIT: u32 = 20;
/// Largest number of hits a client may ask for.
pub const MAX_LIMIT: u32 = 200;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = query::MAX_QUERY_BYTES;
/// Largest reply, in bytes of hits: a page stops early rather than flood the client.
pub const MAX_REPLY_BYTES: usize = 64 * 1024;
/// Longest a scan (exact, regex, or ranked while the index builds) may run before it stops and
/// returns what it found, marked `partial`.
pub use crate::engine::SCAN_BUDGET;
/// Largest compiled regex program, in bytes.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Largest lazy-DFA cache of a regex, in bytes.
pub const REGEX_DFA_LIMIT: usize = 2 << 20;
/// Score bonus for a match in the file name (exact and regex modes).
pub const NAME_MATCH_BONUS: f64 = 10.0;
/// Most match ranges reported for one line.
const MAX_RANGES_PER_LINE: usize = 32;

/// How to search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Relevance-ranked words and `"phrases"` over the index (default).
    #[default]
    Ranked,
    /// An exact piece of text.
    Exact,
    /// A Rust regular expression.
    Regex,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Ranked => "ranked",
            Mode::Exact => "exact",
            Mode::Regex => "regex",
        }
    }
}

/// What to search for.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// The query text.
    pub query: String,
    /// How to match it.
    pub mode: Mode,
    /// Maximum number of hits.
    pub limit: Option<u32>,
    /// Match letter case exactly (exact and regex modes).
    pub case_sensitive: bool,
    /// Only notes under this folder (the root when empty).
    pub folder: VaultPath,
    /// Only notes with this tag or one nested under it.
    pub tag: Option<String>,
    /// Only notes with this frontmatter property...
    pub property: Option<String>,
    /// ...equal to this value.
    pub value: Option<String>,
    /// Only notes modified at or after this time (ms since the epoch).
    pub modified_after: Option<i64>,
    /// Only notes modified before this time (ms since the epoch).
    pub modified_before: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One hit.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct SearchHit {
    /// Vault-relative path of the note.
    pub path: String,
    /// 1-based line number of the line shown.
    pub line: usize,
    /// The line, cut to at most 200 characters around the first match.
    pub excerpt: String,
    /// Where the query matches in `excerpt`: `[start, end)` offsets in characters (Unicode
    /// scalar values).
    pub matches: Vec<[usize; 2]>,
    /// The heading the line sits under, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
    /// Relevance: BM25 (ranked), or matching lines plus 10 for a file-name match (exact, regex).
    pub score: f64,
}

/// The hits of a search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Hits in all: matching notes (ranked) or matching lines (exact, regex).
    pub total: usize,
    /// True when more hits exist than were returned.
    pub truncated: bool,
    /// Pass back as `cursor` for the next page of hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `ranked`, `exact` or `regex`.
    pub mode: &'static str,
    /// `index` (ranked), `index+scan` (exact: the index picked the notes, their texts were
    /// read for the lines), or `scan` (exact and regex modes, and ranked mode while the index is
    /// built).
    pub served_by: &'static str,
    /// True when the scan's time budget ran out: hits and total cover only the notes scanned.
    pub partial: bool,
    /// Remarks on how the query was answered (a relaxed match, a partial scan, the index state).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The index state, when a ranked search could not use the index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexStatus>,
}

/// Parses a time filter: RFC 3339 (`2026-11-30T08:00:00Z`) or a date (`2026-11-30`, midnight
/// UTC). Returns milliseconds since the epoch.
pub fn parse_time(name: &str, s: &str) -> Result<i64, NoteError> {
    let s = s.trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc().timestamp_millis());
    }
    Err(NoteError::InvalidArgument(format!(
        "{name}: expected a date like 2026-11-30 or a time like 2026-11-30T08:00:00Z"
    )))
}

/// Runs a search in the query's mode.
pub fn search(engine: &Engine, q: &SearchQuery) -> Result<SearchResults, NoteError> {
    let limit = check_limit(q.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    if q.query.trim().is_empty() {
        return Err(NoteError::InvalidArgument(
            "query is empty: give the text to search for".to_owned(),
        ));
    }
    if q.query.len() > MAX_QUERY_BYTES {
        return Err(NoteError::InvalidArgument(format!(
            "query is longer than {MAX_QUERY_BYTES} bytes"
        )));
    }
    if let (Some(a), Some(b)) = (q.modified_after, q.modified_before)
        && a >= b
    {
        return Err(NoteError::InvalidArgument(
            "modified_after must be earlier than modified_before".to_owned(),
        ));
    }
    if !q.folder.is_root() {
        // The same refusals as a scan of the folder would give (missing, a symlink out...).
        engine.vault().check_folder(&q.folder)?;
    }
    let filter = NoteFilter::new(q.tag.clone(), q.property.clone(), q.value.clone(), None)?;
    let query_id = fingerprint(&(
        &q.query,
        q.mode,
        q.case_sensitive,
        q.folder.as_str(),
        filter.id(),
        q.modified_after,
        q.modified_before,
    ));
    let offset = decode_offset(q.cursor.as_deref(), query_id)?;
    let ignored = engine.user_ignored();
    let scope = Scope {
        budget: engine.scan_budget(),
        folder: &q.folder,
        filter: &filter,
        after: q.modified_after,
        before: q.modified_before,
        ignored: ignored.as_deref(),
    };
    match q.mode {
        Mode::Exact | Mode::Regex => {
            let matcher = if q.mode == Mode::Exact {
                Matcher::literal(&q.query, q.case_sensitive)?
            } else {
                Matcher::regex(&q.query, q.case_sensitive)?
            };
            search_lines(
                engine, &q.query, &matcher, &scope, offset, limit, query_id, q.mode,
            )
        }
        Mode::Ranked => {
            let parsed =
                query::parse(&q.query).map_err(|e| NoteError::InvalidArgument(e.to_string()))?;
            engine.refresh_if_stale()?;
            match engine.index() {
                Some(ix) => {
                    let ifilter = IndexFilter {
                        folder: Some(q.folder.clone()),
                        tag: q
                            .tag
                            .as_deref()
                            .map(markdown::normalize_tag)
                            .filter(|t| !t.is_empty()),
                        property: q.property.clone().map(|k| (k, q.value.clone())),
                        modified_after: q.modified_after,
                        modified_before: q.modified_before,
                        exclude: ignored
                            .as_ref()
                            .map(|f| engine.user_ignored_files(&engine.model_now(), f)),
                    };
                    let found = ix
                        .search(&parsed, &ifilter, offset, limit)
                        .map_err(|e| NoteError::Unavailable(e.to_string()))?;
                    let mut notes = Vec::new();
                    if !found.matched_all {
                        notes.push(
                            "no note has every word: notes with some of them are ranked".to_owned(),
                        );
                    }
                    let ranked: Vec<(f64, VaultPath)> = found
                        .hits
                        .into_iter()
                        .map(|(s, p)| (f64::from(s), p))
                        .collect();
                    Ok(note_page(
                        engine,
                        ranked,
                        found.total,
                        &found.needles,
                        offset,
                        query_id,
                        "index",
                        false,
                        notes,
                        None,
                    ))
                }
                None => ranked_by_scan(engine, &parsed, &scope, offset, limit, query_id),
            }
        }
    }
}

/// Where a scan looks and what it keeps.
struct Scope<'a> {
    budget: Duration,
    folder: &'a VaultPath,
    filter: &'a NoteFilter,
    after: Option<i64>,
    before: Option<i64>,
    /// Obsidian's Excluded files, left out.
    ignored: Option<&'a IgnoreFilters>,
}

impl Scope<'_> {
    /// False for a note Obsidian's Excluded files name.
    fn shown(&self, p: &VaultPath) -> bool {
        self.ignored.is_none_or(|f| !f.matches(p.as_str()))
    }

    fn time_ok(&self, modified: std::time::SystemTime) -> bool {
        let t = millis(modified);
        self.after.is_none_or(|a| t >= a) && self.before.is_none_or(|b| t < b)
    }

    /// Tag and property filters, which need the note parsed.
    fn parsed_ok(&self, text: &str) -> bool {
        self.filter.is_empty() || self.filter.matches_parsed(&markdown::parse_note(text))
    }
}

/// Scans the notes in `scope`, calling `visit` with each note's text; stops at the budget.
/// Returns whether the budget ran out.
fn scan(
    vault: &Vault,
    scope: &Scope<'_>,
    visit: &mut dyn FnMut(&VaultPath, &str),
) -> Result<bool, NoteError> {
    let started = Instant::now();
    let mut partial = false;
    vault.walk(scope.folder, true, &is_note_name, &mut |entry| {
        if started.elapsed() > scope.budget {
            partial = true;
            return ControlFlow::Break(());
        }
        if !scope.shown(&entry.path) {
            return ControlFlow::Continue(());
        }
        match entry.read(vault) {
            Ok(data) if scope.time_ok(data.meta.modified) => {
                let text = String::from_utf8_lossy(&data.bytes);
                visit(&entry.path, &text);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(path = %entry.path, error = %e, "search skipped a note"),
        }
        ControlFlow::Continue(())
    })?;
    Ok(partial)
}

/// A compiled matcher for exact and regex modes.
pub struct Matcher {
    re: regex::Regex,
}

impl Matcher {
    /// `query` as a literal: case-insensitive matching uses Unicode simple case folding.
    pub fn literal(query: &str, case_sensitive: bool) -> Result<Self, NoteError> {
        if query.contains(['\n', '\r']) {
            return Err(NoteError::InvalidArgument(
                "exact search text cannot contain a line break: matches are shown line by line"
                    .to_owned(),
            ));
        }
        Self::build(&regex::escape(query), case_sensitive)
    }

    /// `pattern` as a Rust regex (`^` and `$` match at line ends).
    pub fn regex(pattern: &str, case_sensitive: bool) -> Result<Self, NoteError> {
        Self::build(pattern, case_sensitive)
    }

    fn build(pattern: &str, case_sensitive: bool) -> Result<Self, NoteError> {
        let re = regex::RegexBuilder::new(pattern)
            .case_insensitive(!case_sensitive)
            .multi_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_DFA_LIMIT)
            .nest_limit(64)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => NoteError::InvalidArgument(format!(
                    "the regex is too large once compiled (over {} KiB); simplify it",
                    REGEX_SIZE_LIMIT / 1024
                )),
                regex::Error::Syntax(msg) => {
                    let first = msg.lines().last().unwrap_or("").trim();
                    NoteError::InvalidArgument(format!("invalid regex: {first}"))
                }
                _ => NoteError::InvalidArgument("invalid regex".to_owned()),
            })?;
        Ok(Matcher { re })
    }

    /// True when `text` has a non-empty match.
    fn matches(&self, text: &str) -> bool {
        self.find_at(text, 0).is_some()
    }

    /// The first non-empty match at or after byte `from`.
    fn find_at<'t>(&self, text: &'t str, mut from: usize) -> Option<regex::Match<'t>> {
        while from <= text.len() {
            let m = self.re.find_at(text, from)?;
            if !m.is_empty() {
                return Some(m);
            }
            from = next_boundary(text, m.end());
        }
        None
    }
}

/// At most 200 characters of `line`, keeping the match (at character `match_at`, `match_len`
/// long) in view; `…` marks a cut.
pub fn excerpt(line: &str, match_at: usize, match_len: usize) -> String {
    let byte = |c: usize| line.char_indices().nth(c).map_or(line.len(), |(i, _)| i);
    let start = byte(match_at);
    let end = byte(match_at + match_len);
    text::cut_excerpt(line, &[(start, end)]).0
}

/// The char boundary after byte `i` of `text`.
fn next_boundary(text: &str, i: usize) -> usize {
    let mut j = i + 1;
    while j < text.len() && !text.is_char_boundary(j) {
        j += 1;
    }
    j
}

/// Exact or regex search: one hit per matching line.
#[allow(clippy::too_many_arguments)]
fn search_lines(
    engine: &Engine,
    query: &str,
    matcher: &Matcher,
    scope: &Scope<'_>,
    offset: usize,
    limit: usize,
    query_id: u64,
    mode: Mode,
) -> Result<SearchResults, NoteError> {
    let vault = engine.vault();
    // Pass 1: count the matching lines of every note (cheap); excerpts come later. Paths are
    // borrowed, not cloned: a clone touches each matching note's path allocation (a cache miss
    // and an atomic increment per note).
    fn score_named<'p>(
        matcher: &Matcher,
        path: &'p VaultPath,
        name: &str,
        text: &str,
    ) -> Option<Scored<'p>> {
        let name_match = matcher.matches(name);
        let lines = count_matching_lines(text, matcher);
        (lines > 0 || name_match).then(|| {
            let score = lines as f64 + if name_match { NAME_MATCH_BONUS } else { 0.0 };
            (score, path, lines.max(1))
        })
    }
    let texts = engine.texts();
    let unfiltered = scope.folder.is_root()
        && scope.after.is_none()
        && scope.before.is_none()
        && scope.filter.is_empty()
        && scope.ignored.is_none();
    let listed = candidates(engine, query, scope, mode, texts.is_some() && unfiltered);
    let in_memory = texts.as_ref().filter(|_| unfiltered && listed.is_none());
    let by_index = listed.as_ref().is_some_and(|l| l.1);
    let listed = listed.map(|l| l.0);
    // Notes found by a walk of the disk (before the first build), owned here.
    let mut walked: Vec<(f64, VaultPath, usize)> = Vec::new();
    let notes: Vec<(&VaultPath, &NoteText)> = match in_memory {
        Some(texts) => texts.iter().collect(),
        None => Vec::new(),
    };
    let (mut scored, partial): (Vec<Scored<'_>>, bool) = match (in_memory, &listed) {
        // The whole vault in memory: no note list to build, no lookups.
        (Some(_), _) => scan_par_prefetching(
            &notes,
            scope.budget,
            &|(p, t)| score_named(matcher, p, t.name(), t.text()),
            &|(_, t)| t.prefetch(),
        ),
        (None, Some(paths)) => match &texts {
            Some(texts) => scan_par(paths, scope.budget, &|p| {
                texts
                    .get(p)
                    .and_then(|t| score_named(matcher, p, t.name(), t.text()))
            }),
            None => scan_par(paths, scope.budget, &|p| match vault.read_file(p) {
                Ok(data) => {
                    score_named(matcher, p, p.stem(), &String::from_utf8_lossy(&data.bytes))
                }
                Err(e) => {
                    tracing::debug!(path = %p, error = %e, "search skipped a note");
                    None
                }
            }),
        },
        (None, None) => {
            let partial = scan(vault, scope, &mut |path, text| {
                if let Some((score, _, lines)) = score_named(matcher, path, path.stem(), text)
                    && scope.parsed_ok(text)
                {
                    walked.push((score, path.clone(), lines));
                }
            })?;
            (
                walked.iter().map(|(s, p, n)| (*s, p, *n)).collect(),
                partial,
            )
        }
    };
    let total: usize = scored.iter().map(|n| n.2).sum();
    // Best first. A page needs at most `offset + limit` notes (each has at least one hit): only
    // those are sorted, after a linear selection (sorting every matching note compared the
    // paths of all the notes with equal counts).
    let order = |a: &Scored<'_>, b: &Scored<'_>| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1));
    let keep = offset.saturating_add(limit).max(1);
    if scored.len() > keep {
        scored.select_nth_unstable_by(keep - 1, order);
        scored.truncate(keep);
    }
    scored.sort_unstable_by(order);

    // Pass 2: the hits of the notes that make the page, skipping whole notes up to the offset.
    let mut to_skip = offset;
    let mut hits: Vec<SearchHit> = Vec::with_capacity(limit);
    let mut budget = Budget::new();
    'notes: for &(score, path, count) in &scored {
        if hits.len() >= limit || budget.full() {
            break;
        }
        if to_skip >= count {
            to_skip -= count;
            continue;
        }
        let kept = texts.as_ref().and_then(|t| t.get(path));
        let text: std::borrow::Cow<'_, str> = match kept {
            Some(t) => std::borrow::Cow::Borrowed(t.text()),
            None => match vault.read_file(path) {
                Ok(data) => String::from_utf8_lossy(&data.bytes).into_owned().into(),
                Err(e) => {
                    tracing::debug!(path = %path, error = %e, "search skipped a note");
                    continue;
                }
            },
        };
        let want = to_skip + (limit - hits.len());
        for mut hit in line_hits(path, &text, matcher, want)
            .into_iter()
            .skip(to_skip)
        {
            hit.score = score;
            if !budget.take(&hit) {
                break 'notes;
            }
            hits.push(hit);
        }
        to_skip = 0;
    }
    let end = offset + hits.len();
    let next_cursor = (end < total && !hits.is_empty()).then(|| encode_offset(end, query_id));
    let mut notes = Vec::new();
    if partial {
        notes.push(partial_note(scope.budget));
    }
    if budget.full() {
        notes.push(bytes_note());
    }
    Ok(SearchResults {
        truncated: next_cursor.is_some(),
        next_cursor,
        hits,
        total,
        mode: mode.name(),
        served_by: if by_index { "index+scan" } else { "scan" },
        partial,
        notes,
        index: None,
    })
}

/// The notes an exact or regex search must read, from the model once it is built (folder, time,
/// tag and property filters applied from memory), narrowed for an exact search by the index's
/// prefilter when it rules out enough notes to beat reading them all. `None` before the first
/// build (scan the disk), and when the search is over every note and their texts are in memory
/// (the caller scans those directly). The flag is true when the index picked the notes.
fn candidates(
    engine: &Engine,
    query: &str,
    scope: &Scope<'_>,
    mode: Mode,
    everything_in_memory: bool,
) -> Option<(Vec<VaultPath>, bool)> {
    let index = engine.index()?;
    if !engine.is_ready() {
        // The index is committed before the model is applied; the note list needs the model.
        return None;
    }
    let model = engine.model_now();
    let in_scope = |p: &VaultPath, n: &crate::model::Note| {
        p.starts_with(scope.folder)
            && scope.shown(p)
            && scope.time_ok(n.meta.modified)
            && (scope.filter.is_empty() || scope.filter.matches(&model, p))
    };
    let words = text::prefilter_words(query);
    if mode == Mode::Exact && !words.is_empty() {
        // Reading a note's text from memory costs about as much as looking up a few of the
        // prefilter's paths; from disk, much more.
        let notes = model.notes().len();
        let max = if engine.keeps_texts() {
            notes / 8
        } else {
            notes / 2
        };
        match index.candidates(&words, max) {
            Ok(Some(found)) => {
                let found = found
                    .into_iter()
                    .filter(|p| model.notes().get(p).is_some_and(|n| in_scope(p, n)))
                    .collect();
                return Some((found, true));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "exact-search prefilter failed; scanning all"),
        }
    }
    if everything_in_memory {
        return None;
    }
    let all = model
        .notes()
        .iter()
        .filter(|(p, n)| in_scope(p, n))
        .map(|(p, _)| p.clone())
        .collect();
    Some((all, false))
}

/// A note's score, path and number of hits.
type Scored<'p> = (f64, &'p VaultPath, usize);

/// Scores `items` on all cores; stops starting new ones once `budget` has passed (then the second
/// value is true: partial results).
fn scan_par<'p, T: Sync>(
    items: &'p [T],
    budget: Duration,
    score: &(dyn Fn(&'p T) -> Option<Scored<'p>> + Sync),
) -> (Vec<Scored<'p>>, bool) {
    use rayon::prelude::*;
    let started = Instant::now();
    let over = std::sync::atomic::AtomicBool::new(false);
    let scored = items
        .par_iter()
        .with_min_len(16)
        .filter_map(|item| {
            if over.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            if started.elapsed() > budget {
                over.store(true, std::sync::atomic::Ordering::Relaxed);
                return None;
            }
            score(item)
        })
        .collect();
    (scored, over.into_inner())
}

/// [`scan_par`], calling `prefetch` on the item two places ahead of the one being scored, so
/// that its memory is on its way to the cache by the time it is reached.
fn scan_par_prefetching<'p, T: Sync>(
    items: &'p [T],
    budget: Duration,
    score: &(dyn Fn(&'p T) -> Option<Scored<'p>> + Sync),
    prefetch: &(dyn Fn(&T) + Sync),
) -> (Vec<Scored<'p>>, bool) {
    use rayon::prelude::*;
    const AHEAD: usize = 2;
    let started = Instant::now();
    let over = std::sync::atomic::AtomicBool::new(false);
    let scored = items
        .par_chunks(64)
        .flat_map_iter(|chunk| {
            chunk.iter().take(AHEAD).for_each(prefetch);
            let over = &over;
            chunk.iter().enumerate().filter_map(move |(i, item)| {
                if over.load(std::sync::atomic::Ordering::Relaxed) {
                    return None;
                }
                if started.elapsed() > budget {
                    over.store(true, std::sync::atomic::Ordering::Relaxed);
                    return None;
                }
                if let Some(next) = chunk.get(i + AHEAD) {
                    prefetch(next);
                }
                score(item)
            })
        })
        .collect();
    (scored, over.into_inner())
}

fn partial_note(budget: Duration) -> String {
    format!(
        "the scan stopped at its {} ms time budget: hits and total cover only the notes scanned; \
         narrow the search with `folder` or filters",
        budget.as_millis()
    )
}

fn bytes_note() -> String {
    format!(
        "this page stopped at the {} KiB reply limit; ask for the next page with `cursor`",
        MAX_REPLY_BYTES / 1024
    )
}

/// Keeps a reply under [`MAX_REPLY_BYTES`].
struct Budget {
    used: usize,
    full: bool,
}

impl Budget {
    fn new() -> Self {
        Budget {
            used: 0,
            full: false,
        }
    }

    /// Counts `hit`; false (and full) when it does not fit. The first hit always fits.
    fn take(&mut self, hit: &SearchHit) -> bool {
        let size = serde_json::to_string(hit).map_or(1024, |s| s.len()) + 1;
        if self.used > 0 && self.used + size > MAX_REPLY_BYTES {
            self.full = true;
            return false;
        }
        self.used += size;
        true
    }

    fn full(&self) -> bool {
        self.full
    }
}

/// The number of lines of `text` that contain a (non-empty) match.
fn count_matching_lines(text: &str, matcher: &Matcher) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(m) = matcher.find_at(text, from) {
        count += 1;
        match memchr::memchr(b'\n', &text.as_bytes()[m.start()..]) {
            Some(i) => from = m.start() + i + 1,
            None => break,
        }
    }
    count
}

/// The first `want` hits of one note: one per matching line, with every match range on the
/// line and the heading above it.
fn line_hits(path: &VaultPath, text: &str, matcher: &Matcher, want: usize) -> Vec<SearchHit> {
    let bytes = text.as_bytes();
    let mut hits = Vec::new();
    let mut line_no = 1usize;
    let mut counted_to = 0usize;
    let mut from = 0usize;
    let mut headings = HeadingTracker::new(text);
    while hits.len() < want {
        let Some(m) = matcher.find_at(text, from) else {
            break;
        };
        line_no += memchr::memchr_iter(b'\n', &bytes[counted_to..m.start()]).count();
        counted_to = m.start();
        let line_start = memchr::memrchr(b'\n', &bytes[..m.start()]).map_or(0, |i| i + 1);
        let line_end =
            memchr::memchr(b'\n', &bytes[m.start()..]).map_or(text.len(), |i| m.start() + i);
        let mut ranges = vec![(m.start() - line_start, m.end().min(line_end) - line_start)];
        let mut next = m.end();
        while ranges.len() < MAX_RANGES_PER_LINE {
            match matcher.find_at(text, next) {
                Some(m2) if m2.start() < line_end => {
                    ranges.push((m2.start() - line_start, m2.end().min(line_end) - line_start));
                    next = m2.end();
                }
                _ => break,
            }
        }
        let line = text[line_start..line_end].trim_end_matches('\r');
        ranges.retain(|r| r.0 < line.len());
        for r in &mut ranges {
            r.1 = r.1.min(line.len());
        }
        let (excerpt, matches) = text::cut_excerpt(line, &ranges);
        headings.advance_to(text, line_start.saturating_sub(1));
        let heading = if line_start == 0 {
            None
        } else {
            headings.heading().map(str::to_owned)
        };
        hits.push(SearchHit {
            path: path.to_string(),
            line: line_no,
            excerpt,
            matches,
            heading,
            score: 0.0,
        });
        from = line_end + 1;
        if from > text.len() {
            break;
        }
    }
    if hits.is_empty() && matcher.matches(path.stem()) {
        // Matched by name only: one hit on the first line of the body.
        let body = text::frontmatter_end(text);
        let (excerpt, _) = text::cut_excerpt(text::line_at(text, body), &[]);
        hits.push(SearchHit {
            path: path.to_string(),
            line: text[..body].matches('\n').count() + 1,
            excerpt,
            matches: Vec::new(),
            heading: None,
            score: 0.0,
        });
    }
    hits
}

/// Ranked search answered by a scan while the index is being built: every positive clause as a
/// case-insensitive substring (a note with all of them; if none has all, with any), none of the
/// excluded ones.
fn ranked_by_scan(
    engine: &Engine,
    parsed: &Query,
    scope: &Scope<'_>,
    offset: usize,
    limit: usize,
    query_id: u64,
) -> Result<SearchResults, NoteError> {
    let pos: Vec<Matcher> = parsed
        .positive()
        .map(|c| Matcher::literal(&c.text.replace(['\n', '\r'], " "), false))
        .collect::<Result<_, _>>()?;
    let neg: Vec<Matcher> = parsed
        .negative()
        .map(|c| Matcher::literal(&c.text.replace(['\n', '\r'], " "), false))
        .collect::<Result<_, _>>()?;
    // (clauses matched, score) per note.
    let mut found: BTreeMap<VaultPath, (usize, f64)> = BTreeMap::new();
    let partial = scan(engine.vault(), scope, &mut |path, text| {
        if neg.iter().any(|m| m.matches(text)) {
            return;
        }
        let mut matched = 0;
        let mut score = 0.0;
        for m in &pos {
            let lines = count_matching_lines(text, m);
            let in_name = m.matches(path.stem());
            if lines > 0 || in_name {
                matched += 1;
                score += (lines as f64).ln_1p() + if in_name { 3.0 } else { 0.0 };
            }
        }
        if matched > 0 && scope.parsed_ok(text) {
            found.insert(path.clone(), (matched, score));
        }
    })?;
    let all = pos.len();
    let matched_all = found.values().any(|(n, _)| *n == all);
    let mut ranked: Vec<(f64, VaultPath)> = found
        .into_iter()
        .filter(|(_, (n, _))| !matched_all || *n == all)
        .map(|(p, (_, s))| ((s * 1000.0).round() / 1000.0, p))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = ranked.len();
    let page: Vec<(f64, VaultPath)> = ranked.into_iter().skip(offset).take(limit).collect();
    let mut needles = Needles::default();
    let mut analyzer = text::analyzer();
    for c in parsed.positive() {
        needles.terms.extend(
            text::tokens(&mut analyzer, &c.text)
                .into_iter()
                .map(|t| t.text),
        );
        needles
            .cjk
            .extend(text::cjk_runs(&c.text).map(str::to_owned));
    }
    let status = engine.status();
    let mut notes = vec![format!(
        "the search index is {} ({} of {} notes read): this ranked search was answered by a \
         scan, with simpler scoring",
        status.state, status.progress.done, status.progress.total
    )];
    if !matched_all && total > 0 {
        notes.push("no note has every word: notes with some of them are ranked".to_owned());
    }
    if partial {
        notes.push(partial_note(scope.budget));
    }
    Ok(note_page(
        engine,
        page,
        total,
        &needles,
        offset,
        query_id,
        "scan",
        partial,
        notes,
        Some(status),
    ))
}

/// A page of one-hit-per-note results, each showing its best line: the note's text from memory
/// when kept, otherwise re-read through the vault.
#[allow(clippy::too_many_arguments)]
fn note_page(
    engine: &Engine,
    ranked: Vec<(f64, VaultPath)>,
    total: usize,
    needles: &Needles,
    offset: usize,
    query_id: u64,
    served_by: &'static str,
    partial: bool,
    mut notes: Vec<String>,
    index: Option<IndexStatus>,
) -> SearchResults {
    let mut analyzer = text::analyzer();
    let mut hits = Vec::with_capacity(ranked.len());
    let mut consumed = 0;
    let mut budget = Budget::new();
    let texts = engine.texts();
    for (score, path) in ranked {
        let kept = texts.as_ref().and_then(|t| t.get(&path));
        let text: std::borrow::Cow<'_, str> = match kept {
            Some(t) => std::borrow::Cow::Borrowed(t.text()),
            None => match engine.vault().read_file(&path) {
                Ok(data) => String::from_utf8_lossy(&data.bytes).into_owned().into(),
                Err(e) => {
                    // Deleted since it was indexed: skip it, keep paging consistent.
                    tracing::debug!(path = %path, error = %e, "a ranked hit could not be read");
                    consumed += 1;
                    continue;
                }
            },
        };
        let shown = text::best_line(&mut analyzer, &text, needles);
        let hit = SearchHit {
            path: path.to_string(),
            line: shown.line,
            excerpt: shown.excerpt,
            matches: shown.matches,
            heading: shown.heading,
            score: (score * 1000.0).round() / 1000.0,
        };
        if !budget.take(&hit) {
            break;
        }
        consumed += 1;
        hits.push(hit);
    }
    if budget.full() {
        notes.push(bytes_note());
    }
    let end = offset + consumed;
    let next_cursor = (end < total && consumed > 0).then(|| encode_offset(end, query_id));
    SearchResults {
        truncated: next_cursor.is_some(),
        next_cursor,
        hits,
        total,
        mode: "ranked",
        served_by,
        partial,
        notes,
        index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(text: &str, m: &Matcher) -> Vec<SearchHit> {
        line_hits(&VaultPath::parse("Garden plan.md").unwrap(), text, m, 100)
    }

    #[test]
    fn one_hit_per_line_with_every_range_and_the_heading() {
        let m = Matcher::literal("garden", false).unwrap();
        let h = hits("# Top\nGarden\nnothing\n## Beds\nmy garden garden\n", &m);
        assert_eq!(h.iter().map(|h| h.line).collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!(h[0].heading.as_deref(), Some("Top"));
        assert_eq!(h[1].heading.as_deref(), Some("Beds"));
        assert_eq!(h[1].matches, vec![[3, 9], [10, 16]]);
        assert_eq!(count_matching_lines("Garden\nx\nmy garden garden\n", &m), 2);
    }

    #[test]
    fn case_sensitivity_and_unicode_folding() {
        let m = Matcher::literal("garden", true).unwrap();
        assert_eq!(hits("Garden\nmy garden\n", &m)[0].line, 2);
        let m = Matcher::literal("ÉTÉ", false).unwrap();
        let h = hits("a\r\nb\r\nun été chaud\r\n", &m);
        assert_eq!((h[0].line, h[0].excerpt.as_str()), (3, "un été chaud"));
        assert_eq!(h[0].matches, vec![[3, 6]]);
        // Regex metacharacters are literal text in exact mode.
        let m = Matcher::literal("a.b(", false).unwrap();
        assert!(hits("axb(", &m).is_empty());
        assert_eq!(hits("a.b(", &m).len(), 1);
    }

    #[test]
    fn a_name_only_match_shows_the_first_body_line() {
        let m = Matcher::literal("garden", false).unwrap();
        let h = hits("---\nx: 1\n---\n# Title\nbody", &m);
        assert_eq!((h[0].line, h[0].excerpt.as_str()), (4, "# Title"));
        assert!(h[0].matches.is_empty());
        let m = Matcher::literal("zebra", false).unwrap();
        assert!(hits("nothing", &m).is_empty());
    }

    #[test]
    fn regexes_match_per_line_and_never_count_empty_matches() {
        let m = Matcher::regex(r"^\d{4}-\d\d", true).unwrap();
        let h = hits("x 2026-11\n2026-11-30 log\n", &m);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].line, 2);
        let m = Matcher::regex("z*", false).unwrap();
        assert_eq!(count_matching_lines("abc\ndef\n", &m), 0);
        assert!(hits("abc\ndef\n", &m).is_empty());
        let m = Matcher::regex("é*", false).unwrap();
        assert_eq!(
            count_matching_lines("aéé\nb", &m),
            1,
            "empty matches skip whole chars"
        );
    }

    #[test]
    fn hostile_regexes_are_refused_with_a_reason() {
        let e = Matcher::regex(r"(a{1000}){1000}", false).err().unwrap();
        assert!(e.to_string().contains("too large"), "{e}");
        let e = Matcher::regex(r"(a", false).err().unwrap();
        assert!(e.to_string().starts_with("invalid regex"), "{e}");
        let e = Matcher::regex(r"(a)\1", false).err().unwrap();
        assert!(e.to_string().contains("backreferences"), "{e}");
        let nested = format!("{}a{}", "(".repeat(200), ")".repeat(200));
        assert!(Matcher::regex(&nested, false).is_err());
    }

    #[test]
    fn counting_agrees_with_hit_extraction() {
        for (text, query) in [
            ("a\nab\nb\nabab\n", "ab"),
            ("no newline at end", "end"),
            ("", "a"),
            ("x\n\nx", "x"),
        ] {
            let f = Matcher::literal(query, false).unwrap();
            let counted = count_matching_lines(text, &f);
            let p = VaultPath::parse("n.md").unwrap();
            assert_eq!(
                counted,
                line_hits(&p, text, &f, 100).len(),
                "{text:?} / {query:?}"
            );
        }
        assert!(Matcher::literal("x\ny", false).is_err());
    }

    #[test]
    fn time_filters_accept_dates_and_rfc3339() {
        assert_eq!(parse_time("t", "1970-01-02").unwrap(), 86_400_000);
        assert_eq!(parse_time("t", "1970-01-01T00:00:01Z").unwrap(), 1000);
        assert!(parse_time("t", "yesterday").is_err());
    }

    #[test]
    fn the_byte_budget_stops_a_page_but_always_admits_one_hit() {
        let mut b = Budget::new();
        let big = SearchHit {
            path: "x.md".into(),
            line: 1,
            excerpt: "x".repeat(MAX_REPLY_BYTES),
            matches: vec![],
            heading: None,
            score: 1.0,
        };
        assert!(b.take(&big));
        assert!(!b.take(&big));
        assert!(b.full());
    }
}

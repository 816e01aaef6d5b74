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

mod lines;
mod pdfs;
mod ranked;
mod semantic;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NoteError;
use super::check_limit;
use super::filter::NoteFilter;
use super::paging::{decode_offset, encode_offset, fingerprint};
use crate::engine::{Engine, IndexStatus};
use crate::index::query;
use crate::index::{IndexFilter, millis};
use crate::markdown;
use crate::obsidian::config::IgnoreFilters;
use crate::obsidian::provenance::Trust;
use crate::vault::{Vault, VaultPath, is_note_name};

pub use lines::{Matcher, excerpt};
pub use semantic::{DEPTH as FUSION_DEPTH, MODEL_WAYS_OUT, NO_MODEL, RRF_K, no_model};

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
    /// By meaning: notes whose sections are nearest the query's embedding (needs an
    /// embedding model).
    Semantic,
    /// Meaning and words: the semantic and ranked lists fused by reciprocal rank (the default
    /// when an embedding model is loaded).
    Hybrid,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Ranked => "ranked",
            Mode::Exact => "exact",
            Mode::Regex => "regex",
            Mode::Semantic => "semantic",
            Mode::Hybrid => "hybrid",
        }
    }

    /// The mode a search without one runs in: `hybrid` when an embedding model is loaded,
    /// `ranked` otherwise.
    pub fn default_for(engine: &Engine) -> Mode {
        if engine.semantic().is_some() {
            Mode::Hybrid
        } else {
            Mode::Ranked
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
    /// Only notes this trust admits (no clippings; no shared notes either for `own`).
    pub trust: Option<Trust>,
    /// Exact mode: answer with the first page without counting every hit (`total` is then the
    /// index's count of notes that may match, `total_estimated`).
    pub estimate: bool,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl SearchQuery {
    /// `query` in `mode` over the whole vault, at most `limit` hits, no other filter.
    pub fn new(query: impl Into<String>, mode: Mode, limit: u32) -> Self {
        SearchQuery {
            query: query.into(),
            mode,
            limit: Some(limit),
            case_sensitive: false,
            folder: VaultPath::root(),
            tag: None,
            property: None,
            value: None,
            modified_after: None,
            modified_before: None,
            trust: None,
            estimate: false,
            cursor: None,
        }
    }
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
    /// `title` when only the note's name matched (no line does): `excerpt` is the name, `line`
    /// is 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<&'static str>,
    /// What the note hides from its reader (`read_note`'s `hidden` has counts and lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Vec<crate::markdown::hidden::HiddenKind>>,
    /// Where the text came from, when not the vault's own (`clipped`, `shared`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::obsidian::provenance::Provenance>,
    /// In a PDF (`--index-pdfs`): the page; `line` counts from its top.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

/// What `matched` says of a hit on the note's name.
pub const MATCHED_TITLE: &str = "title";

/// A hit on the note's name (no line matched): line 1, the name as the excerpt, `ranges`
/// (byte ranges in the name) as its matches.
pub(crate) fn title_hit(path: &VaultPath, ranges: Vec<(usize, usize)>, score: f64) -> SearchHit {
    let (excerpt, matches) = crate::index::text::cut_excerpt(path.stem(), &ranges);
    SearchHit {
        path: path.to_string(),
        line: 1,
        excerpt,
        matches,
        heading: None,
        score,
        matched: Some(MATCHED_TITLE),
        hidden: None,
        provenance: None,
        page: None,
    }
}

/// The hit of a note found by words: its best line, or when no line holds one of the words,
/// a [`title_hit`] when the name holds one, else line 1 (never a line past the end).
pub(crate) fn keyword_hit(
    analyzer: &mut tantivy::tokenizer::TextAnalyzer,
    path: &VaultPath,
    text: &str,
    needles: &crate::index::text::Needles,
    score: f64,
) -> SearchHit {
    use crate::index::text;
    let shown = text::best_line(analyzer, text, needles);
    if shown.matches.is_empty() {
        let ranges = text::line_matches(analyzer, path.stem(), needles);
        if !ranges.is_empty() {
            return title_hit(path, ranges, score);
        }
        // Matched where no line shows it (a field of the index alone): the first line.
        let (excerpt, _) = text::cut_excerpt(text::line_at(text, 0), &[]);
        return SearchHit {
            path: path.to_string(),
            line: 1,
            excerpt,
            matches: Vec::new(),
            heading: None,
            score,
            matched: None,
            hidden: None,
            provenance: None,
            page: None,
        };
    }
    SearchHit {
        path: path.to_string(),
        line: shown.line,
        excerpt: shown.excerpt,
        matches: shown.matches,
        heading: shown.heading,
        score,
        matched: None,
        hidden: None,
        provenance: None,
        page: None,
    }
}

/// The hits of a search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Hits in all: matching notes (ranked) or matching lines (exact, regex).
    pub total: usize,
    /// Set when `total` is the index's count of notes that may match, not a count of hits (an
    /// exact search for words in very many notes: see `notes`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_estimated: bool,
    /// True when more hits exist than were returned.
    pub truncated: bool,
    /// Pass back as `cursor` for the next page of hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `ranked`, `exact` or `regex`.
    pub mode: &'static str,
    /// `index` (ranked), `cached_index` (ranked, right after a restart: the index the last run
    /// saved, still being checked against the vault), `index+scan` (exact: the index picked the
    /// notes, their texts were read for the lines), or `scan` (exact and regex modes, and ranked
    /// mode while the index is first built).
    pub served_by: &'static str,
    /// True when the scan's time budget ran out (hits and total cover only the notes scanned),
    /// or, in semantic and hybrid modes, while notes are still being embedded (the meaning
    /// ranking covers only those embedded so far).
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
pub fn parse_time(name: &'static str, s: &str) -> Result<i64, NoteError> {
    let s = s.trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc().timestamp_millis());
    }
    Err(NoteError::invalid(
        name,
        format!("{name}: expected a date like 2026-11-30 or a time like 2026-11-30T08:00:00Z"),
    ))
}

/// The filters of a `search_notes` call as the client wrote them (a folder path, times as
/// text); [`SearchRequest::new`] checks them.
#[derive(Debug, Clone, Default)]
pub struct SearchScope {
    /// Only notes under this folder.
    pub folder: Option<String>,
    /// Only notes with this tag or one nested under it.
    pub tag: Option<String>,
    /// Only notes with this frontmatter property...
    pub property: Option<String>,
    /// ...equal to this value.
    pub value: Option<String>,
    /// Modified at or after: a date or an RFC 3339 time.
    pub modified_after: Option<String>,
    /// Modified before: a date or an RFC 3339 time.
    pub modified_before: Option<String>,
    /// Leave out clippings (`shared`), and shared notes too (`own`).
    pub trust: Option<Trust>,
}

/// What `search_notes` asks: the query with its folder and times parsed, and the mode if the
/// client chose one (otherwise the engine's default, [`Mode::default_for`]).
#[derive(Debug, Clone)]
pub struct SearchRequest {
    query: SearchQuery,
    mode: Option<Mode>,
}

impl SearchRequest {
    /// Parses the folder, then `modified_after`, then `modified_before` (the first bad one is
    /// the error). The query text, the limit and the cursor are checked by [`run`].
    pub fn new(
        text: String,
        mode: Option<Mode>,
        limit: Option<u32>,
        case_sensitive: bool,
        scope: SearchScope,
        cursor: Option<String>,
    ) -> Result<Self, NoteError> {
        let folder = VaultPath::parse_folder(scope.folder.as_deref().unwrap_or(""))?;
        let time =
            |name: &'static str, v: Option<String>| v.map(|s| parse_time(name, &s)).transpose();
        let query = SearchQuery {
            query: text,
            mode: mode.unwrap_or_default(),
            limit,
            case_sensitive,
            folder,
            tag: scope.tag,
            property: scope.property,
            value: scope.value,
            modified_after: time("modified_after", scope.modified_after)?,
            modified_before: time("modified_before", scope.modified_before)?,
            trust: scope.trust,
            estimate: false,
            cursor,
        };
        Ok(SearchRequest { query, mode })
    }

    /// The same request answering with the first page before every hit is counted (exact
    /// mode; see [`SearchQuery::estimate`]).
    pub fn estimating(mut self, estimate: bool) -> Self {
        self.query.estimate = estimate;
        self
    }

    /// The mode this request runs in on `engine`.
    pub fn mode(&self, engine: &Engine) -> Mode {
        self.mode.unwrap_or_else(|| Mode::default_for(engine))
    }

    /// True when answering waits on the index's first build (a ranked search before it ends),
    /// so a client may be told how the build goes.
    pub fn waits_for_build(&self, engine: &Engine) -> bool {
        self.mode(engine) == Mode::Ranked && !engine.is_ready()
    }
}

/// `search_notes`: the request run in its mode (see [`search`]).
pub fn run(engine: &Engine, req: &SearchRequest) -> Result<SearchResults, NoteError> {
    let mut query = req.query.clone();
    query.mode = req.mode(engine);
    search(engine, &query)
}

/// Runs a search in the query's mode.
pub fn search(engine: &Engine, q: &SearchQuery) -> Result<SearchResults, NoteError> {
    let limit = check_limit(q.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    if q.query.trim().is_empty() {
        return Err(NoteError::invalid(
            "query",
            "query is empty: give the text to search for",
        ));
    }
    if q.query.len() > MAX_QUERY_BYTES {
        return Err(NoteError::invalid(
            "query",
            format!("query is longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    if let (Some(a), Some(b)) = (q.modified_after, q.modified_before)
        && a >= b
    {
        return Err(NoteError::invalid(
            "modified_after",
            "modified_after must be earlier than modified_before",
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
        q.trust,
        q.estimate,
    ));
    let with_pdfs = pdfs::applies(engine, q, &filter);
    let pdfs_after_notes = with_pdfs && q.mode != Mode::Ranked;
    // A cursor past the notes, into the PDFs' hits.
    let pdf_offset = q
        .cursor
        .as_deref()
        .filter(|_| pdfs_after_notes)
        .and_then(|c| decode_offset(Some(c), pdfs::cursor_id(query_id)).ok());
    let page = Page {
        offset: match pdf_offset {
            Some(_) => 0,
            None => decode_offset(q.cursor.as_deref(), query_id)?,
        },
        limit,
        query_id,
    };
    let ignored = engine.user_ignored();
    let distrusted = q.trust.map(|t| engine.distrusted(&engine.model_now(), t));
    let scope = Scope {
        distrusted,
        budget: engine.scan_budget(),
        folder: &q.folder,
        filter: &filter,
        after: q.modified_after,
        before: q.modified_before,
        ignored: ignored.as_ref(),
    };
    if let Some(offset) = pdf_offset {
        let mut results = pdfs::page_of_pdfs(engine, q, &scope, page, offset)?;
        results.notes.extend(pdfs::unread_note(engine));
        show_hidden(engine, &mut results.hits);
        return Ok(results);
    }
    let mut results = match q.mode {
        Mode::Exact => {
            let matcher = Matcher::literal(&q.query, q.case_sensitive)?;
            let estimate = q.estimate;
            lines::search_lines(engine, &q.query, &matcher, &scope, page, q.mode, estimate)
        }
        Mode::Regex => {
            let matcher = Matcher::regex(&q.query, q.case_sensitive)?;
            lines::search_lines(engine, &q.query, &matcher, &scope, page, q.mode, false)
        }
        Mode::Ranked => ranked::search_ranked(engine, &q.query, &scope, page, with_pdfs),
        Mode::Semantic => semantic::search_semantic(engine, &q.query, &scope, page, false),
        Mode::Hybrid => semantic::search_semantic(engine, &q.query, &scope, page, true),
    }?;
    if pdfs_after_notes {
        pdfs::after_notes(engine, q, &scope, page, &mut results)?;
    }
    if with_pdfs {
        results.notes.extend(pdfs::unread_note(engine));
    }
    show_hidden(engine, &mut results.hits);
    Ok(results)
}

/// Names where each hit's text came from when it is not the vault's own, and what each hit's
/// note hides from its reader (the summary the model made when it read
/// the note: no work for the notes that hide nothing), and shows the excerpts of those notes
/// as the server's hidden-text policy says: the line is marked or stripped within the whole
/// note's spans (a comment that opened lines above still counts), and the matches are found
/// again in what is shown.
fn show_hidden(engine: &Engine, hits: &mut [SearchHit]) {
    use crate::markdown::hidden::{self, Policy};
    let policy = engine.options().hidden_text;
    let model = engine.model_now();
    for hit in hits.iter_mut() {
        let Ok(path) = VaultPath::parse(&hit.path) else {
            continue;
        };
        hit.provenance = Some(engine.provenance(&model, &path)).filter(|p| !p.is_own());
        let Some(summary) = model.note(&path).and_then(|n| n.parsed.hidden.as_deref()) else {
            continue;
        };
        hit.hidden = Some(summary.kinds.iter().map(|k| k.kind).collect());
        if policy == Policy::Show || hit.matched.is_some() {
            continue;
        }
        let Ok(data) = engine.vault().read_file(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&data.bytes);
        let Some(line) = line_span(&text, hit.line) else {
            continue;
        };
        let spans = markdown::hidden_spans(&text);
        if !spans
            .spans
            .iter()
            .any(|s| s.end > line.start && s.start < line.end)
        {
            continue;
        }
        let shown = hidden::apply(&text, line, &spans, policy);
        let chars: Vec<char> = hit.excerpt.chars().collect();
        let mut ranges = Vec::new();
        let mut from = 0;
        for [start, end] in &hit.matches {
            let needle: String = chars.get(*start..*end).unwrap_or_default().iter().collect();
            if needle.is_empty() {
                continue;
            }
            if let Some(at) = shown.get(from..).and_then(|rest| rest.find(&needle)) {
                ranges.push((from + at, from + at + needle.len()));
                from += at + needle.len();
            }
        }
        let (excerpt, matches) = crate::index::text::cut_excerpt(&shown, &ranges);
        hit.excerpt = excerpt;
        hit.matches = matches;
    }
}

/// The byte range of 1-based line `line` of `text`, without its line break.
fn line_span(text: &str, line: usize) -> Option<std::ops::Range<usize>> {
    let start = if line <= 1 {
        0
    } else {
        memchr::memchr_iter(b'\n', text.as_bytes()).nth(line - 2)? + 1
    };
    let end = memchr::memchr(b'\n', &text.as_bytes()[start..]).map_or(text.len(), |i| start + i);
    Some(start..text[..end].trim_end_matches('\r').len().max(start))
}

/// Which page of hits a search returns.
#[derive(Debug, Clone, Copy)]
struct Page {
    /// Hits to skip (from the cursor).
    offset: usize,
    /// Most hits to return.
    limit: usize,
    /// Identifies the query and its filters in cursors.
    query_id: u64,
}

/// Where a scan looks and what it keeps.
struct Scope<'a> {
    budget: Duration,
    folder: &'a VaultPath,
    filter: &'a NoteFilter,
    after: Option<i64>,
    before: Option<i64>,
    /// Obsidian's Excluded files, left out.
    ignored: Option<&'a Arc<IgnoreFilters>>,
    /// The files the `trust` filter leaves out.
    distrusted: Option<Arc<crate::engine::Distrusted>>,
}

impl Scope<'_> {
    /// The same filters, for the index: the one place both are made from.
    fn index_filter(&self, engine: &Engine) -> IndexFilter {
        IndexFilter {
            folder: Some(self.folder.clone()),
            tag: self.filter.tag().map(str::to_owned),
            property: self
                .filter
                .property()
                .map(|(k, v)| (k.to_owned(), v.map(str::to_owned))),
            modified_after: self.after,
            modified_before: self.before,
            exclude: {
                let ignored = self
                    .ignored
                    .map(|f| engine.user_ignored_files(&engine.model_now(), f));
                match (ignored, &self.distrusted) {
                    (Some(a), Some(d)) => Some(Arc::new(a.union(&d.loose).cloned().collect())),
                    (None, Some(d)) => Some(Arc::clone(&d.loose)),
                    (a, None) => a,
                }
            },
            exclude_folders: self
                .distrusted
                .as_ref()
                .map(|d| d.folders.clone())
                .unwrap_or_default(),
        }
    }

    /// False for a note Obsidian's Excluded files name.
    fn shown(&self, p: &VaultPath) -> bool {
        self.ignored.is_none_or(|f| !f.matches(p.as_str()))
            && self
                .distrusted
                .as_ref()
                .is_none_or(|d| !d.files.contains(p))
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
/// Returns whether the budget ran out; an error when the request was cancelled.
fn scan(
    vault: &Vault,
    scope: &Scope<'_>,
    visit: &mut dyn FnMut(&VaultPath, &str),
) -> Result<bool, NoteError> {
    let started = Instant::now();
    let mut partial = false;
    vault.walk(scope.folder, true, &is_note_name, &mut |entry| {
        if super::cancel::requested() {
            return ControlFlow::Break(());
        }
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
    super::cancel::check()?;
    Ok(partial)
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
pub(super) struct Budget {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_request_parses_its_folder_and_times() {
        let scope = SearchScope {
            folder: Some("Projects".into()),
            tag: Some("a".into()),
            modified_after: Some("1970-01-02".into()),
            modified_before: Some("1970-01-03T00:00:00Z".into()),
            ..SearchScope::default()
        };
        let r =
            SearchRequest::new("w".into(), Some(Mode::Exact), Some(5), true, scope, None).unwrap();
        assert_eq!(r.mode, Some(Mode::Exact));
        assert_eq!(r.query.folder.as_str(), "Projects");
        assert_eq!(r.query.modified_after, Some(86_400_000));
        assert_eq!(r.query.modified_before, Some(2 * 86_400_000));
        assert_eq!((r.query.limit, r.query.case_sensitive), (Some(5), true));
        let r = SearchRequest::new("w".into(), None, None, false, SearchScope::default(), None)
            .unwrap();
        assert!(r.query.folder.is_root());
        assert_eq!(
            r.mode, None,
            "no mode given: the engine's default, chosen when run"
        );
    }

    #[test]
    fn a_search_request_names_the_first_bad_filter() {
        let bad_times = SearchScope {
            modified_after: Some("soon".into()),
            modified_before: Some("later".into()),
            ..SearchScope::default()
        };
        let e =
            SearchRequest::new("w".into(), None, None, false, bad_times.clone(), None).unwrap_err();
        assert!(e.to_string().starts_with("modified_after:"), "{e}");
        let bad_folder = SearchScope {
            folder: Some("../out".into()),
            ..bad_times
        };
        let e = SearchRequest::new("w".into(), None, None, false, bad_folder, None).unwrap_err();
        assert!(matches!(e, NoteError::Vault(_)), "the folder first: {e:?}");
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
            matched: None,
            hidden: None,
            provenance: None,
            page: None,
        };
        assert!(b.take(&big));
        assert!(!b.take(&big));
        assert!(b.full());
    }
}

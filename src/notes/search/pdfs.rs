//! Hits in PDFs (`--index-pdfs`): the pages' own index for ranked search, their kept texts for
//! exact and regex search. Ranked hits are merged with the notes' by score: the two indexes
//! share analyzer, fields and boosts, and each is searched with the other's statistics added
//! (document count, field lengths, each word's document frequency), so one BM25 scale covers
//! both. Exact and regex hits follow the notes' hits: the page where the notes run out is
//! filled with PDF hits, and its cursor goes on through them (a cursor of its own, tied to the
//! same query).

use std::time::Instant;

use super::lines::line_hits;
use super::*;
use crate::engine::pdfs::{PdfStore, split_page_key};
use crate::index::text;

/// Most PDF hits a search collects (ranked: pages; exact and regex: lines).
pub const MAX_PDF_HITS: usize = 2_000;

/// Whether PDF hits can answer this search: `--index-pdfs`, a keyword mode, and no filter that
/// only notes can meet (tag, property, provenance). Ranked search merges PDF pages with the
/// notes by score ([`ranked_pages`]); exact and regex searches show them after the notes.
pub(super) fn applies(engine: &Engine, q: &SearchQuery, filter: &NoteFilter) -> bool {
    engine.pdfs().is_some()
        && matches!(q.mode, Mode::Ranked | Mode::Exact | Mode::Regex)
        && filter.is_empty()
        && q.trust.is_none()
}

/// The id of the cursors that page through PDF hits.
pub(super) fn cursor_id(query_id: u64) -> u64 {
    fingerprint(&(query_id, "pdf"))
}

/// PDF hits `offset..offset + want`, and how many there are in all (at most
/// [`MAX_PDF_HITS`]); whether the time budget ran out.
pub(super) fn pdf_hits(
    engine: &Engine,
    q: &SearchQuery,
    scope: &Scope<'_>,
    offset: usize,
    want: usize,
) -> Result<(Vec<SearchHit>, usize, bool), NoteError> {
    let Some(store) = engine.pdfs() else {
        return Ok((Vec::new(), 0, false));
    };
    match q.mode {
        Mode::Exact => {
            let m = Matcher::literal(&q.query, q.case_sensitive)?;
            Ok(lines(engine, store, &m, scope, offset, want))
        }
        Mode::Regex => {
            let m = Matcher::regex(&q.query, q.case_sensitive)?;
            Ok(lines(engine, store, &m, scope, offset, want))
        }
        Mode::Ranked | Mode::Semantic | Mode::Hybrid => Ok((Vec::new(), 0, false)),
    }
}

/// The PDF pages a ranked query finds, best first: at most `want` (from the top), with how
/// many there are and the words to highlight.
pub(super) struct RankedPages {
    pub hits: Vec<(f64, VaultPath, Option<u32>)>,
    pub total: usize,
    /// False when no page had every word and pages with some of them are ranked instead.
    pub matched_all: bool,
    pub needles: text::Needles,
}

/// Ranked: BM25 over the pages' index (the notes' analyzer, fields and boosts; each page a
/// document named after its PDF), scored with the notes' index `notes` counted in (as the
/// notes are scored with the pages counted in), the top `want` pages.
pub(super) fn ranked_pages(
    store: &PdfStore,
    notes: &crate::index::SearchIndex,
    parsed: &query::Query,
    scope: &Scope<'_>,
    want: usize,
) -> Result<RankedPages, NoteError> {
    let filter = IndexFilter {
        folder: Some(scope.folder.clone()),
        tag: None,
        property: None,
        modified_after: scope.after,
        modified_before: scope.before,
        exclude: None,
        exclude_folders: Vec::new(),
    };
    let found =
        match store
            .index()
            .search_beside(parsed, &filter, 0, want.min(MAX_PDF_HITS), Some(notes))
        {
            Ok(f) => f,
            Err(crate::index::IndexError::NoWords) => {
                return Ok(RankedPages {
                    hits: Vec::new(),
                    total: 0,
                    matched_all: true,
                    needles: text::Needles::default(),
                });
            }
            Err(e) => return Err(NoteError::Unavailable(e.to_string())),
        };
    let hits = found
        .hits
        .into_iter()
        .filter_map(|(score, key)| {
            let (path, page) = split_page_key(&key)?;
            scope
                .shown(&path)
                .then_some((f64::from(score), path, Some(page)))
        })
        .collect();
    Ok(RankedPages {
        hits,
        total: found.total,
        matched_all: found.matched_all,
        needles: found.needles,
    })
}

/// Exact and regex: every matching line of every page, PDFs in path order, pages and lines in
/// order; counted to [`MAX_PDF_HITS`], within the scan's time budget.
fn lines(
    engine: &Engine,
    store: &PdfStore,
    matcher: &Matcher,
    scope: &Scope<'_>,
    offset: usize,
    want: usize,
) -> (Vec<SearchHit>, usize, bool) {
    let started = Instant::now();
    let model = engine.model_now();
    let files = model.files();
    let mut total = 0usize;
    let mut hits = Vec::new();
    let mut partial = false;
    'pdfs: for (path, text) in store.texts() {
        if !path.starts_with(scope.folder) || !scope.shown(&path) {
            continue;
        }
        if (scope.after.is_some() || scope.before.is_some())
            && !files.get(&path).is_some_and(|m| scope.time_ok(m.modified))
        {
            continue;
        }
        for (i, page) in text.pages.iter().enumerate() {
            if started.elapsed() > scope.budget {
                partial = true;
                break 'pdfs;
            }
            let n = super::lines::count_matching_lines(page, matcher);
            if n == 0 {
                continue;
            }
            let (from, to) = (total, total + n);
            total = to;
            // The lines of this page that fall in the window asked for.
            let first = offset.max(from);
            let last = (offset + want).min(to);
            if first < last {
                let mut page_hits = line_hits(&path, page, matcher, last - from);
                for mut hit in page_hits.drain(first - from..) {
                    hit.page = Some(i as u32 + 1);
                    // As a note scores: its matching lines.
                    hit.score = n as f64;
                    hits.push(hit);
                }
            }
            if total >= MAX_PDF_HITS {
                total = MAX_PDF_HITS;
                break 'pdfs;
            }
        }
    }
    (hits, total, partial)
}

/// Adds PDF hits to a page of note hits: when the notes ran out on this page, the rest of the
/// page is filled from the PDFs' first hits. `total` counts both.
pub(super) fn after_notes(
    engine: &Engine,
    q: &SearchQuery,
    scope: &Scope<'_>,
    page: Page,
    results: &mut SearchResults,
) -> Result<(), NoteError> {
    let room = page.limit.saturating_sub(results.hits.len());
    let notes_done = results.next_cursor.is_none();
    let (hits, total, partial) = pdf_hits(engine, q, scope, 0, if notes_done { room } else { 0 })?;
    results.total += total;
    results.partial |= partial;
    if total >= MAX_PDF_HITS {
        results.total_estimated = true;
        results.notes.push(capped_note());
    }
    if !notes_done || total == 0 {
        if total > 0 {
            results.notes.push(format!(
                "{total} more hits are in PDFs: the pages after the notes' show them"
            ));
        }
        return Ok(());
    }
    let shown = hits.len();
    results.hits.extend(hits);
    if shown < total {
        results.next_cursor = Some(encode_offset(shown, cursor_id(page.query_id)));
        results.truncated = true;
    }
    Ok(())
}

/// A page of PDF hits only, from a cursor that went past the notes.
pub(super) fn page_of_pdfs(
    engine: &Engine,
    q: &SearchQuery,
    scope: &Scope<'_>,
    page: Page,
    offset: usize,
) -> Result<SearchResults, NoteError> {
    let (hits, total, partial) = pdf_hits(engine, q, scope, offset, page.limit)?;
    let end = offset + hits.len();
    let next_cursor =
        (end < total && !hits.is_empty()).then(|| encode_offset(end, cursor_id(page.query_id)));
    let mut notes = vec!["hits in PDFs (past the notes'): `total` counts these".to_owned()];
    if total >= MAX_PDF_HITS {
        notes.push(capped_note());
    }
    Ok(SearchResults {
        truncated: next_cursor.is_some(),
        next_cursor,
        hits,
        total,
        total_estimated: total >= MAX_PDF_HITS,
        mode: q.mode.name(),
        served_by: "pdf_index",
        partial,
        notes,
        index: None,
    })
}

/// Said while the PDFs are still being read (`--index-pdfs` just started): hits in those not
/// read yet are missing.
pub(super) fn unread_note(engine: &Engine) -> Option<String> {
    engine.pdfs()?.unread_note()
}

/// Said when the PDFs hold more hits than are collected.
fn capped_note() -> String {
    format!(
        "the PDFs hold more than {MAX_PDF_HITS} hits: only the first {MAX_PDF_HITS} are counted \
         and paged; narrow the query or give a `folder`"
    )
}

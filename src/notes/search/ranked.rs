//! Ranked search: BM25 over the index, or, while the index is being built, a scan that takes
//! every word as a substring; either way one hit per note, showing its best line.

use std::collections::BTreeMap;

use super::lines::count_matching_lines;
use super::*;
use crate::index::query::Query;
use crate::index::text::{self, Needles};

/// Ranked notes to show as one page, and how they were found.
struct Ranked<'n> {
    /// The page's notes, best first, with their scores (and, for a PDF's page, its number).
    hits: Vec<(f64, VaultPath, Option<u32>)>,
    /// Matching notes in all.
    total: usize,
    /// What to highlight.
    needles: &'n Needles,
    served_by: &'static str,
    partial: bool,
    notes: Vec<String>,
    /// The index state, when the index could not answer.
    index: Option<IndexStatus>,
}

/// A ranked search: over the index once it is built, by a scan before.
pub(super) fn search_ranked(
    engine: &Engine,
    query_text: &str,
    scope: &Scope<'_>,
    page: Page,
    with_pdfs: bool,
) -> Result<SearchResults, NoteError> {
    let parsed =
        query::parse(query_text).map_err(|e| NoteError::invalid("query", e.to_string()))?;
    engine.refresh_if_stale()?;
    // After a restart, the cached index answers while the first build compares it with the vault
    // (unless Excluded files must be left out: the model that lists them is not built yet).
    let (ix, provisional) = match (engine.index(), engine.cached_index()) {
        (Some(ix), _) => (ix, false),
        (None, Some(ix)) if scope.ignored.is_none() && scope.distrusted.is_none() => (ix, true),
        _ => return ranked_by_scan(engine, &parsed, scope, page),
    };
    // With PDFs, both lists from the top to the page's end, merged by score.
    let pdf_pages = match engine.pdfs() {
        Some(store) if with_pdfs && !provisional => Some(super::pdfs::ranked_pages(
            store,
            ix,
            &parsed,
            scope,
            page.offset + page.limit,
        )?),
        _ => None,
    };
    let (from, count) = match &pdf_pages {
        Some(_) => (0, page.offset + page.limit),
        None => (page.offset, page.limit),
    };
    let beside = pdf_pages
        .as_ref()
        .and_then(|_| engine.pdfs())
        .map(|s| s.index());
    let found = ix
        .search_beside(&parsed, &scope.index_filter(engine), from, count, beside)
        .map_err(|e| NoteError::Unavailable(e.to_string()))?;
    let mut notes = Vec::new();
    let mut index = None;
    if provisional {
        let status = engine.status();
        notes.push(format!(
            "the search index is the one saved by the last run, being checked against the vault \
             ({} of {} notes read): notes changed since then may be missing or out of date for a \
             few seconds",
            status.progress.done, status.progress.total
        ));
        index = Some(status);
    }
    // The all-words rule over notes and pages together: when either list has hits with every
    // word, the other list's hits with only some of them (its fallback) are left out.
    let pdf_pages = pdf_pages.map(|mut pdf| {
        if found.matched_all && !pdf.matched_all {
            pdf.hits.clear();
            pdf.total = 0;
        }
        pdf
    });
    let pdf_all = pdf_pages
        .as_ref()
        .is_some_and(|p| p.matched_all && p.total > 0);
    let notes_dropped = !found.matched_all && pdf_all;
    // Every word in a note or in a page: nothing was relaxed.
    let matched_all = found.matched_all || pdf_all;
    let mut hits: Vec<(f64, VaultPath, Option<u32>)> = if notes_dropped {
        Vec::new()
    } else {
        found
            .hits
            .into_iter()
            .map(|(s, p)| (f64::from(s), p, None))
            .collect()
    };
    let mut total = if notes_dropped { 0 } else { found.total };
    let mut needles = found.needles;
    if let Some(pdf) = pdf_pages {
        total += pdf.total;
        hits.extend(pdf.hits);
        // Best first; equal scores by path, then page.
        hits.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| a.2.cmp(&b.2))
        });
        hits = hits
            .into_iter()
            .skip(page.offset)
            .take(page.limit)
            .collect();
        if needles.terms.is_empty() {
            needles = pdf.needles;
        }
    }
    // Said only of notes that are ranked: a search that found nothing has nothing relaxed.
    if !matched_all && total > 0 {
        notes.push("no note has every word: notes with some of them are ranked".to_owned());
    }
    let shown = Ranked {
        hits,
        total,
        needles: &needles,
        served_by: if provisional { "cached_index" } else { "index" },
        partial: false,
        notes,
        index,
    };
    Ok(note_page(engine, shown, page))
}

/// Ranked search answered by a scan while the index is being built: every positive clause as a
/// case-insensitive substring (a note with all of them; if none has all, with any), none of the
/// excluded ones.
fn ranked_by_scan(
    engine: &Engine,
    parsed: &Query,
    scope: &Scope<'_>,
    page: Page,
) -> Result<SearchResults, NoteError> {
    let Page { offset, limit, .. } = page;
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
    let page_hits: Vec<(f64, VaultPath, Option<u32>)> = ranked
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(s, p)| (s, p, None))
        .collect();
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
    let shown = Ranked {
        hits: page_hits,
        total,
        needles: &needles,
        served_by: "scan",
        partial,
        notes,
        index: Some(status),
    };
    Ok(note_page(engine, shown, page))
}

/// A page of one-hit-per-note results, each showing its best line: the note's text from memory
/// when kept, otherwise re-read through the vault.
fn note_page(engine: &Engine, shown: Ranked<'_>, page: Page) -> SearchResults {
    let Ranked {
        hits: ranked,
        total,
        needles,
        served_by,
        partial,
        mut notes,
        index,
    } = shown;
    let Page {
        offset, query_id, ..
    } = page;
    let mut analyzer = text::analyzer();
    let mut hits = Vec::with_capacity(ranked.len());
    let mut consumed = 0;
    let mut budget = Budget::new();
    let texts = engine.texts();
    for (score, path, pdf_page) in ranked {
        if let Some(n) = pdf_page {
            // A PDF's page: its kept text (gone since it was found: skipped, as a note is).
            let text = engine.pdfs().and_then(|s| s.text(&path));
            let Some(page_text) = text.as_ref().and_then(|t| t.pages.get(n as usize - 1)) else {
                consumed += 1;
                continue;
            };
            let score = (score * 1000.0).round() / 1000.0;
            let mut hit = keyword_hit(&mut analyzer, &path, page_text, needles, score);
            hit.page = Some(n);
            if !budget.take(&hit) {
                break;
            }
            consumed += 1;
            hits.push(hit);
            continue;
        }
        let kept = texts.as_ref().and_then(|t| t.get(&path));
        let text: std::borrow::Cow<'_, str> = match kept {
            Some(t) => t.text,
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
        let hit = keyword_hit(
            &mut analyzer,
            &path,
            &text,
            needles,
            (score * 1000.0).round() / 1000.0,
        );
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
        total_estimated: false,
        mode: "ranked",
        served_by,
        partial,
        notes,
        index,
    }
}

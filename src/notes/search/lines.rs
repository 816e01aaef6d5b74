//! Exact and regex search: one hit per matching line, the notes picked by the index's prefilter
//! (exact, ASCII) or scanned whole, on every core, within the time budget.

use std::time::{Duration, Instant};

use super::*;
use crate::index::Prefiltered;
use crate::index::text::{self, HeadingTracker};

/// Most match ranges reported for one line.
const MAX_RANGES_PER_LINE: usize = 32;

/// A compiled matcher for exact and regex modes.
pub struct Matcher {
    re: regex::Regex,
    /// When searching must stop ([`Matcher::until`]): every search reads the clock first, and
    /// past it finds nothing and records that it was cut.
    deadline: Option<Instant>,
    cut: std::sync::atomic::AtomicBool,
    /// The request's cancellation flag (the building thread's): once marked, every search
    /// finds nothing, on whichever thread it runs.
    cancel: Option<crate::notes::cancel::Flag>,
}

impl Matcher {
    /// `query` as a literal: case-insensitive matching uses Unicode simple case folding.
    pub fn literal(query: &str, case_sensitive: bool) -> Result<Self, NoteError> {
        if query.contains(['\n', '\r']) {
            return Err(NoteError::invalid(
                "query",
                "exact search text cannot contain a line break: matches are shown line by line",
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
                regex::Error::CompiledTooBig(_) => NoteError::invalid(
                    "query",
                    format!(
                        "the regex is too large once compiled (over {} KiB); simplify it",
                        REGEX_SIZE_LIMIT / 1024
                    ),
                ),
                regex::Error::Syntax(msg) => {
                    let first = msg.lines().last().unwrap_or("").trim();
                    NoteError::invalid("query", format!("invalid regex: {first}"))
                }
                _ => NoteError::invalid("query", "invalid regex"),
            })?;
        Ok(Matcher {
            re,
            deadline: None,
            cut: std::sync::atomic::AtomicBool::new(false),
            cancel: crate::notes::cancel::current(),
        })
    }

    /// The same matcher, finding nothing once `deadline` has passed.
    ///
    /// One regex search may read the rest of the note (the regex crate bounds a search, not an
    /// iteration over matches: `(?s:.*Z)?` matches the empty string at every position, and each
    /// search for it scans to the end), so the time budget is checked before each search, not
    /// only between notes.
    pub(super) fn until(&self, deadline: Instant) -> Matcher {
        Matcher {
            re: self.re.clone(),
            deadline: Some(deadline),
            cut: std::sync::atomic::AtomicBool::new(false),
            cancel: self.cancel.clone(),
        }
    }

    /// True when a search was refused because the deadline had passed.
    pub(super) fn was_cut(&self) -> bool {
        self.cut.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True when the request was cancelled: the search's result will be thrown away.
    pub(super) fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|f| f.is_cancelled())
    }

    /// False (and the matcher records it) once the deadline has passed or the request was
    /// cancelled.
    fn in_time(&self) -> bool {
        if self.cancelled() || self.deadline.is_some_and(|d| Instant::now() > d) {
            self.cut.store(true, std::sync::atomic::Ordering::Relaxed);
            return false;
        }
        true
    }

    /// True when `text` has a non-empty match.
    pub(super) fn matches(&self, text: &str) -> bool {
        self.find_at(text, 0).is_some()
    }

    /// The first non-empty match at or after byte `from`.
    fn find_at<'t>(&self, text: &'t str, mut from: usize) -> Option<regex::Match<'t>> {
        while from <= text.len() {
            if !self.in_time() {
                return None;
            }
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

/// Exact or regex search: one hit per matching line. `estimate` (exact mode): the first page
/// in the index's ranked order, without counting every hit, wherever the index can rank the
/// query's notes.
pub(super) fn search_lines(
    engine: &Engine,
    query: &str,
    matcher: &Matcher,
    scope: &Scope<'_>,
    page: Page,
    mode: Mode,
    estimate: bool,
) -> Result<SearchResults, NoteError> {
    // The index's notes that can hold the query, found once for both paths below.
    let prefiltered = match mode {
        Mode::Exact => prefilter(engine, query, scope, page, estimate),
        _ => None,
    };
    if let Some(pre) = &prefiltered
        && let Some(found) =
            search_lines_by_rank(engine, query, matcher, scope, page, pre, estimate)?
    {
        return Ok(found);
    }
    let Page {
        offset,
        limit,
        query_id,
    } = page;
    let vault = engine.vault();
    let counting = matcher.until(Instant::now() + scope.budget);
    let matcher = &counting;
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
        && scope.ignored.is_none()
        && scope.distrusted.is_none();
    let listed = candidates(
        engine,
        scope,
        prefiltered.as_ref(),
        texts.is_some() && unfiltered,
        unfiltered,
    );
    let in_memory = texts.as_ref().filter(|_| unfiltered && listed.is_none());
    let by_index = listed.as_ref().is_some_and(|l| l.1);
    let listed = listed.map(|l| l.0);
    // Notes found by a walk of the disk (before the first build), owned here.
    let mut walked: Vec<(f64, VaultPath, usize)> = Vec::new();
    let (mut scored, mut partial): (Vec<Scored<'_>>, bool) = match (in_memory, &listed) {
        // Every kept text: no note list to build, no lookups.
        (Some(texts), _) => texts.scan(scope.budget, &|p, name, text| {
            score_named(matcher, p, name, text)
        }),
        (None, Some(paths)) => match &texts {
            Some(texts) => scan_par(paths, scope.budget, &|p| {
                texts
                    .get(p)
                    .and_then(|t| score_named(matcher, p, t.name, &t.text))
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
    if counting.cancelled() {
        return Err(crate::notes::cancel::cancelled());
    }
    partial |= counting.was_cut();
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

    // Pass 2: the hits of the notes that make the page, skipping whole notes up to the offset
    // (with a budget of its own: the first may be spent).
    let showing = matcher.until(Instant::now() + scope.budget);
    let matcher = &showing;
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
            Some(t) => t.text,
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
    partial |= showing.was_cut();
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
        total_estimated: false,
        mode: mode.name(),
        served_by: if by_index { "index+scan" } else { "scan" },
        partial,
        notes,
        index: None,
    })
}

/// An exact search whose words the index finds in more notes than
/// [`Engine::exact_scan_max_notes`] (in scope): the notes are taken in the index's ranked order
/// and read only until the page is full, since counting every matching line would mean reading
/// them all (a word in most notes of 100,000 took 124 ms that way; the page alone takes a few).
/// The hits' score is the index's; `total` is the number of notes that may hold the words, with
/// `total_estimated`. `None` when the search is narrow enough to read every note, unless the
/// client asked for an `estimate` (then the page is found the same way, whatever the count).
fn search_lines_by_rank(
    engine: &Engine,
    query: &str,
    matcher: &Matcher,
    scope: &Scope<'_>,
    page: Page,
    prefiltered: &Prefiltered,
    estimate: bool,
) -> Result<Option<SearchResults>, NoteError> {
    let Page {
        offset,
        limit,
        query_id,
    } = page;
    // Below this many notes, every matching line is counted.
    let max_notes = if estimate {
        0
    } else {
        engine.exact_scan_max_notes()
    };
    if prefiltered.total <= max_notes {
        return Ok(None);
    }
    let Some(index) = engine.index() else {
        return Ok(None);
    };
    let words = text::Prefilter::of(query);
    let model = engine.model_now();
    if model.notes().len() <= max_notes {
        return Ok(None);
    }
    let texts = engine.texts();
    let vault = engine.vault();
    let filter = scope.index_filter(engine);
    let started = Instant::now();
    let limited = matcher.until(started + scope.budget);
    let matcher = &limited;
    let mut want = first_round(page);
    // The prefilter's run ranked the notes for the first round when it found them many.
    let mut first = match prefiltered.ranked(index) {
        Ok(ranked) => ranked,
        Err(e) => {
            tracing::warn!(error = %e, "exact search's ranked prefilter failed; scanning all");
            return Ok(None);
        }
    };
    // What the rounds found so far: each round reads on from the notes the last one read (a
    // round restarting from the best read a rare phrase's thousands of notes several times).
    let mut read: std::collections::HashSet<VaultPath> = std::collections::HashSet::new();
    let mut to_skip = offset;
    let mut hits: Vec<SearchHit> = Vec::with_capacity(limit);
    let mut budget = Budget::new();
    let mut partial = false;
    // Whether a hit exists past the page (then the reply carries a cursor).
    let mut more = false;
    loop {
        let ranked = match first.take() {
            Some(found) => Ok(Some(found)),
            None => index.ranked_candidates(&words, &filter, want),
        };
        let (found, total) = match ranked {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(error = %e, "exact search's ranked prefilter failed; scanning all");
                return Ok(None);
            }
        };
        if total <= max_notes {
            return Ok(None);
        }
        let exhausted = found.len() < want;
        for (score, path) in &found {
            if !read.insert(path.clone()) {
                continue;
            }
            if matcher.cancelled() {
                return Err(crate::notes::cancel::cancelled());
            }
            if started.elapsed() > scope.budget {
                partial = true;
                break;
            }
            let Some(note) = model.notes().get(path) else {
                continue;
            };
            if !(scope.shown(path)
                && scope.time_ok(note.meta.modified)
                && (scope.filter.is_empty() || scope.filter.matches_note(path, note)))
            {
                continue;
            }
            let kept = texts.as_ref().and_then(|t| t.get(path));
            let (name, text): (&str, std::borrow::Cow<'_, str>) = match kept {
                Some(t) => (t.name, t.text),
                None => match vault.read_file(path) {
                    Ok(data) => (
                        path.stem(),
                        String::from_utf8_lossy(&data.bytes).into_owned().into(),
                    ),
                    Err(e) => {
                        tracing::debug!(path = %path, error = %e, "search skipped a note");
                        continue;
                    }
                },
            };
            let lines = count_matching_lines(&text, matcher);
            if lines == 0 && !matcher.matches(name) {
                continue;
            }
            if hits.len() >= limit || budget.full() {
                more = true;
                break;
            }
            let count = lines.max(1);
            if to_skip >= count {
                to_skip -= count;
                continue;
            }
            let room = limit - hits.len();
            for mut hit in line_hits(path, &text, matcher, to_skip + room)
                .into_iter()
                .skip(to_skip)
            {
                hit.score = f64::from(*score);
                if !budget.take(&hit) {
                    break;
                }
                hits.push(hit);
            }
            more |= count > to_skip + room;
            to_skip = 0;
        }
        partial |= limited.was_cut();
        if !(more || exhausted || partial || budget.full()) {
            want = want.saturating_mul(4);
            continue;
        }
        let end = offset + hits.len();
        let next_cursor =
            ((more || budget.full()) && !hits.is_empty()).then(|| encode_offset(end, query_id));
        let mut notes = vec![if estimate {
            format!(
                "`{query}` may be in {total} notes: as asked (`estimate`), they were read in the \
                 index's ranked order until the page was full, so `total` counts notes, not \
                 lines, and scores are the index's"
            )
        } else {
            format!(
                "`{query}` may be in {total} notes, too many to read them all: they were read in \
                 the index's ranked order until the page was full, so `total` counts notes, not \
                 lines, and scores are the index's; narrow the search to get every line counted"
            )
        }];
        if partial {
            notes.push(partial_note(scope.budget));
        }
        if budget.full() {
            notes.push(bytes_note());
        }
        return Ok(Some(SearchResults {
            truncated: next_cursor.is_some(),
            next_cursor,
            hits,
            total,
            total_estimated: true,
            mode: Mode::Exact.name(),
            served_by: "index+scan",
            partial,
            notes,
            index: None,
        }));
    }
}

/// How many notes the ranked path reads on its first round: enough for the page if most of them
/// hold the query (each has one hit at least); four times more on each round that falls short.
fn first_round(page: Page) -> usize {
    page.offset
        .saturating_add(page.limit)
        .saturating_mul(2)
        .max(64)
}

/// The index's notes within `scope` that can hold an exact `query`
/// ([`SearchIndex::prefilter`](crate::index::SearchIndex::prefilter)),
/// counted and, up to [`Engine::exact_scan_max_notes`] (none for an `estimate`), listed, and
/// the first round of the ranked path when they may be more. `None` before the first build,
/// for a query with no word to look up, and when the index cannot narrow it.
fn prefilter(
    engine: &Engine,
    query: &str,
    scope: &Scope<'_>,
    page: Page,
    estimate: bool,
) -> Option<Prefiltered> {
    let index = engine.index()?;
    // The index is committed before the model is applied; the note list needs the model.
    if !engine.is_ready() {
        return None;
    }
    let words = text::Prefilter::of(query);
    if words.is_empty() {
        return None;
    }
    let filter = scope.index_filter(engine);
    let keep = if estimate {
        0
    } else {
        engine.exact_scan_max_notes()
    };
    match index.prefilter(&words, &filter, keep, first_round(page)) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "exact-search prefilter failed; scanning all");
            None
        }
    }
}

/// The notes an exact or regex search must read, from the model once it is built (folder, time,
/// tag and property filters applied from memory): for an exact search, the index's notes that
/// can hold the query (`prefiltered`) when they are listed and either the search is filtered
/// (every note in scope would be more to read) or they are few enough to beat reading every
/// note in file order. `None` before the first build (scan the disk), and when the search is
/// over every note and their texts are kept (the caller scans those directly). The flag is
/// true when the index picked the notes.
fn candidates(
    engine: &Engine,
    scope: &Scope<'_>,
    prefiltered: Option<&Prefiltered>,
    everything_in_memory: bool,
    unfiltered: bool,
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
            && (scope.filter.is_empty() || scope.filter.matches_note(p, n))
    };
    if let Some(pre) = prefiltered.filter(|p| p.listed()) {
        // Reading a note's text from memory or its map costs about as much as looking up a
        // few of the prefilter's paths; from disk, much more.
        let notes = model.notes().len();
        let max = if engine.keeps_texts() {
            notes / 8
        } else {
            notes / 2
        };
        if !unfiltered || pre.total <= max {
            match pre.paths(index) {
                // Over every note, with their texts kept: each is in scope, and one the model
                // no longer has has no kept text either (the scan skips it). Looking each up in
                // the model (a tree of paths) was a tenth of the search.
                Ok(found) if unfiltered && engine.keeps_texts() => return Some((found, true)),
                Ok(found) => {
                    let found = found
                        .into_iter()
                        .filter(|p| model.notes().get(p).is_some_and(|n| in_scope(p, n)))
                        .collect();
                    return Some((found, true));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "exact-search prefilter failed; scanning all");
                }
            }
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
    // The request's flag, read on the pool's threads (cancelled work's result is thrown away).
    let cancel = crate::notes::cancel::current();
    let scored = items
        .par_iter()
        .with_min_len(16)
        .filter_map(|item| {
            if over.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            if started.elapsed() > budget || cancel.as_ref().is_some_and(|f| f.is_cancelled()) {
                over.store(true, std::sync::atomic::Ordering::Relaxed);
                return None;
            }
            score(item)
        })
        .collect();
    (scored, over.into_inner())
}

/// The number of lines of `text` that contain a (non-empty) match.
pub(super) fn count_matching_lines(text: &str, matcher: &Matcher) -> usize {
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
pub(super) fn line_hits(
    path: &VaultPath,
    text: &str,
    matcher: &Matcher,
    want: usize,
) -> Vec<SearchHit> {
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
            matched: None,
            hidden: None,
            provenance: None,
            page: None,
        });
        from = line_end + 1;
        if from > text.len() {
            break;
        }
    }
    if hits.is_empty() && matcher.matches(path.stem()) {
        // Matched by name only: one hit on the title, at line 1.
        hits.push(super::title_hit(path, Vec::new(), 0.0));
    }
    hits
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
    fn a_name_only_match_is_a_title_hit_at_line_1() {
        let m = Matcher::literal("garden", false).unwrap();
        let h = hits("---\nx: 1\n---\n", &m);
        assert_eq!((h[0].line, h[0].excerpt.as_str()), (1, "Garden plan"));
        assert_eq!(h[0].matched, Some("title"));
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
    fn a_regex_whose_every_search_reads_the_rest_of_the_note_stops_at_the_deadline() {
        // Matches the empty string everywhere, and each search scans to the end looking for
        // a `Z`: quadratic in the note's size (16 s for 120 KB, minutes for a few MB).
        let text = "lorem ipsum dolor sit amet\n".repeat(40_000);
        let m = Matcher::regex("(?s:.*Z)?", true).unwrap();
        let started = Instant::now();
        let limited = m.until(started + Duration::from_millis(100));
        assert_eq!(count_matching_lines(&text, &limited), 0);
        assert!(limited.was_cut());
        // A sanity bound: the deadline is read before every search.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let p = VaultPath::parse("n.md").unwrap();
        assert!(line_hits(&p, &text, &limited, 10).is_empty());
        // Without a deadline, or before it, nothing is cut.
        let f = Matcher::literal("dolor", false).unwrap();
        let limited = f.until(Instant::now() + Duration::from_secs(60));
        assert_eq!(count_matching_lines(&text, &limited), 40_000);
        assert!(!limited.was_cut() && !f.was_cut());
    }

    #[test]
    fn a_matcher_of_a_cancelled_request_finds_nothing_on_any_thread() {
        use crate::notes::cancel;
        let text = "lorem ipsum dolor sit amet\n".repeat(100);
        let flag = cancel::Flag::new();
        let m = cancel::run(&flag, || Matcher::literal("dolor", false).unwrap());
        let limited = m.until(Instant::now() + Duration::from_secs(600));
        // Another thread, as rayon's: the flag travels with the matcher, not the thread.
        let count = |m: &Matcher| {
            std::thread::scope(|s| s.spawn(|| count_matching_lines(&text, m)).join().unwrap())
        };
        assert_eq!(count(&limited), 100);
        flag.cancel();
        assert_eq!(count(&limited), 0);
        assert_eq!(count(&m), 0);
        assert!(limited.cancelled());
        assert!(line_hits(&VaultPath::parse("n.md").unwrap(), &text, &limited, 10).is_empty());
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
}

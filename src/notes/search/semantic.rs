//! Search by meaning: `semantic` ranks notes by the cosine similarity of their best section to
//! the query's embedding; `hybrid` fuses that ranking with BM25's by reciprocal rank fusion
//! (each list's top [`DEPTH`] notes; a note scores the sum of `w / (RRF_K + rank)` over the
//! lists it is in, `w` = 1 but [`RELAXED_WEIGHT`] for a keyword list where no note has every
//! word; ties by path).

use std::collections::HashMap;

use super::*;
use crate::engine::Semantic;
use crate::index::text::{self, Needles};
use crate::semantic::store::{Nearest, Section};

/// Notes taken from each ranking before fusion.
pub const DEPTH: usize = 100;
/// Reciprocal rank fusion's constant. The usual 60 flattens each list's top: a note fifth by
/// meaning alone scores below one fortieth in both lists (1/65 < 2/100; with 10, 1/15 > 2/50).
/// On the labelled set (docs/performance.md) 10 beat 60 in hybrid paraphrase recall@5 with each
/// of four models, the transformer included (by 1.5 to 3.8 points), keyword queries unchanged.
pub const RRF_K: f64 = 10.0;
/// Weight of the keyword list in the fusion when no note has every word of the query.
pub const RELAXED_WEIGHT: f64 = 0.2;

/// What `semantic` and `hybrid` modes say when no embedding model is loaded.
#[cfg(feature = "semantic")]
pub const NO_MODEL: &str = "semantic search is off: no embedding model is loaded. Start capvault \
     with --semantic (the default model, downloaded once; `capvault model fetch` gets it ahead) \
     or --embedding-model DIR (a static model folder). Ranked keyword search works without one.";
/// A build without the `semantic` feature has no model to load: no flag would help.
#[cfg(not(feature = "semantic"))]
pub const NO_MODEL: &str = "semantic search is not in this build of capvault (built without the \
     `semantic` feature): install the full build (README, Install) for it; ranked keyword search \
     (the default mode) and exact search work here.";

/// The ways to an embedding model, for a server whose `--semantic` download failed.
pub const MODEL_WAYS_OUT: &str = "Where there is a network, run `capvault model fetch`, then \
     restart; where there is none, copy a model folder to this machine and serve with \
     --embedding-model DIR (or make one with `capvault model import`)";

/// The refusal of a search by meaning without a model: why there is none, and the ways out.
pub fn no_model(engine: &Engine) -> NoteError {
    NoteError::Refused(match engine.embedding_unavailable() {
        Some(why) => format!(
            "semantic search is off: --semantic was given, but {why}. {MODEL_WAYS_OUT}. Ranked \
             keyword search works without a model."
        ),
        None => NO_MODEL.to_owned(),
    })
}

/// One fused candidate.
#[derive(Debug, Default)]
struct Fused {
    score: f64,
    /// Rank in BM25's list (0-based), if there.
    keyword: Option<usize>,
    /// Best section by meaning, if in that list.
    section: Option<Section>,
}

/// A `semantic` or `hybrid` search.
pub(super) fn search_semantic(
    engine: &Engine,
    query_text: &str,
    scope: &Scope<'_>,
    page: Page,
    hybrid: bool,
) -> Result<SearchResults, NoteError> {
    let Some(sem) = engine.semantic() else {
        return Err(no_model(engine));
    };
    engine.refresh_if_stale()?;
    let mut notes = Vec::new();
    let depth = (page.offset + page.limit).max(DEPTH);
    let nearest = nearest(engine, sem, query_text, scope, depth, &mut notes);
    let mut fused: HashMap<VaultPath, Fused> = HashMap::new();
    let mut needles = Needles::default();
    let mut served_by = "vectors";
    if hybrid {
        let parsed =
            query::parse(query_text).map_err(|e| NoteError::invalid("query", e.to_string()))?;
        match engine.index() {
            Some(ix) => {
                let found = ix
                    .search(&parsed, &scope.index_filter(engine), 0, depth)
                    .map_err(|e| NoteError::Unavailable(e.to_string()))?;
                needles = found.needles;
                // A keyword list where no note has every word (ranked relaxes to any word) is
                // weak evidence: it counts a fifth. On the labelled set (docs/performance.md)
                // a half let keyword noise push meaning matches out of the top five.
                let weight = if found.matched_all {
                    1.0
                } else {
                    RELAXED_WEIGHT
                };
                add_keyword_list(&mut fused, found.hits.into_iter().map(|(_, p)| p), weight);
                served_by = "index+vectors";
            }
            None => notes
                .push("the keyword index is still being built: ranked by meaning only".to_owned()),
        }
    }
    add_meaning_list(&mut fused, nearest, hybrid);
    let ranked = best_first(fused);
    let total = ranked.len();
    let mut hits = Vec::new();
    let mut budget = Budget::new();
    let mut consumed = 0;
    let mut analyzer = text::analyzer();
    let texts = engine.texts();
    for (path, f) in ranked.into_iter().skip(page.offset).take(page.limit) {
        let kept = texts.as_ref().and_then(|t| t.get(&path));
        let text: std::borrow::Cow<'_, str> = match kept {
            Some(t) => t.text,
            None => match engine.vault().read_file(&path) {
                Ok(d) => String::from_utf8_lossy(&d.bytes).into_owned().into(),
                Err(_) => {
                    consumed += 1;
                    continue;
                }
            },
        };
        let hit = match (f.keyword, &f.section) {
            (Some(_), _) | (None, None) => {
                if needles.is_empty() {
                    // Found by meaning alone, with no section: the start of the note.
                    let shown = text::best_line(&mut analyzer, &text, &needles);
                    SearchHit {
                        path: path.to_string(),
                        line: shown.line,
                        excerpt: shown.excerpt,
                        matches: shown.matches,
                        heading: shown.heading,
                        score: round(f.score, hybrid),
                        matched: None,
                        hidden: None,
                        provenance: None,
                        page: None,
                    }
                } else {
                    keyword_hit(
                        &mut analyzer,
                        &path,
                        &text,
                        &needles,
                        round(f.score, hybrid),
                    )
                }
            }
            (None, Some(s)) => {
                let (line, excerpt) = section_line(&text, s.line);
                SearchHit {
                    path: path.to_string(),
                    line,
                    excerpt,
                    matches: Vec::new(),
                    heading: s.heading.as_deref().map(str::to_owned),
                    score: round(f.score, hybrid),
                    matched: None,
                    hidden: None,
                    provenance: None,
                    page: None,
                }
            }
        };
        if !budget.take(&hit) {
            break;
        }
        consumed += 1;
        hits.push(hit);
    }
    drop(texts);
    if budget.full() {
        notes.push(bytes_note());
    }
    let end = page.offset + consumed;
    let next_cursor = (end < total && consumed > 0).then(|| encode_offset(end, page.query_id));
    Ok(SearchResults {
        truncated: next_cursor.is_some(),
        next_cursor,
        hits,
        total,
        total_estimated: false,
        mode: if hybrid { "hybrid" } else { "semantic" },
        served_by,
        partial: !sem.is_complete(),
        notes,
        index: None,
    })
}

/// A note's share of the fusion for its 0-based `rank` in a list of weight `weight`.
fn reciprocal(rank: usize, weight: f64) -> f64 {
    weight / (RRF_K + rank as f64 + 1.0)
}

/// Adds BM25's list (best first), counting `weight`.
fn add_keyword_list(
    fused: &mut HashMap<VaultPath, Fused>,
    paths: impl Iterator<Item = VaultPath>,
    weight: f64,
) {
    for (rank, path) in paths.enumerate() {
        let f = fused.entry(path).or_default();
        f.score += reciprocal(rank, weight);
        f.keyword = Some(rank);
    }
}

/// Adds the list by meaning (best first): fused by rank in hybrid mode, by cosine otherwise.
fn add_meaning_list(fused: &mut HashMap<VaultPath, Fused>, nearest: Vec<Nearest>, hybrid: bool) {
    for (rank, n) in nearest.into_iter().enumerate() {
        let f = fused.entry(n.path).or_default();
        f.score += if hybrid {
            reciprocal(rank, 1.0)
        } else {
            f64::from(n.score)
        };
        f.section = Some(n.section);
    }
}

/// The candidates, best first, ties by path.
fn best_first(fused: HashMap<VaultPath, Fused>) -> Vec<(VaultPath, Fused)> {
    let mut ranked: Vec<(VaultPath, Fused)> = fused.into_iter().collect();
    ranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then_with(|| a.0.cmp(&b.0)));
    ranked
}

/// Scores to three significant places for cosine, six for fused ranks (at most 1/11 from each
/// list).
fn round(score: f64, hybrid: bool) -> f64 {
    let scale = if hybrid { 1e6 } else { 1e3 };
    (score * scale).round() / scale
}

/// The notes nearest the query in meaning, with remarks on how far embedding is.
fn nearest(
    engine: &Engine,
    sem: &Semantic,
    query_text: &str,
    scope: &Scope<'_>,
    depth: usize,
    notes: &mut Vec<String>,
) -> Vec<Nearest> {
    if !sem.is_complete() {
        let s = engine.embedding_status();
        let (done, total) = s.map_or((0, 0), |s| (s.embedded, s.total));
        notes.push(format!(
            "notes are still being embedded ({done} of {total}): ranking by meaning covers only \
             those embedded so far"
        ));
    }
    let Some(q) = sem.model().embed(query_text) else {
        notes.push("no word of the query is in the embedding model's vocabulary".to_owned());
        return Vec::new();
    };
    let model = engine.model_now();
    let keep = |p: &VaultPath| {
        p.starts_with(scope.folder)
            && scope.shown(p)
            && model.note(p).is_some_and(|n| {
                scope.time_ok(n.meta.modified)
                    && (scope.filter.is_empty() || scope.filter.matches_note(p, n))
            })
    };
    sem.store().nearest(&q, depth, keep)
}

/// The line to show for a section starting at `line`: its first line of text below the
/// heading (or the heading itself when it has none), cut like every excerpt.
fn section_line(text: &str, line: u32) -> (usize, String) {
    let start = line.max(1) as usize;
    let mut lines = text.lines().enumerate().skip(start - 1);
    let first = lines.next();
    let heading_line = first.is_some_and(|(_, l)| l.trim_start().starts_with('#'));
    let shown = if heading_line {
        lines
            .take(20)
            .find(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .or(first)
    } else {
        first
    };
    match shown {
        Some((i, l)) => (i + 1, text::cut_excerpt(l, &[]).0),
        None => (start, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(i: usize) -> VaultPath {
        VaultPath::parse(&format!("n{i:03}.md")).unwrap()
    }

    fn by_meaning(paths: impl Iterator<Item = usize>) -> Vec<Nearest> {
        paths
            .map(|i| Nearest {
                path: path(i),
                score: 0.5,
                section: Section {
                    line: 1,
                    heading: None,
                },
            })
            .collect()
    }

    /// Where `target` lands in hybrid's fusion of a keyword list (`weight`) and a meaning list.
    fn fused_rank(keyword: &[usize], weight: f64, meaning: &[usize], target: usize) -> usize {
        let mut fused = HashMap::new();
        add_keyword_list(&mut fused, keyword.iter().map(|&i| path(i)), weight);
        add_meaning_list(&mut fused, by_meaning(meaning.iter().copied()), true);
        best_first(fused)
            .iter()
            .position(|(p, _)| *p == path(target))
            .unwrap()
    }

    #[test]
    fn a_note_near_the_top_by_meaning_alone_beats_one_far_down_both_lists() {
        // Note 0 is fifth by meaning and in no keyword list; note 100 is fortieth in both (a
        // keyword list where a note has every word: full weight). With the usual constant of
        // 60, note 100 would come first (2/100 > 1/65).
        let keyword: Vec<usize> = (200..239).chain([100]).collect();
        let meaning: Vec<usize> = (300..304).chain([0]).chain(400..434).chain([100]).collect();
        assert_eq!(meaning.iter().position(|&i| i == 0), Some(4));
        assert_eq!(keyword.iter().position(|&i| i == 100), Some(39));
        assert_eq!(meaning.iter().position(|&i| i == 100), Some(39));
        assert!(fused_rank(&keyword, 1.0, &meaning, 0) < fused_rank(&keyword, 1.0, &meaning, 100));
    }

    #[test]
    fn a_note_high_in_both_lists_comes_first_and_a_weak_keyword_list_counts_less() {
        let keyword = [1, 2, 3, 4];
        let meaning = [6, 5, 3, 7];
        assert_eq!(fused_rank(&keyword, 1.0, &meaning, 3), 0);
        // At full weight the keyword list's first note beats the meaning list's; weighted a
        // fifth (no note has every word), it falls behind it.
        assert!(fused_rank(&keyword, 1.0, &meaning, 1) < fused_rank(&keyword, 1.0, &meaning, 5));
        assert!(
            fused_rank(&keyword, RELAXED_WEIGHT, &meaning, 1)
                > fused_rank(&keyword, RELAXED_WEIGHT, &meaning, 5)
        );
    }
}

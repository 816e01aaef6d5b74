//! Text handling shared by indexing and result display (pure, no I/O): the analyzer, the
//! Chinese/Japanese/Korean n-grams, and picking the line, excerpt, match ranges and heading that
//! a hit shows.

use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer, TokenStream,
};

/// Name under which [`analyzer`] is registered with the index.
pub const TEXT_ANALYZER: &str = "capvault_text";
/// Tokens of this many bytes or more are not indexed (base64 blobs, URLs): tantivy's
/// `RemoveLongFilter` keeps only tokens strictly shorter than its limit.
pub const MAX_TOKEN_BYTES: usize = 64;
/// Longest excerpt, in characters.
pub const MAX_EXCERPT_CHARS: usize = 200;

/// The analyzer for every text field: words split at anything that is not a letter or digit,
/// lower-cased and folded to ASCII where a folding exists (`Café` → `cafe`).
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// One token of a text: its index form and where it lies (bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Lower-cased, folded form.
    pub text: String,
    /// Byte range in the text.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
}

/// The tokens of `text` as the index sees them.
pub fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        let t = stream.token();
        out.push(Token {
            text: t.text.clone(),
            start: t.offset_from,
            end: t.offset_to,
        });
    }
    out
}

/// True when `text` has a run of letters and digits of [`MAX_TOKEN_BYTES`] or more: a word the
/// index drops, so the exact-search prefilter must not rule the note out.
pub fn has_long_word(text: &str) -> bool {
    // Counted in bytes, every non-ASCII byte taken as part of a word: a run this finds may be
    // no word at all (a line of CJK punctuation), which only costs the prefilter a note it did
    // not need to read; a word over the limit is never missed. One pass over bytes, no decoding.
    let mut run = 0usize;
    for &b in text.as_bytes() {
        if b.is_ascii_alphanumeric() || b >= 0x80 {
            run += 1;
            if run >= MAX_TOKEN_BYTES {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// Where a word of an exact query must sit inside a word of a matching note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Anchor {
    /// Bounded on both sides within the query (`my garden plan`): the note has it as a word.
    Whole,
    /// Bounded before, not after (the last word of `my gard`): a note word starts with it.
    Start,
    /// Bounded after, not before (the first word of `den plan`): a note word ends with it.
    End,
    /// The whole query is one run of letters and digits: some note word contains it.
    Inside,
}

impl Anchor {
    /// True when `term`, a word as the index holds it, fits `word` at this anchor.
    pub fn fits(self, term: &[u8], word: &[u8]) -> bool {
        match self {
            Anchor::Whole => term == word,
            Anchor::Start => term.starts_with(word),
            Anchor::End => term.ends_with(word),
            Anchor::Inside => memchr::memmem::find(term, word).is_some(),
        }
    }
}

/// One word the exact-search prefilter can look up in the index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PrefilterWord {
    /// Lower-cased ASCII letters and digits.
    pub text: String,
    /// Where it must sit in a note's word.
    pub anchor: Anchor,
}

/// The words the exact-search prefilter can use for `query`: its runs of ASCII letters and
/// digits (lower-cased) of two or more, each with where a match must put it in a note's word,
/// when every character of the query is ASCII; otherwise none (case folding and accent folding
/// of other scripts are not worth the risk of missing a note).
///
/// A run with a non-alphanumeric character of the query on each side is a whole word of any
/// note that contains the query: the same characters surround it there, and the index splits
/// words exactly at them.
pub fn prefilter_words(query: &str) -> Vec<PrefilterWord> {
    let mut words: Vec<PrefilterWord> = query_runs(query)
        .filter(|r| r.len >= 2)
        .map(|r| r.word)
        .collect();
    words.sort();
    words.dedup();
    words
}

/// One run of ASCII letters and digits of a query: the word it is (with where the query bounds
/// it), its place among the query's runs, and its length.
struct Run {
    word: PrefilterWord,
    place: usize,
    len: usize,
}

/// The runs of an ASCII query, in order; none for a query with other characters.
fn query_runs(query: &str) -> impl Iterator<Item = Run> + '_ {
    let bytes = if query.is_ascii() {
        query.as_bytes()
    } else {
        &[]
    };
    let mut i = 0;
    let mut place = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() && !bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if i == bytes.len() {
            return None;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let anchor = match (start > 0, i < bytes.len()) {
            (true, true) => Anchor::Whole,
            (true, false) => Anchor::Start,
            (false, true) => Anchor::End,
            (false, false) => Anchor::Inside,
        };
        place += 1;
        Some(Run {
            word: PrefilterWord {
                text: query[start..i].to_ascii_lowercase(),
                anchor,
            },
            place: place - 1,
            len: i - start,
        })
    })
}

/// What the exact-search prefilter looks up for a query: its words, and for a query of
/// several words their order ([`phrase_words`]), so that only notes holding them side by side
/// qualify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefilter {
    /// [`prefilter_words`].
    pub words: Vec<PrefilterWord>,
    /// [`phrase_words`].
    pub phrase: Option<Vec<(usize, PrefilterWord)>>,
}

impl Prefilter {
    /// The prefilter of `query`.
    pub fn of(query: &str) -> Prefilter {
        Prefilter {
            words: prefilter_words(query),
            phrase: phrase_words(query),
        }
    }

    /// True when the query has no word the index can look up.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// The words of a query of several words, in order, each with its place in the run of the
/// query's words (counting the one-letter runs the prefilter leaves out): a note that contains
/// the query has them at exactly those places relative to each other in one field, since
/// nothing but separators lies between them there too. `None` for a query of fewer than two
/// such words, or with a word too long to index (those notes are found by their flag anyway, but
/// the words around the long one would not be adjacent).
pub fn phrase_words(query: &str) -> Option<Vec<(usize, PrefilterWord)>> {
    let mut out = Vec::new();
    for run in query_runs(query) {
        if run.len >= MAX_TOKEN_BYTES {
            return None;
        }
        if run.len >= 2 {
            out.push((run.place, run.word));
        }
    }
    // Any run of them is side by side too: the first few bound the phrase's cost (a query of
    // 255 words took 332 ms at 100,000 notes with every one of them, inside tantivy where the
    // scan budget does not reach).
    out.truncate(MAX_PHRASE_WORDS);
    (out.len() >= 2).then_some(out)
}

/// Most words of a query the phrase clause of the prefilter requires side by side.
pub const MAX_PHRASE_WORDS: usize = 8;

/// True for characters of scripts written without spaces between words (Han, Hiragana,
/// Katakana) and for Hangul, which the word tokenizer cannot split usefully.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF66..=0xFF9F    // half-width Katakana
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0x20000..=0x2FA1F  // CJK extensions B to F, compatibility supplement
    )
}

/// The runs of CJK characters in `text`, in order.
pub fn cjk_runs(text: &str) -> impl Iterator<Item = &str> {
    // Every CJK character is at U+1100 or above, so its UTF-8 form starts with a byte of 0xE1
    // or more: most notes are settled by one byte scan without decoding a character.
    let any = text.as_bytes().iter().any(|&b| b >= 0xE1);
    let text = if any { text } else { "" };
    text.split(|c: char| !is_cjk(c)).filter(|r| !r.is_empty())
}

/// Every CJK run of `text` as overlapping character bigrams, space-separated, in order: the
/// content of the bigram field. A run of one character contributes nothing here (see
/// [`cjk_unigrams`]). A phrase query over consecutive bigrams finds any CJK substring of two
/// characters or more.
pub fn cjk_bigrams(text: &str) -> String {
    let mut out = String::new();
    for run in cjk_runs(text) {
        let chars: Vec<char> = run.chars().collect();
        for pair in chars.windows(2) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push(pair[0]);
            out.push(pair[1]);
        }
    }
    out
}

/// Every CJK character of `text`, space-separated: the unigram field, for one-character queries.
pub fn cjk_unigrams(text: &str) -> String {
    let mut out = String::new();
    for c in cjk_runs(text).flat_map(str::chars) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The query words a hit is shown for: index-form tokens and CJK substrings.
#[derive(Debug, Default, Clone)]
pub struct Needles {
    /// Index-form tokens (lower-cased, folded).
    pub terms: Vec<String>,
    /// CJK runs, matched as substrings.
    pub cjk: Vec<String>,
}

impl Needles {
    /// True when there is nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.cjk.is_empty()
    }
}

/// The line a hit shows: its 1-based number, the excerpt, the match ranges in it (character
/// offsets into the excerpt, end exclusive) and the heading it sits under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// 1-based line number.
    pub line: usize,
    /// At most [`MAX_EXCERPT_CHARS`] characters of the line.
    pub excerpt: String,
    /// `[start, end)` character offsets of each match in `excerpt`.
    pub matches: Vec<[usize; 2]>,
    /// The nearest heading above the line, if any.
    pub heading: Option<String>,
}

/// Picks the line of `text` that best shows `needles`: the one matching the most distinct
/// needles, then the most matches, then the first; body lines before frontmatter lines. When no
/// line matches (a hit on the file name or an alias), the first line of the body.
pub fn best_line(analyzer: &mut TextAnalyzer, text: &str, needles: &Needles) -> Shown {
    let body_start = frontmatter_end(text);
    // (in body, distinct needles, matches, line index, byte offset, ranges)
    type Candidate = (bool, usize, usize, usize, usize, Vec<(usize, usize)>);
    let mut best: Option<Candidate> = None;
    let mut offset = 0usize;
    for (idx, raw) in text.split_inclusive('\n').enumerate() {
        let line = raw.trim_end_matches(['\n', '\r']);
        let ranges = line_matches(analyzer, line, needles);
        if !ranges.is_empty() {
            let in_body = offset >= body_start;
            let distinct = distinct_needles(line, &ranges);
            let key = (in_body, distinct, ranges.len());
            let better = match &best {
                None => true,
                Some((b, d, n, ..)) => key > (*b, *d, *n),
            };
            if better {
                best = Some((in_body, distinct, ranges.len(), idx, offset, ranges));
            }
        }
        offset += raw.len();
    }
    match best {
        Some((_, _, _, idx, at, ranges)) => {
            let line = line_at(text, at);
            let (excerpt, matches) = cut_excerpt(line, &ranges);
            Shown {
                line: idx + 1,
                excerpt,
                matches,
                heading: heading_before(text, at),
            }
        }
        None => {
            let at = body_start.min(text.len());
            let line_no = text[..at].matches('\n').count() + 1;
            let (excerpt, _) = cut_excerpt(line_at(text, at), &[]);
            Shown {
                line: line_no,
                excerpt,
                matches: Vec::new(),
                heading: None,
            }
        }
    }
}

/// The line of `text` starting at byte `at` (without its line ending).
pub fn line_at(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    let end = rest.find('\n').unwrap_or(rest.len());
    rest[..end].trim_end_matches('\r')
}

fn distinct_needles(line: &str, ranges: &[(usize, usize)]) -> usize {
    let mut seen: Vec<String> = ranges
        .iter()
        .map(|&(s, e)| line[s..e].to_lowercase())
        .collect();
    seen.sort();
    seen.dedup();
    seen.len()
}

/// Byte ranges in `line` where a needle occurs, sorted, without overlaps.
pub fn line_matches(
    analyzer: &mut TextAnalyzer,
    line: &str,
    needles: &Needles,
) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    if !needles.terms.is_empty() {
        // Streamed, not collected: copying every token's text was most of a ranked page's cost.
        let mut stream = analyzer.token_stream(line);
        while stream.advance() {
            let t = stream.token();
            if needles.terms.contains(&t.text) {
                ranges.push((t.offset_from, t.offset_to));
            }
        }
    }
    for n in &needles.cjk {
        ranges.extend(
            line.match_indices(n.as_str())
                .map(|(i, m)| (i, i + m.len())),
        );
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Cuts `line` to at most [`MAX_EXCERPT_CHARS`] characters around the first match, marking cuts
/// with `…`, and turns the byte `ranges` into character offsets into the excerpt (ranges that fall
/// outside are dropped, ranges cut by the window are clipped).
pub fn cut_excerpt(line: &str, ranges: &[(usize, usize)]) -> (String, Vec<[usize; 2]>) {
    let line = line.trim_end();
    let total = line.chars().count();
    let char_of = |byte: usize| line[..byte.min(line.len())].chars().count();
    let (start, end) = if total <= MAX_EXCERPT_CHARS {
        (0, total)
    } else {
        let budget = MAX_EXCERPT_CHARS - 2; // room for two ellipses
        let (ms, me) = ranges
            .first()
            .map(|&(s, e)| (char_of(s), char_of(e)))
            .unwrap_or((0, 0));
        let center = ms + (me - ms).min(budget) / 2;
        let mut start = center.saturating_sub(budget / 2);
        if start + budget > total {
            start = total - budget;
        }
        (start, start + budget)
    };
    let mut out = String::new();
    let lead = usize::from(start > 0);
    if start > 0 {
        out.push('…');
    }
    out.extend(line.chars().skip(start).take(end - start));
    if end < total {
        out.push('…');
    }
    let matches = ranges
        .iter()
        .filter_map(|&(s, e)| {
            let (s, e) = (char_of(s).max(start), char_of(e).min(end));
            (s < e).then_some([s - start + lead, e - start + lead])
        })
        .collect();
    (out, matches)
}

/// Byte offset where the body starts: after a frontmatter block opened by `---` on the first line
/// and closed by `---` or `...`; 0 without one.
pub fn frontmatter_end(text: &str) -> usize {
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return 0,
    }
    let mut at = text.split_inclusive('\n').next().map_or(0, str::len);
    for l in lines {
        at += l.len();
        let t = l.trim_end();
        if t == "---" || t == "..." {
            return at;
        }
    }
    0
}

/// The text of the last ATX heading (`# Title`) that starts before byte `at`, outside code fences
/// and frontmatter.
pub fn heading_before(text: &str, at: usize) -> Option<String> {
    let mut t = HeadingTracker::new(text);
    t.advance_to(text, at);
    t.heading().map(str::to_owned)
}

/// Follows the headings of a text line by line, forward only, so that the heading of many
/// positions costs one pass.
#[derive(Debug, Clone)]
pub struct HeadingTracker {
    /// Byte offset of the next line to read.
    pos: usize,
    fence: Option<(char, usize)>,
    heading: Option<String>,
}

impl HeadingTracker {
    /// A tracker at the start of `text`'s body.
    pub fn new(text: &str) -> Self {
        HeadingTracker {
            pos: frontmatter_end(text),
            fence: None,
            heading: None,
        }
    }

    /// The heading in force at the position reached.
    pub fn heading(&self) -> Option<&str> {
        self.heading.as_deref()
    }

    /// Reads every line of `text` that starts at or before byte `at`.
    pub fn advance_to(&mut self, text: &str, at: usize) {
        while self.pos <= at && self.pos < text.len() {
            let rest = &text[self.pos..];
            let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
            let line = rest[..len].trim_end_matches(['\n', '\r']);
            self.pos += len;
            self.read_line(line);
        }
    }

    fn read_line(&mut self, line: &str) {
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() > 3 {
            return;
        }
        let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = fence_char {
            let run = trimmed.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match self.fence {
                    None => self.fence = Some((c, run)),
                    Some((fc, fl)) if fc == c && run >= fl && trimmed[run..].trim().is_empty() => {
                        self.fence = None
                    }
                    _ => {}
                }
                return;
            }
        }
        if self.fence.is_some() {
            return;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) {
            let rest = &trimmed[hashes..];
            if rest.is_empty() || rest.starts_with([' ', '\t']) {
                let title = rest.trim().trim_end_matches('#').trim_end();
                if !title.is_empty() {
                    self.heading = Some(title.chars().take(MAX_EXCERPT_CHARS).collect());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needles(terms: &[&str]) -> Needles {
        Needles {
            terms: terms.iter().map(|t| t.to_string()).collect(),
            cjk: Vec::new(),
        }
    }

    #[test]
    fn the_analyzer_lowercases_and_folds_accents() {
        let mut a = analyzer();
        let t: Vec<String> = tokens(&mut a, "Café-Menü, NAÏVE_x 2026")
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(t, ["cafe", "menu", "naive", "x", "2026"]);
    }

    #[test]
    fn phrase_words_keep_their_places_counting_one_letter_words() {
        let w = |text: &str, anchor| PrefilterWord {
            text: text.to_owned(),
            anchor,
        };
        assert_eq!(
            phrase_words("Daily a Notes!"),
            Some(vec![
                (0, w("daily", Anchor::End)),
                (2, w("notes", Anchor::Whole))
            ])
        );
        assert_eq!(phrase_words("garden"), None);
        assert_eq!(phrase_words("a garden"), None);
        assert_eq!(phrase_words("café notes"), None);
        let long = format!("notes {}", "x".repeat(MAX_TOKEN_BYTES));
        assert_eq!(phrase_words(&long), None);
        let many = "the ".repeat(50);
        let phrase = phrase_words(&many).unwrap();
        assert_eq!(phrase.len(), MAX_PHRASE_WORDS);
        assert_eq!(phrase[MAX_PHRASE_WORDS - 1].0, MAX_PHRASE_WORDS - 1);
    }

    #[test]
    fn prefilter_words_are_ascii_runs_anchored_where_the_query_bounds_them() {
        let w = |t: &str, anchor| PrefilterWord {
            text: t.to_owned(),
            anchor,
        };
        assert_eq!(
            prefilter_words("Quokka was-here!"),
            [
                w("quokka", Anchor::End),
                w("was", Anchor::Whole),
                w("here", Anchor::Whole)
            ]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
        );
        assert_eq!(prefilter_words("quokka"), [w("quokka", Anchor::Inside)]);
        assert_eq!(prefilter_words(" quo"), [w("quo", Anchor::Start)]);
        assert_eq!(prefilter_words("a b"), Vec::<PrefilterWord>::new());
        assert!(prefilter_words("café").is_empty());
        assert!(Anchor::Start.fits(b"gardening", b"garden"));
        assert!(!Anchor::Start.fits(b"vegetablegarden", b"garden"));
        assert!(Anchor::End.fits(b"vegetablegarden", b"garden"));
        assert!(!Anchor::Whole.fits(b"gardens", b"garden"));
        assert!(Anchor::Inside.fits(b"agardens", b"garden"));
        // tantivy drops a token of exactly the limit, so it is flagged too.
        assert!(has_long_word(&"x".repeat(MAX_TOKEN_BYTES)));
        assert!(!has_long_word(&format!(
            "{} y",
            "x".repeat(MAX_TOKEN_BYTES - 1)
        )));
    }

    #[test]
    fn the_byte_check_before_cjk_decoding_keeps_the_lowest_cjk_block() {
        // U+1100 (Hangul Jamo) is the lowest code point treated as CJK; its first UTF-8 byte is
        // 0xE1, the fast path's threshold. Just below it, U+10FF, starts with 0xE1 too, and
        // U+0FFF with 0xE0: neither is CJK.
        assert_eq!(cjk_unigrams("a\u{1100}\u{1101}b"), "\u{1100} \u{1101}");
        assert_eq!(cjk_bigrams("\u{1100}\u{1101}"), "\u{1100}\u{1101}");
        assert_eq!(cjk_unigrams("\u{10FF}\u{0FFF} plain é"), "");
    }

    #[test]
    fn cjk_text_becomes_bigrams_and_unigrams() {
        assert_eq!(cjk_bigrams("我爱北京 and 東京"), "我爱 爱北 北京 東京");
        assert_eq!(cjk_unigrams("a中b"), "中");
        assert_eq!(cjk_bigrams("中 text"), "");
        assert!(is_cjk('한') && is_cjk('カ') && !is_cjk('a') && !is_cjk('é'));
    }

    #[test]
    fn the_best_line_matches_most_query_words_and_keeps_its_heading() {
        let mut a = analyzer();
        let text =
            "---\ntags: garden\n---\n# Plan\nsome garden\n## Beds\nthe Garden beds are ready\n";
        let s = best_line(&mut a, text, &needles(&["garden", "beds"]));
        assert_eq!(s.line, 7);
        assert_eq!(s.heading.as_deref(), Some("Beds"));
        assert_eq!(s.excerpt, "the Garden beds are ready");
        assert_eq!(s.matches, vec![[4, 10], [11, 15]]);
    }

    #[test]
    fn frontmatter_lines_are_shown_only_when_the_body_has_no_match() {
        let mut a = analyzer();
        let s = best_line(
            &mut a,
            "---\nstatus: active\n---\nbody\n",
            &needles(&["active"]),
        );
        assert_eq!((s.line, s.heading), (2, None));
        // No match at all (a title hit): the first body line.
        let s = best_line(&mut a, "---\nx: 1\n---\nfirst\n", &needles(&["zzz"]));
        assert_eq!((s.line, s.excerpt.as_str()), (4, "first"));
        assert!(s.matches.is_empty());
    }

    #[test]
    fn headings_inside_code_fences_do_not_count() {
        let text = "# Real\n```\n# not a heading\n```\nhit\n";
        assert_eq!(
            heading_before(text, text.find("hit").unwrap()).as_deref(),
            Some("Real")
        );
        assert_eq!(heading_before("#tag only\nhit", 10), None);
    }

    #[test]
    fn long_lines_are_cut_and_ranges_follow_the_cut() {
        let line = format!("{}NEEDLE{}", "é".repeat(500), "b".repeat(500));
        let at = line.find("NEEDLE").unwrap();
        let (e, m) = cut_excerpt(&line, &[(at, at + 6)]);
        assert!(e.chars().count() <= MAX_EXCERPT_CHARS);
        assert!(e.starts_with('…') && e.ends_with('…'));
        let chars: Vec<char> = e.chars().collect();
        let [s, t] = m[0];
        assert_eq!(chars[s..t].iter().collect::<String>(), "NEEDLE");
    }

    #[test]
    fn cjk_needles_match_as_substrings() {
        let mut a = analyzer();
        let n = Needles {
            terms: vec![],
            cjk: vec!["北京".into()],
        };
        let s = best_line(&mut a, "first\n我爱北京天安门\n", &n);
        assert_eq!(s.line, 2);
        assert_eq!(s.matches, vec![[2, 4]]);
    }
}

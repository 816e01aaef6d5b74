//! The full-text index behind ranked search: tantivy, in memory, fed from the same reads that
//! build the vault model.
//!
//! A fresh index lives in RAM. When a cache folder is available (outside the vault, see
//! [`crate::vault::cache`]) its positions files are written there as they are made, and the rest
//! is saved there in the background ([`cache`]), so that the
//! next start opens it (its positions read from the cache folder as phrase queries need them) and
//! re-indexes only the notes whose size, modification time or inode changed (each document keeps
//! those three as fast fields), instead of every note. The cache
//! is only a cache: a missing, damaged or outdated one is cleared and the index built afresh, in
//! the background while the server answers (5 to 9 s at 100,000 notes on 2 cores, see
//! `docs/performance.md`).
//!
//! ## Fields
//!
//! | field | holds | boost |
//! |---|---|---|
//! | `title` | file name without `.md`, aliases | 4 |
//! | `headings` | heading texts | 2.5 |
//! | `tags` | tag names (split into words) | 1.8 |
//! | `props` | frontmatter keys and values as text | 1.2 |
//! | `body` | the text after the frontmatter | 1 |
//! | `cjk2` / `cjk1` | Chinese, Japanese, Korean runs of all the above, as bigrams / single characters | 1 |
//!
//! plus filter fields that are never scored: `folder` (every ancestor folder), `tag` (each tag,
//! normalised, and its parents, so `project` finds `project/alpha`), `prop` (see
//! [`crate::markdown::properties::property_terms`]) and `mtime` (milliseconds since the epoch), and the
//! file's `stat_size`, `stat_mtime` (nanoseconds) and `stat_ino`, which tell a restart what
//! changed. The path is the one stored field; excerpts are cut from the note texts the engine
//! keeps (or re-read through the capability layer with `--no-text-cache`).
//!
//! ## Writes
//!
//! One long-lived writer. Changes are staged (delete the path's document, add the new one) by
//! the parallel readers as they parse, then committed once per batch (the startup build, one
//! debounced burst of watcher events, one reconcile), and the reader is reloaded by hand. At most
//! [`queue::MAX_QUEUED`] staged documents wait for tantivy's indexing threads at a time (each
//! carries its note's text; tantivy alone would queue 10,000).

pub mod cache;
pub mod query;
pub mod queue;
pub mod text;

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::RwLock;
use std::time::UNIX_EPOCH;

use tantivy::collector::{Count, TopDocs};
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query as TQuery, RangeQuery,
    TermQuery,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, NumericOptions, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::locks::{lock, read, write};
use crate::markdown;
use crate::model::NoteRead;
use crate::vault::VaultPath;
use query::{Clause, Query};
use queue::{Queue, Queued};
use text::{Needles, TEXT_ANALYZER};

/// Name of the whitespace tokenizer used by the CJK fields.
const CJK_ANALYZER: &str = "capvault_cjk";
/// Memory the writer may buffer before flushing a segment, all threads together.
const WRITER_BUDGET: usize = 64 * 1024 * 1024;
/// Largest page offset a ranked search accepts (deeper pages cost as much as a full sort).
pub const MAX_OFFSET: usize = 10_000;
/// Most hits past a ranked page's end fetched to order the hits tied with its last one by path
/// (beyond that, ties keep tantivy's order).
pub const MAX_TIED: usize = 2_000;

/// Field boosts: title > headings > tags > properties > body.
const BOOST_TITLE: f32 = 4.0;
const BOOST_HEADINGS: f32 = 2.5;
const BOOST_TAGS: f32 = 1.8;
const BOOST_PROPS: f32 = 1.2;

/// An error from the index, shown to clients as a short message.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A page that starts past the ranked hits kept.
    #[error("cannot page past {MAX_OFFSET} ranked hits; narrow the query or add filters")]
    PastOffset,
    /// The query has no word the analyzer keeps.
    #[error("the query has no words to search for (only punctuation?)")]
    NoWords,
    /// tantivy failed (out of memory and the like).
    #[error("search index error: {0}")]
    Engine(#[from] tantivy::TantivyError),
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    path: Field,
    title: Field,
    headings: Field,
    tags: Field,
    props: Field,
    body: Field,
    cjk2: Field,
    cjk1: Field,
    folder: Field,
    tag: Field,
    prop: Field,
    mtime: Field,
    long: Field,
    stat_size: Field,
    stat_mtime: Field,
    stat_ino: Field,
}

/// What a restart compares to tell whether a note changed since it was indexed: the same three
/// facts the model's reconcile compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch (negative before it).
    pub mtime_ns: i64,
    /// Inode number.
    pub ino: u64,
}

impl Stamp {
    /// The stamp of a file as the capability layer describes it.
    pub fn of(meta: &crate::vault::FileMeta) -> Stamp {
        let mtime_ns = match meta.modified.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
        };
        Stamp {
            size: meta.size,
            mtime_ns,
            ino: meta.ino,
        }
    }
}

/// Filters applied inside the index (never scored).
#[derive(Debug, Clone, Default)]
pub struct IndexFilter {
    /// Only notes under this folder.
    pub folder: Option<VaultPath>,
    /// Only notes with this normalised tag or one nested under it.
    pub tag: Option<String>,
    /// Only notes with this property (and, with `Some`, one of its values equal to this text).
    pub property: Option<(String, Option<String>)>,
    /// Only notes modified at or after this time (ms since the epoch).
    pub modified_after: Option<i64>,
    /// Only notes modified at or before this time (ms since the epoch).
    pub modified_before: Option<i64>,
    /// Never these notes (Obsidian's Excluded files, what a `trust` filter leaves out).
    pub exclude: Option<std::sync::Arc<std::collections::HashSet<VaultPath>>>,
    /// Nothing under these folders (a `trust` filter's whole folders: one term each).
    pub exclude_folders: Vec<VaultPath>,
}

/// BM25's statistics of two searchers of the same schema, summed.
struct SummedStatistics<'a>(&'a tantivy::Searcher, &'a tantivy::Searcher);

impl tantivy::query::Bm25StatisticsProvider for SummedStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(self.0.total_num_tokens(field)? + self.1.total_num_tokens(field)?)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.0.total_num_docs()? + self.1.total_num_docs()?)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.0.doc_freq(term)? + self.1.doc_freq(term)?)
    }
}

/// One page of ranked hits.
#[derive(Debug, Clone)]
pub struct RankedHits {
    /// Notes, best first, with their BM25 score.
    pub hits: Vec<(f32, VaultPath)>,
    /// Notes matching in all.
    pub total: usize,
    /// False when no note had every word and notes with any of them were ranked instead.
    pub matched_all: bool,
    /// What to highlight in the hits.
    pub needles: Needles,
}

/// The in-memory full-text index of one vault.
pub struct SearchIndex {
    writer: RwLock<IndexWriter<Queued>>,
    /// Bounds the documents staged but not yet indexed (see [`queue`]).
    queue: Queue,
    reader: IndexReader,
    index: Index,
    /// The directory `index` lives in (shared with it), read raw when saving to the cache.
    files: cache::Files,
    fields: Fields,
    analyzer: TextAnalyzer,
    /// Every word of the text fields, per segment, for the exact-search prefilter.
    term_lists: std::sync::Mutex<HashMap<tantivy::index::SegmentId, std::sync::Arc<TermList>>>,
    /// [`PHRASE_CHECK_OVER_NOTES`] (tests of the places' check on a few notes lower it).
    phrase_check_over: std::sync::atomic::AtomicU64,
}

/// Most distinct indexed words one word of an exact query may stand for (`garden` for
/// `gardens`, `gardening`...) before the prefilter gives up and the notes are read instead.
pub const MAX_PREFILTER_TERMS: usize = 4_096;

/// The exact-search prefilter narrows a query of several words to the notes holding them side
/// by side only when each word is in more than this many notes (or an eighth of the notes, if
/// fewer); below, the notes holding them all are few enough to read (3,000 notes of 100,000 are
/// read and counted in about 7 ms).
const PHRASE_CHECK_OVER_NOTES: u64 = 3_000;

/// The exact-search prefilter's query, and whether it scores the notes it finds.
type PrefilterQuery = (Box<dyn TQuery>, bool);

/// [`SearchIndex::ranked_candidates`]: notes with their scores, best first, and how many qualify.
pub type RankedCandidates = (Vec<(f32, VaultPath)>, usize);

/// The words of some fields of one segment, one per line.
struct TermList {
    words: Vec<u8>,
}

impl TermList {
    fn of(segment: &tantivy::SegmentReader, fields: &[Field]) -> Result<TermList, IndexError> {
        let mut words = Vec::new();
        for &field in fields {
            let inverted = segment.inverted_index(field)?;
            let mut stream = inverted
                .terms()
                .stream()
                .map_err(tantivy::TantivyError::from)?;
            while stream.advance() {
                words.extend_from_slice(stream.key());
                words.push(b'\n');
            }
        }
        words.shrink_to_fit();
        Ok(TermList { words })
    }

    /// Adds to `out` every word of the list that fits `w`.
    fn fitting<'a>(
        &'a self,
        w: &text::PrefilterWord,
        out: &mut std::collections::HashSet<&'a [u8]>,
    ) {
        let buf = &self.words[..];
        let finder = memchr::memmem::Finder::new(w.text.as_bytes());
        let mut at = 0;
        while let Some(i) = finder.find(&buf[at..]) {
            let hit = at + i;
            let start = memchr::memrchr(b'\n', &buf[..hit]).map_or(0, |j| j + 1);
            let end = memchr::memchr(b'\n', &buf[hit..]).map_or(buf.len(), |j| hit + j);
            let word = &buf[start..end];
            if w.anchor.fits(word, w.text.as_bytes()) {
                out.insert(word);
            }
            at = end + 1;
            if at >= buf.len() {
                break;
            }
        }
    }
}

/// The ways `phrase` can be written in indexed words: for each of its words (at its place), one
/// of the indexed words `fitting` it, every combination; `None` when a word has no list or
/// there are more than `max` ways.
fn phrase_ways<'a>(
    phrase: &[(usize, text::PrefilterWord)],
    fitting: &'a HashMap<&text::PrefilterWord, Vec<String>>,
    max: usize,
) -> Option<Vec<Vec<(usize, &'a str)>>> {
    let mut ways: Vec<Vec<(usize, &str)>> = vec![Vec::new()];
    for (at, w) in phrase {
        let each = fitting.get(w)?;
        if each.is_empty() || ways.len() * each.len() > max {
            return None;
        }
        ways = ways
            .iter()
            .flat_map(|way| {
                each.iter().map(move |t| {
                    let mut longer = way.clone();
                    longer.push((*at, t.as_str()));
                    longer
                })
            })
            .collect();
    }
    Some(ways)
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.num_docs())
            .finish_non_exhaustive()
    }
}

impl SearchIndex {
    /// The schema, and its fields by name.
    fn schema() -> (Schema, Fields) {
        let mut sb = Schema::builder();
        let text = |tokenizer: &str| {
            TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(tokenizer)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            )
        };
        let fields = Fields {
            path: sb.add_text_field("path", STRING | STORED),
            title: sb.add_text_field("title", text(TEXT_ANALYZER)),
            headings: sb.add_text_field("headings", text(TEXT_ANALYZER)),
            tags: sb.add_text_field("tags", text(TEXT_ANALYZER)),
            props: sb.add_text_field("props", text(TEXT_ANALYZER)),
            body: sb.add_text_field("body", text(TEXT_ANALYZER)),
            cjk2: sb.add_text_field("cjk2", text(CJK_ANALYZER)),
            cjk1: sb.add_text_field("cjk1", text(CJK_ANALYZER)),
            folder: sb.add_text_field("folder", STRING),
            tag: sb.add_text_field("tag", STRING),
            prop: sb.add_text_field("prop", STRING),
            mtime: sb.add_i64_field("mtime", NumericOptions::default() | INDEXED | FAST),
            long: sb.add_text_field("long", STRING),
            stat_size: sb.add_u64_field("stat_size", FAST),
            stat_mtime: sb.add_i64_field("stat_mtime", FAST),
            stat_ino: sb.add_u64_field("stat_ino", FAST),
        };
        (sb.build(), fields)
    }

    /// An empty index in memory, writing with up to `threads` indexing threads.
    pub fn new(threads: usize) -> Result<Self, IndexError> {
        Self::create(cache::Files::default(), threads)
    }

    /// An empty index that writes its positions files into the cache folder `dir` as it goes
    /// (half the index, read only by phrase queries, kept out of memory as a restart keeps
    /// them); everything else is in memory until saved.
    pub fn new_in(
        dir: std::sync::Arc<crate::vault::cache::IndexCacheDir>,
        threads: usize,
    ) -> Result<Self, IndexError> {
        Self::create(cache::Files::spilling_to(dir), threads)
    }

    fn create(files: cache::Files, threads: usize) -> Result<Self, IndexError> {
        let (schema, fields) = Self::schema();
        let index = Index::create(files.clone(), schema, tantivy::IndexSettings::default())?;
        Self::serve(index, files, fields, threads)
    }

    /// The index saved in `dir`, to be brought up to date by the caller (see [`Self::stamps`]).
    /// `Ok(None)` when there is none yet; `Err` (a short reason) when the saved one cannot be
    /// used, and the caller should [`cache::clear`] it and start from [`Self::new`].
    pub fn load(
        dir: &std::sync::Arc<crate::vault::cache::IndexCacheDir>,
        threads: usize,
    ) -> Result<Option<Self>, cache::IndexCacheError> {
        let (schema, fields) = Self::schema();
        match cache::load(dir, &schema)? {
            None => Ok(None),
            Some((index, ram)) => Ok(Some(Self::serve(index, ram, fields, threads)?)),
        }
    }

    /// Saves the committed index to `dir` if it changed since `saved` (the last save's
    /// metadata); see [`cache::save`].
    pub fn save(
        &self,
        dir: &crate::vault::cache::IndexCacheDir,
        saved: &mut Vec<u8>,
    ) -> Result<bool, cache::IndexCacheError> {
        cache::save(&self.index, &self.files, dir, saved)
    }

    fn serve(
        index: Index,
        files: cache::Files,
        fields: Fields,
        threads: usize,
    ) -> Result<Self, IndexError> {
        index.tokenizers().register(TEXT_ANALYZER, text::analyzer());
        index.tokenizers().register(
            CJK_ANALYZER,
            TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
        );
        let threads = threads.clamp(1, 4);
        let writer =
            index.writer_with_num_threads(threads, WRITER_BUDGET.max((threads * 16) << 20))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(SearchIndex {
            writer: RwLock::new(writer),
            queue: Queue::new(queue::MAX_QUEUED),
            reader,
            index,
            files,
            fields,
            analyzer: text::analyzer(),
            term_lists: std::sync::Mutex::new(HashMap::new()),
            phrase_check_over: std::sync::atomic::AtomicU64::new(PHRASE_CHECK_OVER_NOTES),
        })
    }

    /// Every committed note's path and [`Stamp`]: what a restart compares with the vault.
    pub fn stamps(&self) -> Result<HashMap<VaultPath, Stamp>, IndexError> {
        let f = &self.fields;
        let searcher = self.reader.searcher();
        let mut out = HashMap::with_capacity(searcher.num_docs() as usize);
        for seg in searcher.segment_readers() {
            let fast = seg.fast_fields();
            let size = fast.u64("stat_size")?;
            let mtime = fast.i64("stat_mtime")?;
            let ino = fast.u64("stat_ino")?;
            let store = seg
                .get_store_reader(16)
                .map_err(|e| IndexError::Engine(e.into()))?;
            for doc in seg.doc_ids_alive() {
                let d: TantivyDocument = store.get(doc)?;
                let Some(path) = d
                    .get_first(f.path)
                    .and_then(|v| v.as_str())
                    .and_then(|s| VaultPath::parse(s).ok())
                else {
                    continue;
                };
                let stamp = Stamp {
                    size: size.first(doc).unwrap_or(0),
                    mtime_ns: mtime.first(doc).unwrap_or(0),
                    ino: ino.first(doc).unwrap_or(0),
                };
                out.insert(path, stamp);
            }
        }
        Ok(out)
    }

    /// Documents searchable now (committed).
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Stages a note's new version (replacing any previous one); searchable after [`commit`].
    ///
    /// [`commit`]: SearchIndex::commit
    pub fn stage(&self, note: NoteRead<'_>) -> Result<(), IndexError> {
        let doc = self.queue.admit(self.document(note));
        let writer = read(&self.writer);
        writer.delete_term(Term::from_field_text(self.fields.path, note.path.as_str()));
        writer.add_document(doc)?;
        Ok(())
    }

    /// Stages a note the index holds no version of (not even a staged one): added without the
    /// delete [`Self::stage`] queues, which costs memory until the commit and work at it.
    pub fn stage_new(&self, note: NoteRead<'_>) -> Result<(), IndexError> {
        let doc = self.queue.admit(self.document(note));
        let writer = read(&self.writer);
        writer.add_document(doc)?;
        Ok(())
    }

    /// Stages the removal of a note.
    pub fn stage_removal(&self, path: &VaultPath) {
        let writer = read(&self.writer);
        writer.delete_term(Term::from_field_text(self.fields.path, path.as_str()));
    }

    /// Holds segment merges until [`Self::resume_merges`]: a first build's segments are merged
    /// after the build rather than during it, so the index is searchable sooner (merging them
    /// as they come costs 1.5 to 2.8 s of CPU at 100,000 notes, on cores the build needs).
    pub fn hold_merges(&self) {
        let writer = read(&self.writer);
        writer.set_merge_policy(Box::new(tantivy::merge_policy::NoMergePolicy));
    }

    /// Lets segments merge again (tantivy's default policy) and starts the merges due, in the
    /// background.
    pub fn resume_merges(&self) -> Result<(), IndexError> {
        let mut writer = write(&self.writer);
        writer.set_merge_policy(Box::new(tantivy::merge_policy::LogMergePolicy::default()));
        // A commit is what makes tantivy consider merges.
        writer.commit()?;
        Ok(())
    }

    /// Segments searchable now.
    #[cfg(test)]
    pub fn segment_count(&self) -> usize {
        self.reader.searcher().segment_readers().len()
    }

    /// Makes every staged change searchable.
    pub fn commit(&self) -> Result<(), IndexError> {
        let mut writer = write(&self.writer);
        writer.commit()?;
        drop(writer);
        self.reader.reload()?;
        Ok(())
    }

    fn document(&self, note: NoteRead<'_>) -> TantivyDocument {
        let f = &self.fields;
        let mut doc = TantivyDocument::default();
        let path = note.path;
        doc.add_text(f.path, path.as_str());
        let mut title = path.stem().to_owned();
        for a in &note.parsed.aliases {
            title.push('\n');
            title.push_str(a);
        }
        let headings: String = note
            .parsed
            .headings
            .iter()
            .map(|h| &*h.text)
            .collect::<Vec<_>>()
            .join("\n");
        let tags: String = note
            .parsed
            .tags
            .iter()
            .map(|t| t.name.trim_start_matches('#'))
            .collect::<Vec<_>>()
            .join(" ");
        // Frontmatter as written and the body after it: together every word of the file, which
        // the exact-search prefilter relies on.
        let body_at = text::frontmatter_end(note.text);
        let (props, body) = note.text.split_at(body_at);
        for (field, value) in [
            (f.title, title.as_str()),
            (f.headings, headings.as_str()),
            (f.tags, tags.as_str()),
            (f.props, props),
            (f.body, body),
        ] {
            if !value.is_empty() {
                doc.add_text(field, value);
            }
            let cjk2 = text::cjk_bigrams(value);
            if !cjk2.is_empty() {
                doc.add_text(f.cjk2, &cjk2);
                doc.add_text(f.cjk1, text::cjk_unigrams(value));
            }
        }
        let comps: Vec<&str> = path.components().collect();
        for i in 1..comps.len() {
            doc.add_text(f.folder, comps[..i].join("/"));
        }
        let mut tag_terms: Vec<String> = Vec::new();
        for t in &note.parsed.tags {
            let norm = markdown::normalize_tag(&t.name);
            let mut at = 0;
            while let Some(i) = norm[at..].find('/') {
                tag_terms.push(norm[..at + i].to_owned());
                at += i + 1;
            }
            if !norm.is_empty() {
                tag_terms.push(norm);
            }
        }
        tag_terms.sort();
        tag_terms.dedup();
        for t in &tag_terms {
            doc.add_text(f.tag, t);
        }
        for p in crate::markdown::properties::property_terms(&note.parsed.frontmatter) {
            doc.add_text(f.prop, &p);
        }
        doc.add_i64(f.mtime, millis(note.meta.modified));
        let stamp = Stamp::of(note.meta);
        doc.add_u64(f.stat_size, stamp.size);
        doc.add_i64(f.stat_mtime, stamp.mtime_ns);
        doc.add_u64(f.stat_ino, stamp.ino);
        if text::has_long_word(note.text) || text::has_long_word(path.stem()) {
            doc.add_text(f.long, "1");
        }
        doc
    }

    /// Ranks the notes matching `query` under `filter`, returning `limit` of them from `offset`.
    pub fn search(
        &self,
        query: &Query,
        filter: &IndexFilter,
        offset: usize,
        limit: usize,
    ) -> Result<RankedHits, IndexError> {
        self.search_beside(query, filter, offset, limit, None)
    }

    /// [`Self::search`], scored as if the documents of `beside` (an index of the same schema:
    /// the PDFs' pages beside the notes) were in this index too: BM25's document count, field
    /// lengths and each word's document frequency are the two indexes' sums, so the scores of a
    /// search of each, made this way, can be merged.
    pub fn search_beside(
        &self,
        query: &Query,
        filter: &IndexFilter,
        offset: usize,
        limit: usize,
        beside: Option<&SearchIndex>,
    ) -> Result<RankedHits, IndexError> {
        if offset > MAX_OFFSET {
            return Err(IndexError::PastOffset);
        }
        let mut analyzer = self.analyzer.clone();
        let mut needles = Needles::default();
        let mut positives: Vec<Box<dyn TQuery>> = Vec::new();
        for c in query.positive() {
            if let Some(q) = self.clause_query(&mut analyzer, c, Some(&mut needles)) {
                positives.push(q);
            }
        }
        if positives.is_empty() {
            return Err(IndexError::NoWords);
        }
        let mut musts: Vec<(Occur, Box<dyn TQuery>)> = self.filter_clauses(filter);
        let searcher = self.reader.searcher();
        let other = beside.map(|b| b.reader.searcher());
        let stats = other.as_ref().map(|o| SummedStatistics(&searcher, o));
        let stats: Option<&dyn tantivy::query::Bm25StatisticsProvider> =
            stats.as_ref().map(|s| s as _);
        for c in query.negative() {
            if let Some(q) = self.clause_query(&mut analyzer, c, None) {
                musts.push((
                    Occur::MustNot,
                    self.exclusion(&searcher, &mut analyzer, c, q)?,
                ));
            }
        }
        let many = positives.len() > 1;
        let all: Vec<(Occur, Box<dyn TQuery>)> = positives
            .iter()
            .map(|q| (Occur::Must, q.box_clone()))
            .chain(musts.iter().map(|(o, q)| (*o, q.box_clone())))
            .collect();
        let (mut hits, mut total) =
            self.ranked_page(&searcher, &BooleanQuery::new(all), offset, limit, stats)?;
        let mut matched_all = true;
        if total == 0 && many {
            // No note has every word: rank the notes with any of them.
            matched_all = false;
            let any: Box<dyn TQuery> = Box::new(BooleanQuery::union(positives));
            let mut clauses = vec![(Occur::Must, any)];
            clauses.extend(musts);
            (hits, total) =
                self.ranked_page(&searcher, &BooleanQuery::new(clauses), offset, limit, stats)?;
        }
        needles.terms.sort();
        needles.terms.dedup();
        Ok(RankedHits {
            hits,
            total,
            matched_all,
            needles,
        })
    }

    /// Hits `offset..offset + limit` of `query`, best first and equal scores by path, with the
    /// number of hits in all. tantivy orders equal scores by document address, which depends on
    /// how the index was built (two runs differ), so every hit tied with the page's last one is
    /// fetched and sorted by path (at most [`MAX_TIED`] more hits are fetched for that).
    fn ranked_page(
        &self,
        searcher: &tantivy::Searcher,
        query: &dyn TQuery,
        offset: usize,
        limit: usize,
        stats: Option<&dyn tantivy::query::Bm25StatisticsProvider>,
    ) -> Result<(Vec<(f32, VaultPath)>, usize), IndexError> {
        let end = offset + limit.max(1);
        let mut fetch = end + 1;
        loop {
            let top = TopDocs::with_limit(fetch).order_by_score();
            let (found, total) = match stats {
                Some(stats) => {
                    searcher.search_with_statistics_provider(query, &(top, Count), stats)?
                }
                None => searcher.search(query, &(top, Count))?,
            };
            // The score the page ends on, when the page is full.
            let cutoff = found.get(end - 1).map(|(s, _)| *s);
            let seen_all_ties = found.len() < fetch
                || cutoff.is_none()
                || found.last().map(|(s, _)| *s) < cutoff
                || fetch >= end + MAX_TIED;
            if seen_all_ties {
                // Runs of equal scores, sorted by path; only the runs that reach into the page
                // read their paths (a deep page does not read the thousands before it).
                let mut hits = Vec::with_capacity(limit.max(1));
                let mut start = 0;
                while start < found.len() && start < end {
                    let score = found[start].0;
                    let run = found[start..]
                        .iter()
                        .take_while(|(s, _)| *s == score)
                        .count();
                    if start + run > offset {
                        let mut tied = Vec::with_capacity(run);
                        for (s, addr) in &found[start..start + run] {
                            if let Some(p) = self.path_of(searcher, *addr)? {
                                tied.push((*s, p));
                            }
                        }
                        tied.sort_by(|a, b| a.1.cmp(&b.1));
                        hits.extend(
                            tied.into_iter()
                                .enumerate()
                                .filter(|(k, _)| (offset..end).contains(&(start + k)))
                                .map(|(_, h)| h),
                        );
                    }
                    start += run;
                }
                return Ok((hits, total));
            }
            fetch = (end + (fetch - end) * 8).min(end + MAX_TIED);
        }
    }

    /// The query that excludes `clause`. A clause with a phrase (several words, or CJK text) is
    /// resolved first into the set of paths it matches: tantivy 0.27's phrase scorer misbehaves
    /// under exclusion across segments (a debug assertion fires in `seek_danger`), so phrases are
    /// never placed under `MustNot` directly.
    fn exclusion(
        &self,
        searcher: &tantivy::Searcher,
        analyzer: &mut TextAnalyzer,
        clause: &Clause,
        q: Box<dyn TQuery>,
    ) -> Result<Box<dyn TQuery>, IndexError> {
        let single_word = text::tokens(analyzer, &clause.text).len() <= 1
            && text::cjk_runs(&clause.text).next().is_none();
        if single_word {
            return Ok(q);
        }
        let docs = in_store_order(searcher.search(&*q, &tantivy::collector::DocSetCollector)?);
        let mut terms = Vec::with_capacity(docs.len());
        for addr in docs {
            if let Some(p) = self.path_of(searcher, addr)? {
                terms.push(Term::from_field_text(self.fields.path, p.as_str()));
            }
        }
        Ok(Box::new(tantivy::query::TermSetQuery::new(terms)))
    }
    /// The notes that can contain an exact query made of `words` (see [`text::prefilter_words`]):
    /// those with, in the name, aliases, frontmatter or body, an indexed word fitting each of
    /// them, plus every note with a word too long to be indexed. `None` when more than `max`
    /// notes qualify, or when a word stands for more than [`MAX_PREFILTER_TERMS`] indexed words:
    /// then reading every note is as quick.
    ///
    /// A whole word is one term lookup. A part of a word is looked up in the list of every word
    /// the index holds (kept per segment, made on the first exact search after a segment
    /// appears): one substring scan of a few megabytes, where a regex over the term dictionary
    /// walked all of it through an automaton.
    pub fn candidates(
        &self,
        words: &text::Prefilter,
        max: usize,
    ) -> Result<Option<Vec<VaultPath>>, IndexError> {
        match self.prefilter(words, &IndexFilter::default(), max, 0)? {
            Some(found) if found.docs.is_some() => found.paths(self).map(Some),
            _ => Ok(None),
        }
    }

    /// The notes within `filter` that can contain an exact query made of `words` (as
    /// [`SearchIndex::candidates`]), found with one run of the query: how many in all, and
    /// which, when at most `keep`. An exact search decides from the count whether to rank
    /// (too many to read), read these notes, or read every note, and reads them without a
    /// second run: a phrase's positions are the costly part, and `orqu the` (3,034 notes of
    /// 100,000) took 104 ms with three runs, 43 with one. `None` when a word stands for too
    /// many indexed words.
    ///
    /// When the words' own counts say the notes may be more than `keep`, the same run also
    /// ranks them and keeps the best `rank` ([`Prefiltered::ranked`]), so a search that then
    /// reads them in ranked order needs no second run: a phrase of two common words took two
    /// runs of 20 ms each.
    pub fn prefilter(
        &self,
        words: &text::Prefilter,
        filter: &IndexFilter,
        keep: usize,
        rank: usize,
    ) -> Result<Option<Prefiltered>, IndexError> {
        let searcher = self.reader.searcher();
        let clauses = self.filter_clauses(filter);
        // One word and no filter: a single indexed word of it in more than `keep` notes
        // settles it without running the query. Such a word that stands for too many indexed
        // words ends here the same way: either way the search does not read a list of notes
        // (it ranks, or reads every note when ranking cannot narrow either).
        let max = clauses.is_empty().then_some(keep);
        // A filter narrows the notes by an amount the words' counts do not tell: scoring them
        // all for a ranking that is then not needed cost more than the second run it saves.
        let scoring = if rank > 0 && clauses.is_empty() {
            Scoring::Over(keep)
        } else {
            Scoring::Off
        };
        let Some((q, scored)) = self.prefilter_query(&searcher, words, max, scoring)? else {
            if max.is_some() && words.words.len() == 1 && words.phrase.is_none() {
                return Ok(Some(Prefiltered {
                    searcher,
                    docs: None,
                    ranked: None,
                    total: keep.saturating_add(1),
                }));
            }
            return Ok(None);
        };
        let q: Box<dyn TQuery> = if clauses.is_empty() {
            q
        } else {
            let mut all = vec![(Occur::Must, q)];
            all.extend(clauses);
            Box::new(BooleanQuery::new(all))
        };
        let ((total, docs), ranked) = if scored {
            let top = TopDocs::with_limit(rank).order_by_score();
            let (kept, top) = searcher.search(&*q, &(KeepUpTo(keep), top))?;
            (kept, Some(top))
        } else {
            (searcher.search(&*q, &KeepUpTo(keep))?, None)
        };
        tracing::debug!(count = total, keep, scored, "exact-search prefilter");
        Ok(Some(Prefiltered {
            searcher,
            docs: (total <= keep).then_some(docs),
            ranked: ranked.filter(|_| total > keep),
            total,
        }))
    }

    /// Checks a phrase's places in the prefilter when each of its words is in more than `notes`
    /// notes (a test of the check on a few notes sets 0).
    #[cfg(test)]
    pub(crate) fn check_phrases_over(&self, notes: u64) {
        self.phrase_check_over
            .store(notes, std::sync::atomic::Ordering::Relaxed);
    }

    /// The same notes as [`SearchIndex::candidates`] within `filter`, for a query whose words are in
    /// too many notes to read them all: the first `limit`, best first by the index's ranking of the indexed words
    /// fitting the query's, with how many notes qualify in all. `None` when a word stands for
    /// more than [`MAX_PREFILTER_TERMS`] indexed words. Notes with a word too long to index
    /// qualify too, and rank last.
    pub fn ranked_candidates(
        &self,
        words: &text::Prefilter,
        filter: &IndexFilter,
        limit: usize,
    ) -> Result<Option<RankedCandidates>, IndexError> {
        let searcher = self.reader.searcher();
        let Some((q, _)) = self.prefilter_query(&searcher, words, None, Scoring::On)? else {
            return Ok(None);
        };
        let mut clauses = vec![(Occur::Must, q)];
        clauses.extend(self.filter_clauses(filter));
        let top = TopDocs::with_limit(limit.max(1)).order_by_score();
        let (found, total) = searcher.search(&BooleanQuery::new(clauses), &(top, Count))?;
        let mut out = Vec::with_capacity(found.len());
        for (score, addr) in found {
            if let Some(p) = self.path_of(&searcher, addr)? {
                out.push((score, p));
            }
        }
        Ok(Some((out, total)))
    }

    /// The query behind [`SearchIndex::candidates`]: for each word, any indexed word fitting it (in the
    /// name, aliases, frontmatter or body); every word, and for a query of several words, all of
    /// them side by side in one of those fields, in the query's order (a phrase of common words
    /// is then as narrow as a rare word); or a word too long to index. `None` when a
    /// word stands for too many indexed words, or (with `max`, one word) when one of its words
    /// alone is in more than `max` notes. With `scoring`, the words' terms are scored (BM25)
    /// where they are few enough to score cheaply, so the notes can be ranked; the second value
    /// says whether they are.
    fn prefilter_query(
        &self,
        searcher: &tantivy::Searcher,
        prefilter: &text::Prefilter,
        max: Option<usize>,
        scoring: Scoring,
    ) -> Result<Option<PrefilterQuery>, IndexError> {
        /// Most terms of one word scored one by one; beyond, the word's terms match unscored.
        const MAX_SCORED_TERMS: usize = 64;
        /// Most ways a phrase can be written in indexed words (the product, over its words, of
        /// the indexed words each fits); beyond, the words are only required somewhere in the
        /// note. Each way is a phrase query of its own: with `and` ending a query (every word
        /// ending in `and`), merging the positions of all of them took longer than reading the
        /// notes (40 ms where 16 ms).
        const MAX_PHRASE_WAYS: usize = 16;
        let f = &self.fields;
        let words = &prefilter.words[..];
        let mut fitting: HashMap<&text::PrefilterWord, Vec<String>> = HashMap::new();
        let lists = if words.iter().all(|w| w.anchor == text::Anchor::Whole) {
            Vec::new()
        } else {
            self.term_lists(searcher)?
        };
        // Each word's terms, in every text field.
        let mut each_word: Vec<Vec<Term>> = Vec::with_capacity(words.len());
        for w in words {
            let mut found: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
            if w.anchor == text::Anchor::Whole {
                found.insert(w.text.as_bytes());
            } else {
                for list in &lists {
                    list.fitting(w, &mut found);
                    if found.len() > MAX_PREFILTER_TERMS {
                        tracing::debug!(word = %w.text, "exact-search prefilter: too many words fit");
                        return Ok(None);
                    }
                }
            }
            if prefilter.phrase.is_some() && found.len() <= MAX_PHRASE_WAYS {
                let mut each: Vec<String> = found
                    .iter()
                    .filter_map(|t| std::str::from_utf8(t).ok())
                    .map(str::to_owned)
                    .collect();
                each.sort_unstable();
                fitting.insert(w, each);
            }
            let mut terms = Vec::with_capacity(found.len() * 3);
            for t in found {
                let Ok(t) = std::str::from_utf8(t) else {
                    continue;
                };
                for field in [f.title, f.props, f.body] {
                    terms.push(Term::from_field_text(field, t));
                }
            }
            if let Some(max) = max
                && words.len() == 1
            {
                // One word: a single word of it in too many notes settles it without the union.
                for t in &terms {
                    if searcher.doc_freq(t)? > max as u64 {
                        return Ok(None);
                    }
                }
            }
            each_word.push(terms);
        }
        // At most as many notes as hold the rarest word's terms (a note counted once per field
        // and term that it holds; words of many terms are not counted): unknown until needed.
        let mut fewest: Option<u64> = None;
        let mut fewest_notes = || -> Result<u64, IndexError> {
            if let Some(n) = fewest {
                return Ok(n);
            }
            let mut least = u64::MAX;
            for terms in &each_word {
                if terms.len() > 3 * MAX_SCORED_TERMS {
                    continue;
                }
                let mut notes = 0u64;
                for t in terms {
                    notes = notes.saturating_add(searcher.doc_freq(t)?);
                }
                least = least.min(notes);
            }
            fewest = Some(least);
            Ok(least)
        };
        let scored = match scoring {
            Scoring::Off => false,
            Scoring::On => true,
            Scoring::Over(limit) => {
                let n = fewest_notes()?;
                n > limit as u64 && n != u64::MAX
            }
        };
        // Checking the words' places reads every position of each word (tantivy reads a term's
        // whole list: `the`'s is megabytes, 30 to 55 ms for `orqu the` at 100,000 notes). Notes
        // that will be counted skip it when a word is in few enough of them that reading
        // them costs less: a few thousand, and at most an eighth of the vault (more, and the
        // search would read every note instead, so the places must narrow it).
        let over = self
            .phrase_check_over
            .load(std::sync::atomic::Ordering::Relaxed)
            .min(searcher.num_docs() / 8);
        // Notes read in ranked order until a page is full need the places checked: without,
        // a rare phrase of words each in a few thousand notes read them all in rounds.
        let by_place = prefilter.phrase.is_some() && (scored || fewest_notes()? > over);
        let mut all: Vec<Box<dyn TQuery>> = Vec::with_capacity(words.len() + 1);
        for terms in each_word {
            if scored && terms.len() <= 3 * MAX_SCORED_TERMS {
                let each: Vec<Box<dyn TQuery>> = terms
                    .into_iter()
                    .map(|t| {
                        Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs)) as Box<dyn TQuery>
                    })
                    .collect();
                all.push(Box::new(BooleanQuery::union(each)));
            } else {
                all.push(Box::new(tantivy::query::TermSetQuery::new(terms)));
            }
        }
        if let Some(phrase) = prefilter.phrase.as_ref().filter(|_| by_place)
            && let Some(ways) = phrase_ways(phrase, &fitting, MAX_PHRASE_WAYS)
        {
            // Each way in each field, side by side at the words' places.
            let mut each: Vec<Box<dyn TQuery>> = Vec::with_capacity(ways.len() * 3);
            for way in &ways {
                for field in [f.title, f.props, f.body] {
                    let terms: Vec<(usize, Term)> = way
                        .iter()
                        .map(|(at, t)| (*at, Term::from_field_text(field, t)))
                        .collect();
                    each.push(Box::new(PhraseQuery::new_with_offset(terms)));
                }
            }
            // Unscored: the words' own scores rank the notes.
            all.push(Box::new(tantivy::query::ConstScoreQuery::new(
                Box::new(BooleanQuery::union(each)),
                0.0,
            )));
        }
        let q = BooleanQuery::union(vec![
            Box::new(BooleanQuery::intersection(all)) as Box<dyn TQuery>,
            // A note with a word too long to index may hold the query anywhere: it qualifies,
            // scored 0 (ranked last).
            Box::new(tantivy::query::ConstScoreQuery::new(
                term_query(f.long, "1"),
                0.0,
            )),
        ]);
        Ok(Some((Box::new(q), scored)))
    }

    /// The word lists of the searcher's segments, made for the ones not seen before; lists of
    /// segments gone (merged away) are dropped.
    fn term_lists(
        &self,
        searcher: &tantivy::Searcher,
    ) -> Result<Vec<std::sync::Arc<TermList>>, IndexError> {
        let mut cache = lock(&self.term_lists);
        let mut kept = HashMap::with_capacity(searcher.segment_readers().len());
        let mut out = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let id = segment.segment_id();
            let list = match cache.remove(&id) {
                Some(list) => list,
                None => std::sync::Arc::new(TermList::of(
                    segment,
                    &[self.fields.title, self.fields.props, self.fields.body],
                )?),
            };
            kept.insert(id, std::sync::Arc::clone(&list));
            out.push(list);
        }
        *cache = kept;
        Ok(out)
    }

    /// Reads a note's path from the document store, where documents lie compressed in blocks
    /// of a few hundred paths (a block decompressed is kept for the next read, among the last
    /// hundred). Many notes are read in document order ([`in_store_order`]).
    fn path_of(
        &self,
        searcher: &tantivy::Searcher,
        addr: DocAddress,
    ) -> Result<Option<VaultPath>, IndexError> {
        let doc: TantivyDocument = searcher.doc(addr)?;
        Ok(doc
            .get_first(self.fields.path)
            .and_then(|v| v.as_str())
            .and_then(|s| VaultPath::parse(s).ok()))
    }

    /// The query for one clause over every text field, or `None` when it has nothing to search
    /// for. Collects what to highlight into `needles`.
    fn clause_query(
        &self,
        analyzer: &mut TextAnalyzer,
        clause: &Clause,
        needles: Option<&mut Needles>,
    ) -> Option<Box<dyn TQuery>> {
        let f = &self.fields;
        let words: Vec<String> = text::tokens(analyzer, &clause.text)
            .into_iter()
            .map(|t| t.text)
            .collect();
        let runs: Vec<String> = text::cjk_runs(&clause.text).map(str::to_owned).collect();
        let mut alternatives: Vec<Box<dyn TQuery>> = Vec::new();
        if !words.is_empty() {
            for (field, boost) in [
                (f.title, BOOST_TITLE),
                (f.headings, BOOST_HEADINGS),
                (f.tags, BOOST_TAGS),
                (f.props, BOOST_PROPS),
                (f.body, 1.0),
            ] {
                let q = terms_query(field, &words);
                alternatives.push(if boost == 1.0 {
                    q
                } else {
                    Box::new(BoostQuery::new(q, boost))
                });
            }
        }
        if !runs.is_empty() {
            let mut per_run: Vec<Box<dyn TQuery>> = Vec::new();
            for run in &runs {
                let chars: Vec<char> = run.chars().collect();
                if chars.len() == 1 {
                    per_run.push(term_query(f.cjk1, run));
                } else {
                    let grams: Vec<String> = chars
                        .windows(2)
                        .map(|w| w.iter().collect::<String>())
                        .collect();
                    per_run.push(terms_query(f.cjk2, &grams));
                }
            }
            alternatives.push(if per_run.len() == 1 {
                per_run.pop()?
            } else {
                Box::new(BooleanQuery::intersection(per_run))
            });
        }
        if alternatives.is_empty() {
            return None;
        }
        if let Some(n) = needles {
            n.terms.extend(words);
            n.cjk.extend(runs);
        }
        Some(Box::new(BooleanQuery::union(alternatives)))
    }

    fn filter_clauses(&self, filter: &IndexFilter) -> Vec<(Occur, Box<dyn TQuery>)> {
        let f = &self.fields;
        let mut out: Vec<Box<dyn TQuery>> = Vec::new();
        if let Some(folder) = filter.folder.as_ref().filter(|p| !p.is_root()) {
            out.push(term_query(f.folder, folder.as_str()));
        }
        if let Some(tag) = &filter.tag {
            out.push(term_query(f.tag, tag));
        }
        if let Some((key, value)) = &filter.property {
            let term = match value {
                None => key.clone(),
                Some(v) => crate::markdown::properties::property_term(key, v),
            };
            out.push(term_query(f.prop, &term));
        }
        if filter.modified_after.is_some() || filter.modified_before.is_some() {
            let bound = |v: Option<i64>| match v {
                Some(v) => Bound::Included(Term::from_field_i64(f.mtime, v)),
                None => Bound::Unbounded,
            };
            out.push(Box::new(RangeQuery::new(
                bound(filter.modified_after),
                bound(filter.modified_before),
            )));
        }
        let mut clauses: Vec<(Occur, Box<dyn TQuery>)> = out
            .into_iter()
            .map(|q| {
                (
                    Occur::Must,
                    Box::new(ConstScoreQuery::new(q, 0.0)) as Box<dyn TQuery>,
                )
            })
            .collect();
        if !filter.exclude_folders.is_empty() {
            let terms = filter
                .exclude_folders
                .iter()
                .map(|p| Term::from_field_text(f.folder, p.as_str()));
            clauses.push((
                Occur::MustNot,
                Box::new(tantivy::query::TermSetQuery::new(terms)),
            ));
        }
        if let Some(exclude) = filter.exclude.as_ref().filter(|e| !e.is_empty()) {
            let terms = exclude
                .iter()
                .map(|p| Term::from_field_text(f.path, p.as_str()));
            clauses.push((
                Occur::MustNot,
                Box::new(tantivy::query::TermSetQuery::new(terms)),
            ));
        }
        clauses
    }
}

fn term_query(field: Field, text: &str) -> Box<dyn TQuery> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::WithFreqs,
    ))
}

/// One term, or the terms as a phrase.
fn terms_query(field: Field, terms: &[String]) -> Box<dyn TQuery> {
    if terms.len() == 1 {
        return term_query(field, &terms[0]);
    }
    Box::new(PhraseQuery::new(
        terms
            .iter()
            .map(|t| Term::from_field_text(field, t))
            .collect(),
    ))
}

/// Milliseconds since the Unix epoch (negative before it).
pub fn millis(t: std::time::SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// What [`SearchIndex::prefilter`] found.
pub struct Prefiltered {
    searcher: tantivy::Searcher,
    /// The notes, in the document store's order; `None` when there are more than asked for.
    docs: Option<Vec<DocAddress>>,
    /// When there are more than asked for and the run ranked them: the best, best first.
    ranked: Option<Vec<(f32, DocAddress)>>,
    /// How many notes qualify (more than asked for, when a single word settled it).
    pub total: usize,
}

impl Prefiltered {
    /// True when the notes themselves are known (not only how many).
    pub fn listed(&self) -> bool {
        self.docs.is_some()
    }

    /// The best notes by the index's ranking, best first, with how many qualify in all (as
    /// [`SearchIndex::ranked_candidates`] gives them), when the run ranked them: at most the
    /// `rank` asked for.
    pub fn ranked(&self, index: &SearchIndex) -> Result<Option<RankedCandidates>, IndexError> {
        let Some(ranked) = &self.ranked else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(ranked.len());
        for &(score, addr) in ranked {
            if let Some(p) = index.path_of(&self.searcher, addr)? {
                out.push((score, p));
            }
        }
        Ok(Some((out, self.total)))
    }

    /// The notes' paths (none when there were more than asked for).
    pub fn paths(&self, index: &SearchIndex) -> Result<Vec<VaultPath>, IndexError> {
        let docs = self.docs.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(docs.len());
        for &addr in docs {
            if let Some(p) = index.path_of(&self.searcher, addr)? {
                out.push(p);
            }
        }
        Ok(out)
    }
}

/// Whether the exact-search prefilter's query scores the notes it finds.
#[derive(Debug, Clone, Copy)]
enum Scoring {
    Off,
    On,
    /// When the words' own counts say more than this many notes may qualify.
    Over(usize),
}

/// Counts the documents a query matches and keeps the first `.0` of them, in the document
/// store's order (segment by segment, each in document order).
struct KeepUpTo(usize);

struct KeepUpToSegment {
    segment: u32,
    keep: usize,
    count: usize,
    docs: Vec<DocAddress>,
}

impl tantivy::collector::Collector for KeepUpTo {
    type Fruit = (usize, Vec<DocAddress>);
    type Child = KeepUpToSegment;

    fn for_segment(
        &self,
        segment: tantivy::SegmentOrdinal,
        _reader: &tantivy::SegmentReader,
    ) -> tantivy::Result<KeepUpToSegment> {
        Ok(KeepUpToSegment {
            segment,
            keep: self.0,
            count: 0,
            docs: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(
        &self,
        fruits: Vec<(usize, Vec<DocAddress>)>,
    ) -> tantivy::Result<(usize, Vec<DocAddress>)> {
        let total = fruits.iter().map(|f| f.0).sum();
        let mut docs: Vec<DocAddress> = Vec::new();
        if total <= self.0 {
            for (_, mut d) in fruits {
                docs.append(&mut d);
            }
            docs.sort_unstable();
        }
        Ok((total, docs))
    }
}

impl tantivy::collector::SegmentCollector for KeepUpToSegment {
    type Fruit = (usize, Vec<DocAddress>);

    fn collect(&mut self, doc: tantivy::DocId, _score: tantivy::Score) {
        self.count += 1;
        if self.count <= self.keep {
            self.docs.push(DocAddress::new(self.segment, doc));
        }
    }

    fn harvest(self) -> (usize, Vec<DocAddress>) {
        (self.count, self.docs)
    }
}

/// `docs` in the order the document store keeps them, so the paths of many notes are read a
/// block at a time. A set's own order is random, and a block was decompressed again for most
/// notes: an exact search of a word in 10,542 notes of 100,000 took 54 ms that way, 39 in order.
fn in_store_order(docs: std::collections::HashSet<DocAddress>) -> Vec<DocAddress> {
    let mut docs: Vec<DocAddress> = docs.into_iter().collect();
    docs.sort_unstable();
    docs
}

#[cfg(test)]
mod tests;

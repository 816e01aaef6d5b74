//! What the engine is told at its creation: when it brings itself up to date, how long scans may
//! take, what it keeps and what it hides.

use std::time::Duration;

/// How long a scanning search (exact, regex, ranked while the index builds) may run by default.
pub const SCAN_BUDGET: Duration = Duration::from_secs(3);

/// The default [`EngineOptions::exact_scan_max_notes`]: reading and counting 10,000 notes' kept
/// texts from the index cache folder takes about 30 ms on two cores (20,000, the default until
/// that was measured as users run, took 60 to 70 ms: the p95 of exact search at 100,000 notes).
pub const EXACT_SCAN_MAX_NOTES: usize = 10_000;

/// The engine's options: when it brings itself up to date, how long scans may take, what it
/// keeps and what it hides.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Reconcile before a query when the last reconcile is older than this (`None`: never at
    /// query time; the watcher and the periodic reconcile keep things fresh).
    pub query_max_age: Option<Duration>,
    /// Full reconcile at this interval.
    pub periodic: Duration,
    /// Watch the vault for changes.
    pub watch: bool,
    /// How long a scanning search (exact, regex, ranked while the index builds) may run.
    pub scan_budget: Duration,
    /// An exact search whose words are in more notes than this reads them in the index's ranked
    /// order, only as many as its page needs (its `total` is then the index's count of notes);
    /// at most this many, it reads them all and counts every matching line.
    pub exact_scan_max_notes: usize,
    /// Wait this long between opening the index (and its cache) and the first build's walk
    /// (tests use it to observe the building state).
    pub build_delay: Duration,
    /// Keep every note's text (in the index cache folder's `texts.bin`, or in memory without
    /// one), so exact and regex searches scan one file or RAM instead of every note on disk.
    pub keep_texts: bool,
    /// Leave Obsidian's "Excluded files" (`userIgnoreFilters`) out of search, list and graph
    /// results, as Obsidian does (they stay readable by path).
    pub hide_obsidian_excluded: bool,
    /// Where MCP prompts come from (`notes::prompts`).
    pub prompts: PromptOptions,
    /// What clients see of text a reader of the rendered note would not.
    pub hidden_text: crate::markdown::hidden::Policy,
    /// Which notes count as clipped or shared ([`crate::obsidian::provenance`]).
    pub trust: crate::obsidian::provenance::TrustRules,
    /// Reads PDFs' text (the worker `serve` starts; none by default).
    pub pdf: std::sync::Arc<super::pdf::PdfReader>,
    /// Keep the text of every PDF in the vault, so that search covers it (`--index-pdfs`).
    pub index_pdfs: bool,
    /// At shutdown, let the PDF being read in the background finish (within the worker's time
    /// limit) so that its text is kept, rather than give it up: a one-shot `capvault call`,
    /// which stops soon after it answers, so makes progress through a vault's slow PDFs.
    pub finish_pdf_at_stop: bool,
    /// The thread pool this engine's builds and reconciles parse notes on (`None`: rayon's
    /// global pool). A server of several vaults gives each engine its own, so a large vault's
    /// first build does not hold up a small one's (both pools share the cores, none waits in
    /// the other's queue).
    pub pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

/// Where MCP prompts come from: a vault folder whose notes are prompts, and the built-in ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptOptions {
    /// The vault folder whose notes are prompts; `None`: none.
    pub folder: Option<crate::vault::VaultPath>,
    /// Offer the built-in prompts.
    pub builtin: bool,
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            folder: None,
            builtin: true,
        }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            query_max_age: None,
            periodic: Duration::from_secs(60),
            watch: true,
            scan_budget: SCAN_BUDGET,
            exact_scan_max_notes: EXACT_SCAN_MAX_NOTES,
            build_delay: Duration::ZERO,
            keep_texts: true,
            hide_obsidian_excluded: true,
            prompts: PromptOptions::default(),
            hidden_text: crate::markdown::hidden::Policy::Show,
            trust: crate::obsidian::provenance::TrustRules::default(),
            pdf: std::sync::Arc::new(super::pdf::PdfReader::none("no PDF worker was started")),
            index_pdfs: false,
            finish_pdf_at_stop: false,
            pool: None,
        }
    }
}

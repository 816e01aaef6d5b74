//! `run_query`: Dataview's queries (DQL) and the Tasks plugin's queries, evaluated over the
//! vault model, from the call or from a note's ```` ```dataview ```` / ```` ```tasks ```` block.
//!
//! DQL:
//! [`ModelPages`] gives the pure evaluator ([`crate::obsidian::dataview::query`]) the model's
//! notes: metadata, frontmatter, tags, links resolved as Obsidian resolves them, backlinks, and
//! each note's Dataview data as the model keeps it (page inline fields and tasks). The query
//! comes from the call, or from the n-th ```` ```dataview ```` block of a note (then `this` is
//! that note). Answers are structured (columns and rows of JSON values) and rendered as the
//! Markdown Obsidian would show.
//!
//! The model keeps tasks but not the other list items: a query that names `lists`
//! (`file.lists`, `L.lists`...) reads each page it touches from the vault again and parses it
//! whole ([`ModelPages::reading`]), which its time budget bounds. A task's `outlinks` are the
//! model's links on the task's lines.
//!
//! Here: the request, the language, and the runner. `pages.rs`: the model as the evaluator's
//! pages. `render.rs`: a page of an answer within the reply's bound. `task_queries.rs`: the
//! Tasks plugin's queries. `inline.rs`: a note's inline queries for `read_note`.

use std::cell::OnceCell;
use std::collections::HashSet;

use chrono::NaiveDateTime;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value as Json, json};

use super::paging::{decode_offset, encode_offset, fingerprint};
use super::{NoteError, check_limit};
use crate::engine::Engine;
use crate::markdown::{self, LinkKind};
use crate::model::dataview::Task;
use crate::model::linkres::Resolution;
use crate::model::{Model, Note};
use crate::obsidian::budget::Spent;
use crate::obsidian::dataview::query::{
    self, Context, DataviewSettings, DvSource, Output, PageId, QueryError, QueryResult, TaskRow,
};
use crate::obsidian::dataview::value::from_frontmatter;
use crate::obsidian::dataview::{DataviewNote, DvDate, Link, ListItem, Subpath, TaskState, Value};
use crate::obsidian::provenance::Provenance;
use crate::obsidian::tasks::{self, TaskRecord};
use crate::vault::{Vault, VaultPath};

/// Rows per page unless `limit` says otherwise.
pub const DEFAULT_ROWS: u32 = 50;
/// Most rows per page.
pub const MAX_ROWS: u32 = 500;
/// Most bytes of rows in one reply; a page stops early (with a cursor) rather than exceed it.
pub const MAX_REPLY_BYTES: usize = 96 * 1024;
/// Longest query accepted in a call.
pub const MAX_QUERY_BYTES: usize = query::MAX_QUERY_BYTES;

mod inline;
mod pages;
mod render;
mod task_queries;

pub use inline::{InlineValue, MAX_INLINE, inline_values};
use pages::*;
pub use pages::{ModelPages, ReadText, value_json};
use render::*;
use task_queries::*;

/// A query language.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// Dataview's DQL.
    #[default]
    Dataview,
    /// The Tasks plugin's query language.
    Tasks,
}

/// Where a query comes from.
#[derive(Debug, Clone)]
enum Requested {
    /// Text in the call, in a language (none named: told by the text, [`language_of`]).
    Text(String, Option<Language>),
    /// A note as named and the 1-based index of its ```` ```dataview ```` or ```` ```tasks ````
    /// block (the block says which language).
    Block(super::locate::Named, usize),
}

/// `run_query`'s arguments as the client gave them.
#[derive(Debug, Clone, Default)]
pub struct QueryArgs {
    /// The language of `query` (default: told by the text, [`language_of`]).
    pub language: Option<Language>,
    /// Query text.
    pub query: Option<String>,
    /// Or a note holding ```` ```dataview ```` or ```` ```tasks ```` blocks.
    pub path: Option<String>,
    /// Which block of that note, from 1.
    pub block: Option<usize>,
    /// Rows per page.
    pub limit: Option<u32>,
    /// Where the page starts.
    pub cursor: Option<String>,
}

/// What `run_query` asks, checked.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    source: Requested,
    limit: Option<u32>,
    cursor: Option<String>,
}

impl QueryRequest {
    /// Exactly one of `query` and `path`; `block` only with `path`, `language` only with
    /// `query`; the query within [`MAX_QUERY_BYTES`].
    pub fn new(args: QueryArgs) -> Result<Self, NoteError> {
        let source = match (args.query, args.path) {
            (Some(q), None) => {
                if args.block.is_some() {
                    return Err(NoteError::invalid(
                        "block",
                        "`block` goes with `path` (a note holding ```dataview or ```tasks blocks)",
                    ));
                }
                if q.len() > MAX_QUERY_BYTES {
                    return Err(NoteError::TooLarge(format!(
                        "`query` is larger than {} KiB",
                        MAX_QUERY_BYTES / 1024
                    )));
                }
                Requested::Text(q, args.language)
            }
            (None, Some(_)) if args.language.is_some() => {
                return Err(NoteError::invalid(
                    "language",
                    "`language` goes with `query`: a block's fence says its language",
                ));
            }
            (None, Some(p)) => {
                Requested::Block(super::locate::Named::parse(p)?, args.block.unwrap_or(1))
            }
            (Some(_), Some(_)) => {
                return Err(NoteError::invalid(
                    "query",
                    "give either `query` or `path`, not both",
                ));
            }
            (None, None) => {
                return Err(NoteError::invalid(
                    "query",
                    "give `query` (DQL or a Tasks query) or `path` (a note with a ```dataview or ```tasks block)",
                ));
            }
        };
        Ok(QueryRequest {
            source,
            limit: args.limit,
            cursor: args.cursor,
        })
    }
}

/// One page of a query's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct QueryReply {
    /// DQL: `list`, `table`, `task` or `calendar`; a Tasks query: `tasks`.
    pub kind: String,
    /// Column names (TABLE; the id column first unless `WITHOUT ID`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// This page's rows: cells for TABLE, `{id, value}` for LIST, `{group, tasks}` for TASK
    /// and Tasks queries (a Tasks group is its headings), `{date, page}` for CALENDAR.
    pub rows: Vec<Json>,
    /// Rows (or groups) in the whole answer.
    pub total: usize,
    /// The next page, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The page as Obsidian would render it.
    pub markdown: String,
    /// The note whose block was run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Problems that did not stop the query (a WHERE failing on some rows).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The notes the answer's values were read from that are not the vault's own (a field
    /// reached through a link, a group's rows): merged by the server into the reply's
    /// `provenance` with the notes its rows name (not in the schema, as that is not).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(skip)]
    pub provenance: std::collections::BTreeMap<String, Provenance>,
}

/// The error of the query at `at`, given by the argument `param` (`query`, or `path` for a
/// note's block).
fn query_error(e: QueryError, at: &str, param: &'static str) -> NoteError {
    if crate::notes::cancel::requested() {
        return crate::notes::cancel::cancelled();
    }
    match e {
        QueryError::Eval(e) if e.fatal() => {
            NoteError::spent(e.spent.unwrap_or(Spent::Cancelled), format!("{at}: {e}"))
        }
        other => NoteError::invalid(param, format!("{at}: {other}")),
    }
}

/// The language of a query given without one: DQL when its first word is a DQL query type
/// (`TABLE`, `LIST`, `TASK`, `CALENDAR`, any case), as every DQL query starts; else the Tasks
/// plugin's language when the text parses as that (`not done`, `due before tomorrow`: no Tasks
/// instruction starts with those words); else (blank text too) DQL, whose error then says what
/// it expected.
pub fn language_of(text: &str, today: chrono::NaiveDate) -> Language {
    let first = text.split_whitespace().next().unwrap_or("");
    let dql = ["TABLE", "LIST", "TASK", "CALENDAR"]
        .iter()
        .any(|t| first.eq_ignore_ascii_case(t));
    if !dql && !first.is_empty() && reads_as_tasks(text, today) {
        Language::Tasks
    } else {
        Language::Dataview
    }
}

/// Whether `text` parses as a Tasks query, read under the request's budget: the bytes charged
/// for the regexes compiled here are given back (they are dropped here, and compiled again
/// when the query runs). A budget spent while reading says Tasks, so that running the query
/// says why it stopped rather than a DQL error.
fn reads_as_tasks(text: &str, today: chrono::NaiveDate) -> bool {
    let budget = crate::notes::cancel::budget();
    let before = budget.bytes_used();
    let parsed = tasks::query::parse_query(text, today, &budget);
    budget.release(budget.bytes_used().saturating_sub(before));
    match parsed {
        Ok(_) => true,
        Err(e) => e.spent().is_some(),
    }
}

/// The text of a query and where it comes from: the call, or a note's block.
fn query_text(
    engine: &Engine,
    source: &Requested,
) -> Result<(String, Language, String, Option<VaultPath>), NoteError> {
    match source {
        Requested::Text(q, lang) => {
            let lang = lang.unwrap_or_else(|| language_of(q, crate::notes::cancel::now().date()));
            Ok((q.clone(), lang, "query".to_owned(), None))
        }
        Requested::Block(name, n) => {
            let path = super::locate::locate(engine, &name.input, name.path.clone())?;
            let data = engine.vault().read_file(&path)?;
            let note = String::from_utf8_lossy(&data.bytes);
            let blocks = markdown::code_blocks(&note, &["dataview", "dataviewjs", "tasks"]);
            if blocks.is_empty() {
                return Err(NoteError::invalid(
                    "path",
                    format!("{path} has no ```dataview or ```tasks code block"),
                ));
            }
            let count = blocks.len();
            let block = blocks.into_iter().nth(n.wrapping_sub(1)).ok_or_else(|| {
                NoteError::invalid("block", format!(
                    "{path} has {count} ```dataview/```tasks block(s); `block` must be 1 to that"
                ))
            })?;
            let at = format!("{path}, block {n}");
            let lang = match block.language.as_str() {
                "tasks" => Language::Tasks,
                "dataview" => Language::Dataview,
                _ => {
                    return Err(NoteError::invalid(
                        "block",
                        format!(
                            "{at}: a dataviewjs block is JavaScript, which capvault never runs"
                        ),
                    ));
                }
            };
            Ok((block.body, lang, at, Some(path)))
        }
    }
}

/// Runs a query and returns one page of its answer.
pub fn run_query(engine: &Engine, req: QueryRequest) -> Result<QueryReply, NoteError> {
    let (text, lang, at, path) = query_text(engine, &req.source)?;
    let param = if path.is_some() { "path" } else { "query" };
    let limit = check_limit(req.limit, DEFAULT_ROWS, MAX_ROWS)?;
    let today = crate::notes::cancel::now().date();
    let key = fingerprint(&(&text, lang, path.as_ref().map(VaultPath::as_str), today));
    let start = decode_offset(req.cursor.as_deref(), key)?;
    match lang {
        Language::Dataview => {
            let vault = engine.vault();
            let parsed =
                query::parse_query(&text).map_err(|e| query_error(e.into(), &at, param))?;
            let model = engine.model()?;
            let read = |p: &VaultPath| note_text(vault, p);
            let budget = crate::notes::cancel::budget();
            let mut pages = ModelPages::new(&model).charging(budget.clone());
            if needs_text(&text) {
                pages = pages.reading(&read);
            }
            let mut ctx = Context::new(crate::notes::cancel::now());
            ctx.settings = crate::notes::settings::dataview_settings(vault);
            ctx.this = path.as_ref().and_then(|p| pages.id(p));
            ctx.budget = budget;
            let result: QueryResult =
                query::run(&parsed, &pages, &ctx).map_err(|e| query_error(e.into(), &at, param))?;
            let provenance = provenance_of(engine, &model, &pages, &result.sources);
            let mut reply = page(result, start, limit, key, &ctx.settings, path)?;
            reply.provenance = provenance;
            Ok(reply)
        }
        Language::Tasks => run_tasks(engine, &text, &at, path, today, (start, limit, key)),
    }
}

crate::model::memo_key!(
    /// Every task of one state of the model as the Tasks evaluator reads it, in
    /// [`Model::tasks`] order.
    TaskRecords: Vec<TaskRecord>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Change;
    use crate::model::dataview::NoteData;
    use crate::obsidian::dataview::query::eval::Ev;
    use crate::vault::FileMeta;

    const TEXT: &str = "---\nTitle: Yes\nrating: 4\nTags2: [x]\nBasic Field: front\n---\n\
                        Basic Field:: one\n**Bold Field**:: two\n- item [Basic Field:: three]\n\
                        - [ ] task [Basic Field:: not me] [due:: 2024-05-01]\n\nbasic-field:: four\n\
                        Été Clé:: accent\nrating:: 5\n";

    /// The model's one-field lookup finds what the whole page (parsed again from its text)
    /// gives, for raw keys, sanitised keys, repeated keys and missing ones.
    #[test]
    fn a_field_from_the_model_equals_the_field_of_the_whole_page() {
        let mut model = Model::default();
        model.apply(vec![note_change("a.md", TEXT)]);
        let fast = ModelPages::new(&model);
        let read = |_: &VaultPath| Some(TEXT.to_owned());
        let whole = ModelPages::new(&model).reading(&read);
        let ctx = Context::new(crate::obsidian::bases::eval::local_now());
        let (ev_fast, ev_whole) = (Ev::new(&fast, &ctx), Ev::new(&whole, &ctx));
        let mut names: Vec<String> = whole
            .note(0)
            .unwrap()
            .page_fields()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        names.extend(
            [
                "Basic Field",
                "basic-field",
                "bold-field",
                "Bold Field",
                "title",
                "Title",
                "rating",
                "été-clé",
                "due",
                "nothing",
                "",
            ]
            .map(str::to_owned),
        );
        assert!(fast.page_field(0, "rating").is_some(), "no fast path");
        for name in &names {
            assert_eq!(
                ev_fast.page_field(0, name),
                ev_whole.page_field(0, name),
                "{name}"
            );
        }
        assert_eq!(
            ev_fast.page_field(0, "rating"),
            Some(Value::List(vec![Value::Number(4.0), Value::Number(5.0)]))
        );
    }
    fn note_change(path: &str, text: &str) -> Change {
        let parsed = markdown::parse_note(text);
        let data = NoteData::extract(text, &parsed);
        let meta = FileMeta {
            size: text.len() as u64,
            modified: std::time::SystemTime::UNIX_EPOCH,
            ino: 1,
            nlink: 1,
            created: None,
        };
        Change::Note(VaultPath::parse(path).unwrap(), meta, parsed, data)
    }

    /// A field no frontmatter holds is read from the inline fields alone: the model's key
    /// counts must follow every edit, or a property added, renamed or removed later would be
    /// missed (or kept) by queries.
    /// The pages a query reads are charged to its budget before they are built, read from the
    /// model or parsed again from the text: past the budget the query stops with its bytes,
    /// never answering from pages left out.
    #[test]
    fn pages_are_charged_to_the_querys_budget_before_they_are_built() {
        use crate::obsidian::budget::{Budget, Spent};
        let text: String = (0..200)
            .map(|i| format!("- [ ] task {i} with some words [due:: 2024-05-01]\n- item {i}\n"))
            .collect();
        let mut model = Model::default();
        model.apply(
            (0..50)
                .map(|i| note_change(&format!("n{i:02}.md"), &text))
                .collect(),
        );
        let read = |_: &VaultPath| Some(text.clone());
        for (query, reading) in [("TASK", false), ("LIST length(file.lists)", true)] {
            let parsed = query::parse_query(query).unwrap();
            let small = std::sync::Arc::new(Budget::new().max_bytes(256 << 10));
            let mut pages = ModelPages::new(&model).charging(small.clone());
            if reading {
                pages = pages.reading(&read);
            }
            let mut ctx = Context::new(crate::obsidian::bases::eval::local_now());
            ctx.budget = small.clone();
            let e = query::run(&parsed, &pages, &ctx)
                .err()
                .unwrap_or_else(|| panic!("{query}"));
            assert!(matches!(e.spent, Some(Spent::Bytes(_))), "{query}: {e}");
            // With room, the same query answers, and its pages were charged.
            let room = std::sync::Arc::new(Budget::new());
            let mut pages = ModelPages::new(&model).charging(room.clone());
            if reading {
                pages = pages.reading(&read);
            }
            ctx.budget = room.clone();
            let r = query::run(&parsed, &pages, &ctx).unwrap();
            assert_eq!(r.count, if reading { 50 } else { 50 * 200 }, "{query}");
            assert!(
                pages.kept_bytes() > 50 * text.len() as u64,
                "{query}: charged {}",
                pages.kept_bytes()
            );
        }
    }

    #[test]
    fn frontmatter_fields_are_found_after_the_notes_holding_them_change() {
        let mut model = Model::default();
        model.apply(vec![
            note_change("a.md", "---\nDue Date: 2024-01-02\n---\nrating:: 3\n"),
            note_change("b.md", "---\nplain: y\n---\n"),
            note_change("c.md", "---\nplain: z\nDue Date: keep\n---\n"),
        ]);
        let field = |model: &Model, page: &str, name: &str| {
            let pages = ModelPages::new(model);
            let ctx = Context::new(crate::obsidian::bases::eval::local_now());
            let id = pages.id(&VaultPath::parse(page).unwrap()).unwrap();
            Ev::new(&pages, &ctx).page_field(id, name)
        };
        assert_eq!(model.property_keys().get("Due Date"), Some(&2));
        assert!(field(&model, "a.md", "due-date").is_some());
        assert_eq!(field(&model, "a.md", "rating"), Some(Value::Number(3.0)));
        assert_eq!(field(&model, "b.md", "due-date"), None);
        // The key leaves a.md, then reaches b.md under another casing.
        model.apply(vec![note_change("a.md", "rating:: 3\n")]);
        assert_eq!(model.property_keys().get("Due Date"), Some(&1));
        assert_eq!(field(&model, "a.md", "due-date"), None);
        model.apply(vec![note_change(
            "b.md",
            "---\nDUE date: 2025-05-05\n---\n",
        )]);
        assert!(field(&model, "b.md", "due-date").is_some());
        assert!(field(&model, "b.md", "DUE date").is_some());
        // The last note holding a key is removed: the key goes with it.
        model.apply(vec![Change::Removed(VaultPath::parse("c.md").unwrap())]);
        assert_eq!(model.property_keys().get("Due Date"), None);
        assert_eq!(model.property_keys().get("plain"), None);
        assert_eq!(model.property_keys().get("DUE date"), Some(&1));
    }

    #[test]
    fn pages_of_sorted_paths_are_found_as_one_by_one() {
        let mut model = Model::default();
        let names: Vec<String> = (0..300).map(|i| format!("n{i:04}.md")).collect();
        model.apply(names.iter().map(|n| note_change(n, "x\n")).collect());
        let pages = ModelPages::new(&model);
        for step in [1, 2, 3, 7, 50, 299] {
            let mut wanted: Vec<VaultPath> = names
                .iter()
                .step_by(step)
                .map(|n| VaultPath::parse(n).unwrap())
                .collect();
            // Paths the vault does not have, between and after the others.
            wanted.push(VaultPath::parse("n0150x.md").unwrap());
            wanted.push(VaultPath::parse("zzz.md").unwrap());
            wanted.sort();
            let one_by_one: Vec<PageId> = wanted.iter().filter_map(|p| pages.id(p)).collect();
            assert_eq!(
                pages.ids_of_sorted(wanted.iter()),
                one_by_one,
                "step {step}"
            );
        }
    }
}

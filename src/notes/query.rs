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

/// Reads a note's text as it is now.
pub type ReadText<'a> = dyn Fn(&VaultPath) -> Option<String> + 'a;

/// The vault model as the DQL evaluator sees it: pages are the model's notes, in path order.
pub struct ModelPages<'m> {
    model: &'m Model,
    notes: Vec<(&'m VaultPath, &'m Note)>,
    /// Each page's Dataview data, built from the model's on first use (boxed: a query touches
    /// few of the pages, and the empty cells of a large vault are made on every query).
    data: Vec<OnceCell<Option<Box<DataviewNote>>>>,
    /// Each page's frontmatter as one JSON object, built on first use.
    frontmatter: Vec<OnceCell<Option<Box<Json>>>>,
    /// The model's inline fields and tasks of each page, aligned with `notes` on first use (one
    /// walk of two path-ordered maps, instead of a tree search per field read).
    fields: OnceCell<Vec<Option<&'m crate::model::dataview::NoteData>>>,
    /// Field reads before `fields` was made.
    field_reads: std::cell::Cell<usize>,
    /// Field names read, each with whether any note's frontmatter may hold it (a key that is
    /// the name, or whose sanitised form is): a field no frontmatter holds is read from the
    /// inline fields alone, without reaching each page's properties.
    in_frontmatter: std::cell::RefCell<Vec<(Box<str>, bool)>>,
    /// Reads a note's text, for queries that need what the model does not keep (list items
    /// that are not tasks); `None` builds pages from the model alone.
    read: Option<&'m ReadText<'m>>,
}

impl<'m> ModelPages<'m> {
    /// The pages of `model`.
    pub fn new(model: &'m Model) -> ModelPages<'m> {
        let notes: Vec<_> = model.notes().iter().collect();
        let n = notes.len();
        ModelPages {
            model,
            notes,
            data: (0..n).map(|_| OnceCell::new()).collect(),
            frontmatter: (0..n).map(|_| OnceCell::new()).collect(),
            fields: OnceCell::new(),
            field_reads: std::cell::Cell::new(0),
            in_frontmatter: std::cell::RefCell::new(Vec::new()),
            read: None,
        }
    }

    /// Pages whose Dataview data is parsed from the note's text as `read` gives it (every list
    /// item, not only the tasks), falling back to the model's when it gives nothing.
    pub fn reading(mut self, read: &'m ReadText<'m>) -> ModelPages<'m> {
        self.read = Some(read);
        self
    }

    /// The page of a note.
    pub fn id(&self, path: &VaultPath) -> Option<PageId> {
        self.notes.binary_search_by(|(p, _)| (*p).cmp(path)).ok()
    }

    /// The pages of `paths`, given in path order: each found by a search that starts where the
    /// last one ended and doubles its step (a tag on half the vault costs a few comparisons per
    /// note, where a search from the start costs 17 reads of scattered paths).
    fn ids_of_sorted<'a>(&self, paths: impl Iterator<Item = &'a VaultPath>) -> Vec<PageId> {
        let mut out = Vec::new();
        let mut lo = 0;
        for path in paths {
            let rest = self.notes.get(lo..).unwrap_or_default();
            // A dense tag's next page is usually the next note or the one after: the same
            // path object, found without reading a path.
            if let Some(i) = rest.iter().take(2).position(|(p, _)| *p == path) {
                out.push(lo + i);
                lo += i + 1;
                continue;
            }
            let mut bound = 1;
            while bound < rest.len() && rest[bound].0 < path {
                bound *= 2;
            }
            let start = bound / 2;
            let window = rest
                .get(start..(bound + 1).min(rest.len()))
                .unwrap_or_default();
            match window.binary_search_by(|(p, _)| (*p).cmp(path)) {
                Ok(i) => {
                    out.push(lo + start + i);
                    lo += start + i + 1;
                }
                Err(i) => lo += start + i,
            }
        }
        out
    }

    /// The model's inline fields of page `p`: by a tree search on its path for the first reads,
    /// then, once a query has read as many as a search costs comparisons for the whole vault
    /// (one in 16 pages), from the pages' alignment with the model's data (one walk of both
    /// maps, made then). A query over a few pages never pays for the walk; one over half the
    /// vault stops paying a search per read.
    fn inline_fields(&self, p: PageId) -> &'m [crate::model::dataview::Field] {
        if self.fields.get().is_none() {
            let reads = self.field_reads.get() + 1;
            self.field_reads.set(reads);
            if reads < self.notes.len() / 16 {
                return self
                    .notes
                    .get(p)
                    .map_or(&[], |(path, _)| self.model.inline_fields(path));
            }
        }
        let aligned = self.fields.get_or_init(|| {
            // Both sequences are in path order, and the model's maps share their keys, so a
            // page and its data are usually the same path object (compared without reading it).
            let mut data = self.model.dataview().iter().peekable();
            self.notes
                .iter()
                .map(|(path, _)| {
                    while let Some((k, d)) = data.peek() {
                        if *k == *path {
                            return Some(*d);
                        }
                        if *k > *path {
                            return None;
                        }
                        data.next();
                    }
                    None
                })
                .collect()
        });
        aligned.get(p).copied().flatten().map_or(&[], |d| &d.fields)
    }

    /// Whether some note's frontmatter may hold field `name` (asked of the model's key counts
    /// once per name and query).
    fn in_frontmatter(&self, name: &str) -> bool {
        let mut known = self.in_frontmatter.borrow_mut();
        if let Some((_, held)) = known.iter().find(|(n, _)| **n == *name) {
            return *held;
        }
        let keys = self.model.property_keys();
        let held = keys.contains_key(name)
            || keys
                .keys()
                .any(|k| crate::obsidian::dataview::canonical_is(k, name));
        known.push((name.into(), held));
        held
    }

    /// One page field read from the model, as [`DvSource::page_field`] answers it.
    fn read_page_field(&self, p: PageId, name: &str) -> Option<Option<Value>> {
        self.notes.get(p)?;
        let props = if self.in_frontmatter(name) {
            self.props(p)
        } else {
            None
        };
        let fields = self.inline_fields(p);
        // As the evaluator reads a page's fields: the raw key first (frontmatter, then inline
        // fields), else every key whose sanitised form is the name.
        let mut found: Vec<Value> = Vec::new();
        let direct = props.and_then(|props| props.get(name));
        let mut inline = fields.iter().filter(|f| f.key() == name);
        // The common case, one frontmatter value and no inline field of that key: no list.
        if let Some(v) = direct
            && inline.clone().next().is_none()
        {
            return Some(Some(from_frontmatter(v)));
        }
        if let Some(v) = direct {
            found.push(from_frontmatter(v));
        }
        found.extend(inline.by_ref().map(|f| f.value()));
        if found.is_empty() {
            // A plain key is its own sanitised form: when every key is plain, the lookup by
            // the raw key has already found all there is (no scan of every key of every page
            // that lacks the field).
            if let Some(props) = props.filter(|props| !props.keys_are_plain()) {
                found.extend(
                    props
                        .iter()
                        .filter(|(k, _)| crate::obsidian::dataview::canonical_is(k, name))
                        .map(|(_, v)| from_frontmatter(v)),
                );
            }
            found.extend(
                fields
                    .iter()
                    .filter(|f| crate::obsidian::dataview::canonical_is(f.key(), name))
                    .map(|f| f.value()),
            );
        }
        Some(match found.len() {
            0 => None,
            1 => found.pop(),
            _ => Some(Value::List(found)),
        })
    }

    fn props(&self, p: PageId) -> Option<&'m markdown::Properties> {
        self.notes.get(p)?.1.parsed.frontmatter.properties()
    }

    fn build(&self, p: PageId) -> Option<DataviewNote> {
        let (path, note) = self.notes.get(p)?;
        if let Some(text) = self.read.and_then(|read| read(path)) {
            return Some(crate::obsidian::dataview::parse_note(&text));
        }
        // The body's links by line, for the tasks' outlinks.
        let links: Vec<&markdown::Link> = note
            .parsed
            .links
            .iter()
            .filter(|l| l.kind != LinkKind::Frontmatter)
            .collect();
        let frontmatter: Vec<(String, Value)> = self
            .props(p)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| (k.to_owned(), from_frontmatter(v)))
                    .collect()
            })
            .unwrap_or_default();
        let data = self.model.note_dataview(path);
        let fields = data
            .map(|d| d.fields.iter().map(|f| f.to_inline()).collect())
            .unwrap_or_default();
        let mut items: Vec<ListItem> = data
            .map(|d| {
                d.tasks
                    .iter()
                    .map(|t| ListItem {
                        line: t.line as usize,
                        line_count: t.line_count as usize,
                        text: t.text.to_string(),
                        section: t.section.as_deref().map(str::to_owned),
                        tags: t.tags.iter().map(|s| s.to_string()).collect(),
                        outlinks: links_on(&links, t.line, t.line_count),
                        parent: t.parent.map(|l| l as usize),
                        children: Vec::new(),
                        task: Some(TaskState {
                            status: t.status,
                            checked: t.status != ' ',
                            completed: matches!(t.status, 'x' | 'X'),
                            fully_completed: t.fully_completed,
                        }),
                        block_id: None,
                        fields: t.fields.iter().map(|f| f.to_inline()).collect(),
                        tasks: Some(t.tasks.clone()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Children from parents, among the tasks kept (items are in line order).
        let lines: Vec<usize> = items.iter().map(|i| i.line).collect();
        for i in 0..items.len() {
            if let Some(at) = items[i].parent.and_then(|p| lines.binary_search(&p).ok()) {
                let line = items[i].line;
                items[at].children.push(line);
            }
        }
        Some(DataviewNote {
            frontmatter,
            fields,
            items,
            omitted: 0,
        })
    }
}

/// Whether a query may ask for list items other than tasks, which only the notes' text holds
/// (it names `lists`: `file.lists`, `L.lists`...).
fn needs_text(query: &str) -> bool {
    query.contains("lists")
}

/// A note's text as it is now (invalid UTF-8 replaced), or `None` when it cannot be read.
fn note_text(vault: &Vault, p: &VaultPath) -> Option<String> {
    let bytes = vault.read_file(p).ok()?.bytes;
    Some(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// The links on 0-based lines `line..line + count` (`links` in text order).
fn links_on(links: &[&markdown::Link], line: u32, count: u32) -> Vec<Link> {
    let (first, end) = (
        line.saturating_add(1),
        line.saturating_add(1).saturating_add(count),
    );
    let start = links.partition_point(|l| l.pos.line < first);
    links[start..]
        .iter()
        .take_while(|l| l.pos.line < end)
        .map(|l| crate::obsidian::dataview::link_of(l))
        .collect()
}

fn local(t: std::time::SystemTime) -> NaiveDateTime {
    chrono::DateTime::<chrono::Local>::from(t).naive_local()
}

impl DvSource for ModelPages<'_> {
    fn pages(&self) -> Vec<PageId> {
        (0..self.notes.len()).collect()
    }

    fn pages_in_path_order(&self) -> bool {
        // `notes` is taken from the model's map, which is ordered by path.
        true
    }

    fn path(&self, p: PageId) -> &str {
        self.notes.get(p).map_or("", |(path, _)| path.as_str())
    }

    fn size(&self, p: PageId) -> u64 {
        self.notes.get(p).map_or(0, |(_, n)| n.meta.size)
    }

    fn mtime(&self, p: PageId) -> Option<NaiveDateTime> {
        Some(local(self.notes.get(p)?.1.meta.modified))
    }

    fn ctime(&self, p: PageId) -> Option<NaiveDateTime> {
        let meta = &self.notes.get(p)?.1.meta;
        // Where the file system keeps no birth time, the modification time stands in.
        Some(local(meta.created.unwrap_or(meta.modified)))
    }

    fn frontmatter(&self, p: PageId) -> Option<&Json> {
        self.frontmatter
            .get(p)?
            .get_or_init(|| {
                self.props(p).map(|props| {
                    Box::new(Json::Object(
                        props
                            .iter()
                            .map(|(k, v)| (k.to_owned(), v.clone()))
                            .collect::<Map<String, Json>>(),
                    ))
                })
            })
            .as_deref()
    }

    fn note(&self, p: PageId) -> Option<&DataviewNote> {
        self.data
            .get(p)?
            .get_or_init(|| self.build(p).map(Box::new))
            .as_deref()
    }

    fn tags(&self, p: PageId) -> Vec<String> {
        let Some((_, note)) = self.notes.get(p) else {
            return Vec::new();
        };
        let mut seen = HashSet::new();
        note.parsed
            .tags
            .iter()
            .filter(|t| seen.insert(markdown::normalize_tag(&t.name)))
            .map(|t| format!("#{}", t.name))
            .collect()
    }

    fn outlinks(&self, p: PageId) -> Vec<Link> {
        let Some((_, note)) = self.notes.get(p) else {
            return Vec::new();
        };
        note.parsed
            .links
            .iter()
            .map(|l| Link {
                path: l.target().to_owned(),
                subpath: l.subpath().map(|s| match s {
                    markdown::Subpath::Heading(parts) => {
                        Subpath::Heading(parts.last().map(|h| h.to_string()).unwrap_or_default())
                    }
                    markdown::Subpath::Block(id) => Subpath::Block(id.to_string()),
                }),
                display: l.display().map(str::to_owned),
                embed: l.kind == LinkKind::Embed,
            })
            .collect()
    }

    fn pages_with_tag(&self, tag: &str) -> Option<Vec<PageId>> {
        // The model's tag index: the tag, and every tag nested under it.
        let want = markdown::normalize_tag(tag);
        if want.is_empty() {
            return None;
        }
        let mut ids: Vec<PageId> = self
            .model
            .tags()
            .range(want.clone()..)
            .take_while(|(t, _)| t.starts_with(&want))
            .filter(|(t, _)| markdown::tag_matches_normalized(t, &want))
            .flat_map(|(_, notes)| self.ids_of_sorted(notes.iter()))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Some(ids)
    }

    fn page_field(&self, p: PageId, name: &str) -> Option<Option<Value>> {
        // Pages read from the text again hold what the model does not: ask them.
        if self.read.is_some() {
            return None;
        }
        self.read_page_field(p, name)
    }

    fn resolve(&self, target: &str, from: Option<PageId>) -> Option<PageId> {
        let from = from.and_then(|f| self.notes.get(f)).map(|(p, _)| *p);
        match self.model.resolve(target, from) {
            Resolution::Found { path, .. } => self.id(&path),
            Resolution::NotFound => None,
        }
    }

    fn inlinks(&self, p: PageId) -> Vec<PageId> {
        let Some((path, _)) = self.notes.get(p) else {
            return Vec::new();
        };
        self.model
            .backlinks(path)
            .filter_map(|b| self.id(b))
            .collect()
    }
}

/// A value as JSON: dates as ISO text, durations as their text, links as `[[path]]` objects.
pub fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number),
        Value::Text(s) => Json::String(s.clone()),
        Value::Date(d) => Json::String(date_text(d)),
        Value::Duration(d) => Json::String(query::render::duration_text(d)),
        Value::Link(l) => {
            let mut o = Map::new();
            o.insert("link".into(), Json::String(query::render::link_markdown(l)));
            o.insert("path".into(), Json::String(l.path.clone()));
            if let Some(d) = &l.display {
                o.insert("display".into(), Json::String(d.clone()));
            }
            Json::Object(o)
        }
        Value::List(items) => Json::Array(items.iter().map(value_json).collect()),
        Value::Object(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), value_json(v)))
                .collect(),
        ),
    }
}

fn date_text(d: &DvDate) -> String {
    query::render::format_date(
        d,
        if d.date.time {
            "yyyy-MM-dd'T'HH:mm:ss"
        } else {
            "yyyy-MM-dd"
        },
    )
}

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
                    return Err(NoteError::InvalidArgument(
                        "`block` goes with `path` (a note holding ```dataview or ```tasks blocks)"
                            .into(),
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
                return Err(NoteError::InvalidArgument(
                    "`language` goes with `query`: a block's fence says its language".into(),
                ));
            }
            (None, Some(p)) => {
                Requested::Block(super::locate::Named::parse(p)?, args.block.unwrap_or(1))
            }
            (Some(_), Some(_)) => {
                return Err(NoteError::InvalidArgument(
                    "give either `query` or `path`, not both".into(),
                ));
            }
            (None, None) => {
                return Err(NoteError::InvalidArgument(
                    "give `query` (DQL or a Tasks query) or `path` (a note with a ```dataview or ```tasks block)"
                        .into(),
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

fn query_error(e: QueryError, at: &str) -> NoteError {
    if super::cancel::requested() {
        return super::cancel::cancelled();
    }
    match e {
        QueryError::Eval(e) if e.fatal() => {
            NoteError::spent(e.spent.unwrap_or(Spent::Cancelled), format!("{at}: {e}"))
        }
        other => NoteError::InvalidArgument(format!("{at}: {other}")),
    }
}

fn task_json(t: &TaskRow) -> Json {
    let mut o = Map::new();
    o.insert("path".into(), json!(t.path));
    o.insert("line".into(), json!(t.line + 1));
    o.insert("text".into(), json!(t.text));
    if let Some(s) = t.status {
        o.insert("status".into(), json!(s.to_string()));
    }
    if !t.children.is_empty() {
        o.insert(
            "children".into(),
            Json::Array(t.children.iter().map(task_json).collect()),
        );
    }
    Json::Object(o)
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
    let budget = super::cancel::budget();
    let before = budget.bytes_used();
    let parsed = tasks::query::parse_query(text, today, &budget);
    budget.release(budget.bytes_used().saturating_sub(before));
    match parsed {
        Ok(_) => true,
        Err(e) => e.spent().is_some(),
    }
}

/// The error of a Tasks query: the request's budget spent (`budget_exceeded`, `busy`,
/// cancelled), or the query's own fault.
fn tasks_error(e: tasks::EvalError, at: &str) -> NoteError {
    match e.spent() {
        Some(spent) => NoteError::spent(spent, format!("{at}: {e}")),
        None => NoteError::InvalidArgument(format!("{at}: {e}")),
    }
}

/// The text of a query and where it comes from: the call, or a note's block.
fn query_text(
    engine: &Engine,
    source: &Requested,
) -> Result<(String, Language, String, Option<VaultPath>), NoteError> {
    match source {
        Requested::Text(q, lang) => {
            let lang = lang.unwrap_or_else(|| language_of(q, super::cancel::now().date()));
            Ok((q.clone(), lang, "query".to_owned(), None))
        }
        Requested::Block(name, n) => {
            let path = super::locate::locate(engine, &name.input, name.path.clone())?;
            let data = engine.vault().read_file(&path)?;
            let note = String::from_utf8_lossy(&data.bytes);
            let blocks = markdown::code_blocks(&note, &["dataview", "dataviewjs", "tasks"]);
            if blocks.is_empty() {
                return Err(NoteError::InvalidArgument(format!(
                    "{path} has no ```dataview or ```tasks code block"
                )));
            }
            let count = blocks.len();
            let block = blocks.into_iter().nth(n.wrapping_sub(1)).ok_or_else(|| {
                NoteError::InvalidArgument(format!(
                    "{path} has {count} ```dataview/```tasks block(s); `block` must be 1 to that"
                ))
            })?;
            let at = format!("{path}, block {n}");
            let lang = match block.language.as_str() {
                "tasks" => Language::Tasks,
                "dataview" => Language::Dataview,
                _ => {
                    return Err(NoteError::InvalidArgument(format!(
                        "{at}: a dataviewjs block is JavaScript, which capvault never runs"
                    )));
                }
            };
            Ok((block.body, lang, at, Some(path)))
        }
    }
}

/// Runs a query and returns one page of its answer.
pub fn run_query(engine: &Engine, req: QueryRequest) -> Result<QueryReply, NoteError> {
    let (text, lang, at, path) = query_text(engine, &req.source)?;
    let limit = check_limit(req.limit, DEFAULT_ROWS, MAX_ROWS)?;
    let today = super::cancel::now().date();
    let key = fingerprint(&(&text, lang, path.as_ref().map(VaultPath::as_str), today));
    let start = decode_offset(req.cursor.as_deref(), key)?;
    match lang {
        Language::Dataview => {
            let vault = engine.vault();
            let parsed = query::parse_query(&text).map_err(|e| query_error(e.into(), &at))?;
            let model = engine.model()?;
            let read = |p: &VaultPath| note_text(vault, p);
            let mut pages = ModelPages::new(&model);
            if needs_text(&text) {
                pages = pages.reading(&read);
            }
            let mut ctx = Context::new(super::cancel::now());
            ctx.settings = super::settings::dataview_settings(vault);
            ctx.this = path.as_ref().and_then(|p| pages.id(p));
            ctx.budget = super::cancel::budget();
            let result: QueryResult =
                query::run(&parsed, &pages, &ctx).map_err(|e| query_error(e.into(), &at))?;
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

/// One Tasks query over every task of the vault.
fn run_tasks(
    engine: &Engine,
    text: &str,
    at: &str,
    path: Option<VaultPath>,
    today: chrono::NaiveDate,
    (start, limit, key): (usize, usize, u64),
) -> Result<QueryReply, NoteError> {
    let settings = super::settings::tasks_settings(engine.vault());
    let rules = super::tasks::TaskRules::new(&settings);
    let model = engine.model()?;
    let budget = super::cancel::budget();
    let spent = |s: Spent| tasks_error(s.into(), at);
    budget
        .alloc_n(model.tasks().count(), size_of::<(&VaultPath, &Task)>())
        .map_err(spent)?;
    let kept: Vec<(&VaultPath, &Task)> = model.tasks().collect();
    // Built once per state of the model: a query reads every task.
    let records = model.memo::<TaskRecords>(|| {
        kept.iter()
            .map(|(p, t)| TaskRecord {
                path: p.to_string(),
                heading: t.section.as_deref().map(str::to_owned),
                line: t.line as usize,
                status: t.status,
                fields: t.tasks.clone(),
                tags: t.tags.iter().map(|s| s.to_string()).collect(),
                is_sub_item: t.parent.is_some(),
            })
            .collect()
    });
    let records: &[TaskRecord] = &records;
    let (query, result) = tasks::run_source(text, records, &settings, today, &budget)
        .map_err(|e| tasks_error(e, at))?;
    // Paged by task (a query without `group by` is one group of every task), each page's
    // tasks under their groups' headings.
    let count = result.groups.iter().map(|g| g.tasks.len()).sum();
    budget
        .alloc_n(count, size_of::<(usize, usize)>())
        .map_err(spent)?;
    let pairs: Vec<(usize, usize)> = result
        .groups
        .iter()
        .enumerate()
        .flat_map(|(g, group)| group.tasks.iter().map(move |&t| (g, t)))
        .collect();
    let total = pairs.len();
    let mut rows: Vec<Json> = Vec::new();
    let mut groups: Vec<tasks::eval::ResultGroup> = Vec::new();
    let mut last = None;
    let mut bytes = 0;
    let mut end = start;
    for &(g, i) in pairs.iter().skip(start).take(limit) {
        let Some((p, t)) = kept.get(i) else { continue };
        let item = serde_json::to_value(super::tasks::task_item(p, t, today, &rules))
            .unwrap_or(Json::Null);
        let n = serde_json::to_string(&item).map_or(0, |s| s.len());
        if end > start && bytes + n > MAX_REPLY_BYTES {
            break;
        }
        bytes += n;
        end += 1;
        let names = result
            .groups
            .get(g)
            .map(|x| x.names.clone())
            .unwrap_or_default();
        if last != Some(g) {
            last = Some(g);
            rows.push(json!({"group": names, "tasks": []}));
            groups.push(tasks::eval::ResultGroup {
                names,
                tasks: Vec::new(),
            });
        }
        if let Some(Json::Array(list)) = rows.last_mut().and_then(|r| r.get_mut("tasks")) {
            list.push(item);
        }
        if let Some(group) = groups.last_mut() {
            group.tasks.push(i);
        }
    }
    let shown = tasks::eval::QueryResult {
        groups,
        matched: result.matched,
        shown: end - start,
        explanation: result.explanation.clone(),
    };
    Ok(QueryReply {
        kind: "tasks".to_owned(),
        columns: Vec::new(),
        rows,
        total,
        next_cursor: (end < total).then(|| encode_offset(end, key)),
        markdown: tasks::render_markdown(&shown, records, &query, &settings, today, &budget)
            .map_err(|e| tasks_error(e, at))?,
        path: path.map(|p| p.to_string()),
        warnings: Vec::new(),
        provenance: Default::default(),
    })
}

fn page(
    mut result: QueryResult,
    start: usize,
    limit: usize,
    key: u64,
    settings: &DataviewSettings,
    path: Option<VaultPath>,
) -> Result<QueryReply, NoteError> {
    let total = result.output.len();
    // Only this page's rows are kept; the others are dropped unread.
    result.output.keep(start, limit);
    let mut warnings = std::mem::take(&mut result.warnings);
    // Within the reply bound: the page stops before a row that would pass it; a first row that
    // passes it alone is cut to fit, and the reply says so.
    let mut rows = Vec::new();
    let mut bytes = 0;
    for i in 0..result.output.len() {
        let mut r = result.output.row_json(i);
        let mut n = serde_json::to_string(&r).map_or(0, |s| s.len());
        if rows.is_empty() && n > MAX_REPLY_BYTES / 2 {
            result.output.shrink_row(i, MAX_REPLY_BYTES / 4);
            r = result.output.row_json(i);
            n = serde_json::to_string(&r).map_or(0, |s| s.len());
            warnings.push(format!(
                "row {} was cut to fit the reply's bound of {} KiB: its long texts and lists end \
                 in `…`",
                start + 1,
                MAX_REPLY_BYTES / 1024
            ));
        }
        if !rows.is_empty() && bytes + n > MAX_REPLY_BYTES {
            break;
        }
        bytes += n;
        rows.push(r);
    }
    let shown = rows.len();
    let end = start + shown;
    result.output.keep(0, shown);
    let kind = result.output.kind();
    let columns = match &result.output {
        Output::Table { columns, .. } => columns.clone(),
        _ => Vec::new(),
    };
    // The Markdown of this page only.
    let mut markdown = result.to_markdown(settings);
    if markdown.len() > MAX_REPLY_BYTES {
        let mut at = MAX_REPLY_BYTES;
        while !markdown.is_char_boundary(at) {
            at -= 1;
        }
        markdown.truncate(at);
        markdown.push_str("\n… (cut to the reply's bound)\n");
    }
    Ok(QueryReply {
        kind: kind.to_owned(),
        columns,
        rows,
        total,
        next_cursor: (end < total).then(|| encode_offset(end, key)),
        markdown,
        path: path.map(|p| p.to_string()),
        warnings,
        provenance: Default::default(),
    })
}

/// The rows of a DQL answer as the reply sends them.
trait OutputRows {
    /// `list`, `table`, `task` or `calendar`.
    fn kind(&self) -> &'static str;
    /// Its rows (groups for TASK).
    fn len(&self) -> usize;
    /// Keeps `n` rows from `start`.
    fn keep(&mut self, start: usize, n: usize);
    /// Row `i` as JSON.
    fn row_json(&self, i: usize) -> Json;
    /// Cuts row `i`'s texts and lists so that they hold about `room` bytes in all.
    fn shrink_row(&mut self, i: usize, room: usize);
}

impl OutputRows for Output {
    fn kind(&self) -> &'static str {
        match self {
            Output::List { .. } => "list",
            Output::Table { .. } => "table",
            Output::Task { .. } => "task",
            Output::Calendar { .. } => "calendar",
        }
    }

    fn len(&self) -> usize {
        match self {
            Output::List { rows, .. } => rows.len(),
            Output::Table { rows, .. } => rows.len(),
            Output::Task { groups } => groups.len(),
            Output::Calendar { entries } => entries.len(),
        }
    }

    fn keep(&mut self, start: usize, n: usize) {
        match self {
            Output::List { rows, .. } => keep(rows, start, n),
            Output::Table { rows, .. } => keep(rows, start, n),
            Output::Task { groups } => keep(groups, start, n),
            Output::Calendar { entries } => keep(entries, start, n),
        }
    }

    fn row_json(&self, i: usize) -> Json {
        match self {
            Output::List { rows, .. } => rows.get(i).map_or(Json::Null, |(id, v)| {
                json!({
                    "id": id.as_ref().map(value_json),
                    "value": v.as_ref().map(value_json),
                })
            }),
            Output::Table { rows, .. } => rows.get(i).map_or(Json::Null, |r| {
                Json::Array(r.iter().map(value_json).collect())
            }),
            Output::Task { groups } => groups.get(i).map_or(Json::Null, |(g, tasks)| {
                json!({
                    "group": value_json(g),
                    "tasks": tasks.iter().map(task_json).collect::<Vec<_>>(),
                })
            }),
            Output::Calendar { entries } => entries.get(i).map_or(
                Json::Null,
                |(d, p)| json!({"date": date_text(d), "page": value_json(p)}),
            ),
        }
    }

    fn shrink_row(&mut self, i: usize, room: usize) {
        let mut room = room;
        match self {
            Output::List { rows, .. } => {
                if let Some((id, v)) = rows.get_mut(i) {
                    for v in id.iter_mut().chain(v.iter_mut()) {
                        shrink(v, &mut room);
                    }
                }
            }
            Output::Table { rows, .. } => {
                if let Some(r) = rows.get_mut(i) {
                    for v in r {
                        shrink(v, &mut room);
                    }
                }
            }
            Output::Task { groups } => {
                if let Some((g, tasks)) = groups.get_mut(i) {
                    shrink(g, &mut room);
                    shrink_tasks(tasks, &mut room);
                }
            }
            Output::Calendar { entries } => {
                if let Some((_, p)) = entries.get_mut(i) {
                    shrink(p, &mut room);
                }
            }
        }
    }
}

/// Cuts `text` to at most `room` bytes (at a character boundary), ending it in `…` when cut.
fn cut_text(text: &mut String, room: &mut usize) {
    if text.len() > *room {
        let mut at = *room;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push('…');
    }
    *room = room.saturating_sub(text.len());
}

/// Cuts a value's texts and lists so that together they hold at most about `room` bytes.
fn shrink(v: &mut Value, room: &mut usize) {
    match v {
        Value::Text(t) => cut_text(t, room),
        Value::Link(l) => {
            cut_text(&mut l.path, room);
            if let Some(d) = &mut l.display {
                cut_text(d, room);
            }
        }
        Value::List(items) => {
            let mut kept = 0;
            for item in items.iter_mut() {
                if *room == 0 {
                    break;
                }
                shrink(item, room);
                *room = room.saturating_sub(8);
                kept += 1;
            }
            if kept < items.len() {
                items.truncate(kept);
                items.push(Value::Text("…".to_owned()));
            }
        }
        Value::Object(entries) => {
            let mut kept = 0;
            for (k, item) in entries.iter_mut() {
                if *room == 0 {
                    break;
                }
                cut_text(k, room);
                shrink(item, room);
                kept += 1;
            }
            entries.truncate(kept);
        }
        _ => *room = room.saturating_sub(32),
    }
}

fn shrink_tasks(tasks: &mut Vec<TaskRow>, room: &mut usize) {
    let mut kept = 0;
    for t in tasks.iter_mut() {
        if *room == 0 {
            break;
        }
        cut_text(&mut t.text, room);
        shrink_tasks(&mut t.children, room);
        kept += 1;
    }
    tasks.truncate(kept);
}

/// The provenance of the pages an answer was read from, by path, leaving out the vault's own.
fn provenance_of(
    engine: &Engine,
    model: &Model,
    pages: &ModelPages<'_>,
    ids: &[PageId],
) -> std::collections::BTreeMap<String, Provenance> {
    ids.iter()
        .filter_map(|&p| {
            let path = VaultPath::parse(pages.path(p)).ok()?;
            let kind = engine.provenance(model, &path);
            (!kind.is_own()).then(|| (path.to_string(), kind))
        })
        .collect()
}

fn keep<T>(v: &mut Vec<T>, start: usize, n: usize) {
    v.drain(..start.min(v.len()));
    v.truncate(n);
}

/// Most inline queries evaluated in one note.
pub const MAX_INLINE: usize = 100;

/// One inline query (`` `= expr` ``) of a note and what it evaluates to.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InlineValue {
    /// 1-based line of the query.
    pub line: usize,
    /// The expression, after the prefix.
    pub query: String,
    /// The value as Dataview renders it, when it evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Why it did not (a parse or evaluation error; JavaScript is never run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The notes its value was read from that are not the vault's own (`[[Clip]].field`),
    /// by path: their text is data, not instructions.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(skip)]
    pub provenance: std::collections::BTreeMap<String, Provenance>,
}

/// The inline queries of `text` (the note at `path`) evaluated with `this` bound to the note:
/// the vault's Dataview prefix (`=` by default), at most [`MAX_INLINE`]; inline JavaScript
/// (`$=`) is reported, never run. They share the request's one budget; their values follow
/// the hidden-text `policy` as a note's text does, and together hold at most `max_chars`
/// characters (a value past that is cut, and the ones after it are not shown).
pub fn inline_values(
    engine: &Engine,
    path: &VaultPath,
    text: &str,
    policy: markdown::hidden::Policy,
    max_chars: usize,
) -> Result<Vec<InlineValue>, NoteError> {
    let settings = super::settings::dataview_settings(engine.vault());
    let prefix = settings.inline_query_prefix.clone();
    let js = settings.inline_js_query_prefix.clone();
    let spans: Vec<(usize, String)> = markdown::inline_code(text, 4 * MAX_INLINE)
        .into_iter()
        .filter(|(_, code)| {
            (!prefix.is_empty() && code.starts_with(&prefix))
                || (!js.is_empty() && code.starts_with(&js))
        })
        .take(MAX_INLINE)
        .collect();
    if spans.is_empty() {
        return Ok(Vec::new());
    }
    let model = engine.model()?;
    let read = |p: &VaultPath| note_text(engine.vault(), p);
    let mut pages = ModelPages::new(&model);
    if spans.iter().any(|(_, code)| needs_text(code)) {
        pages = pages.reading(&read);
    }
    let this = pages.id(path);
    // One "now" and one budget for every inline query of the note.
    let now = super::cancel::now();
    let budget = super::cancel::budget();
    let mut out = Vec::with_capacity(spans.len());
    let mut room = max_chars;
    for (line, code) in spans {
        if !js.is_empty() && code.starts_with(&js) {
            out.push(InlineValue {
                line,
                query: code[js.len()..].trim().to_owned(),
                value: None,
                error: Some("inline JavaScript, which capvault never runs".to_owned()),
                provenance: Default::default(),
            });
            continue;
        }
        let expr = code[prefix.len()..].trim().to_owned();
        let mut ctx = Context::new(now);
        ctx.settings = settings.clone();
        ctx.this = this;
        ctx.budget = budget.clone();
        let mut provenance = Default::default();
        let rendered =
            query::evaluate_inline_reading(&expr, this, &pages, &ctx).and_then(|(v, read)| {
                provenance = provenance_of(engine, &model, &pages, &read);
                // Its text is charged before it is written.
                budget
                    .alloc(query::eval::text_bound(&v))
                    .map_err(|s| QueryError::from(query::eval::EvalError::new(s.to_string(), 0)))?;
                Ok(query::render::markdown_value(&v, &settings))
            });
        let (value, error) = match rendered {
            Ok(_) if room == 0 => (
                None,
                Some(format!(
                    "not shown: the inline values before it filled max_chars ({max_chars})"
                )),
            ),
            Ok(v) => (Some(shown_value(&v, policy, &mut room)), None),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(InlineValue {
            line,
            // The query is the note's text too: its hidden text follows the same policy.
            query: shown_value(&expr, policy, &mut { usize::MAX }),
            value,
            error,
            provenance,
        });
    }
    Ok(out)
}

/// An inline value as a client sees it: its hidden text marked, stripped or left as `policy`
/// says (as a note's own text is), cut to the characters left in `room`.
fn shown_value(v: &str, policy: markdown::hidden::Policy, room: &mut usize) -> String {
    let spans = markdown::hidden_spans(v);
    let shown = markdown::hidden::apply(v, 0..v.len(), &spans, policy);
    let count = shown.chars().count();
    if count <= *room {
        *room -= count;
        return shown;
    }
    let mut cut: String = shown.chars().take(*room).collect();
    cut.push_str("… (cut at max_chars)");
    *room = 0;
    cut
}

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

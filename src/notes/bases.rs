//! `query_base` and `list_bases`: Obsidian Bases evaluated over the vault model.
//!
//! [`ModelSource`] gives the pure evaluator ([`crate::obsidian::bases`]) the model's files,
//! properties (typed by `.obsidian/types.json`), tags, resolved links and backlinks. The base
//! comes from a `.base` file, the n-th ```` ```base ```` block of a note, or the call itself.
//! Rows are every visible file of the vault (Obsidian's Excluded files left out unless shown),
//! narrowed first by the model's tag index when the filters require a tag.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use chrono::NaiveDateTime;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value as Json, json};

use super::paging::{decode_offset, encode_offset, fingerprint};
use super::{NoteError, check_limit};
use crate::engine::Engine;
use crate::markdown::{self, LinkKind};
use crate::model::linkres::Resolution;
use crate::model::{Model, Target};
use crate::obsidian::bases::query::{Filter, Summary};
use crate::obsidian::bases::{
    self, Base, BaseError, Cell, FileRef, Property, PropertyType, Source, SourceLink,
};
use crate::obsidian::config::parse_types;
use crate::vault::{ConfigFile, Vault, VaultPath};

/// Rows per page unless `limit` says otherwise.
pub const DEFAULT_ROWS: u32 = 50;
/// Most rows per page.
pub const MAX_ROWS: u32 = 500;
/// Most bytes of rows in one reply; a page stops early (with a cursor) rather than exceed it.
pub const MAX_REPLY_BYTES: usize = 96 * 1024;
/// Longest printed value in a cell, in bytes (longer text is cut, and says so).
pub const MAX_CELL_BYTES: usize = 4 * 1024;

/// The vault model as the Bases evaluator sees it.
pub struct ModelSource<'m> {
    model: &'m Model,
    types: BTreeMap<String, PropertyType>,
    now: NaiveDateTime,
    /// Every note by file id (a row asks for its note many times; a map lookup each time
    /// would cost more than the evaluation).
    notes: Vec<Option<&'m crate::model::Note>>,
    /// The tag tables this query used (see [`ModelSource::tag_members`]), without the model's lock.
    tag_tables: std::sync::RwLock<Vec<(String, Arc<Vec<bool>>)>>,
}

/// The file ids of `model.notes()` (or of `model.files()`), in its order: computed once per
/// state of the model.
fn ids_in_order<'p>(model: &Model, paths: impl Iterator<Item = &'p VaultPath>) -> Vec<u32> {
    paths
        .map(|p| model.file_index().id(p).unwrap_or(u32::MAX))
        .collect()
}

impl<'m> ModelSource<'m> {
    /// The model, with the vault's property types.
    pub fn new(model: &'m Model, vault: &Vault) -> ModelSource<'m> {
        let types = match vault.read_config(ConfigFile::Types) {
            Ok(Some(bytes)) => parse_types(&bytes).unwrap_or_default(),
            _ => BTreeMap::new(),
        };
        ModelSource {
            model,
            types: types
                .iter()
                .filter_map(|(k, t)| PropertyType::from_name(t).map(|t| (k.clone(), t)))
                .collect(),
            now: super::cancel::now(),
            notes: {
                crate::model::memo_key!(NoteIds: Vec<u32>);
                let ids = model.memo::<NoteIds>(|| ids_in_order(model, model.notes().keys()));
                let mut notes = vec![None; model.file_index().id_bound()];
                for (id, note) in ids.iter().zip(model.notes().values()) {
                    if let Some(slot) = notes.get_mut(*id as usize) {
                        *slot = Some(note);
                    }
                }
                notes
            },
            tag_tables: std::sync::RwLock::new(Vec::new()),
        }
    }

    /// Which files (by id) carry the normalised tag `q` or a tag nested under it, from the
    /// model's tag index: computed once per tag and state of the model, so that `hasTag` on
    /// every row is a table lookup.
    fn tag_members(&self, q: &str) -> Arc<Vec<bool>> {
        if let Some((_, bits)) = crate::locks::read(&self.tag_tables)
            .iter()
            .find(|(t, _)| t == q)
        {
            return Arc::clone(bits);
        }
        let bits = self.tag_members_of_model(q);
        let mut mine = crate::locks::write(&self.tag_tables);
        if mine.len() < 64 {
            mine.push((q.to_owned(), Arc::clone(&bits)));
        }
        bits
    }

    fn tag_members_of_model(&self, q: &str) -> Arc<Vec<bool>> {
        crate::model::memo_key!(TagMembers: std::sync::Mutex<std::collections::HashMap<String, Arc<Vec<bool>>>>);
        let table = self.model.memo::<TagMembers>(|| {
            std::sync::Mutex::new(std::collections::HashMap::<String, Arc<Vec<bool>>>::new())
        });
        let mut table = crate::locks::lock(&table);
        if let Some(bits) = table.get(q) {
            return Arc::clone(bits);
        }
        let mut bits = vec![false; self.model.file_index().id_bound()];
        let nested = format!("{q}/");
        for (tag, paths) in self.model.tags().range(q.to_owned()..) {
            if tag != q && !tag.starts_with(&nested) {
                break;
            }
            for p in paths {
                if let Some(slot) = self.id(p).and_then(|id| bits.get_mut(id.0 as usize)) {
                    *slot = true;
                }
            }
        }
        // A few hundred distinct tags at most are kept per state of the model.
        if table.len() >= 256 {
            table.clear();
        }
        let bits = Arc::new(bits);
        table.insert(q.to_owned(), Arc::clone(&bits));
        bits
    }

    fn vault_path(&self, f: FileRef) -> Option<&'m VaultPath> {
        self.model.file_index().path(f.0)
    }

    fn id(&self, p: &VaultPath) -> Option<FileRef> {
        self.model.file_index().id(p).map(FileRef)
    }

    fn note(&self, f: FileRef) -> Option<&'m crate::model::Note> {
        self.notes.get(f.0 as usize).copied().flatten()
    }

    fn props(&self, f: FileRef) -> Option<&'m markdown::Properties> {
        self.note(f)?.parsed.frontmatter.properties()
    }
}

fn local(t: std::time::SystemTime) -> NaiveDateTime {
    chrono::DateTime::<chrono::Local>::from(t).naive_local()
}

impl Source for ModelSource<'_> {
    fn path(&self, f: FileRef) -> &str {
        self.vault_path(f).map_or("", VaultPath::as_str)
    }

    fn size(&self, f: FileRef) -> u64 {
        self.vault_path(f)
            .and_then(|p| self.model.files().get(p))
            .map_or(0, |m| m.size)
    }

    fn mtime(&self, f: FileRef) -> Option<NaiveDateTime> {
        let meta = self.model.files().get(self.vault_path(f)?)?;
        Some(local(meta.modified))
    }

    fn ctime(&self, f: FileRef) -> Option<NaiveDateTime> {
        let meta = self.model.files().get(self.vault_path(f)?)?;
        // Where the file system keeps no birth time, the modification time stands in.
        Some(local(meta.created.unwrap_or(meta.modified)))
    }

    fn property(&self, f: FileRef, key: &str) -> Option<&Json> {
        self.props(f)?.get(key)
    }

    fn properties(&self, f: FileRef) -> Vec<(&str, &Json)> {
        self.props(f)
            .map(|p| p.iter().collect())
            .unwrap_or_default()
    }

    fn property_type(&self, key: &str) -> Option<PropertyType> {
        self.types.get(key).copied()
    }

    fn tags(&self, f: FileRef) -> Vec<Arc<str>> {
        let Some(note) = self.note(f) else {
            return Vec::new();
        };
        let mut seen = HashSet::new();
        note.parsed
            .tags
            .iter()
            .filter(|t| seen.insert(markdown::normalize_tag(&t.name)))
            .map(|t| t.name.clone())
            .collect()
    }

    fn has_tag(&self, f: FileRef, tag: &str) -> bool {
        self.tag_table(tag)
            .and_then(|bits| bits.get(f.0 as usize).copied())
            .unwrap_or(false)
    }

    fn tag_table(&self, tag: &str) -> Option<Arc<Vec<bool>>> {
        let q = markdown::normalize_tag(tag);
        (!q.is_empty()).then(|| self.tag_members(&q))
    }

    fn links(&self, f: FileRef, embeds: bool) -> Vec<SourceLink> {
        let Some(note) = self.note(f) else {
            return Vec::new();
        };
        note.parsed
            .links
            .iter()
            .zip(self.model.targets(note))
            .filter(|(l, _)| (l.kind == LinkKind::Embed) == embeds)
            .map(|(l, t)| SourceLink {
                target: l.target().to_owned(),
                display: l.display().map(str::to_owned),
                file: match t {
                    Target::File { path, .. } => self.id(&path),
                    Target::Broken => None,
                },
            })
            .collect()
    }

    fn links_to(&self, f: FileRef, to: FileRef) -> bool {
        let (Some(note), Some(to)) = (self.note(f), self.vault_path(to)) else {
            return false;
        };
        self.model
            .targets(note)
            .any(|t| matches!(t, Target::File { path, .. } if path == *to))
    }

    fn backlinks(&self, f: FileRef) -> Vec<FileRef> {
        let Some(p) = self.vault_path(f) else {
            return Vec::new();
        };
        self.model.backlinks(p).filter_map(|b| self.id(b)).collect()
    }

    fn resolve(&self, target: &str, from: Option<FileRef>) -> Option<FileRef> {
        let from = from.and_then(|f| self.vault_path(f));
        match self.model.resolve(target, from) {
            Resolution::Found { path, .. } => self.id(&path),
            Resolution::NotFound => None,
        }
    }

    fn by_path(&self, path: &str) -> Option<FileRef> {
        let p = VaultPath::parse(path).ok()?;
        self.model.files().contains_key(&p).then(|| self.id(&p))?
    }

    fn now(&self) -> NaiveDateTime {
        self.now
    }
}

/// Where the base of a `query_base` call comes from.
#[derive(Debug, Clone)]
pub enum BaseSource {
    /// A `.base` file, or a note and the 1-based index of its ```` ```base ```` block.
    Path(VaultPath, Option<usize>),
    /// YAML given in the call.
    Inline(String),
}

/// What `query_base` asks.
#[derive(Debug, Clone)]
pub struct BaseQuery {
    /// The base.
    pub source: BaseSource,
    /// The view's name (default: the first).
    pub view: Option<String>,
    /// The note the base is shown in (`this`).
    pub this: Option<VaultPath>,
    /// Rows per page.
    pub limit: Option<u32>,
    /// Where the page starts.
    pub cursor: Option<String>,
}

/// A column of the view.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BaseColumn {
    /// Property id (`note.author`).
    pub id: String,
    /// Display name.
    pub name: String,
}

/// One row: a file and its cells.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BaseRow {
    /// Vault path.
    pub path: String,
    /// Cells by column id; dates, links, errors... are `{"type": ...}`.
    pub values: Map<String, Json>,
    /// Index in `groups`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
}

/// A group of rows sharing a value of the `groupBy` property.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BaseGroup {
    /// The shared value.
    pub key: Json,
    /// Rows.
    pub count: usize,
    /// Summaries by column id.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub summaries: Map<String, Json>,
}

/// The reply of `query_base`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BaseReply {
    /// The `.base` file or note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Block of the note (from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
    /// The view evaluated.
    pub view: String,
    /// Its layout.
    #[serde(rename = "type")]
    pub kind: String,
    /// All views.
    pub views: Vec<String>,
    /// What `this` was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub this: Option<String>,
    /// Columns, in order.
    pub columns: Vec<BaseColumn>,
    /// This page.
    pub rows: Vec<BaseRow>,
    /// Rows in the view.
    pub total: usize,
    /// Rows passing the filters (before the view's `limit`).
    pub matched: usize,
    /// Groups, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<BaseGroup>,
    /// Summaries by column id.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub summaries: Map<String, Json>,
    /// Cursor for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// View settings not interpreted (`image`...).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Json>,
    /// Filters that failed on some rows (left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// The error of a base named `at` (given by the argument `param`: `path` or `base`); a view
/// not found is about `view`.
fn base_error(e: BaseError, at: &str, param: &'static str) -> NoteError {
    if super::cancel::requested() {
        return super::cancel::cancelled();
    }
    match e {
        BaseError::Budget(spent, m) => NoteError::spent(spent, format!("{at}: {m}")),
        e @ BaseError::NoView(..) => NoteError::invalid("view", format!("{at}: {e}")),
        other => NoteError::invalid(param, format!("{at}: {other}")),
    }
}

/// Reads the YAML of a base named by path: a `.base` file, or the `block`-th base block of a note.
fn read_base_text(
    vault: &Vault,
    path: &VaultPath,
    block: Option<usize>,
) -> Result<String, NoteError> {
    let data = vault.read_file(path)?;
    let text = String::from_utf8_lossy(&data.bytes);
    match path.extension() {
        Some("base") => {
            if block.is_some() {
                return Err(NoteError::invalid(
                    "block",
                    format!("{path} is a .base file: `block` is for notes holding ```base blocks"),
                ));
            }
            Ok(text.into_owned())
        }
        Some("md") => {
            let blocks = markdown::base_blocks(&text);
            let n = block.unwrap_or(1);
            if blocks.is_empty() {
                return Err(NoteError::invalid(
                    "path",
                    format!("{path} has no ```base code block"),
                ));
            }
            blocks
                .into_iter()
                .nth(n.wrapping_sub(1))
                .map(|b| b.yaml)
                .ok_or_else(|| {
                    NoteError::invalid(
                        "block",
                        format!(
                            "{path} has {} ```base block(s); `block` must be 1 to that",
                            markdown::base_blocks(&text).len()
                        ),
                    )
                })
        }
        _ => Err(NoteError::invalid(
            "path",
            format!("{path}: not a base (a `.base` file, or a note with a ```base block)"),
        )),
    }
}

/// The files a base's rows are drawn from: every visible file, or only the notes carrying the
/// tags its filters require; in path order.
fn candidates(
    engine: &Engine,
    model: &Model,
    src: &ModelSource<'_>,
    filters: &[&Filter],
) -> Vec<FileRef> {
    let ignored = engine
        .user_ignored()
        .map(|f| engine.user_ignored_files(model, &f));
    let visible = |p: &VaultPath| ignored.as_ref().is_none_or(|set| !set.contains(p));
    let required: Vec<Vec<String>> = filters.iter().flat_map(|f| f.required_tags()).collect();
    // Per required group, the tag tables of its tags (each with the tags nested under it).
    let tables: Vec<Vec<Arc<Vec<bool>>>> = required
        .iter()
        .map(|any_of| any_of.iter().filter_map(|t| src.tag_table(t)).collect())
        .collect();
    // Each required group: the tag-index entries (a tag and the tags nested under it) whose
    // notes satisfy it.
    let groups: Vec<Vec<&BTreeSet<VaultPath>>> = required
        .iter()
        .map(|any_of| {
            let mut sets = Vec::new();
            for want in any_of {
                let key = markdown::normalize_tag(want);
                if key.is_empty() {
                    continue;
                }
                let nested = format!("{key}/");
                for (tag, paths) in model.tags().range(key.clone()..) {
                    if *tag != key && !tag.starts_with(&nested) {
                        break;
                    }
                    sets.push(paths);
                }
            }
            sets
        })
        .collect();
    // The smallest group bounds the rows. Looking up each of its notes' ids costs more than
    // reading the tag tables for every file once it holds more than a small share of the vault.
    let smallest = groups
        .iter()
        .min_by_key(|g| g.iter().map(|s| s.len()).sum::<usize>());
    let in_every_group = |f: FileRef| {
        tables.iter().all(|any_of: &Vec<Arc<Vec<bool>>>| {
            any_of
                .iter()
                .any(|bits| bits.get(f.0 as usize).copied().unwrap_or(false))
        })
    };
    let all_files = || -> Vec<FileRef> {
        crate::model::memo_key!(FileIds: Vec<u32>);
        let ids = model.memo::<FileIds>(|| ids_in_order(model, model.files().keys()));
        ids.iter()
            .filter(|&&id| id != u32::MAX)
            .map(|&id| FileRef(id))
            .filter(|&f| ignored.is_none() || src.vault_path(f).is_some_and(visible))
            .collect()
    };
    let Some(smallest) = smallest else {
        return all_files();
    };
    let estimate: usize = smallest.iter().map(|s| s.len()).sum();
    if estimate.saturating_mul(8) > model.files().len() {
        // Every file, less those without a tag the filter requires (a table read each).
        return all_files()
            .into_iter()
            .filter(|&f| in_every_group(f))
            .collect();
    }
    let mut paths: Vec<&VaultPath> = smallest.iter().flat_map(|s| s.iter()).collect();
    paths.sort();
    paths.dedup();
    // The filter itself checks the other groups.
    paths
        .into_iter()
        .filter(|p| visible(p))
        .filter_map(|p| src.id(p))
        .collect()
}

fn cell_json(c: &Cell, names: &dyn Fn(FileRef) -> String) -> Json {
    match c {
        Cell::Value(v) => bounded(v.to_json(names)),
        Cell::Error(e) => json!({"type": "error", "message": e}),
    }
}

/// A value whose printed form is over [`MAX_CELL_BYTES`] becomes its cut text.
fn bounded(v: Json) -> Json {
    let text = v.to_string();
    if text.len() <= MAX_CELL_BYTES {
        return v;
    }
    let mut cut = MAX_CELL_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    json!({"type": "truncated", "text": &text[..cut], "bytes": text.len()})
}

fn summaries_json(list: &[Summary], names: &dyn Fn(FileRef) -> String) -> Map<String, Json> {
    list.iter()
        .map(|s| {
            (
                s.property.id(),
                json!({"name": s.name, "value": cell_json(&s.value, names)}),
            )
        })
        .collect()
}

/// `query_base`'s arguments as the client gave them.
#[derive(Debug, Clone, Default)]
pub struct BaseArgs {
    /// A `.base` file, or a note with ```` ```base ```` blocks.
    pub path: Option<String>,
    /// Which block of that note, from 1.
    pub block: Option<usize>,
    /// Or a base's YAML.
    pub base: Option<String>,
    /// The view's name.
    pub view: Option<String>,
    /// The note `this` is.
    pub this: Option<String>,
    /// Rows per page.
    pub limit: Option<u32>,
    /// Where the page starts.
    pub cursor: Option<String>,
}

/// The base a call names, before the vault is asked.
#[derive(Debug, Clone)]
enum Requested {
    /// A path as typed and parsed, and the block.
    Path(super::locate::Named, Option<usize>),
    /// YAML in the call.
    Inline(String),
}

/// What `query_base` asks, its arguments checked and its paths parsed; the paths are located
/// (bare names, `.md` left out) when it runs.
#[derive(Debug, Clone)]
pub struct BaseRequest {
    source: Requested,
    this: Option<super::locate::Named>,
    view: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

impl BaseRequest {
    /// Checks that exactly one of `path` and `base` is given (`block` only with `path`, `base`
    /// within [`crate::obsidian::bases::MAX_BASE_BYTES`]), then parses `this`.
    pub fn new(args: BaseArgs) -> Result<Self, NoteError> {
        let source = match (args.path, args.base) {
            (Some(p), None) => Requested::Path(super::locate::Named::parse(p)?, args.block),
            (None, Some(yaml)) => {
                if args.block.is_some() {
                    return Err(NoteError::invalid(
                        "block",
                        "`block` goes with `path` (a note holding ```base blocks)",
                    ));
                }
                if yaml.len() > crate::obsidian::bases::MAX_BASE_BYTES {
                    return Err(NoteError::TooLarge(format!(
                        "`base` is larger than {} KiB",
                        crate::obsidian::bases::MAX_BASE_BYTES / 1024
                    )));
                }
                Requested::Inline(yaml)
            }
            (Some(_), Some(_)) => {
                return Err(NoteError::invalid(
                    "path",
                    "give either `path` or `base`, not both",
                ));
            }
            (None, None) => {
                return Err(NoteError::invalid(
                    "path",
                    "give `path` (a .base file or a note with a ```base block) or `base` (YAML)",
                ));
            }
        };
        let this = args.this.map(super::locate::Named::parse).transpose()?;
        Ok(BaseRequest {
            source,
            this,
            view: args.view,
            limit: args.limit,
            cursor: args.cursor,
        })
    }
}

/// `query_base` for a request: its base and `this` located as `read_note` locates a path, then
/// [`query_base`].
pub fn query(engine: &Engine, req: BaseRequest) -> Result<BaseReply, NoteError> {
    use super::locate::locate;
    let source = match req.source {
        Requested::Path(name, block) => {
            BaseSource::Path(locate(engine, &name.input, name.path)?, block)
        }
        Requested::Inline(yaml) => BaseSource::Inline(yaml),
    };
    let this = match req.this {
        Some(name) => Some(locate(engine, &name.input, name.path)?),
        None => None,
    };
    query_base(
        engine,
        BaseQuery {
            source,
            view: req.view,
            this,
            limit: req.limit,
            cursor: req.cursor,
        },
    )
}

/// Evaluates one view of a base.
pub fn query_base(engine: &Engine, q: BaseQuery) -> Result<BaseReply, NoteError> {
    let vault = engine.vault();
    let (yaml, at, path, block) = match &q.source {
        BaseSource::Path(p, block) => (
            read_base_text(vault, p, *block)?,
            p.to_string(),
            Some(p.clone()),
            *block,
        ),
        BaseSource::Inline(yaml) => (yaml.clone(), "base".to_owned(), None, None),
    };
    let param = if path.is_some() { "path" } else { "base" };
    let base: Base = bases::parse_base(&yaml).map_err(|e| base_error(e, &at, param))?;
    let view = base
        .view(q.view.as_deref())
        .map_err(|e| base_error(e, &at, param))?;
    let started = std::time::Instant::now();
    let model = engine.model()?;
    let src = ModelSource::new(&model, vault);
    let prepared = started.elapsed();
    // `this`: the note asked for; else the note holding the block, or the .base file itself.
    let this_path = match (&q.this, &path) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(p)) => Some(p.clone()),
        (None, None) => None,
    };
    let this = match (&q.this, &this_path) {
        (Some(t), _) => Some(src.id(t).ok_or_else(|| NoteError::NotFound {
            message: format!("`this`: no file {t}"),
            suggestions: Vec::new(),
        })?),
        (None, Some(p)) => src.id(p),
        _ => None,
    };
    let filters: Vec<&Filter> = [&base.filters, &view.filters]
        .into_iter()
        .flatten()
        .collect();
    let files = candidates(engine, &model, &src, &filters);
    let chosen = started.elapsed();
    let limit = check_limit(q.limit, DEFAULT_ROWS, MAX_ROWS)?;
    let query = fingerprint(&(
        &yaml,
        &view.name,
        q.this.as_ref().map(VaultPath::as_str),
        path.as_ref().map(VaultPath::as_str),
        block,
    ));
    let start = decode_offset(q.cursor.as_deref(), query)?;
    // The request's budget (its stop check is asked on the evaluating threads too).
    let budget = super::cancel::budget();
    let out = bases::run(
        &base,
        view,
        &src,
        &files,
        this,
        &budget,
        start..start.saturating_add(limit),
    )
    .map_err(|e| base_error(e, &at, param))?;
    tracing::debug!(
        candidates = files.len(),
        matched = out.matched,
        steps = out.steps,
        prepare_ms = prepared.as_secs_f64() * 1e3,
        candidates_ms = (chosen - prepared).as_secs_f64() * 1e3,
        run_ms = (started.elapsed() - chosen).as_secs_f64() * 1e3,
        "query_base"
    );

    let names = |f: FileRef| src.path(f).to_owned();
    let group_of = |i: usize| {
        out.groups
            .iter()
            .position(|g| (g.start..g.start + g.len).contains(&i))
    };
    let mut rows = Vec::new();
    let mut bytes = 0;
    let mut next = out.first;
    for (k, row) in out.rows.iter().enumerate() {
        let i = out.first + k;
        let values: Map<String, Json> = out
            .columns
            .iter()
            .zip(&row.cells)
            .map(|(c, cell)| (c.id(), cell_json(cell, &names)))
            .collect();
        let r = BaseRow {
            path: src.path(row.file).to_owned(),
            values,
            group: if out.groups.is_empty() {
                None
            } else {
                group_of(i)
            },
        };
        bytes += serde_json::to_string(&r).map_or(0, |s| s.len());
        if bytes > MAX_REPLY_BYTES && !rows.is_empty() {
            break;
        }
        rows.push(r);
        next = i + 1;
    }
    let total = out.total;
    let next_cursor = (next < total).then(|| encode_offset(next, query));
    Ok(BaseReply {
        path: path.as_ref().map(VaultPath::to_string),
        block: path.as_ref().and(block),
        view: view.name.clone(),
        kind: view.kind.clone(),
        views: base.views.iter().map(|v| v.name.clone()).collect(),
        this: this.map(|f| src.path(f).to_owned()),
        columns: out
            .columns
            .iter()
            .map(|c: &Property| BaseColumn {
                id: c.id(),
                name: base.display_name(c),
            })
            .collect(),
        rows,
        total,
        matched: out.matched,
        groups: out
            .groups
            .iter()
            .map(|g| BaseGroup {
                key: bounded(g.key.to_json(&names)),
                count: g.len,
                summaries: summaries_json(&g.summaries, &names),
            })
            .collect(),
        summaries: summaries_json(&out.summaries, &names),
        next_cursor,
        options: view.options.clone(),
        errors: {
            let mut e = out.filter_errors.clone();
            if out.filter_error_rows > e.len() {
                e.push(format!(
                    "{} row(s) in all were left out because a filter failed on them",
                    out.filter_error_rows
                ));
            }
            e
        },
    })
}

/// One base of the vault.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BaseEntry {
    /// The `.base` file or note.
    pub path: String,
    /// Block of the note (from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
    /// Its line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// View names.
    pub views: Vec<String>,
    /// Why it cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The reply of `list_bases`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BaseList {
    /// By path.
    pub bases: Vec<BaseEntry>,
    /// Bases in all.
    pub total: usize,
    /// Cursor for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Every `.base` file and every note with ```` ```base ```` blocks (under `folder`, which must
/// be a folder of the vault), with the names of their views.
pub fn list_bases(
    engine: &Engine,
    folder: Option<&VaultPath>,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> Result<BaseList, NoteError> {
    if let Some(f) = folder {
        engine.vault().check_folder(f)?;
    }
    let model = engine.model()?;
    let ignored = engine
        .user_ignored()
        .map(|f| engine.user_ignored_files(&model, &f));
    let under = |p: &VaultPath| {
        folder.is_none_or(|f| p.as_str().starts_with(&format!("{}/", f.as_str())))
            && ignored.as_ref().is_none_or(|s| !s.contains(p))
    };
    let mut found: Vec<VaultPath> = model
        .files()
        .keys()
        .filter(|p| p.extension() == Some("base") && under(p))
        .cloned()
        .collect();
    found.extend(
        model
            .notes()
            .iter()
            .filter(|(p, n)| n.parsed.base_blocks > 0 && under(p))
            .map(|(p, _)| p.clone()),
    );
    found.sort();
    drop(model);
    let limit = check_limit(limit, DEFAULT_ROWS, MAX_ROWS)?;
    let query = fingerprint(&folder.map(VaultPath::as_str));
    let start = decode_offset(cursor, query)?;
    let total = found.len();
    let vault = engine.vault();
    let mut out = Vec::new();
    for p in found.iter().skip(start).take(limit) {
        let views = |yaml: &str| -> (Vec<String>, Option<String>) {
            match bases::parse_base(yaml) {
                Ok(b) => (b.views.iter().map(|v| v.name.clone()).collect(), None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            }
        };
        match p.extension() {
            Some("base") => {
                let (views, error) = match vault.read_file(p) {
                    Ok(data) => views(&String::from_utf8_lossy(&data.bytes)),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                };
                out.push(BaseEntry {
                    path: p.to_string(),
                    block: None,
                    line: None,
                    views,
                    error,
                });
            }
            _ => {
                let text = match vault.read_file(p) {
                    Ok(data) => String::from_utf8_lossy(&data.bytes).into_owned(),
                    Err(e) => {
                        out.push(BaseEntry {
                            path: p.to_string(),
                            block: None,
                            line: None,
                            views: Vec::new(),
                            error: Some(e.to_string()),
                        });
                        continue;
                    }
                };
                for (i, b) in markdown::base_blocks(&text).into_iter().enumerate() {
                    let (views, error) = views(&b.yaml);
                    out.push(BaseEntry {
                        path: p.to_string(),
                        block: Some(i + 1),
                        line: Some(b.line),
                        views,
                        error,
                    });
                }
            }
        }
    }
    let end = start.saturating_add(limit).min(total);
    Ok(BaseList {
        bases: out,
        total,
        next_cursor: (end < total).then(|| encode_offset(end, query)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(args: BaseArgs) -> String {
        match BaseRequest::new(args) {
            Err(e) => e.to_string(),
            Ok(r) => panic!("accepted: {r:?}"),
        }
    }

    #[test]
    fn a_base_request_names_exactly_one_base_and_a_block_only_with_a_path() {
        let yaml = || Some("views: []".to_owned());
        let path = || Some("Books.base".to_owned());
        assert!(refusal(BaseArgs::default()).starts_with("give `path`"));
        let both = BaseArgs {
            path: path(),
            base: yaml(),
            ..BaseArgs::default()
        };
        assert_eq!(refusal(both), "give either `path` or `base`, not both");
        let block = BaseArgs {
            base: yaml(),
            block: Some(1),
            ..BaseArgs::default()
        };
        assert!(refusal(block).starts_with("`block` goes with `path`"));
        let big = BaseArgs {
            base: Some("x".repeat(crate::obsidian::bases::MAX_BASE_BYTES + 1)),
            ..BaseArgs::default()
        };
        assert!(refusal(big).contains("is larger than"));
        // The base is checked before `this` is parsed.
        let both_and_bad_this = BaseArgs {
            path: path(),
            base: yaml(),
            this: Some("../x".to_owned()),
            ..BaseArgs::default()
        };
        assert_eq!(
            refusal(both_and_bad_this),
            "give either `path` or `base`, not both"
        );
        let ok = BaseArgs {
            path: path(),
            block: Some(2),
            this: Some("Home".to_owned()),
            ..BaseArgs::default()
        };
        assert!(BaseRequest::new(ok).is_ok());
    }
}

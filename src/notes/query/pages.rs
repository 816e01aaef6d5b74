//! The vault model as the DQL evaluator sees it ([`ModelPages`]), and values as JSON.

use super::*;

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
    /// The query's budget, charged what a page's data will hold before it is built.
    budget: Option<std::sync::Arc<crate::obsidian::budget::Budget>>,
    /// Bytes charged for the pages built so far (kept until the query ends).
    charged: std::cell::Cell<u64>,
    /// Why a page was not built: the budget refused its bytes.
    spent: std::cell::Cell<Option<Spent>>,
}

/// What a page parsed again from a note's text holds, per byte of the text, at most: measured
/// at 3 on obsidian-hub (`LIST length(file.lists)`: 44 MiB for 15 MB of Markdown).
const PARSED_BYTES_PER_TEXT_BYTE: u64 = 4;

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
            budget: None,
            charged: std::cell::Cell::new(0),
            spent: std::cell::Cell::new(None),
        }
    }

    /// Pages that charge `budget` what each will hold before building it; past the budget a
    /// page is not built and the query stops ([`DvSource::spent`]).
    pub fn charging(mut self, budget: std::sync::Arc<crate::obsidian::budget::Budget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// An upper bound of what [`Self::build`] allocates for page `p`.
    fn page_cost(&self, p: PageId) -> u64 {
        let Some((path, note)) = self.notes.get(p) else {
            return 0;
        };
        let front = self.props(p).map_or(0, |props| {
            props
                .iter()
                .map(|(k, v)| {
                    k.len() as u64 + 64 + 2 * crate::obsidian::dataview::query::eval::json_cost(v)
                })
                .sum()
        });
        let base = std::mem::size_of::<DataviewNote>() as u64 + front;
        if self.read.is_some() {
            return base + PARSED_BYTES_PER_TEXT_BYTE.saturating_mul(note.meta.size);
        }
        let item = std::mem::size_of::<ListItem>() as u64;
        base + self
            .model
            .note_dataview(path)
            .map_or(0, |d| d.page_cost(item))
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
    pub(super) fn ids_of_sorted<'a>(
        &self,
        paths: impl Iterator<Item = &'a VaultPath>,
    ) -> Vec<PageId> {
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
pub(super) fn needs_text(query: &str) -> bool {
    query.contains("lists")
}

/// A note's text as it is now (invalid UTF-8 replaced), or `None` when it cannot be read.
pub(super) fn note_text(vault: &Vault, p: &VaultPath) -> Option<String> {
    let bytes = vault.read_file(p).ok()?.bytes;
    Some(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// The links on 0-based lines `line..line + count` (`links` in text order).
pub(super) fn links_on(links: &[&markdown::Link], line: u32, count: u32) -> Vec<Link> {
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

pub(super) fn local(t: std::time::SystemTime) -> NaiveDateTime {
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
            .get_or_init(|| {
                if let Some(budget) = &self.budget {
                    let cost = self.page_cost(p);
                    if let Err(e) = budget.alloc(cost) {
                        self.spent.set(Some(e));
                        return None;
                    }
                    self.charged.set(self.charged.get().saturating_add(cost));
                }
                self.build(p).map(Box::new)
            })
            .as_deref()
    }

    fn spent(&self) -> Option<Spent> {
        self.spent.get()
    }

    fn kept_bytes(&self) -> u64 {
        self.charged.get()
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

pub(super) fn date_text(d: &DvDate) -> String {
    query::render::format_date(
        d,
        if d.date.time {
            "yyyy-MM-dd'T'HH:mm:ss"
        } else {
            "yyyy-MM-dd"
        },
    )
}

//! A base (`.base` YAML or a ```` ```base ```` block) and how one of its views runs: filters,
//! formulas, columns, sort, groups, limit and summaries.

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::Value as Json;

use super::eval::{Budget, EvalError, Evaluator, Formulas, Source};
use super::expr::{self, Expr, ParseError};
use super::value::{FileRef, SLOT, SortKey, Value};
use rayon::prelude::*;

/// Why a base cannot be read or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BaseError {
    /// The file is larger than a base may be.
    #[error("the base is larger than {} KiB", super::MAX_BASE_BYTES / 1024)]
    TooLarge,
    /// The text is not a YAML mapping.
    #[error("invalid YAML: {0}")]
    Yaml(crate::markdown::YamlMappingError),
    /// A filter object (at `at`: `filters`, `views[1].filters`, ...) has none of the keys.
    #[error("{0}: a filter object needs `and`, `or` or `not`")]
    FilterObject(String),
    /// `formulas` is not a mapping.
    #[error("`formulas` must be a mapping")]
    FormulasNotMapping,
    /// `views` is not a list.
    #[error("`views` must be a list")]
    ViewsNotList,
    /// A view (1-based) is not a mapping.
    #[error("view {0} is not a mapping")]
    ViewNotMapping(usize),
    /// The base has no view at all.
    #[error("the base has no view")]
    NoViews,
    /// A filter expression does not parse: the expression and where.
    #[error("filter `{expression}` does not parse: {error}")]
    Filter {
        /// The expression as written.
        expression: String,
        /// What is wrong, with the column.
        error: ParseError,
    },
    /// No view of that name.
    #[error("no view named `{0}`; the base has: {1}")]
    NoView(String, String),
    /// The request's budget ran out (why, and the message).
    #[error("{1}")]
    Budget(crate::obsidian::budget::Spent, String),
}

/// A filter: one expression, or `and`/`or`/`not` of filters.
#[derive(Debug, Clone)]
pub enum Filter {
    /// A statement.
    Expr {
        /// As written.
        src: String,
        /// Parsed.
        expr: Result<Expr, ParseError>,
    },
    /// All of them.
    And(Vec<Filter>),
    /// Any of them.
    Or(Vec<Filter>),
    /// None of them.
    Not(Vec<Filter>),
}

impl Filter {
    fn parse(v: &Json, at: &str) -> Result<Filter, BaseError> {
        match v {
            Json::String(s) => Ok(Filter::Expr {
                src: s.clone(),
                expr: expr::parse(s),
            }),
            Json::Bool(_) | Json::Number(_) => {
                let s = v.to_string();
                Ok(Filter::Expr {
                    expr: expr::parse(&s),
                    src: s,
                })
            }
            Json::Object(map) => {
                let (key, items) = ["and", "or", "not"]
                    .iter()
                    .find_map(|k| map.get(*k).map(|v| (*k, v)))
                    .ok_or_else(|| BaseError::FilterObject(at.to_owned()))?;
                let items: Vec<Filter> = match items {
                    Json::Array(list) => list
                        .iter()
                        .map(|x| Filter::parse(x, at))
                        .collect::<Result<_, _>>()?,
                    Json::Null => Vec::new(),
                    other => vec![Filter::parse(other, at)?],
                };
                Ok(match key {
                    "and" => Filter::And(items),
                    "or" => Filter::Or(items),
                    _ => Filter::Not(items),
                })
            }
            Json::Null => Ok(Filter::And(Vec::new())),
            Json::Array(list) => Ok(Filter::And(
                list.iter()
                    .map(|x| Filter::parse(x, at))
                    .collect::<Result<_, _>>()?,
            )),
        }
    }

    /// The first expression that does not parse.
    fn check(&self) -> Result<(), BaseError> {
        match self {
            Filter::Expr { src, expr } => match expr {
                Ok(_) => Ok(()),
                Err(e) => Err(BaseError::Filter {
                    expression: src.clone(),
                    error: e.clone(),
                }),
            },
            Filter::And(v) | Filter::Or(v) | Filter::Not(v) => v.iter().try_for_each(Filter::check),
        }
    }

    fn eval(&self, ev: &mut Evaluator<'_>) -> Result<bool, (String, EvalError)> {
        match self {
            Filter::Expr { src, expr } => match expr {
                Ok(e) => ev.eval(e).map(|v| v.truthy()).map_err(|e| (src.clone(), e)),
                Err(_) => Ok(false),
            },
            Filter::And(v) => {
                for f in v {
                    if !f.eval(ev)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Filter::Or(v) => {
                if v.is_empty() {
                    return Ok(true);
                }
                for f in v {
                    if f.eval(ev)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Filter::Not(v) => {
                for f in v {
                    if f.eval(ev)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    /// Tags every file passing this filter must carry (a top-level `file.hasTag("x")` in an
    /// `and`): lets the source narrow the rows before evaluating.
    pub fn required_tags(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        match self {
            Filter::Expr { expr: Ok(e), .. } => required_in(e, &mut out),
            Filter::And(v) => v.iter().for_each(|f| out.extend(f.required_tags())),
            _ => {}
        }
        out
    }
}

/// The `file.hasTag(...)` calls an expression requires: itself, or either side of `&&`.
fn required_in(e: &Expr, out: &mut Vec<Vec<String>>) {
    if let super::expr::ExprKind::Binary(super::expr::BinOp::And, a, b) = &e.kind {
        required_in(a, out);
        required_in(b, out);
    } else if let Some(tags) = has_tag_call(e) {
        out.push(tags);
    }
}

/// `file.hasTag("a", "b")` with literal arguments: the tags.
fn has_tag_call(e: &Expr) -> Option<Vec<String>> {
    use super::expr::ExprKind;
    let ExprKind::Method(recv, name, args) = &e.kind else {
        return None;
    };
    if &**name != "hasTag" || !matches!(&recv.kind, ExprKind::Name(n) if &**n == "file") {
        return None;
    }
    args.iter()
        .map(|a| match &a.kind {
            ExprKind::Lit(Value::String(s)) => Some(s.to_string()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .filter(|v| !v.is_empty())
}

/// A property a column, sort or group names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Property {
    /// `file.NAME`
    File(String),
    /// `note.NAME` (or a bare `NAME`)
    Note(String),
    /// `formula.NAME`
    Formula(String),
}

impl Property {
    /// Reads `file.x`, `formula.x`, `note.x` or `x`.
    pub fn parse(id: &str) -> Property {
        let id = id.trim();
        if let Some(f) = id.strip_prefix("file.") {
            Property::File(f.to_owned())
        } else if let Some(f) = id.strip_prefix("formula.") {
            Property::Formula(f.to_owned())
        } else {
            Property::Note(id.strip_prefix("note.").unwrap_or(id).to_owned())
        }
    }

    /// The full id: `note.author`, `file.name`, `formula.ppu`.
    pub fn id(&self) -> String {
        match self {
            Property::File(f) => format!("file.{f}"),
            Property::Note(f) => format!("note.{f}"),
            Property::Formula(f) => format!("formula.{f}"),
        }
    }

    fn value(&self, ev: &mut Evaluator<'_>, row: FileRef) -> Result<Value, EvalError> {
        match self {
            Property::File(f) => ev.file_property(row, f),
            Property::Note(k) => ev.property(row, k, 0),
            Property::Formula(name) => ev.formula(name, 0),
        }
    }
}

/// A sort key.
#[derive(Debug, Clone)]
pub struct Sort {
    /// What to sort by.
    pub property: Property,
    /// Largest first.
    pub descending: bool,
}

impl Sort {
    fn parse(v: &Json) -> Option<Sort> {
        let prop = v
            .get("property")
            .or_else(|| v.get("column"))
            .and_then(Json::as_str)?;
        let descending = v
            .get("direction")
            .and_then(Json::as_str)
            .is_some_and(|d| d.eq_ignore_ascii_case("desc"));
        Some(Sort {
            property: Property::parse(prop),
            descending,
        })
    }
}

/// One view of a base.
#[derive(Debug, Clone)]
pub struct View {
    /// `table`, `cards`, `list`, `map`, or a plugin's.
    pub kind: String,
    /// The name (views are chosen by it).
    pub name: String,
    /// The view's own filters (ANDed with the base's).
    pub filters: Option<Filter>,
    /// The columns, in order.
    pub order: Vec<Property>,
    /// Sort keys, first first.
    pub sort: Vec<Sort>,
    /// Grouping.
    pub group_by: Option<Sort>,
    /// At most this many rows.
    pub limit: Option<usize>,
    /// Summaries: property and summary name.
    pub summaries: Vec<(Property, String)>,
    /// The keys capvault does not use (`image`, `coordinates`, `columnSize`...), as written.
    pub options: serde_json::Map<String, Json>,
}

/// A parsed base.
#[derive(Debug, Clone)]
pub struct Base {
    /// Filters of every view.
    pub filters: Option<Filter>,
    /// Formulas by name, compiled.
    pub formulas: Vec<(Arc<str>, Result<Expr, ParseError>)>,
    /// Display names by property id.
    pub display: Vec<(String, String)>,
    /// Custom summary formulas by name.
    pub summaries: Vec<(String, Result<Expr, ParseError>)>,
    /// The views, in order.
    pub views: Vec<View>,
}

const KNOWN_VIEW_KEYS: &[&str] = &[
    "type",
    "name",
    "filters",
    "order",
    "sort",
    "groupBy",
    "limit",
    "summaries",
];

impl Base {
    /// Reads a base from its YAML, parsed to JSON. Unknown keys are ignored, as Obsidian does.
    pub fn from_json(doc: &serde_json::Map<String, Json>) -> Result<Base, BaseError> {
        let filters = match doc.get("filters") {
            Some(v) => Some(Filter::parse(v, "filters")?),
            None => None,
        };
        let mut formulas = Vec::new();
        if let Some(map) = doc.get("formulas") {
            let Json::Object(map) = map else {
                return Err(BaseError::FormulasNotMapping);
            };
            for (name, v) in map {
                let src = scalar_text(v);
                formulas.push((Arc::from(name.as_str()), expr::parse(&src)));
            }
        }
        let mut display = Vec::new();
        if let Some(Json::Object(map)) = doc.get("properties") {
            for (id, cfg) in map {
                if let Some(name) = cfg.get("displayName").and_then(Json::as_str) {
                    display.push((Property::parse(id).id(), name.to_owned()));
                }
            }
        }
        // The older `display` mapping (id: name).
        if let Some(Json::Object(map)) = doc.get("display") {
            for (id, name) in map {
                if let Some(name) = name.as_str() {
                    let id = Property::parse(id).id();
                    if !display.iter().any(|(i, _)| *i == id) {
                        display.push((id, name.to_owned()));
                    }
                }
            }
        }
        let mut summaries = Vec::new();
        if let Some(Json::Object(map)) = doc.get("summaries") {
            for (name, v) in map {
                summaries.push((name.clone(), expr::parse(&scalar_text(v))));
            }
        }
        let mut views = Vec::new();
        match doc.get("views") {
            None | Some(Json::Null) => {}
            Some(Json::Array(list)) => {
                for (i, v) in list.iter().enumerate() {
                    views.push(View::parse(v, i)?);
                }
            }
            Some(_) => return Err(BaseError::ViewsNotList),
        }
        if views.is_empty() {
            views.push(View {
                kind: "table".into(),
                name: "Table".into(),
                filters: None,
                order: Vec::new(),
                sort: Vec::new(),
                group_by: None,
                limit: None,
                summaries: Vec::new(),
                options: serde_json::Map::new(),
            });
        }
        Ok(Base {
            filters,
            formulas,
            display,
            summaries,
            views,
        })
    }

    /// The view named `name` (the first when `None`).
    pub fn view(&self, name: Option<&str>) -> Result<&View, BaseError> {
        match name {
            None => self.views.first().ok_or(BaseError::NoViews),
            Some(n) => self.views.iter().find(|v| v.name == n).ok_or_else(|| {
                BaseError::NoView(
                    n.to_owned(),
                    self.views
                        .iter()
                        .map(|v| format!("`{}`", v.name))
                        .collect::<Vec<_>>()
                        .join(", "),
                )
            }),
        }
    }

    /// The display name of a property id.
    pub fn display_name(&self, p: &Property) -> String {
        let id = p.id();
        if let Some((_, n)) = self.display.iter().find(|(i, _)| *i == id) {
            return n.clone();
        }
        match p {
            Property::File(f) => format!("file.{f}"),
            Property::Note(f) | Property::Formula(f) => f.clone(),
        }
    }
}

impl View {
    fn parse(v: &Json, i: usize) -> Result<View, BaseError> {
        let Json::Object(map) = v else {
            return Err(BaseError::ViewNotMapping(i + 1));
        };
        let name = map
            .get("name")
            .map(scalar_text)
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("View {}", i + 1));
        let filters = match map.get("filters") {
            Some(f) => Some(Filter::parse(f, &format!("view `{name}` filters"))?),
            None => None,
        };
        let order = match map.get("order") {
            Some(Json::Array(list)) => list
                .iter()
                .map(|x| Property::parse(&scalar_text(x)))
                .collect(),
            _ => Vec::new(),
        };
        let sort = match map.get("sort") {
            Some(Json::Array(list)) => list.iter().filter_map(Sort::parse).collect(),
            _ => Vec::new(),
        };
        let group_by = map.get("groupBy").and_then(|g| match g {
            Json::String(s) => Some(Sort {
                property: Property::parse(s),
                descending: false,
            }),
            other => Sort::parse(other),
        });
        let limit = map
            .get("limit")
            .and_then(Json::as_f64)
            .filter(|n| *n >= 0.0)
            .map(|n| n as usize);
        let summaries = match map.get("summaries") {
            Some(Json::Object(m)) => m
                .iter()
                .map(|(k, v)| (Property::parse(k), scalar_text(v)))
                .collect(),
            _ => Vec::new(),
        };
        let options = map
            .iter()
            .filter(|(k, _)| !KNOWN_VIEW_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(View {
            kind: map
                .get("type")
                .map(scalar_text)
                .unwrap_or_else(|| "table".into()),
            name,
            filters,
            order,
            sort,
            group_by,
            limit,
            summaries,
            options,
        })
    }
}

fn scalar_text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}

/// One cell: a value, or the error of its formula.
#[derive(Debug, Clone)]
pub enum Cell {
    /// The value.
    Value(Value),
    /// Why it could not be computed.
    Error(String),
}

/// A summary's result.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The column it summarises.
    pub property: Property,
    /// Its name (`Average`, or a custom one).
    pub name: String,
    /// The result.
    pub value: Cell,
}

/// A group of consecutive rows.
#[derive(Debug, Clone)]
pub struct Group {
    /// The value the rows share.
    pub key: Value,
    /// Index of its first row in [`Output::rows`].
    pub start: usize,
    /// Number of rows.
    pub len: usize,
    /// Its summaries.
    pub summaries: Vec<Summary>,
}

/// One row.
#[derive(Debug, Clone)]
pub struct Row {
    /// The file.
    pub file: FileRef,
    /// A cell per column.
    pub cells: Vec<Cell>,
}

/// What a view shows.
#[derive(Debug, Clone)]
pub struct Output {
    /// The columns.
    pub columns: Vec<Property>,
    /// The rows of the page asked for, in view order (grouped first).
    pub rows: Vec<Row>,
    /// Index in the view of `rows[0]`.
    pub first: usize,
    /// Rows in the view (after its limit).
    pub total: usize,
    /// Groups, when the view groups.
    pub groups: Vec<Group>,
    /// Summaries over every row shown.
    pub summaries: Vec<Summary>,
    /// Rows that passed the filters (before the view's limit).
    pub matched: usize,
    /// Filter errors: the expression and the message (the first few), and how many rows had one.
    pub filter_errors: Vec<String>,
    /// Rows whose filter failed to evaluate (left out).
    pub filter_error_rows: usize,
    /// Evaluation steps used.
    pub steps: u64,
}

/// Runs `view` of `base` over `files` (in the order ties keep). Cells are computed for the rows
/// of `page` (indexes in the view) only; summaries and groups cover every row.
pub fn run(
    base: &Base,
    view: &View,
    src: &dyn Source,
    files: &[FileRef],
    this: Option<FileRef>,
    budget: &Budget,
    page: std::ops::Range<usize>,
) -> Result<Output, BaseError> {
    if let Some(f) = &base.filters {
        f.check()?;
    }
    if let Some(f) = &view.filters {
        f.check()?;
    }
    let formulas: &Formulas = &base.formulas;
    // Filters and sort keys, in parallel over chunks of files (in order).
    let mut keys_of: Vec<&Sort> = Vec::new();
    keys_of.extend(view.group_by.iter());
    keys_of.extend(view.sort.iter());
    let chunks: Vec<Result<Chunk, BaseError>> = files
        .par_chunks(512)
        .map(|chunk| {
            let mut ev = Evaluator::new(src, formulas, budget, this);
            let mut out = Chunk::default();
            for &f in chunk {
                // What the row's filters and formulas build is dropped with the row: given back
                // once it is done, and what is kept of it charged again by its width.
                let mark = ev.bytes_charged();
                ev.set_row(Some(f));
                let mut pass = true;
                for filter in [&base.filters, &view.filters].into_iter().flatten() {
                    match filter.eval(&mut ev) {
                        Ok(true) => {}
                        Ok(false) => {
                            pass = false;
                            break;
                        }
                        Err((src_text, e)) => {
                            if let Some(spent) = e.spent {
                                return Err(BaseError::Budget(spent, e.message));
                            }
                            out.error_rows += 1;
                            if out.errors.len() < 5 {
                                out.errors.push(format!(
                                    "filter `{src_text}`: {} (column {}) in {}",
                                    e.message,
                                    e.pos + 1,
                                    src.path(f)
                                ));
                            }
                            pass = false;
                            break;
                        }
                    }
                }
                if pass {
                    let mut keys = Vec::with_capacity(keys_of.len());
                    for s in &keys_of {
                        keys.push(cell_value(&s.property, &mut ev, f)?);
                    }
                    let mut sort_keys = Vec::with_capacity(keys.len());
                    for k in &keys {
                        sort_keys.push(match ev.sort_key(k, 0) {
                            Ok(key) => key,
                            Err(EvalError {
                                spent: Some(spent),
                                message,
                                ..
                            }) => return Err(BaseError::Budget(spent, message)),
                            // Only a spent budget fails a key; were another error to, the
                            // row would sort as empty.
                            Err(_) => SortKey::Empty,
                        });
                    }
                    let group = keys.into_iter().next();
                    ev.set_row(None);
                    ev.release_since(mark);
                    // The kept row (twice: the list of kept rows grows by doubling).
                    let width = 2 * std::mem::size_of::<Kept>() as u64
                        + sort_keys.iter().map(key_width).sum::<u64>()
                        + group.as_ref().map_or(0, |g| g.width(budget.bytes_max()));
                    budget.alloc(width).map_err(|e| budget_error(e, 0))?;
                    out.kept.push((sort_keys, group, f));
                } else {
                    ev.set_row(None);
                    ev.release_since(mark);
                }
            }
            Ok(out)
        })
        .collect();
    let mut keyed: Vec<Kept> = Vec::new();
    let mut filter_errors: Vec<String> = Vec::new();
    let mut filter_error_rows = 0;
    for c in chunks {
        let c = c?;
        filter_error_rows += c.error_rows;
        for e in c.errors {
            if filter_errors.len() < 5 && !filter_errors.contains(&e) {
                filter_errors.push(e);
            }
        }
        keyed.extend(c.kept);
    }
    let matched = keyed.len();
    let by_keys = |a: &[SortKey], b: &[SortKey]| {
        for ((x, y), s) in a.iter().zip(b.iter()).zip(&keys_of) {
            let o = x.cmp_to(y, s.descending);
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    };
    let total = view.limit.map_or(keyed.len(), |l| l.min(keyed.len()));
    // Only the rows up to the page's end are shown. Without groups or summaries, which need
    // every row in order, the first ones are selected (linear) and only they are sorted. Ties
    // keep the files' order, as the full stable sort does.
    let shown = page.end.min(total);
    let partial = view.group_by.is_none() && view.summaries.is_empty() && shown < keyed.len() / 4;
    if keys_of.is_empty() {
        // No sort: the files' order.
    } else if partial {
        // The order of every row, then the rows kept in it.
        budget
            .alloc(
                keyed.len() as u64
                    * (std::mem::size_of::<(usize, &Kept)>() + std::mem::size_of::<Option<Kept>>())
                        as u64,
            )
            .map_err(|e| budget_error(e, 0))?;
        let cmp =
            |a: &(usize, &Kept), b: &(usize, &Kept)| by_keys(&a.1.0, &b.1.0).then(a.0.cmp(&b.0));
        let mut order: Vec<(usize, &Kept)> = keyed.iter().enumerate().collect();
        if shown > 0 {
            order.select_nth_unstable_by(shown - 1, cmp);
        }
        order.truncate(shown);
        order.sort_by(cmp);
        let first: Vec<usize> = order.into_iter().map(|(i, _)| i).collect();
        let mut slots: Vec<Option<Kept>> = keyed.into_iter().map(Some).collect();
        keyed = first.into_iter().filter_map(|i| slots[i].take()).collect();
    } else {
        keyed.par_sort_by(|(a, _, _), (b, _, _)| by_keys(a, b));
    }
    keyed.truncate(total);
    let mut ev = Evaluator::new(src, formulas, budget, this);

    let columns: Vec<Property> = if view.order.is_empty() {
        vec![Property::File("name".into())]
    } else {
        view.order.clone()
    };
    let first = page.start.min(keyed.len());
    let last = page.end.clamp(first, keyed.len());
    budget
        .alloc(((last - first) * std::mem::size_of::<Row>()) as u64)
        .map_err(|e| budget_error(e, 0))?;
    let mut rows = Vec::with_capacity(last - first);
    for (_, _, f) in &keyed[first..last] {
        let mark = ev.bytes_charged();
        ev.set_row(Some(*f));
        let mut cells = Vec::with_capacity(columns.len());
        for c in &columns {
            cells.push(match c.value(&mut ev, *f) {
                Ok(v) => Cell::Value(v),
                Err(EvalError {
                    spent: Some(spent),
                    message,
                    ..
                }) => return Err(BaseError::Budget(spent, message)),
                Err(e) => Cell::Error(e.message),
            });
        }
        // A row costs its width: what its cells hold, however they were reached.
        ev.set_row(None);
        ev.release_since(mark);
        budget
            .alloc(
                cells
                    .iter()
                    .map(|c| cell_width(c, budget.bytes_max()))
                    .fold(0u64, u64::saturating_add),
            )
            .map_err(|e| budget_error(e, 0))?;
        rows.push(Row { file: *f, cells });
    }

    let mut groups = Vec::new();
    if view.group_by.is_some() {
        let mut start = 0;
        while start < keyed.len() {
            let key = &keyed[start].0[0];
            let mut end = start + 1;
            while end < keyed.len() && keyed[end].0[0].cmp_to(key, false) == Ordering::Equal {
                end += 1;
            }
            budget
                .alloc(
                    ((end - start) * std::mem::size_of::<FileRef>() + std::mem::size_of::<Group>())
                        as u64,
                )
                .map_err(|e| budget_error(e, 0))?;
            let files: Vec<FileRef> = keyed[start..end].iter().map(|(_, _, f)| *f).collect();
            groups.push(Group {
                key: keyed[start].1.clone().unwrap_or(Value::Null),
                start,
                len: end - start,
                summaries: summaries(base, view, &mut ev, &files)?,
            });
            start = end;
        }
    }
    budget
        .alloc((keyed.len() * std::mem::size_of::<FileRef>()) as u64)
        .map_err(|e| budget_error(e, 0))?;
    let all: Vec<FileRef> = keyed.iter().map(|(_, _, f)| *f).collect();
    let summaries = summaries(base, view, &mut ev, &all)?;
    Ok(Output {
        total,
        first,
        columns,
        rows,
        groups,
        summaries,
        matched,
        filter_errors,
        filter_error_rows,
        steps: budget.used(),
    })
}

/// A row that passed the filters: its sort keys, the group value, the file.
type Kept = (Vec<SortKey>, Option<Value>, FileRef);

/// What one chunk of the parallel filter pass found.
#[derive(Default)]
struct Chunk {
    /// Rows that passed.
    kept: Vec<Kept>,
    errors: Vec<String>,
    error_rows: usize,
}

/// A spent budget as the query's error.
fn budget_error(e: crate::obsidian::budget::Spent, pos: u32) -> BaseError {
    BaseError::Budget(e, super::eval::spent(e, pos).message)
}

/// What a sort key holds beyond its slot.
fn key_width(k: &SortKey) -> u64 {
    std::mem::size_of::<SortKey>() as u64
        + match k {
            SortKey::Text(lower, text) => (lower.capacity() + text.capacity()) as u64,
            _ => 0,
        }
}

/// What a kept cell holds (counted up to `limit`).
fn cell_width(c: &Cell, limit: u64) -> u64 {
    SLOT + match c {
        Cell::Value(v) => v.width(limit),
        Cell::Error(m) => m.len() as u64,
    }
}

fn cell_value(p: &Property, ev: &mut Evaluator<'_>, f: FileRef) -> Result<Value, BaseError> {
    match p.value(ev, f) {
        Ok(v) => Ok(v),
        Err(EvalError {
            spent: Some(spent),
            message,
            ..
        }) => Err(BaseError::Budget(spent, message)),
        Err(_) => Ok(Value::Null),
    }
}

fn summaries(
    base: &Base,
    view: &View,
    ev: &mut Evaluator<'_>,
    files: &[FileRef],
) -> Result<Vec<Summary>, BaseError> {
    let mut out = Vec::new();
    let budget = ev.budget();
    let limit = budget.bytes_max();
    let spent = |e| budget_error(e, 0);
    for (prop, name) in &view.summaries {
        // The column's values are kept until the summary is computed, then dropped: each is
        // charged by its width, and all given back once the summary is done.
        let start = ev.bytes_charged();
        ev.alloc_bytes((files.len() as u64).saturating_mul(SLOT))
            .map_err(spent)?;
        let mut values = Vec::with_capacity(files.len());
        for &f in files {
            let mark = ev.bytes_charged();
            ev.set_row(Some(f));
            let v = cell_value(prop, ev, f)?;
            ev.set_row(None);
            ev.release_since(mark);
            ev.alloc_bytes(v.width(limit)).map_err(spent)?;
            values.push(v);
        }
        let custom = base.summaries.iter().find(|(n, _)| n == name);
        if custom.is_none() {
            // The numbers, dates or distinct values a built-in summary gathers.
            let each = if name.eq_ignore_ascii_case("unique") {
                SLOT + super::eval::UNIQUE_PER_VALUE
            } else {
                std::mem::size_of::<f64>() as u64 + std::mem::size_of::<super::value::Date>() as u64
            };
            ev.alloc_bytes((files.len() as u64).saturating_mul(each))
                .map_err(spent)?;
        }
        let value = if let Some((_, expr)) = custom {
            match expr {
                Ok(e) => {
                    ev.set_row(None);
                    ev.set_values(values);
                    match ev.eval(e) {
                        Ok(v) => Cell::Value(v),
                        Err(EvalError {
                            spent: Some(spent),
                            message,
                            ..
                        }) => return Err(BaseError::Budget(spent, message)),
                        Err(e) => Cell::Error(e.message),
                    }
                }
                Err(e) => Cell::Error(format!("summary `{name}` does not parse: {e}")),
            }
        } else {
            builtin_summary(name, &values)
        };
        ev.set_values(Vec::new());
        ev.release_since(start);
        ev.alloc_bytes(cell_width(&value, limit)).map_err(spent)?;
        out.push(Summary {
            property: prop.clone(),
            name: name.clone(),
            value,
        });
    }
    Ok(out)
}

/// The built-in summaries of the Bases syntax page.
pub fn builtin_summary(name: &str, values: &[Value]) -> Cell {
    let nums: Vec<f64> = values
        .iter()
        .filter(|v| matches!(v, Value::Number(_)))
        .filter_map(Value::as_number)
        .collect();
    let dates: Vec<super::value::Date> = values
        .iter()
        .filter_map(|v| match v {
            Value::Date(d) => Some(*d),
            _ => None,
        })
        .collect();
    let num = |x: Option<f64>| Cell::Value(x.map_or(Value::Null, Value::Number));
    let count = |n: usize| Cell::Value(Value::Number(n as f64));
    let min = || nums.iter().copied().reduce(f64::min);
    let max = || nums.iter().copied().reduce(f64::max);
    let mean = || (!nums.is_empty()).then(|| nums.iter().sum::<f64>() / nums.len() as f64);
    match name.to_ascii_lowercase().as_str() {
        "average" | "mean" => num(mean()),
        "min" => num(min()),
        "max" => num(max()),
        "sum" => num(Some(nums.iter().sum())),
        "range" => {
            if nums.is_empty() && !dates.is_empty() {
                let lo = dates.iter().map(|d| d.at).min();
                let hi = dates.iter().map(|d| d.at).max();
                match (lo, hi) {
                    (Some(lo), Some(hi)) => Cell::Value(Value::Duration(super::value::Duration {
                        months: 0,
                        ms: (hi - lo).num_milliseconds() as f64,
                    })),
                    _ => Cell::Value(Value::Null),
                }
            } else {
                num(min().zip(max()).map(|(a, b)| b - a))
            }
        }
        "median" => {
            let mut s = nums.clone();
            s.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
            num(if s.is_empty() {
                None
            } else if s.len() % 2 == 1 {
                Some(s[s.len() / 2])
            } else {
                Some((s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0)
            })
        }
        "stddev" => num(mean().map(|m| {
            (nums.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / nums.len() as f64).sqrt()
        })),
        "earliest" => Cell::Value(
            dates
                .iter()
                .min_by_key(|d| d.at)
                .map_or(Value::Null, |d| Value::Date(*d)),
        ),
        "latest" => Cell::Value(
            dates
                .iter()
                .max_by_key(|d| d.at)
                .map_or(Value::Null, |d| Value::Date(*d)),
        ),
        "checked" => count(
            values
                .iter()
                .filter(|v| matches!(v, Value::Bool(true)))
                .count(),
        ),
        "unchecked" => count(
            values
                .iter()
                .filter(|v| matches!(v, Value::Bool(false)))
                .count(),
        ),
        "empty" => count(values.iter().filter(|v| v.is_empty()).count()),
        "filled" => count(values.iter().filter(|v| !v.is_empty()).count()),
        "unique" => {
            let filled: Vec<Value> = values.iter().filter(|v| !v.is_empty()).cloned().collect();
            count(super::value::distinct(&filled).len())
        }
        _ => Cell::Error(format!("unknown summary `{name}`")),
    }
}

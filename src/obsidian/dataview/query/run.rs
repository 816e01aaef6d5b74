//! Running a parsed query: the source's pages, the data commands in written order, the result.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;

use super::ast::{Command, Expr, Header, Query, Source};
use super::eval::{
    DvSource, Ev, EvalError, PageId, Row, SLOT, expand_tags, heap_size, item_at, page_link, truthy,
};
use super::render::{Output, QueryResult, TaskRow};
use crate::obsidian::dataview::Value;

/// Where each page stands in the sorted page list: a table when the ids are small numbers (a
/// vault numbers its pages from 0), else a map.
enum PageIndex {
    Table(Vec<usize>),
    Map(HashMap<PageId, usize>),
}

impl PageIndex {
    fn new(all: &[PageId]) -> PageIndex {
        let max = all.iter().copied().max().unwrap_or(0);
        if max < all.len().saturating_mul(2) {
            let mut table = vec![usize::MAX; max.saturating_add(1)];
            for (i, &p) in all.iter().enumerate() {
                table[p] = i;
            }
            PageIndex::Table(table)
        } else {
            PageIndex::Map(all.iter().enumerate().map(|(i, p)| (*p, i)).collect())
        }
    }

    fn get(&self, p: PageId) -> Option<usize> {
        match self {
            PageIndex::Table(t) => t.get(p).copied().filter(|&i| i != usize::MAX),
            PageIndex::Map(m) => m.get(&p).copied(),
        }
    }
}

/// Evaluates a parsed query.
pub fn run<S: DvSource + ?Sized>(
    query: &Query,
    src: &S,
    ctx: &super::Context,
) -> Result<QueryResult, EvalError> {
    let ev = Ev::new(src, ctx);
    let mut all = src.pages();
    if !src.pages_in_path_order() {
        all.sort_by(|a, b| src.path(*a).cmp(src.path(*b)));
    }
    ev.charge(all.len() as u64, 0)?;
    let pages: Vec<PageId> = match &query.source {
        None => all.clone(),
        Some(s) => {
            let index = PageIndex::new(&all);
            let set = source_set(&ev, s, &all, &index)?;
            all.iter()
                .zip(set)
                .filter(|(_, k)| *k)
                .map(|(p, _)| *p)
                .collect()
        }
    };
    let is_task = matches!(query.header, Header::Task);
    let mut rows: Vec<Row> = Vec::new();
    for p in pages {
        if is_task {
            if let Some(note) = src.note(p) {
                ev.charge(note.items.len() as u64, 0)?;
                for (i, item) in note.items.iter().enumerate() {
                    if item.task.is_some() {
                        rows.push(Row {
                            page: Some(p),
                            task: Some(i),
                            ..Row::default()
                        });
                    }
                }
            }
        } else {
            rows.push(Row {
                page: Some(p),
                ..Row::default()
            });
        }
        cap(&rows, ctx)?;
    }
    let mut grouped = false;
    let mut warnings = Vec::new();
    for (ci, c) in query.commands.iter().enumerate() {
        match c {
            Command::Where(e) => {
                let n = rows.len();
                let mut first_err = None;
                let mut kept = Vec::with_capacity(n);
                for r in rows {
                    // What the condition builds is dropped with it: its bytes are given back.
                    let (before, held) = (ctx.budget.bytes_used(), ev.kept_bytes());
                    let v = ev.eval(e, &r);
                    give_back(&ev, before, held);
                    match v {
                        Ok(v) if truthy(&v) => kept.push(r),
                        Ok(_) => {}
                        Err(err) if err.fatal() => return Err(err),
                        Err(err) => {
                            first_err.get_or_insert(err);
                        }
                    }
                }
                if let Some(err) = first_err {
                    if kept.is_empty() {
                        return Err(err);
                    }
                    warnings.push(format!("WHERE failed on some rows: {}", err.message));
                }
                rows = kept;
            }
            Command::Sort(keys) => {
                let mut keyed = Vec::with_capacity(rows.len());
                for r in rows {
                    let mut ks = Vec::with_capacity(keys.len());
                    for (e, _) in keys {
                        ks.push(kept_value(&ev, e, &r)?);
                    }
                    keyed.push((ks, r));
                }
                let n = keyed.len() as u64;
                ev.charge(n * (64 - n.leading_zeros() as u64) * keys.len() as u64, 0)?;
                // The rows' positions break ties, so the order is total and the same as
                // Dataview's stable sort.
                let order = |(a, ia): &(Vec<Value>, usize), (b, ib): &(Vec<Value>, usize)| {
                    for (i, (_, desc)) in keys.iter().enumerate() {
                        let o = ev.compare(&a[i], &b[i]);
                        let o = if *desc { o.reverse() } else { o };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    ia.cmp(ib)
                };
                let (mut order_keys, mut rows_by_index): (Vec<(Vec<Value>, usize)>, Vec<Row>) =
                    keyed
                        .into_iter()
                        .enumerate()
                        .map(|(i, (ks, r))| ((ks, i), r))
                        .unzip();
                // `SORT … LIMIT k`: only the first k rows are kept, so they are selected (linear)
                // and only they sorted, instead of sorting every row.
                match limit_after(&ev, query.commands.get(ci + 1)) {
                    Some(k) if k < order_keys.len() => {
                        if k == 0 {
                            order_keys.clear();
                        } else {
                            order_keys.select_nth_unstable_by(k - 1, order);
                            order_keys.truncate(k);
                        }
                        order_keys.sort_unstable_by(order);
                    }
                    _ => order_keys.sort_unstable_by(order),
                }
                let mut taken: Vec<Option<Row>> = rows_by_index.drain(..).map(Some).collect();
                rows = order_keys
                    .into_iter()
                    .filter_map(|(_, i)| taken[i].take())
                    .collect();
            }
            Command::GroupBy(e, name) => {
                // A group's key and rows reach the answer: the pages they are read from count.
                ev.record(true);
                let mut keyed = Vec::with_capacity(rows.len());
                for r in rows {
                    keyed.push((kept_value(&ev, e, &r)?, r));
                }
                ev.record(false);
                let n = keyed.len() as u64;
                ev.charge(n * (64 - n.leading_zeros() as u64), e.pos)?;
                // A group holds its key twice (`key` and the name given) and its rows.
                ev.alloc(
                    keyed
                        .iter()
                        .map(|(k, _)| 2 * heap_size(k) + ROW)
                        .sum::<u64>(),
                    e.pos,
                )?;
                keyed.sort_by(|(a, _), (b, _)| ev.compare(a, b));
                let mut groups: Vec<(Value, Vec<Row>)> = Vec::new();
                for (k, r) in keyed {
                    match groups.last_mut() {
                        Some((gk, members)) if ev.compare(gk, &k) == Ordering::Equal => {
                            members.push(r)
                        }
                        _ => groups.push((k, vec![r])),
                    }
                }
                rows = groups
                    .into_iter()
                    .map(|(k, members)| {
                        let mut bound = vec![("key".to_owned(), k.clone())];
                        if let Some(n) = name {
                            bound.push((n.clone(), k));
                        }
                        Row {
                            page: None,
                            task: None,
                            bound,
                            members: Some(Rc::new(members)),
                        }
                    })
                    .collect();
                grouped = true;
            }
            Command::Flatten(e, name) => {
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    ev.record(true);
                    let v = non_fatal(ev.eval(e, &r));
                    ev.record(false);
                    let items = match v? {
                        Value::List(items) if !items.is_empty() => items,
                        Value::List(_) => vec![Value::Null],
                        v => vec![v],
                    };
                    ev.charge(items.len() as u64, e.pos)?;
                    // Every new row is a copy of this one: the row cap and the copies' bytes
                    // are checked before any copy is made.
                    cap_at(out.len().saturating_add(items.len()), ctx)?;
                    // A copy's bound names, the new one among them in a vector that may
                    // hold four entries for one.
                    let width: u64 = r
                        .bound
                        .iter()
                        .filter(|(k, _)| k != name)
                        .map(|(k, v)| k.len() as u64 + ENTRY + heap_size(v))
                        .sum::<u64>()
                        + name.len() as u64
                        + 4 * ENTRY
                        + ROW;
                    ev.alloc(width.saturating_mul(items.len() as u64), e.pos)?;
                    for it in items {
                        let mut nr = r.clone();
                        nr.bound.retain(|(k, _)| k != name);
                        nr.bound.push((name.clone(), it));
                        out.push(nr);
                    }
                }
                rows = out;
            }
            Command::Limit(e) => {
                let v = ev.eval(e, &Row::default())?;
                match v {
                    Value::Number(n) if n >= 0.0 => rows.truncate(n as usize),
                    _ => {
                        return Err(EvalError::new(
                            "LIMIT needs a number that is zero or more",
                            e.pos,
                        ));
                    }
                }
            }
        }
    }
    let count = rows.len();
    // What the header evaluates is the answer: the pages it reads count, and so do the pages
    // of grouped rows (`rows` in an expression reads them too).
    ev.record(true);
    let output = match &query.header {
        Header::List { without_id, expr } => {
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let id = (!without_id).then(|| id_of(&ev, r));
                let value = match expr {
                    // A kept value costs its width, however it was reached.
                    Some(e) => Some(kept_value(&ev, e, r)?),
                    None => None,
                };
                out.push((id.unwrap_or(None), value));
            }
            Output::List {
                show_id: !without_id,
                rows: out,
            }
        }
        Header::Table {
            without_id,
            columns,
        } => {
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let mut cells = Vec::with_capacity(columns.len() + 1);
                if !without_id {
                    cells.push(id_of(&ev, r).unwrap_or(Value::Null));
                }
                for c in columns {
                    cells.push(kept_value(&ev, &c.expr, r)?);
                }
                out.push(cells);
            }
            let mut names: Vec<String> = Vec::new();
            let id_column = (!without_id).then(|| {
                if grouped {
                    ctx.settings.table_group_column_name.clone()
                } else {
                    ctx.settings.table_id_column_name.clone()
                }
            });
            if let Some(n) = &id_column {
                names.push(n.clone());
            }
            names.extend(columns.iter().map(|c| c.name.clone()));
            Output::Table {
                id_column,
                columns: names,
                rows: out,
            }
        }
        Header::Task => {
            let mut groups: Vec<(Value, Vec<TaskRow>)> = Vec::new();
            if grouped {
                for r in &rows {
                    let key = id_of(&ev, r).unwrap_or(Value::Null);
                    let mut tasks = Vec::new();
                    if let Some(m) = &r.members {
                        for mr in m.iter() {
                            if let (Some(p), Some(i)) = (mr.page, mr.task) {
                                tasks.push((p, i));
                            }
                        }
                    }
                    groups.push((key, task_rows(&ev, &tasks)));
                }
            } else {
                let mut by_page: Vec<(PageId, Vec<(PageId, usize)>)> = Vec::new();
                for r in &rows {
                    if let (Some(p), Some(i)) = (r.page, r.task) {
                        match by_page.iter_mut().find(|(q, _)| *q == p) {
                            Some((_, v)) => v.push((p, i)),
                            None => by_page.push((p, vec![(p, i)])),
                        }
                    }
                }
                for (p, tasks) in by_page {
                    groups.push((page_link(src.path(p)), task_rows(&ev, &tasks)));
                }
            }
            Output::Task { groups }
        }
        Header::Calendar(e) => {
            let mut out = Vec::new();
            for r in &rows {
                if let Value::Date(d) = kept_value(&ev, e, r)?
                    && let Some(p) = r.page
                {
                    out.push((d, page_link(src.path(p))));
                }
            }
            Output::Calendar { entries: out }
        }
    };
    // A page the source refused to build past the budget is never part of an answer.
    ev.source_spent(0)?;
    Ok(QueryResult {
        output,
        count,
        truncated: false,
        grouped,
        warnings,
        sources: ev.pages_read(),
    })
}

/// A row's id: its page's link, or its group's key.
fn id_of<S: DvSource + ?Sized>(ev: &Ev<'_, S>, r: &Row) -> Option<Value> {
    if r.members.is_some() {
        return r.bound.first().map(|(_, k)| k.clone());
    }
    r.page.map(|p| page_link(ev.src.path(p)))
}

/// Tasks with their sub-items; a task below another task of the list is shown under it only.
fn task_rows<S: DvSource + ?Sized>(ev: &Ev<'_, S>, tasks: &[(PageId, usize)]) -> Vec<TaskRow> {
    let listed: std::collections::HashSet<(PageId, usize)> = tasks.iter().copied().collect();
    let mut out = Vec::new();
    for &(p, i) in tasks {
        let Some(note) = ev.src.note(p) else { continue };
        // Skip when an ancestor is also listed.
        let mut parent = note.items.get(i).and_then(|it| it.parent);
        let mut shadowed = false;
        let mut hops = 0;
        while let Some(line) = parent {
            hops += 1;
            if hops > 1000 {
                break;
            }
            let Some(pi) = item_at(note, line) else {
                break;
            };
            if listed.contains(&(p, pi)) {
                shadowed = true;
                break;
            }
            parent = note.items[pi].parent;
        }
        if !shadowed {
            out.push(task_tree(note, ev.src.path(p), i, 0));
        }
    }
    out
}

fn task_tree(
    note: &crate::obsidian::dataview::DataviewNote,
    path: &str,
    i: usize,
    depth: usize,
) -> TaskRow {
    let item = &note.items[i];
    let children = if depth < 32 {
        item.children
            .iter()
            .filter_map(|line| item_at(note, *line))
            .map(|ci| task_tree(note, path, ci, depth + 1))
            .collect()
    } else {
        Vec::new()
    };
    TaskRow {
        path: path.to_owned(),
        line: item.line,
        text: item.text.clone(),
        status: item.task.map(|t| t.status),
        children,
    }
}

/// Gives back to the budget what was built since `before` (its bytes used then) and has been
/// dropped: everything but what the query keeps to its end (the pages read, their merged
/// fields: `held` was [`Ev::kept_bytes`] then).
fn give_back<S: DvSource + ?Sized>(ev: &Ev<'_, S>, before: u64, held: u64) {
    let budget = &ev.ctx.budget;
    let built = budget.bytes_used().saturating_sub(before);
    budget.release(built.saturating_sub(ev.kept_bytes().saturating_sub(held)));
}

/// `e` on `r` for a value the query keeps (a cell, a sort or group key): what evaluating it
/// built and dropped is given back, and the value kept is charged its width. A `LIST
/// length(file.lists)` over every page costs the pages it reads, not every list it counted.
fn kept_value<S: DvSource + ?Sized>(ev: &Ev<'_, S>, e: &Expr, r: &Row) -> Result<Value, EvalError> {
    let (before, held) = (ev.ctx.budget.bytes_used(), ev.kept_bytes());
    let v = non_fatal(ev.eval(e, r));
    give_back(ev, before, held);
    let v = v?;
    ev.alloc(heap_size(&v) + SLOT, e.pos)?;
    Ok(v)
}

fn non_fatal(r: Result<Value, EvalError>) -> Result<Value, EvalError> {
    match r {
        Ok(v) => Ok(v),
        Err(e) if e.fatal() => Err(e),
        Err(_) => Ok(Value::Null),
    }
}

/// What a row costs beyond its bound values.
const ROW: u64 = std::mem::size_of::<Row>() as u64;
/// Bytes of one bound name and its value in a row's vector.
const ENTRY: u64 = std::mem::size_of::<(String, Value)>() as u64;

fn cap(rows: &[Row], ctx: &super::Context) -> Result<(), EvalError> {
    cap_at(rows.len(), ctx)
}

fn cap_at(n: usize, ctx: &super::Context) -> Result<(), EvalError> {
    let max = ctx.max_rows.min(super::eval::MAX_ROWS);
    if n > max {
        return Err(EvalError {
            message: format!("the query would hold more than {max} rows"),
            pos: 0,
            spent: Some(crate::obsidian::budget::Spent::Steps(max as u64)),
        });
    }
    Ok(())
}

/// The pages a source selects, as flags aligned with `all`.
fn source_set<S: DvSource + ?Sized>(
    ev: &Ev<'_, S>,
    s: &Source,
    all: &[PageId],
    index: &PageIndex,
) -> Result<Vec<bool>, EvalError> {
    ev.charge(all.len() as u64, 0)?;
    let src = ev.src;
    let mut set = vec![false; all.len()];
    let mut mark = |p: PageId| {
        if let Some(i) = index.get(p) {
            set[i] = true;
        }
    };
    match s {
        Source::Tag(t) => match src.pages_with_tag(t) {
            Some(ps) => ps.into_iter().for_each(&mut mark),
            None => {
                let want = t.to_lowercase();
                for &p in all {
                    if expand_tags(&src.tags(p))
                        .iter()
                        .any(|x| x.to_lowercase() == want)
                    {
                        mark(p);
                    }
                }
            }
        },
        Source::Path(path) => {
            let folder = path.trim_end_matches('/');
            let prefix = format!("{folder}/");
            let in_folder: Vec<PageId> = all
                .iter()
                .copied()
                .filter(|&p| folder.is_empty() || src.path(p).starts_with(&prefix))
                .collect();
            if in_folder.is_empty() {
                for &p in all {
                    let q = src.path(p);
                    if q == path || q.strip_suffix(".md") == Some(path.as_str()) {
                        mark(p);
                    }
                }
            } else {
                in_folder.into_iter().for_each(&mut mark);
            }
        }
        Source::Link(target) => {
            let t = if target.is_empty() || target == "#" {
                ev.ctx.this
            } else {
                src.resolve(target, ev.ctx.this)
            };
            if let Some(t) = t {
                src.inlinks(t).into_iter().for_each(&mut mark);
            }
        }
        Source::Outgoing(target) => {
            let t = if target.is_empty() || target == "#" {
                ev.ctx.this
            } else {
                src.resolve(target, ev.ctx.this)
            };
            if let Some(t) = t {
                for l in src.outlinks(t) {
                    if let Some(p) = src.resolve(&l.path, Some(t)) {
                        mark(p);
                    }
                }
            }
        }
        Source::And(a, b) => {
            let x = source_set(ev, a, all, index)?;
            let y = source_set(ev, b, all, index)?;
            return Ok(x.iter().zip(y).map(|(a, b)| *a && b).collect());
        }
        Source::Or(a, b) => {
            let x = source_set(ev, a, all, index)?;
            let y = source_set(ev, b, all, index)?;
            return Ok(x.iter().zip(y).map(|(a, b)| *a || b).collect());
        }
        Source::Not(a) => {
            return Ok(source_set(ev, a, all, index)?
                .into_iter()
                .map(|b| !b)
                .collect());
        }
    }
    Ok(set)
}

/// The row count of a `LIMIT` that directly follows, when it is a number that can be read
/// without a row (as `LIMIT` itself reads it); `None` otherwise.
fn limit_after<S: DvSource + ?Sized>(ev: &Ev<'_, S>, next: Option<&Command>) -> Option<usize> {
    match next {
        Some(Command::Limit(e)) => match ev.eval(e, &Row::default()) {
            Ok(Value::Number(n)) if n >= 0.0 && n.is_finite() => Some(n as usize),
            _ => None,
        },
        _ => None,
    }
}

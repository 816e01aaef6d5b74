//! A DQL answer as one reply: a page of rows within the reply's bound, the Markdown Obsidian
//! would show, and the provenance of what the rows hold.

use super::*;

pub(super) fn page(
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
pub(super) trait OutputRows {
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
pub(super) fn cut_text(text: &mut String, room: &mut usize) {
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
pub(super) fn shrink(v: &mut Value, room: &mut usize) {
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

pub(super) fn shrink_tasks(tasks: &mut Vec<TaskRow>, room: &mut usize) {
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
pub(super) fn provenance_of(
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

pub(super) fn keep<T>(v: &mut Vec<T>, start: usize, n: usize) {
    v.drain(..start.min(v.len()));
    v.truncate(n);
}

//! The Tasks plugin's queries in `run_query`: run over the model's tasks, paged and rendered.

use super::*;

pub(super) fn task_json(t: &TaskRow) -> Json {
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

/// The error of a Tasks query: the request's budget spent (`budget_exceeded`, `busy`,
/// cancelled), or the query's own fault.
pub(super) fn tasks_error(e: tasks::EvalError, at: &str, param: &'static str) -> NoteError {
    match e.spent() {
        Some(spent) => NoteError::spent(spent, format!("{at}: {e}")),
        None => NoteError::invalid(param, format!("{at}: {e}")),
    }
}

/// One Tasks query over every task of the vault.
pub(super) fn run_tasks(
    engine: &Engine,
    text: &str,
    at: &str,
    path: Option<VaultPath>,
    today: chrono::NaiveDate,
    (start, limit, key): (usize, usize, u64),
) -> Result<QueryReply, NoteError> {
    // The argument the query came from: `path` for a note's block.
    let param = if path.is_some() { "path" } else { "query" };
    let settings = crate::notes::settings::tasks_settings(engine.vault());
    let rules = crate::notes::tasks::TaskRules::new(&settings);
    let model = engine.model()?;
    let budget = crate::notes::cancel::budget();
    let spent = |s: Spent| tasks_error(s.into(), at, param);
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
        .map_err(|e| tasks_error(e, at, param))?;
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
        let item = serde_json::to_value(crate::notes::tasks::task_item(p, t, today, &rules))
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
            .map_err(|e| tasks_error(e, at, param))?,
        path: path.map(|p| p.to_string()),
        warnings: Vec::new(),
        provenance: Default::default(),
    })
}

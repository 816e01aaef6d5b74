//! Query results, the text of values, and Markdown like Obsidian shows it.

use chrono::{Datelike, Timelike};

use super::DataviewSettings;
use crate::obsidian::bases::value::number_text;
use crate::obsidian::dataview::value::Duration;
use crate::obsidian::dataview::{DvDate, Link, Subpath, Value};

/// A task in a TASK result, with its sub-items.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub path: String,
    /// 0-based line.
    pub line: usize,
    pub text: String,
    /// The checkbox's character (`None`: a plain list item under a task).
    pub status: Option<char>,
    pub children: Vec<TaskRow>,
}

/// What a query type returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Each row: its id (the page's link or the group's key; `None` with `WITHOUT ID`) and
    /// the value of LIST's expression, if it has one.
    List {
        show_id: bool,
        rows: Vec<(Option<Value>, Option<Value>)>,
    },
    /// Column names (the id column first unless `WITHOUT ID`) and rows of cells.
    Table {
        id_column: Option<String>,
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    },
    /// Tasks grouped by page (key: the page's link) or by the GROUP BY key.
    Task { groups: Vec<(Value, Vec<TaskRow>)> },
    /// `(date, page link)` pairs.
    Calendar { entries: Vec<(DvDate, Value)> },
}

/// The answer of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub output: Output,
    /// Rows after every command (groups when grouped).
    pub count: usize,
    /// Rows were cut by the caller's cap ([`QueryResult::truncate`]).
    pub truncated: bool,
    /// The rows are groups (GROUP BY).
    pub grouped: bool,
    /// Non-fatal problems (a WHERE that failed on some rows).
    pub warnings: Vec<String>,
    /// The pages whose data the answer's values were read from (FLATTEN, GROUP BY and the
    /// query's own expressions; not WHERE or SORT, which only choose), for their provenance.
    pub sources: Vec<super::PageId>,
}

impl QueryResult {
    /// Keeps at most `n` rows (groups for TASK), setting [`QueryResult::truncated`].
    pub fn truncate(&mut self, n: usize) {
        let cut = match &mut self.output {
            Output::List { rows, .. } => cut(rows, n),
            Output::Table { rows, .. } => cut(rows, n),
            Output::Task { groups } => cut(groups, n),
            Output::Calendar { entries } => cut(entries, n),
        };
        self.truncated |= cut;
    }

    /// Markdown as Obsidian renders the result (the id column's header carries the count
    /// when `showResultCount` is on).
    pub fn to_markdown(&self, settings: &DataviewSettings) -> String {
        let cell = |v: &Value| markdown_value(v, settings);
        let mut out = String::new();
        match &self.output {
            Output::List { rows, .. } => {
                for (id, value) in rows {
                    let line = match (id, value) {
                        (Some(i), Some(v)) => format!("{}: {}", cell(i), cell(v)),
                        (Some(i), None) => cell(i),
                        (None, Some(v)) => cell(v),
                        (None, None) => String::new(),
                    };
                    out.push_str(&format!("- {}\n", line.replace('\n', " ")));
                }
            }
            Output::Table {
                id_column,
                columns,
                rows,
            } => {
                let head: Vec<String> = columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if i == 0 && id_column.is_some() && settings.show_result_count {
                            format!("{c} ({})", self.count)
                        } else {
                            c.clone()
                        }
                    })
                    .map(|c| escape_cell(&c))
                    .collect();
                out.push_str(&format!("| {} |\n", head.join(" | ")));
                // `TABLE WITHOUT ID` with no column still makes a table: one empty column.
                out.push_str(&format!("|{}\n", " --- |".repeat(head.len().max(1))));
                for r in rows {
                    let cells: Vec<String> = r.iter().map(|v| escape_cell(&cell(v))).collect();
                    out.push_str(&format!("| {} |\n", cells.join(" | ")));
                }
            }
            Output::Task { groups } => {
                for (key, tasks) in groups {
                    out.push_str(&format!("### {}\n\n", cell(key)));
                    for t in tasks {
                        task_markdown(t, 0, &mut out);
                    }
                    out.push('\n');
                }
            }
            Output::Calendar { entries } => {
                for (d, link) in entries {
                    out.push_str(&format!(
                        "- {}: {}\n",
                        d.date.at.format("%Y-%m-%d"),
                        cell(link)
                    ));
                }
            }
        }
        out
    }
}

fn cut<T>(v: &mut Vec<T>, n: usize) -> bool {
    let c = v.len() > n;
    v.truncate(n);
    c
}

fn task_markdown(t: &TaskRow, depth: usize, out: &mut String) {
    let indent = "    ".repeat(depth);
    let text = t.text.replace('\n', " ");
    match t.status {
        Some(s) => out.push_str(&format!("{indent}- [{s}] {text}\n")),
        None => out.push_str(&format!("{indent}- {text}\n")),
    }
    for c in &t.children {
        task_markdown(c, depth + 1, out);
    }
}

fn escape_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', "<br>")
}

/// A link as Markdown: `[[path|display]]`, a page's link showing its name.
pub fn link_markdown(l: &Link) -> String {
    let path = l.path.strip_suffix(".md").unwrap_or(&l.path);
    let sub = match &l.subpath {
        Some(Subpath::Heading(h)) => format!("#{h}"),
        Some(Subpath::Block(b)) => format!("#^{b}"),
        None => String::new(),
    };
    let bang = if l.embed { "!" } else { "" };
    let name = path.rsplit('/').next().unwrap_or(path);
    match &l.display {
        Some(d) => format!("{bang}[[{path}{sub}|{d}]]"),
        None if path.contains('/') && sub.is_empty() => format!("{bang}[[{path}|{name}]]"),
        None => format!("{bang}[[{path}{sub}]]"),
    }
}

/// A value in a rendered cell: null as the setting says, lists as bullets joined by `<br>`.
pub fn markdown_value(v: &Value, s: &DataviewSettings) -> String {
    match v {
        Value::Null => s.render_null_as.clone(),
        Value::List(items) if items.is_empty() => s.render_null_as.clone(),
        Value::List(items) => items
            .iter()
            .map(|i| format!("- {}", markdown_value(i, s)))
            .collect::<Vec<_>>()
            .join("<br>"),
        Value::Link(l) => link_markdown(l),
        Value::Date(d) => date_display(d, s),
        other => value_text(other, s),
    }
}

/// A date with the display format of the settings.
pub fn date_display(d: &DvDate, s: &DataviewSettings) -> String {
    let fmt = if d.date.time {
        &s.datetime_format
    } else {
        &s.date_format
    };
    format_date(d, fmt)
}

/// Dataview's text of a value (`string()`).
pub fn value_text(v: &Value, s: &DataviewSettings) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_text(*n),
        Value::Text(t) => t.clone(),
        Value::Date(d) => date_display(d, s),
        Value::Duration(d) => duration_text(d),
        Value::Link(l) => link_markdown(l),
        Value::List(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| value_text(i, s))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(o) => {
            if o.is_empty() {
                "{}".into()
            } else {
                format!(
                    "{{ {} }}",
                    o.iter()
                        .map(|(k, v)| format!("{k}: {}", value_text(v, s)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        }
    }
}

/// `8 hours`, `1 day, 3 hours`: the non-zero units, years to milliseconds, as Luxon's
/// `toHuman` writes them (Dataview's rendering). Each part carries its own sign, as Luxon's
/// number format writes it: a negative duration is `-11 months, -6 days`.
pub fn duration_text(d: &Duration) -> String {
    let mut parts = Vec::new();
    let mut push = |n: u64, negative: bool, unit: &str| {
        if n > 0 {
            let sign = if negative { "-" } else { "" };
            parts.push(format!("{sign}{n} {unit}{}", if n == 1 { "" } else { "s" }));
        }
    };
    let months = d.months.unsigned_abs();
    push(months / 12, d.months < 0, "year");
    push(months % 12, d.months < 0, "month");
    let mut ms = d.ms.abs().round() as u64;
    for (len, unit) in [
        (7 * 86_400_000u64, "week"),
        (86_400_000, "day"),
        (3_600_000, "hour"),
        (60_000, "minute"),
        (1000, "second"),
        (1, "millisecond"),
    ] {
        push(ms / len, d.ms < 0.0, unit);
        ms %= len;
    }
    if parts.is_empty() {
        return "0 milliseconds".into();
    }
    parts.join(", ")
}

use crate::obsidian::moment::{MONTHS, WEEKDAYS};

/// Formats a date with Luxon's tokens (the common ones: `yyyy yy y MMMM MMM MM M LLLL LLL LL
/// L dd d EEEE EEE E cccc ccc c HH H hh h mm m ss s SSS a WW W kkkk o ooo q x X`, `'quoted
/// text'`); other letters are kept as written.
pub fn format_date(d: &DvDate, fmt: &str) -> String {
    let at = d.date.at;
    let mut out = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '\'' {
                out.push(chars[j]);
                j += 1;
            }
            if j == i + 1 && chars.get(j) == Some(&'\'') {
                out.push('\'');
            }
            i = j + 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            out.push(c);
            i += 1;
            continue;
        }
        let mut n = 1;
        while chars.get(i + n) == Some(&c) {
            n += 1;
        }
        let month = at.month0() as usize;
        // The English names, as Moment's (whose weeks start on Sunday).
        let wd = at.weekday().num_days_from_sunday() as usize;
        let h12 = match at.hour() % 12 {
            0 => 12,
            h => h,
        };
        let s = match (c, n) {
            ('y', 2) => format!("{:02}", at.year().rem_euclid(100)),
            ('y', 4) => format!("{:04}", at.year()),
            ('y', _) => at.year().to_string(),
            ('M' | 'L', 1) => at.month().to_string(),
            ('M' | 'L', 2) => format!("{:02}", at.month()),
            ('M' | 'L', 3) => MONTHS[month][..3].to_owned(),
            ('M' | 'L', _) => MONTHS[month].to_owned(),
            ('d', 1) => at.day().to_string(),
            ('d', _) => format!("{:02}", at.day()),
            ('E' | 'c', 1) => at.weekday().number_from_monday().to_string(),
            ('E' | 'c', 3) => WEEKDAYS[wd][..3].to_owned(),
            ('E' | 'c', _) => WEEKDAYS[wd].to_owned(),
            ('H', 1) => at.hour().to_string(),
            ('H', _) => format!("{:02}", at.hour()),
            ('h', 1) => h12.to_string(),
            ('h', _) => format!("{h12:02}"),
            ('m', 1) => at.minute().to_string(),
            ('m', _) => format!("{:02}", at.minute()),
            ('s', 1) => at.second().to_string(),
            ('s', _) => format!("{:02}", at.second()),
            ('S', _) => format!("{:03}", at.nanosecond() / 1_000_000),
            ('a', _) => if at.hour() < 12 { "AM" } else { "PM" }.to_owned(),
            ('W', 1) => at.iso_week().week().to_string(),
            ('W', _) => format!("{:02}", at.iso_week().week()),
            ('k', 2) => format!("{:02}", at.iso_week().year().rem_euclid(100)),
            ('k', _) => at.iso_week().year().to_string(),
            ('o', 1) => at.ordinal().to_string(),
            ('o', _) => format!("{:03}", at.ordinal()),
            ('q', _) => (at.month0() / 3 + 1).to_string(),
            ('x', _) => super::eval::date_millis(d).to_string(),
            ('X', _) => (super::eval::date_millis(d) / 1000).to_string(),
            _ => std::iter::repeat_n(c, n).collect(),
        };
        out.push_str(&s);
        i += n;
    }
    out
}

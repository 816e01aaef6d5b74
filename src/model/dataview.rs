//! Each note's Dataview data as the model keeps it: the page's inline fields and the tasks,
//! in compact form, for the notes that have any.
//!
//! The data comes from [`crate::obsidian::dataview::parse_note_with`], run where the scan
//! parses a note (so a note is read once for the parser, the search index and this), and only
//! for notes whose text can hold a field or a task ([`may_have_data`]: a `::`, a task
//! checkbox, or a Tasks date emoji on a list line): most notes of most vaults have neither and
//! cost nothing here. List items that are not tasks are not kept (their fields are, as page
//! fields); a caller that needs them parses the note's text again.
//!
//! Memory: a task is one [`Task`] (its text, the Tasks fields, section, tags and inline fields,
//! boxed slices rather than vectors), a note without data has no entry at all.

use std::sync::Arc;

use crate::markdown::ParsedNote;
use crate::obsidian::dataview::{self, FieldSyntax, InlineField, TasksFields, Value};

/// An inline field as the model keeps it: where, the key and the value's text as written, and
/// how it was written. Its sanitised key and typed value are computed when asked for (they
/// are functions of the key and the text), which keeps a field at a third of an
/// [`InlineField`]'s size.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// 0-based line.
    pub line: u32,
    key: Key,
    raw: Box<str>,
    /// How it was written.
    pub syntax: FieldSyntax,
}

/// A field's key: Dataview's shorthand names without an allocation.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    Static(&'static str),
    Own(Box<str>),
}

/// The names Dataview gives the Tasks emoji dates.
const SHORTHANDS: [&str; 5] = ["created", "start", "scheduled", "due", "completion"];

impl Field {
    fn new(f: InlineField) -> Field {
        let key = match SHORTHANDS.iter().find(|k| **k == f.key) {
            Some(k) => Key::Static(k),
            None => Key::Own(f.key.into_boxed_str()),
        };
        Field {
            line: u32::try_from(f.line).unwrap_or(u32::MAX),
            key,
            raw: f.raw.into_boxed_str(),
            syntax: f.syntax,
        }
    }

    /// The key as written.
    pub fn key(&self) -> &str {
        match &self.key {
            Key::Static(k) => k,
            Key::Own(k) => k,
        }
    }

    /// The value's text, trimmed.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The sanitised key ([`dataview::canonical_key`]).
    pub fn canonical(&self) -> String {
        dataview::canonical_key(self.key())
    }

    /// The typed value, as Dataview types the text.
    pub fn value(&self) -> Value {
        dataview::value::parse_inline_value(&self.raw)
    }

    /// The field as the parser gave it.
    /// An upper bound of what [`Field::to_inline`] allocates: the key twice, the raw text, and
    /// a value parsed from it (at most twice its length, plus a link's or a list's slots).
    pub fn inline_cost(&self) -> u64 {
        let key = self.key().len() as u64;
        2 * key + 3 * self.raw.len() as u64 + 256
    }

    pub fn to_inline(&self) -> InlineField {
        InlineField {
            line: self.line as usize,
            key: self.key().to_owned(),
            canonical: self.canonical(),
            raw: self.raw.to_string(),
            value: self.value(),
            syntax: self.syntax,
        }
    }
}

/// One task (a list item with a checkbox) of a note.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// 0-based line of the checkbox, as Dataview numbers lines.
    pub line: u32,
    /// Lines the task's own text takes.
    pub line_count: u32,
    /// The character between the brackets.
    pub status: char,
    /// `[x]` or `[X]`, and so is every task below it (Dataview's `fullyCompleted`).
    pub fully_completed: bool,
    /// Line of the enclosing list item, if any.
    pub parent: Option<u32>,
    /// The text after the checkbox (continuation lines joined by `\n`), fields included.
    pub text: Box<str>,
    /// The heading the task is under (shared by the tasks of one section).
    pub section: Option<Arc<str>>,
    /// Tags on the task's lines, with `#`, as written.
    pub tags: Box<[Box<str>]>,
    /// Its Dataview inline fields (`[due:: 2024-05-01]`, emoji shorthands included).
    pub fields: Box<[Field]>,
    /// What the Tasks plugin reads from the end of its first line.
    pub tasks: TasksFields,
}

/// The Dataview data of one note: page inline fields and tasks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoteData {
    /// Inline fields that belong to the page, as Dataview merges them: those of list items that
    /// are not tasks, then those outside lists, each in text order.
    pub fields: Box<[Field]>,
    /// The tasks, in line order.
    pub tasks: Box<[Task]>,
}

impl NoteData {
    /// An upper bound of what a Dataview page built from this data allocates (its fields and
    /// tasks as the DQL evaluator reads them; `std::mem::size_of` of an item is `item`): a
    /// query charges it before it builds the page.
    pub fn page_cost(&self, item: u64) -> u64 {
        let fields: u64 = self.fields.iter().map(Field::inline_cost).sum();
        let tasks: u64 = self
            .tasks
            .iter()
            .map(|t| {
                item + t.text.len() as u64
                    + t.section.as_ref().map_or(0, |s| s.len() as u64)
                    + t.tags.iter().map(|g| g.len() as u64 + 24).sum::<u64>()
                    + t.fields.iter().map(Field::inline_cost).sum::<u64>()
                    + 512
            })
            .sum();
        fields.saturating_add(tasks)
    }

    /// Nothing to keep.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.tasks.is_empty()
    }

    /// The data of a note's text, with its parse (empty, without running Dataview's parser,
    /// when the text cannot hold any).
    pub fn extract(text: &str, parsed: &ParsedNote) -> NoteData {
        if !may_have_data(text) {
            return NoteData::default();
        }
        let dv = dataview::parse_note_with(text, parsed);
        let mut fields: Vec<Field> = dv.fields.into_iter().map(Field::new).collect();
        let outside = fields.len();
        let mut tasks = Vec::new();
        let mut section: Option<Arc<str>> = None;
        for item in dv.items {
            match item.task {
                None => fields.extend(item.fields.into_iter().map(Field::new)),
                Some(state) => tasks.push(Task {
                    line: u32::try_from(item.line).unwrap_or(u32::MAX),
                    line_count: u32::try_from(item.line_count).unwrap_or(u32::MAX),
                    status: state.status,
                    fully_completed: state.fully_completed,
                    parent: item.parent.and_then(|p| u32::try_from(p).ok()),
                    text: item.text.into_boxed_str(),
                    section: item.section.map(|s| match &section {
                        Some(shared) if **shared == *s => Arc::clone(shared),
                        _ => {
                            let shared: Arc<str> = Arc::from(s);
                            section = Some(Arc::clone(&shared));
                            shared
                        }
                    }),
                    tags: item.tags.into_iter().map(String::into_boxed_str).collect(),
                    fields: item.fields.into_iter().map(Field::new).collect(),
                    tasks: item.tasks.unwrap_or_default(),
                }),
            }
        }
        // Dataview's order: the list items' fields, then those outside lists, each in text
        // order.
        fields.rotate_left(outside);
        NoteData {
            fields: fields.into_boxed_slice(),
            tasks: tasks.into_boxed_slice(),
        }
    }
}

/// Whether `text` can hold an inline field or a task: a `::` anywhere, or a list line with a
/// checkbox or a Tasks date emoji (Dataview's shorthand fields). One pass, no allocation.
pub fn may_have_data(text: &str) -> bool {
    let b = text.as_bytes();
    if memchr::memmem::find(b, b"::").is_some() {
        return true;
    }
    let mut start = 0;
    while start < b.len() {
        let end = memchr::memchr(b'\n', &b[start..]).map_or(b.len(), |i| start + i);
        if list_line_with_data(&text[start..end]) {
            return true;
        }
        start = end + 1;
    }
    false
}

/// A list line (after spaces and `>`) whose marker is followed by `[`, or that holds one of
/// Dataview's shorthand emoji.
fn list_line_with_data(line: &str) -> bool {
    let b = line.as_bytes();
    let mut i = b
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'>'))
        .count();
    let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && matches!(b.get(i + digits), Some(b'.' | b')')) {
        i += digits + 1;
    } else if matches!(b.get(i), Some(b'*' | b'-' | b'+')) {
        i += 1;
    } else {
        return false;
    }
    if !matches!(b.get(i), Some(b' ' | b'\t')) {
        return false;
    }
    let rest = line[i..].trim_start();
    if let Some(inside) = rest.strip_prefix('[') {
        let mut chars = inside.chars();
        let checkbox = chars.next().is_some() && chars.next() == Some(']');
        if checkbox && chars.next().is_none_or(char::is_whitespace) {
            return true;
        }
    }
    // Emoji are not ASCII: most list lines are skipped after one scan.
    !rest.is_ascii()
        && ["➕", "🛫", "⏳", "⌛", "📅", "📆", "🗓", "✅"]
            .iter()
            .any(|e| rest.contains(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> NoteData {
        NoteData::extract(text, &crate::markdown::parse_note(text))
    }

    #[test]
    fn notes_without_fields_or_tasks_are_not_parsed_and_keep_nothing() {
        for text in [
            "# Plain\n\nSome text, a [[link]] and a #tag.\n",
            "- a list\n- [[link]] item\n* another\n",
            "1. numbered\n2. [not a task] [b]\n",
            "a line with a colon: only one\n",
        ] {
            assert!(!may_have_data(text), "{text}");
            assert!(data(text).is_empty(), "{text}");
        }
        assert!(may_have_data("key:: value"));
        assert!(may_have_data("  > - [ ] quoted task"));
        assert!(may_have_data("3) [x] numbered task"));
        assert!(may_have_data("- item 📅 2024-01-01"));
        assert!(!may_have_data("text 📅 2024-01-01 outside a list"));
    }

    #[test]
    fn kept_fields_give_back_exactly_what_the_parser_found() {
        let text = "Rating:: 4.5\n**Due**:: 2024-05-01\nA [link:: [[Page|p]]] and (tags:: a, b)\n\n\
                    - item [when:: 2024-01-01T10:00] 📅 2024-02-02\n- [ ] task [due:: 7 days] ⏳ 2024-02-03\n";
        let parsed = crate::markdown::parse_note(text);
        let dv = dataview::parse_note_with(text, &parsed);
        let kept = NoteData::extract(text, &parsed);
        let mut expected: Vec<InlineField> = dv.items[0].fields.clone();
        expected.extend(dv.fields.iter().cloned());
        let page: Vec<InlineField> = kept.fields.iter().map(Field::to_inline).collect();
        assert_eq!(page, expected);
        let task: Vec<InlineField> = kept.tasks[0].fields.iter().map(Field::to_inline).collect();
        assert_eq!(task, dv.items[1].fields);
        assert_eq!(task.len(), 2);
    }

    #[test]
    fn tasks_carry_status_section_tags_fields_and_tasks_dates() {
        let text = "---\nstatus: draft\n---\n# Week\n\nmood:: good\n\n## Todo\n\
                    - [ ] Call Bob #phone 📅 2024-05-03 ⏫\n  - [x] Find the number ✅ 2024-05-01\n\
                    - [/] Write [estimate:: 2h] report\n- plain item [owner:: Ann]\n\
                    - [-] Dropped ❌ 2024-05-02\n";
        let d = data(text);
        let keys: Vec<(&str, u32)> = d.fields.iter().map(|f| (f.key(), f.line)).collect();
        assert_eq!(keys, [("owner", 11), ("mood", 5)]);
        let lines: Vec<(u32, char)> = d.tasks.iter().map(|t| (t.line, t.status)).collect();
        assert_eq!(lines, [(8, ' '), (9, 'x'), (10, '/'), (12, '-')]);
        let call = &d.tasks[0];
        assert_eq!(call.section.as_deref(), Some("Todo"));
        assert_eq!(&*call.tags, [Box::from("#phone")]);
        assert_eq!(call.tasks.description, "Call Bob #phone");
        assert_eq!(call.tasks.due, chrono::NaiveDate::from_ymd_opt(2024, 5, 3));
        assert_eq!(call.tasks.priority, Some(dataview::Priority::High));
        assert!(!call.fully_completed);
        assert_eq!(d.tasks[1].parent, Some(8));
        assert!(d.tasks[1].fully_completed);
        assert_eq!(d.tasks[2].fields[0].canonical(), "estimate");
        assert_eq!(d.tasks[0].fields[0].key(), "due");
        assert_eq!(d.tasks[0].fields[0].raw(), "2024-05-03");
        assert_eq!(d.tasks[2].status, '/');
        assert_eq!(d.tasks[3].status, '-');
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use crate::model::{Change, Model};
    use crate::vault::{FileMeta, VaultPath};

    fn note(path: &str, text: &str) -> Change {
        let parsed = crate::markdown::parse_note(text);
        let data = NoteData::extract(text, &parsed);
        let meta = FileMeta {
            size: text.len() as u64,
            modified: std::time::SystemTime::UNIX_EPOCH,
            ino: text.len() as u64,
            nlink: 1,
            created: None,
        };
        Change::Note(VaultPath::parse(path).unwrap(), meta, parsed, data)
    }

    fn tasks(m: &Model) -> Vec<(String, u32, String)> {
        m.tasks()
            .map(|(p, t)| (p.to_string(), t.line, t.text.to_string()))
            .collect()
    }

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s).unwrap()
    }

    #[test]
    fn edits_removals_and_renames_update_the_tasks_and_fields() {
        let mut m = Model::default();
        m.apply(vec![
            note("B.md", "- [ ] b one\n- [x] b two\n"),
            note("A.md", "due:: 2024-01-01\n\n- [ ] a one\n"),
            note("Plain.md", "nothing here\n"),
            // A later change to one path in the same batch wins.
            note("C.md", "- [ ] old c\n"),
            note("C.md", "- [ ] new c\n"),
        ]);
        assert_eq!(
            tasks(&m),
            [
                ("A.md".into(), 2, "a one".into()),
                ("B.md".into(), 0, "b one".into()),
                ("B.md".into(), 1, "b two".into()),
                ("C.md".into(), 0, "new c".into()),
            ]
        );
        assert_eq!(m.task_count(), 4);
        assert_eq!(m.inline_fields(&p("A.md"))[0].canonical(), "due");
        assert!(m.note_dataview(&p("Plain.md")).is_none());

        // Edited: a task added, the field gone.
        m.apply(vec![note("A.md", "- [ ] a one\n- [/] a two\n")]);
        assert!(m.inline_fields(&p("A.md")).is_empty());
        assert_eq!(m.task_count(), 5);
        // Edited to hold nothing: the entry goes.
        m.apply(vec![note("B.md", "no tasks now\n")]);
        assert!(m.note_dataview(&p("B.md")).is_none());
        assert_eq!(m.task_count(), 3);
        // Renamed (removed, then added under the new path), and removed.
        m.apply(vec![
            Change::Removed(p("A.md")),
            note("Sub/A2.md", "- [ ] a one\n- [/] a two\n"),
            Change::Removed(p("C.md")),
        ]);
        assert_eq!(
            tasks(&m),
            [
                ("Sub/A2.md".into(), 0, "a one".into()),
                ("Sub/A2.md".into(), 1, "a two".into()),
            ]
        );
        assert_eq!(m.task_count(), 2);
        // A plain note gaining a task.
        m.apply(vec![note("Plain.md", "- [ ] now one\n")]);
        assert_eq!(m.task_count(), 3);
        assert_eq!(m.tasks().next().map(|(p, _)| p.as_str()), Some("Plain.md"));
    }

    fn due(m: &Model, after: Option<&str>, before: Option<&str>) -> Vec<(String, u32)> {
        let d = |s: &str| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        m.tasks_due(after.map(d), before.map(d))
            .map(|(p, t)| (p.to_string(), t.line))
            .collect()
    }

    #[test]
    fn the_due_date_index_follows_edits_removals_and_renames() {
        let mut m = Model::default();
        m.apply(vec![
            note(
                "A.md",
                "- [ ] a 📅 2024-05-02\n- [ ] b\n- [x] c 📅 2024-05-01\n",
            ),
            note("B.md", "- [ ] d 📅 2024-05-02\n"),
        ]);
        assert_eq!(
            due(&m, None, None),
            [("A.md".into(), 2), ("A.md".into(), 0), ("B.md".into(), 0)]
        );
        // Bounds are strict.
        assert_eq!(due(&m, Some("2024-05-01"), None).len(), 2);
        assert_eq!(due(&m, None, Some("2024-05-02")), [("A.md".into(), 2)]);
        assert!(due(&m, Some("2024-05-01"), Some("2024-05-02")).is_empty());
        assert!(due(&m, Some("2024-05-03"), Some("2024-05-01")).is_empty());
        // Edited: a date moved, a task inserted above (every index shifts), one date kept.
        m.apply(vec![note(
            "A.md",
            "- [ ] new 📅 2024-06-01\n- [ ] a 📅 2024-05-02\n- [ ] b\n- [x] c 📅 2024-05-09\n",
        )]);
        assert_eq!(
            due(&m, None, None),
            [
                ("A.md".into(), 1),
                ("B.md".into(), 0),
                ("A.md".into(), 3),
                ("A.md".into(), 0)
            ]
        );
        // Renamed and removed.
        m.apply(vec![
            Change::Removed(p("B.md")),
            note("C.md", "- [ ] d 📅 2024-05-02\n"),
            Change::Removed(p("A.md")),
        ]);
        assert_eq!(due(&m, None, None), [("C.md".into(), 0)]);
        m.apply(vec![note("C.md", "no tasks\n")]);
        assert!(due(&m, None, None).is_empty());
    }
}

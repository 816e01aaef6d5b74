//! Changing a note's frontmatter properties without touching anything else: the body, every
//! key not named, and every comment and blank line stay byte for byte.
//!
//! The YAML block is cut into top-level entries (a line that starts at column 0 with a key, up
//! to the next such line; trailing blank and comment lines belong to no entry). Each entry is
//! parsed on its own and must yield exactly its one key, and the keys must be those of the whole
//! block parsed at once; anything else (a flow mapping at the top, an alias reaching into another
//! entry, a complex key) is refused rather than guessed at. A key set is written over its entry's
//! span, a new one goes at the end of the block, a removed one takes its span with it; then the
//! new block is parsed again and must hold exactly the expected properties, or nothing is written.
//! Malformed frontmatter is refused, never overwritten or doubled.

use serde_json::{Map, Value};

use super::edit::Layout;
use super::frontmatter::{self, Block};

/// Why the frontmatter cannot be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    /// The YAML does not parse (the note is left as it is).
    #[error("the frontmatter is malformed ({reason}, line {line}); fix it first")]
    Malformed {
        /// The parser's reason.
        reason: String,
        /// 1-based line in the note.
        line: usize,
    },
    /// The YAML parses, but its layout cannot be edited without rewriting it.
    #[error("the frontmatter is laid out in a way capvault does not edit ({0})")]
    Layout(String),
    /// A key is both set and removed.
    #[error("`{0}` is both set and removed")]
    SetAndRemoved(String),
    /// A property name that is empty, too long or has control characters.
    #[error("property name `{0}` is not allowed (empty, too long, or with control characters)")]
    BadKey(String),
    /// The edited frontmatter would not parse back to the properties asked for.
    #[error(
        "the new frontmatter would not read back as the properties asked for; nothing was written"
    )]
    NoReadBack,
}

/// A top-level entry: its key and its byte span in the note (from its first line to the end of
/// its last line that is neither blank nor a comment).
#[derive(Debug)]
struct Entry {
    key: String,
    start: usize,
    end: usize,
}

/// Sets the keys of `set` (adding those missing) and removes the keys of `remove` in the
/// frontmatter of `text`; a note without frontmatter gets a block when something is set.
pub fn update(
    text: &str,
    set: &Map<String, Value>,
    remove: &[String],
) -> Result<String, FrontmatterError> {
    for k in set.keys() {
        if remove.contains(k) {
            return Err(FrontmatterError::SetAndRemoved(k.clone()));
        }
        check_key(k)?;
    }
    let layout = Layout::of(text);
    let body = layout.body;
    let nl = layout.newline;
    let Some(block) = frontmatter::find_block(body) else {
        if set.is_empty() {
            return Ok(text.to_owned());
        }
        let mut out = String::from("---");
        out.push_str(nl);
        for (k, v) in set {
            out.push_str(&entry_text(k, v, nl)?);
        }
        out.push_str("---");
        out.push_str(nl);
        out.push_str(body);
        let result = layout.with_body(&out);
        verify(&result, set, &Map::new(), remove)?;
        return Ok(result);
    };
    let old = frontmatter::parse(body, &block).map_err(|e| FrontmatterError::Malformed {
        reason: e.reason,
        line: e.line,
    })?;
    let entries = entries(body, &block, &old.properties)?;
    // Replacements by span, applied back to front.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut appended = String::new();
    for (k, v) in set {
        match entries.iter().find(|e| e.key == *k) {
            Some(e) => {
                let mut new = entry_text(k, v, nl)?;
                // A one-line entry keeps its trailing comment when its new value is one line.
                if let Some(comment) = trailing_comment(&body[e.start..e.end])
                    && let Some(line) = new.strip_suffix(nl)
                    && !line.contains('\n')
                {
                    new = format!("{line}{comment}{nl}");
                }
                edits.push((e.start, e.end, new));
            }
            None => appended.push_str(&entry_text(k, v, nl)?),
        }
    }
    for k in remove {
        if let Some(e) = entries.iter().find(|e| e.key == *k) {
            edits.push((e.start, e.end, String::new()));
        }
    }
    if !appended.is_empty() {
        let mut at_end = String::new();
        if block.yaml_end > block.yaml_start && !body[..block.yaml_end].ends_with('\n') {
            at_end.push_str(nl);
        }
        at_end.push_str(&appended);
        edits.push((block.yaml_end, block.yaml_end, at_end));
    }
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(body.len() + 64);
    let mut at = 0;
    for (start, end, with) in &edits {
        out.push_str(&body[at..*start]);
        out.push_str(with);
        at = *end;
    }
    out.push_str(&body[at..]);
    let result = layout.with_body(&out);
    verify(&result, set, &old.properties, remove)?;
    Ok(result)
}

/// Cuts the YAML block into its top-level entries and checks each yields its one key.
fn entries(
    text: &str,
    block: &Block,
    whole: &Map<String, Value>,
) -> Result<Vec<Entry>, FrontmatterError> {
    let mut starts = Vec::new();
    // (start of line, end of line with its break, is it content?)
    let mut lines = Vec::new();
    let mut at = block.yaml_start;
    while at < block.yaml_end {
        let end = memchr::memchr(b'\n', &text.as_bytes()[at..block.yaml_end])
            .map_or(block.yaml_end, |i| at + i + 1);
        let line = text[at..end].trim_end_matches(['\n', '\r']);
        let blank_or_comment = line.trim().is_empty() || line.trim_start().starts_with('#');
        let first = line.as_bytes().first().copied();
        let top = !(blank_or_comment
            || matches!(first, Some(b' ' | b'\t'))
            || line == "-"
            || line.starts_with("- "));
        if top {
            starts.push(lines.len());
        } else if starts.is_empty() && !blank_or_comment {
            return Err(FrontmatterError::Layout(
                "it does not start with a key".to_owned(),
            ));
        }
        lines.push((at, end, !blank_or_comment));
        at = end;
    }
    let mut out = Vec::new();
    for (n, &first) in starts.iter().enumerate() {
        let next = starts.get(n + 1).copied().unwrap_or(lines.len());
        let last = (first..next).rev().find(|&i| lines[i].2).unwrap_or(first);
        let (start, end) = (lines[first].0, lines[last].1);
        let key = single_key(&text[start..end])?;
        out.push(Entry { key, start, end });
    }
    let mut keys: Vec<&str> = out.iter().map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    let mut want: Vec<&str> = whole.keys().map(String::as_str).collect();
    want.sort_unstable();
    if keys != want {
        return Err(FrontmatterError::Layout(
            "its entries do not match its keys".to_owned(),
        ));
    }
    Ok(out)
}

/// The one key of a YAML entry parsed on its own.
fn single_key(entry: &str) -> Result<String, FrontmatterError> {
    let doc = parse_yaml(entry)
        .map_err(|_| FrontmatterError::Layout("an entry does not parse on its own".to_owned()))?;
    let mut keys = doc.keys();
    match (keys.next(), keys.next()) {
        (Some(k), None) => Ok(k.clone()),
        _ => Err(FrontmatterError::Layout(
            "a line holds more or fewer than one key".to_owned(),
        )),
    }
}

/// The trailing comment of a one-line entry (`title: Old   # note` gives `   # note`): the
/// first ` #` after which cutting the line leaves the same key and value.
fn trailing_comment(entry: &str) -> Option<&str> {
    let line = entry.trim_end_matches(['\n', '\r']);
    if line.contains('\n') {
        return None;
    }
    let whole = parse_yaml(line).ok()?;
    let bytes = line.as_bytes();
    for (i, _) in line.match_indices('#') {
        if i == 0 || !matches!(bytes[i - 1], b' ' | b'\t') {
            continue;
        }
        let before = line[..i].trim_end();
        if parse_yaml(before).is_ok_and(|m| m == whole) {
            return Some(&line[before.len()..]);
        }
    }
    None
}

/// Parses `yaml` as a frontmatter block's content.
fn parse_yaml(yaml: &str) -> Result<Map<String, Value>, frontmatter::YamlError> {
    let mut note = String::with_capacity(yaml.len() + 10);
    note.push_str("---\n");
    note.push_str(yaml);
    if !yaml.ends_with('\n') {
        note.push('\n');
    }
    note.push_str("---\n");
    let block = frontmatter::find_block(&note).ok_or(frontmatter::YamlError {
        reason: "no block".to_owned(),
        line: 1,
    })?;
    frontmatter::parse(&note, &block).map(|d| d.properties)
}

/// Checks the result holds `old` with `set` applied and `remove` gone, nothing else.
fn verify(
    result: &str,
    set: &Map<String, Value>,
    old: &Map<String, Value>,
    remove: &[String],
) -> Result<(), FrontmatterError> {
    let mut want = old.clone();
    for k in remove {
        want.remove(k);
    }
    for (k, v) in set {
        want.insert(k.clone(), v.clone());
    }
    let body = Layout::of(result).body;
    let got = frontmatter::find_block(body)
        .and_then(|b| frontmatter::parse(body, &b).ok())
        .map(|d| d.properties);
    if got.as_ref() == Some(&want) {
        Ok(())
    } else {
        Err(FrontmatterError::NoReadBack)
    }
}

fn check_key(k: &str) -> Result<(), FrontmatterError> {
    if k.trim().is_empty() || k.len() > 256 || k.chars().any(char::is_control) {
        return Err(FrontmatterError::BadKey(k.to_owned()));
    }
    Ok(())
}

/// One top-level entry as YAML, ending with `nl`, in block style as Obsidian writes it: lists
/// as `key:` then `  - item` lines, objects as `key:` then indented `name: value` lines, in the
/// order given; scalars plain when they read back as themselves, quoted otherwise; a list or
/// object inside a list item as JSON (which YAML reads as a flow collection).
fn entry_text(key: &str, value: &Value, nl: &str) -> Result<String, FrontmatterError> {
    let mut out = String::new();
    push_entry(&mut out, key, value, 0, nl)?;
    Ok(out)
}

/// Most levels of objects nested in one property (deeper ones are written as JSON).
const MAX_BLOCK_NESTING: usize = 16;

/// `key: value` at `indent` spaces, with its line break, nested values indented under it.
fn push_entry(
    out: &mut String,
    key: &str,
    value: &Value,
    indent: usize,
    nl: &str,
) -> Result<(), FrontmatterError> {
    out.push_str(&" ".repeat(indent));
    out.push_str(&scalar_text(key, true));
    out.push(':');
    match value {
        Value::Null => out.push_str(nl),
        Value::Array(items) if !items.is_empty() => {
            out.push_str(nl);
            for item in items {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str("- ");
                out.push_str(&value_text(item)?);
                out.push_str(nl);
            }
        }
        Value::Object(fields) if !fields.is_empty() && indent / 2 < MAX_BLOCK_NESTING => {
            out.push_str(nl);
            for (k, v) in fields {
                check_key(k)?;
                push_entry(out, k, v, indent + 2, nl)?;
            }
        }
        v => {
            out.push(' ');
            out.push_str(&value_text(v)?);
            out.push_str(nl);
        }
    }
    Ok(())
}

fn value_text(v: &Value) -> Result<String, FrontmatterError> {
    match v {
        Value::String(s) => {
            if s.chars().any(|c| c.is_control() && c != '\t') && s.contains(['\n', '\r']) {
                // Multi-line: JSON quoting writes the breaks as escapes, on one line.
                return Ok(json(v));
            }
            Ok(scalar_text(s, false))
        }
        Value::Null => Ok("null".to_owned()),
        _ => Ok(json(v)),
    }
}

fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

/// `s` plain when YAML reads it back as the same string, double-quoted otherwise.
fn scalar_text(s: &str, is_key: bool) -> String {
    let plain_ok = !s.is_empty()
        && s.trim() == s
        && !s.chars().any(char::is_control)
        && !s.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%',
            '@', '`',
        ])
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && reads_back(s, is_key);
    if plain_ok {
        s.to_owned()
    } else {
        json(&Value::String(s.to_owned()))
    }
}

/// True when `s`, written plain, is read back as the string `s`.
fn reads_back(s: &str, is_key: bool) -> bool {
    let doc = if is_key {
        parse_yaml(&format!("{s}: x\n"))
    } else {
        parse_yaml(&format!("k: {s}\n"))
    };
    match doc {
        Ok(m) if is_key => m.len() == 1 && m.contains_key(s),
        Ok(m) => m.get("k") == Some(&Value::String(s.to_owned())),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn untouched_keys_comments_and_the_body_stay_byte_for_byte() {
        let t = "---\n# a comment\ntitle: Old   # trailing\n\ntags:\n- a\n- b\nkeep: {x: 1}\n---\nBody ---\n";
        let out = update(t, &set(json!({"title": "New"})), &[]).unwrap();
        assert_eq!(
            out,
            "---\n# a comment\ntitle: New   # trailing\n\ntags:\n- a\n- b\nkeep: {x: 1}\n---\nBody ---\n"
        );
        // A `#` inside a quoted value is not a comment; a list value drops the line's comment.
        let q = "---\nt: \"a #b\" # c\n---\n";
        assert_eq!(
            update(q, &set(json!({"t": "x"})), &[]).unwrap(),
            "---\nt: x # c\n---\n"
        );
        assert_eq!(
            update(q, &set(json!({"t": ["x"]})), &[]).unwrap(),
            "---\nt:\n  - x\n---\n"
        );
        let out = update(t, &set(json!({"status": "done"})), &["tags".into()]).unwrap();
        assert_eq!(
            out,
            "---\n# a comment\ntitle: Old   # trailing\n\nkeep: {x: 1}\nstatus: done\n---\nBody ---\n"
        );
    }

    #[test]
    fn values_are_written_so_they_read_back_as_given() {
        let v = json!({
            "n": 3, "b": true, "s": "true", "num": "42", "link": "[[Note]]", "colon": "a: b",
            "list": ["x", "y z", 1], "empty": [], "none": null, "obj": {"k": [1, 2]},
            "multi": "line one\nline two", "date": "2026-12-01", "hash": "a #b"
        });
        let out = update("# body\n", &set(v.clone()), &[]).unwrap();
        assert!(
            out.starts_with("---\n") && out.ends_with("---\n# body\n"),
            "{out}"
        );
        assert!(out.contains("\nlist:\n  - x\n  - y z\n  - 1\n"), "{out}");
        assert!(out.contains("\nlink: \"[[Note]]\"\n"), "{out}");
        assert!(out.contains("\ns: \"true\"\n"), "{out}");
        assert!(out.contains("\ndate: 2026-12-01\n"), "{out}");
    }

    #[test]
    fn objects_are_written_in_block_style_and_new_keys_in_the_order_given() {
        let v: Map<String, Value> = serde_json::from_str(
            r#"{"zeta": 1, "nested": {"b": 2, "a": {"c": [1, "x"]}}, "alpha": {}}"#,
        )
        .unwrap();
        let out = update("---\nkeep: 1\n---\n", &v, &[]).unwrap();
        assert_eq!(
            out,
            "---\nkeep: 1\nzeta: 1\nnested:\n  b: 2\n  a:\n    c:\n      - 1\n      - x\nalpha: {}\n---\n"
        );
    }

    #[test]
    fn a_key_set_and_removed_or_a_bad_key_is_refused_by_name() {
        let text = "---\na: 1\n---\nbody\n";
        let e = update(text, &set(json!({"a": 2})), &["a".to_owned()]).unwrap_err();
        assert!(
            matches!(e, FrontmatterError::SetAndRemoved(ref k) if k == "a"),
            "{e}"
        );
        assert_eq!(e.to_string(), "`a` is both set and removed");
        let e = update(text, &set(json!({"b\u{7}": 2})), &[]).unwrap_err();
        assert!(matches!(e, FrontmatterError::BadKey(_)), "{e}");
        assert!(e.to_string().starts_with("property name `b"), "{e}");
    }

    #[test]
    fn malformed_or_unusual_frontmatter_is_refused_not_rewritten() {
        let bad = "---\na: [1\n---\nbody\n";
        assert!(matches!(
            update(bad, &set(json!({"b": 1})), &[]),
            Err(FrontmatterError::Malformed { .. })
        ));
        let dup = "---\na: 1\na: 2\n---\n";
        assert!(matches!(
            update(dup, &set(json!({"b": 1})), &[]),
            Err(FrontmatterError::Malformed { .. })
        ));
        let alias = "---\nbase: &x 1\nother: *x\n---\n";
        assert!(matches!(
            update(alias, &set(json!({"base": 2})), &[]),
            Err(FrontmatterError::Layout(_))
        ));
    }

    #[test]
    fn crlf_notes_get_crlf_lines_and_no_block_is_doubled() {
        let t = "---\r\na: 1\r\n---\r\nbody\r\n";
        let out = update(t, &set(json!({"b": "two"})), &[]).unwrap();
        assert_eq!(out, "---\r\na: 1\r\nb: two\r\n---\r\nbody\r\n");
        let again = update(&out, &set(json!({"b": "three"})), &[]).unwrap();
        assert_eq!(again.matches("---").count(), 2, "{again}");
        let removed = update(t, &Map::new(), &["a".into()]).unwrap();
        assert_eq!(removed, "---\r\n---\r\nbody\r\n");
    }
}

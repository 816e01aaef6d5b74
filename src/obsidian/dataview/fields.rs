//! Finding inline fields in one line of text, as Dataview finds them, in linear time.
//!
//! Dataview's own scan tries every `[` and `(` of a line: it looks for the next `::`, checks
//! the key holds no bracket, then walks forward counting nested brackets (a `\` escapes the
//! next character) to the bracket that closes the field. Done naively that is quadratic on a
//! line of `[[[[...` or `[a:: [a:: ...`. Here each of those three questions is answered from
//! tables built in one pass over the line (the `::` positions, the bracket positions, and for
//! each possible value start the closing bracket, found from prefix nesting depths), and the
//! candidates are visited left to right with cursors that only move forward: the same fields,
//! in O(line length).

use std::sync::OnceLock;

use regex::Regex;

/// How a field was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldSyntax {
    /// `Key:: value` as the whole line (or the whole text of a list item).
    FullLine,
    /// `[key:: value]`.
    Bracket,
    /// `(key:: value)`: the key is hidden in reading view.
    Paren,
    /// A Tasks emoji date (`📅 2021-08-29`), read as Dataview's shorthand field.
    Emoji,
}

/// A field found in a line: byte ranges into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawField {
    /// The key as written (trimmed; for full-line fields, its surrounding formatting removed).
    pub key: String,
    /// The key's range in the line, trimmed (for a full-line field, before its formatting is
    /// removed).
    pub key_span: (usize, usize),
    /// The value's range in the line, trimmed.
    pub value: (usize, usize),
    /// The field's range in the line (`[` to `]` included).
    pub start: usize,
    pub end: usize,
    pub syntax: FieldSyntax,
}

/// Where `::` occurs in `line` (overlapping: `:::` gives two).
fn separators(line: &[u8]) -> Vec<usize> {
    memchr::memchr_iter(b':', line)
        .filter(|&i| line.get(i + 1) == Some(&b':'))
        .collect()
}

/// For each value start `s` in `starts` (ascending), where the field opened with `open`
/// closes: the first `close` at or after `s` where the nesting counted from `s` drops below
/// zero. Characters after an odd run of backslashes are skipped, as Dataview's scan skips
/// them (a value start follows `::`, so the escape state there is always clear).
fn closings(line: &[u8], open: u8, close: u8, starts: &[usize]) -> Vec<Option<usize>> {
    let n = line.len();
    // escaped[i]: an odd run of backslashes comes right before i.
    let mut escaped = vec![false; n];
    let mut run = 0usize;
    for (i, &c) in line.iter().enumerate() {
        escaped[i] = run % 2 == 1;
        run = if c == b'\\' { run + 1 } else { 0 };
    }
    // depth[i]: nesting before position i (unescaped opens minus closes; a backslash counts
    // as nothing).
    let mut depth = Vec::with_capacity(n + 1);
    let mut d: i64 = 0;
    for (i, &c) in line.iter().enumerate() {
        depth.push(d);
        if c != b'\\' && !escaped[i] {
            if c == open {
                d += 1;
            } else if c == close {
                d -= 1;
            }
        }
    }
    depth.push(d);
    // Right to left: first_at[level + n + 1] is the nearest close at or after i whose depth
    // after it is `level` (levels run from -n to n).
    let mut first_at = vec![usize::MAX; 2 * n + 3];
    let offset = n as i64 + 1;
    let slot = |level: i64| usize::try_from(level + offset).ok();
    let mut out = vec![None; starts.len()];
    let mut q = starts.len();
    for i in (0..=n).rev() {
        if i < n
            && line[i] == close
            && !escaped[i]
            && let Some(k) = slot(depth[i] - 1)
        {
            first_at[k] = i;
        }
        while q > 0 && starts[q - 1] == i {
            q -= 1;
            out[q] = slot(depth[i] - 1)
                .and_then(|k| first_at.get(k).copied())
                .filter(|&j| j != usize::MAX);
        }
    }
    out
}

/// The `[key:: value]` and `(key:: value)` fields of a line, and with `task_fields` the
/// Tasks emoji dates, sorted by position; a field overlapping (or touching) the one before it
/// is dropped, as Dataview drops it.
pub fn extract_inline_fields(line: &str, task_fields: bool) -> Vec<RawField> {
    let b = line.as_bytes();
    let mut fields = Vec::new();
    let seps = separators(b);
    if !seps.is_empty() {
        let brackets: Vec<usize> = b
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, b'[' | b']' | b'(' | b')'))
            .map(|(i, _)| i)
            .collect();
        let value_starts: Vec<usize> = seps.iter().map(|s| s + 2).collect();
        for (open, close, syntax) in [
            (b'[', b']', FieldSyntax::Bracket),
            (b'(', b')', FieldSyntax::Paren),
        ] {
            if memchr::memchr(open, b).is_none() {
                continue;
            }
            let closes = closings(b, open, close, &value_starts);
            let (mut sep_i, mut br_i) = (0usize, 0usize);
            let mut found = memchr::memchr(open, b);
            while let Some(start) = found {
                // The first `::` after the opening bracket.
                while sep_i < seps.len() && seps[sep_i] < start + 1 {
                    sep_i += 1;
                }
                let Some(&sep) = seps.get(sep_i) else {
                    break;
                };
                // No bracket of either kind in the key.
                while br_i < brackets.len() && brackets[br_i] <= start {
                    br_i += 1;
                }
                let key_clean = brackets.get(br_i).is_none_or(|&p| p >= sep);
                let field = key_clean
                    .then(|| closes[sep_i])
                    .flatten()
                    .map(|close_at| RawField {
                        key: line[start + 1..sep]
                            .trim_matches(super::value::is_js_space)
                            .to_owned(),
                        key_span: trimmed(line, start + 1, sep),
                        value: trimmed(line, sep + 2, close_at),
                        start,
                        end: close_at + 1,
                        syntax,
                    });
                let from = match &field {
                    Some(f) => f.end,
                    None => start + 1,
                };
                if let Some(f) = field {
                    fields.push(f);
                }
                found = memchr::memchr(open, &b[from.min(b.len())..]).map(|i| i + from);
            }
        }
    }
    if task_fields {
        fields.extend(emoji_fields(line));
    }
    fields.sort_by_key(|f| f.start);
    let mut kept: Vec<RawField> = Vec::with_capacity(fields.len());
    for f in fields {
        if kept.last().is_none_or(|last| last.end < f.start) {
            kept.push(f);
        }
    }
    kept.retain(|f| !f.key.is_empty());
    kept
}

/// `start..end` of `line` without the white space at either end.
fn trimmed(line: &str, start: usize, end: usize) -> (usize, usize) {
    let s = &line[start..end];
    let left = s.len() - s.trim_start_matches(super::value::is_js_space).len();
    let t = s.trim_matches(super::value::is_js_space);
    (start + left, start + left + t.len())
}

/// Dataview's shorthand dates (the first of each kind in the line), as fields named `created`,
/// `start`, `scheduled`, `due`, `completion`.
fn emoji_fields(line: &str) -> Vec<RawField> {
    static RES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let res = RES.get_or_init(|| {
        [
            ("\u{2795}", "created"),
            ("\u{1F6EB}", "start"),
            ("[\u{23F3}\u{231B}]", "scheduled"),
            ("(?:\u{1F4C5}|\u{1F4C6}|\u{1F5D3}\u{FE0F}?)", "due"),
            ("\u{2705}", "completion"),
        ]
        .into_iter()
        .filter_map(|(emoji, key)| {
            Regex::new(&format!(r"{emoji}\s*([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})"))
                .ok()
                .map(|r| (r, key))
        })
        .collect()
    });
    res.iter()
        .filter_map(|(re, key)| {
            let caps = re.captures(line)?;
            let (whole, value) = (caps.get(0)?, caps.get(1)?);
            Some(RawField {
                key: (*key).to_owned(),
                key_span: (whole.start(), value.start()),
                value: (value.start(), value.end()),
                start: whole.start(),
                end: whole.end(),
                syntax: FieldSyntax::Emoji,
            })
        })
        .collect()
}

/// Characters Dataview's emoji pattern matches in keys (approximated by Unicode's emoji
/// properties; ASCII digits, `#` and `*` excluded).
const EMOJI_CLASS: &str = r"[\p{Extended_Pictographic}\u{FE0F}\u{200D}\u{20E3}\u{1F3FB}-\u{1F3FF}\u{1F1E6}-\u{1F1FF}\u{E0020}-\u{E007F}]";

/// `Key:: value` filling a whole (trimmed) line: the key, after dropping leading characters
/// that are neither letters nor digits (`**`, `> `, `# `, emoji) and trailing `_*~` and
/// backticks, must consist of letters, digits, `_`, `-`, `/`, spaces and emoji.
pub fn extract_full_line_field(text: &str) -> Option<RawField> {
    static KEY: OnceLock<Option<Regex>> = OnceLock::new();
    let key_re = KEY
        .get_or_init(|| {
            Regex::new(&format!(
                r"^[^0-9A-Za-z_\p{{L}}]*((?:{EMOJI_CLASS}|[0-9A-Za-z_\p{{L}}\s/-])*)[_*~`]*$"
            ))
            .ok()
        })
        .as_ref()?;
    let sep = memchr::memmem::find(text.as_bytes(), b"::")?;
    let raw_key = text[..sep].trim_matches(super::value::is_js_space);
    let key = key_re.captures(raw_key)?.get(1)?.as_str();
    if key.is_empty() {
        return None;
    }
    Some(RawField {
        key: key.to_owned(),
        key_span: trimmed(text, 0, sep),
        value: trimmed(text, sep + 2, text.len()),
        start: 0,
        end: text.len(),
        syntax: FieldSyntax::FullLine,
    })
}

/// Whether [`canonical_key`] of `key` is `name`, without building it for ASCII keys (a page
/// lookup compares every key of a page that lacks the field asked for).
pub fn canonical_is(key: &str, name: &str) -> bool {
    if !key.is_ascii() {
        return canonical_key(key) == name;
    }
    // ASCII: runs of letters, digits, `_` and `-` lower-cased; a run of whitespace is one `-`;
    // anything else is dropped (what the regex of `canonical_key` keeps of ASCII text).
    let mut want = name.bytes();
    let mut in_space = false;
    for b in key.bytes() {
        let out = if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            in_space = false;
            b.to_ascii_lowercase()
        } else if b.is_ascii_whitespace() || b == 0x0b {
            if in_space {
                continue;
            }
            in_space = true;
            b'-'
        } else {
            in_space = false;
            continue;
        };
        if want.next() != Some(out) {
            return false;
        }
    }
    want.next().is_none()
}

/// Dataview's sanitised key: emoji kept, runs of letters, digits, `_` and `-` lower-cased,
/// each run of white space one `-`, everything else (`*`, `~`, `` ` ``, `/`, `.`...) dropped.
/// `Basic Field` → `basic-field`, `**Bold Field**` → `bold-field`.
pub fn canonical_key(key: &str) -> String {
    static PARTS: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = PARTS
        .get_or_init(|| {
            Regex::new(&format!(
                r"(?P<e>{EMOJI_CLASS}+)|(?P<w>[0-9\p{{L}}_-]+)|(?P<s>[\s\u{{FEFF}}]+)"
            ))
            .ok()
        })
        .as_ref()
    else {
        return key.to_lowercase();
    };
    let mut out = String::with_capacity(key.len());
    for caps in re.captures_iter(key) {
        if let Some(e) = caps.name("e") {
            out.push_str(e.as_str());
        } else if let Some(w) = caps.name("w") {
            out.push_str(&w.as_str().to_lowercase());
        } else {
            out.push('-');
        }
    }
    out
}

#[cfg(test)]
mod canonical_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The allocation-free comparison agrees with building the key, for any ASCII key and
        /// for names that are and are not its canonical form.
        #[test]
        fn canonical_is_agrees_with_canonical_key(key in "[ -~\t\n\x0b]{0,24}", other in "[a-z -]{0,8}") {
            let c = canonical_key(&key);
            prop_assert!(canonical_is(&key, &c));
            prop_assert_eq!(canonical_is(&key, &other), c == other);
            let longer = format!("{c}x");
            prop_assert!(!canonical_is(&key, &longer));
        }
    }

    #[test]
    fn canonical_is_reads_unicode_keys_through_the_regex() {
        assert!(canonical_is("Été Field", "été-field"));
        assert!(canonical_is("**Bold Field**", "bold-field"));
        assert!(!canonical_is("Bold Field", "Bold-Field"));
    }
}

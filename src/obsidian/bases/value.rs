//! The values of the Bases language, and how they convert, compare and print.
//!
//! JavaScript's rules where Obsidian follows them (truthiness, `+` on strings, number
//! printing), typed rules where Obsidian's documentation says so (dates and durations, links
//! equal when they resolve to the same file). The choices made where the documentation is
//! silent are listed in docs/obsidian.md.

use std::cmp::Ordering;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use serde_json::json;

use super::expr::MAX_REGEX_BYTES;
use crate::obsidian::jsregex::{self, JsRegex, JsRegexError};

/// A file of the vault, as the data source numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileRef(pub u32);

/// A date, with or without a time of day (local time, as Obsidian shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Date {
    /// The moment (midnight for a date without time).
    pub at: NaiveDateTime,
    /// Whether a time of day is part of the value.
    pub time: bool,
}

impl Date {
    /// A date without time.
    pub fn day(d: NaiveDate) -> Date {
        Date {
            at: d.and_time(NaiveTime::MIN),
            time: false,
        }
    }

    /// Milliseconds since the Unix epoch (of the local wall clock).
    pub fn millis(&self) -> i64 {
        self.at.and_utc().timestamp_millis()
    }

    /// Parses `YYYY-MM-DD`, `YYYY-MM-DD HH:mm[:ss[.SSS]]` and the same with `T`, with an
    /// optional `Z` or offset (ignored: values are wall-clock times).
    pub fn parse(s: &str) -> Option<Date> {
        let s = s.trim();
        let b = s.as_bytes();
        if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let digits = |r: std::ops::Range<usize>| -> Option<u32> {
            b[r].iter().try_fold(0u32, |n, c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        let day = NaiveDate::from_ymd_opt(digits(0..4)? as i32, digits(5..7)?, digits(8..10)?)?;
        let rest = &s[10..];
        if rest.is_empty() {
            return Some(Date::day(day));
        }
        let rest = rest.strip_prefix(['T', ' '])?;
        let rest = rest.trim_end_matches('Z');
        let rest = match rest.rfind(['+', '-']) {
            Some(i) if i >= 5 => &rest[..i],
            _ => rest,
        };
        let time = ["%H:%M:%S%.f", "%H:%M:%S", "%H:%M"]
            .iter()
            .find_map(|f| NaiveTime::parse_from_str(rest, f).ok())?;
        Some(Date {
            at: day.and_time(time),
            time: true,
        })
    }

    /// `YYYY-MM-DD`, or `YYYY-MM-DD HH:mm:ss` when the value has a time.
    pub fn text(&self) -> String {
        if self.time {
            self.at.format("%Y-%m-%d %H:%M:%S").to_string()
        } else {
            self.at.format("%Y-%m-%d").to_string()
        }
    }

    /// The date moved by a duration (months first, as calendars do, then milliseconds).
    pub fn add(&self, d: Duration, sign: i64) -> Option<Date> {
        let months = d.months.checked_mul(sign)?;
        let mut at = self.at;
        if months != 0 {
            let m = chrono::Months::new(u32::try_from(months.unsigned_abs()).ok()?);
            at = if months > 0 {
                at.checked_add_months(m)?
            } else {
                at.checked_sub_months(m)?
            };
        }
        let ms = d.ms * sign as f64;
        if !ms.is_finite() || ms.abs() > 1e16 {
            return None;
        }
        at = at.checked_add_signed(chrono::TimeDelta::milliseconds(ms as i64))?;
        Some(Date {
            at,
            time: self.time || (ms as i64) % 86_400_000 != 0,
        })
    }
}

/// The distinct values of a list, as `unique()` keeps them: the first of each run of values
/// that [`Value::equals`] one another, in their order. Linear in the list's length: a value
/// looks for an equal one kept before it only in the hash buckets where one can be (a number
/// among numbers of that value, strings that parse to it and durations of that length; a
/// string among the same text, its number and its date; and so on), and in each of those the
/// first value decides. Lists and objects are bucketed by a coarse form of their items and
/// compared within the bucket, at most [`MAX_NESTED_PEERS`] of them: past that a nested value
/// counts as new (only crafted lists of look-alike strings get there).
pub fn distinct(values: &[Value]) -> Vec<usize> {
    use std::collections::HashMap;
    let mut buckets: HashMap<Key, Vec<usize>> = HashMap::new();
    let mut kept = Vec::new();
    let mut probes = Vec::new();
    let mut homes = Vec::new();
    for (i, v) in values.iter().enumerate() {
        probes.clear();
        homes.clear();
        keys(v, &mut probes, &mut homes);
        let seen = probes.iter().any(|k| {
            buckets.get(k).is_some_and(|members| {
                members
                    .iter()
                    .take(MAX_NESTED_PEERS)
                    .any(|&j| values[j].equals(v))
            })
        });
        if !seen {
            kept.push(i);
            for k in homes.drain(..) {
                buckets.entry(k).or_default().push(i);
            }
        }
    }
    kept
}

/// Lists or objects with the same coarse form that `unique()` compares one by one.
pub const MAX_NESTED_PEERS: usize = 32;

/// Where [`distinct`] looks for a value and files it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Null,
    Bool(bool),
    /// A number, by its bits (zero's sign dropped).
    Number(u64),
    /// A string that parses to this number.
    NumericText(u64),
    /// A duration, by its length in milliseconds.
    Duration(u64),
    /// A string, or a link that does not resolve, by its text.
    Text(Arc<str>),
    Date(NaiveDateTime),
    /// A string that parses to this date.
    DateText(NaiveDateTime),
    File(FileRef),
    Other(&'static str, Arc<str>),
    /// A list or object, by its coarse form.
    Nested(String),
}

fn number_bits(n: f64) -> Option<u64> {
    if n.is_nan() {
        None // NaN equals nothing: always distinct.
    } else if n == 0.0 {
        Some(0)
    } else {
        Some(n.to_bits())
    }
}

fn numeric_text(s: &str) -> Option<u64> {
    s.trim().parse::<f64>().ok().and_then(number_bits)
}

/// The buckets where a value equal to `v` would be (`probes`) and where `v` itself goes (`homes`).
fn keys(v: &Value, probes: &mut Vec<Key>, homes: &mut Vec<Key>) {
    match v {
        Value::Null => {
            probes.push(Key::Null);
            homes.push(Key::Null);
        }
        Value::Bool(b) => {
            probes.push(Key::Bool(*b));
            homes.push(Key::Bool(*b));
        }
        Value::Number(n) => {
            if let Some(b) = number_bits(*n) {
                probes.extend([Key::Number(b), Key::NumericText(b), Key::Duration(b)]);
                homes.push(Key::Number(b));
            }
        }
        Value::Duration(d) => {
            if let Some(b) = number_bits(d.total_ms()) {
                probes.extend([Key::Duration(b), Key::Number(b)]);
                homes.push(Key::Duration(b));
            }
        }
        Value::String(s) => {
            probes.push(Key::Text(s.clone()));
            homes.push(Key::Text(s.clone()));
            if let Some(b) = numeric_text(s) {
                probes.push(Key::Number(b));
                homes.push(Key::NumericText(b));
            }
            if let Some(d) = Date::parse(s) {
                probes.push(Key::Date(d.at));
                homes.push(Key::DateText(d.at));
            }
        }
        Value::Date(d) => {
            probes.extend([Key::Date(d.at), Key::DateText(d.at)]);
            homes.push(Key::Date(d.at));
        }
        Value::Link(l) => {
            let k = match l.file {
                Some(f) => Key::File(f),
                None => Key::Text(l.target.clone()),
            };
            probes.push(k.clone());
            homes.push(k);
        }
        Value::File(f) | Value::Note(f) => {
            probes.push(Key::File(*f));
            homes.push(Key::File(*f));
        }
        Value::Regex(p) => {
            let k = Key::Other("regexp", Arc::from(p.source.as_str()));
            probes.push(k.clone());
            homes.push(k);
        }
        Value::Html(s) | Value::Image(s) | Value::Icon(s) => {
            probes.push(Key::Other(v.type_name(), s.clone()));
            homes.push(Key::Other(v.type_name(), s.clone()));
        }
        Value::List(_) | Value::Object(_) => {
            let mut form = String::new();
            coarse(v, 0, &mut form);
            probes.push(Key::Nested(form.clone()));
            homes.push(Key::Nested(form));
        }
    }
}

/// A form of `v` that values equal to it share (it may be shared by unequal ones too): numbers,
/// numeric strings and durations by number, dates and date strings by date, files by file.
fn coarse(v: &Value, depth: usize, out: &mut String) {
    use std::fmt::Write;
    if depth > 32 {
        out.push('~');
        return;
    }
    let text = |s: &str, out: &mut String| {
        if let Some(b) = numeric_text(s) {
            let _ = write!(out, "n{b};");
        } else if let Some(d) = Date::parse(s) {
            let _ = write!(out, "d{};", d.millis());
        } else {
            let _ = write!(out, "t{}:{s}", s.len());
        }
    };
    match v {
        Value::Null => out.push('z'),
        Value::Bool(b) => out.push(if *b { 'T' } else { 'F' }),
        Value::Number(n) => {
            let _ = write!(out, "n{};", number_bits(*n).unwrap_or(u64::MAX));
        }
        Value::Duration(d) => {
            let _ = write!(out, "n{};", number_bits(d.total_ms()).unwrap_or(u64::MAX));
        }
        Value::String(s) => text(s, out),
        Value::Date(d) => {
            let _ = write!(out, "d{};", d.millis());
        }
        Value::Link(l) => match l.file {
            Some(f) => {
                let _ = write!(out, "f{};", f.0);
            }
            None => text(&l.target, out),
        },
        Value::File(f) | Value::Note(f) => {
            let _ = write!(out, "f{};", f.0);
        }
        Value::Regex(p) => {
            let _ = write!(out, "r{}:{}", p.source.len(), p.source);
        }
        Value::Html(s) | Value::Image(s) | Value::Icon(s) => {
            let _ = write!(out, "h{}:{s}", s.len());
        }
        Value::List(items) => {
            let _ = write!(out, "[{};", items.len());
            for x in items.iter() {
                coarse(x, depth + 1, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            // Equal objects may list their keys in another order.
            let mut parts: Vec<String> = fields
                .iter()
                .map(|(k, x)| {
                    let mut p = format!("{}:{k}", k.len());
                    coarse(x, depth + 1, &mut p);
                    p
                })
                .collect();
            parts.sort_unstable();
            let _ = write!(out, "{{{};", parts.len());
            for p in parts {
                out.push_str(&p);
            }
            out.push('}');
        }
    }
}

/// A length of time: calendar months plus milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duration {
    /// Whole months (a year is 12).
    pub months: i64,
    /// Milliseconds (days and weeks included).
    pub ms: f64,
}

/// Average lengths used to express months in milliseconds (for comparisons and fields).
const MS_PER_DAY: f64 = 86_400_000.0;
const MS_PER_YEAR: f64 = 365.25 * MS_PER_DAY;
const MS_PER_MONTH: f64 = MS_PER_YEAR / 12.0;

impl Duration {
    /// The whole duration in milliseconds (months at their average length).
    pub fn total_ms(&self) -> f64 {
        self.months as f64 * MS_PER_MONTH + self.ms
    }

    /// Parses `1d`, `2 weeks`, `1M 4h`, `-3 days`: numbers with units (see docs/obsidian.md).
    pub fn parse(s: &str) -> Option<Duration> {
        let mut rest = s.trim();
        let mut sign = 1.0;
        if let Some(r) = rest.strip_prefix('-') {
            sign = -1.0;
            rest = r.trim_start();
        } else if let Some(r) = rest.strip_prefix('+') {
            rest = r.trim_start();
        }
        if rest.is_empty() {
            return None;
        }
        let mut out = Duration { months: 0, ms: 0.0 };
        while !rest.is_empty() {
            let num_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            if num_end == 0 {
                return None;
            }
            let n: f64 = rest[..num_end].parse().ok()?;
            rest = rest[num_end..].trim_start();
            let unit_end = rest
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(rest.len());
            let unit = &rest[..unit_end];
            rest = rest[unit_end..].trim_start_matches([' ', ',']);
            let lower = unit.to_ascii_lowercase();
            let ms = match (unit, lower.as_str()) {
                ("M", _) | (_, "month" | "months") => {
                    if n.fract() != 0.0 || n > 1e6 {
                        return None;
                    }
                    out.months += n as i64;
                    continue;
                }
                ("y", _) | (_, "year" | "years" | "yr" | "yrs") => {
                    if n.fract() != 0.0 || n > 1e5 {
                        return None;
                    }
                    out.months += 12 * n as i64;
                    continue;
                }
                ("w", _) | (_, "week" | "weeks") => 7.0 * MS_PER_DAY,
                ("d", _) | (_, "day" | "days") => MS_PER_DAY,
                ("h", _) | (_, "hour" | "hours") => 3_600_000.0,
                ("m", _) | (_, "minute" | "minutes" | "min" | "mins") => 60_000.0,
                ("s", _) | (_, "second" | "seconds" | "sec" | "secs") => 1000.0,
                ("ms", _) | (_, "millisecond" | "milliseconds") => 1.0,
                _ => return None,
            };
            out.ms += n * ms;
        }
        out.months = (out.months as f64 * sign) as i64;
        out.ms *= sign;
        Some(out)
    }

    fn field(&self, name: &str) -> Option<f64> {
        let ms = self.total_ms();
        Some(match name {
            "years" => ms / MS_PER_YEAR,
            "months" => ms / MS_PER_MONTH,
            "weeks" => ms / (7.0 * MS_PER_DAY),
            "days" => ms / MS_PER_DAY,
            "hours" => ms / 3_600_000.0,
            "minutes" => ms / 60_000.0,
            "seconds" => ms / 1000.0,
            "milliseconds" => ms,
            _ => return None,
        })
    }
}

/// A compiled regular expression literal (`/re/flags`).
#[derive(Debug)]
pub struct Pattern {
    /// The compiled expression.
    pub regex: regex::Regex,
    /// The `g` flag: `replace` replaces every match.
    pub global: bool,
    /// The source as written, for printing.
    pub source: String,
}

/// Why a regular expression literal was refused ([`Pattern::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// A flag JavaScript has and capvault does not.
    #[error("unknown regular expression flag `{0}`")]
    UnknownFlag(char),
    /// The compiled expression exceeds the size limit.
    #[error("regular expression too large")]
    TooLarge,
    /// The expression does not compile (the last line of the `regex` crate's message).
    #[error("invalid regular expression: {0}")]
    Invalid(String),
}

impl Pattern {
    /// Compiles `/body/flags`; `i`, `m`, `s` and `u` map onto the `regex` crate's flags, `g`
    /// is kept for `replace`. Size-limited.
    pub fn new(body: &str, flags: &str) -> Result<Pattern, PatternError> {
        let JsRegex { regex, global } =
            jsregex::compile(body, flags, MAX_REGEX_BYTES).map_err(|e| match e {
                JsRegexError::Flag(c) => PatternError::UnknownFlag(c),
                JsRegexError::TooLarge => PatternError::TooLarge,
                JsRegexError::Invalid(m) => PatternError::Invalid(m),
            })?;
        Ok(Pattern {
            regex,
            global,
            source: format!("/{body}/{flags}"),
        })
    }
}

/// A link value: to a note of the vault when it resolves, else its text.
#[derive(Debug, Clone)]
pub struct Link {
    /// The target as written (`Folder/Note`, `https://...`).
    pub target: Arc<str>,
    /// The display text, if any.
    pub display: Option<Value>,
    /// The file it resolves to.
    pub file: Option<FileRef>,
}

/// A value of the Bases language.
#[derive(Debug, Clone)]
pub enum Value {
    /// No value (a missing property).
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number (JavaScript's double).
    Number(f64),
    /// Text.
    String(Arc<str>),
    /// A date or date and time.
    Date(Date),
    /// A duration (`duration("1d")`, `date - date`).
    Duration(Duration),
    /// A list.
    List(Arc<Vec<Value>>),
    /// An object: keys in their order.
    Object(Arc<Vec<(Arc<str>, Value)>>),
    /// A link.
    Link(Arc<Link>),
    /// A file of the vault (`file`, `file.file`, `link.asFile()`).
    File(FileRef),
    /// A note seen as its properties plus `file` (`this`, `note`).
    Note(FileRef),
    /// A regular expression.
    Regex(Arc<Pattern>),
    /// HTML to render (`html()`), returned as text with its type.
    Html(Arc<str>),
    /// An image to render (`image()`): a path or URL.
    Image(Arc<str>),
    /// A Lucide icon name (`icon()`).
    Icon(Arc<str>),
}

impl Value {
    /// A string value.
    pub fn str(s: impl Into<Arc<str>>) -> Value {
        Value::String(s.into())
    }

    /// The type name `isType` checks and errors print.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Date(_) => "date",
            Value::Duration(_) => "duration",
            Value::List(_) => "list",
            Value::Object(_) => "object",
            Value::Link(_) => "link",
            Value::File(_) | Value::Note(_) => "file",
            Value::Regex(_) => "regexp",
            Value::Html(_) => "html",
            Value::Image(_) => "image",
            Value::Icon(_) => "icon",
        }
    }

    /// JavaScript truthiness, except that an empty list or object is falsy (as Obsidian's
    /// `isTruthy` and "is empty" filters treat them).
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => *n != 0.0 && !n.is_nan(),
            Value::String(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Object(o) => !o.is_empty(),
            Value::Duration(d) => d.total_ms() != 0.0,
            _ => true,
        }
    }

    /// "Empty" as `isEmpty()` and the Empty/Filled summaries count it.
    pub fn is_empty(&self) -> bool {
        match self {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        }
    }

    /// A number, when the value is one or converts as `number()` does.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Date(d) => Some(d.millis() as f64),
            Value::Duration(d) => Some(d.total_ms()),
            Value::String(s) => {
                let t = s.trim();
                if t.is_empty() {
                    Some(0.0)
                } else {
                    t.parse::<f64>().ok().filter(|n| !n.is_nan() || t == "NaN")
                }
            }
            _ => None,
        }
    }

    /// The value as text (`toString()`, string concatenation); `names` prints files.
    pub fn text(&self, names: &dyn Fn(FileRef) -> String) -> String {
        let mut out = String::new();
        self.write_text(names, &mut out);
        out
    }

    /// Appends [`Value::text`] to `out`, without building the text of each part apart (and
    /// without recursion: a list nested a hundred thousand deep is written as any other).
    pub fn write_text(&self, names: &dyn Fn(FileRef) -> String, out: &mut String) {
        use std::fmt::Write;
        walk(self, false, |v, after_sibling| {
            if after_sibling {
                out.push_str(", ");
            }
            match v {
                Value::Null | Value::List(_) => {}
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Number(n) => write_number(*n, out),
                Value::String(s) | Value::Html(s) | Value::Image(s) | Value::Icon(s) => {
                    out.push_str(s)
                }
                Value::Date(d) => {
                    let _ = if d.time {
                        write!(out, "{}", d.at.format("%Y-%m-%d %H:%M:%S"))
                    } else {
                        write!(out, "{}", d.at.format("%Y-%m-%d"))
                    };
                }
                Value::Duration(d) => write_number(d.total_ms(), out),
                Value::Object(_) => out.push_str(OBJECT_TEXT),
                // A link with a display is written as its display (visited next).
                Value::Link(l) => {
                    if l.display.is_none() {
                        out.push_str(&l.target)
                    }
                }
                Value::File(f) | Value::Note(f) => out.push_str(&names(*f)),
                Value::Regex(p) => out.push_str(&p.source),
            }
            true
        });
    }

    /// The length of [`Value::text`] at most (exactly, but for a date outside years 0 to 9999),
    /// `path_len` giving a file's, and how many values were read to know it: counting stops
    /// once the length is past `limit`, so a list that shares one long string many times over
    /// is not read in full.
    pub fn text_bound(&self, path_len: &dyn Fn(FileRef) -> usize, limit: u64) -> (u64, u64) {
        let mut total = 0u64;
        let mut read = 0u64;
        walk(self, false, |v, after_sibling| {
            read += 1;
            let n = match v {
                Value::Null | Value::List(_) => 0,
                Value::Bool(b) => 4 + u64::from(!*b),
                Value::Number(n) => number_text_len(*n),
                Value::Duration(d) => number_text_len(d.total_ms()),
                Value::Date(d) => match (d.at.year(), d.time) {
                    (0..=9999, false) => 10,
                    (0..=9999, true) => 19,
                    _ => SCALAR_TEXT,
                },
                Value::String(s) | Value::Html(s) | Value::Image(s) | Value::Icon(s) => {
                    s.len() as u64
                }
                Value::Object(_) => OBJECT_TEXT.len() as u64,
                Value::Link(l) => match &l.display {
                    Some(_) => 0,
                    None => l.target.len() as u64,
                },
                Value::File(f) | Value::Note(f) => path_len(*f) as u64,
                Value::Regex(p) => p.source.len() as u64,
            };
            total = total
                .saturating_add(n)
                .saturating_add(if after_sibling { 2 } else { 0 });
            total <= limit
        });
        (total, read)
    }

    /// The bytes a value takes once written out or copied part by part (a row of a view, a
    /// group's key): its strings, list slots, object entries and links, each part counted
    /// every time it is reached (a list holding one string a thousand times counts it a
    /// thousand times, as its JSON would). Counting stops once past `limit`.
    pub fn width(&self, limit: u64) -> u64 {
        let mut total = 0u64;
        walk(self, true, |v, _| {
            let n = match v {
                Value::String(s) | Value::Html(s) | Value::Image(s) | Value::Icon(s) => {
                    s.len() as u64 + SHARED
                }
                Value::List(items) => LIST + items.len() as u64 * SLOT,
                Value::Object(o) => {
                    LIST + o.iter().map(|(k, _)| k.len() as u64 + ENTRY).sum::<u64>()
                }
                Value::Link(l) => LINK + l.target.len() as u64 + SHARED,
                Value::Regex(p) => SHARED + p.source.len() as u64,
                Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::Date(_)
                | Value::Duration(_)
                | Value::File(_)
                | Value::Note(_) => 0,
            };
            total = total.saturating_add(n);
            total <= limit
        });
        total
    }

    /// The file this value stands for: a file, a note, or a link that resolves.
    pub fn file(&self) -> Option<FileRef> {
        match self {
            Value::File(f) | Value::Note(f) => Some(*f),
            Value::Link(l) => l.file,
            _ => None,
        }
    }

    /// `==`: same type and value; links equal files they resolve to, and each other when they
    /// resolve to the same file (or, unresolved, have the same text); a number equals a string
    /// that parses to it; a date equals a string that parses to it.
    pub fn equals(&self, other: &Value) -> bool {
        use Value as V;
        match (self, other) {
            (V::Null, V::Null) => true,
            (V::Null, _) | (_, V::Null) => false,
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Number(a), V::Number(b)) => a == b,
            (V::Number(a), V::String(s)) | (V::String(s), V::Number(a)) => {
                s.trim().parse::<f64>().is_ok_and(|b| b == *a)
            }
            (V::String(a), V::String(b)) => a == b,
            (V::Date(a), V::Date(b)) => a.at == b.at,
            (V::Date(a), V::String(s)) | (V::String(s), V::Date(a)) => {
                Date::parse(s).is_some_and(|b| b.at == a.at)
            }
            (V::Duration(a), V::Duration(b)) => a.total_ms() == b.total_ms(),
            (V::Duration(a), V::Number(b)) | (V::Number(b), V::Duration(a)) => a.total_ms() == *b,
            (V::List(a), V::List(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.equals(y))
            }
            (V::Object(a), V::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.iter().any(|(k2, v2)| k == k2 && v.equals(v2)))
            }
            (V::Link(a), V::Link(b)) => match (a.file, b.file) {
                (Some(x), Some(y)) => x == y,
                (None, None) => a.target == b.target,
                _ => false,
            },
            (V::Link(l), V::String(s)) | (V::String(s), V::Link(l)) => {
                l.file.is_none() && *l.target == **s
            }
            (V::Link(_) | V::File(_) | V::Note(_), V::Link(_) | V::File(_) | V::Note(_)) => {
                self.file().is_some() && self.file() == other.file()
            }
            (V::Regex(a), V::Regex(b)) => a.source == b.source,
            (V::Html(a), V::Html(b)) | (V::Image(a), V::Image(b)) | (V::Icon(a), V::Icon(b)) => {
                a == b
            }
            _ => false,
        }
    }

    /// `<`, `>`: numbers, dates (with strings that parse as dates), durations, strings
    /// (by code unit, as JavaScript), booleans. `None` when the two do not compare (then every
    /// ordering operator is false, and `null` compares with nothing).
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        use Value as V;
        match (self, other) {
            (V::Null, _) | (_, V::Null) => None,
            (V::Date(a), V::Date(b)) => Some(a.at.cmp(&b.at)),
            (V::Date(a), V::String(s)) => Date::parse(s).map(|b| a.at.cmp(&b.at)),
            (V::String(s), V::Date(b)) => Date::parse(s).map(|a| a.at.cmp(&b.at)),
            (V::String(a), V::String(b)) => Some(utf16_cmp(a, b)),
            (V::Number(_) | V::Bool(_) | V::Duration(_) | V::Date(_), _)
            | (_, V::Number(_) | V::Bool(_) | V::Duration(_) | V::Date(_)) => {
                let (a, b) = (self.as_number()?, other.as_number()?);
                a.partial_cmp(&b)
            }
            _ => None,
        }
    }

    /// What this value sorts by, computed once (a sort compares each row many times); the
    /// evaluator charges its text first ([`super::eval::Evaluator::sort_key`]).
    pub fn sort_key(&self, names: &dyn Fn(FileRef) -> String) -> SortKey {
        if self.is_empty() {
            return SortKey::Empty;
        }
        match self {
            Value::Number(n) => SortKey::Number(*n),
            Value::Duration(d) => SortKey::Number(d.total_ms()),
            Value::Date(d) => SortKey::Date(d.at),
            Value::Bool(b) => SortKey::Bool(*b),
            other => {
                let text = other.text(names);
                SortKey::Text(text.to_lowercase(), text)
            }
        }
    }

    /// The value as the tools return it: plain JSON for JSON's own types; dates, durations,
    /// links, files and rendered values as `{"type": ..., ...}`. `names` gives a file's path.
    pub fn to_json(&self, names: &dyn Fn(FileRef) -> String) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => json!(b),
            Value::Number(n) => {
                if n.is_finite() {
                    if n.fract() == 0.0 && n.abs() < 9e15 {
                        json!(*n as i64)
                    } else {
                        json!(n)
                    }
                } else {
                    json!(number_text(*n))
                }
            }
            Value::String(s) => json!(&**s),
            Value::Date(d) => json!({"type": "date", "value": d.text()}),
            Value::Duration(d) => json!({"type": "duration", "ms": d.total_ms()}),
            Value::List(items) => items.iter().map(|v| v.to_json(names)).collect(),
            Value::Object(o) => serde_json::Value::Object(
                o.iter()
                    .map(|(k, v)| (k.to_string(), v.to_json(names)))
                    .collect(),
            ),
            Value::Link(l) => {
                let mut out = json!({"type": "link", "target": &*l.target});
                if let Some(f) = l.file {
                    out["path"] = json!(names(f));
                }
                if let Some(d) = &l.display {
                    out["display"] = json!(d.text(names));
                }
                out
            }
            Value::File(f) | Value::Note(f) => json!({"type": "file", "path": names(*f)}),
            Value::Regex(p) => json!({"type": "regexp", "source": p.source}),
            Value::Html(s) => json!({"type": "html", "html": &**s}),
            Value::Image(s) => json!({"type": "image", "src": &**s}),
            Value::Icon(s) => json!({"type": "icon", "name": &**s}),
        }
    }

    /// A field of a date or duration (`date.year`, `duration.days`).
    pub fn time_field(&self, name: &str) -> Option<Value> {
        match self {
            Value::Date(d) => {
                let at = d.at;
                Some(Value::Number(f64::from(match name {
                    "year" => at.year(),
                    "month" => at.month() as i32,
                    "day" => at.day() as i32,
                    "hour" => at.hour() as i32,
                    "minute" => at.minute() as i32,
                    "second" => at.second() as i32,
                    "millisecond" => (at.nanosecond() / 1_000_000) as i32,
                    _ => return None,
                })))
            }
            Value::Duration(d) => d.field(name).map(Value::Number),
            _ => None,
        }
    }
}

/// How a value sorts: empty values last, then by type (numbers, dates, booleans, then text),
/// then by value (text case-insensitively, as Obsidian's sort does, then by its exact form).
#[derive(Debug, Clone)]
pub enum SortKey {
    /// A number or duration.
    Number(f64),
    /// A date.
    Date(NaiveDateTime),
    /// A boolean.
    Bool(bool),
    /// Text: lower-cased, then as written.
    Text(String, String),
    /// Missing or empty.
    Empty,
}

impl SortKey {
    fn rank(&self) -> u8 {
        match self {
            SortKey::Number(_) => 0,
            SortKey::Date(_) => 1,
            SortKey::Bool(_) => 2,
            SortKey::Text(..) => 3,
            SortKey::Empty => 4,
        }
    }

    /// Compares; `descending` reverses values of the same type only: empties stay last and
    /// types keep their order.
    pub fn cmp_to(&self, other: &SortKey, descending: bool) -> Ordering {
        let o = match (self, other) {
            (SortKey::Number(a), SortKey::Number(b)) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
            (SortKey::Date(a), SortKey::Date(b)) => a.cmp(b),
            (SortKey::Bool(a), SortKey::Bool(b)) => a.cmp(b),
            (SortKey::Text(la, a), SortKey::Text(lb, b)) => la.cmp(lb).then_with(|| a.cmp(b)),
            (SortKey::Empty, SortKey::Empty) => Ordering::Equal,
            _ => return self.rank().cmp(&other.rank()),
        };
        if descending { o.reverse() } else { o }
    }
}

/// Visits `root` and the values inside it, depth first and in order: a list's items, a
/// link's display, and an object's values when `objects`. `visit` is told whether the value
/// follows a sibling in its list (where text puts a separator), and stops the walk by
/// returning false. The walk keeps one iterator per level of nesting, not one entry per value.
fn walk<'v>(root: &'v Value, objects: bool, mut visit: impl FnMut(&'v Value, bool) -> bool) {
    enum Level<'v> {
        List(std::slice::Iter<'v, Value>, bool),
        Object(std::slice::Iter<'v, (Arc<str>, Value)>),
    }
    let mut stack: Vec<Level<'v>> = Vec::new();
    let mut next = Some((root, false));
    while let Some((v, after_sibling)) = next.take() {
        if !visit(v, after_sibling) {
            return;
        }
        match v {
            Value::List(items) => stack.push(Level::List(items.iter(), false)),
            Value::Object(o) if objects => stack.push(Level::Object(o.iter())),
            Value::Link(l) => {
                if let Some(d) = &l.display {
                    next = Some((d, false));
                    continue;
                }
            }
            _ => {}
        }
        // The next value: the first item of what was just entered, or the next one up.
        while let Some(top) = stack.last_mut() {
            let item = match top {
                Level::List(items, started) => items.next().map(|x| {
                    let after = *started;
                    *started = true;
                    (x, after)
                }),
                Level::Object(entries) => entries.next().map(|(_, x)| (x, false)),
            };
            match item {
                Some(x) => {
                    next = Some(x);
                    break;
                }
                None => {
                    stack.pop();
                }
            }
        }
    }
}

/// JavaScript's `String(number)` for the common cases: integers without `.0`, `NaN`,
/// `Infinity`, exponents beyond 1e21.
pub fn number_text(n: f64) -> String {
    let mut out = String::new();
    write_number(n, &mut out);
    out
}

/// Appends [`number_text`] to `out` (a `String`, or a counter of bytes).
fn write_number(n: f64, out: &mut impl std::fmt::Write) {
    use std::fmt::Write;
    let _ = if n.is_nan() {
        out.write_str("NaN")
    } else if n.is_infinite() {
        out.write_str(if n > 0.0 { "Infinity" } else { "-Infinity" })
    } else if n == 0.0 {
        out.write_str("0")
    } else if (1e-7..1e21).contains(&n.abs()) {
        write!(out, "{n}")
    } else if n.abs() >= 1e21 {
        // Rust writes `1.5e21`, JavaScript `1.5e+21`.
        struct PlusExponent<'w, W>(&'w mut W);
        impl<W: std::fmt::Write> std::fmt::Write for PlusExponent<'_, W> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                match s.split_once('e') {
                    Some((m, e)) => {
                        self.0.write_str(m)?;
                        self.0.write_str("e+")?;
                        self.0.write_str(e)
                    }
                    None => self.0.write_str(s),
                }
            }
        }
        write!(PlusExponent(out), "{n:e}")
    } else {
        write!(out, "{n:e}")
    };
}

/// The length of [`number_text`], counted without writing it.
fn number_text_len(n: f64) -> u64 {
    struct Count(u64);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len() as u64;
            Ok(())
        }
    }
    let mut c = Count(0);
    write_number(n, &mut c);
    c.0
}

/// Bytes one value takes in a list (its own part); what it points to is counted apart.
pub const SLOT: u64 = std::mem::size_of::<Value>() as u64;
/// What a shared string, list or link takes beyond its contents: its reference counts, and
/// the padding that rounds an allocation up to a multiple of 8.
pub const SHARED: u64 = 24;
/// What a list value takes beyond its slots: the shared vector's header.
pub const LIST: u64 = SHARED + std::mem::size_of::<Vec<Value>>() as u64;
/// What one link value takes beyond its text.
pub const LINK: u64 = std::mem::size_of::<Link>() as u64 + SHARED;
/// What one entry of an object takes beyond its key's text and its value's parts.
pub const ENTRY: u64 = std::mem::size_of::<(Arc<str>, Value)>() as u64 + SHARED;
/// The longest text of a number, a date or a duration.
pub const SCALAR_TEXT: u64 = 32;
/// An object's text, as JavaScript's `String({})`.
const OBJECT_TEXT: &str = "[object Object]";

/// Compares strings by UTF-16 code units, as JavaScript's `<` does.
fn utf16_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

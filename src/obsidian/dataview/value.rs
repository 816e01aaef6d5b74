//! Dataview's values, and how an inline field's text or a frontmatter value becomes one.
//!
//! The grammar follows Dataview's metadata parser (an inline value is one "atom", or atoms
//! separated by commas, and must be read whole; see the module docs of [`super`] for the
//! rules and where we differ). Every function here runs in time linear in its input: each
//! alternative is tried at most a constant number of times at a position, and a failed
//! alternative scans at most to the next quote, bracket or end.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

pub use crate::obsidian::bases::value::{Date, Duration};

/// A value as Dataview types it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An empty inline field (`key::`), or YAML `null`.
    Null,
    /// `true`, `false` (also `True`, `False` in inline fields).
    Bool(bool),
    /// `6`, `2.4`, `-80`.
    Number(f64),
    /// Anything else, and quoted strings (`"yes"`) and tags (`#tag`).
    Text(String),
    /// `2021-04`, `2021-04-18`, `2021-04-18T04:19:35.000+06:30`.
    Date(DvDate),
    /// `7 hours`, `16days`, `6hr7min`, `1 day, 3 hours`.
    Duration(Duration),
    /// `[[Page]]`, `[[Page|Text]]`, `![[Embed]]`.
    Link(Link),
    /// `1, 2, 3` in an inline field; a YAML sequence.
    List(Vec<Value>),
    /// A YAML mapping (inline fields have no objects), keys in file order.
    Object(Vec<(String, Value)>),
}

/// A date: the wall-clock time as written, and the zone written after it, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct DvDate {
    /// The date and time as written (Bases' date type: `time` is whether an hour was given).
    pub date: Date,
    /// `+06:30`, `-5`, `Z` or `[Europe/Paris]` after the seconds; the time is kept as written
    /// (Dataview sets the zone keeping the local time).
    pub zone: Option<Zone>,
}

/// A time zone written after a date-time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zone {
    /// `Z`, `+06:30`, `-05`: minutes east of UTC.
    Offset(i32),
    /// `[Europe/Paris]`: the name, not checked against a time-zone database.
    Named(String),
}

/// A link as Dataview reads it: a path, an optional heading or block, display text, embed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The path part as written (not resolved against the vault).
    pub path: String,
    /// What follows `#` (a heading) or `#^` (a block id).
    pub subpath: Option<Subpath>,
    /// The text after the first unescaped `|`.
    pub display: Option<String>,
    /// Written `![[...]]`.
    pub embed: bool,
}

/// The part of a link after `#`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subpath {
    /// `#Heading`: the text up to the next `#`, as Dataview splits it.
    Heading(String),
    /// `#^id`.
    Block(String),
}

impl Link {
    /// A link's inside (`Page#Part|Text`): Dataview splits on the first `|` not preceded by
    /// `\` (`\|` in the path becomes `|`), then on `#^` or `#`.
    pub fn from_inner(inner: &str, embed: bool) -> Link {
        let mut pipe = None;
        let bytes = inner.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'|' && (i == 0 || bytes[i - 1] != b'\\') {
                pipe = Some(i);
                break;
            }
        }
        let (path, display) = match pipe {
            Some(i) => (
                inner[..i].replace("\\|", "|"),
                Some(inner[i + 1..].to_owned()),
            ),
            None => (inner.replace("\\|", "|"), None),
        };
        let (path, subpath) = if let Some((p, rest)) = path.split_once("#^") {
            let block = rest.split("#^").next().unwrap_or_default();
            (p.to_owned(), Some(Subpath::Block(block.to_owned())))
        } else if let Some((p, rest)) = path.split_once('#') {
            let heading = rest.split('#').next().unwrap_or_default();
            (p.to_owned(), Some(Subpath::Heading(heading.to_owned())))
        } else {
            (path, None)
        };
        Link {
            path,
            subpath,
            display,
            embed,
        }
    }
}

/// Milliseconds in a day, and in an average month (as Bases' durations count them).
const MS_PER_DAY: f64 = 86_400_000.0;
const MS_PER_MONTH: f64 = 365.25 * MS_PER_DAY / 12.0;

/// The typed value of an inline field's text (already trimmed of the field's syntax): `Null`
/// when it is blank, an atom or a comma-separated list of atoms when the whole text reads as
/// one, else the text itself.
pub fn parse_inline_value(raw: &str) -> Value {
    let s = raw.trim();
    if s.is_empty() {
        return Value::Null;
    }
    match inline_field(s) {
        Some(v) => v,
        None => Value::Text(s.to_owned()),
    }
}

/// A frontmatter value mapped as Dataview maps it: strings that read whole as a date, a
/// duration or a link become one; everything else keeps its type.
pub fn from_frontmatter(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => {
            let whole = |r: Option<(Value, usize)>| r.filter(|(_, end)| *end == s.len());
            whole(date(s, 0))
                .or_else(|| whole(duration(s, 0)))
                .or_else(|| whole(embed_link(s, 0)))
                .map_or_else(|| Value::Text(s.clone()), |(v, _)| v)
        }
        serde_json::Value::Array(items) => {
            Value::List(items.iter().map(from_frontmatter).collect())
        }
        serde_json::Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), from_frontmatter(v)))
                .collect(),
        ),
    }
}

/// The whole of `s` as an inline value: `atom`, or `atom , list` (a trailing comma makes a
/// list of one: `[[a]],`).
fn inline_field(s: &str) -> Option<Value> {
    let (first, after) = atom(s, 0)?;
    if let Some(next) = comma(s, after) {
        // Dataview's list alternative: the rest is zero or more atoms, each comma checked to
        // be followed by one. This alternative wins whenever the comma is there.
        let mut items = vec![first];
        let mut pos = next;
        if let Some((v, end)) = atom(s, pos) {
            items.push(v);
            pos = end;
            while let Some(after_comma) = comma(s, pos) {
                let Some((v, end)) = atom(s, after_comma) else {
                    break;
                };
                items.push(v);
                pos = end;
            }
        }
        return (pos == s.len()).then_some(Value::List(items));
    }
    (after == s.len()).then_some(first)
}

/// Optional whitespace, `,`, optional whitespace at `i`: the position after it.
fn comma(s: &str, i: usize) -> Option<usize> {
    let j = skip_ws(s, i);
    s[j..].starts_with(',').then(|| skip_ws(s, j + 1))
}

/// The position after any whitespace at `i`.
fn skip_ws(s: &str, i: usize) -> usize {
    let rest = &s[i..];
    i + (rest.len() - rest.trim_start_matches(is_js_space).len())
}

/// JavaScript's `\s`: Unicode white space plus the byte-order mark.
pub(crate) fn is_js_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// One atom at `i`, in Dataview's order: date, duration, string, tag, link, boolean, number,
/// null. The first that matches wins, even if what follows it then fails.
fn atom(s: &str, i: usize) -> Option<(Value, usize)> {
    date(s, i)
        .or_else(|| duration(s, i))
        .or_else(|| string(s, i))
        .or_else(|| tag(s, i))
        .or_else(|| embed_link(s, i))
        .or_else(|| {
            let rest = &s[i..];
            ["true", "false", "True", "False"]
                .iter()
                .find(|w| rest.starts_with(*w))
                .map(|w| (Value::Bool(w.eq_ignore_ascii_case("true")), i + w.len()))
        })
        .or_else(|| number(s, i).map(|(n, end)| (Value::Number(n), end)))
        .or_else(|| s[i..].starts_with("null").then_some((Value::Null, i + 4)))
}

/// Exactly `n` ASCII digits at `i`, as a number (the regex `\d{n}` at a position).
fn digits(s: &str, i: usize, n: usize) -> Option<u32> {
    let b = s.as_bytes().get(i..i + n)?;
    b.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// A Dataview date at `i`: `YYYY-MM`, then each of `-DD`, `THH`, `:mm`, `:ss`, `.SSS`, zone
/// in turn while present (the zone only after seconds). Checked strictly: a day, hour, minute
/// or second out of range is no date (Dataview's Luxon rolls `2021-02-30` over to March 2).
pub(crate) fn date(s: &str, i: usize) -> Option<(Value, usize)> {
    let b = s.as_bytes();
    let year = digits(s, i, 4)?;
    if b.get(i + 4) != Some(&b'-') {
        return None;
    }
    let month = digits(s, i + 5, 2)?;
    let mut pos = i + 7;
    let (mut day, mut hour, mut minute, mut second, mut milli) = (1, None, 0, 0, 0);
    let mut zone = None;
    if b.get(pos) == Some(&b'-')
        && let Some(d) = digits(s, pos + 1, 2)
    {
        day = d;
        pos += 3;
        if b.get(pos) == Some(&b'T')
            && let Some(h) = digits(s, pos + 1, 2)
        {
            hour = Some(h);
            pos += 3;
            if b.get(pos) == Some(&b':')
                && let Some(m) = digits(s, pos + 1, 2)
            {
                minute = m;
                pos += 3;
                if b.get(pos) == Some(&b':')
                    && let Some(sec) = digits(s, pos + 1, 2)
                {
                    second = sec;
                    pos += 3;
                    if b.get(pos) == Some(&b'.')
                        && let Some(ms) = digits(s, pos + 1, 3)
                    {
                        milli = ms;
                        pos += 4;
                    }
                    if let Some((z, end)) = zone_at(s, pos) {
                        zone = Some(z);
                        pos = end;
                    }
                }
            }
        }
    }
    let d = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
    let t = NaiveTime::from_hms_milli_opt(hour.unwrap_or(0), minute, second, milli)?;
    let value = DvDate {
        date: Date {
            at: NaiveDateTime::new(d, t),
            time: hour.is_some(),
        },
        zone,
    };
    Some((Value::Date(value), pos))
}

/// A zone at `i`: `+H`, `-HH`, `+HH:mm`, `Z`, or `[name]`.
fn zone_at(s: &str, i: usize) -> Option<(Zone, usize)> {
    let b = s.as_bytes();
    match b.get(i)? {
        sign @ (b'+' | b'-') => {
            let (hours, mut pos) = match (digits(s, i + 1, 2), digits(s, i + 1, 1)) {
                (Some(h), _) => (h, i + 3),
                (None, Some(h)) => (h, i + 2),
                _ => return None,
            };
            let mut minutes = 0;
            if b.get(pos) == Some(&b':')
                && let Some(m) = digits(s, pos + 1, 2)
            {
                minutes = m;
                pos += 3;
            }
            let total = i32::try_from(hours * 60 + minutes).ok()?;
            Some((
                Zone::Offset(if *sign == b'-' { -total } else { total }),
                pos,
            ))
        }
        b'Z' => Some((Zone::Offset(0), i + 1)),
        b'[' => {
            // `[0-9A-Za-z+-\/]+`: in a JavaScript class `+-\/` is the range `+` to `/`.
            let len = b[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || (b'+'..=b'/').contains(c))
                .count();
            (len > 0 && b.get(i + 1 + len) == Some(&b']'))
                .then(|| (Zone::Named(s[i + 1..i + 1 + len].to_owned()), i + 2 + len))
        }
        _ => None,
    }
}

/// `-?[0-9]+(\.[0-9]+)?` at `i`.
fn number(s: &str, i: usize) -> Option<(f64, usize)> {
    let b = s.as_bytes();
    let mut pos = i;
    if b.get(pos) == Some(&b'-') {
        pos += 1;
    }
    let int = b[pos.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    if int == 0 {
        return None;
    }
    pos += int;
    if b.get(pos) == Some(&b'.') {
        let frac = b[pos + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if frac > 0 {
            pos += 1 + frac;
        }
    }
    Some((s[i..pos].parse().ok()?, pos))
}

/// Duration units, longest first (Dataview tries them in that order), with their length:
/// months, or milliseconds.
const UNITS: [(&str, bool, f64); 31] = [
    ("minutes", false, 60_000.0),
    ("seconds", false, 1000.0),
    ("minute", false, 60_000.0),
    ("months", true, 1.0),
    ("second", false, 1000.0),
    ("years", true, 12.0),
    ("month", true, 1.0),
    ("weeks", false, 7.0 * MS_PER_DAY),
    ("hours", false, 3_600_000.0),
    ("year", true, 12.0),
    ("week", false, 7.0 * MS_PER_DAY),
    ("days", false, MS_PER_DAY),
    ("hour", false, 3_600_000.0),
    ("mins", false, 60_000.0),
    ("secs", false, 1000.0),
    ("yrs", true, 12.0),
    ("mos", true, 1.0),
    ("wks", false, 7.0 * MS_PER_DAY),
    ("day", false, MS_PER_DAY),
    ("hrs", false, 3_600_000.0),
    ("min", false, 60_000.0),
    ("sec", false, 1000.0),
    ("yr", true, 12.0),
    ("mo", true, 1.0),
    ("wk", false, 7.0 * MS_PER_DAY),
    ("hr", false, 3_600_000.0),
    ("w", false, 7.0 * MS_PER_DAY),
    ("d", false, MS_PER_DAY),
    ("h", false, 3_600_000.0),
    ("m", false, 60_000.0),
    ("s", false, 1000.0),
];

/// One `number [space] unit` at `i`: months and milliseconds, and the end.
fn duration_part(s: &str, i: usize) -> Option<(f64, f64, usize)> {
    let (n, after) = number(s, i)?;
    let pos = skip_ws(s, after);
    let rest = &s[pos..];
    let (unit, months, len) = UNITS.iter().find(|(u, _, _)| rest.starts_with(u))?;
    Some(if *months {
        (n * len, 0.0, pos + unit.len())
    } else {
        (0.0, n * len, pos + unit.len())
    })
}

/// A duration at `i`: parts separated by optional whitespace or a comma.
pub(crate) fn duration(s: &str, i: usize) -> Option<(Value, usize)> {
    let (mut months, mut ms, mut pos) = duration_part(s, i)?;
    loop {
        let next = comma(s, pos).unwrap_or_else(|| skip_ws(s, pos));
        let Some((mo, m, end)) = duration_part(s, next) else {
            break;
        };
        months += mo;
        ms += m;
        pos = end;
    }
    // Whole months stay months; a fraction is counted at the average month's length.
    let whole = months.trunc();
    let d = Duration {
        months: whole.clamp(-1e15, 1e15) as i64,
        ms: ms + (months - whole) * MS_PER_MONTH,
    };
    Some((Value::Duration(d), pos))
}

/// A quoted string at `i`, with `\"` and `\\` unescaped (other escapes kept as written).
fn string(s: &str, i: usize) -> Option<(Value, usize)> {
    let rest = s.get(i..)?.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.char_indices();
    while let Some((j, c)) = chars.next() {
        match c {
            '"' => return Some((Value::Text(out), i + 1 + j + 1)),
            '\\' => {
                let (_, e) = chars.next()?;
                if e != '"' && e != '\\' {
                    out.push('\\');
                }
                out.push(e);
            }
            c => out.push(c),
        }
    }
    None
}

/// Characters that end a tag in Dataview's grammar.
fn ends_tag(c: char) -> bool {
    matches!(c, '\u{2000}'..='\u{206F}' | '\u{2E00}'..='\u{2E7F}')
        || "'!\"#$%&()*+,.:;<=>?@^`{|}~[]\\".contains(c)
        || is_js_space(c)
}

/// `#tag` at `i` (read as text).
fn tag(s: &str, i: usize) -> Option<(Value, usize)> {
    let rest = s.get(i..)?.strip_prefix('#')?;
    let len = rest.find(ends_tag).unwrap_or(rest.len());
    Some((Value::Text(s[i..i + 1 + len].to_owned()), i + 1 + len))
}

/// `[[...]]` or `![[...]]` at `i`: the inside holds no `[` or `]`.
pub(crate) fn embed_link(s: &str, i: usize) -> Option<(Value, usize)> {
    let rest = s.get(i..)?;
    let (embed, rest) = match rest.strip_prefix('!') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let inner = rest.strip_prefix("[[")?;
    let close = inner.find(['[', ']'])?;
    if !inner[close..].starts_with("]]") {
        return None;
    }
    let start = i + usize::from(embed) + 2;
    let link = Link::from_inner(&inner[..close], embed);
    Some((Value::Link(link), start + close + 2))
}

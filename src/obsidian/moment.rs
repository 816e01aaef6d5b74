//! Moment.js date formats, as Obsidian uses them for daily-note names and template variables.
//!
//! Obsidian bundles Moment 2.29.4 with the English locale unless the user picks another
//! language; this module reproduces that locale. The tokenizer follows Moment's own token regex
//! (`src/lib/format/format.js`) rule for rule, because daily-note names must come out
//! byte-identical to the ones Obsidian creates:
//!
//! - `[text]` is literal. The bracket runs to the last `]` before the next `[`, so `[a]b]` is the
//!   literal `a]b`; a `[` with no closing bracket is itself literal.
//! - Tokens are matched from the left, trying Moment's alternatives in Moment's order: `YYYYY`
//!   is one five-digit year token, `YYY` is `YY` followed by `Y`, `ggg` is `gg` followed by a
//!   literal `g`, `MMMMM` is `MMMM` followed by `M`.
//! - A backslash escapes the whole token after it (`\YYYY` prints `YYYY`); a lone backslash
//!   prints nothing.
//! - Any other character, letters included, prints as itself (`T`, `W` in `gggg-[W]ww` needs the
//!   brackets only because `W` *is* a token). Line breaks are dropped, as Moment drops them.
//! - The locale formats `LT`, `LTS`, `L`, `LL`, `LLL`, `LLLL`, `l`, `ll`, `lll`, `llll` expand to
//!   their English patterns first (`L` is `MM/DD/YYYY`, so in a daily-note format it makes
//!   folders, exactly as in Obsidian).
//!
//! Not supported, reported as [`MomentError::Unsupported`] rather than printed wrongly: eras
//! (`N`, `y`), Unix timestamps (`X`, `x`) and time zones (`Z`, `z`), none of which a date
//! without a zone can answer. [`format_date`] refuses time-of-day tokens (`HH`, `mm`, `A`...)
//! with [`MomentError::NeedsTime`]; [`format_datetime`] accepts them.
//!
//! Week tokens follow Moment exactly: `w`/`ww`/`gg`/`gggg` are the *locale* week and week-year
//! (English: weeks start on Sunday and the week holding January 1st is week 1), `W`/`WW`/`GG`/
//! `GGGG` the ISO week and week-year.
//!
//! [`parse_date`] is Moment's strict parse (`moment(text, format, true)`), for the tokens a
//! note name can be recognised by: years, months (numbers and names), days, day of year,
//! weekdays (checked against the date) and time fields (checked, then ignored).

use std::borrow::Cow;

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use unicode_normalization::UnicodeNormalization;

/// Longest format accepted, in bytes. Real formats are a few dozen bytes; the bound keeps the
/// output (at most about ten bytes per format byte) small.
pub const MAX_FORMAT_BYTES: usize = 1024;

/// Longest text [`parse_date`] looks at, in bytes (a file name is at most 255).
const MAX_PARSE_INPUT_BYTES: usize = 4096;

/// Why a date could not be formatted or turned into a note path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MomentError {
    /// The format is the empty string.
    #[error("the date format is empty")]
    EmptyFormat,
    /// The format is longer than [`MAX_FORMAT_BYTES`].
    #[error("the date format is longer than {max} bytes")]
    FormatTooLong {
        /// The limit.
        max: usize,
    },
    /// A time-of-day token in a format given only a date.
    #[error("the format token `{token}` needs a time of day, but only a date was given")]
    NeedsTime {
        /// The token as written in the format.
        token: String,
    },
    /// A Moment token this module does not implement (eras, timestamps, time zones).
    #[error(
        "the format token `{token}` is not supported (eras, timestamps and time zones are not)"
    )]
    Unsupported {
        /// The token as written in the format.
        token: String,
    },
    /// The note path came out empty (for example the format was `[]`).
    #[error("the date format produces an empty note name")]
    EmptyPath,
    /// The folder or the formatted name contains a `..` component.
    #[error("the daily-note folder or format produces a `..` path component")]
    ParentComponent,
}

/// Formats `date` with a Moment.js format, like `moment(date).format(format)` in Obsidian.
///
/// ```
/// use capvault::obsidian::moment::format_date;
/// use chrono::NaiveDate;
///
/// let d = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap();
/// assert_eq!(format_date("YYYY-MM-DD", d).unwrap(), "2024-03-01");
/// assert_eq!(format_date("dddd, MMMM Do YYYY", d).unwrap(), "Friday, March 1st 2024");
/// assert_eq!(format_date("gggg-[W]ww", d).unwrap(), "2024-W09");
/// assert!(format_date("YYYY-MM-DD HH:mm", d).is_err()); // needs a time
/// ```
pub fn format_date(format: &str, date: NaiveDate) -> Result<String, MomentError> {
    format_with(format, date, None)
}

/// Formats a date and time of day with a Moment.js format (for `{{time}}` and
/// `{{date:FORMAT}}` in templates). Time zones are unknown, so `Z`, `z`, `X` and `x` are refused.
///
/// ```
/// use capvault::obsidian::moment::format_datetime;
/// use chrono::NaiveDate;
///
/// let t = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap().and_hms_opt(14, 5, 0).unwrap();
/// assert_eq!(format_datetime("HH:mm", t).unwrap(), "14:05");
/// assert_eq!(format_datetime("h:mm A", t).unwrap(), "2:05 PM");
/// ```
pub fn format_datetime(format: &str, datetime: NaiveDateTime) -> Result<String, MomentError> {
    format_with(format, datetime.date(), Some(datetime.time()))
}

/// The vault path of the note for `date`: `folder/<formatted>.md`, the way Obsidian builds it.
///
/// A `/` in the format makes subfolders (`YYYY/MM/YYYY-MM-DD`). The result is cleaned like
/// Obsidian's `normalizePath`: `\` becomes `/`, repeated and surrounding slashes go, `.`
/// components go, non-breaking spaces become spaces, and the text is put in Unicode NFC. An
/// empty folder (or `/`) is the vault root. `.md` is added unless the name already ends with it.
/// A `..` component is refused; callers still validate the result as a vault path.
///
/// ```
/// use capvault::obsidian::moment::daily_note_path;
/// use chrono::NaiveDate;
///
/// let d = NaiveDate::from_ymd_opt(2024, 1, 15).unwrap();
/// assert_eq!(daily_note_path("/Journal/", "YYYY/MM/YYYY-MM-DD", d).unwrap(),
///            "Journal/2024/01/2024-01-15.md");
/// assert_eq!(daily_note_path("", "YYYY-MM-DD", d).unwrap(), "2024-01-15.md");
/// ```
pub fn daily_note_path(folder: &str, format: &str, date: NaiveDate) -> Result<String, MomentError> {
    let mut name = format_date(format, date)?;
    if !name.ends_with(".md") {
        name.push_str(".md");
    }
    let joined = format!("{folder}/{name}").replace('\\', "/");
    let mut parts = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(MomentError::ParentComponent),
            _ => parts.push(part),
        }
    }
    if parts.last().is_none_or(|last| *last == ".md") {
        return Err(MomentError::EmptyPath);
    }
    Ok(parts
        .join("/")
        .replace(['\u{a0}', '\u{202f}'], " ")
        .nfc()
        .collect())
}

/// Parses `input` with a Moment.js format in strict mode (`moment(input, format, true)`):
/// the whole input must match, numeric fields must have the widths Moment's strict regexes
/// allow (`YYYY` four digits, `MM`/`DD` two, `M`/`D` one or two), names are compared without
/// regard to case, and the date must exist.
///
/// Supported tokens: `YYYY`, `YY` (69-99 are 19xx), `Y`, `M`, `MM`, `MMM`, `MMMM`, `D`, `DD`,
/// `Do`, `DDD`, `DDDD`, `d`, `dd`, `ddd`, `dddd`, `H`, `HH`, `h`, `hh`, `m`, `mm`, `s`, `ss`,
/// `a`, `A`, and literal text. Any other token gives `None`, and so does a format without a
/// year (Moment would take the current year, which a pure function cannot know).
///
/// Two deliberate differences from Moment: a field given twice must agree (Moment keeps the
/// last; `YYYY/MM/YYYY-MM-DD` must not accept `2024/02/2024-01-15`), and a weekday must match the
/// date (as in Moment).
///
/// ```
/// use capvault::obsidian::moment::parse_date;
/// use chrono::NaiveDate;
///
/// let d = NaiveDate::from_ymd_opt(2024, 1, 15).unwrap();
/// assert_eq!(parse_date("YYYY-MM-DD", "2024-01-15"), Some(d));
/// assert_eq!(parse_date("YYYY-MM-DD", "2024-1-15"), None);
/// assert_eq!(parse_date("YYYY-MM-DD", "2024-02-30"), None);
/// ```
pub fn parse_date(format: &str, input: &str) -> Option<NaiveDate> {
    if format.is_empty() || format.len() > MAX_FORMAT_BYTES || input.len() > MAX_PARSE_INPUT_BYTES {
        return None;
    }
    let expanded = expand_locale_formats(format);
    let mut parsed = Parsed::default();
    let mut rest = input;
    for piece in tokenize(&expanded) {
        rest = match piece {
            // Moment's strict mode rejects a literal that matched nothing, so `[]` never parses.
            Piece::Literal(text) if text.is_empty() => return None,
            Piece::Literal(text) => rest.strip_prefix(&*text)?,
            Piece::Field(field, _) => parsed.consume(field, rest)?,
        };
    }
    if !rest.is_empty() {
        return None;
    }
    parsed.resolve()
}

/// The date of a daily note, recognised the way Obsidian's daily-notes interface does: only the
/// last `/`-separated part of the format is matched, strictly, against the file's base name
/// (folders and a `.md` extension are stripped from `path`). So with `YYYY/MM/YYYY-MM-DD`, any
/// `2024-01-15.md` under the daily-notes folder is the note of 15 January 2024.
pub fn daily_note_date(format: &str, path: &str) -> Option<NaiveDate> {
    let name_format = format.rsplit('/').next().unwrap_or(format);
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let base = file_name.strip_suffix(".md").unwrap_or(file_name);
    parse_date(name_format, base)
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

/// One piece of a tokenized format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    /// Text printed as is (brackets and escapes already removed).
    Literal(Cow<'a, str>),
    /// A Moment token, with its text for error messages.
    Field(Field, &'a str),
}

/// Every Moment token that prints something computed from the date or time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Month,
    MonthOrdinal,
    Month2,
    MonthShort,
    MonthLong,
    Quarter,
    QuarterOrdinal,
    Day,
    DayOrdinal,
    Day2,
    DayOfYear,
    DayOfYearOrdinal,
    DayOfYear3,
    Weekday,
    WeekdayOrdinal,
    WeekdayMin,
    WeekdayShort,
    WeekdayLong,
    LocaleWeekday,
    IsoWeekday,
    Week,
    WeekOrdinal,
    Week2,
    IsoWeek,
    IsoWeekOrdinal,
    IsoWeek2,
    /// `Y`: the year, four digits up to 9999, `+` and all digits above.
    YearSigned,
    Year2,
    Year4,
    Year5,
    Year6,
    WeekYear2,
    WeekYear4,
    WeekYear5,
    IsoWeekYear2,
    IsoWeekYear4,
    IsoWeekYear5,
    MeridiemLower,
    MeridiemUpper,
    Hour,
    Hour2,
    Hour12,
    Hour12Padded,
    /// `k`: 1-24.
    HourK,
    HourKPadded,
    /// `hmm`
    Hour12Minute,
    /// `hmmss`
    Hour12MinuteSecond,
    /// `Hmm`
    HourMinute,
    /// `Hmmss`
    HourMinuteSecond,
    Minute,
    Minute2,
    Second,
    Second2,
    /// `S` to `SSSSSSSSS`: fractional seconds with that many digits.
    Fraction(u8),
    /// A Moment token this module does not implement.
    Unsupported,
}

impl Field {
    /// The field a complete token stands for, or `None` for text Moment prints literally.
    fn from_token(token: &str) -> Option<Field> {
        use Field::*;
        Some(match token {
            "M" => Month,
            "Mo" => MonthOrdinal,
            "MM" => Month2,
            "MMM" => MonthShort,
            "MMMM" => MonthLong,
            "Q" => Quarter,
            "Qo" => QuarterOrdinal,
            "D" => Day,
            "Do" => DayOrdinal,
            "DD" => Day2,
            "DDD" => DayOfYear,
            "DDDo" => DayOfYearOrdinal,
            "DDDD" => DayOfYear3,
            "d" => Weekday,
            "do" => WeekdayOrdinal,
            "dd" => WeekdayMin,
            "ddd" => WeekdayShort,
            "dddd" => WeekdayLong,
            "e" => LocaleWeekday,
            "E" => IsoWeekday,
            "w" => Week,
            "wo" => WeekOrdinal,
            "ww" => Week2,
            "W" => IsoWeek,
            "Wo" => IsoWeekOrdinal,
            "WW" => IsoWeek2,
            "Y" => YearSigned,
            "YY" => Year2,
            "YYYY" => Year4,
            "YYYYY" => Year5,
            "YYYYYY" => Year6,
            "gg" => WeekYear2,
            "gggg" => WeekYear4,
            "ggggg" => WeekYear5,
            "GG" => IsoWeekYear2,
            "GGGG" => IsoWeekYear4,
            "GGGGG" => IsoWeekYear5,
            "a" => MeridiemLower,
            "A" => MeridiemUpper,
            "H" => Hour,
            "HH" => Hour2,
            "h" => Hour12,
            "hh" => Hour12Padded,
            "k" => HourK,
            "kk" => HourKPadded,
            "hmm" => Hour12Minute,
            "hmmss" => Hour12MinuteSecond,
            "Hmm" => HourMinute,
            "Hmmss" => HourMinuteSecond,
            "m" => Minute,
            "mm" => Minute2,
            "s" => Second,
            "ss" => Second2,
            "N" | "NN" | "NNN" | "NNNN" | "NNNNN" | "y" | "yo" | "yy" | "yyy" | "yyyy" | "x"
            | "X" | "z" | "zz" | "Z" | "ZZ" => Unsupported,
            // 1 to 9 `S`, the only lengths the tokenizer produces; the cast cannot truncate.
            s if (1..=9).contains(&s.len()) && s.bytes().all(|b| b == b'S') => {
                Fraction(s.len() as u8)
            }
            _ => return None,
        })
    }

    fn needs_time(self) -> bool {
        use Field::*;
        matches!(
            self,
            MeridiemLower
                | MeridiemUpper
                | Hour
                | Hour2
                | Hour12
                | Hour12Padded
                | HourK
                | HourKPadded
                | Hour12Minute
                | Hour12MinuteSecond
                | HourMinute
                | HourMinuteSecond
                | Minute
                | Minute2
                | Second
                | Second2
                | Fraction(_)
        )
    }
}

/// Splits a format into pieces exactly as Moment's `formattingTokens` regex does.
fn tokenize(format: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < format.len() {
        let rest = &format[i..];
        if rest.starts_with('[')
            && let Some(close) = bracket_close(rest)
        {
            pieces.push(Piece::Literal(Cow::Borrowed(&rest[1..close])));
            i += close + 1;
            continue;
        }
        if rest.starts_with('\\')
            && let Some(len) = token_len(&rest[1..])
        {
            // An escaped token prints as itself, minus every backslash in it.
            pieces.push(Piece::Literal(Cow::Owned(
                rest[..1 + len].replace('\\', ""),
            )));
            i += 1 + len;
            continue;
        }
        match token_len(rest) {
            Some(len) => {
                let token = &rest[..len];
                pieces.push(match Field::from_token(token) {
                    Some(field) => Piece::Field(field, token),
                    None if token.contains('\\') => {
                        Piece::Literal(Cow::Owned(token.replace('\\', "")))
                    }
                    None => Piece::Literal(Cow::Borrowed(token)),
                });
                i += len;
            }
            // A line break: Moment's `.` does not match it, so it vanishes from the output.
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    pieces
}

/// For text starting with `[`: the byte index of the bracket literal's closing `]`, which is
/// the last `]` before the next `[` (the regex `\[[^\[]*\]` is greedy).
fn bracket_close(rest: &str) -> Option<usize> {
    let body = &rest[1..];
    let limit = body.find('[').unwrap_or(body.len());
    body[..limit].rfind(']').map(|j| j + 1)
}

/// Byte length of the token at the start of `rest`, following the alternatives of Moment's
/// regex in order; `None` at the end or at a line break (which `.` does not match).
fn token_len(rest: &str) -> Option<usize> {
    let c = rest.chars().next()?;
    if matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') {
        return None;
    }
    let b = rest.as_bytes();
    let next = b.get(1).copied();
    let run = |ch: u8| b.iter().take_while(|&&x| x == ch).count();
    let len = match b[0] {
        // `[Hh]mm(ss)?` comes first in the regex.
        b'H' | b'h' if rest[1..].starts_with("mm") => {
            if rest[3..].starts_with("ss") {
                5
            } else {
                3
            }
        }
        b'M' if next == Some(b'o') => 2,
        b'M' => run(b'M').min(4),
        b'D' if next == Some(b'o') => 2,
        b'D' if rest.starts_with("DDDo") => 4,
        b'D' => run(b'D').min(4),
        b'd' if run(b'd') >= 2 => run(b'd').min(4),
        b'd' if next == Some(b'o') => 2,
        // `w[o|w]?`: the character class really does include `|`.
        b'w' if matches!(next, Some(b'o' | b'|' | b'w')) => 2,
        b'W' if matches!(next, Some(b'o' | b'|' | b'W')) => 2,
        b'Q' if next == Some(b'o') => 2,
        b'N' => run(b'N').min(5),
        b'Y' => match run(b'Y') {
            n if n >= 6 => 6,
            5 => 5,
            4 => 4,
            2 | 3 => 2,
            _ => 1,
        },
        b'y' if run(b'y') >= 2 => run(b'y').min(4),
        b'y' if next == Some(b'o') => 2,
        b'g' | b'G' => match run(b[0]) {
            n if n >= 5 => 5,
            4 => 4,
            2 | 3 => 2,
            _ => 1,
        },
        b'h' | b'H' | b'k' | b'm' | b's' | b'z' | b'Z' => run(b[0]).min(2),
        b'S' => run(b'S').min(9),
        _ => c.len_utf8(),
    };
    Some(len)
}

/// Expands the English locale formats (`LT`, `LTS`, `L`...`LLLL`, `l`...`llll`) the way
/// Moment's `expandFormat` does: outside brackets, and not after a backslash.
fn expand_locale_formats(format: &str) -> Cow<'_, str> {
    if !format.contains(['L', 'l']) {
        return Cow::Borrowed(format);
    }
    let mut out = String::with_capacity(format.len());
    let mut i = 0;
    while let Some(c) = format[i..].chars().next() {
        let rest = &format[i..];
        if c == '['
            && let Some(close) = bracket_close(rest)
        {
            out.push_str(&rest[..=close]);
            i += close + 1;
        } else if c == '\\'
            && let Some(len) = locale_token_len(&rest[1..])
        {
            out.push_str(&rest[..1 + len]);
            i += 1 + len;
        } else if let Some(len) = locale_token_len(rest) {
            out.push_str(locale_format(&rest[..len]));
            i += len;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    Cow::Owned(out)
}

/// Length of `LTS|LT|LL?L?L?|l{1,4}` at the start of `rest`.
fn locale_token_len(rest: &str) -> Option<usize> {
    if rest.starts_with("LTS") {
        Some(3)
    } else if rest.starts_with("LT") {
        Some(2)
    } else {
        let b = rest.as_bytes();
        let first = *b.first()?;
        if first != b'L' && first != b'l' {
            return None;
        }
        Some(b.iter().take_while(|&&x| x == first).count().min(4))
    }
}

/// The English pattern of a locale format token.
fn locale_format(token: &str) -> &'static str {
    match token {
        "LTS" => "h:mm:ss A",
        "LT" => "h:mm A",
        "L" => "MM/DD/YYYY",
        "LL" => "MMMM D, YYYY",
        "LLL" => "MMMM D, YYYY h:mm A",
        "LLLL" => "dddd, MMMM D, YYYY h:mm A",
        "l" => "M/D/YYYY",
        "ll" => "MMM D, YYYY",
        "lll" => "MMM D, YYYY h:mm A",
        _ => "ddd, MMM D, YYYY h:mm A",
    }
}

// ---------------------------------------------------------------------------------------------
// Formatting

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const MONTHS_SHORT: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const WEEKDAYS_SHORT: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const WEEKDAYS_MIN: [&str; 7] = ["Su", "Mo", "Tu", "We", "Th", "Fr", "Sa"];

/// The English locale's week rule: weeks start on Sunday (`dow` 0) and the week holding
/// January 1st is week 1 (`doy` 6).
const LOCALE_DOW: i64 = 0;
const LOCALE_DOY: i64 = 6;

fn format_with(
    format: &str,
    date: NaiveDate,
    time: Option<NaiveTime>,
) -> Result<String, MomentError> {
    if format.is_empty() {
        return Err(MomentError::EmptyFormat);
    }
    if format.len() > MAX_FORMAT_BYTES {
        return Err(MomentError::FormatTooLong {
            max: MAX_FORMAT_BYTES,
        });
    }
    let expanded = expand_locale_formats(format);
    let mut out = String::with_capacity(expanded.len() * 2);
    for piece in tokenize(&expanded) {
        match piece {
            Piece::Literal(text) => out.push_str(&text),
            Piece::Field(Field::Unsupported, token) => {
                return Err(MomentError::Unsupported {
                    token: token.to_owned(),
                });
            }
            Piece::Field(field, token) if field.needs_time() => match time {
                Some(t) => out.push_str(&time_field(field, t)),
                None => {
                    return Err(MomentError::NeedsTime {
                        token: token.to_owned(),
                    });
                }
            },
            Piece::Field(field, _) => out.push_str(&date_field(field, date)),
        }
    }
    Ok(out)
}

/// Moment's `zeroFill`: the absolute value padded with zeros to `width`, then the sign.
fn zero_fill(n: i64, width: usize, force_sign: bool) -> String {
    let digits = n.unsigned_abs().to_string();
    let sign = if n < 0 {
        "-"
    } else if force_sign {
        "+"
    } else {
        ""
    };
    format!(
        "{sign}{}{digits}",
        "0".repeat(width.saturating_sub(digits.len()))
    )
}

/// The English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st...
fn ordinal(n: i64) -> String {
    let suffix = if (n % 100) / 10 == 1 {
        "th"
    } else {
        match n % 10 {
            1 => "st",
            2 => "nd",
            3 => "rd",
            _ => "th",
        }
    };
    format!("{n}{suffix}")
}

fn date_field(field: Field, date: NaiveDate) -> String {
    use Field::*;
    let year = i64::from(date.year());
    let month = i64::from(date.month());
    let month_index = date.month0() as usize; // 0..=11
    let weekday = i64::from(date.weekday().num_days_from_sunday());
    let weekday_index = date.weekday().num_days_from_sunday() as usize; // 0..=6
    match field {
        Month => month.to_string(),
        MonthOrdinal => ordinal(month),
        Month2 => zero_fill(month, 2, false),
        MonthShort => MONTHS_SHORT[month_index].to_owned(),
        MonthLong => MONTHS[month_index].to_owned(),
        Quarter => ((month - 1) / 3 + 1).to_string(),
        QuarterOrdinal => ordinal((month - 1) / 3 + 1),
        Day => date.day().to_string(),
        DayOrdinal => ordinal(i64::from(date.day())),
        Day2 => zero_fill(i64::from(date.day()), 2, false),
        DayOfYear => date.ordinal().to_string(),
        DayOfYearOrdinal => ordinal(i64::from(date.ordinal())),
        DayOfYear3 => zero_fill(i64::from(date.ordinal()), 3, false),
        Weekday => weekday.to_string(),
        WeekdayOrdinal => ordinal(weekday),
        WeekdayMin => WEEKDAYS_MIN[weekday_index].to_owned(),
        WeekdayShort => WEEKDAYS_SHORT[weekday_index].to_owned(),
        WeekdayLong => WEEKDAYS[weekday_index].to_owned(),
        LocaleWeekday => ((weekday + 7 - LOCALE_DOW) % 7).to_string(),
        IsoWeekday => date.weekday().number_from_monday().to_string(),
        Week => locale_week(date).0.to_string(),
        WeekOrdinal => ordinal(locale_week(date).0),
        Week2 => zero_fill(locale_week(date).0, 2, false),
        IsoWeek => date.iso_week().week().to_string(),
        IsoWeekOrdinal => ordinal(i64::from(date.iso_week().week())),
        IsoWeek2 => zero_fill(i64::from(date.iso_week().week()), 2, false),
        YearSigned if year <= 9999 => zero_fill(year, 4, false),
        YearSigned => format!("+{year}"),
        Year2 => zero_fill(year % 100, 2, false),
        Year4 => zero_fill(year, 4, false),
        Year5 => zero_fill(year, 5, false),
        Year6 => zero_fill(year, 6, true),
        WeekYear2 => zero_fill(locale_week(date).1 % 100, 2, false),
        WeekYear4 => zero_fill(locale_week(date).1, 4, false),
        WeekYear5 => zero_fill(locale_week(date).1, 5, false),
        IsoWeekYear2 => zero_fill(i64::from(date.iso_week().year()) % 100, 2, false),
        IsoWeekYear4 => zero_fill(i64::from(date.iso_week().year()), 4, false),
        IsoWeekYear5 => zero_fill(i64::from(date.iso_week().year()), 5, false),
        // Time fields and unsupported tokens never reach here (see `format_with`).
        _ => String::new(),
    }
}

fn time_field(field: Field, time: NaiveTime) -> String {
    use Field::*;
    let hour = i64::from(time.hour());
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let hour_k = if hour == 0 { 24 } else { hour };
    let minute = i64::from(time.minute());
    let second = i64::from(time.second());
    // chrono puts a leap second in the nanoseconds; Moment's milliseconds stop at 999.
    let millis = i64::from(time.nanosecond() / 1_000_000).min(999);
    match field {
        MeridiemLower => if hour > 11 { "pm" } else { "am" }.to_owned(),
        MeridiemUpper => if hour > 11 { "PM" } else { "AM" }.to_owned(),
        Hour => hour.to_string(),
        Hour2 => zero_fill(hour, 2, false),
        Hour12 => hour12.to_string(),
        Hour12Padded => zero_fill(hour12, 2, false),
        HourK => hour_k.to_string(),
        HourKPadded => zero_fill(hour_k, 2, false),
        Hour12Minute => format!("{hour12}{}", zero_fill(minute, 2, false)),
        Hour12MinuteSecond => format!(
            "{hour12}{}{}",
            zero_fill(minute, 2, false),
            zero_fill(second, 2, false)
        ),
        HourMinute => format!("{hour}{}", zero_fill(minute, 2, false)),
        HourMinuteSecond => format!(
            "{hour}{}{}",
            zero_fill(minute, 2, false),
            zero_fill(second, 2, false)
        ),
        Minute => minute.to_string(),
        Minute2 => zero_fill(minute, 2, false),
        Second => second.to_string(),
        Second2 => zero_fill(second, 2, false),
        Fraction(1) => (millis / 100).to_string(),
        Fraction(2) => zero_fill(millis / 10, 2, false),
        Fraction(n) => {
            let scale = 10_i64.pow(u32::from(n.saturating_sub(3)));
            zero_fill(millis * scale, usize::from(n), false)
        }
        _ => String::new(),
    }
}

/// Day of the week of `year-01-day` (proleptic Gregorian, 0 = Sunday), for any year.
fn weekday_of_january(year: i64, day: i64) -> i64 {
    // Sakamoto's method; January counts as month 13 of the previous year.
    let y = year - 1;
    (y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400) + day).rem_euclid(7)
}

fn days_in_year(year: i64) -> i64 {
    if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 {
        366
    } else {
        365
    }
}

/// Moment's `firstWeekOffset`: start of the first week minus start of the year, in days.
fn first_week_offset(year: i64, dow: i64, doy: i64) -> i64 {
    let fwd = 7 + dow - doy;
    let fwdlw = (7 + weekday_of_january(year, fwd) - dow) % 7;
    -fwdlw + fwd - 1
}

fn weeks_in_year(year: i64, dow: i64, doy: i64) -> i64 {
    (days_in_year(year) - first_week_offset(year, dow, doy) + first_week_offset(year + 1, dow, doy))
        / 7
}

/// Moment's `weekOfYear`: (week, week-year) for a week rule.
fn week_of_year(date: NaiveDate, dow: i64, doy: i64) -> (i64, i64) {
    let year = i64::from(date.year());
    let offset = first_week_offset(year, dow, doy);
    let week = (i64::from(date.ordinal()) - offset - 1).div_euclid(7) + 1;
    if week < 1 {
        (week + weeks_in_year(year - 1, dow, doy), year - 1)
    } else if week > weeks_in_year(year, dow, doy) {
        (week - weeks_in_year(year, dow, doy), year + 1)
    } else {
        (week, year)
    }
}

/// The English locale week and week-year (`w`, `gggg`).
fn locale_week(date: NaiveDate) -> (i64, i64) {
    week_of_year(date, LOCALE_DOW, LOCALE_DOY)
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// The fields a strict parse has collected so far.
#[derive(Debug, Default)]
struct Parsed {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<u32>,
    /// 0 = Sunday.
    weekday: Option<u32>,
    hour: Option<u32>,
    hour_is_12h: bool,
    minute: Option<u32>,
    second: Option<u32>,
}

/// Stores a field, refusing a second, different value.
fn set<T: PartialEq>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(old) if *old != value => None,
        _ => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// Splits off between `min` and `max` ASCII digits (as many as there are, greedily).
fn digits(s: &str, min: usize, max: usize) -> Option<(u32, &str)> {
    let n = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n < min {
        return None;
    }
    // At most 9 digits, all ASCII: always fits a u32.
    let value = s[..n].parse().ok()?;
    Some((value, &s[n..]))
}

/// Moment's `matchWord` (English letters, `'`, and the non-ASCII ranges it lists, after
/// optional digits), then a case-insensitive comparison with `names`.
fn name(s: &str, names: &[&str]) -> Option<(usize, usize)> {
    let lead = s.bytes().take(256).take_while(u8::is_ascii_digit).count();
    let word_len: usize = s[lead..]
        .chars()
        .take(256)
        .take_while(|&c| is_word_char(c))
        .map(char::len_utf8)
        .sum();
    if word_len == 0 {
        return None;
    }
    let word = &s[..lead + word_len];
    let index = names.iter().position(|n| n.eq_ignore_ascii_case(word))?;
    Some((index, word.len()))
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphabetic()
        || c == '\''
        || matches!(c, '\u{a0}'..='\u{5ff}' | '\u{700}'..='\u{d7ff}' | '\u{f900}'..='\u{fdcf}'
            | '\u{fdf0}'..='\u{ff07}' | '\u{ff10}'..='\u{ffef}')
}

impl Parsed {
    /// Matches one field at the start of `s`; returns the rest.
    fn consume<'s>(&mut self, field: Field, s: &'s str) -> Option<&'s str> {
        use Field::*;
        let (value, rest) = match field {
            Year4 => {
                let (y, rest) = digits(s, 4, 4)?;
                set(&mut self.year, i64::from(y))?;
                return Some(rest);
            }
            Year2 => {
                let (y, rest) = digits(s, 2, 2)?;
                let y = i64::from(y);
                set(&mut self.year, y + if y > 68 { 1900 } else { 2000 })?;
                return Some(rest);
            }
            YearSigned => {
                let (negative, unsigned) = match s.as_bytes().first() {
                    Some(b'-') => (true, &s[1..]),
                    Some(b'+') => (false, &s[1..]),
                    _ => (false, s),
                };
                // chrono's years have at most six digits; more cannot be a valid date.
                let (y, rest) = digits(unsigned, 1, 7)?;
                if rest.starts_with(|c: char| c.is_ascii_digit()) {
                    return None;
                }
                let y = i64::from(y);
                set(&mut self.year, if negative { -y } else { y })?;
                return Some(rest);
            }
            Month | Day | Weekday | Hour | Hour12 | Minute | Second => digits(s, 1, 2)?,
            Month2 | Day2 | Hour2 | Hour12Padded | Minute2 | Second2 => digits(s, 2, 2)?,
            DayOfYear => digits(s, 1, 3)?,
            DayOfYear3 => digits(s, 3, 3)?,
            DayOrdinal => {
                let (day, rest) = digits(s, 1, 2)?;
                // `\d{1,2}(th|st|nd|rd)`; when two digits are not followed by a suffix, the
                // regex backtracks to one digit, which then cannot be followed by one either.
                let rest = ["th", "st", "nd", "rd"]
                    .iter()
                    .find_map(|suffix| rest.strip_prefix(suffix))?;
                set(&mut self.day, day)?;
                return Some(rest);
            }
            MonthShort | MonthLong => {
                let names: &[&str] = if field == MonthShort {
                    &MONTHS_SHORT
                } else {
                    &MONTHS
                };
                let (index, len) = name(s, names)?;
                // index < 12
                set(&mut self.month, index as u32 + 1)?;
                return Some(&s[len..]);
            }
            WeekdayMin | WeekdayShort | WeekdayLong => {
                let names: &[&str] = match field {
                    WeekdayMin => &WEEKDAYS_MIN,
                    WeekdayShort => &WEEKDAYS_SHORT,
                    _ => &WEEKDAYS,
                };
                let (index, len) = name(s, names)?;
                // index < 7
                set(&mut self.weekday, index as u32)?;
                return Some(&s[len..]);
            }
            MeridiemLower | MeridiemUpper => {
                // English `meridiemParse`: /[ap]\.?m?\.?/i. The time is not kept, so whether it
                // was am or pm does not matter.
                let rest = s.strip_prefix(['a', 'A', 'p', 'P'])?;
                let rest = rest.strip_prefix('.').unwrap_or(rest);
                let rest = rest.strip_prefix(['m', 'M']).unwrap_or(rest);
                return Some(rest.strip_prefix('.').unwrap_or(rest));
            }
            _ => return None,
        };
        match field {
            Month | Month2 => set(&mut self.month, value)?,
            Day | Day2 => set(&mut self.day, value)?,
            DayOfYear | DayOfYear3 => set(&mut self.day_of_year, value)?,
            Weekday => set(&mut self.weekday, value)?,
            Hour | Hour2 => set(&mut self.hour, value)?,
            Hour12 | Hour12Padded => {
                self.hour_is_12h = true;
                set(&mut self.hour, value)?
            }
            Minute | Minute2 => set(&mut self.minute, value)?,
            Second | Second2 => set(&mut self.second, value)?,
            _ => return None,
        }
        Some(rest)
    }

    /// Turns the collected fields into a date, with Moment's overflow checks.
    fn resolve(&self) -> Option<NaiveDate> {
        let year = i32::try_from(self.year?).ok()?;
        // A weekday without a month or day: Moment builds the date from the *current* week
        // (ignoring even `DDDD`), which a pure function cannot reproduce.
        if self.weekday.is_some() && self.month.is_none() && self.day.is_none() {
            return None;
        }
        let mut date = match self.day_of_year {
            Some(doy) => {
                let date = NaiveDate::from_yo_opt(year, doy)?;
                if self.month.is_some_and(|m| m != date.month())
                    || self.day.is_some_and(|d| d != date.day())
                {
                    return None;
                }
                date
            }
            None => NaiveDate::from_ymd_opt(year, self.month.unwrap_or(1), self.day.unwrap_or(1))?,
        };
        if self
            .weekday
            .is_some_and(|w| w != date.weekday().num_days_from_sunday())
        {
            return None;
        }
        let minute = self.minute.unwrap_or(0);
        let second = self.second.unwrap_or(0);
        if minute > 59 || second > 59 {
            return None;
        }
        match self.hour {
            Some(h) if self.hour_is_12h && !(1..=12).contains(&h) => return None,
            // Moment reads 24:00:00 as midnight at the end of the day.
            Some(24) if minute == 0 && second == 0 => date = date.succ_opt()?,
            Some(h) if h > 23 => return None,
            _ => {}
        }
        Some(date)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    fn f(format: &str, date: NaiveDate) -> String {
        format_date(format, date).unwrap_or_else(|e| panic!("{format:?}: {e}"))
    }

    #[test]
    fn common_daily_note_formats() {
        let date = d(2024, 1, 5); // a Friday
        for (format, want) in [
            ("YYYY-MM-DD", "2024-01-05"),
            ("YYYY/MM/YYYY-MM-DD", "2024/01/2024-01-05"),
            ("dddd, MMMM Do YYYY", "Friday, January 5th 2024"),
            ("[Week] ww", "Week 01"),
            ("gggg-[W]ww", "2024-W01"),
            ("YYYY-MM-DD [Daily]", "2024-01-05 Daily"),
            ("DD.MM.YYYY", "05.01.2024"),
            ("D/M/YY", "5/1/24"),
            ("YYYYMMDD", "20240105"),
            ("YYYY-[W]WW-E", "2024-W01-5"),
            ("GGGG-[W]WW", "2024-W01"),
            ("ddd DD MMM YYYY", "Fri 05 Jan 2024"),
            ("dd", "Fr"),
            ("d e E", "5 5 5"),
            ("YYYY-[Q]Q", "2024-Q1"),
            ("DDD DDDD DDDo", "5 005 5th"),
            ("Mo Qo do wo Wo", "1st 1st 5th 1st 1st"),
            ("YYYY/YYYY-MM/YYYY-MM-DD ddd", "2024/2024-01/2024-01-05 Fri"),
            ("Y", "2024"),
            ("L", "01/05/2024"),
            ("LL", "January 5, 2024"),
            ("l", "1/5/2024"),
            ("ll", "Jan 5, 2024"),
        ] {
            assert_eq!(f(format, date), want, "format {format:?}");
        }
    }

    #[test]
    fn ordinals_follow_english_rules() {
        for (day, want) in [
            (1, "1st"),
            (2, "2nd"),
            (3, "3rd"),
            (4, "4th"),
            (11, "11th"),
            (12, "12th"),
            (13, "13th"),
            (21, "21st"),
            (22, "22nd"),
            (23, "23rd"),
            (30, "30th"),
            (31, "31st"),
        ] {
            assert_eq!(f("Do", d(2024, 1, day)), want);
        }
        assert_eq!(f("DDDo", d(2024, 4, 21)), "112th");
        assert_eq!(f("DDDo", d(2023, 4, 21)), "111th");
    }

    #[test]
    fn letters_that_are_not_tokens_print_literally() {
        let date = d(2024, 3, 9);
        assert_eq!(f("YYYY-MM-DDT", date), "2024-03-09T");
        assert_eq!(f("[Daily] YYYY", date), "Daily 2024");
        // Unbracketed words are a trap, as in Obsidian: in "Journal" the `a` is the am/pm token
        // and the `l` the locale date `M/D/YYYY`.
        assert_eq!(
            format_date("Journal YYYY", date),
            Err(MomentError::NeedsTime { token: "a".into() })
        );
        assert_eq!(f("Journ", date), "Journ");
        assert_eq!(f("Jul", date), "Ju3/9/2024");
        assert_eq!(f("bcfijpqtuvBCFIJOPRTUV", date), "bcfijpqtuvBCFIJOPRTUV");
        assert_eq!(f("日記 YYYY", date), "日記 2024");
        assert_eq!(f("🎉 MM", date), "🎉 03");
    }

    #[test]
    fn brackets_follow_moments_greedy_rule() {
        let date = d(2024, 3, 9);
        assert_eq!(f("[a]b]", date), "a]b");
        assert_eq!(f("[YYYY] YYYY", date), "YYYY 2024");
        assert_eq!(f("[Week] ww [of] gggg", date), "Week 10 of 2024");
        assert_eq!(f("[ruin YYYY", date), "[ruin 2024", "unclosed bracket");
        assert_eq!(f("[]YYYY", date), "2024");
        assert_eq!(f("[[x]]", date), "[x]");
    }

    #[test]
    fn backslash_escapes_a_whole_token() {
        let date = d(2024, 3, 9);
        assert_eq!(f("\\YYYY YYYY", date), "YYYY 2024");
        assert_eq!(f("\\D D", date), "D 9");
        assert_eq!(f("YYYY\\", date), "2024");
        assert_eq!(f("\\\\YYYY", date), "2024");
        assert_eq!(f("\\[YYYY]", date), "[2024]");
        assert_eq!(f("\\L", date), "L");
    }

    #[test]
    fn token_runs_split_as_moment_splits_them() {
        let date = d(2024, 3, 9);
        assert_eq!(f("YYY", date), "242024", "YY then Y");
        assert_eq!(f("YYYYY", date), "02024");
        assert_eq!(f("YYYYYY", date), "+002024");
        assert_eq!(f("MMMMM", date), "March3", "MMMM then M");
        assert_eq!(f("ggg", date), "24g", "gg then a literal g");
        assert_eq!(f("ddddd", date), "Saturday6");
        assert_eq!(
            f("w|ww", date),
            "w|10",
            "`w[o|w]?` makes `w|` one non-token"
        );
    }

    #[test]
    fn line_breaks_are_dropped_like_moment() {
        assert_eq!(f("YYYY\nMM\r\n", d(2024, 3, 9)), "202403");
    }

    #[test]
    fn locale_and_iso_weeks_differ_at_year_boundaries() {
        // Sunday 31 Dec 2023: English week 1 of 2024 (weeks start Sunday, Jan 1 is in week 1),
        // ISO week 52 of 2023.
        let date = d(2023, 12, 31);
        assert_eq!(f("gggg-ww", date), "2024-01");
        assert_eq!(f("GGGG-WW", date), "2023-52");
        // Friday 1 Jan 2021: English week 1 of 2021, ISO week 53 of 2020.
        let date = d(2021, 1, 1);
        assert_eq!(f("gggg-ww", date), "2021-01");
        assert_eq!(f("GGGG-WW", date), "2020-53");
        assert_eq!(f("gg GG", date), "21 20");
        // Saturday 26 Dec 2020: English week 52 of 2020.
        assert_eq!(f("gggg-ww", d(2020, 12, 26)), "2020-52");
        assert_eq!(f("gggg-ww", d(2020, 12, 27)), "2021-01");
    }

    #[test]
    fn moment_week_arithmetic_agrees_with_chrono_for_iso() {
        let mut date = d(1999, 12, 1);
        while date < d(2031, 2, 1) {
            let (week, year) = week_of_year(date, 1, 4);
            let iso = date.iso_week();
            assert_eq!(
                (week, year),
                (i64::from(iso.week()), i64::from(iso.year())),
                "{date}"
            );
            date = date.succ_opt().unwrap();
        }
    }

    #[test]
    fn locale_week_one_always_holds_january_first() {
        for year in 1990..2040 {
            let jan1 = d(year, 1, 1);
            assert_eq!(locale_week(jan1), (1, i64::from(year)), "{year}");
            // The week starts on Sunday: the Saturday before (if in the old year) is in the
            // previous week-year's last week.
            let sat =
                jan1 - chrono::Days::new(u64::from(jan1.weekday().num_days_from_sunday()) + 1);
            let (w, y) = locale_week(sat);
            assert_eq!(y, i64::from(year) - 1);
            assert!(w == 52 || w == 53, "{sat}: week {w}");
        }
    }

    #[test]
    fn years_are_padded_and_signed_like_moment() {
        assert_eq!(f("YYYY YY Y", d(33, 5, 1)), "0033 33 0033");
        assert_eq!(f("YYYY", d(-44, 3, 15)), "-0044");
        assert_eq!(f("YYYY Y", d(12345, 1, 1)), "12345 +12345");
        assert_eq!(f("YYYYYY", d(-44, 3, 15)), "-000044");
    }

    #[test]
    fn time_tokens_need_a_time() {
        let date = d(2024, 3, 9);
        for (format, token) in [
            ("YYYY-MM-DD HHmm", "HH"),
            ("h:mm A", "h"),
            ("a", "a"),
            ("SSS", "SSS"),
            ("LT", "h"),
        ] {
            assert_eq!(
                format_date(format, date),
                Err(MomentError::NeedsTime {
                    token: token.into()
                }),
                "{format:?}"
            );
        }
    }

    #[test]
    fn time_tokens_format_with_a_time() {
        let t = |h, m, s, ms| d(2024, 3, 9).and_hms_milli_opt(h, m, s, ms).unwrap();
        for (format, at, want) in [
            ("HH:mm", t(9, 5, 0, 0), "09:05"),
            ("H:m:s", t(9, 5, 7, 0), "9:5:7"),
            ("h:mm a", t(0, 30, 0, 0), "12:30 am"),
            ("hh:mm A", t(12, 0, 0, 0), "12:00 PM"),
            ("h A", t(23, 0, 0, 0), "11 PM"),
            ("k kk", t(0, 0, 0, 0), "24 24"),
            (
                "Hmm Hmmss hmm hmmss",
                t(14, 3, 9, 0),
                "1403 140309 203 20309",
            ),
            ("S SS SSS SSSS", t(1, 1, 1, 789), "7 78 789 7890"),
            ("SSSSSSSSS", t(1, 1, 1, 5), "005000000"),
            ("YYYY-MM-DD HHmm", t(7, 45, 0, 0), "2024-03-09 0745"),
            ("LLLL", t(18, 4, 0, 0), "Saturday, March 9, 2024 6:04 PM"),
            ("LTS", t(18, 4, 2, 0), "6:04:02 PM"),
            ("llll", t(18, 4, 0, 0), "Sat, Mar 9, 2024 6:04 PM"),
        ] {
            assert_eq!(format_datetime(format, at).unwrap(), want, "{format:?}");
        }
    }

    #[test]
    fn unsupported_tokens_are_errors_not_wrong_text() {
        let date = d(2024, 3, 9);
        for (format, token) in [
            ("X", "X"),
            ("x", "x"),
            ("YYYY Z", "Z"),
            ("ZZ", "ZZ"),
            ("zz", "zz"),
            ("N", "N"),
            ("yyyy", "yyyy"),
            ("yo", "yo"),
        ] {
            assert_eq!(
                format_date(format, date),
                Err(MomentError::Unsupported {
                    token: token.into()
                }),
                "{format:?}"
            );
        }
    }

    #[test]
    fn empty_and_oversized_formats_are_refused() {
        let date = d(2024, 3, 9);
        assert_eq!(format_date("", date), Err(MomentError::EmptyFormat));
        let long = "Y".repeat(MAX_FORMAT_BYTES + 1);
        assert_eq!(
            format_date(&long, date),
            Err(MomentError::FormatTooLong {
                max: MAX_FORMAT_BYTES
            })
        );
        assert!(format_date(&"[x]".repeat(300), date).is_ok());
    }

    #[test]
    fn daily_note_paths_join_folder_and_formatted_name() {
        let date = d(2024, 1, 15);
        for (folder, format, want) in [
            ("", "YYYY-MM-DD", "2024-01-15.md"),
            ("/", "YYYY-MM-DD", "2024-01-15.md"),
            ("Daily", "YYYY-MM-DD", "Daily/2024-01-15.md"),
            ("/Daily/", "YYYY-MM-DD", "Daily/2024-01-15.md"),
            (
                "Journal/Daily",
                "YYYY/MM/YYYY-MM-DD",
                "Journal/Daily/2024/01/2024-01-15.md",
            ),
            (
                "Daily",
                "YYYY/MMMM/dddd, MMMM Do YYYY",
                "Daily/2024/January/Monday, January 15th 2024.md",
            ),
            ("Daily", "YYYY-MM-DD[.md]", "Daily/2024-01-15.md"),
            ("Daily//Sub", "/YYYY//DD", "Daily/Sub/2024/15.md"),
            ("./Daily", "YYYY-MM-DD", "Daily/2024-01-15.md"),
            ("Win\\Style", "YYYY-MM-DD", "Win/Style/2024-01-15.md"),
            ("Daily", "L", "Daily/01/15/2024.md"),
            ("Non\u{a0}breaking", "YYYY", "Non breaking/2024.md"),
            ("Cafe\u{301}", "YYYY", "Caf\u{e9}/2024.md"),
        ] {
            assert_eq!(
                daily_note_path(folder, format, date).as_deref(),
                Ok(want),
                "folder {folder:?} format {format:?}"
            );
        }
    }

    #[test]
    fn daily_note_paths_refuse_parent_components_and_empty_names() {
        let date = d(2024, 1, 15);
        assert_eq!(
            daily_note_path("../outside", "YYYY", date),
            Err(MomentError::ParentComponent)
        );
        assert_eq!(
            daily_note_path("Daily", "[..]/YYYY", date),
            Err(MomentError::ParentComponent)
        );
        assert_eq!(
            daily_note_path("Daily", "[]", date),
            Err(MomentError::EmptyPath)
        );
        assert_eq!(
            daily_note_path("Daily", "YYYY/", date),
            Err(MomentError::EmptyPath)
        );
        assert_eq!(daily_note_path("", "", date), Err(MomentError::EmptyFormat));
        assert!(matches!(
            daily_note_path("", "HH", date),
            Err(MomentError::NeedsTime { .. })
        ));
    }

    #[test]
    fn parse_accepts_what_format_produces_for_daily_formats() {
        for format in [
            "YYYY-MM-DD",
            "YYYY/MM/YYYY-MM-DD",
            "dddd, MMMM Do YYYY",
            "YYYY-MM-DD [Daily]",
            "DD.MM.YYYY",
            "D MMM YYYY",
            "YYYYMMDD",
            "YYYY-DDDD",
            "dddd YYYY-MM-DD",
            "L",
            "ll",
        ] {
            for date in [
                d(2024, 1, 5),
                d(2023, 12, 31),
                d(2024, 2, 29),
                d(1999, 11, 22),
            ] {
                let text = f(format, date);
                assert_eq!(parse_date(format, &text), Some(date), "{format:?} {text:?}");
            }
        }
    }

    #[test]
    fn parse_is_strict_like_moment() {
        let want = Some(d(2024, 1, 5));
        assert_eq!(parse_date("YYYY-MM-DD", "2024-01-05"), want);
        assert_eq!(
            parse_date("YYYY-MM-DD", "2024-01-05 "),
            None,
            "leftover text"
        );
        assert_eq!(parse_date("YYYY-MM-DD", " 2024-01-05"), None);
        assert_eq!(
            parse_date("YYYY-MM-DD", "2024-1-05"),
            None,
            "MM needs two digits"
        );
        assert_eq!(
            parse_date("YYYY-MM-DD", "24-01-05"),
            None,
            "YYYY needs four"
        );
        assert_eq!(parse_date("YYYY-M-D", "2024-1-5"), want);
        assert_eq!(
            parse_date("YYYY-M-D", "2024-01-05"),
            want,
            "Moment 2.29 allows 01 for M"
        );
        assert_eq!(
            parse_date("YYYY-MM-DD", "2024/01/05"),
            None,
            "literals must match"
        );
        assert_eq!(parse_date("YYYY-MM-DD", "2024-13-05"), None);
        assert_eq!(parse_date("YYYY-MM-DD", "2023-02-29"), None);
        assert_eq!(parse_date("YYYY-MM-DD", "2024-00-05"), None);
        assert_eq!(parse_date("YYYY-MM-DD", "2024-01-00"), None);
        assert_eq!(
            parse_date("YYYY-MM-DD", "２０２４-01-05"),
            None,
            "ASCII digits only"
        );
        assert_eq!(parse_date("YYYY-MM-DD", ""), None);
        assert_eq!(parse_date("", ""), None);
    }

    #[test]
    fn parse_checks_names_and_weekdays() {
        let want = Some(d(2024, 1, 5));
        assert_eq!(
            parse_date("dddd, MMMM Do YYYY", "Friday, January 5th 2024"),
            want
        );
        assert_eq!(
            parse_date("dddd, MMMM Do YYYY", "friday, JANUARY 5th 2024"),
            want
        );
        assert_eq!(
            parse_date("dddd, MMMM Do YYYY", "Monday, January 5th 2024"),
            None
        );
        assert_eq!(
            parse_date("dddd, MMMM Do YYYY", "Fri, January 5th 2024"),
            None
        );
        assert_eq!(
            parse_date("MMM D YYYY", "January 5 2024"),
            None,
            "strict: short name"
        );
        assert_eq!(parse_date("MMM D YYYY", "Jan 5 2024"), want);
        assert_eq!(parse_date("Do MMMM YYYY", "5th January 2024"), want);
        assert_eq!(parse_date("Do MMMM YYYY", "5 January 2024"), None);
        assert_eq!(parse_date("d YYYY-MM-DD", "5 2024-01-05"), want);
        assert_eq!(parse_date("d YYYY-MM-DD", "1 2024-01-05"), None);
    }

    #[test]
    fn parse_handles_years_and_defaults() {
        assert_eq!(parse_date("YY-MM-DD", "24-01-05"), Some(d(2024, 1, 5)));
        assert_eq!(parse_date("YY-MM-DD", "68-01-05"), Some(d(2068, 1, 5)));
        assert_eq!(parse_date("YY-MM-DD", "69-01-05"), Some(d(1969, 1, 5)));
        assert_eq!(parse_date("YYYY-MM", "2024-03"), Some(d(2024, 3, 1)));
        assert_eq!(parse_date("YYYY", "2024"), Some(d(2024, 1, 1)));
        assert_eq!(parse_date("Y-MM-DD", "12345-01-05"), Some(d(12345, 1, 5)));
        assert_eq!(parse_date("Y-MM-DD", "-44-03-15"), Some(d(-44, 3, 15)));
        assert_eq!(parse_date("YYYY-DDDD", "2024-060"), Some(d(2024, 2, 29)));
        assert_eq!(parse_date("YYYY-DDDD", "2023-366"), None);
        assert_eq!(
            parse_date("MM-DD", "01-05"),
            None,
            "no year: Moment would use today's"
        );
    }

    #[test]
    fn parse_requires_repeated_fields_to_agree() {
        let format = "YYYY/MM/YYYY-MM-DD";
        assert_eq!(
            parse_date(format, "2024/01/2024-01-15"),
            Some(d(2024, 1, 15))
        );
        assert_eq!(parse_date(format, "2024/02/2024-01-15"), None);
        assert_eq!(parse_date(format, "2023/01/2024-01-15"), None);
    }

    #[test]
    fn parse_checks_and_ignores_time_fields() {
        let format = "YYYY-MM-DD HHmm";
        assert_eq!(parse_date(format, "2024-01-05 0930"), Some(d(2024, 1, 5)));
        assert_eq!(parse_date(format, "2024-01-05 2460"), None);
        assert_eq!(parse_date(format, "2024-01-05 2400"), Some(d(2024, 1, 6)));
        assert_eq!(
            parse_date("YYYY-MM-DD h:mm a", "2024-01-05 9:30 pm"),
            Some(d(2024, 1, 5))
        );
        assert_eq!(parse_date("YYYY-MM-DD h:mm a", "2024-01-05 13:30 pm"), None);
        assert_eq!(
            parse_date("YYYY-MM-DD hh:mm A", "2024-01-05 00:30 AM"),
            None
        );
        assert_eq!(
            parse_date("YYYY-MM-DD [at] HH:mm:ss", "2024-01-05 at 09:30:61"),
            None
        );
    }

    #[test]
    fn parse_refuses_tokens_it_cannot_place() {
        assert_eq!(parse_date("gggg-[W]ww", "2024-W01"), None);
        assert_eq!(parse_date("YYYY-[Q]Q", "2024-Q1"), None);
        assert_eq!(parse_date("YYYY-MM-DD[]", "2024-01-05"), None);
        // A weekday with no month or day: Moment dates it by today's week, even over `DDDD`.
        assert_eq!(parse_date("YYYY dddd", "2024 Monday"), None);
        assert_eq!(parse_date("ddd YYYY-DDDD", "Fri 2024-005"), None);
    }

    #[test]
    fn daily_note_date_matches_only_the_file_name() {
        let format = "YYYY/MM/YYYY-MM-DD";
        let want = Some(d(2024, 1, 15));
        assert_eq!(daily_note_date(format, "Daily/2024/01/2024-01-15.md"), want);
        // Obsidian matches the base name only, so a note filed in the wrong month still counts.
        assert_eq!(daily_note_date(format, "Daily/2023/07/2024-01-15.md"), want);
        assert_eq!(daily_note_date(format, "2024-01-15"), want);
        assert_eq!(daily_note_date(format, "Daily/2024/01/Meeting.md"), None);
        assert_eq!(
            daily_note_date("YYYY-MM-DD", "Daily/2024-01-15.canvas"),
            None
        );
    }

    /// Numeric tokens with separators between them; formats always hold a year, month and day.
    fn numeric_format() -> impl Strategy<Value = String> {
        let month = prop_oneof![Just("MM"), Just("M")];
        let day = prop_oneof![Just("DD"), Just("D")];
        let extra = prop::option::of(prop_oneof![
            Just("DDDD"),
            Just("DDD"),
            Just("YYYY"),
            Just("MM")
        ]);
        let sep = prop_oneof![
            Just("-"),
            Just("/"),
            Just("."),
            Just("_"),
            Just(" "),
            Just(", "),
            Just("[W]"),
            Just("[Daily ]"),
            Just("' "),
        ];
        let affix = prop_oneof![Just(""), Just("[Daily] "), Just("~"), Just(" [x]")];
        (
            month,
            day,
            extra,
            Just(vec![0usize, 1, 2, 3]).prop_shuffle(),
            prop::collection::vec(sep, 3),
            affix.clone(),
            affix,
        )
            .prop_map(|(m, dd, extra, order, seps, prefix, suffix)| {
                let mut tokens = vec!["YYYY", m, dd];
                tokens.extend(extra);
                let ordered: Vec<&str> = order
                    .into_iter()
                    .filter_map(|i| tokens.get(i).copied())
                    .collect();
                let mut out = prefix.to_owned();
                for (i, token) in ordered.iter().enumerate() {
                    if i > 0 {
                        out.push_str(seps[i - 1]);
                    }
                    out.push_str(token);
                }
                out.push_str(suffix);
                out
            })
    }

    fn any_date() -> impl Strategy<Value = NaiveDate> {
        (1000i32..=9999, 1u32..=366)
            .prop_filter_map("valid day", |(y, doy)| NaiveDate::from_yo_opt(y, doy))
    }

    fn any_wide_date() -> impl Strategy<Value = NaiveDate> {
        (NaiveDate::MIN.num_days_from_ce()..=NaiveDate::MAX.num_days_from_ce())
            .prop_filter_map("in range", NaiveDate::from_num_days_from_ce_opt)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn format_date_never_panics_on_any_format(format in ".{0,64}", date in any_wide_date()) {
            let _ = format_date(&format, date);
            let _ = daily_note_path("Daily", &format, date);
        }

        #[test]
        fn format_never_panics_on_token_soup(
            format in "[YMDdwWgGQEeoLlTS\\[\\]\\\\ |/HhmsaAkNxXzZy\n-]{0,40}",
            date in any_wide_date(),
            secs in 0u32..86_400,
        ) {
            let _ = format_date(&format, date);
            let time = NaiveTime::from_num_seconds_from_midnight_opt(secs, 0).unwrap();
            let _ = format_datetime(&format, date.and_time(time));
            let _ = parse_date(&format, &format);
        }

        #[test]
        fn parse_date_never_panics(
            format in "[YMDdoHhmsaA\\[\\] /.-]{0,24}",
            input in "[0-9a-zA-Z /.-]{0,24}",
        ) {
            let _ = parse_date(&format, &input);
        }

        #[test]
        fn numeric_formats_round_trip(format in numeric_format(), date in any_date()) {
            let text = format_date(&format, date).unwrap();
            prop_assert_eq!(parse_date(&format, &text), Some(date), "{:?} -> {:?}", format, text);
        }
    }
}

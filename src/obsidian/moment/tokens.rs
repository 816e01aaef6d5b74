//! Moment format strings cut into pieces: literals and tokens, matched as Moment's own token
//! regex matches them, with the locale formats (`L`, `LL`...) expanded first.

use super::*;

/// One piece of a tokenized format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece<'a> {
    /// Text printed as is (brackets and escapes already removed).
    Literal(Cow<'a, str>),
    /// A Moment token, with its text for error messages.
    Field(Field, &'a str),
}

/// Every Moment token that prints something computed from the date or time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
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
    /// True when a strict parse of this field must begin with an ASCII digit (it reads a
    /// number, or cannot be parsed at all): all but signed years, names and meridiems.
    pub(super) fn starts_with_digit(self) -> bool {
        use Field::*;
        !matches!(
            self,
            YearSigned
                | MonthShort
                | MonthLong
                | WeekdayMin
                | WeekdayShort
                | WeekdayLong
                | MeridiemLower
                | MeridiemUpper
        )
    }

    /// The field a complete token stands for, or `None` for text Moment prints literally.
    pub(super) fn from_token(token: &str) -> Option<Field> {
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

    pub(super) fn needs_time(self) -> bool {
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
pub(super) fn tokenize(format: &str) -> Vec<Piece<'_>> {
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
pub(super) fn bracket_close(rest: &str) -> Option<usize> {
    let body = &rest[1..];
    let limit = body.find('[').unwrap_or(body.len());
    body[..limit].rfind(']').map(|j| j + 1)
}

/// Byte length of the token at the start of `rest`, following the alternatives of Moment's
/// regex in order; `None` at the end or at a line break (which `.` does not match).
pub(super) fn token_len(rest: &str) -> Option<usize> {
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
pub(super) fn expand_locale_formats(format: &str) -> Cow<'_, str> {
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
pub(super) fn locale_token_len(rest: &str) -> Option<usize> {
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
pub(super) fn locale_format(token: &str) -> &'static str {
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

//! JavaScript regular expressions as the plugins write them (Bases' `/body/flags` literals and
//! `replace`, Dataview's `regextest`/`regexreplace`, the Tasks plugin's `/pattern/flags`
//! filters), compiled for the `regex` crate: its syntax (no look-around, no backreferences),
//! linear-time matching, and a bound on the compiled size and nesting.

use regex::{Regex, RegexBuilder};

/// Deepest nesting of groups and repetitions accepted.
const MAX_NESTING: u32 = 64;

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsRegexError {
    /// A flag JavaScript has and capvault does not.
    #[error("unknown regular expression flag `{0}`")]
    Flag(char),
    /// The compiled expression exceeds the size limit.
    #[error("regular expression too large")]
    TooLarge,
    /// The expression does not compile (the last line of the `regex` crate's message).
    #[error("invalid regular expression: {0}")]
    Invalid(String),
}

/// A compiled pattern and whether its flags asked for every match (`g`).
#[derive(Debug, Clone)]
pub struct JsRegex {
    pub regex: Regex,
    pub global: bool,
}

/// What a pattern compiled with [`compile`]`(.., max_bytes)` may come to hold: its program and
/// its lazy DFA's cache, each bounded by `max_bytes`. Charge it to a budget before compiling a
/// pattern from a query.
pub const fn footprint(max_bytes: usize) -> u64 {
    2 * max_bytes as u64
}

/// Compiles `body` with JavaScript `flags`: `i`, `m` and `s` map onto the `regex` crate's
/// flags, `g` is reported in [`JsRegex::global`], `u`, `v`, `y` and `d` change nothing here (the
/// crate matches Unicode anyway), any other flag is refused. The compiled program and its lazy
/// DFA are limited to `max_bytes` each.
pub fn compile(body: &str, flags: &str, max_bytes: usize) -> Result<JsRegex, JsRegexError> {
    let mut b = RegexBuilder::new(body);
    b.size_limit(max_bytes)
        .dfa_size_limit(max_bytes)
        .nest_limit(MAX_NESTING);
    let mut global = false;
    for f in flags.chars() {
        match f {
            'g' => global = true,
            'i' => {
                b.case_insensitive(true);
            }
            'm' => {
                b.multi_line(true);
            }
            's' => {
                b.dot_matches_new_line(true);
            }
            'u' | 'v' | 'y' | 'd' => {}
            other => return Err(JsRegexError::Flag(other)),
        }
    }
    let regex = b.build().map_err(|e| match e {
        regex::Error::CompiledTooBig(_) => JsRegexError::TooLarge,
        other => JsRegexError::Invalid(
            other
                .to_string()
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
    })?;
    Ok(JsRegex { regex, global })
}

/// A JavaScript replacement string for the `regex` crate: `$1` to `$99` become `${1}`..,
/// `$&` the whole match `${0}`, `$$` and any other `$` a literal `$`.
pub fn replacement(rep: &str) -> String {
    let mut out = String::with_capacity(rep.len());
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(d) if d.is_ascii_digit() => {
                let mut n = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    n.push(d);
                    chars.next();
                    if n.len() == 2 {
                        break;
                    }
                }
                out.push_str(&format!("${{{n}}}"));
            }
            Some('&') => {
                chars.next();
                out.push_str("${0}");
            }
            Some('$') => {
                chars.next();
                out.push_str("$$");
            }
            _ => out.push_str("$$"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_onto_the_regex_crate_and_unknown_ones_are_refused() {
        let r = compile("^b.c$", "gims", 1 << 20).unwrap();
        assert!(r.global);
        assert!(r.regex.is_match("a\nB\nC"));
        let plain = compile("^b.c$", "", 1 << 20).unwrap();
        assert!(!plain.global);
        assert!(!plain.regex.is_match("a\nB\nC"));
        assert_eq!(
            compile("a", "x", 1 << 20).unwrap_err(),
            JsRegexError::Flag('x')
        );
        assert!(matches!(
            compile("(", "", 1 << 20),
            Err(JsRegexError::Invalid(_))
        ));
        assert_eq!(
            compile("a{1000}{1000}", "", 1 << 16).unwrap_err(),
            JsRegexError::TooLarge
        );
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        assert!(compile(&deep, "", 1 << 20).is_err());
    }

    #[test]
    fn replacements_read_groups_the_whole_match_and_literal_dollars() {
        assert_eq!(replacement("$1-$&"), "${1}-${0}");
        assert_eq!(replacement("$123"), "${12}3");
        assert_eq!(replacement("$$ and $x"), "$$ and $$x");
        let r = compile("(\\w+)@(\\w+)", "", 1 << 20).unwrap();
        assert_eq!(
            r.regex.replace("ann@home", replacement("$2: $1 ($&) $")),
            "home: ann (ann@home) $"
        );
    }
}

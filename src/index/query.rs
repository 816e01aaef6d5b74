//! The ranked-search query language, parsed without I/O.
//!
//! Deliberately small, so that any input has one obvious meaning and nothing a client types can
//! fail in a surprising way:
//!
//! - words are separated by whitespace; every word must match (a note missing one is ranked only
//!   when no note has them all, see [`crate::index`]);
//! - `"several words"` is a phrase: the words, in that order, next to each other; a quote left
//!   open runs to the end of the query;
//! - `-word` or `-"a phrase"` excludes notes that contain it;
//! - nothing else is special: `:`, `*`, `(`, `AND`, `OR` are plain text.
//!
//! The parser only splits the query into clauses. Each clause is turned into index terms by the
//! same analyzer that indexed the notes, so `Café-Menu` finds `cafe menu`.

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most clauses (words and phrases) in one query.
pub const MAX_CLAUSES: usize = 32;

/// One word or phrase of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// The clause's text as typed (without quotes or the leading `-`).
    pub text: String,
    /// True for a quoted phrase.
    pub phrase: bool,
    /// True when notes containing the clause are excluded.
    pub negated: bool,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    /// The clauses in the order written.
    pub clauses: Vec<Clause>,
}

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Nothing to search for.
    #[error("query is empty: give words to search for")]
    Empty,
    /// Only exclusions.
    #[error("query only excludes (`-word`): add a word to search for")]
    OnlyNegative,
    /// Over [`MAX_QUERY_BYTES`].
    #[error("query is longer than {MAX_QUERY_BYTES} bytes")]
    TooLong,
    /// Over [`MAX_CLAUSES`].
    #[error("query has more than {MAX_CLAUSES} words and phrases")]
    TooManyClauses,
}

impl Query {
    /// The clauses that must (or may) match.
    pub fn positive(&self) -> impl Iterator<Item = &Clause> {
        self.clauses.iter().filter(|c| !c.negated)
    }

    /// The clauses that exclude.
    pub fn negative(&self) -> impl Iterator<Item = &Clause> {
        self.clauses.iter().filter(|c| c.negated)
    }
}

/// Parses a ranked-search query.
pub fn parse(input: &str) -> Result<Query, QueryError> {
    if input.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong);
    }
    let mut clauses = Vec::new();
    let mut rest = input;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (negated, after_sign) = match rest.strip_prefix('-') {
            // A lone `-` or `--x` is text, not an exclusion.
            Some(r) if r.starts_with(|c: char| !c.is_whitespace() && c != '-') => (true, r),
            _ => (false, rest),
        };
        let (text, phrase, next) = if let Some(body) = after_sign.strip_prefix('"') {
            match body.find('"') {
                Some(end) => (&body[..end], true, &body[end + 1..]),
                None => (body, true, ""),
            }
        } else {
            let end = after_sign
                .find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(after_sign.len());
            // A quote glued to a word (`word"`) ends the word; the quote opens a phrase next.
            (&after_sign[..end], false, &after_sign[end..])
        };
        rest = next;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if clauses.len() == MAX_CLAUSES {
            return Err(QueryError::TooManyClauses);
        }
        clauses.push(Clause {
            text: text.to_owned(),
            phrase,
            negated,
        });
    }
    let query = Query { clauses };
    if query.clauses.is_empty() {
        return Err(QueryError::Empty);
    }
    if query.positive().next().is_none() {
        return Err(QueryError::OnlyNegative);
    }
    Ok(query)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(q: &Query) -> Vec<(String, bool, bool)> {
        q.clauses
            .iter()
            .map(|c| (c.text.clone(), c.phrase, c.negated))
            .collect()
    }

    #[test]
    fn words_phrases_and_exclusions() {
        let q = parse(r#"  garden "sowing dates"  -tomato -"green house" "#).unwrap();
        assert_eq!(
            words(&q),
            vec![
                ("garden".into(), false, false),
                ("sowing dates".into(), true, false),
                ("tomato".into(), false, true),
                ("green house".into(), true, true),
            ]
        );
    }

    #[test]
    fn an_open_quote_runs_to_the_end() {
        let q = parse(r#"plan "the long road"#).unwrap();
        assert_eq!(words(&q)[1], ("the long road".into(), true, false));
    }

    #[test]
    fn operators_of_other_engines_are_plain_text() {
        let q = parse("title:x AND (y* OR z)").unwrap();
        let texts: Vec<_> = q.clauses.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["title:x", "AND", "(y*", "OR", "z)"]);
        // A lone or doubled dash is text.
        let q = parse("a - b --c").unwrap();
        assert!(q.clauses.iter().all(|c| !c.negated));
    }

    #[test]
    fn empty_negative_only_and_oversized_queries_are_refused() {
        assert_eq!(parse("   "), Err(QueryError::Empty));
        assert_eq!(parse(r#""""#), Err(QueryError::Empty));
        assert_eq!(parse("-a -b"), Err(QueryError::OnlyNegative));
        assert_eq!(
            parse(&"a".repeat(MAX_QUERY_BYTES + 1)),
            Err(QueryError::TooLong)
        );
        let many = vec!["w"; MAX_CLAUSES + 1].join(" ");
        assert_eq!(parse(&many), Err(QueryError::TooManyClauses));
        assert!(parse(&vec!["w"; MAX_CLAUSES].join(" ")).is_ok());
    }

    #[test]
    fn a_quote_glued_to_a_word_starts_a_phrase() {
        let q = parse(r#"plan"b c""#).unwrap();
        assert_eq!(
            words(&q),
            vec![("plan".into(), false, false), ("b c".into(), true, false)]
        );
    }

    proptest! {
        #[test]
        fn any_input_parses_or_is_refused_with_bounded_output(s in "\\PC{0,200}") {
            if let Ok(q) = parse(&s) {
                prop_assert!(!q.clauses.is_empty() && q.clauses.len() <= MAX_CLAUSES);
                prop_assert!(q.positive().next().is_some());
                for c in &q.clauses {
                    prop_assert!(!c.text.is_empty());
                    prop_assert!(s.contains(&c.text));
                }
            }
        }
    }
}

//! The `{{variable}}` syntax Obsidian's Templates plugin, the Periodic Notes plugin and MCP
//! prompts share: one scanner, each caller deciding what a variable becomes.

/// Largest text a note's template may grow to while its variables are filled (a template is at
/// most 1 MiB, and one variable prints at most about ten bytes per byte of its format).
pub const MAX_FILLED_BYTES: usize = 4 * 1024 * 1024;

/// Text with its `{{…}}` variables replaced, and whether filling stopped at the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filled {
    /// The text (up to where filling stopped, when `cut`).
    pub text: String,
    /// True when the text grew past the bound and the rest was left out.
    pub cut: bool,
}

/// Replaces each `{{var}}` of `template` by what `value(var)` gives (`var` is the text between
/// the braces, untrimmed), leaving it as written when that is `None`. A `{{` with no `}}` after
/// it, and everything after it, stays as written. Filling stops as soon as the text is longer
/// than `max_bytes` (checked after each variable, so a template of many variables never builds
/// more than `max_bytes` plus one value), with `cut` set.
///
/// ```
/// use capvault::obsidian::template::fill_variables;
///
/// let f = fill_variables("Hi {{ name }}, {{other}} {{", 1024, |v| {
///     Ok::<_, ()>((v.trim() == "name").then(|| "Ada".to_owned()))
/// })
/// .unwrap();
/// assert_eq!(f.text, "Hi Ada, {{other}} {{");
/// assert!(!f.cut);
/// ```
pub fn fill_variables<E>(
    template: &str,
    max_bytes: usize,
    mut value: impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<Filled, E> {
    let mut text = String::with_capacity(template.len().min(max_bytes));
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        text.push_str(&rest[..open]);
        let var = &after[..close];
        match value(var)? {
            Some(v) => text.push_str(&v),
            None => text.push_str(&rest[open..open + close + 4]),
        }
        rest = &after[close + 2..];
        if text.len() > max_bytes {
            return Ok(Filled { text, cut: true });
        }
    }
    text.push_str(rest);
    Ok(Filled { text, cut: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filling_stops_past_the_bound_inside_the_loop() {
        let template = "{{x}}".repeat(100_000);
        let mut calls = 0;
        let f = fill_variables(&template, 1000, |_| {
            calls += 1;
            Ok::<_, ()>(Some("0123456789".to_owned()))
        })
        .unwrap();
        assert!(f.cut);
        assert!(f.text.len() <= 1010, "{}", f.text.len());
        assert_eq!(calls, 101);
    }

    #[test]
    fn unclosed_and_unknown_variables_stay_as_written_and_errors_pass_through() {
        let f = fill_variables("a {{b}} {{c", 100, |_| Ok::<_, ()>(None)).unwrap();
        assert_eq!(f.text, "a {{b}} {{c");
        let e = fill_variables("{{boom}}", 100, |v| Err::<Option<String>, _>(v.to_owned()));
        assert_eq!(e, Err("boom".to_owned()));
        // A value that holds `{{` is not read again.
        let f = fill_variables("{{a}}}}", 100, |_| Ok::<_, ()>(Some("{{a".to_owned()))).unwrap();
        assert_eq!(f.text, "{{a}}");
    }
}

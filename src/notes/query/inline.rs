//! A note's inline queries (`= expression`) evaluated for `read_note`, under the request's one
//! budget, the hidden-text policy and `max_chars`.

use super::*;

/// Most inline queries evaluated in one note.
pub const MAX_INLINE: usize = 100;

/// One inline query (`` `= expr` ``) of a note and what it evaluates to.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InlineValue {
    /// 1-based line of the query.
    pub line: usize,
    /// The expression, after the prefix.
    pub query: String,
    /// The value as Dataview renders it, when it evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Why it did not (a parse or evaluation error; JavaScript is never run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The notes its value was read from that are not the vault's own (`[[Clip]].field`),
    /// by path: their text is data, not instructions.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(skip)]
    pub provenance: std::collections::BTreeMap<String, Provenance>,
}

/// The inline queries of `text` (the note at `path`) evaluated with `this` bound to the note:
/// the vault's Dataview prefix (`=` by default), at most [`MAX_INLINE`]; inline JavaScript
/// (`$=`) is reported, never run. They share the request's one budget; their values follow
/// the hidden-text `policy` as a note's text does, and together hold at most `max_chars`
/// characters (a value past that is cut, and the ones after it are not shown).
pub fn inline_values(
    engine: &Engine,
    path: &VaultPath,
    text: &str,
    policy: markdown::hidden::Policy,
    max_chars: usize,
) -> Result<Vec<InlineValue>, NoteError> {
    let settings = crate::notes::settings::dataview_settings(engine.vault());
    let prefix = settings.inline_query_prefix.clone();
    let js = settings.inline_js_query_prefix.clone();
    let spans: Vec<(usize, String)> = markdown::inline_code(text, 4 * MAX_INLINE)
        .into_iter()
        .filter(|(_, code)| {
            (!prefix.is_empty() && code.starts_with(&prefix))
                || (!js.is_empty() && code.starts_with(&js))
        })
        .take(MAX_INLINE)
        .collect();
    if spans.is_empty() {
        return Ok(Vec::new());
    }
    let model = engine.model()?;
    let read = |p: &VaultPath| note_text(engine.vault(), p);
    // One "now" and one budget for every inline query of the note.
    let now = crate::notes::cancel::now();
    let budget = crate::notes::cancel::budget();
    let mut pages = ModelPages::new(&model).charging(budget.clone());
    if spans.iter().any(|(_, code)| needs_text(code)) {
        pages = pages.reading(&read);
    }
    let this = pages.id(path);
    let mut out = Vec::with_capacity(spans.len());
    let mut room = max_chars;
    for (line, code) in spans {
        if !js.is_empty() && code.starts_with(&js) {
            out.push(InlineValue {
                line,
                query: code[js.len()..].trim().to_owned(),
                value: None,
                error: Some("inline JavaScript, which capvault never runs".to_owned()),
                provenance: Default::default(),
            });
            continue;
        }
        let expr = code[prefix.len()..].trim().to_owned();
        let mut ctx = Context::new(now);
        ctx.settings = settings.clone();
        ctx.this = this;
        ctx.budget = budget.clone();
        let mut provenance = Default::default();
        let rendered =
            query::evaluate_inline_reading(&expr, this, &pages, &ctx).and_then(|(v, read)| {
                provenance = provenance_of(engine, &model, &pages, &read);
                // Its text is charged before it is written.
                budget
                    .alloc(query::eval::text_bound(&v))
                    .map_err(|s| QueryError::from(query::eval::EvalError::new(s.to_string(), 0)))?;
                Ok(query::render::markdown_value(&v, &settings))
            });
        let (value, error) = match rendered {
            Ok(_) if room == 0 => (
                None,
                Some(format!(
                    "not shown: the inline values before it filled max_chars ({max_chars})"
                )),
            ),
            Ok(v) => (Some(shown_value(&v, policy, &mut room)), None),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(InlineValue {
            line,
            // The query is the note's text too: its hidden text follows the same policy.
            query: shown_value(&expr, policy, &mut { usize::MAX }),
            value,
            error,
            provenance,
        });
    }
    Ok(out)
}

/// An inline value as a client sees it: its hidden text marked, stripped or left as `policy`
/// says (as a note's own text is), cut to the characters left in `room`.
pub(super) fn shown_value(v: &str, policy: markdown::hidden::Policy, room: &mut usize) -> String {
    let spans = markdown::hidden_spans(v);
    let shown = markdown::hidden::apply(v, 0..v.len(), &spans, policy);
    let count = shown.chars().count();
    if count <= *room {
        *room -= count;
        return shown;
    }
    let mut cut: String = shown.chars().take(*room).collect();
    cut.push_str("… (cut at max_chars)");
    *room = 0;
    cut
}

//! DQL, Dataview's query language, parsed and evaluated without Obsidian (issue 34, part 2).
//! Pure: no I/O. The integrator implements [`DvSource`] over the vault model.
//!
//! - [`parse_query`] / [`parse_block`] / [`parse_expression`]: LIST (`WITHOUT ID`, an
//!   expression), TABLE (columns with `AS`, `WITHOUT ID`), TASK, CALENDAR; `FROM` sources
//!   (`#tag`, `"folder"`, `"folder/file"`, `[[note]]`, `[[]]`, `outgoing([[note]])`, `and`,
//!   `or`, `-`/`!`, parentheses); WHERE, SORT (keys, ASC/DESC), GROUP BY (AS), FLATTEN (AS),
//!   LIMIT in any order and repeated; `//` comment lines. Expressions: numbers, strings
//!   (`\"` and `\\` unescaped, other escapes kept so `"\w+"` is a regex), `date(...)` and
//!   `dur(...)` literals and clock keywords, links, lists, objects, fields (names may hold
//!   `-`: `a-b` is one name, `a - b` a subtraction), `a.b`, `a["b"]`, `a[0]`, calls, lambdas,
//!   `!`, unary `-`, `* / %`, `+ -`, comparisons, and `and`/`or` (`&`/`|`) which share one
//!   level and group left to right, as in Dataview. Errors carry byte offset, line and
//!   column and what was expected. `dataviewjs` blocks and `$=` queries are refused.
//!   Bounded: [`MAX_QUERY_BYTES`], [`MAX_DEPTH`] (parser nesting), [`MAX_TREE_DEPTH`] (the
//!   expression tree evaluation recurses on); time linear in the query.
//! - [`run()`] / [`execute`]: sources become page sets, the commands apply in written order,
//!   TASK works on tasks (their fields first, then the page's), CALENDAR gives
//!   `(date, page)` pairs. Implicit `file.*` fields are computed from the source; page fields
//!   are [`crate::obsidian::dataview::DataviewNote::page_fields`]; `this` is
//!   [`Context::this`]; "now" is [`Context::now`]. Bounded by a [`Budget`] (steps, time, stop
//!   flag) checked inside every loop, a row cap, value sizes and regex size limits.
//!   Pages are visited in path order. A source implements [`DvSource`]: tags are explicit
//!   tags with `#` (subtags are derived here), outlinks as written (resolved here through
//!   [`DvSource::resolve`]), inlinks as pages.
//! - [`functions`]: the functions of reference/functions.md (lambdas are passed as written:
//!   `map(xs, (x) => x + 1)`; a function's name cannot be passed as a value).
//! - [`QueryResult`]: structured output and [`QueryResult::to_markdown`].
//! - [`DataviewSettings::from_json`]: `data.json`'s settings that change answers (date
//!   formats, id and group column names, `renderNullAs`, task completion tracking and text,
//!   inline query prefixes). [`evaluate_inline`] takes the text after the prefix; the caller
//!   finds `` `= ...` `` spans with [`DataviewSettings::inline_query_prefix`].
//!
//! ## Where we differ from Dataview, and why
//!
//! - Strings sort case-insensitively then lower case first: an approximation of the
//!   locale-aware comparison JavaScript's `localeCompare` does (no ICU here).
//! - Links compare equal when they resolve to the same page (Dataview stores resolved paths at
//!   index time; resolving at comparison gives the same answers without an index).
//! - `a.b` on a list maps over it without flattening nested lists.
//! - `date(sow)` is Monday (ISO weeks, Luxon's default); locale week starts are not known.
//! - Dates keep the wall-clock time written; zone offsets count only in comparisons and
//!   date differences.
//! - A WHERE that fails on a row drops that row (with a warning); the query fails only when
//!   it fails on every row. Column errors show as null.
//! - `date - date` is Luxon's calendar diff as Dataview takes it (years, months, days, then
//!   time, normalised with Luxon's casual units: 7 days a week, 4 weeks a month), so
//!   `date(2026-12-07) - date(2026-01-01)` is `11 months, 6 days` and 28 days from January 1st
//!   are `1 month`; a negative duration prints each part negative. Durations' `.days` (and
//!   the other units) are the whole duration in that unit, with Luxon's casual lengths (a
//!   month 30 days or 4 weeks, a year 365 days or 52 weeks). Other durations are not
//!   normalised as Dataview normalises them (`dur(30 days)` stays 30 days where Dataview's
//!   Luxon makes it a month and 2 days).
//! - TASK results list each matching task once with its sub-items below it; a matching task
//!   under another matching task appears only under it.
//! - Object keys given twice keep the last value. `contains(object, key)` is true when the key
//!   holds a value (so `contains(file, "day")` is false on undated pages, as documented).
//! - Date display formats accept Luxon's common tokens ([`render::format_date`]); localised
//!   macro tokens (`D`, `DD`, `t`...) are printed as written.
//! - `localtime()` returns its argument (dates carry no zone conversions here);
//!   `currencyformat()` formats as the en-US locale does (no other locales); `hash()` gives a
//!   stable number of its own, not Dataview's.

pub mod ast;
pub mod eval;
pub mod functions;
pub mod parse;
pub mod render;
pub mod run;
pub mod settings;

#[cfg(test)]
mod tests;

pub use ast::{BinOp, Column, Command, DateKeyword, Expr, ExprKind, Header, Query, Source};
pub use eval::{Budget, Context, DvSource, EvalError, PageId};
pub use parse::{
    MAX_DEPTH, MAX_QUERY_BYTES, MAX_TREE_DEPTH, ParseError, ParseErrorKind, parse_block,
    parse_expression, parse_query,
};
pub use render::{Output, QueryResult, TaskRow};
pub use run::run;
pub use settings::{DataviewSettings, SettingsError};

use crate::obsidian::dataview::Value;

/// Why a query gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("cannot parse the query: {0}")]
    Parse(#[from] ParseError),
    #[error("cannot evaluate the query: {0}")]
    Eval(#[from] EvalError),
}

/// Parses and runs a query.
pub fn execute<S: DvSource + ?Sized>(
    text: &str,
    src: &S,
    ctx: &Context,
) -> Result<QueryResult, QueryError> {
    let q = parse_query(text)?;
    Ok(run(&q, src, ctx)?)
}

/// An inline query (`= expr`, the text after the prefix) evaluated on `this_page`.
pub fn evaluate_inline<S: DvSource + ?Sized>(
    expr_text: &str,
    this_page: Option<PageId>,
    src: &S,
    ctx: &Context,
) -> Result<Value, QueryError> {
    evaluate_inline_reading(expr_text, this_page, src, ctx).map(|(v, _)| v)
}

/// [`evaluate_inline`], with the pages whose data the value was read from.
pub fn evaluate_inline_reading<S: DvSource + ?Sized>(
    expr_text: &str,
    this_page: Option<PageId>,
    src: &S,
    ctx: &Context,
) -> Result<(Value, Vec<PageId>), QueryError> {
    let e = parse_expression(expr_text)?;
    let ev = eval::Ev::new(src, ctx);
    ev.record(true);
    let row = eval::Row {
        page: this_page.or(ctx.this),
        ..eval::Row::default()
    };
    let v = ev.eval(&e, &row)?;
    Ok((v, ev.pages_read()))
}

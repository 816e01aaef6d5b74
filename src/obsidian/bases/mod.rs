//! Obsidian Bases without Obsidian: `.base` files and ```` ```base ```` blocks evaluated over
//! any [`Source`] of files (the vault model implements it in `notes::bases`). Pure: no I/O.
//!
//! - [`expr`]: the expression language (lexer and parser, bounded length and depth).
//! - [`value`]: its values, with JavaScript-like truthiness and printing, and Obsidian's
//!   typed comparisons (dates, durations, links that equal the files they resolve to).
//! - [`eval`]: evaluation of one row within a [`Budget`] (steps, time, list and string
//!   sizes, nesting), names and property types as Obsidian resolves them, and the functions
//!   of Obsidian's Functions page.
//! - [`query`]: a base's filters, formulas, views (order, sort, group, limit, summaries) and
//!   [`run`], which evaluates one view.
//!
//! The rules implemented, and every place capvault knowingly differs from Obsidian, are in
//! docs/obsidian.md ("Bases").

pub mod eval;
pub mod expr;
pub mod query;
pub mod value;

#[cfg(test)]
mod tests;

pub use eval::{Budget, PropertyType, Source, SourceLink};
pub use query::{Base, BaseError, Cell, Output, Property, View, run};
pub use value::{FileRef, Value};

/// Largest `.base` file or block read, in bytes (the YAML reader's own limit).
pub const MAX_BASE_BYTES: usize = 256 * 1024;

/// Reads a base from its YAML text.
///
/// ```
/// use capvault::obsidian::bases::parse_base;
///
/// let base = parse_base("filters: 'file.hasTag(\"book\")'\nviews:\n  - type: table\n    name: Books\n").unwrap();
/// assert_eq!(base.views[0].name, "Books");
/// assert!(parse_base("- not a mapping").is_err());
/// ```
pub fn parse_base(yaml: &str) -> Result<Base, BaseError> {
    if yaml.len() > MAX_BASE_BYTES {
        return Err(BaseError::TooLarge);
    }
    if yaml.trim().is_empty() {
        return Base::from_json(&serde_json::Map::new());
    }
    let doc = crate::markdown::parse_yaml_mapping(yaml).map_err(BaseError::Yaml)?;
    Base::from_json(&doc)
}

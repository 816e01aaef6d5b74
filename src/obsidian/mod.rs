//! Obsidian's own formats, parsed without I/O: functions take bytes or text and return typed
//! values, so the rules can be tested without a vault.
//!
//! - [`config`]: the `.obsidian/` settings files (`app.json`, `daily-notes.json`,
//!   `templates.json`, Periodic Notes' `data.json`, the plugin lists), lenient the way Obsidian
//!   is, and [`config::daily_note_location`], which picks the settings that decide where daily
//!   notes live.
//! - [`moment`]: Moment.js date formats (the English locale Obsidian ships, with the vault's week
//!   start): formatting periodic-note names and paths, and the strict parse that recognises them
//!   again.
//! - [`periodic`]: days, weeks, months, quarters and years as the Periodic Notes plugin counts
//!   them, the dates people name them by, and the plugin's template variables.
//! - [`jsregex`]: the plugins' JavaScript regular expressions and replacement strings, compiled
//!   for the `regex` crate with size and nesting bounds.
//! - [`template`]: the `{{variable}}` scanner the Templates plugin, Periodic Notes and prompts
//!   share.
//! - [`budget`]: the steps, deadline and stop check of one Bases or Dataview query.
//! - [`canvas`]: JSON Canvas 1.0 documents (`.canvas`), parsed with spec violations reported as
//!   issues instead of failures.

pub mod bases;
pub mod budget;
pub mod canvas;
pub mod canvas_edit;
pub mod config;
pub mod dataview;
pub mod jsregex;
pub mod moment;
pub mod periodic;
pub mod provenance;
pub mod tasks;
pub mod template;

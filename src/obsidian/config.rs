//! Settings files from the vault's config folder (`.obsidian/` by default).
//!
//! Each parser takes the file's bytes and returns typed settings. Obsidian is lenient with its
//! own files (a hand-edited `app.json` with one bad value still opens), so these parsers are too:
//! unknown keys are ignored and a key with the wrong JSON type reads as that key's default.
//! Only input that is not JSON at all, a top level of the wrong shape, or a file over
//! [`MAX_CONFIG_BYTES`] is an error. A leading UTF-8 byte-order mark is skipped, and a top-level
//! `null` reads as "no settings" (plugins load their data with `Object.assign(defaults, data)`).
//!
//! Key names are the ones Obsidian writes; they are not documented, but every project that reads
//! them agrees (see `docs/obsidian-format.md` in the shared docs).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// Largest settings file accepted, in bytes. Real files are a few hundred bytes.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// The daily-note format Obsidian uses when the setting is missing or empty.
pub const DEFAULT_DAILY_FORMAT: &str = "YYYY-MM-DD";
/// Periodic Notes' default weekly format (locale week-year and week).
pub const DEFAULT_WEEKLY_FORMAT: &str = "gggg-[W]ww";
/// Periodic Notes' default monthly format.
pub const DEFAULT_MONTHLY_FORMAT: &str = "YYYY-MM";
/// Periodic Notes' default quarterly format.
pub const DEFAULT_QUARTERLY_FORMAT: &str = "YYYY-[Q]Q";
/// Periodic Notes' default yearly format.
pub const DEFAULT_YEARLY_FORMAT: &str = "YYYY";
/// The core Templates plugin's default `{{date}}` format.
pub const DEFAULT_TEMPLATE_DATE_FORMAT: &str = "YYYY-MM-DD";
/// The core Templates plugin's default `{{time}}` format.
pub const DEFAULT_TEMPLATE_TIME_FORMAT: &str = "HH:mm";
/// The community plugin id of Periodic Notes.
pub const PERIODIC_NOTES_PLUGIN_ID: &str = "periodic-notes";

/// Why a settings file could not be read. Messages name the problem, never the file's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file is larger than [`MAX_CONFIG_BYTES`].
    #[error("the settings file is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The file's size in bytes.
        size: usize,
        /// The limit it exceeded.
        max: usize,
    },
    /// The file is not JSON (the message is serde_json's, with line and column).
    #[error("the settings file is not valid JSON: {0}")]
    InvalidJson(String),
    /// The file is JSON, but its top level is not what this file holds.
    #[error("the settings file's top level is not {expected}")]
    WrongShape {
        /// What the top level should be, e.g. "a JSON object".
        expected: &'static str,
    },
}

/// How Obsidian writes new links (`newLinkFormat` in `app.json`, "New link format").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NewLinkFormat {
    /// The shortest text that still resolves: the bare name when it is unique in the vault.
    #[default]
    Shortest,
    /// A path relative to the note that holds the link.
    Relative,
    /// The full path from the vault root.
    Absolute,
}

/// What Obsidian does with deleted files (`trashOption` in `app.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrashOption {
    /// Move to the operating system's trash (`system`).
    #[default]
    System,
    /// Move to `.trash/` inside the vault (`local`).
    Local,
    /// Delete permanently (`none` in `app.json`).
    #[serde(rename = "none")]
    Permanent,
}

/// The `app.json` settings that change how links, new files and deletions must be written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AppSettings {
    /// How new or rewritten links are spelled (`newLinkFormat`).
    pub new_link_format: NewLinkFormat,
    /// Write `[text](path.md)` instead of `[[wikilinks]]` (`useMarkdownLinks`).
    pub use_markdown_links: bool,
    /// Update links on rename without asking (`alwaysUpdateLinks`).
    pub always_update_links: bool,
    /// Where new notes go: `root`, `current` (the active note's folder) or `folder`
    /// (`newFileLocation`; any other value reads as `root`).
    pub new_file_location: String,
    /// The folder for new notes when `new_file_location` is `folder` (`newFileFolderPath`).
    pub new_file_folder_path: String,
    /// Where attachments go (`attachmentFolderPath`): `/` the vault root, `./` beside the note,
    /// `./sub` a subfolder of the note's folder, anything else a vault path.
    pub attachment_folder_path: String,
    /// What deleting a file does (`trashOption`).
    pub trash_option: TrashOption,
    /// "Excluded files" (`userIgnoreFilters`): folder paths, or regexes written `/…/`.
    pub user_ignore_filters: Vec<String>,
    /// The first day of the week (`weekStart`, set by the Periodic Notes plugin): `sunday` …
    /// `saturday`, or `locale` (Moment's English locale: Sunday).
    pub week_start: String,
}

impl Default for AppSettings {
    fn default() -> Self {
        AppSettings {
            new_link_format: NewLinkFormat::Shortest,
            use_markdown_links: false,
            always_update_links: false,
            new_file_location: "root".to_owned(),
            new_file_folder_path: String::new(),
            attachment_folder_path: "/".to_owned(),
            trash_option: TrashOption::System,
            user_ignore_filters: Vec::new(),
            week_start: "locale".to_owned(),
        }
    }
}

/// Parses `.obsidian/app.json`.
///
/// ```
/// use capvault::obsidian::config::{parse_app, NewLinkFormat};
///
/// let s = parse_app(br#"{"newLinkFormat": "relative", "useMarkdownLinks": "yes"}"#).unwrap();
/// assert_eq!(s.new_link_format, NewLinkFormat::Relative);
/// assert!(!s.use_markdown_links); // a wrong type reads as the default
/// ```
pub fn parse_app(bytes: &[u8]) -> Result<AppSettings, ConfigError> {
    let map = parse_object(bytes)?;
    let d = AppSettings::default();
    Ok(AppSettings {
        new_link_format: match str_key(&map, "newLinkFormat") {
            Some("relative") => NewLinkFormat::Relative,
            Some("absolute") => NewLinkFormat::Absolute,
            _ => NewLinkFormat::Shortest,
        },
        use_markdown_links: bool_key(&map, "useMarkdownLinks").unwrap_or(d.use_markdown_links),
        always_update_links: bool_key(&map, "alwaysUpdateLinks").unwrap_or(d.always_update_links),
        new_file_location: match str_key(&map, "newFileLocation") {
            Some(v @ ("current" | "folder")) => v.to_owned(),
            _ => d.new_file_location,
        },
        new_file_folder_path: string_key(&map, "newFileFolderPath"),
        attachment_folder_path: match str_key(&map, "attachmentFolderPath") {
            Some(v) if !v.is_empty() => v.to_owned(),
            _ => d.attachment_folder_path,
        },
        trash_option: match str_key(&map, "trashOption") {
            Some("local") => TrashOption::Local,
            Some("none") => TrashOption::Permanent,
            _ => TrashOption::System,
        },
        user_ignore_filters: string_list(map.get("userIgnoreFilters")),
        week_start: match str_key(&map, "weekStart") {
            Some(v) if !v.trim().is_empty() => v.trim().to_ascii_lowercase(),
            _ => d.week_start,
        },
    })
}

/// Obsidian's "Excluded files" (`userIgnoreFilters`), compiled: a plain entry excludes every path
/// that starts with it (`Archive/` a folder, `Drafts/old.md` one file, `Arch` both `Archive/...`
/// and `Archived.md`, as Obsidian compares); an entry written `/…/` is a regular expression
/// searched anywhere in the vault path. Obsidian leaves these files out of search, the graph
/// and unlinked mentions; they stay readable.
#[derive(Debug, Default)]
pub struct IgnoreFilters {
    prefixes: Vec<String>,
    regexes: Option<regex::RegexSet>,
}

/// Largest compiled size of the filters' regexes together.
const IGNORE_REGEX_LIMIT: usize = 1 << 20;

impl IgnoreFilters {
    /// Compiles `filters`; an entry that is not a valid regex is left out and reported.
    pub fn new(filters: &[String]) -> (IgnoreFilters, Vec<String>) {
        let mut prefixes = Vec::new();
        let mut patterns = Vec::new();
        let mut errors = Vec::new();
        for f in filters {
            match f.strip_prefix('/').and_then(|r| r.strip_suffix('/')) {
                Some(re) if !re.is_empty() => {
                    match regex::RegexBuilder::new(re)
                        .size_limit(IGNORE_REGEX_LIMIT)
                        .build()
                    {
                        Ok(_) => patterns.push(re.to_owned()),
                        Err(e) => errors.push(format!(
                            "userIgnoreFilters: `{f}` is not a regex capvault can use ({}); ignored",
                            e.to_string().lines().last().unwrap_or("").trim()
                        )),
                    }
                }
                _ if !f.is_empty() => prefixes.push(f.clone()),
                _ => {}
            }
        }
        let regexes = match regex::RegexSetBuilder::new(&patterns)
            .size_limit(IGNORE_REGEX_LIMIT)
            .build()
        {
            Ok(set) if !patterns.is_empty() => Some(set),
            Ok(_) => None,
            Err(_) => {
                errors.push(
                    "userIgnoreFilters: the regexes together are too large; they are ignored"
                        .to_owned(),
                );
                None
            }
        };
        (IgnoreFilters { prefixes, regexes }, errors)
    }

    /// True when no entry excludes anything.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty() && self.regexes.is_none()
    }

    /// True when the file at vault path `path` is excluded.
    pub fn matches(&self, path: &str) -> bool {
        self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
            || self.regexes.as_ref().is_some_and(|r| r.is_match(path))
    }
}

/// The core Daily notes plugin's settings (`.obsidian/daily-notes.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DailyNotesSettings {
    /// Folder for new daily notes, as written (may be empty for the vault root).
    pub folder: String,
    /// Moment.js format of the note name; `YYYY-MM-DD` when missing or empty.
    pub format: String,
    /// Template note path, usually without `.md`; empty for none.
    pub template: String,
}

impl Default for DailyNotesSettings {
    fn default() -> Self {
        DailyNotesSettings {
            folder: String::new(),
            format: DEFAULT_DAILY_FORMAT.to_owned(),
            template: String::new(),
        }
    }
}

/// Parses `.obsidian/daily-notes.json`.
pub fn parse_daily_notes(bytes: &[u8]) -> Result<DailyNotesSettings, ConfigError> {
    let map = parse_object(bytes)?;
    Ok(DailyNotesSettings {
        folder: string_key(&map, "folder"),
        format: format_key(&map, "format", DEFAULT_DAILY_FORMAT),
        template: string_key(&map, "template"),
    })
}

/// The core Templates plugin's settings (`.obsidian/templates.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TemplatesSettings {
    /// Folder that holds the templates; empty when unset.
    pub folder: String,
    /// Moment.js format for `{{date}}`; `YYYY-MM-DD` when missing or empty.
    pub date_format: String,
    /// Moment.js format for `{{time}}`; `HH:mm` when missing or empty.
    pub time_format: String,
}

impl Default for TemplatesSettings {
    fn default() -> Self {
        TemplatesSettings {
            folder: String::new(),
            date_format: DEFAULT_TEMPLATE_DATE_FORMAT.to_owned(),
            time_format: DEFAULT_TEMPLATE_TIME_FORMAT.to_owned(),
        }
    }
}

/// Parses `.obsidian/templates.json`.
pub fn parse_templates(bytes: &[u8]) -> Result<TemplatesSettings, ConfigError> {
    let map = parse_object(bytes)?;
    Ok(TemplatesSettings {
        folder: string_key(&map, "folder"),
        date_format: format_key(&map, "dateFormat", DEFAULT_TEMPLATE_DATE_FORMAT),
        time_format: format_key(&map, "timeFormat", DEFAULT_TEMPLATE_TIME_FORMAT),
    })
}

/// One period's settings in the Periodic Notes plugin.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct PeriodSettings {
    /// Whether the user turned this period on in the plugin.
    pub enabled: bool,
    /// Folder for the notes, as written (may be empty for the vault root).
    pub folder: String,
    /// Moment.js format of the note name; the plugin's default for the period when empty.
    pub format: String,
    /// Template note path; empty for none.
    pub template: String,
}

/// The Periodic Notes plugin's settings (`.obsidian/plugins/periodic-notes/data.json`).
///
/// Both layouts are read: the released 0.0.x plugin writes `daily`, `weekly`, `monthly`,
/// `quarterly`, `yearly` objects with a `template` key; the 1.0 beta writes `calendarSets`
/// (each with `day`, `week`, `month`, `quarter`, `year` and a `templatePath` key) and an
/// `activeCalendarSet` id. When `calendarSets` is a non-empty array the active set (or the
/// first, when the id matches none) wins over the 0.0.x keys, as in the beta.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct PeriodicNotesSettings {
    /// Daily notes, when configured.
    pub daily: Option<PeriodSettings>,
    /// Weekly notes, when configured.
    pub weekly: Option<PeriodSettings>,
    /// Monthly notes, when configured.
    pub monthly: Option<PeriodSettings>,
    /// Quarterly notes, when configured.
    pub quarterly: Option<PeriodSettings>,
    /// Yearly notes, when configured.
    pub yearly: Option<PeriodSettings>,
}

/// Parses `.obsidian/plugins/periodic-notes/data.json`.
pub fn parse_periodic_notes(bytes: &[u8]) -> Result<PeriodicNotesSettings, ConfigError> {
    let map = parse_object(bytes)?;
    // (0.0.x key, 1.0 beta key, default format) for each period.
    const PERIODS: [(&str, &str, &str); 5] = [
        ("daily", "day", DEFAULT_DAILY_FORMAT),
        ("weekly", "week", DEFAULT_WEEKLY_FORMAT),
        ("monthly", "month", DEFAULT_MONTHLY_FORMAT),
        ("quarterly", "quarter", DEFAULT_QUARTERLY_FORMAT),
        ("yearly", "year", DEFAULT_YEARLY_FORMAT),
    ];
    let calendar_set = active_calendar_set(&map);
    let [daily, weekly, monthly, quarterly, yearly] = PERIODS.map(|(legacy, beta, default)| {
        let section = match calendar_set {
            Some(set) => set.get(beta),
            None => map.get(legacy),
        };
        section
            .and_then(Value::as_object)
            .map(|s| period_settings(s, default))
    });
    Ok(PeriodicNotesSettings {
        daily,
        weekly,
        monthly,
        quarterly,
        yearly,
    })
}

fn active_calendar_set(map: &Map<String, Value>) -> Option<&Map<String, Value>> {
    let sets: Vec<&Map<String, Value>> = map
        .get("calendarSets")?
        .as_array()?
        .iter()
        .filter_map(Value::as_object)
        .collect();
    let active = str_key(map, "activeCalendarSet");
    sets.iter()
        .find(|s| active.is_some() && str_key(s, "id") == active)
        .or_else(|| sets.first())
        .copied()
}

fn period_settings(section: &Map<String, Value>, default_format: &str) -> PeriodSettings {
    let template = match str_key(section, "templatePath") {
        Some(t) => t.to_owned(),
        None => string_key(section, "template"),
    };
    PeriodSettings {
        enabled: bool_key(section, "enabled").unwrap_or(false),
        folder: string_key(section, "folder"),
        format: format_key(section, "format", default_format),
        template,
    }
}

/// Parses `.obsidian/community-plugins.json`: the ids of the enabled community plugins, in
/// file order. Entries that are not strings are skipped.
pub fn parse_enabled_plugins(bytes: &[u8]) -> Result<Vec<String>, ConfigError> {
    match parse_value(bytes)? {
        Value::Null => Ok(Vec::new()),
        v @ Value::Array(_) => Ok(string_list(Some(&v))),
        _ => Err(ConfigError::WrongShape {
            expected: "a JSON array of plugin ids",
        }),
    }
}

/// Which core plugins are on (`.obsidian/core-plugins.json`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct CorePlugins {
    /// Ids of the enabled core plugins, sorted.
    pub enabled: Vec<String>,
    /// Ids the file explicitly turns off, sorted (only the newer object form lists these).
    pub disabled: Vec<String>,
}

impl CorePlugins {
    /// True when the core plugin `id` (e.g. `daily-notes`, `templates`) is enabled.
    pub fn is_enabled(&self, id: &str) -> bool {
        self.enabled
            .binary_search_by(|e| e.as_str().cmp(id))
            .is_ok()
    }
}

/// Parses `.obsidian/types.json`: `{"types": {"rating": "number", ...}}`, property name to
/// type name (`text`, `multitext`, `number`, `checkbox`, `date`, `datetime`, `tags`,
/// `aliases`). Entries whose type is not a string are skipped.
///
/// ```
/// use capvault::obsidian::config::parse_types;
///
/// let types = parse_types(br#"{"types": {"rating": "number", "last": "date", "x": 3}}"#).unwrap();
/// assert_eq!(types.get("rating").map(String::as_str), Some("number"));
/// assert_eq!(types.len(), 2);
/// ```
pub fn parse_types(bytes: &[u8]) -> Result<BTreeMap<String, String>, ConfigError> {
    let value = parse_value(bytes)?;
    let types = match &value {
        Value::Null => return Ok(BTreeMap::new()),
        Value::Object(map) => map.get("types").unwrap_or(&Value::Null),
        _ => {
            return Err(ConfigError::WrongShape {
                expected: "a JSON object with a `types` object",
            });
        }
    };
    Ok(match types {
        Value::Object(map) => map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|t| (k.clone(), t.to_owned())))
            .collect(),
        _ => BTreeMap::new(),
    })
}

/// Parses `.obsidian/core-plugins.json`, which comes in two forms: an array of enabled ids
/// (older Obsidian) or an object `{id: bool}` (1.x). Values that are not booleans (object form)
/// or not strings (array form) are skipped.
pub fn parse_core_plugins(bytes: &[u8]) -> Result<CorePlugins, ConfigError> {
    let (mut enabled, mut disabled) = match parse_value(bytes)? {
        Value::Null => (Vec::new(), Vec::new()),
        v @ Value::Array(_) => (string_list(Some(&v)), Vec::new()),
        Value::Object(map) => {
            let mut on = Vec::new();
            let mut off = Vec::new();
            for (id, state) in map {
                match state {
                    Value::Bool(true) => on.push(id),
                    Value::Bool(false) => off.push(id),
                    _ => {}
                }
            }
            (on, off)
        }
        _ => {
            return Err(ConfigError::WrongShape {
                expected: "a JSON array or object of core plugin ids",
            });
        }
    };
    for list in [&mut enabled, &mut disabled] {
        list.sort();
        list.dedup();
    }
    Ok(CorePlugins { enabled, disabled })
}

/// Which settings file a [`DailyNoteConfig`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DailyNoteSource {
    /// The Periodic Notes plugin (enabled, with daily notes turned on).
    PeriodicNotes,
    /// The core Daily notes plugin's `daily-notes.json`.
    DailyNotes,
    /// Neither file: Obsidian's defaults.
    Default,
}

/// Where daily notes live and how they are named, after choosing between the settings files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DailyNoteConfig {
    /// Folder for daily notes, trimmed of surrounding whitespace (empty: the vault root).
    pub folder: String,
    /// Moment.js format of the note name (a `/` in it makes subfolders).
    pub format: String,
    /// Template note path, trimmed; empty for none.
    pub template: String,
    /// Which settings file these values came from.
    pub source: DailyNoteSource,
}

/// Chooses the daily-note settings the way Obsidian's daily-notes interface (used by the core
/// plugin's commands, Calendar and Periodic Notes) does: Periodic Notes' `daily` section when
/// the `periodic-notes` community plugin is enabled and its daily notes are turned on, else
/// `daily-notes.json`, else the defaults (vault root, `YYYY-MM-DD`, no template). An empty
/// format means `YYYY-MM-DD`; folder and template are trimmed.
///
/// Whether the core Daily notes plugin is switched on does not matter: its settings still say
/// where the user's daily notes are.
pub fn daily_note_location(
    enabled_plugins: &[String],
    periodic: Option<&PeriodicNotesSettings>,
    daily_notes: Option<&DailyNotesSettings>,
) -> DailyNoteConfig {
    let periodic_daily = periodic
        .filter(|_| {
            enabled_plugins
                .iter()
                .any(|p| p == PERIODIC_NOTES_PLUGIN_ID)
        })
        .and_then(|p| p.daily.as_ref())
        .filter(|d| d.enabled);
    let (folder, format, template, source) = if let Some(d) = periodic_daily {
        (
            &d.folder,
            &d.format,
            &d.template,
            DailyNoteSource::PeriodicNotes,
        )
    } else if let Some(d) = daily_notes {
        (
            &d.folder,
            &d.format,
            &d.template,
            DailyNoteSource::DailyNotes,
        )
    } else {
        return DailyNoteConfig {
            folder: String::new(),
            format: DEFAULT_DAILY_FORMAT.to_owned(),
            template: String::new(),
            source: DailyNoteSource::Default,
        };
    };
    DailyNoteConfig {
        folder: folder.trim().to_owned(),
        format: if format.is_empty() {
            DEFAULT_DAILY_FORMAT.to_owned()
        } else {
            format.clone()
        },
        template: template.trim().to_owned(),
        source,
    }
}

/// Where the notes of `period` live: for days, [`daily_note_location`]; for weeks, months,
/// quarters and years, the Periodic Notes plugin's section for the period when the plugin is
/// enabled and the period turned on, else the plugin's defaults (vault root, `gggg-[W]ww`,
/// `YYYY-MM`, `YYYY-[Q]Q`, `YYYY`, no template) with `source` `default`.
pub fn periodic_note_location(
    period: crate::obsidian::periodic::Period,
    enabled_plugins: &[String],
    periodic: Option<&PeriodicNotesSettings>,
    daily_notes: Option<&DailyNotesSettings>,
) -> DailyNoteConfig {
    use crate::obsidian::periodic::Period;
    let (section, default_format) = match period {
        Period::Day => return daily_note_location(enabled_plugins, periodic, daily_notes),
        Period::Week => (
            periodic.and_then(|p| p.weekly.as_ref()),
            DEFAULT_WEEKLY_FORMAT,
        ),
        Period::Month => (
            periodic.and_then(|p| p.monthly.as_ref()),
            DEFAULT_MONTHLY_FORMAT,
        ),
        Period::Quarter => (
            periodic.and_then(|p| p.quarterly.as_ref()),
            DEFAULT_QUARTERLY_FORMAT,
        ),
        Period::Year => (
            periodic.and_then(|p| p.yearly.as_ref()),
            DEFAULT_YEARLY_FORMAT,
        ),
    };
    let plugin_on = enabled_plugins
        .iter()
        .any(|p| p == PERIODIC_NOTES_PLUGIN_ID);
    match section.filter(|s| plugin_on && s.enabled) {
        Some(s) => DailyNoteConfig {
            folder: s.folder.trim().to_owned(),
            format: if s.format.is_empty() {
                default_format.to_owned()
            } else {
                s.format.clone()
            },
            template: s.template.trim().to_owned(),
            source: DailyNoteSource::PeriodicNotes,
        },
        None => DailyNoteConfig {
            folder: String::new(),
            format: default_format.to_owned(),
            template: String::new(),
            source: DailyNoteSource::Default,
        },
    }
}

/// Size check, BOM skip and JSON parse, shared by every settings file.
fn parse_value(bytes: &[u8]) -> Result<Value, ConfigError> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            size: bytes.len(),
            max: MAX_CONFIG_BYTES,
        });
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    serde_json::from_slice(bytes).map_err(|e| ConfigError::InvalidJson(e.to_string()))
}

/// Parses a file whose top level must be an object (`null` reads as an empty one).
fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ConfigError> {
    match parse_value(bytes)? {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        _ => Err(ConfigError::WrongShape {
            expected: "a JSON object",
        }),
    }
}

fn str_key<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

fn bool_key(map: &Map<String, Value>, key: &str) -> Option<bool> {
    map.get(key).and_then(Value::as_bool)
}

/// A string setting; missing or not a string reads as empty.
fn string_key(map: &Map<String, Value>, key: &str) -> String {
    str_key(map, key).unwrap_or_default().to_owned()
}

/// A format setting: missing, empty or not a string reads as `default` (Obsidian writes
/// `format || DEFAULT`).
fn format_key(map: &Map<String, Value>, key: &str, default: &str) -> String {
    match str_key(map, key) {
        Some(f) if !f.is_empty() => f.to_owned(),
        _ => default.to_owned(),
    }
}

/// The strings of a JSON array, skipping other elements; anything but an array reads as empty.
fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_app_json_gives_obsidian_defaults() {
        let s = parse_app(b"{}").unwrap();
        assert_eq!(s, AppSettings::default());
        assert_eq!(s.new_link_format, NewLinkFormat::Shortest);
        assert!(!s.use_markdown_links);
        assert_eq!(s.new_file_location, "root");
        assert_eq!(s.attachment_folder_path, "/");
        assert_eq!(s.trash_option, TrashOption::System);
        assert!(s.user_ignore_filters.is_empty());
    }

    #[test]
    fn app_json_values_are_read() {
        let s = parse_app(
            br#"{
                "newLinkFormat": "absolute",
                "useMarkdownLinks": true,
                "alwaysUpdateLinks": true,
                "newFileLocation": "folder",
                "newFileFolderPath": "Inbox",
                "attachmentFolderPath": "./assets",
                "trashOption": "local",
                "userIgnoreFilters": ["Archive/", "/\\.tmp$/"],
                "somethingNew": {"nested": [1, 2]}
            }"#,
        )
        .unwrap();
        assert_eq!(s.new_link_format, NewLinkFormat::Absolute);
        assert!(s.use_markdown_links);
        assert!(s.always_update_links);
        assert_eq!(s.new_file_location, "folder");
        assert_eq!(s.new_file_folder_path, "Inbox");
        assert_eq!(s.attachment_folder_path, "./assets");
        assert_eq!(s.trash_option, TrashOption::Local);
        assert_eq!(s.user_ignore_filters, vec!["Archive/", "/\\.tmp$/"]);
    }

    #[test]
    fn trash_option_none_means_permanent_delete() {
        let s = parse_app(br#"{"trashOption": "none"}"#).unwrap();
        assert_eq!(s.trash_option, TrashOption::Permanent);
        assert_eq!(
            serde_json::to_value(s.trash_option).unwrap(),
            serde_json::json!("none")
        );
    }

    #[test]
    fn wrong_types_and_unknown_values_read_as_defaults() {
        let s = parse_app(
            br#"{
                "newLinkFormat": "sideways",
                "useMarkdownLinks": "true",
                "alwaysUpdateLinks": 1,
                "newFileLocation": "elsewhere",
                "newFileFolderPath": 7,
                "attachmentFolderPath": "",
                "trashOption": false,
                "userIgnoreFilters": ["ok", 3, null, "also ok"]
            }"#,
        )
        .unwrap();
        assert_eq!(s.new_link_format, NewLinkFormat::Shortest);
        assert!(!s.use_markdown_links);
        assert!(!s.always_update_links);
        assert_eq!(s.new_file_location, "root");
        assert_eq!(s.new_file_folder_path, "");
        assert_eq!(s.attachment_folder_path, "/");
        assert_eq!(s.trash_option, TrashOption::System);
        assert_eq!(s.user_ignore_filters, vec!["ok", "also ok"]);

        let s = parse_app(br#"{"userIgnoreFilters": "Archive/"}"#).unwrap();
        assert!(s.user_ignore_filters.is_empty());
    }

    #[test]
    fn invalid_json_is_an_error() {
        for bad in [&b""[..], b"{", b"{'a': 1}", b"{\"a\": 1,}", b"\xff\xfe"] {
            assert!(
                matches!(parse_app(bad), Err(ConfigError::InvalidJson(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn non_object_top_level_is_an_error_but_null_is_defaults() {
        for bad in [&b"[]"[..], b"3", b"\"app\"", b"true"] {
            assert_eq!(
                parse_app(bad),
                Err(ConfigError::WrongShape {
                    expected: "a JSON object"
                })
            );
        }
        assert_eq!(parse_app(b"null").unwrap(), AppSettings::default());
        assert_eq!(
            parse_daily_notes(b" null ").unwrap(),
            DailyNotesSettings::default()
        );
    }

    #[test]
    fn byte_order_mark_is_skipped() {
        let s = parse_app(b"\xEF\xBB\xBF{\"useMarkdownLinks\": true}").unwrap();
        assert!(s.use_markdown_links);
    }

    #[test]
    fn files_over_one_mebibyte_are_refused() {
        let mut big = b"{\"a\": \"".to_vec();
        big.resize(MAX_CONFIG_BYTES, b'x');
        big.extend_from_slice(b"\"}");
        assert_eq!(
            parse_app(&big),
            Err(ConfigError::TooLarge {
                size: MAX_CONFIG_BYTES + 2,
                max: MAX_CONFIG_BYTES
            })
        );
        assert!(matches!(
            parse_enabled_plugins(&big),
            Err(ConfigError::TooLarge { .. })
        ));
        // Exactly at the limit is fine.
        let mut at_limit = b"{\"a\": \"".to_vec();
        at_limit.resize(MAX_CONFIG_BYTES - 2, b'x');
        at_limit.extend_from_slice(b"\"}");
        assert!(parse_app(&at_limit).is_ok());
    }

    #[test]
    fn error_messages_do_not_echo_file_content() {
        let err = parse_app(b"{\"secret-token-123\" 1}").unwrap_err();
        assert!(!err.to_string().contains("secret-token-123"), "{err}");
    }

    #[test]
    fn daily_notes_format_defaults_when_missing_or_empty() {
        let s =
            parse_daily_notes(br#"{"folder": "Daily", "template": "Templates/Daily"}"#).unwrap();
        assert_eq!(s.folder, "Daily");
        assert_eq!(s.format, "YYYY-MM-DD");
        assert_eq!(s.template, "Templates/Daily");

        let s = parse_daily_notes(br#"{"format": ""}"#).unwrap();
        assert_eq!(s.format, "YYYY-MM-DD");
        let s = parse_daily_notes(br#"{"format": "YYYY/MM/YYYY-MM-DD"}"#).unwrap();
        assert_eq!(s.format, "YYYY/MM/YYYY-MM-DD");
        let s = parse_daily_notes(br#"{"format": null, "folder": ["x"]}"#).unwrap();
        assert_eq!(s, DailyNotesSettings::default());
    }

    #[test]
    fn templates_formats_default_when_missing_or_empty() {
        let s = parse_templates(br#"{"folder": "Templates"}"#).unwrap();
        assert_eq!(
            s,
            TemplatesSettings {
                folder: "Templates".into(),
                date_format: "YYYY-MM-DD".into(),
                time_format: "HH:mm".into(),
            }
        );
        let s = parse_templates(
            br#"{"folder": "T", "dateFormat": "DD.MM.YYYY", "timeFormat": "h:mm A"}"#,
        )
        .unwrap();
        assert_eq!(s.date_format, "DD.MM.YYYY");
        assert_eq!(s.time_format, "h:mm A");
        let s = parse_templates(br#"{"dateFormat": "", "timeFormat": ""}"#).unwrap();
        assert_eq!(s, TemplatesSettings::default());
    }

    const PERIODIC_0_0: &[u8] = br#"{
        "showGettingStartedBanner": false,
        "hasMigratedDailyNoteSettings": true,
        "hasMigratedWeeklyNoteSettings": true,
        "daily": {"format": "YYYY/MM/YYYY-MM-DD", "template": "T/Daily", "folder": "Journal", "enabled": true},
        "weekly": {"format": "", "template": "", "folder": "Weekly", "enabled": true},
        "monthly": {"format": "YYYY-MM", "template": "", "folder": "", "enabled": false},
        "quarterly": {"enabled": false}
    }"#;

    #[test]
    fn periodic_notes_legacy_layout_is_read() {
        let s = parse_periodic_notes(PERIODIC_0_0).unwrap();
        assert_eq!(
            s.daily,
            Some(PeriodSettings {
                enabled: true,
                folder: "Journal".into(),
                format: "YYYY/MM/YYYY-MM-DD".into(),
                template: "T/Daily".into(),
            })
        );
        let weekly = s.weekly.unwrap();
        assert!(weekly.enabled);
        assert_eq!(
            weekly.format, "gggg-[W]ww",
            "empty format takes the period default"
        );
        assert!(!s.monthly.unwrap().enabled);
        assert_eq!(s.quarterly.unwrap().format, "YYYY-[Q]Q");
        assert_eq!(s.yearly, None);
    }

    #[test]
    fn periodic_notes_beta_calendar_sets_use_the_active_set() {
        let s = parse_periodic_notes(
            br#"{
                "calendarSets": [
                    {"id": "Default", "day": {"enabled": true, "format": "YYYY-MM-DD", "folder": "A", "templatePath": "T/A"}},
                    {"id": "Work", "day": {"enabled": true, "format": "DD-MM-YYYY", "folder": "Work/Daily", "templatePath": "T/Work"},
                     "year": {"enabled": true, "format": "", "folder": "Years"}}
                ],
                "activeCalendarSet": "Work",
                "daily": {"enabled": true, "folder": "ignored"}
            }"#,
        )
        .unwrap();
        let daily = s.daily.unwrap();
        assert_eq!(daily.folder, "Work/Daily");
        assert_eq!(daily.format, "DD-MM-YYYY");
        assert_eq!(daily.template, "T/Work");
        assert_eq!(s.yearly.unwrap().format, "YYYY");
        assert_eq!(s.weekly, None);

        // An unknown active id falls back to the first set.
        let s = parse_periodic_notes(
            br#"{"calendarSets": [{"id": "A", "day": {"enabled": true, "folder": "First"}}],
                 "activeCalendarSet": "missing"}"#,
        )
        .unwrap();
        assert_eq!(s.daily.unwrap().folder, "First");
    }

    #[test]
    fn enabled_plugins_is_a_list_of_ids() {
        assert_eq!(
            parse_enabled_plugins(br#"["periodic-notes", "calendar", 3, "dataview"]"#).unwrap(),
            vec!["periodic-notes", "calendar", "dataview"]
        );
        assert_eq!(parse_enabled_plugins(b"[]").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_enabled_plugins(b"null").unwrap(),
            Vec::<String>::new()
        );
        assert!(matches!(
            parse_enabled_plugins(br#"{"calendar": true}"#),
            Err(ConfigError::WrongShape { .. })
        ));
    }

    #[test]
    fn core_plugins_object_form_is_read() {
        let c = parse_core_plugins(
            br#"{"daily-notes": true, "templates": false, "canvas": true, "odd": "yes"}"#,
        )
        .unwrap();
        assert!(c.is_enabled("daily-notes"));
        assert!(c.is_enabled("canvas"));
        assert!(!c.is_enabled("templates"));
        assert!(!c.is_enabled("odd"));
        assert!(!c.is_enabled("never-mentioned"));
        assert_eq!(c.disabled, vec!["templates"]);
    }

    #[test]
    fn core_plugins_old_array_form_is_read() {
        let c = parse_core_plugins(br#"["templates", "file-explorer", "daily-notes", 4]"#).unwrap();
        assert_eq!(c.enabled, vec!["daily-notes", "file-explorer", "templates"]);
        assert!(c.is_enabled("templates"));
        assert!(!c.is_enabled("canvas"));
        assert!(c.disabled.is_empty());
        assert!(matches!(
            parse_core_plugins(b"\"daily-notes\""),
            Err(ConfigError::WrongShape { .. })
        ));
    }

    fn plugins(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn daily_location_prefers_enabled_periodic_notes() {
        let periodic = parse_periodic_notes(PERIODIC_0_0).unwrap();
        let daily = parse_daily_notes(br#"{"folder": "Daily", "format": "DD-MM-YYYY"}"#).unwrap();
        let c = daily_note_location(
            &plugins(&["calendar", "periodic-notes"]),
            Some(&periodic),
            Some(&daily),
        );
        assert_eq!(c.source, DailyNoteSource::PeriodicNotes);
        assert_eq!(c.folder, "Journal");
        assert_eq!(c.format, "YYYY/MM/YYYY-MM-DD");
        assert_eq!(c.template, "T/Daily");
    }

    #[test]
    fn daily_location_ignores_periodic_notes_when_plugin_is_off() {
        let periodic = parse_periodic_notes(PERIODIC_0_0).unwrap();
        let daily = parse_daily_notes(br#"{"folder": "Daily", "format": "DD-MM-YYYY"}"#).unwrap();
        let c = daily_note_location(&plugins(&["calendar"]), Some(&periodic), Some(&daily));
        assert_eq!(c.source, DailyNoteSource::DailyNotes);
        assert_eq!(c.folder, "Daily");
        assert_eq!(c.format, "DD-MM-YYYY");
    }

    #[test]
    fn daily_location_ignores_periodic_notes_when_daily_is_off() {
        let periodic = parse_periodic_notes(
            br#"{"daily": {"enabled": false, "folder": "P"}, "weekly": {"enabled": true}}"#,
        )
        .unwrap();
        let c = daily_note_location(&plugins(&["periodic-notes"]), Some(&periodic), None);
        assert_eq!(c.source, DailyNoteSource::Default);
        assert_eq!(c.folder, "");
        assert_eq!(c.format, "YYYY-MM-DD");
        assert_eq!(c.template, "");
    }

    #[test]
    fn daily_location_trims_folder_and_template() {
        let daily =
            parse_daily_notes(br#"{"folder": "  Daily ", "template": " T/Daily\n"}"#).unwrap();
        let c = daily_note_location(&[], None, Some(&daily));
        assert_eq!(c.folder, "Daily");
        assert_eq!(c.template, "T/Daily");
        assert_eq!(c.format, "YYYY-MM-DD");
        assert_eq!(c.source, DailyNoteSource::DailyNotes);
    }

    #[test]
    fn daily_note_source_serialises_as_the_plugin_id() {
        for (source, text) in [
            (DailyNoteSource::PeriodicNotes, "periodic-notes"),
            (DailyNoteSource::DailyNotes, "daily-notes"),
            (DailyNoteSource::Default, "default"),
        ] {
            assert_eq!(serde_json::to_value(source).unwrap(), text);
        }
        let s = serde_json::to_value(AppSettings::default()).unwrap();
        assert_eq!(s["new_link_format"], "shortest");
        assert_eq!(s["attachment_folder_path"], "/");
    }

    #[test]
    fn excluded_files_are_path_prefixes_or_slash_delimited_regexes() {
        let filters: Vec<String> = [
            "Archive/",
            "Drafts/old.md",
            r"/\.tmp\.md$/",
            "/(/",
            "//",
            "",
        ]
        .map(String::from)
        .to_vec();
        let (f, errors) = IgnoreFilters::new(&filters);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("`/(/`"), "{errors:?}");
        assert!(f.matches("Archive/2020/x.md"));
        assert!(
            !f.matches("archive/x.md"),
            "prefixes are compared as written"
        );
        assert!(!f.matches("Notes/Archive/x.md"));
        assert!(f.matches("Drafts/old.md"));
        assert!(!f.matches("Drafts/new.md"));
        assert!(f.matches("Notes/a.tmp.md"));
        assert!(!f.matches("Notes/a.md"));
        // `//` is a prefix, not an empty regex: no vault path starts with it.
        assert!(!f.matches("x.md"));
        assert!(IgnoreFilters::new(&[]).0.is_empty());
        assert!(!IgnoreFilters::new(&["".to_owned()]).0.matches("x.md"));
    }
}

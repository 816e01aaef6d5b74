//! The config file: `--config FILE`, else `capvault/config.toml` in the user's config folder
//! (`~/.config/capvault/config.toml` on Linux) when it exists. TOML:
//!
//! ```toml
//! tools = "read"                      # a profile or a list, as --tools (the flag wins)
//! exclude = ["Private", "**/*.secret.md"]   # added to every --exclude
//! disabled_tools = ["find_orphans"]
//! show_obsidian_excluded = true       # as --show-obsidian-excluded
//! index_pdfs = true                   # as --index-pdfs
//! semantic = true                     # as --semantic (--embedding-model DIR wins)
//!
//! [tool.search_notes]                 # how one tool is shown
//! name = "work_search"
//! description = "Search my work notes."
//!
//! [[vault]]                           # several vaults in one server (`capvault serve` alone)
//! path = "~/Work"
//! name = "work"                       # what clients pass as `vault` (default: the folder's name)
//! write = true                        # as --write, for this vault only
//! write_scope = ["Inbox"]             # as --write-scope
//! exclude = ["Private"]               # added to the other exclusions
//! tools = "read"                      # this vault's tool profile (wins over --tools)
//! disabled_tools = ["delete_note"]
//! semantic = false                    # as --semantic, for this vault only
//! embedding_model = "~/models/work"   # this vault's own model (wins over --embedding-model)
//!
//! [[vault]]
//! path = "~/Personal"
//! ```
//!
//! Vault folders named on the command line are served instead of the `[[vault]]` tables; a
//! table whose `path` is one of them still gives that vault its settings.
//!
//! A file that does not parse, names an unknown key or an unknown tool, is a startup error
//! naming the file and the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::server::policy::{Override, PolicyError, ToolPolicy};
use crate::vault::host::{Host, HostError};

/// Why the config file cannot be used. Names the file as the user gave it (shown only to them,
/// at startup).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] HostError),
    /// `--config` names a file that does not exist.
    #[error("{path}: no such file")]
    Missing { path: String },
    /// The file does not parse.
    #[error("{path}: {source}")]
    Parse { path: String, source: ParseError },
    /// The file (or the `--tools` flag) names an unknown tool or profile.
    #[error("{0}")]
    Tools(#[from] PolicyError),
}

/// Why a config file's bytes do not parse.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The bytes are not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// Not TOML, or not the config's keys: the message, after the line when it is known.
    #[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Toml {
        line: Option<usize>,
        message: String,
    },
}

/// The config file's contents.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// A tool profile or list, as `--tools` takes.
    pub tools: Option<String>,
    /// Exclusion globs, as `--exclude` takes.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Tools taken away.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// Include Obsidian's Excluded files in results, as `--show-obsidian-excluded`.
    #[serde(default)]
    pub show_obsidian_excluded: bool,
    /// Search the text of the vault's PDFs too, as `--index-pdfs`.
    #[serde(default)]
    pub index_pdfs: bool,
    /// Semantic search with the default model, as `--semantic` (`--embedding-model` wins).
    #[serde(default)]
    pub semantic: bool,
    /// The vault folder whose notes are MCP prompts, as `--prompts-folder`.
    pub prompts_folder: Option<String>,
    /// Offer the built-in prompts (default true; `--no-builtin-prompts` turns them off).
    pub builtin_prompts: Option<bool>,
    /// What clients see of text a reader of the rendered note would not, as `--hidden-text`.
    pub hidden_text: Option<crate::markdown::hidden::Policy>,
    /// Folders whose notes are untrusted, like web clippings (globs, as `--untrusted`).
    #[serde(default)]
    pub untrusted: Vec<String>,
    /// Folders whose notes are shared, written by others (globs, as `--shared`).
    #[serde(default)]
    pub shared: Vec<String>,
    /// Which changes wait for the person's yes, as `--confirm`.
    pub confirm: Option<Confirm>,
    /// Every change must carry `if_match`, as `--require-if-match` (default: over HTTP only).
    pub require_if_match: Option<bool>,
    /// Per-tool name and description overrides, by tool name.
    #[serde(default)]
    pub tool: BTreeMap<String, ToolEntry>,
    /// The vaults to serve, each with its own settings (`[[vault]]` tables).
    #[serde(default)]
    pub vault: Vec<VaultEntry>,
}

/// One `[[vault]]` table: a vault to serve and what differs for it.
#[derive(Debug, Default, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VaultEntry {
    /// The vault folder: absolute, or starting with `~/`.
    pub path: PathBuf,
    /// The name clients pass as `vault` (default: from the folder's name).
    pub name: Option<String>,
    /// Writes on or off for this vault (default: `--write`).
    pub write: Option<bool>,
    /// Folders writes are confined to, added to `--write-scope`.
    #[serde(default)]
    pub write_scope: Vec<String>,
    /// Exclusion globs, added to the others.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// This vault's tool profile or list (wins over `--tools` and the file's `tools`).
    pub tools: Option<String>,
    /// Tools taken away from this vault.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// Semantic search for this vault (default: `--semantic` or the file's `semantic`).
    pub semantic: Option<bool>,
    /// This vault's embedding model folder (absolute or `~/`; turns semantic search on; wins
    /// over `--embedding-model`).
    pub embedding_model: Option<PathBuf>,
}

impl VaultEntry {
    /// The folder as a host path: `~/` expanded; a relative path is refused (relative to what?).
    pub fn folder(&self) -> Result<PathBuf, EntryPathError> {
        host_path("path", &self.path)
    }

    /// The embedding model folder, when the table names one, as a host path.
    pub fn embedding_folder(&self) -> Result<Option<PathBuf>, EntryPathError> {
        self.embedding_model
            .as_deref()
            .map(|p| host_path("embedding_model", p))
            .transpose()
    }
}

/// Why a `[[vault]]` table's path (its `key`: `path` or `embedding_model`) is not a host path.
/// Names the path as the user wrote it (shown only to them, at startup).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryPathError {
    /// `~/...` with no home folder to expand it against.
    #[error("[[vault]] {key} {}: no home folder for this user", path.display())]
    NoHome { key: &'static str, path: PathBuf },
    /// Neither absolute nor `~/...`.
    #[error("[[vault]] {key} {}: give an absolute path or one starting with ~/", path.display())]
    Relative { key: &'static str, path: PathBuf },
}

/// A `[[vault]]` table's path `key` as a host path: `~/` expanded, else absolute.
fn host_path(key: &'static str, path: &Path) -> Result<PathBuf, EntryPathError> {
    if let Ok(rest) = path.strip_prefix("~") {
        return dirs::home_dir()
            .map(|h| h.join(rest))
            .ok_or_else(|| EntryPathError::NoHome {
                key,
                path: path.to_path_buf(),
            });
    }
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(EntryPathError::Relative {
            key,
            path: path.to_path_buf(),
        })
    }
}

/// Which changes wait for the person's yes (`--confirm`, `confirm = "..."`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Confirm {
    /// Nothing waits (the default).
    #[default]
    Off,
    /// Deletes, whole-note replacements, folder moves, tag renames and restores.
    Destructive,
}

/// One `[tool.NAME]` table.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// The name clients see and call.
    pub name: Option<String>,
    /// The description clients see.
    pub description: Option<String>,
    /// Take the tool away.
    #[serde(default)]
    pub disabled: bool,
}

/// The default config file's path, if the user has a config folder.
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("capvault").join("config.toml"))
}

/// Reads the config file: `explicit` (which must exist), else the default path if it exists,
/// else an empty config.
pub fn load(host: &Host, explicit: Option<&Path>) -> Result<Config, ConfigError> {
    let (path, required) = match explicit {
        Some(p) => (p.to_path_buf(), true),
        None => match default_path() {
            Some(p) => (p, false),
            None => return Ok(Config::default()),
        },
    };
    match host.user_config(&path)? {
        Some(bytes) => parse(&bytes).map_err(|source| ConfigError::Parse {
            path: path.display().to_string(),
            source,
        }),
        None if required => Err(ConfigError::Missing {
            path: path.display().to_string(),
        }),
        None => Ok(Config::default()),
    }
}

/// Parses a config file's bytes. The error names the line and column.
pub fn parse(bytes: &[u8]) -> Result<Config, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    toml::from_str(text).map_err(|e| ParseError::Toml {
        line: e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
        message: e.message().to_owned(),
    })
}

impl Config {
    /// The tool policy from `cli_tools` (the `--tools` flag, which wins) or this file's
    /// `tools`, then this file's disabled tools and overrides. `known` is every tool name.
    pub fn policy(
        &self,
        cli_tools: Option<&str>,
        known: &[String],
    ) -> Result<ToolPolicy, ConfigError> {
        let spec = cli_tools.or(self.tools.as_deref()).unwrap_or("all");
        let mut policy = ToolPolicy::from_spec(spec, known)?;
        for t in &self.disabled_tools {
            policy.disable(t, known)?;
        }
        for (tool, entry) in &self.tool {
            if entry.disabled {
                policy.disable(tool, known)?;
            }
            if entry.name.is_some() || entry.description.is_some() {
                policy.set_override(
                    tool,
                    Override {
                        name: entry.name.clone(),
                        description: entry.description.clone(),
                    },
                    known,
                )?;
            }
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        crate::server::CapvaultServer::tool_names()
    }

    #[test]
    fn a_config_file_disables_renames_and_excludes() {
        let c = parse(
            br#"
tools = "read"
exclude = ["Private"]
disabled_tools = ["find_orphans"]
[tool.search_notes]
name = "work_search"
description = "Search my work notes."
[tool.list_tags]
disabled = true
"#,
        )
        .unwrap();
        assert_eq!(c.exclude, ["Private"]);
        let p = c.policy(None, &known()).unwrap();
        assert!(!p.allows("find_orphans") && !p.allows("list_tags") && p.allows("read_note"));
        let p = c.policy(Some("minimal"), &known()).unwrap();
        assert!(
            !p.allows("vault_info"),
            "the flag wins over the file's profile"
        );
    }

    #[test]
    fn index_pdfs_is_off_unless_the_file_turns_it_on() {
        assert!(!parse(b"tools = \"read\"\n").unwrap().index_pdfs);
        assert!(parse(b"index_pdfs = true\n").unwrap().index_pdfs);
        let e = parse(b"index_pdfs = \"yes\"\n").unwrap_err().to_string();
        assert!(e.starts_with("line 1"), "{e}");
    }

    #[test]
    #[cfg(unix)] // `/srv/notes` is absolute on Unix only
    fn vault_tables_give_each_vault_its_settings() {
        let c = parse(
            br#"
[[vault]]
path = "~/Work"
name = "work"
write = true
write_scope = ["Inbox"]
tools = "read"
[[vault]]
path = "/srv/notes"
"#,
        )
        .unwrap();
        assert_eq!(c.vault.len(), 2);
        assert_eq!(c.vault[0].name.as_deref(), Some("work"));
        assert_eq!(c.vault[0].write, Some(true));
        assert_eq!(c.vault[1].write, None);
        assert_eq!(
            c.vault[1].folder().unwrap(),
            std::path::PathBuf::from("/srv/notes")
        );
        if let Some(home) = dirs::home_dir() {
            assert_eq!(c.vault[0].folder().unwrap(), home.join("Work"));
        }
        let e = parse(b"[[vault]]\npath = \"rel\"\n").unwrap().vault[0]
            .folder()
            .unwrap_err();
        assert_eq!(
            e,
            EntryPathError::Relative {
                key: "path",
                path: "rel".into()
            }
        );
        assert!(e.to_string().contains("absolute"), "{e}");
        let e = parse(b"[[vault]]\npath = \"/x\"\ncolour = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 3") && e.contains("colour"), "{e}");
    }

    #[test]
    fn a_bad_file_names_the_line() {
        let e = parse(b"tools = \"read\"\nexclude = [\"a\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2"), "{e}");
        let e = parse(b"\n\ncolour = 1\n").unwrap_err().to_string();
        assert!(e.starts_with("line 3") && e.contains("colour"), "{e}");
        let c = parse(b"disabled_tools = [\"rm_rf\"]\n").unwrap();
        let e = c.policy(None, &known()).unwrap_err().to_string();
        assert!(e.contains("unknown tool `rm_rf`"), "{e}");
    }
}

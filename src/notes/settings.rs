//! The vault's Obsidian settings, read from its config folder through the capability layer and
//! parsed by [`crate::obsidian::config`]. A missing file means Obsidian's defaults; a file that
//! cannot be read or parsed is reported (by its vault-relative name) and defaults are used.

use serde::Serialize;

use crate::obsidian::config::{
    self, AppSettings, CorePlugins, DailyNoteConfig, DailyNotesSettings, PeriodicNotesSettings,
    TemplatesSettings,
};
use crate::obsidian::dataview::query::DataviewSettings;
use crate::obsidian::tasks::TasksSettings;
use crate::vault::{ConfigFile, Vault};

/// Everything capvault reads from `.obsidian`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VaultSettings {
    /// `app.json` (defaults when absent).
    pub app: AppSettings,
    /// Where daily notes are, after choosing between Periodic Notes and Daily notes.
    pub daily_notes: DailyNoteConfig,
    /// `templates.json`, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<TemplatesSettings>,
    /// `plugins/periodic-notes/data.json`, when present and the plugin is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periodic_notes: Option<PeriodicNotesSettings>,
    /// Enabled community plugins.
    pub community_plugins: Vec<String>,
    /// `types.json`: property name to type (`number`, `date`...), as Bases reads values.
    #[serde(skip)]
    #[schemars(skip)]
    pub property_types: std::collections::BTreeMap<String, String>,
    /// Settings files that exist but could not be read or parsed, with why.
    pub errors: Vec<String>,
}

fn load<T>(
    vault: &Vault,
    file: ConfigFile,
    parse: impl Fn(&[u8]) -> Result<T, config::ConfigError>,
    errors: &mut Vec<String>,
) -> Option<T> {
    let name = format!("{}/{}", vault.config_dir(), file.relative_path());
    match vault.read_config(file) {
        Ok(Some(bytes)) => match parse(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                errors.push(format!("{name}: {e}"));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    }
}

/// Reads and parses every settings file capvault uses.
pub fn load_settings(vault: &Vault) -> VaultSettings {
    let mut errors = Vec::new();
    let app = load(vault, ConfigFile::App, config::parse_app, &mut errors).unwrap_or_default();
    let community_plugins = load(
        vault,
        ConfigFile::CommunityPlugins,
        config::parse_enabled_plugins,
        &mut errors,
    )
    .unwrap_or_default();
    let _core: Option<CorePlugins> = load(
        vault,
        ConfigFile::CorePlugins,
        config::parse_core_plugins,
        &mut errors,
    );
    let daily: Option<DailyNotesSettings> = load(
        vault,
        ConfigFile::DailyNotes,
        config::parse_daily_notes,
        &mut errors,
    );
    let periodic: Option<PeriodicNotesSettings> =
        if community_plugins.iter().any(|p| p == "periodic-notes") {
            load(
                vault,
                ConfigFile::PeriodicNotes,
                config::parse_periodic_notes,
                &mut errors,
            )
        } else {
            None
        };
    let templates = load(
        vault,
        ConfigFile::Templates,
        config::parse_templates,
        &mut errors,
    );
    let property_types =
        load(vault, ConfigFile::Types, config::parse_types, &mut errors).unwrap_or_default();
    let daily_notes =
        config::daily_note_location(&community_plugins, periodic.as_ref(), daily.as_ref());
    VaultSettings {
        app,
        daily_notes,
        templates,
        periodic_notes: periodic,
        community_plugins,
        property_types,
        errors,
    }
}

/// The vault's Dataview settings (defaults when the plugin's file is missing or unreadable).
pub fn dataview_settings(vault: &Vault) -> DataviewSettings {
    match vault.read_config(ConfigFile::Dataview) {
        Ok(Some(bytes)) => DataviewSettings::from_json(&bytes).unwrap_or_default(),
        _ => DataviewSettings::default(),
    }
}

/// The vault's Tasks settings (defaults when the plugin's file is missing or unreadable).
pub fn tasks_settings(vault: &Vault) -> TasksSettings {
    match vault.read_config(ConfigFile::Tasks) {
        Ok(Some(bytes)) => TasksSettings::from_json(&bytes).unwrap_or_default(),
        _ => TasksSettings::default(),
    }
}

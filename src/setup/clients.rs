//! The MCP clients `capvault install` knows: where each keeps its config file on each platform,
//! in which format, under which key, and the entry it expects.

use std::path::PathBuf;

/// An operating system's conventions for config folders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// Linux and other Unix desktops (XDG).
    Linux,
    /// macOS.
    MacOs,
    /// Windows.
    Windows,
}

impl Platform {
    /// The platform this binary runs on.
    pub fn current() -> Platform {
        if cfg!(target_os = "macos") {
            Platform::MacOs
        } else if cfg!(windows) {
            Platform::Windows
        } else {
            Platform::Linux
        }
    }
}

/// The folders a config path is built from.
#[derive(Debug, Clone)]
pub struct Home {
    /// The user's home folder.
    pub home: PathBuf,
    /// `%APPDATA%` (Windows), when set.
    pub appdata: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (Linux), when set.
    pub xdg_config: Option<PathBuf>,
}

impl Home {
    /// From the environment (`HOME`, or `USERPROFILE` on Windows; `APPDATA`; `XDG_CONFIG_HOME`).
    pub fn from_env() -> Option<Home> {
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .map(PathBuf::from)?;
        Some(Home {
            home,
            appdata: std::env::var_os("APPDATA").map(PathBuf::from),
            xdg_config: std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
        })
    }

    fn config(&self, p: Platform) -> PathBuf {
        match p {
            Platform::Linux => self
                .xdg_config
                .clone()
                .unwrap_or_else(|| self.home.join(".config")),
            Platform::MacOs => self.home.join("Library/Application Support"),
            Platform::Windows => self
                .appdata
                .clone()
                .unwrap_or_else(|| self.home.join("AppData").join("Roaming")),
        }
    }
}

/// How a client's file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (comments allowed where the client allows them), servers under `key`.
    Json {
        /// The object holding the servers by name.
        key: &'static str,
        /// The entry carries `"type": "stdio"`.
        typed: bool,
    },
    /// TOML, servers as `[key.NAME]` tables.
    Toml {
        /// The table holding the servers by name.
        key: &'static str,
    },
}

/// One client.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    /// The name on the command line.
    pub id: &'static str,
    /// Its display name.
    pub name: &'static str,
    /// How its file is written.
    pub format: Format,
    /// Its own command that does the same, if it has one (`{name}`, `{bin}`, `{args}`).
    pub own_command: Option<&'static str>,
    /// Whether it must be restarted to see a new server.
    pub restart: bool,
}

/// Every client, in the order `--list` shows them.
pub const CLIENTS: &[Client] = &[
    Client {
        id: "claude-desktop",
        name: "Claude Desktop",
        format: Format::Json {
            key: "mcpServers",
            typed: false,
        },
        own_command: None,
        restart: true,
    },
    Client {
        id: "claude-code",
        name: "Claude Code",
        format: Format::Json {
            key: "mcpServers",
            typed: true,
        },
        own_command: Some("claude mcp add --scope user {name} -- {bin} {args}"),
        restart: false,
    },
    Client {
        id: "cursor",
        name: "Cursor",
        format: Format::Json {
            key: "mcpServers",
            typed: false,
        },
        own_command: None,
        restart: false,
    },
    Client {
        id: "vscode",
        name: "VS Code",
        format: Format::Json {
            key: "servers",
            typed: true,
        },
        own_command: Some("code --add-mcp '{json}'"),
        restart: false,
    },
    Client {
        id: "windsurf",
        name: "Windsurf",
        format: Format::Json {
            key: "mcpServers",
            typed: false,
        },
        own_command: None,
        restart: false,
    },
    Client {
        id: "zed",
        name: "Zed",
        format: Format::Json {
            key: "context_servers",
            typed: false,
        },
        own_command: None,
        restart: false,
    },
    Client {
        id: "codex",
        name: "Codex CLI",
        format: Format::Toml { key: "mcp_servers" },
        own_command: Some("codex mcp add {name} -- {bin} {args}"),
        restart: false,
    },
    Client {
        id: "gemini",
        name: "Gemini CLI",
        format: Format::Json {
            key: "mcpServers",
            typed: false,
        },
        own_command: Some("gemini mcp add --scope user {name} {bin} {args}"),
        restart: false,
    },
];

/// The client called `id`.
pub fn client(id: &str) -> Result<&'static Client, super::SetupError> {
    CLIENTS
        .iter()
        .find(|c| c.id == id)
        .ok_or_else(|| super::SetupError::UnknownClient {
            id: id.to_owned(),
            known: CLIENTS.iter().map(|c| c.id).collect::<Vec<_>>().join(", "),
        })
}

impl Client {
    /// Where this client keeps its user-level MCP config on `platform`.
    pub fn config_path(&self, platform: Platform, home: &Home) -> PathBuf {
        let h = &home.home;
        match (self.id, platform) {
            ("claude-desktop", p) => home.config(p).join("Claude/claude_desktop_config.json"),
            ("claude-code", _) => h.join(".claude.json"),
            ("cursor", _) => h.join(".cursor/mcp.json"),
            ("vscode", p) => home.config(p).join("Code/User/mcp.json"),
            ("windsurf", _) => h.join(".codeium/windsurf/mcp_config.json"),
            ("zed", Platform::Windows) => home.config(Platform::Windows).join("Zed/settings.json"),
            ("zed", _) => h.join(".config/zed/settings.json"),
            ("codex", _) => h.join(".codex/config.toml"),
            ("gemini", _) => h.join(".gemini/settings.json"),
            _ => h.join(format!(".{}.json", self.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_has_its_documented_path_on_every_platform() {
        let home = Home {
            home: PathBuf::from("/h"),
            appdata: Some(PathBuf::from("C:/Users/u/AppData/Roaming")),
            xdg_config: None,
        };
        let path = |id: &str, p| client(id).unwrap().config_path(p, &home);
        assert_eq!(
            path("claude-desktop", Platform::MacOs),
            PathBuf::from("/h/Library/Application Support/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path("claude-desktop", Platform::Windows),
            PathBuf::from("C:/Users/u/AppData/Roaming/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path("claude-desktop", Platform::Linux),
            PathBuf::from("/h/.config/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path("cursor", Platform::Linux),
            PathBuf::from("/h/.cursor/mcp.json")
        );
        assert_eq!(
            path("vscode", Platform::MacOs),
            PathBuf::from("/h/Library/Application Support/Code/User/mcp.json")
        );
        assert_eq!(
            path("codex", Platform::Windows),
            PathBuf::from("/h/.codex/config.toml")
        );
        assert_eq!(
            path("zed", Platform::Windows),
            PathBuf::from("C:/Users/u/AppData/Roaming/Zed/settings.json")
        );
        assert!(
            client("nope")
                .unwrap_err()
                .to_string()
                .contains("claude-desktop")
        );
        let xdg = Home {
            xdg_config: Some(PathBuf::from("/x")),
            ..home
        };
        assert_eq!(
            client("vscode").unwrap().config_path(Platform::Linux, &xdg),
            PathBuf::from("/x/Code/User/mcp.json")
        );
    }
}

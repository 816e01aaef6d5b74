//! `capvault bundle --out capvault.mcpb`: an MCP bundle (the `.mcpb` format: a zip holding
//! `manifest.json` and the server) that Claude Desktop installs with a double click. The
//! manifest (version 0.3 of the format) runs this very binary, with the vault folder and the write
//! switch as settings the user fills in when installing.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use super::SetupError;
use crate::server::CapvaultServer;
use crate::vault::host::Host;

/// Where the binary sits inside the bundle.
pub const ENTRY_POINT: &str = "server/capvault";
/// Largest binary bundled.
const MAX_BINARY_BYTES: u64 = 512 * 1024 * 1024;

/// The manifest of a bundle of this version of capvault, for `platform` (`darwin`, `win32`,
/// `linux`).
pub fn manifest(platform: &str) -> Value {
    let tools: Vec<Value> = CapvaultServer::tool_catalog()
        .into_iter()
        .map(|(name, description)| json!({"name": name, "description": description}))
        .collect();
    json!({
        "manifest_version": "0.3",
        "name": "capvault",
        "display_name": "capvault (Obsidian vault)",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Search, read and (if you allow it) edit one Obsidian vault, and nothing else on your machine.",
        "long_description": "capvault serves one Obsidian vault over MCP. Every file access goes through one directory handle opened on the vault, so paths and symlinks that leave it fail in the kernel. Ranked full-text search, links, backlinks, tags, daily and other periodic notes and canvases, read the way Obsidian reads them. Changes are off unless you turn them on; then every change is checked against the version read, kept in a history you can restore from, and logged.",
        "author": {"name": "capvault contributors"},
        "license": env!("CARGO_PKG_LICENSE"),
        "keywords": ["obsidian", "notes", "markdown", "search"],
        "server": {
            "type": "binary",
            "entry_point": ENTRY_POINT,
            "mcp_config": {
                "command": format!("${{__dirname}}/{ENTRY_POINT}"),
                "args": ["serve", "${user_config.vault}"],
                "env": {"CAPVAULT_WRITE": "${user_config.allow_writes}"}
            }
        },
        "tools": tools,
        "compatibility": {"platforms": [platform]},
        "user_config": {
            "vault": {
                "type": "directory",
                "title": "Vault folder",
                "description": "The Obsidian vault to serve (the folder that holds .obsidian).",
                "required": true
            },
            "allow_writes": {
                "type": "boolean",
                "title": "Allow changes",
                "description": "Let Claude create, edit, move and delete notes (every change is versioned and can be undone).",
                "default": false
            }
        }
    })
}

/// The platform name the manifest format uses for this build.
pub fn this_platform() -> &'static str {
    if cfg!(target_os = "macos") {
        "darwin"
    } else if cfg!(windows) {
        "win32"
    } else {
        "linux"
    }
}

/// The note `capvault bundle` prints on a platform Claude Desktop does not run on.
pub fn platform_note(platform: &str) -> Option<String> {
    (platform != "darwin" && platform != "win32").then(|| {
        format!(
            "note: Claude Desktop runs on macOS and Windows; this bundle holds the capvault binary \
             of the platform it was built on ({platform}), so it installs only where that binary \
             runs. Build the bundle on a Mac or a Windows machine for Claude Desktop there."
        )
    })
}

/// Builds the bundle at `out` from this binary, compressed at `level` (0 stores, 1 to 9
/// deflate; 9, the smallest, is the default).
pub fn build(
    host: &Host,
    out_path: &Path,
    level: u8,
    out: &mut dyn Write,
) -> Result<(), SetupError> {
    let exe = std::env::current_exe().map_err(SetupError::NoBinary)?;
    let binary = host
        .file(&exe)?
        .read_up_to(MAX_BINARY_BYTES)?
        .ok_or(SetupError::BinaryUnreadable)?;
    let manifest = manifest(this_platform());
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = if level == 0 {
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)
    } else {
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(i64::from(level.min(9))))
    };
    zip.start_file("manifest.json", options.unix_permissions(0o644))?;
    let text = serde_json::to_string_pretty(&manifest)?;
    zip.write_all(text.as_bytes())?;
    zip.start_file(ENTRY_POINT, options.unix_permissions(0o755))?;
    zip.write_all(&binary)?;
    let bytes = zip.finish()?.into_inner();
    let mut file = host.file(out_path)?;
    file.replace(&bytes, None)?;
    writeln!(
        out,
        "wrote {} ({:.1} MB): open it with Claude Desktop to install capvault",
        out_path.display(),
        bytes.len() as f64 / 1e6
    )?;
    if let Some(note) = platform_note(this_platform()) {
        writeln!(out, "{note}")?;
    }
    if cfg!(debug_assertions) {
        writeln!(
            out,
            "note: the bundle holds this unoptimised debug build, many times slower and larger; \
             for one to install, run `cargo build --release` and bundle with \
             target/release/capvault"
        )?;
    }
    Ok(())
}

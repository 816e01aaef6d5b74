//! The tools a server offers: their routers, built once per process, and the names clients call.

use std::sync::LazyLock;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::Tool;

use super::{CapvaultServer, Grant};

/// The tool routers, built once per process. Building one makes every tool's input schema
/// (schemars on a thread's first build, a copy of each schema on every build after it: rmcp
/// caches schemas per thread), which the start did twice before its first answer (the tool
/// policy's names, then the session) and each HTTP session again. A route's schema is an
/// `Arc`, so a copy of a router costs a few allocations.
pub(super) struct Routers {
    pub(super) read: ToolRouter<CapvaultServer>,
    pub(super) semantic: ToolRouter<CapvaultServer>,
    pub(super) write: ToolRouter<CapvaultServer>,
}

pub(super) static ROUTERS: LazyLock<Routers> = LazyLock::new(|| Routers {
    read: CapvaultServer::all_tools(),
    semantic: CapvaultServer::semantic_router(),
    write: CapvaultServer::write_router(),
});

impl CapvaultServer {
    fn all_tools() -> ToolRouter<Self> {
        Self::tool_router()
            + Self::knowledge_router()
            + Self::vault_router()
            + Self::base_router()
            + Self::task_router()
    }

    /// Every tool in the code, read and write.
    fn every_tool() -> ToolRouter<Self> {
        ROUTERS.read.clone() + ROUTERS.semantic.clone() + ROUTERS.write.clone()
    }

    /// The names of the reading tools, sorted: those served without `--write` (the write
    /// router holds the rest, `note_history` among them). The `read` profile, and all a
    /// read-only credential may call.
    pub fn read_tool_names() -> Vec<String> {
        (ROUTERS.read.clone() + ROUTERS.semantic.clone())
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// The names of every tool in the code, sorted (what `--tools` and the config file name).
    pub fn tool_names() -> Vec<String> {
        Self::every_tool()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Every tool in the code, read and write, with its description (sorted by name).
    pub fn tool_catalog() -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = Self::every_tool()
            .list_all()
            .into_iter()
            .map(|t| {
                let d = t.description.as_deref().unwrap_or_default();
                // The first sentence: what a bundle's tool list shows.
                let first = d.split(". ").next().unwrap_or(d).trim_end_matches('.');
                (t.name.to_string(), format!("{first}."))
            })
            .collect();
        all.sort();
        all
    }

    /// The name in the code of the tool clients call `listed` (`None`: no such tool here).
    pub fn internal_tool_name(&self, listed: &str) -> Option<&str> {
        self.tools.names.get(listed).map(String::as_str)
    }

    /// The tools `grant` lets this request see (all of them without a grant).
    pub(super) fn tools_for(&self, grant: Option<&Grant>) -> Vec<Tool> {
        match grant {
            None => self.tools.listed.clone(),
            Some(g) => self
                .tools
                .listed
                .iter()
                .filter(|t| {
                    self.internal_tool_name(&t.name)
                        .is_some_and(|i| g.allows(i))
                })
                .cloned()
                .collect(),
        }
    }

    /// The name clients call `internal` by.
    pub(super) fn public_name<'a>(&'a self, internal: &'a str) -> &'a str {
        self.tools
            .names
            .iter()
            .find(|(_, v)| v.as_str() == internal)
            .map_or(internal, |(k, _)| k.as_str())
    }
}

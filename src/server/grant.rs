//! What one request's credential allows. Over stdio there is none: the client gets every tool
//! the server lists. Over HTTP the transport authenticates each request and puts a [`Grant`]
//! in the request's extensions; `tools/list` then shows only the tools it allows and
//! `tools/call` refuses the others, whatever session the request arrived on.

use std::collections::BTreeSet;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::policy::read_tools;

/// A credential's rights: read or read-write, optionally narrowed to some tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// A short, stable name for the credential, for logs (never the secret itself).
    pub id: String,
    /// May call the write tools (those outside [`read_tools`]).
    pub write: bool,
    /// Only these tools (names in the code), when set.
    pub tools: Option<Arc<BTreeSet<String>>>,
    /// Only these vaults (by name), when set: a server of several vaults shows and serves it
    /// no other (a token file's `vaults=`).
    pub vaults: Option<Arc<BTreeSet<String>>>,
}

impl Grant {
    /// Everything the server lists (a loopback listener with no tokens configured).
    pub fn full(id: impl Into<String>) -> Self {
        Grant {
            id: id.into(),
            write: true,
            tools: None,
            vaults: None,
        }
    }

    /// True when the vault named `name` may be used with this grant.
    pub fn allows_vault(&self, name: &str) -> bool {
        self.vaults.as_ref().is_none_or(|v| v.contains(name))
    }

    /// True when `tool` (its name in the code) may be listed and called. A tool that is not a
    /// known reading tool counts as a write tool: a new tool is refused to read-only
    /// credentials unless its annotations say it only reads ([`read_tools`]).
    pub fn allows(&self, tool: &str) -> bool {
        (self.write || is_read_tool(tool)) && self.tools.as_ref().is_none_or(|t| t.contains(tool))
    }

    /// The scope this grant lacks to call `tool`, for an `insufficient_scope` reply: `write`
    /// for a write tool under a read-only grant, `None` when only the tool profile refuses it.
    pub fn missing_scope(&self, tool: &str) -> Option<&'static str> {
        (!self.write && !is_read_tool(tool)).then_some("write")
    }

    /// The scope name: `read` or `write`.
    pub fn scope(&self) -> &'static str {
        if self.write { "write" } else { "read" }
    }

    /// The grant the transport attached to this request, if any.
    #[cfg(feature = "http")]
    pub fn of(context: &RequestContext<RoleServer>) -> Option<&Grant> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Grant>())
    }

    /// The grant the transport attached to this request: none without the HTTP transport.
    #[cfg(not(feature = "http"))]
    pub fn of(_context: &RequestContext<RoleServer>) -> Option<&Grant> {
        None
    }
}

/// True for the reading tools (the `read` profile).
pub fn is_read_tool(tool: &str) -> bool {
    read_tools().contains(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_grant_refuses_write_tools_and_unknown_tools() {
        let g = Grant {
            id: "t".into(),
            write: false,
            tools: None,
            vaults: None,
        };
        assert!(g.allows("read_note"));
        assert!(g.allows("related_notes"));
        assert!(!g.allows("edit_note"));
        // Only reads, but only with --write: past versions are not for read-only credentials.
        assert!(!g.allows("note_history"));
        assert!(!g.allows("a_tool_added_later"));
        assert_eq!(g.missing_scope("edit_note"), Some("write"));
        assert_eq!(g.missing_scope("read_note"), None);
    }

    #[test]
    fn tool_profile_narrows_a_write_grant() {
        let g = Grant {
            id: "t".into(),
            write: true,
            tools: Some(Arc::new(["read_note".to_owned()].into_iter().collect())),
            vaults: None,
        };
        assert!(g.allows("read_note"));
        assert!(!g.allows("search_notes"));
        assert!(!g.allows("edit_note"));
        assert_eq!(g.missing_scope("search_notes"), None);
    }
}

//! Notes as MCP resources: `capvault:///<path>`, paged in path order.
//!
//! A URI is the prefix followed by the vault path, percent-encoded per RFC 3986 (so spaces and
//! `#` survive a round trip). Reading decodes the percent-escapes once and then applies exactly
//! the rules of a tool's `path` argument: `capvault:///%2e%2e/x` decodes to `../x` and is refused.
//!
//! One vault's `resources/list`, `resources/templates/list` and `resources/read` are answered
//! here, when the tool profile and the request's grant allow reading notes.

use std::ops::ControlFlow;
use std::sync::Arc;

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use rmcp::model::{PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::call::actor_key;
use super::{CapvaultServer, Grant};
use crate::notes::{NoteError, cursor, read_note};
use crate::vault::{PathError, Vault, VaultError, VaultPath, is_note_name};

/// Every note resource URI starts with this.
pub const URI_PREFIX: &str = "capvault:///";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 200;
const MIME: &str = "text/markdown";

/// Characters escaped in a URI path (everything but unreserved characters, `/` and a few
/// harmless sub-delimiters; all non-ASCII is escaped as UTF-8).
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// The resource URI of a note.
pub fn uri_for(path: &VaultPath) -> String {
    format!(
        "{URI_PREFIX}{}",
        utf8_percent_encode(path.as_str(), PATH_ESCAPES)
    )
}

/// Why a resource URI names no vault path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    /// Not a `capvault:///` URI.
    #[error(
        "unknown resource URI: note URIs look like `{}folder/Note.md`",
        URI_PREFIX
    )]
    Unknown,
    /// Its percent-escapes decode to bytes that are not UTF-8.
    #[error("invalid resource URI: its percent-escapes are not UTF-8")]
    NotUtf8,
    /// The decoded path breaks the rules of a tool's `path` argument.
    #[error("invalid path: {0}")]
    Path(PathError),
}

/// The vault path a resource URI names, under the same rules as a tool's `path` argument.
///
/// ```
/// use capvault::server::{path_from_uri, uri_for};
/// use capvault::vault::VaultPath;
///
/// let p = VaultPath::parse("Daily/2026-11-30 notes.md").unwrap();
/// assert_eq!(uri_for(&p), "capvault:///Daily/2026-11-30%20notes.md");
/// assert_eq!(path_from_uri(&uri_for(&p)), Ok(p));
/// assert!(path_from_uri("capvault:///%2e%2e/secret.md").is_err());
/// ```
pub fn path_from_uri(uri: &str) -> Result<VaultPath, UriError> {
    let rest = uri.strip_prefix(URI_PREFIX).ok_or(UriError::Unknown)?;
    let decoded = percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| UriError::NotUtf8)?;
    VaultPath::parse(&decoded).map_err(UriError::Path)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ResourceCursor {
    /// The last path returned.
    p: String,
}

/// One page of note resources.
pub(super) fn list(vault: &Vault, cursor: Option<&str>) -> Result<ListResourcesResult, ErrorData> {
    let after = match cursor {
        Some(c) => Some(
            cursor::decode::<ResourceCursor>(c)
                .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?
                .p,
        ),
        None => None,
    };
    let mut page: Vec<Resource> = Vec::new();
    let mut more = false;
    // Scans visit paths in component-wise lexicographic order, which is the paging order.
    vault
        .walk(&VaultPath::root(), true, &is_note_name, &mut |entry| {
            if let Some(after) = &after
                && entry.path.components().cmp(after.split('/')) != std::cmp::Ordering::Greater
            {
                return ControlFlow::Continue(());
            }
            if page.len() == PAGE_SIZE {
                more = true;
                return ControlFlow::Break(());
            }
            let mut resource = Resource::new(uri_for(&entry.path), entry.path.as_str())
                .with_title(entry.path.stem())
                .with_mime_type(MIME);
            if let Ok(meta) = entry.meta(vault) {
                resource = resource.with_size(meta.size);
            }
            page.push(resource);
            ControlFlow::Continue(())
        })
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let next_cursor = if more {
        page.last()
            .map(|r| cursor::encode(&ResourceCursor { p: r.name.clone() }))
    } else {
        None
    };
    let mut result = ListResourcesResult::with_all_items(page);
    result.next_cursor = next_cursor;
    Ok(result)
}

/// The resource template for notes.
pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{URI_PREFIX}{{+path}}"), "note")
            .with_title("Note by path")
            .with_description(
                "A note of the vault by its path relative to the vault root, e.g. \
                 `capvault:///Projects/Plan.md`.",
            )
            .with_mime_type(MIME),
    ])
}

/// Reads one note resource, its hidden text shown, marked or stripped as the server's
/// `--hidden-text` says. Its `_meta` says what the note hides (`capvault/hidden`, as
/// `read_note`'s `hidden`) and where a clipping or shared note came from
/// (`capvault/provenance`).
pub(super) fn read(
    engine: &crate::engine::Engine,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let vault = engine.vault();
    let hidden_text = engine.options().hidden_text;
    // Errors name the resource asked for in their data, as SEP-2164 asks (the client's own
    // string, when it is of a sensible length).
    let data = (uri.len() <= 2048).then(|| serde_json::json!({ "uri": uri }));
    let path =
        path_from_uri(uri).map_err(|e| ErrorData::invalid_params(e.to_string(), data.clone()))?;
    match read_note(vault, &path) {
        Ok(note) => {
            let spans = crate::markdown::hidden_spans(&note.content);
            let text = crate::markdown::hidden::apply(
                &note.content,
                0..note.content.len(),
                &spans,
                hidden_text,
            );
            let mut meta = rmcp::model::JsonObject::new();
            if let Some(h) = crate::markdown::hidden::Hidden::of(&note.content, &spans)
                && let Ok(v) = serde_json::to_value(h)
            {
                meta.insert("capvault/hidden".to_owned(), v);
            }
            let provenance = engine.provenance_now(&path);
            if !provenance.is_own()
                && let Ok(v) = serde_json::to_value(provenance)
            {
                meta.insert("capvault/provenance".to_owned(), v);
            }
            let mut contents = ResourceContents::text(text, uri_for(&path)).with_mime_type(MIME);
            if !meta.is_empty()
                && let ResourceContents::TextResourceContents { meta: m, .. } = &mut contents
            {
                *m = Some(rmcp::model::MetaObject(meta));
            }
            Ok(ReadResourceResult::new(vec![contents]))
        }
        Err(NoteError::Vault(VaultError::NotFound(p))) => Err(ErrorData::resource_not_found(
            format!("{p}: not found"),
            data,
        )),
        Err(e) => Err(ErrorData::invalid_params(e.to_string(), data)),
    }
}

impl CapvaultServer {
    /// Refuses a resource request when the tool profile or the request's grant does not allow
    /// reading notes.
    pub(super) fn check_resource_grant(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.resources {
            return Err(ErrorData::invalid_request(
                "refused: this server's tool profile leaves out read_note, so notes are not \
                 served as resources",
                None,
            ));
        }
        match Grant::of(context) {
            Some(g) if !g.allows("read_note") => Err(ErrorData::invalid_request(
                "refused: this credential may not read notes",
                None,
            )),
            _ => Ok(()),
        }
    }

    pub(super) async fn one_list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.check_resource_grant(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        let vault = Arc::clone(&self.vault);
        tokio::task::spawn_blocking(move || list(&vault, cursor.as_deref()))
            .await
            .map_err(|_| ErrorData::internal_error("the listing was aborted", None))?
    }

    pub(super) async fn one_list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(if self.resources {
            templates()
        } else {
            ListResourceTemplatesResult::with_all_items(Vec::new())
        })
    }

    pub(super) async fn one_read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.check_resource_grant(&context)?;
        let engine = Arc::clone(&self.engine);
        let uri = request.uri;
        let read = self.writer.as_ref().map(|w| {
            let actor = self.actor(&context);
            (Arc::clone(w), actor_key(&actor), uri.clone())
        });
        let result = tokio::task::spawn_blocking(move || super::resources::read(&engine, &uri))
            .await
            .map_err(|_| ErrorData::internal_error("the read was aborted", None))??;
        // A note read as a resource counts as read before a change, as read_note does.
        if let Some((writer, who, uri)) = read
            && let Ok(path) = path_from_uri(&uri)
        {
            writer.reads().record(&who, path.as_str());
        }
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_odd_names() {
        for p in [
            "a b/c#d.md",
            "100%.md",
            "日本/語.md",
            "x?y=[1].md",
            "%2e%2e.md",
        ] {
            let path = VaultPath::parse(p).unwrap();
            let uri = uri_for(&path);
            assert!(!uri[URI_PREFIX.len()..].contains([' ', '#', '?']), "{uri}");
            assert_eq!(path_from_uri(&uri).unwrap(), path);
        }
    }

    #[test]
    fn uris_get_the_tool_path_rules_after_decoding() {
        for bad in [
            "capvault:///%2e%2e/secret.md",
            "capvault:///../secret.md",
            "capvault:////etc/passwd",
            "capvault:///%2Fetc%2Fpasswd",
            "capvault:///.obsidian/app.json",
            "capvault:///%2Eobsidian/app.json",
            "capvault:///a%00b.md",
            "capvault:///a%5C..%5Cb.md",
            "capvault:///%ff.md",
            "file:///etc/passwd",
            "capvault:///",
        ] {
            assert!(path_from_uri(bad).is_err(), "{bad} accepted");
        }
    }
}

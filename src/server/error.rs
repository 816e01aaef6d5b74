//! [`ToolError`]: the one error type at the tool edge.
//!
//! Every tool failure is an `isError` result whose text reads `<code>: <message>` and whose
//! `_meta` carries `{"capvault/error": {"code", "message", "param"?, "suggestions"?,
//! "current_sha256"?}}`, so a model reads the sentence and a client acts on the code (and, for
//! `invalid_argument`, on `param`: the argument to change, named as the input schema names it).
//! Not `structuredContent`: the TypeScript SDK validates that against the tool's output schema
//! even on an error result, and fails the call. Messages name only vault-relative paths (they
//! are built from [`VaultError`] and [`NoteError`], which hold nothing else). JSON-RPC errors
//! stay for protocol faults.

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde::Serialize;

use crate::notes::NoteError;
use crate::vault::{PathError, VaultError};

/// The `_meta` key of an error result's structured form.
pub const META_KEY: &str = "capvault/error";

/// The stable code of a tool error. Documented in docs/tools-in-depth.md (its table of codes); never
/// renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Code {
    /// An argument is missing, malformed or out of range (the message names it).
    InvalidArgument,
    /// Nothing at that path or by that name (see `suggestions`).
    NotFound,
    /// A bare name matches several notes (see `suggestions`).
    Ambiguous,
    /// The path is hidden, excluded, outside the vault, a special file, or the tool is disabled.
    Refused,
    /// The file is over a size limit.
    TooLarge,
    /// The file is not valid UTF-8 text.
    NotUtf8,
    /// The vault model is not built yet; retry shortly.
    NotReady,
    /// The note changed since the version the client gave (`current_sha256` is the new one).
    Conflict,
    /// The operating system failed or the server is shutting down; retry.
    Unavailable,
    /// The change waits for the person's yes (`--confirm destructive`), and this client cannot
    /// ask them: the message says what the person can do.
    ConfirmationRequired,
    /// The person said no to the change (or dismissed the question): nothing changed.
    Declined,
    /// A `changes_since` cursor older than the change log keeps: the message names the oldest
    /// cursor kept.
    CursorExpired,
    /// The request went past its budget of steps, time or bytes (the message names the
    /// bound); a narrower query may succeed.
    BudgetExceeded,
    /// The server's memory for queries and images is in use by other requests; retry shortly.
    Busy,
    /// A bug in capvault.
    Internal,
}

impl Code {
    /// The code as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "invalid_argument",
            Code::NotFound => "not_found",
            Code::Ambiguous => "ambiguous",
            Code::Refused => "refused",
            Code::TooLarge => "too_large",
            Code::NotUtf8 => "not_utf8",
            Code::NotReady => "not_ready",
            Code::Conflict => "conflict",
            Code::Unavailable => "unavailable",
            Code::ConfirmationRequired => "confirmation_required",
            Code::Declined => "declined",
            Code::CursorExpired => "cursor_expired",
            Code::BudgetExceeded => "budget_exceeded",
            Code::Busy => "busy",
            Code::Internal => "internal",
        }
    }
}

/// A tool failure: a stable code and a short message naming only vault paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    /// What kind of failure.
    pub code: Code,
    /// One or two sentences for the model.
    pub message: String,
    /// For `invalid_argument`: the parameter to change, as the tool's input schema names it
    /// (`path`, `limit`...); absent when no single argument is at fault (a path refused by the
    /// vault's rules is not traced back to its argument).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// Paths the client may have meant (at most five), for `not_found` and `ambiguous`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
    /// For `conflict`: the note's version now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_sha256: Option<String>,
}

impl ToolError {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            param: None,
            suggestions: Vec::new(),
            current_sha256: None,
        }
    }

    /// An `invalid_argument` error about the parameter `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError {
            param: Some(param.into()),
            ..ToolError::new(Code::InvalidArgument, message)
        }
    }

    /// An `internal` error.
    pub fn internal(message: impl Into<String>) -> Self {
        ToolError::new(Code::Internal, message)
    }

    /// The `isError` result a client receives.
    pub fn into_result(self) -> CallToolResult {
        let text = if self.suggestions.is_empty() {
            format!("{}: {}", self.code.as_str(), self.message)
        } else {
            format!(
                "{}: {} (did you mean: {}?)",
                self.code.as_str(),
                self.message,
                self.suggestions.join(", ")
            )
        };
        let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
        let mut meta = rmcp::model::JsonObject::new();
        if let Ok(v) = serde_json::to_value(&self) {
            meta.insert(META_KEY.to_owned(), v);
        }
        result.meta = Some(rmcp::model::MetaObject(meta));
        result
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        Ok(self.into_result().into())
    }
}

/// The code a vault error maps to.
pub fn vault_code(e: &VaultError) -> Code {
    match e {
        VaultError::InvalidPath(p) => match p {
            PathError::Absolute
            | PathError::DotComponent
            | PathError::Hidden
            | PathError::WindowsAlias => Code::Refused,
            _ => Code::InvalidArgument,
        },
        VaultError::NotFound(_) => Code::NotFound,
        VaultError::Escapes(_)
        | VaultError::LeadsToHidden(_)
        | VaultError::SymlinkLoop(_)
        | VaultError::NotRegular { .. }
        | VaultError::Excluded(_)
        | VaultError::OutsideWriteScope(_) => Code::Refused,
        VaultError::IsAFolder(_) | VaultError::NotAFolder(_) => Code::InvalidArgument,
        VaultError::TooLarge { .. } => Code::TooLarge,
        VaultError::NotUtf8(_) => Code::NotUtf8,
        VaultError::Io { kind, .. } if *kind == std::io::ErrorKind::PermissionDenied => {
            Code::Refused
        }
        VaultError::Io { .. } | VaultError::Stopped => Code::Unavailable,
        VaultError::Exists(_) | VaultError::Changed { .. } => Code::Conflict,
    }
}

impl From<VaultError> for ToolError {
    fn from(e: VaultError) -> Self {
        let current = match &e {
            VaultError::Changed { current_sha256, .. } => Some(current_sha256.clone()),
            _ => None,
        };
        let mut t = ToolError::new(vault_code(&e), e.to_string());
        t.current_sha256 = current;
        t
    }
}

impl From<PathError> for ToolError {
    fn from(e: PathError) -> Self {
        ToolError::from(VaultError::from(e))
    }
}

impl From<NoteError> for ToolError {
    fn from(e: NoteError) -> Self {
        match e {
            NoteError::Vault(v) => v.into(),
            NoteError::InvalidArgument { param, reason } => ToolError::invalid(param, reason),
            NoteError::NotFound {
                message,
                suggestions,
            } => ToolError {
                suggestions,
                ..ToolError::new(Code::NotFound, message)
            },
            NoteError::Ambiguous {
                message,
                suggestions,
            } => ToolError {
                suggestions,
                ..ToolError::new(Code::Ambiguous, message)
            },
            NoteError::TooLarge(m) => ToolError::new(Code::TooLarge, m),
            NoteError::NotReady(m) => ToolError::new(Code::NotReady, m),
            NoteError::Refused(m) => ToolError::new(Code::Refused, m),
            NoteError::Unavailable(m) => ToolError::new(Code::Unavailable, m),
            NoteError::BudgetExceeded(m) => ToolError::new(Code::BudgetExceeded, m),
            NoteError::Busy(m) => ToolError::new(Code::Busy, m),
            NoteError::Conflict(m) => ToolError::new(Code::Conflict, m),
            NoteError::CursorExpired(m) => ToolError::new(Code::CursorExpired, m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::VaultPath;

    #[test]
    fn every_refusal_of_the_vault_is_refused_and_names_only_the_vault_path() {
        let p = VaultPath::parse("A/b.md").unwrap();
        for e in [
            VaultError::Escapes(p.clone()),
            VaultError::LeadsToHidden(p.clone()),
            VaultError::Excluded(p.clone()),
            VaultError::InvalidPath(PathError::Hidden),
            VaultError::InvalidPath(PathError::DotComponent),
            VaultError::InvalidPath(PathError::Absolute),
        ] {
            let t = ToolError::from(e);
            assert_eq!(t.code, Code::Refused, "{t}");
        }
        let t = ToolError::from(VaultError::NotFound(p));
        assert_eq!(t.code, Code::NotFound);
        assert_eq!(t.to_string(), "not_found: A/b.md: not found");
    }

    #[test]
    fn an_error_result_carries_its_code_in_text_and_structure() {
        let mut e = ToolError::new(Code::NotFound, "Books: no note by that name");
        e.suggestions = vec!["Categories/Books.md".into()];
        let r = e.into_result();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.structured_content, None,
            "would fail the TS SDK's output validation"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["_meta"][META_KEY]["code"], "not_found");
        assert_eq!(
            v["_meta"][META_KEY]["suggestions"][0],
            "Categories/Books.md"
        );
        let text = r.content[0].as_text().unwrap().text.clone();
        assert!(text.starts_with("not_found: Books"), "{text}");
        assert!(text.contains("Categories/Books.md"), "{text}");
    }

    #[test]
    fn an_invalid_argument_keeps_its_reason_and_carries_its_parameter() {
        let reason = "`limit` must be between 1 and 200 (got 0)";
        let t = ToolError::from(NoteError::invalid("limit", reason));
        assert_eq!(t.code, Code::InvalidArgument);
        assert_eq!(t.param.as_deref(), Some("limit"));
        assert_eq!(t.message, reason);
        let r = t.into_result();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["_meta"][META_KEY],
            serde_json::json!({
                "code": "invalid_argument",
                "message": reason,
                "param": "limit",
            })
        );
        let text = r.content[0].as_text().unwrap().text.clone();
        assert_eq!(text, format!("invalid_argument: {reason}"));
        // Errors of other kinds name no parameter, nor does a vault's refusal of a path (the
        // vault does not know which argument held it).
        for t in [
            ToolError::from(VaultError::NotFound(VaultPath::parse("A.md").unwrap())),
            ToolError::from(PathError::Empty),
            ToolError::from(NoteError::Refused("no".into())),
        ] {
            let v = serde_json::to_value(t.into_result()).unwrap();
            assert!(v["_meta"][META_KEY].get("param").is_none(), "{v}");
        }
    }
}

//! MCP prompts (`prompts/list`, `prompts/get`, `notifications/prompts/list_changed`): the
//! replies are built from [`crate::notes::prompts`]; this file translates them, after checking
//! that the session offers prompts and the request's grant may read notes.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{
    CacheScope, GetPromptResult, ListPromptsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ProtocolVersion, ResultType, Role,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{CapvaultServer, Grant};
use crate::engine::Engine;
use crate::notes::NoteError;
use crate::notes::prompts::{self, PromptInfo};

/// How long a burst of changes may run before a session looks at its prompts again.
pub(super) const SETTLE: Duration = Duration::from_millis(300);

fn prompt_of(p: PromptInfo) -> Prompt {
    let arguments = (!p.arguments.is_empty()).then(|| {
        p.arguments
            .into_iter()
            .map(|a| {
                let mut arg = PromptArgument::new(a.name);
                arg.description = a.description;
                arg.required = Some(a.required);
                arg
            })
            .collect()
    });
    let mut prompt = Prompt::new(p.name, p.description, arguments);
    prompt.title = p.title;
    prompt
}

fn error_of(e: NoteError) -> ErrorData {
    match e {
        NoteError::InvalidArgument { param, reason } => {
            ErrorData::invalid_params(reason, Some(serde_json::json!({ "param": param })))
        }
        other => ErrorData::internal_error(crate::server::ToolError::from(other).message, None),
    }
}

/// `prompts/list`: every prompt, with the 2026-07-28 caching hints when `hints` (the list
/// follows the vault, so it is never cached for long, and is this user's own).
pub(super) async fn list(engine: Arc<Engine>, hints: bool) -> Result<ListPromptsResult, ErrorData> {
    let found = tokio::task::spawn_blocking(move || prompts::list(&engine))
        .await
        .map_err(|_| ErrorData::internal_error("the listing was aborted", None))?
        .map_err(error_of)?;
    let mut result = ListPromptsResult::with_all_items(found.into_iter().map(prompt_of).collect());
    result.result_type = Some(ResultType::COMPLETE);
    if hints {
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
    }
    Ok(result)
}

/// `prompts/get`: one prompt filled in, as one user message.
pub(super) async fn get(
    engine: Arc<Engine>,
    name: String,
    arguments: Option<rmcp::model::JsonObject>,
) -> Result<GetPromptResult, ErrorData> {
    let mut args = BTreeMap::new();
    for (k, v) in arguments.unwrap_or_default() {
        let text = match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Null => continue,
            other => other.to_string(),
        };
        args.insert(k, text);
    }
    let filled = tokio::task::spawn_blocking(move || prompts::get(&engine, &name, &args))
        .await
        .map_err(|_| ErrorData::internal_error("the prompt was aborted", None))?
        .map_err(error_of)?;
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, filled.text)]);
    result.description = filled.description;
    Ok(result)
}

/// What the prompts offered look like now (compared to tell a change), if the engine is there.
pub(super) async fn fingerprint(engine: &Weak<Engine>) -> Option<u64> {
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || engine.upgrade().and_then(|e| prompts::fingerprint(&e)))
        .await
        .ok()
        .flatten()
}

impl CapvaultServer {
    /// Prompts are offered when the vault has a prompts folder or the built-in ones are on, and
    /// notes may be read (the tool profile has `read_note`).
    pub(super) fn prompts_offered(&self) -> bool {
        let opts = &self.engine.options().prompts;
        self.resources && (opts.builtin || opts.folder.is_some())
    }

    fn check_prompt_grant(&self, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
        if !self.prompts_offered() {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        }
        match Grant::of(context) {
            Some(g) if !g.allows("read_note") => Err(ErrorData::invalid_request(
                "refused: this credential may not read notes",
                None,
            )),
            _ => Ok(()),
        }
    }

    pub(super) async fn one_list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        self.check_prompt_grant(&context)?;
        let hints = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        list(Arc::clone(&self.engine), hints).await
    }

    pub(super) async fn one_get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        self.check_prompt_grant(&context)?;
        get(Arc::clone(&self.engine), request.name, request.arguments)
            .await
            .map(Into::into)
    }
}

//! A tool call, step by step (`one_call_tool`), and the blocking pool its tool runs on.
//!
//! The tool is resolved, a change passes its checks and, when held, the person's yes; then the
//! tool runs as its caller, under the call's cancellation, and its reply is finished
//! ([`super::reply`]).

use std::sync::Arc;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::reply::args_error;
use super::{CapvaultServer, Code, Grant, ToolError, confirm, grant, policy};
use crate::engine::Engine;
use crate::notes::NoteError;
use crate::notes::write::Writer;

tokio::task_local! {
    /// The cancellation token of the tool call running in this task (rmcp's request context).
    pub(super) static CANCEL: tokio_util::sync::CancellationToken;
    /// Who makes the tool call running in this task, for the audit log.
    pub(super) static ACTOR: crate::notes::write::confirm::Actor;
}

/// The tools whose reply is one file's content, named by the reply's `path`: what a client read
/// before a change (the audit log names them).
const READS: &[&str] = &[
    "read_note",
    "read_canvas",
    "read_attachment",
    "get_periodic_note",
];

impl CapvaultServer {
    /// A tool call, step by step: each check below either passes the call on or answers it
    /// with a tool error, in this order; then the tool runs and its reply is finished.
    pub(super) async fn one_call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let internal = match self.resolve_tool(&mut request, &context) {
            Ok(internal) => internal,
            Err(refused) => return Ok(refused.into_result().into()),
        };
        if let Some(writer) = &self.writer {
            let args = request.arguments.clone().unwrap_or_default();
            if let Err(refused) = self
                .check_if_match(writer, &internal, &args)
                .and_then(|()| self.check_no_markers(&internal, &args))
            {
                return Ok(refused.into_result().into());
            }
            if let Some(stop) = self
                .ask_the_person(writer, &mut request, &args, &context)
                .await
            {
                return Ok(stop);
            }
        }
        self.run_tool(&internal, request, context).await
    }

    /// The tool a call names (its internal name, an old name's implied argument added), if this
    /// server offers it and the call's credential may use it.
    fn resolve_tool(
        &self,
        request: &mut CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, ToolError> {
        let Some(internal) = self.tools.names.get(request.name.as_ref()).cloned() else {
            return Err(ToolError::new(
                Code::Refused,
                format!(
                    "no tool `{}` on this server; tools: {}",
                    request.name,
                    self.tools
                        .listed
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if let Some(grant) = Grant::of(context)
            && !grant.allows(&internal)
        {
            return Err(ToolError::new(
                Code::Refused,
                format!(
                    "this credential ({} scope) may not call `{}`",
                    grant.scope(),
                    request.name
                ),
            ));
        }
        if let Some(alias) = policy::ALIASES
            .iter()
            .find(|a| a.old == request.name && a.new == internal)
            && let Some((key, value)) = alias.implied
        {
            request
                .arguments
                .get_or_insert_with(Default::default)
                .entry(key)
                .or_insert_with(|| value.into());
        }
        request.name = internal.clone().into();
        Ok(internal)
    }

    /// Under `--require-if-match`, a change names the version it replaces (a folder has none:
    /// `delete_note` of a folder passes).
    fn check_if_match(
        &self,
        writer: &Writer,
        internal: &str,
        args: &rmcp::model::JsonObject,
    ) -> Result<(), ToolError> {
        if !writer.options().require_if_match {
            return Ok(());
        }
        let takes_if_match = self.tool_router.get(internal).is_some_and(|t| {
            t.input_schema
                .get("properties")
                .and_then(|p| p.get("if_match"))
                .is_some()
        });
        let folder = || {
            args.get("path")
                .and_then(Value::as_str)
                .and_then(|p| crate::vault::VaultPath::parse_folder(p).ok())
                .is_some_and(|p| !p.is_root() && self.vault.check_folder(&p).is_ok())
        };
        if confirm::lacks_if_match(takes_if_match, args) && !folder() {
            return Err(ToolError::invalid(
                "if_match",
                format!(
                    "this server requires `if_match` on every change: pass the note's `sha256` \
                     from `read_note` to `{}`",
                    self.public_name(internal)
                ),
            ));
        }
        Ok(())
    }

    /// Under `--hidden-text mark`, text read carries markers; a change that would write them
    /// back into a note is refused.
    fn check_no_markers(
        &self,
        internal: &str,
        args: &rmcp::model::JsonObject,
    ) -> Result<(), ToolError> {
        if self.engine.options().hidden_text != crate::markdown::hidden::Policy::Mark
            || grant::is_read_tool(internal)
        {
            return Ok(());
        }
        let Some((param, marker)) = args
            .iter()
            .find_map(|(name, value)| first_marker_in(value).map(|m| (name.clone(), m)))
        else {
            return Ok(());
        };
        // The way out depends on the tool: edit_note itself is told to leave the marked text
        // out of its `old`, not sent back to itself.
        let way_out = if internal == "edit_note" {
            "replace a stretch of the note that holds no marker"
        } else {
            "write without the markers, or use edit_note to change only what you mean to"
        };
        Err(ToolError::invalid(
            param,
            format!(
                "the text carries `{marker}`, a marker capvault added when the note was read \
                 (--hidden-text mark), not the note's own text: {way_out}"
            ),
        ))
    }

    /// Under `--confirm`, a change the person must approve: asked (or queued), and the call
    /// answered here (`Some`) until they have; once approved, the call goes on as a plain one.
    async fn ask_the_person(
        &self,
        writer: &Arc<Writer>,
        request: &mut CallToolRequestParams,
        args: &rmcp::model::JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Option<CallToolResponse> {
        if !writer.options().confirm || !confirm::held(&self.vault, request.name.as_ref(), args) {
            return None;
        }
        let credential = Grant::of(context).map(|g| g.id.clone());
        if let Some(stop) = self
            .confirm(writer, request, args, credential.as_deref(), context)
            .await
        {
            return Some(stop);
        }
        // The retry's answer is spent: the tool sees a plain call.
        request.input_responses = None;
        request.request_state = None;
        None
    }

    /// Runs the tool (as its caller, under the request's cancellation), then finishes its reply:
    /// hidden text as the server's policy says, the note read remembered for the confirm flow,
    /// argument errors in their stable form.
    async fn run_tool(
        &self,
        internal: &str,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let actor = self.actor(&context);
        let read_path = self
            .writer
            .as_ref()
            .filter(|_| READS.contains(&internal))
            .map(|w| (Arc::clone(w), actor_key(&actor)));
        let format = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("format"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let ct = context.ct.clone();
        let tcc = ToolCallContext::new(self, request, context);
        let mut response = ACTOR
            .scope(actor, CANCEL.scope(ct, self.tool_router.call(tcc)))
            .await?;
        if let CallToolResponse::Complete(result) = &mut response {
            self.show_hidden_in_reply(internal, format.as_deref(), result);
        }
        if let (Some((writer, who)), CallToolResponse::Complete(result)) = (read_path, &response)
            && result.is_error != Some(true)
            && let Some(path) = result
                .structured_content
                .as_ref()
                .and_then(|s| s.get("path"))
                .and_then(Value::as_str)
        {
            writer.reads().record(&who, path);
        }
        Ok(match response {
            CallToolResponse::Complete(result) => args_error(result).into(),
            other => other,
        })
    }

    /// Runs `f` on the blocking pool with the engine. When the tool call is cancelled (the
    /// client's `notifications/cancelled`, or its HTTP reply timed out), the call answers at
    /// once and `f`'s [`cancel::Flag`](crate::notes::cancel::Flag) is marked, so loops that ask
    /// [`cancel::requested`](crate::notes::cancel::requested) stop early.
    pub(super) async fn with_engine<T, F>(&self, f: F) -> Result<T, ToolError>
    where
        T: Send + 'static,
        F: FnOnce(&Engine) -> Result<T, ToolError> + Send + 'static,
    {
        let engine = Arc::clone(&self.engine);
        let flag = crate::notes::cancel::Flag::new();
        let marked = flag.clone();
        let mut work =
            tokio::task::spawn_blocking(move || crate::notes::cancel::run(&flag, || f(&engine)));
        let cancelled = CANCEL.try_with(Clone::clone).ok();
        let joined = match cancelled {
            None => work.await,
            Some(ct) => tokio::select! {
                joined = &mut work => joined,
                () = ct.cancelled() => {
                    marked.cancel();
                    tracing::info!("a tool call was cancelled: its work is told to stop");
                    // The blocking thread cannot be aborted: say when the work really ends (the
                    // sign, in logs and tests, that its loops listened).
                    let since = std::time::Instant::now();
                    tokio::spawn(async move {
                        let _ = work.await;
                        tracing::info!(
                            ms = since.elapsed().as_millis() as u64,
                            "cancelled work stopped"
                        );
                    });
                    return Err(ToolError::new(Code::Unavailable, "the request was cancelled"));
                }
            },
        };
        joined.map_err(|_| ToolError::internal("the operation was aborted"))?
    }

    /// Runs one [`crate::notes`] operation on the blocking pool and wraps its reply: what a
    /// handler does once it has built the operation's request.
    pub(super) async fn note<T, F>(
        &self,
        f: F,
    ) -> Result<rmcp::handler::server::wrapper::Json<T>, ToolError>
    where
        T: Send + 'static,
        F: FnOnce(&Engine) -> Result<T, NoteError> + Send + 'static,
    {
        self.with_engine(move |engine| f(engine).map_err(ToolError::from))
            .await
            .map(rmcp::handler::server::wrapper::Json)
    }

    /// Who makes this request's calls: the client's name and version, the credential, and what
    /// they read lately.
    pub(super) fn actor(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> crate::notes::write::confirm::Actor {
        let client = context
            .client_info()
            .map(|c| format!("{} {}", c.name, c.version));
        let credential = Grant::of(context).map(|g| g.id.clone());
        let mut actor = crate::notes::write::confirm::Actor {
            client,
            credential,
            read_before: Vec::new(),
        };
        if let Some(w) = &self.writer {
            actor.read_before = w.reads().recent(&actor_key(&actor));
        }
        actor
    }
}

/// The first hidden-text marker in any string of `value`.
fn first_marker_in(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => crate::markdown::hidden::first_marker(s).map(str::to_owned),
        Value::Array(items) => items.iter().find_map(first_marker_in),
        Value::Object(map) => map.values().find_map(first_marker_in),
        _ => None,
    }
}

/// Whose reads these are: the client's name and the credential.
pub(super) fn actor_key(actor: &crate::notes::write::confirm::Actor) -> String {
    format!(
        "{}|{}",
        actor.client.as_deref().unwrap_or(""),
        actor.credential.as_deref().unwrap_or("")
    )
}

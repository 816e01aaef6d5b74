//! A call held for the person's yes (`--confirm destructive`), asked and answered.
//!
//! The call runs first as a dry run (what the person is shown), the question goes by the
//! client's channel ([`super::confirm`]), and a yes holds only for the change shown.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::call::CANCEL;
use super::reply::args_error;
use super::{CapvaultServer, Code, ToolError, confirm};
use crate::notes::write::Writer;

impl CapvaultServer {
    /// The held call as a dry run: its structured reply, or the reply to send (its failure).
    async fn dry_run(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, CallToolResponse> {
        let mut dry = request.clone();
        dry.arguments
            .get_or_insert_with(Default::default)
            .insert("dry_run".to_owned(), Value::Bool(true));
        dry.input_responses = None;
        dry.request_state = None;
        let tcc = ToolCallContext::new(self, dry, context.clone());
        let reply = match CANCEL
            .scope(context.ct.clone(), self.tool_router.call(tcc))
            .await
        {
            Ok(CallToolResponse::Complete(result)) => result,
            Ok(other) => return Err(other),
            Err(e) => {
                return Err(ToolError::internal(e.message.to_string())
                    .into_result()
                    .into());
            }
        };
        if reply.is_error == Some(true) {
            return Err(args_error(reply).into());
        }
        Ok(reply.structured_content.unwrap_or(Value::Null))
    }

    /// `--confirm destructive`: asks the person about a held call. `None`: they said yes (go
    /// on); otherwise the reply to send instead (the question, or a refusal).
    pub(super) async fn confirm(
        &self,
        writer: &Arc<Writer>,
        request: &CallToolRequestParams,
        args: &rmcp::model::JsonObject,
        credential: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Option<CallToolResponse> {
        use crate::notes::write::confirm::NotAsked;
        let internal = request.name.as_ref();
        let refuse = |e: ToolError| Some(CallToolResponse::from(e.into_result()));
        // What will change: the same call as a dry run (its failure is the reply). A retry runs
        // it again: the yes is for what the person was shown, not for what the vault holds now.
        let dry_value = match self.dry_run(request, context).await {
            Ok(v) => v,
            Err(reply) => return Some(reply),
        };
        let digest = confirm::digest(internal, args, credential, &dry_value);
        let summary = confirm::summary(internal, args, &dry_value);
        // A 2026-07-28 retry: the answer to the question its `requestState` names.
        if let Some(id) = request.request_state.as_deref() {
            let asked = match writer.confirmations().answer(id, &digest) {
                Ok(asked) => asked,
                Err(NotAsked::Unknown) => {
                    // About the request's `requestState`, not one of the tool's arguments.
                    return refuse(ToolError::new(
                        Code::InvalidArgument,
                        "this answer is for no open question (unknown, expired or used): make \
                         the call again without it to ask anew",
                    ));
                }
                Err(NotAsked::Changed(asked)) => {
                    return refuse(ToolError::new(
                        Code::Conflict,
                        format!(
                            "this change is not the one the person was asked about (the vault \
                             changed since, or the call differs); nothing was changed: make the \
                             call again to ask anew. (The change shown: {asked})"
                        ),
                    ));
                }
            };
            return match confirm::answer_of(request) {
                Some(confirm::Answer::Yes) => None,
                Some(confirm::Answer::No(why)) => refuse(confirm::declined(why, &asked)),
                None => refuse(confirm::declined(
                    "the client brought back no answer",
                    &asked,
                )),
            };
        }
        let vault = self.vault.name().to_owned();
        match confirm::channel(context) {
            confirm::Channel::InputRequired => {
                match writer.confirmations().ask(&digest, &summary) {
                    Ok(id) => Some(confirm::input_required(&vault, &summary, id)),
                    Err(e) => refuse(ToolError::new(Code::Unavailable, e.to_string())),
                }
            }
            confirm::Channel::Request => match confirm::ask(context, &vault, &summary).await {
                confirm::Answer::Yes => {
                    // The person may have taken a while: the change must still be the one shown.
                    match self.dry_run(request, context).await {
                        Ok(now) if confirm::digest(internal, args, credential, &now) == digest => {
                            None
                        }
                        Ok(_) => refuse(ToolError::new(
                            Code::Conflict,
                            format!(
                                "the vault changed while the person was asked; nothing was \
                                 changed: make the call again to ask anew. (The change shown: \
                                 {summary})"
                            ),
                        )),
                        Err(reply) => Some(reply),
                    }
                }
                confirm::Answer::No(why) => refuse(confirm::declined(why, &summary)),
            },
            confirm::Channel::None => {
                let w = Arc::clone(writer);
                let s = summary.clone();
                let needs = confirm::needs(internal, &dry_value);
                let taken = tokio::task::spawn_blocking(move || {
                    w.confirmations()
                        .take_approved(w.state(), &digest, &s, &needs)
                })
                .await;
                match taken {
                    Ok(Ok(crate::notes::write::confirm::Approval::Approved)) => {
                        tracing::info!(
                            tool = internal,
                            "a change confirmed with `capvault confirm` goes ahead"
                        );
                        None
                    }
                    Ok(Ok(crate::notes::write::confirm::Approval::Waiting(code))) => {
                        let state_dir = writer.options().state_dir.as_deref();
                        tracing::warn!(
                            code = %code,
                            change = %summary,
                            "a change waits for your yes: run `{}` in a terminal",
                            confirm_command(self.vault.host_path(), state_dir)
                        );
                        // The client hears no host path: the vault and state folders by role.
                        let state = if state_dir.is_some() {
                            " --state-dir <this server's state folder>"
                        } else {
                            ""
                        };
                        refuse(ToolError::new(
                            Code::ConfirmationRequired,
                            format!(
                                "this change needs the person's yes, and this client cannot ask \
                                 them (it declares no elicitation). Nothing was changed. Ask the \
                                 person to run `capvault confirm <vault folder>{state}` in a \
                                 terminal on the machine running capvault (capvault's log shows \
                                 the exact command), then make the same call again. The change: \
                                 {summary}"
                            ),
                        ))
                    }
                    Ok(Err(e)) => refuse(ToolError::new(
                        Code::Unavailable,
                        format!(
                            "the confirmation could not be kept ({}); nothing was changed",
                            e.kind()
                        ),
                    )),
                    Err(_) => refuse(ToolError::internal("the confirmation was aborted")),
                }
            }
        }
    }
}

/// The `capvault confirm` command line for the person (the server's log only: it names host
/// paths), with the server's own `--state-dir` when it has one: without it the command looks
/// in the default state folder and finds nothing waiting.
fn confirm_command(vault: &std::path::Path, state_dir: Option<&std::path::Path>) -> String {
    let q = |p: &std::path::Path| crate::vault::host::shell_quoted(&p.to_string_lossy());
    match state_dir {
        Some(dir) => format!("capvault confirm {} --state-dir {}", q(vault), q(dir)),
        None => format!("capvault confirm {}", q(vault)),
    }
}

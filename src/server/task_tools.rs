//! Tasks: `list_tasks`. The work is in [`crate::notes::tasks`].

use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError};
use crate::notes::knowledge::PageReply;
use crate::notes::tasks::{self, PriorityLevel, StatusFilter, TaskItem, TasksArgs, TasksRequest};

/// Arguments of `list_tasks` (a Tasks query string may join them later as `query`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTasksArgs {
    /// Default `todo`: not done (to do, in progress, on hold).
    pub status: Option<StatusFilter>,
    pub due_before: Option<String>,
    pub due_after: Option<String>,
    pub scheduled_before: Option<String>,
    pub scheduled_after: Option<String>,
    /// At least this.
    pub priority: Option<PriorityLevel>,
    /// This tag or one under it.
    pub tag: Option<String>,
    /// One note.
    pub path: Option<String>,
    /// In this folder.
    pub folder: Option<String>,
    /// In the description, any case.
    pub text: Option<String>,
    /// Per page (default 50).
    #[schemars(range(min = 1, max = crate::notes::tasks::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

#[tool_router(router = task_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Checkbox tasks with the Tasks plugin's fields, in its default order. Dates YYYY-MM-DD or
    /// words (tomorrow, next week), bounds strict.
    #[tool(
        annotations(
            title = "List tasks",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = rmcp::handler::server::tool::schema_for_output::<PageReply<TaskItem>>()
    )]
    pub async fn list_tasks(
        &self,
        Parameters(args): Parameters<ListTasksArgs>,
    ) -> Result<CallToolResult, ToolError> {
        let req = TasksRequest::new(TasksArgs {
            status: args.status,
            due_before: args.due_before,
            due_after: args.due_after,
            scheduled_before: args.scheduled_before,
            scheduled_after: args.scheduled_after,
            priority: args.priority,
            tag: args.tag,
            path: args.path,
            folder: args.folder,
            text: args.text,
            limit: args.limit,
            cursor: args.cursor,
        })?;
        self.with_engine(move |engine| {
            let reply = tasks::list_tasks(engine, &req)?;
            let text = tasks::summary(&reply);
            let value =
                serde_json::to_value(&reply).map_err(|e| ToolError::internal(e.to_string()))?;
            let mut result = CallToolResult::structured(value);
            result.content = vec![rmcp::model::ContentBlock::text(text)];
            Ok(result)
        })
        .await
    }
}

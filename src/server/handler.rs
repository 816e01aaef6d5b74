//! The rmcp handler: each MCP request to this vault's answer or to the set of vaults'.
//!
//! A server of one vault answers with its `one_*` methods (call.rs, prompts.rs, resources.rs);
//! a server of several ([`super::vaults`]) asks each vault's server for the same answers.

use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ResultType,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::subscriptions::{self, unknown_uri};
use super::{CapvaultServer, Grant};

impl ServerHandler for CapvaultServer {
    fn get_info(&self) -> ServerConfig {
        if let Some(set) = &self.set {
            let mut capabilities = if self.resources {
                ServerCapabilities::builder()
                    .enable_tools()
                    .enable_resources()
                    .enable_resources_subscribe()
                    .enable_resources_list_changed()
                    .build()
            } else {
                ServerCapabilities::builder().enable_tools().build()
            };
            let (offered, changes) = set.prompts_offered();
            if offered {
                let mut p = rmcp::model::PromptsCapability::default();
                p.list_changed = changes.then_some(true);
                capabilities.prompts = Some(p);
            }
            return ServerConfig::new(capabilities)
                .with_server_info(Implementation::new(
                    env!("CARGO_PKG_NAME"),
                    env!("CARGO_PKG_VERSION"),
                ))
                .with_instructions(set.instructions());
        }
        let mut capabilities = if self.resources {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        if self.prompts_offered() {
            // The list changes only with a prompts folder (the built-in prompts are fixed):
            // sessions are told (`notifications/prompts/list_changed`), a 2026-07-28 client
            // through `subscriptions/listen`.
            let mut p = rmcp::model::PromptsCapability::default();
            p.list_changed = self
                .engine
                .options()
                .prompts
                .folder
                .is_some()
                .then_some(true);
            capabilities.prompts = Some(p);
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(self.instructions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let hints = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let tools = match &self.set {
            Some(set) => set.list_tools(self, Grant::of(&context)),
            None => self.tools_for(Grant::of(&context)),
        };
        let mut result = ListToolsResult::with_all_items(tools);
        result.result_type = Some(ResultType::COMPLETE);
        if hints {
            result.ttl_ms = Some(0);
            result.cache_scope = Some(CacheScope::Public);
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.listed.iter().find(|t| t.name == name).cloned()
    }

    // A server of several vaults answers through boxed futures: their state machines stay out
    // of the one-vault path's, which rmcp's transports each instantiate.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match &self.set {
            Some(set) => boxed(set.call_tool(self, request, context)).await,
            None => self.one_call_tool(request, context).await,
        }
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if self.resources && self.subscribed.start() {
            subscriptions::spawn_session(
                self.watched(None),
                context.peer.clone(),
                Arc::clone(&self.subscribed),
            );
        }
        match &self.set {
            Some(set) => boxed(set.on_initialized(context)).await,
            None => self.one_on_initialized(context).await,
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.check_resource_grant(&context)?;
        let watched = self.watched(Grant::of(&context));
        let uri = request.uri.clone();
        let found =
            tokio::task::spawn_blocking(move || subscriptions::subscribable(&watched, &uri))
                .await
                .map_err(|_| ErrorData::internal_error("the subscription was aborted", None))?;
        let (_, canonical) = found.ok_or_else(|| unknown_uri(&request.uri))?;
        self.subscribed.add(canonical, request.uri)?;
        // A client that subscribes without having sent `initialized` is told all the same.
        if self.subscribed.start() {
            subscriptions::spawn_session(
                self.watched(None),
                context.peer,
                Arc::clone(&self.subscribed),
            );
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.check_resource_grant(&context)?;
        let watched = self.watched(Grant::of(&context));
        if let Some((_, canonical)) = subscriptions::canonical(&watched, &request.uri) {
            self.subscribed.remove(&canonical);
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut f = rmcp::model::SubscriptionFilter::new();
        if self.watched(None).iter().any(|w| w.prompts_change) {
            f.prompts_list_changed = requested.prompts_list_changed.filter(|b| *b);
        }
        if self.resources {
            f.resources_list_changed = requested.resources_list_changed.filter(|b| *b);
            let watched = self.watched(None);
            f.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
                uris.iter()
                    .filter(|u| subscriptions::subscribable(&watched, u).is_some())
                    .take(subscriptions::MAX_SUBSCRIPTIONS)
                    .cloned()
                    .collect()
            });
        }
        Some(f)
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        self.check_resource_grant(context.request_context())?;
        let watched = self.watched(Grant::of(context.request_context()));
        let stop = context.request_context().ct.clone();
        subscriptions::listen(watched, context.sink().clone(), context.accepted(), stop).await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        match &self.set {
            Some(set) => boxed(set.list_prompts(context)).await,
            None => self.one_list_prompts(request, context).await,
        }
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        match &self.set {
            Some(set) => boxed(set.get_prompt(request, context)).await,
            None => self.one_get_prompt(request, context).await,
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        match &self.set {
            Some(set) => boxed(set.list_resources(request, context)).await,
            None => self.one_list_resources(request, context).await,
        }
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        match &self.set {
            Some(set) => Ok(set.resource_templates(Grant::of(&context))),
            None => self.one_list_resource_templates(request, context).await,
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match &self.set {
            Some(set) => boxed(set.read_resource(request, context)).await,
            None => self.one_read_resource(request, context).await,
        }
    }
}

/// `f` as a boxed trait object: polled through one shared function wherever it is awaited.
fn boxed<'a, T>(
    f: impl std::future::Future<Output = T> + Send + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>> {
    Box::pin(f)
}

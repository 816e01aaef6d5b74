//! Several vaults in one server (`capvault serve ~/Work ~/Personal`).
//!
//! Each vault keeps its own [`CapvaultServer`]: its own capability root, engine, index, writer,
//! history and tool profile. Nothing here opens a file or resolves a path: this layer only
//! chooses which vault's server answers, by the `vault` argument every tool then takes (an enum
//! of the names), or by the authority of a resource URI (`capvault://Work/Plan.md`). A request
//! for one vault reaches only that vault's server, which knows no other, so no path, link, URI or
//! move can name a note of another vault.
//!
//! `search_notes` and `vault_info` may leave `vault` out: a search then runs in every vault the
//! request may use and merges the hits by score (each hit names its vault; the cursor holds each
//! vault's own), `vault_info` lists the vaults. A grant with `vaults=` (a token file's) sees only
//! its vaults: in the enum, in searches, resources and prompts; another vault's name is answered
//! as unknown.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ResourceContents, ResultType, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::{CapvaultServer, Code, Grant, ToolError, ToolTable, URI_PREFIX};
use crate::notes::cursor;
use crate::notes::search::{DEFAULT_LIMIT, MAX_LIMIT, MAX_REPLY_BYTES};

/// The most vaults one server serves.
pub const MAX_VAULTS: usize = 32;
/// The longest vault name.
pub const MAX_NAME: usize = 64;
/// The tools (names in the code) whose `vault` may be left out.
const ACROSS: &[&str] = &["search_notes", "vault_info"];
/// The URI scheme of a note of a named vault: `capvault://NAME/path`.
const SCHEME: &str = "capvault://";

/// One vault of a server of several: its name and its own server.
#[derive(Clone)]
pub struct Member {
    /// The name clients pass as `vault`.
    pub name: String,
    /// The server of this vault alone.
    pub server: CapvaultServer,
}

/// The vaults of one server, in the order they were given.
pub(super) struct VaultSet {
    members: Vec<Member>,
}

/// True for 1 to `max` letters, digits, `-`, `_` or `.`: a name safe in a URI, a token file's
/// line, a log line or a client's config (vaults', tokens' and client entries' names).
pub fn is_plain_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A name that is not 1 to `max` letters, digits, `-`, `_` or `.` (token names, client
/// entries' names).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("use 1 to {max} letters, digits, `-`, `_` or `.`")]
pub struct BadName {
    /// The longest name allowed there.
    pub max: usize,
}

/// A name safe in a log line and a config file: 1 to `max` letters, digits, `-`, `_` or `.`
/// (token names; `capvault install --name` with its own `max`).
pub fn check_name_within(name: &str, max: usize) -> Result<(), BadName> {
    if is_plain_name(name, max) {
        Ok(())
    } else {
        Err(BadName { max })
    }
}

/// True for a name a vault may have: a plain name of at most [`MAX_NAME`] bytes, not starting
/// with a dot (it stands in URIs, prompt names and token files).
pub fn valid_name(name: &str) -> bool {
    is_plain_name(name, MAX_NAME) && !name.starts_with('.')
}

/// The name a vault gets from its folder's name: every other character becomes `-`.
pub fn name_from_folder(folder: &str) -> String {
    let mut out = String::new();
    for c in folder.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        let c = if keep { c } else { '-' };
        if !(c == '-' && out.ends_with('-')) && out.len() < MAX_NAME {
            out.push(c);
        }
    }
    let out = out.trim_matches(|c| c == '-' || c == '.').to_owned();
    if out.is_empty() {
        "vault".to_owned()
    } else {
        out
    }
}

/// Why [`CapvaultServer::several`] cannot serve these vaults together (shown at startup).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaultSetError {
    /// None, or more than [`MAX_VAULTS`].
    #[error("serve 1 to {MAX_VAULTS} vaults (got {0})")]
    Count(usize),
    /// A name clients could not pass as `vault`.
    #[error("vault name `{0}`: use 1 to {MAX_NAME} letters, digits, `-`, `_` or `.`")]
    BadName(String),
    /// Two vaults by one name.
    #[error("two vaults are named `{0}`: give one another name")]
    SameName(String),
}

impl CapvaultServer {
    /// One server for several vaults, each served by its own server in `members` (their names
    /// distinct and valid). Fails when `members` is empty or over [`MAX_VAULTS`], or a name is
    /// bad or given twice.
    pub fn several(members: Vec<Member>) -> Result<CapvaultServer, VaultSetError> {
        if members.is_empty() || members.len() > MAX_VAULTS {
            return Err(VaultSetError::Count(members.len()));
        }
        for (i, m) in members.iter().enumerate() {
            if !valid_name(&m.name) {
                return Err(VaultSetError::BadName(m.name.clone()));
            }
            if members[..i].iter().any(|o| o.name == m.name) {
                return Err(VaultSetError::SameName(m.name.clone()));
            }
        }
        // The tools of every vault, each once (the first vault's definition), with `vault`.
        let mut listed: Vec<Tool> = Vec::new();
        let mut names = std::collections::BTreeMap::new();
        for m in &members {
            for t in &m.server.tools.listed {
                if listed.iter().any(|l| l.name == t.name) {
                    continue;
                }
                let offering: Vec<&str> = members
                    .iter()
                    .filter(|o| o.server.tools.names.contains_key(t.name.as_ref()))
                    .map(|o| o.name.as_str())
                    .collect();
                let internal = m.server.tools.names.get(t.name.as_ref()).cloned();
                let across = internal.as_deref().is_some_and(|i| ACROSS.contains(&i));
                listed.push(with_vault(t, &offering, !across));
                if let Some(i) = internal {
                    names.insert(t.name.to_string(), i);
                }
            }
        }
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        let first = members[0].server.clone();
        Ok(CapvaultServer {
            tools: Arc::new(ToolTable { listed, names }),
            resources: members.iter().any(|m| m.server.resources),
            set: Some(Arc::new(VaultSet { members })),
            ..first
        })
    }
}

/// `tool` with a `vault` property naming `names` (required unless `optional`).
fn with_vault(tool: &Tool, names: &[&str], required: bool) -> Tool {
    let mut t = tool.clone();
    let mut schema = (*t.input_schema).clone();
    if let Value::Object(p) = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()))
    {
        p.insert("vault".to_owned(), json!({"type": "string", "enum": names}));
    }
    if required
        && let Value::Array(r) = schema
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()))
    {
        r.push(Value::String("vault".to_owned()));
    }
    t.input_schema = Arc::new(schema);
    t
}

/// `tool`'s `vault` enum narrowed to `allowed`; `None` when it leaves none.
fn narrowed(tool: &Tool, allowed: &dyn Fn(&str) -> bool) -> Option<Tool> {
    let mut t = tool.clone();
    let mut schema = (*t.input_schema).clone();
    let names = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("vault"))
        .and_then(|v| v.get_mut("enum"))
        .and_then(Value::as_array_mut)?;
    names.retain(|n| n.as_str().is_some_and(allowed));
    if names.is_empty() {
        return None;
    }
    t.input_schema = Arc::new(schema);
    Some(t)
}

fn refuse(e: ToolError) -> Result<CallToolResponse, ErrorData> {
    Ok(e.into_result().into())
}

/// The cursor of a search over several vaults: each vault's own cursor (`None`: its first
/// page), for the vaults that have hits left; the first page's total.
#[derive(serde::Serialize, serde::Deserialize)]
struct SearchCursor {
    v: Vec<(String, Option<String>)>,
    t: u64,
    e: bool,
}

/// The cursor of resources over several vaults: the vault being listed and its own cursor.
#[derive(serde::Serialize, serde::Deserialize)]
struct ResourceCursor {
    v: String,
    c: Option<String>,
}

impl VaultSet {
    /// The vaults `grant` may use, in order.
    fn allowed<'a>(&'a self, grant: Option<&'a Grant>) -> impl Iterator<Item = &'a Member> + 'a {
        self.members
            .iter()
            .filter(move |m| grant.is_none_or(|g| g.allows_vault(&m.name)))
    }

    /// The vaults `grant` may use, as change notifications watch them.
    pub(super) fn watched(&self, grant: Option<&Grant>) -> Vec<super::subscriptions::Watched> {
        self.allowed(grant)
            .filter(|m| m.server.resources)
            .map(|m| super::subscriptions::Watched {
                engine: std::sync::Arc::clone(&m.server.engine),
                vault: Some(m.name.clone()),
                prompts_change: m.server.prompts_offered()
                    && m.server.engine.options().prompts.folder.is_some(),
            })
            .collect()
    }

    fn names(&self, grant: Option<&Grant>) -> String {
        self.allowed(grant)
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The vault named `name`, if `grant` may use it (another is answered as unknown).
    fn member<'a>(&'a self, name: &str, grant: Option<&'a Grant>) -> Result<&'a Member, ToolError> {
        self.allowed(grant).find(|m| m.name == name).ok_or_else(|| {
            ToolError::invalid(
                "vault",
                format!(
                    "no vault `{}` here; vaults: {}",
                    shorten(name),
                    self.names(grant)
                ),
            )
        })
    }

    pub(super) fn list_tools(&self, top: &CapvaultServer, grant: Option<&Grant>) -> Vec<Tool> {
        if grant.is_none_or(|g| g.vaults.is_none()) {
            // Every vault: the enums as built.
            return top.tools_for(grant);
        }
        top.tools_for(grant)
            .iter()
            .filter_map(|t| narrowed(t, &|n| grant.is_none_or(|g| g.allows_vault(n))))
            .collect()
    }

    pub(super) async fn call_tool(
        &self,
        top: &CapvaultServer,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let grant = Grant::of(&context).cloned();
        let grant = grant.as_ref();
        let public = request.name.to_string();
        let Some(internal) = top.tools.names.get(&public).cloned() else {
            return refuse(ToolError::new(
                Code::Refused,
                format!(
                    "no tool `{}` on this server; tools: {}",
                    shorten(&public),
                    top.tools
                        .listed
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        let named = match request
            .arguments
            .get_or_insert_with(Default::default)
            .remove("vault")
        {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                return refuse(ToolError::invalid(
                    "vault",
                    format!("`vault` is a vault's name: one of {}", self.names(grant)),
                ));
            }
        };
        let offering = |m: &Member| m.server.tools.names.contains_key(&public);
        let member = match named {
            Some(name) => match self.member(&name, grant) {
                Ok(m) => m,
                Err(e) => return refuse(e),
            },
            None => {
                let mut can: Vec<&Member> = self.allowed(grant).filter(|m| offering(m)).collect();
                if internal == "search_notes" {
                    return self.search(request, context, can).await;
                } else if can.len() == 1 {
                    can.remove(0)
                } else if internal == "vault_info" && !can.is_empty() {
                    return self.info(request, context, can).await;
                } else {
                    return refuse(ToolError::invalid(
                        "vault",
                        format!(
                            "this server serves several vaults: pass `vault`, one of {}",
                            self.names(grant)
                        ),
                    ));
                }
            }
        };
        if !offering(member) {
            return refuse(ToolError::new(
                Code::Refused,
                format!("`{public}` is not offered for the vault `{}`", member.name),
            ));
        }
        let name = member.name.clone();
        let reply = call_one(&member.server, request, context).await?;
        Ok(match reply {
            CallToolResponse::Complete(r) => tagged(r, &name).into(),
            other => other,
        })
    }

    /// `vault_info` without `vault`: the first vault's reply, with every vault listed.
    async fn info(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        members: Vec<&Member>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut first: Option<Value> = None;
        let mut vaults = Vec::new();
        for m in members {
            let reply = call_one(&m.server, request.clone(), context.clone()).await?;
            let CallToolResponse::Complete(r) = reply else {
                return Ok(reply);
            };
            if r.is_error == Some(true) {
                return Ok(r.into());
            }
            let v = r.structured_content.unwrap_or(Value::Null);
            vaults.push(json!({
                "vault": m.name,
                "folder": v.get("name"),
                "notes": v.get("notes"),
                "writes_enabled": v.get("writes_enabled"),
                "index": v.get("index").and_then(|i| i.get("state")),
            }));
            if first.is_none() {
                first = Some(json!({"vault": m.name}));
                if let (Some(Value::Object(f)), Value::Object(o)) = (&mut first, v) {
                    f.extend(o);
                }
            }
        }
        let mut value = first.unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("vaults".to_owned(), Value::Array(vaults));
            map.insert(
                "note".to_owned(),
                Value::String(
                    "this server serves several vaults: the fields above are the first's; pass \
                     `vault` for another's"
                        .to_owned(),
                ),
            );
        }
        Ok(CallToolResult::structured(value).into())
    }

    /// `search_notes` without `vault`: every vault searched, the hits merged by score.
    async fn search(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        members: Vec<&Member>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.get_or_insert_with(Default::default);
        // A limit as one vault takes it (a number, or a number in a string); one out of range,
        // or not a number, gets one vault's own refusal.
        let limit = match args.get("limit") {
            None | Some(Value::Null) => Some(u64::from(DEFAULT_LIMIT)),
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(t)) => t.trim().parse().ok(),
            Some(_) => None,
        };
        let limit = match limit.filter(|l| (1..=u64::from(MAX_LIMIT)).contains(l)) {
            Some(l) => l,
            None => match members.first() {
                Some(m) => return call_one(&m.server, request, context).await,
                None => return refuse(ToolError::invalid("vault", "no vault to search")),
            },
        };
        // Where each vault stands: its own cursor (`None`: from its start).
        let (todo, mut total, mut estimated, first_page) =
            match args.remove("cursor").as_ref().and_then(Value::as_str) {
                None => (
                    members
                        .iter()
                        .map(|m| (m.name.clone(), None))
                        .collect::<Vec<_>>(),
                    0,
                    false,
                    true,
                ),
                Some(c) => match cursor::decode::<SearchCursor>(c) {
                    Ok(c) => (c.v, c.t, c.e, false),
                    Err(e) => return refuse(ToolError::from(e)),
                },
            };
        struct Page<'a> {
            member: &'a Member,
            from: Option<String>,
            hits: Vec<Value>,
            next: Option<String>,
            taken: usize,
        }
        let mut pages: Vec<Page<'_>> = Vec::new();
        let mut base: Option<JsonObject> = None;
        let mut partial = false;
        let mut notes: Vec<Value> = Vec::new();
        for (name, from) in todo {
            // A vault this request may not use (the cursor came from another grant) is skipped,
            // and a vault named twice (a forged cursor) is searched once.
            let Some(member) = members.iter().find(|m| m.name == name) else {
                continue;
            };
            if pages.iter().any(|p| p.member.name == name) {
                continue;
            }
            let mut call = request.clone();
            let a = call.arguments.get_or_insert_with(Default::default);
            a.insert("limit".to_owned(), json!(limit));
            if let Some(c) = &from {
                a.insert("cursor".to_owned(), json!(c));
            }
            let reply = call_one(&member.server, call, context.clone()).await?;
            let CallToolResponse::Complete(r) = reply else {
                return Ok(reply);
            };
            if r.is_error == Some(true) {
                return Ok(tagged(r, &member.name).into());
            }
            let Some(Value::Object(mut v)) = r.structured_content else {
                continue;
            };
            let hits = match v.remove("hits") {
                Some(Value::Array(h)) => h,
                _ => Vec::new(),
            };
            if first_page {
                total += v.get("total").and_then(Value::as_u64).unwrap_or(0);
                estimated |= v.get("total_estimated") == Some(&Value::Bool(true));
            }
            partial |= v.get("partial") == Some(&Value::Bool(true));
            if let Some(Value::Array(n)) = v.get("notes") {
                for line in n {
                    let line = json!(format!("{}: {}", member.name, line.as_str().unwrap_or("")));
                    if !notes.contains(&line) {
                        notes.push(line);
                    }
                }
            }
            let next = v
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if base.is_none() {
                base = Some(v);
            }
            pages.push(Page {
                member,
                from,
                hits,
                next,
                taken: 0,
            });
        }
        // Merge: the best next hit of any vault, each vault's own order kept.
        let mut merged: Vec<Value> = Vec::new();
        let mut bytes = 0usize;
        while (merged.len() as u64) < limit {
            let best = pages
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.hits.get(p.taken).map(|h| (i, score(h))))
                .fold(None, |best: Option<(usize, f64)>, (i, s)| match best {
                    Some((_, b)) if b >= s => best,
                    _ => Some((i, s)),
                });
            let Some((i, _)) = best else { break };
            let page = &mut pages[i];
            let mut hit = page.hits[page.taken].take();
            if let Value::Object(h) = &mut hit {
                h.insert("vault".to_owned(), json!(page.member.name));
            }
            let size = hit.to_string().len();
            if !merged.is_empty() && bytes + size > MAX_REPLY_BYTES {
                break;
            }
            bytes += size;
            page.taken += 1;
            merged.push(hit);
        }
        // Where each vault stands after this page.
        let mut left = Vec::new();
        for p in &pages {
            let name = p.member.name.clone();
            if p.taken == p.hits.len() {
                if let Some(n) = &p.next {
                    left.push((name, Some(n.clone())));
                }
            } else if p.taken == 0 {
                left.push((name, p.from.clone()));
            } else {
                // The vault's own cursor after the hits taken: its page again, that long.
                let mut call = request.clone();
                let a = call.arguments.get_or_insert_with(Default::default);
                a.insert("limit".to_owned(), json!(p.taken));
                if let Some(c) = &p.from {
                    a.insert("cursor".to_owned(), json!(c));
                }
                if let CallToolResponse::Complete(r) =
                    call_one(&p.member.server, call, context.clone()).await?
                    && let Some(n) = r
                        .structured_content
                        .as_ref()
                        .and_then(|v| v.get("next_cursor"))
                        .and_then(Value::as_str)
                {
                    left.push((name, Some(n.to_owned())));
                }
            }
        }
        let mut value = base.unwrap_or_default();
        let next = (!left.is_empty()).then(|| {
            cursor::encode(&SearchCursor {
                v: left,
                t: total,
                e: estimated,
            })
        });
        value.insert("hits".to_owned(), Value::Array(merged));
        value.insert("total".to_owned(), json!(total));
        if estimated {
            value.insert("total_estimated".to_owned(), Value::Bool(true));
        }
        value.insert("truncated".to_owned(), Value::Bool(next.is_some()));
        value.remove("next_cursor");
        if let Some(n) = next {
            value.insert("next_cursor".to_owned(), Value::String(n));
        }
        value.insert("partial".to_owned(), Value::Bool(partial));
        value.remove("notes");
        if !notes.is_empty() {
            value.insert("notes".to_owned(), Value::Array(notes));
        }
        value.insert(
            "vaults".to_owned(),
            json!(members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>()),
        );
        Ok(CallToolResult::structured(Value::Object(value)).into())
    }

    pub(super) async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let grant = Grant::of(&context).cloned();
        let members: Vec<&Member> = self
            .allowed(grant.as_ref())
            .filter(|m| m.server.resources)
            .collect();
        let (start, inner) = match request.and_then(|r| r.cursor) {
            None => (0, None),
            Some(c) => {
                let c: ResourceCursor = cursor::decode(&c)
                    .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
                let i = members
                    .iter()
                    .position(|m| m.name == c.v)
                    .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?;
                (i, c.c)
            }
        };
        let Some(member) = members.get(start) else {
            return Ok(ListResourcesResult::with_all_items(Vec::new()));
        };
        let mut params = PaginatedRequestParams::default();
        params.cursor = inner;
        let mut page = member
            .server
            .one_list_resources(Some(params), context.clone())
            .await?;
        for r in &mut page.resources {
            r.uri = uri_in(&member.name, &r.uri);
        }
        page.next_cursor = match page.next_cursor.take() {
            Some(c) => Some(cursor::encode(&ResourceCursor {
                v: member.name.clone(),
                c: Some(c),
            })),
            None => members.get(start + 1).map(|m| {
                cursor::encode(&ResourceCursor {
                    v: m.name.clone(),
                    c: None,
                })
            }),
        };
        Ok(page)
    }

    pub(super) fn resource_templates(&self, grant: Option<&Grant>) -> ListResourceTemplatesResult {
        let mut all = Vec::new();
        for m in self.allowed(grant).filter(|m| m.server.resources) {
            for mut t in super::resources::templates().resource_templates {
                t.uri_template = uri_in(&m.name, &t.uri_template);
                t.name = format!("{} note", m.name);
                t.description = Some(format!(
                    "A note of the vault `{0}` by its path relative to that vault's root, e.g. \
                     `{SCHEME}{0}/Projects/Plan.md`.",
                    m.name
                ));
                all.push(t);
            }
        }
        ListResourceTemplatesResult::with_all_items(all)
    }

    pub(super) async fn read_resource(
        &self,
        mut request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let grant = Grant::of(&context).cloned();
        let data = (request.uri.len() <= 2048).then(|| json!({ "uri": request.uri }));
        let unknown = || {
            ErrorData::invalid_params(
                format!(
                    "unknown resource URI: this server serves several vaults, and a note's URI \
                     names its vault: `{SCHEME}VAULT/folder/Note.md` (vaults: {})",
                    self.names(grant.as_ref())
                ),
                data.clone(),
            )
        };
        let rest = request.uri.strip_prefix(SCHEME).ok_or_else(unknown)?;
        let (authority, path) = rest.split_once('/').ok_or_else(unknown)?;
        let name = percent_encoding::percent_decode_str(authority)
            .decode_utf8()
            .map_err(|_| unknown())?;
        let member = self
            .allowed(grant.as_ref())
            .find(|m| m.name == name)
            .ok_or_else(unknown)?;
        request.uri = format!("{URI_PREFIX}{path}");
        let reply = member.server.one_read_resource(request, context).await?;
        Ok(match reply {
            ReadResourceResponse::Complete(mut r) => {
                for c in &mut r.contents {
                    if let ResourceContents::TextResourceContents { uri, .. }
                    | ResourceContents::BlobResourceContents { uri, .. } = c
                    {
                        *uri = uri_in(&member.name, uri);
                    }
                }
                r.into()
            }
            other => other,
        })
    }

    pub(super) async fn list_prompts(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let grant = Grant::of(&context).cloned();
        let mut all = Vec::new();
        let mut any = false;
        for m in self.allowed(grant.as_ref()) {
            if !m.server.prompts_offered() {
                continue;
            }
            any = true;
            let list = m
                .server
                .one_list_prompts(None, context.clone())
                .await?
                .prompts;
            for mut p in list {
                p.name = format!("{}/{}", m.name, p.name);
                all.push(p);
            }
        }
        if !any {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        }
        let mut result = ListPromptsResult::with_all_items(all);
        result.result_type = Some(ResultType::COMPLETE);
        if context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28)
        {
            result.ttl_ms = Some(0);
            result.cache_scope = Some(rmcp::model::CacheScope::Private);
        }
        Ok(result)
    }

    pub(super) async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let grant = Grant::of(&context).cloned();
        let (vault, name) = request.name.split_once('/').ok_or_else(|| {
            ErrorData::invalid_params(
                "this server serves several vaults: a prompt's name starts with its vault's, \
                 `VAULT/name` (see prompts/list)",
                None,
            )
        })?;
        let member = self
            .allowed(grant.as_ref())
            .find(|m| m.name == vault && m.server.prompts_offered())
            .ok_or_else(|| ErrorData::invalid_params("no such prompt (see prompts/list)", None))?;
        request.name = name.to_owned();
        member.server.one_get_prompt(request, context).await
    }

    pub(super) async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        for m in &self.members {
            m.server.one_on_initialized(context.clone()).await;
        }
    }

    /// What `initialize` says: the vaults and how to name them.
    pub(super) fn instructions(&self) -> String {
        let list: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let mode = if m.server.writes_enabled() {
                    "read and write"
                } else {
                    "read-only"
                };
                format!("\"{}\" ({mode})", m.name)
            })
            .collect();
        let first = self.members[0].server.instructions();
        // The one-vault instructions say how notes are addressed; their first sentence names
        // the first vault only, and their resource URIs are a single vault's.
        let rest = first
            .split_once(". ")
            .map_or("", |(_, r)| r)
            .replace(&super::instructions::resources_sentence(), "");
        format!(
            "capvault serves {} Obsidian vaults: {}. Each is separate: pass `vault` (its name) \
             to every tool; `search_notes` and `vault_info` without it cover every vault, and \
             each hit names its vault. Notes as resources are `{SCHEME}VAULT/path`; prompts are \
             `VAULT/name`. {rest}",
            list.len(),
            list.join(", "),
        )
    }

    pub(super) fn prompts_offered(&self) -> (bool, bool) {
        let offered = self.members.iter().any(|m| m.server.prompts_offered());
        let changes = self.members.iter().any(|m| {
            m.server.prompts_offered() && m.server.engine.options().prompts.folder.is_some()
        });
        (offered, changes)
    }
}

/// One vault's answer to a tool call, as a boxed future: the call is made from several places
/// here, and one shared, boxed state machine keeps each of them small.
fn call_one<'a>(
    server: &'a CapvaultServer,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'a>,
> {
    Box::pin(server.one_call_tool(request, context))
}

/// The URI `uri` of a one-vault server (`capvault:///path`) as the vault `name`'s.
fn uri_in(name: &str, uri: &str) -> String {
    match uri.strip_prefix(URI_PREFIX) {
        Some(rest) => format!("{SCHEME}{name}/{rest}"),
        None => uri.to_owned(),
    }
}

/// A hit's score (0 without one).
fn score(hit: &Value) -> f64 {
    hit.get("score").and_then(Value::as_f64).unwrap_or(0.0)
}

/// `reply` with the vault it came from: in its structured part, and in the text the client
/// reads (an error's message starts with the vault's name).
fn tagged(mut reply: CallToolResult, vault: &str) -> CallToolResult {
    if reply.is_error == Some(true) {
        for c in &mut reply.content {
            if let Some(t) = c.as_text() {
                let text = format!("{} (vault `{vault}`)", t.text);
                *c = rmcp::model::ContentBlock::text(text);
            }
        }
        return reply;
    }
    let Some(Value::Object(mut map)) = reply.structured_content.take() else {
        return reply;
    };
    map.insert("vault".to_owned(), Value::String(vault.to_owned()));
    let mut rebuilt = CallToolResult::structured(Value::Object(map));
    rebuilt.meta = reply.meta.take();
    rebuilt.content.extend(reply.content.drain(..).skip(1));
    rebuilt
}

/// At most 64 bytes of a name a client sent, for an error message.
fn shorten(s: &str) -> &str {
    let mut end = s.len().min(64);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_folders_are_safe_in_uris_and_token_files() {
        assert_eq!(name_from_folder("Work"), "Work");
        assert_eq!(name_from_folder("My Vault (2026)"), "My-Vault-2026");
        assert_eq!(name_from_folder(".hidden"), "hidden");
        assert_eq!(name_from_folder("日本"), "vault");
        for n in ["Work", "My-Vault-2026", "a.b_c"] {
            assert!(valid_name(n), "{n}");
        }
        for n in ["", ".x", "a/b", "a b", "a:b", &"x".repeat(65)] {
            assert!(!valid_name(n), "{n}");
        }
    }

    #[test]
    fn a_tool_gets_a_vault_enum_required_unless_it_covers_every_vault() {
        let t = Tool::new(
            "read_note",
            "Read.",
            Arc::new(
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        );
        let v = with_vault(&t, &["Work", "Home"], true);
        assert_eq!(
            v.input_schema["properties"]["vault"]["enum"],
            json!(["Work", "Home"])
        );
        assert_eq!(v.input_schema["required"], json!(["path", "vault"]));
        let o = with_vault(&t, &["Work", "Home"], false);
        assert_eq!(o.input_schema["required"], json!(["path"]));
        let n = narrowed(&v, &|n| n == "Home").unwrap();
        assert_eq!(
            n.input_schema["properties"]["vault"]["enum"],
            json!(["Home"])
        );
        assert!(narrowed(&v, &|_| false).is_none());
    }

    #[test]
    fn uris_carry_the_vault_as_their_authority() {
        assert_eq!(
            uri_in("Work", "capvault:///a%20b.md"),
            "capvault://Work/a%20b.md"
        );
    }
}

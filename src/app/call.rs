//! `capvault call`: one tool, or the tool list, through a real MCP client in-process, with the
//! vault and options opened as `serve` opens them.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};

use super::cli::CallArgs;
use super::{build_server, connect_in_process, first_sentence};
use crate::engine::{Engine, EngineOptions};
use crate::notes::write::Writer;
use crate::server::ToolPolicy;
use crate::vault::host::Host;

/// `call`, its vault and options opened as `serve` opens them (before the runtime: the
/// `--semantic` download runs its own).
pub struct PreparedCall {
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: ToolPolicy,
    /// The tool and its arguments; `None` lists the tools.
    tool: Option<(String, Option<String>)>,
}

impl PreparedCall {
    /// Opens the vault and what the options name, as `serve` does.
    pub fn new(host: &Host, args: CallArgs) -> anyhow::Result<PreparedCall> {
        let CallArgs {
            options,
            tool,
            json_args,
            list,
        } = args;
        if tool.is_none() && !list {
            let vault = options
                .vault
                .vault
                .as_ref()
                .map_or_else(|| "VAULT".to_owned(), |v| v.display().to_string());
            bail!(
                "name a tool: `capvault call {vault} TOOL '{{...}}'`; `capvault call {vault} \
                 --list` lists them"
            );
        }
        let (opened, config) = options.open(host, false)?;
        if opened.writer.is_none()
            && let Some(flag) = options.write.write_only_flag()
        {
            anyhow::bail!("{flag} needs --write");
        }
        let engine_options = EngineOptions {
            finish_pdf_at_stop: true,
            ..options.engine_options(&config, EngineOptions::default())?
        };
        let engine = Engine::open(opened.vault, engine_options, opened.cache);
        if let Some(why) = opened.embedding_off {
            engine.set_embedding_unavailable(why);
        }
        if let Some(m) = opened.embedding {
            engine.share_embedding_model(m);
        }
        let tool = match (list, tool) {
            (true, _) | (false, None) => None,
            (false, Some(t)) => Some((t, json_args)),
        };
        Ok(PreparedCall {
            engine,
            writer: opened.writer,
            policy: opened.policy,
            tool,
        })
    }

    /// Runs the tool (or lists the tools) on stdout, then shuts the engine down.
    pub async fn run(self) -> anyhow::Result<()> {
        let mut out = std::io::stdout();
        let engine = Arc::clone(&self.engine);
        let done = match &self.tool {
            Some((tool, args)) => {
                call_tool(
                    Arc::clone(&self.engine),
                    self.writer,
                    &self.policy,
                    tool,
                    args.as_deref(),
                    &mut out,
                )
                .await
            }
            None => {
                list_tools(
                    Arc::clone(&self.engine),
                    self.writer,
                    &self.policy,
                    &mut out,
                )
                .await
            }
        };
        // The index cache is saved as `serve` saves it at its end.
        tokio::task::spawn_blocking(move || engine.shutdown()).await?;
        done
    }
}

/// Runs one tool against `engine`'s vault (writable with `writer`, the tools `policy` offers)
/// through a real MCP client in-process and writes its result as pretty JSON to `out`. A tool
/// error is returned as `Err` with the tool's message.
pub async fn call_tool(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
    tool: &str,
    args_json: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let args: Map<String, Value> = match args_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text).context("JSON_ARGS is not valid JSON")? {
            Value::Object(map) => map,
            _ => bail!("JSON_ARGS must be a JSON object, like '{{\"path\": \"Note.md\"}}'"),
        },
    };
    let server = build_server(&engine, writer, policy)?;
    let pdfs_matter = engine.pdfs().is_some() && PDF_TOOLS.contains(&tool);
    if pdfs_matter {
        // `--index-pdfs`: the PDFs' texts are read once the index is built (those an earlier
        // run saved in the index cache are taken from it).
        engine.start_pdf_indexer();
    }
    if tool == "search_notes" || pdfs_matter {
        // One-shot: build the index first so a ranked search uses it.
        let engine = Arc::clone(&engine);
        tokio::task::spawn_blocking(move || engine.ensure_built()).await?;
    }
    if pdfs_matter {
        wait_for_pdfs(&engine).await;
    }
    let client = connect_in_process(server, |s| s).await?;
    let tools = client.list_all_tools().await?;
    if !tools.iter().any(|t| t.name == tool) {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let _ = client.cancel().await;
        bail!("{}", unknown_tool(tool, &names));
    }
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await?;
    let _ = client.cancel().await;
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    if result.is_error == Some(true) {
        bail!("{tool} failed: {text}");
    }
    let shown = one_document(result.structured_content, &result.content);
    writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
    Ok(())
}

/// A tool's reply as one JSON document, so that `capvault call ... | jq` reads it: the
/// structured part, with any other text the reply carries (a PDF's pages, an SVG's markup, the
/// lines a client shows) as its `text` (`reply_text` when the structure has a `text` of its own;
/// a structure that is not an object goes under `result`). A reply without a structured part is
/// its text, parsed when it is JSON, else `{"text": ...}`.
fn one_document(structured: Option<Value>, content: &[rmcp::model::ContentBlock]) -> Value {
    let texts = content.iter().filter_map(|c| c.as_text()).map(|t| &t.text);
    let Some(v) = structured else {
        let text = texts.map(String::as_str).collect::<Vec<_>>().join("\n");
        return serde_json::from_str(&text).unwrap_or_else(|_| serde_json::json!({ "text": text }));
    };
    // The text block that repeats the structured part is left out.
    let others: Vec<&str> = texts
        .filter(|t| serde_json::from_str::<Value>(t).map_or(true, |parsed| parsed != v))
        .map(String::as_str)
        .collect();
    if others.is_empty() {
        return v;
    }
    let mut object = match v {
        Value::Object(m) => m,
        other => Map::from_iter([("result".to_owned(), other)]),
    };
    let key = if object.contains_key("text") {
        "reply_text"
    } else {
        "text"
    };
    object.insert(key.to_owned(), Value::String(others.join("\n")));
    Value::Object(object)
}

/// The refusal of a tool `names` does not hold: the closest names (a misspelling), else how to
/// list them; a write tool asked for without `--write` is told so.
fn unknown_tool(tool: &str, names: &[&str]) -> String {
    let known = crate::server::CapvaultServer::tool_names();
    if known.iter().any(|k| k == tool) {
        let writes = names.contains(&"edit_note");
        return if !writes && !crate::server::policy::read_tools().contains(tool) {
            format!("`{tool}` changes the vault: the write tools need --write")
        } else {
            format!(
                "`{tool}` is not offered with these options (--tools, or a feature it needs such \
                 as --semantic, leaves it out): `capvault call VAULT --list` lists what is"
            )
        };
    }
    let want = tool.to_ascii_lowercase();
    let mut close: Vec<(f64, &str)> = names
        .iter()
        .map(|n| {
            // A name that holds what was typed comes first (`tasks`, `list_task`).
            let score = if n.contains(want.as_str()) && want.len() >= 3 {
                1.0
            } else {
                strsim::jaro_winkler(&want, n)
            };
            (score, *n)
        })
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    close.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let close: Vec<String> = close
        .iter()
        .take(3)
        .map(|(_, n)| format!("`{n}`"))
        .collect();
    if close.is_empty() {
        format!("unknown tool `{tool}`: `capvault call VAULT --list` lists the tools")
    } else {
        format!(
            "unknown tool `{tool}`: did you mean {}? (`capvault call VAULT --list` lists the tools)",
            close.join(" or ")
        )
    }
}

/// The tools whose answer the PDFs' texts change (`--index-pdfs`).
const PDF_TOOLS: [&str; 2] = ["search_notes", "vault_info"];
/// Longest a one-shot call waits for the PDFs' texts before it answers without the rest.
const PDF_WAIT: Duration = Duration::from_secs(5);

/// Waits (at most [`PDF_WAIT`]) for the first pass over the vault's PDFs; says on stderr when
/// the call answers before it is done (the reply's `notes` say it too). The texts read by then
/// are saved in the index cache at the end, so the next call reads only the others.
async fn wait_for_pdfs(engine: &Engine) {
    let Some(store) = engine.pdfs() else { return };
    let until = tokio::time::Instant::now() + PDF_WAIT;
    while !store.first_pass_done() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Some(note) = store.unread_note() {
        eprintln!(
            "capvault: {note} (answered after waiting {} s; with an index cache, the texts read \
             so far are kept for the next call)",
            PDF_WAIT.as_secs()
        );
    }
}

/// Writes the tools a server on `engine` (writable with `writer`, under `policy`) lists, one
/// line each: the name as listed and the first sentence of its description.
pub async fn list_tools(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let server = build_server(&engine, writer, policy)?;
    let client = connect_in_process(server, |s| s).await?;
    let tools = client.list_all_tools().await;
    let _ = client.cancel().await;
    for t in tools? {
        writeln!(
            out,
            "{:<22} {}",
            t.name,
            first_sentence(t.description.as_deref().unwrap_or_default())
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_tool_gets_the_closest_names_not_the_whole_list() {
        let names = [
            "list_notes",
            "list_tags",
            "list_tasks",
            "read_note",
            "search_notes",
            "set_task_status",
            "vault_info",
        ];
        let said = unknown_tool("serch_notes", &names);
        assert!(said.contains("did you mean `search_notes`?"), "{said}");
        assert!(!said.contains("vault_info"), "{said}");
        let said = unknown_tool("tasks", &names);
        assert!(said.contains("`list_tasks`"), "{said}");
        let said = unknown_tool("list_task", &names);
        assert!(said.contains("did you mean `list_tasks`"), "{said}");
        let said = unknown_tool("zzz", &names);
        assert!(
            !said.contains("did you mean") && said.contains("--list"),
            "{said}"
        );
        // A write tool without --write: said so, not "unknown".
        let said = unknown_tool("edit_note", &names);
        assert!(said.contains("need --write"), "{said}");
        let said = unknown_tool("get_links", &names);
        assert!(
            said.contains("not offered") && !said.contains("--write"),
            "{said}"
        );
    }

    #[test]
    fn a_reply_with_text_beside_its_structure_is_one_json_document() {
        let v = serde_json::json!({"items": [1], "total": 1});
        let lines = rmcp::model::ContentBlock::text("1 of 1 tasks\n- [ ] milk");
        let repeat = rmcp::model::ContentBlock::text(v.to_string());
        let doc = one_document(Some(v.clone()), &[repeat.clone(), lines]);
        assert_eq!(doc["items"], serde_json::json!([1]));
        assert_eq!(doc["text"], "1 of 1 tasks\n- [ ] milk");
        assert_eq!(one_document(Some(v.clone()), &[repeat]), v);
        let has_text = serde_json::json!({"text": "own"});
        let doc = one_document(Some(has_text), &[rmcp::model::ContentBlock::text("more")]);
        assert_eq!(
            (doc["text"].as_str(), doc["reply_text"].as_str()),
            (Some("own"), Some("more"))
        );
        let plain = one_document(None, &[rmcp::model::ContentBlock::text("not json")]);
        assert_eq!(plain, serde_json::json!({"text": "not json"}));
    }
}

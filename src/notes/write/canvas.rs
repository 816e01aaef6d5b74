//! `create_canvas` and `edit_canvas`: JSON Canvas files built or changed through
//! [`crate::obsidian::canvas_edit`], validated before they are written.

use serde_json::{Map, Value};

use super::{Change, WriteResult, Writer, check_version, read_current};
use crate::engine::Engine;
use crate::notes::{NoteError, sha256_hex};
use crate::obsidian::canvas_edit::{self, CanvasEditError, CanvasOp};
use crate::vault::{VaultError, VaultPath};

/// Most operations in one `edit_canvas` call.
pub const MAX_CANVAS_OPS: usize = 1000;

/// The canvas a tool names: `.canvas` added when the path has no extension.
pub fn canvas_path(input: &str) -> Result<VaultPath, NoteError> {
    let typed = VaultPath::parse(input)?;
    match typed.extension() {
        Some("canvas") => Ok(typed),
        None => Ok(VaultPath::parse(&format!("{typed}.canvas"))?),
        Some(_) => Err(NoteError::invalid(
            "path",
            format!("{typed}: a canvas path ends with .canvas"),
        )),
    }
}

/// The existing canvas `path` (as [`canvas_path`] parsed it) names: itself, else a bare name or
/// partial path resolved as a link from the vault root (misses get suggestions).
fn existing_canvas_path(engine: &Engine, path: &VaultPath) -> Result<VaultPath, NoteError> {
    if read_current(engine.vault(), path)?.is_some() {
        return Ok(path.clone());
    }
    let model = engine.model()?;
    crate::notes::locate::locate_in(&model, path.as_str(), path)
}

/// Ids as Obsidian makes them: 16 hexadecimal digits, unique in practice.
fn id_maker(seed: &str) -> impl FnMut() -> String {
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{seed}{start}{}", std::process::id());
    let mut n = 0u64;
    move || {
        n += 1;
        sha256_hex(format!("{seed}/{n}").as_bytes())[..16].to_owned()
    }
}

/// The refusal of a canvas change given by the argument `param` (`canvas` or `ops`).
fn canvas_error(path: &VaultPath, e: CanvasEditError, param: &'static str) -> NoteError {
    NoteError::invalid(param, format!("{path}: {e}; nothing was changed"))
}

/// What `create_canvas` asks.
#[derive(Debug, Clone)]
pub struct CanvasRequest {
    /// The new canvas, as [`canvas_path`] parsed it.
    pub path: VaultPath,
    /// `{"nodes": [...], "edges": [...]}`.
    pub canvas: Map<String, Value>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `create_canvas`: a new canvas file from `{nodes, edges}` (fails if one exists).
pub fn create_canvas(
    writer: &Writer,
    engine: &Engine,
    req: &CanvasRequest,
) -> Result<WriteResult, NoteError> {
    let (path, canvas, dry_run) = (req.path.clone(), &req.canvas, req.dry_run);
    let mut held = writer.hold(engine)?;
    if read_current(engine.vault(), &path)?.is_some() {
        return Err(VaultError::Exists(path).into());
    }
    let text = canvas_edit::build(canvas, id_maker(path.as_str()))
        .map_err(|e| canvas_error(&path, e, "canvas"))?;
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "create_canvas",
            path: &path,
            before: None,
            new: text.into_bytes(),
            dry_run,
        },
    )
}

/// What `edit_canvas` asks.
#[derive(Debug, Clone)]
pub struct EditCanvasRequest {
    /// The canvas, as [`canvas_path`] parsed it.
    pub path: VaultPath,
    /// The operations, in order, all or none.
    pub ops: Vec<CanvasOp>,
    /// Its version as read, when given.
    pub if_match: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `edit_canvas`: nodes and edges added, updated or removed, all or none.
pub fn edit_canvas(
    writer: &Writer,
    engine: &Engine,
    req: &EditCanvasRequest,
) -> Result<WriteResult, NoteError> {
    let path = existing_canvas_path(engine, &req.path)?;
    let (ops, if_match, dry_run) = (&req.ops, req.if_match.as_deref(), req.dry_run);
    if ops.is_empty() || ops.len() > MAX_CANVAS_OPS {
        return Err(NoteError::invalid(
            "ops",
            format!("ops must hold 1 to {MAX_CANVAS_OPS} operations"),
        ));
    }
    let mut held = writer.hold(engine)?;
    let Some(current) = read_current(engine.vault(), &path)? else {
        return Err(VaultError::NotFound(path).into());
    };
    check_version(&path, &current, if_match)?;
    let text = canvas_edit::apply(&current.bytes, ops, id_maker(path.as_str()))
        .map_err(|e| canvas_error(&path, e, "ops"))?;
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "edit_canvas",
            path: &path,
            before: Some(&current),
            new: text.into_bytes(),
            dry_run,
        },
    )
}

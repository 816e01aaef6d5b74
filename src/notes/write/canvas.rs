//! `create_canvas` and `edit_canvas`: JSON Canvas files built or changed through
//! [`crate::obsidian::canvas_edit`], validated before they are written.

use serde_json::{Map, Value};

use super::{WriteResult, Writer, check_version, read_current};
use crate::engine::Engine;
use crate::notes::{NoteError, sha256_hex};
use crate::obsidian::canvas_edit::{self, CanvasEditError, CanvasOp};
use crate::vault::{VaultError, VaultPath};

/// Most operations in one `edit_canvas` call.
pub const MAX_CANVAS_OPS: usize = 1000;

/// The canvas a tool names: `.canvas` added when the path has no extension.
fn canvas_path(input: &str) -> Result<VaultPath, NoteError> {
    let typed = VaultPath::parse(input)?;
    match typed.extension() {
        Some("canvas") => Ok(typed),
        None => Ok(VaultPath::parse(&format!("{typed}.canvas"))?),
        Some(_) => Err(NoteError::InvalidArgument(format!(
            "{typed}: a canvas path ends with .canvas"
        ))),
    }
}

/// The existing canvas `input` names: the typed path (`.canvas` added when left out), else
/// a bare name or partial path resolved as a link from the vault root (misses get suggestions).
fn existing_canvas_path(engine: &Engine, input: &str) -> Result<VaultPath, NoteError> {
    let path = canvas_path(input)?;
    if read_current(engine.vault(), &path)?.is_some() {
        return Ok(path);
    }
    let model = engine.model()?;
    crate::notes::locate::locate_in(&model, path.as_str(), &path)
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

fn canvas_error(path: &VaultPath, e: CanvasEditError) -> NoteError {
    NoteError::InvalidArgument(format!("{path}: {e}; nothing was changed"))
}

/// `create_canvas`: a new canvas file from `{nodes, edges}` (fails if one exists).
pub fn create_canvas(
    writer: &Writer,
    engine: &Engine,
    path: &str,
    canvas: &Map<String, Value>,
    dry_run: bool,
) -> Result<WriteResult, NoteError> {
    let path = canvas_path(path)?;
    let mut held = writer.hold()?;
    if read_current(engine.vault(), &path)?.is_some() {
        return Err(VaultError::Exists(path).into());
    }
    let text =
        canvas_edit::build(canvas, id_maker(path.as_str())).map_err(|e| canvas_error(&path, e))?;
    writer.commit(
        engine,
        &mut held,
        "create_canvas",
        &path,
        None,
        text.into_bytes(),
        dry_run,
    )
}

/// `edit_canvas`: nodes and edges added, updated or removed, all or none.
pub fn edit_canvas(
    writer: &Writer,
    engine: &Engine,
    path: &str,
    ops: &[CanvasOp],
    if_match: Option<&str>,
    dry_run: bool,
) -> Result<WriteResult, NoteError> {
    let path = existing_canvas_path(engine, path)?;
    if ops.is_empty() || ops.len() > MAX_CANVAS_OPS {
        return Err(NoteError::InvalidArgument(format!(
            "ops must hold 1 to {MAX_CANVAS_OPS} operations"
        )));
    }
    let mut held = writer.hold()?;
    let Some(current) = read_current(engine.vault(), &path)? else {
        return Err(VaultError::NotFound(path).into());
    };
    check_version(&path, &current, if_match)?;
    let text = canvas_edit::apply(&current.bytes, ops, id_maker(path.as_str()))
        .map_err(|e| canvas_error(&path, e))?;
    writer.commit(
        engine,
        &mut held,
        "edit_canvas",
        &path,
        Some(&current),
        text.into_bytes(),
        dry_run,
    )
}

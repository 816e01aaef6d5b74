//! `move_note`: a note, attachment or folder moved (never over anything), and every link that
//! resolved to what moved rewritten so it still does.
//!
//! Which links change: every link in every note is resolved as it is now and as it would be
//! after the move (the model's file index, cloned, with the moved paths swapped; the linking
//! note at its own new place if it moved too). A link that resolved to a file and would no
//! longer reach the same file (at its new path, for a moved one) is rewritten; every other
//! byte stays, so `[[Note]]` is left alone when the bare name still finds the moved note, and a
//! broken link stays broken. A rewritten link keeps its kind (`[[...]]`, `![[...]]`, a Markdown
//! link, a link in a property), its `#heading`, `#^block`, `|alias` or text; its new target is
//! written as the vault's `newLinkFormat` says (shortest, relative, absolute) and checked to
//! resolve to the right file, falling back to the full path. Markdown links stay URL-encoded.
//! Canvas file nodes naming a moved file get its new path.

use std::collections::{BTreeMap, HashMap, HashSet};

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use schemars::JsonSchema;
use serde::Serialize;

use super::{Current, Writer, read_current, unified_diff};
use crate::engine::Engine;
use crate::markdown::{LinkKind, parse_note};
use crate::model::Model;
use crate::model::linkres::{FileIndex, Resolution};
use crate::notes::NoteError;
use crate::notes::settings::load_settings;
use crate::obsidian::config::NewLinkFormat;
use crate::vault::{Entry, Expect, MAX_WRITE_DEPTH, Vault, VaultError, VaultPath};

/// Most files a folder move takes.
const MAX_MOVED_FILES: usize = 100_000;
/// Most files one move rewrites links in.
const MAX_RELINKED_FILES: usize = 20_000;

/// What a Markdown link target encodes (as Obsidian writes them: spaces and the characters
/// that end or split a link destination).
const MD_TARGET: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'%')
    .add(b'(')
    .add(b')')
    .add(b'<')
    .add(b'>')
    .add(b'#')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'^')
    .add(b'|');

/// One file whose links a move rewrote (or would).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MovedLinks {
    /// The file, at its path after the move.
    pub path: String,
    /// How many links were rewritten in it.
    pub links: usize,
    /// Its new version (absent for a dry run or a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why it was not rewritten (it changed meanwhile...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reply of `move_note`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MoveResult {
    /// Where it was.
    pub from: String,
    /// Where it is now.
    pub to: String,
    /// Files moved (1 for a file; every file of a folder).
    pub files_moved: usize,
    /// Links rewritten in all.
    pub links_updated: usize,
    /// The files whose links were rewritten.
    pub changed: Vec<MovedLinks>,
    /// True when nothing was changed.
    pub dry_run: bool,
    /// For a dry run: the diffs of the link rewrites (cut at 64 KiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// A rewrite planned in one file.
struct Plan {
    /// Where the file will be.
    after: VaultPath,
    current: Current,
    new_text: String,
    links: usize,
}

/// What `move_note` asks. `to` is parsed by the move itself, once it knows what `from` is (a
/// file's extension carries over to a `to` without one).
#[derive(Debug, Clone)]
pub struct MoveRequest {
    /// The note, attachment or folder to move.
    pub from: super::EntryName,
    /// The new path, as typed.
    pub to: String,
    /// Rewrite the links to it.
    pub update_links: bool,
    /// Change nothing; return the diffs.
    pub dry_run: bool,
}

/// `move_note`.
pub fn move_note(
    writer: &Writer,
    engine: &Engine,
    req: &MoveRequest,
) -> Result<MoveResult, NoteError> {
    let vault = engine.vault();
    let (update_links, dry_run) = (req.update_links, req.dry_run);
    if req.from.path.is_root() {
        return Err(NoteError::invalid("from", "the vault root cannot be moved"));
    }
    let held = writer.hold(engine)?;
    let (from, entry) = super::existing_entry(engine, &req.from)?;
    // Moved, counted, rewritten, asked about and logged where they really are: a folder named
    // through an in-vault symlink (`plink/sub`, `plink -> Projects`) is `Projects/sub`, whose
    // notes the model knows.
    let from = vault.real_path(&from)?;
    let mut to = VaultPath::parse(&req.to)?;
    match vault.real_path(&to) {
        Ok(real) => to = real,
        // Folders that do not exist yet are made where the path says.
        Err(VaultError::NotFound(_) | VaultError::NotAFolder(_)) => {}
        Err(e) => return Err(e.into()),
    }
    if to.is_root() {
        return Err(NoteError::invalid("to", "`to` is empty"));
    }
    if matches!(entry, Entry::File(_)) && from.extension().is_some() && to.extension().is_none() {
        to = VaultPath::parse(&format!("{to}.{}", from.extension().unwrap_or("md")))?;
    }
    if to.starts_with(&from) {
        return Err(NoteError::invalid(
            "to",
            format!("{from} cannot be moved into itself ({to})"),
        ));
    }
    if vault.entry(&to)?.is_some() {
        return Err(VaultError::Exists(to).into());
    }
    let depth = to.components().count();
    if depth > MAX_WRITE_DEPTH {
        return Err(super::too_deep(&to));
    }
    if entry == Entry::Folder {
        check_folder_move(vault, &from, &to, MAX_WRITE_DEPTH - depth)?;
    }
    let (moved, plans) = {
        let model = engine.model()?;
        let moved = moved_paths(&model, &from, &to, entry)?;
        let plans = if update_links {
            plan_rewrites(engine, &model, &moved)?
        } else {
            Vec::new()
        };
        (moved, plans)
    };
    let mut result = MoveResult {
        from: from.to_string(),
        to: to.to_string(),
        files_moved: moved.len(),
        links_updated: plans.iter().map(|p| p.links).sum(),
        changed: plans
            .iter()
            .map(|p| MovedLinks {
                path: p.after.to_string(),
                links: p.links,
                sha256: None,
                error: None,
            })
            .collect(),
        dry_run,
        diff: None,
    };
    if dry_run {
        let mut diff = String::new();
        for p in &plans {
            let old = String::from_utf8_lossy(&p.current.bytes);
            diff.push_str(&unified_diff(p.after.as_str(), Some(&old), &p.new_text));
            if diff.len() > super::MAX_DIFF_BYTES {
                break;
            }
        }
        result.diff = Some(cut(diff));
        return Ok(result);
    }
    let _held = held;
    // A moved note's own version is kept, so its old path has a history too.
    if let Entry::File(_) = entry
        && let Some(c) = read_current(vault, &from)?
    {
        writer.keep("move_note", from.as_str(), &c)?;
    }
    if let Some(parent) = to.parent()
        && !parent.is_root()
    {
        vault.create_folders(&parent)?;
    }
    vault.move_entry(&from, &to, None)?;
    writer.audit("move_note", from.as_str(), None, None, Some(to.as_str()));
    let mut synced: Vec<VaultPath> = vec![from.clone(), to.clone()];
    for (p, out) in plans.iter().zip(result.changed.iter_mut()) {
        let written = writer
            .keep("move_note", p.after.as_str(), &p.current)
            .and_then(|()| {
                vault
                    .write_file(
                        &p.after,
                        p.new_text.as_bytes(),
                        &Expect::Version(p.current.sha256.clone()),
                    )
                    .map_err(NoteError::from)
            });
        match written {
            Ok(w) => {
                writer.audit(
                    "move_note",
                    p.after.as_str(),
                    Some(&p.current.sha256),
                    Some(&w.sha256),
                    None,
                );
                out.sha256 = Some(w.sha256);
                if !p.after.starts_with(&to) {
                    synced.push(p.after.clone());
                }
            }
            Err(e) => {
                out.error = Some(e.to_string());
            }
        }
    }
    engine.sync_all(&synced)?;
    result.links_updated = result
        .changed
        .iter()
        .filter(|c| c.error.is_none())
        .map(|c| c.links)
        .sum();
    Ok(result)
}

/// Refuses to move the folder `from` to `to` when the move would change what the client can
/// see: an entry in it is hidden or excluded (it would go along unseen, and an excluded one
/// could come out from under its exclusion), or an entry would be excluded at `to`; or when
/// its files would end up deeper than the depth limit.
fn check_folder_move(
    vault: &Vault,
    from: &VaultPath,
    to: &VaultPath,
    max_depth: usize,
) -> Result<(), NoteError> {
    let survey = vault.survey_folder(from, Some(to), max_depth)?;
    if survey.too_many {
        return Err(NoteError::TooLarge(format!(
            "{from} holds too many entries to check; nothing was moved"
        )));
    }
    if survey.unseen > 0 {
        return Err(NoteError::Refused(format!(
            "{from} holds {} hidden or excluded entries that this server does not show; moving \
             it would move them too, so nothing was moved",
            survey.unseen
        )));
    }
    if survey.excluded_at_destination > 0 {
        return Err(NoteError::Refused(format!(
            "moving {from} to {to} would put {} of its entries under the server's exclusions; \
             nothing was moved",
            survey.excluded_at_destination
        )));
    }
    if survey.too_deep {
        return Err(super::too_deep(to));
    }
    Ok(())
}

fn cut(mut text: String) -> String {
    if text.len() > super::MAX_DIFF_BYTES {
        let mut at = super::MAX_DIFF_BYTES;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push_str("\n[diff cut at 64 KiB]\n");
    }
    text
}

/// Every file that moves, old path to new.
fn moved_paths(
    model: &Model,
    from: &VaultPath,
    to: &VaultPath,
    entry: Entry,
) -> Result<BTreeMap<VaultPath, VaultPath>, NoteError> {
    let mut moved = BTreeMap::new();
    match entry {
        Entry::File(_) => {
            moved.insert(from.clone(), to.clone());
        }
        Entry::Folder => {
            for p in model.files().range(from.clone()..).map(|(p, _)| p) {
                if !p.starts_with(from) {
                    if p.as_str() > from.as_str() && !p.as_str().starts_with(from.as_str()) {
                        break;
                    }
                    continue;
                }
                let rest = &p.as_str()[from.as_str().len() + 1..];
                let new = VaultPath::parse(&format!("{to}/{rest}"))?;
                moved.insert(p.clone(), new);
                if moved.len() > MAX_MOVED_FILES {
                    return Err(NoteError::TooLarge(format!(
                        "{from} holds more than {MAX_MOVED_FILES} files: too many to move at once"
                    )));
                }
            }
        }
    }
    Ok(moved)
}

/// The rewrites a move needs, file by file (read from the disk now, so positions are exact).
fn plan_rewrites(
    engine: &Engine,
    model: &Model,
    moved: &BTreeMap<VaultPath, VaultPath>,
) -> Result<Vec<Plan>, NoteError> {
    let vault = engine.vault();
    let format = load_settings(vault).app.new_link_format;
    let mut after = model.file_index().clone();
    for (old, new) in moved {
        after.remove(old);
        after.insert(new);
    }
    // The link names that can find a moved file, before or after.
    let mut names: HashSet<String> = HashSet::new();
    for (old, new) in moved {
        names.extend(FileIndex::file_name_keys(old.file_name()));
        names.extend(FileIndex::file_name_keys(new.file_name()));
    }
    // The notes that can hold such a link, and the moved notes (their own relative links).
    let mut sources: std::collections::BTreeSet<&VaultPath> = std::collections::BTreeSet::new();
    for name in &names {
        sources.extend(model.notes_linking_name(name));
    }
    sources.extend(moved.keys().filter(|p| model.note(p).is_some()));
    let mut plans = Vec::new();
    for src in sources {
        let src_after = moved.get(src).unwrap_or(src).clone();
        let Some(current) = read_current(vault, src)? else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(&current.bytes) else {
            continue;
        };
        let parsed = parse_note(text);
        let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
        for link in &parsed.links {
            if link.target().trim().is_empty() {
                continue;
            }
            let Resolution::Found { path: before, .. } = model.resolve(link.target(), Some(src))
            else {
                continue;
            };
            let want = moved.get(&before).unwrap_or(&before);
            let now = match after.resolve(link.target(), Some(&src_after)) {
                Resolution::Found { path, .. } => Some(path),
                Resolution::NotFound => None,
            };
            if now.as_ref() == Some(want) {
                continue;
            }
            let raw = &text[link.pos.range()];
            let markdown = !raw.starts_with("[[") && !raw.starts_with("![[");
            let keep_md = link.target().to_ascii_lowercase().ends_with(".md");
            let target = new_target(want, &src_after, &after, format, markdown, keep_md);
            if let Some(new_raw) = rewrite_raw(raw, link.kind, &target) {
                edits.push((link.pos.range(), new_raw));
            }
        }
        if edits.is_empty() {
            continue;
        }
        let new_text = splice(text, &edits);
        plans.push(Plan {
            after: src_after,
            current,
            new_text,
            links: edits.len(),
        });
        if plans.len() > MAX_RELINKED_FILES {
            return Err(NoteError::TooLarge(format!(
                "the move would rewrite links in more than {MAX_RELINKED_FILES} files; \
                 pass update_links = false, or move less at once"
            )));
        }
    }
    plans.extend(plan_canvases(engine, model, moved)?);
    Ok(plans)
}

/// Canvas file nodes naming a moved file.
fn plan_canvases(
    engine: &Engine,
    model: &Model,
    moved: &BTreeMap<VaultPath, VaultPath>,
) -> Result<Vec<Plan>, NoteError> {
    let mut plans = Vec::new();
    let by_name: HashMap<&str, &VaultPath> = moved.iter().map(|(o, n)| (o.as_str(), n)).collect();
    for path in model
        .files()
        .keys()
        .filter(|p| p.extension() == Some("canvas"))
    {
        let Some(current) = read_current(engine.vault(), path)? else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(&current.bytes) else {
            continue;
        };
        let edits = canvas_file_values(text)
            .into_iter()
            .filter_map(|(range, value)| {
                by_name.get(value.as_str()).map(|new| {
                    (
                        range,
                        serde_json::to_string(new.as_str()).unwrap_or_default(),
                    )
                })
            })
            .collect::<Vec<_>>();
        if edits.is_empty() {
            continue;
        }
        let after = moved.get(path).unwrap_or(path).clone();
        plans.push(Plan {
            after,
            links: edits.len(),
            new_text: splice(text, &edits),
            current,
        });
    }
    Ok(plans)
}

/// The JSON string values of `"file"` keys in a canvas, with their byte ranges (quotes
/// included).
fn canvas_file_values(text: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = memchr::memmem::find(&b[from..], b"\"file\"") {
        let mut at = from + i + 6;
        from = at;
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        if b.get(at) != Some(&b':') {
            continue;
        }
        at += 1;
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        if b.get(at) != Some(&b'"') {
            continue;
        }
        let start = at;
        at += 1;
        while at < b.len() && b[at] != b'"' {
            at += if b[at] == b'\\' { 2 } else { 1 };
        }
        if at >= b.len() {
            break;
        }
        let end = at + 1;
        if let Ok(value) = serde_json::from_str::<String>(&text[start..end]) {
            out.push((start..end, value));
        }
        from = end;
    }
    out
}

/// `text` with each range replaced (ranges sorted and disjoint).
fn splice(text: &str, edits: &[(std::ops::Range<usize>, String)]) -> String {
    let mut sorted: Vec<&(std::ops::Range<usize>, String)> = edits.iter().collect();
    sorted.sort_by_key(|e| e.0.start);
    let mut out = String::with_capacity(text.len() + 64);
    let mut at = 0;
    for (range, with) in sorted {
        if range.start < at {
            continue;
        }
        out.push_str(&text[at..range.start]);
        out.push_str(with);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The target to write for a link from `src` to `want` after the move, in the vault's format,
/// checked to resolve to `want` (the full path otherwise).
fn new_target(
    want: &VaultPath,
    src: &VaultPath,
    after: &FileIndex,
    format: NewLinkFormat,
    markdown: bool,
    keep_md: bool,
) -> String {
    let is_note = want.extension() == Some("md");
    let shown = |p: &str| -> String {
        if is_note && !markdown && !keep_md {
            p.strip_suffix(".md").unwrap_or(p).to_owned()
        } else {
            p.to_owned()
        }
    };
    let full = want.as_str();
    let mut candidates = Vec::new();
    match format {
        NewLinkFormat::Shortest => {
            candidates.push(shown(want.file_name()));
            candidates.push(shown(full));
        }
        NewLinkFormat::Relative => {
            candidates.push(shown(&relative(src, want)));
            candidates.push(shown(full));
        }
        NewLinkFormat::Absolute => candidates.push(shown(full)),
    }
    for c in candidates {
        let decoded = c.clone();
        if matches!(after.resolve(&decoded, Some(src)), Resolution::Found { ref path, .. } if path == want)
        {
            return c;
        }
    }
    full.to_owned()
}

/// `want` relative to the folder of `src` (`../B/Note.md`, `./Note.md`).
fn relative(src: &VaultPath, want: &VaultPath) -> String {
    let parent = src.parent().unwrap_or_else(VaultPath::root);
    let from: Vec<&str> = parent.components().collect();
    let to: Vec<&str> = want.components().collect();
    let common = from
        .iter()
        .zip(&to)
        .take_while(|(a, b)| a == b)
        .count()
        .min(to.len().saturating_sub(1));
    let ups = from.len() - common;
    let mut out = if ups == 0 {
        "./".to_owned()
    } else {
        "../".repeat(ups)
    };
    out.push_str(&to[common..].join("/"));
    out
}

/// The link `raw` with its target replaced by `target`, everything else kept; `None` when it
/// cannot be done safely (then the link is left as it is).
fn rewrite_raw(raw: &str, kind: LinkKind, target: &str) -> Option<String> {
    let wiki_open = if raw.starts_with("![[") {
        Some(3)
    } else if raw.starts_with("[[") {
        Some(2)
    } else {
        None
    };
    if let Some(open) = wiki_open {
        let inner = raw.get(open..raw.len().checked_sub(2)?)?;
        if !raw.ends_with("]]") || target.contains(['[', ']', '|', '#', '^']) {
            return None;
        }
        if kind == LinkKind::Frontmatter && target.contains(['"', '\'']) {
            return None;
        }
        let end = inner.find(['#', '|', '\\']).unwrap_or(inner.len());
        return Some(format!("{}{}{}]]", &raw[..open], target, &inner[end..]));
    }
    // A Markdown link: `[text](dest "title")` or `![alt](<dest>)`.
    if !raw.ends_with(')') {
        return None;
    }
    let open = raw.rfind("](")? + 2;
    let dest_all = &raw[open..raw.len() - 1];
    let lead = dest_all.len() - dest_all.trim_start().len();
    let dest_all = dest_all.trim_start();
    let (token, rest) = if let Some(inside) = dest_all.strip_prefix('<') {
        let close = inside.find('>')?;
        (&dest_all[..close + 2], &dest_all[close + 2..])
    } else {
        let end = dest_all.find(char::is_whitespace).unwrap_or(dest_all.len());
        (&dest_all[..end], &dest_all[end..])
    };
    let angled = token.starts_with('<');
    let bare = if angled {
        &token[1..token.len() - 1]
    } else {
        token
    };
    let fragment = bare.find('#').map_or("", |i| &bare[i..]);
    let path_part = &bare[..bare.len() - fragment.len()];
    // Each link keeps its own style: `<a b.md>` with raw spaces stays raw (only what would end
    // or split it is encoded), `a%20b.md` or `<a%20b.md>` stays percent-encoded.
    let new_token = if angled && !path_part.contains('%') {
        format!("<{}{fragment}>", encode_angled(target))
    } else if angled {
        format!("<{}{fragment}>", utf8_percent_encode(target, MD_TARGET))
    } else {
        format!("{}{fragment}", utf8_percent_encode(target, MD_TARGET))
    };
    Some(format!("{}{new_token}{rest})", &raw[..open + lead]))
}

/// `target` for a `<...>` destination written with raw spaces: `%`, `<`, `>`, `#` and control
/// characters are encoded, everything else is written as it is.
fn encode_angled(target: &str) -> String {
    let mut out = String::with_capacity(target.len());
    for c in target.chars() {
        if c.is_control() || matches!(c, '%' | '<' | '>' | '#' | '\\') {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_link_keeps_its_kind_subpath_alias_and_encoding() {
        let w = LinkKind::Wikilink;
        assert_eq!(
            rewrite_raw("[[Old#H|alias]]", w, "New/Note").unwrap(),
            "[[New/Note#H|alias]]"
        );
        assert_eq!(
            rewrite_raw("![[img.png|100]]", LinkKind::Embed, "a/img.png").unwrap(),
            "![[a/img.png|100]]"
        );
        assert_eq!(rewrite_raw("[[Old#^b1]]", w, "N").unwrap(), "[[N#^b1]]");
        assert_eq!(rewrite_raw("[[Old\\|x]]", w, "N").unwrap(), "[[N\\|x]]");
        assert_eq!(
            rewrite_raw(
                "[see](Old%20One.md#Part \"t\")",
                LinkKind::Markdown,
                "B/New One.md"
            )
            .unwrap(),
            "[see](B/New%20One.md#Part \"t\")"
        );
        // Angle brackets with raw spaces stay raw; an encoded one stays encoded.
        assert_eq!(
            rewrite_raw("![a](<x y.png>)", LinkKind::Embed, "z w.png").unwrap(),
            "![a](<z w.png>)"
        );
        assert_eq!(
            rewrite_raw(
                "[angled](<References/Steph Ango.md>)",
                LinkKind::Markdown,
                "People/Stephan Ango.md"
            )
            .unwrap(),
            "[angled](<People/Stephan Ango.md>)"
        );
        assert_eq!(
            rewrite_raw("[a](<x%20y.md#H>)", LinkKind::Markdown, "z w.md").unwrap(),
            "[a](<z%20w.md#H>)"
        );
        assert_eq!(
            rewrite_raw("[a](<x y.md>)", LinkKind::Markdown, "50% <off>.md").unwrap(),
            "[a](<50%25 %3Coff%3E.md>)"
        );
        assert_eq!(rewrite_raw("[[Old]]", LinkKind::Frontmatter, "a\"b"), None);
    }

    #[test]
    fn relative_targets_climb_and_descend() {
        let p = |s: &str| VaultPath::parse(s).unwrap();
        assert_eq!(relative(&p("A/B/n.md"), &p("A/C/x.md")), "../C/x.md");
        assert_eq!(relative(&p("n.md"), &p("A/x.md")), "./A/x.md");
        assert_eq!(relative(&p("A/n.md"), &p("A/x.md")), "./x.md");
        assert_eq!(relative(&p("A/n.md"), &p("x.md")), "../x.md");
    }

    #[test]
    fn canvas_file_values_are_found_with_their_exact_ranges() {
        let t = r#"{"nodes":[{"id":"a","type":"file", "file" : "A/N\"q.md"},{"file":"B.md"}]}"#;
        let found = canvas_file_values(t);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].1, "A/N\"q.md");
        assert_eq!(&t[found[1].0.clone()], "\"B.md\"");
    }
}

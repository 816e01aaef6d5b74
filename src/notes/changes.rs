//! `changes_since`: the notes created, changed, moved and deleted since a cursor or a moment,
//! from the engine's change log ([`crate::engine::changes`]), one item per note, oldest first,
//! paged, with a bounded unified diff where both versions are known.
//!
//! One page folds the entries it covers per note: a note created then edited is one `created`;
//! edited then moved, one `moved` (with the diff); created then deleted, nothing; a note deleted
//! and another created with the same content, one `moved`. Every rule of the vault applies to
//! every field: a path under an exclusion (`--exclude`, Obsidian's Excluded files) is never
//! shown, so a move out of sight reads as a deletion and one into sight as a creation (hidden
//! paths never reach the log).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use super::NoteError;
use crate::engine::Engine;
use crate::engine::changes::{ChangeEntry, ChangeKind, CursorError, Sha, sha_hex, sha_of};
use crate::obsidian::periodic;
use crate::vault::VaultPath;

/// Items per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 50;
/// Most items per page.
pub const MAX_LIMIT: usize = 200;
/// Most log entries one call reads (a page then ends early, with `more`).
pub const MAX_SCANNED: usize = 20_000;
/// Longest diff of one note, in bytes (cut at a line, marked).
pub const MAX_DIFF: usize = 4 * 1024;
/// Most diff bytes in one reply; later notes get none.
pub const MAX_DIFFS: usize = 48 * 1024;
/// How long one diff may compute before it settles for a coarser one.
const DIFF_TIME: Duration = Duration::from_millis(50);
/// Longest `since` or `cursor` accepted.
const MAX_ARG: usize = 64;

/// A `changes_since` request.
#[derive(Debug, Default)]
pub struct ChangesRequest {
    /// A cursor from an earlier reply or `vault_info`.
    pub cursor: Option<String>,
    /// A moment: RFC 3339, a date (that day's start, local time), or an age (`90m`, `24h`, `7d`).
    pub since: Option<String>,
    /// Only notes in this folder (at either end of a move).
    pub folder: Option<VaultPath>,
    /// Only notes with this tag now (nested tags included); deleted notes have none.
    pub tag: Option<String>,
    /// Only these kinds (empty: all).
    pub kinds: Vec<ChangeKind>,
    /// Items per page.
    pub limit: Option<usize>,
    /// Leave out the diffs.
    pub no_diffs: bool,
}

/// Reply of `changes_since`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChangesReply {
    /// One item per note, oldest first.
    pub changes: Vec<NoteChange>,
    /// Pass as `cursor` to get what changes after this page.
    pub cursor: String,
    /// True when more changes follow this page (call again with `cursor`).
    pub more: bool,
    /// Said when the log does not hold every change since `since`: it began later (capvault
    /// was not keeping this vault's changes then), had a gap, or dropped older entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One note's change.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NoteChange {
    /// `created`, `changed`, `moved` or `deleted`.
    #[schemars(with = "String")]
    pub kind: ChangeKind,
    /// The note's path now (a deleted note's last path).
    pub path: String,
    /// A moved note's path before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// When capvault saw its last change (RFC 3339).
    pub at: String,
    /// Its content's sha256 (a deleted note's last content), as `read_note` reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Size in bytes of that content.
    pub size: u64,
    /// Unified diff from the version the cursor saw, when both versions are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// One note folded over a page's entries.
#[derive(Debug, Clone)]
struct Item {
    kind: ChangeKind,
    path: VaultPath,
    /// Where the note was when the page began (a move's origin, or the path).
    from: Option<VaultPath>,
    first_seq: u64,
    at_ms: i64,
    /// Its content when the page began.
    before: Option<Sha>,
    sha: Option<Sha>,
    size: u64,
}

/// The changes after the request's cursor or moment.
pub fn changes_since(engine: &Engine, req: &ChangesRequest) -> Result<ChangesReply, NoteError> {
    // Waits for the first build: its reconcile logs what changed while capvault was stopped.
    let model = engine.model()?;
    let log = engine.change_log();
    let limit = req.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(NoteError::invalid(
            "limit",
            format!("`limit` must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let mut note = None;
    let after = match (&req.cursor, &req.since) {
        (Some(_), Some(_)) => {
            return Err(NoteError::invalid(
                "cursor",
                "give `cursor` or `since`, not both",
            ));
        }
        (Some(c), None) => {
            if c.len() > MAX_ARG {
                return Err(cursor_unknown(engine));
            }
            log.resolve(c).map_err(|e| match e {
                CursorError::Unknown => cursor_unknown(engine),
                CursorError::Expired { oldest } => NoteError::CursorExpired(format!(
                    "the changes after this cursor are no longer kept; the oldest cursor kept is \
                     `{oldest}`{}, or pass `since`",
                    log.oldest_time()
                        .map(|ms| format!(" (changes from {})", rfc3339_ms(ms)))
                        .unwrap_or_default()
                )),
            })?
        }
        (None, Some(s)) => {
            let ms = parse_since(s)?;
            let (seq, unknown) = log.seq_at(ms);
            if let Some(from) = unknown {
                // Said, so that "no changes" is never read as "nothing changed".
                note = Some(format!(
                    "capvault knows this vault's changes from {} on (when it began keeping them, \
                     or the oldest it still keeps); for earlier edits, `list_notes` is newest first",
                    rfc3339_ms(from)
                ));
            }
            seq
        }
        (None, None) => {
            return Err(NoteError::invalid(
                "cursor",
                "give `cursor` (from an earlier reply or vault_info) or `since` (like \
                 `2026-12-01`, `24h` or an RFC 3339 time)",
            ));
        }
    };
    let tag = req
        .tag
        .as_ref()
        .map(|t| super::filter::NoteFilter::new(Some(t.clone()), None, None, None))
        .transpose()?;
    let ignored = engine.user_ignored();
    let exclusions = engine.vault().exclusions();
    let visible = |p: &VaultPath| {
        !exclusions.excludes(p.as_str()) && !ignored.as_ref().is_some_and(|f| f.matches(p.as_str()))
    };
    let in_folder = |p: &VaultPath| req.folder.as_ref().is_none_or(|f| p.starts_with(f));

    let entries = log.entries_after(after, MAX_SCANNED + 1);
    let scanned_all = entries.len() <= MAX_SCANNED;
    let mut fold = Fold::default();
    let mut last = after;
    let mut more = !scanned_all;
    for e in entries.iter().take(MAX_SCANNED) {
        // A page ends before an entry that would start one note too many.
        if fold.live() >= limit && !fold.touches(e) {
            more = true;
            break;
        }
        fold.add(e);
        last = e.seq;
    }
    let mut items = fold.finish();
    // Every rule on every field: a path out of sight is never shown.
    items.retain_mut(|it| {
        let seen_now = visible(&it.path);
        let seen_before = it.from.as_ref().is_some_and(&visible);
        match (seen_before, seen_now) {
            (true, true) => true,
            (false, true) => {
                if it.from.is_some() {
                    it.kind = ChangeKind::Created;
                    it.from = None;
                    it.before = None;
                }
                true
            }
            (true, false) => {
                if let Some(f) = it.from.take() {
                    it.path = f;
                }
                it.kind = ChangeKind::Deleted;
                it.sha = it.before;
                true
            }
            (false, false) => false,
        }
    });
    items.retain(|it| {
        (in_folder(&it.path) || it.from.as_ref().is_some_and(in_folder))
            && (req.kinds.is_empty() || req.kinds.contains(&it.kind))
            && tag
                .as_ref()
                .is_none_or(|t| it.kind != ChangeKind::Deleted && t.matches(&model, &it.path))
    });
    drop(model);
    let mut diff_budget = MAX_DIFFS;
    let changes = items
        .into_iter()
        .map(|it| {
            let diff = if req.no_diffs || diff_budget == 0 {
                None
            } else {
                diff_of(engine, &it).inspect(|d| diff_budget = diff_budget.saturating_sub(d.len()))
            };
            NoteChange {
                kind: it.kind,
                from: it
                    .from
                    .filter(|_| it.kind == ChangeKind::Moved)
                    .map(|f| f.to_string()),
                at: rfc3339_ms(it.at_ms),
                sha256: it.sha.as_ref().map(sha_hex),
                size: it.size,
                diff,
                path: it.path.to_string(),
            }
        })
        .collect();
    Ok(ChangesReply {
        changes,
        cursor: log.cursor_at(last),
        more,
        note,
    })
}

fn cursor_unknown(engine: &Engine) -> NoteError {
    NoteError::invalid(
        "cursor",
        format!(
            "`cursor` is not one of this vault's (a cursor from before the change log was \
             started again is not kept); the current one is `{}`, or pass `since`",
            engine.change_log().cursor()
        ),
    )
}

/// The entries of one page folded per note.
#[derive(Default)]
struct Fold {
    items: Vec<Option<Item>>,
    at: HashMap<VaultPath, usize>,
    live: usize,
}

impl Fold {
    fn live(&self) -> usize {
        self.live
    }

    /// True when `e` is about a note already in the page.
    fn touches(&self, e: &ChangeEntry) -> bool {
        let key = if e.kind == ChangeKind::Moved {
            e.from.as_ref().unwrap_or(&e.path)
        } else {
            &e.path
        };
        self.at.contains_key(key)
    }

    fn push(&mut self, it: Item) {
        self.at.insert(it.path.clone(), self.items.len());
        self.items.push(Some(it));
        self.live += 1;
    }

    fn add(&mut self, e: &ChangeEntry) {
        let key = if e.kind == ChangeKind::Moved {
            e.from.clone().unwrap_or_else(|| e.path.clone())
        } else {
            e.path.clone()
        };
        let Some(&i) = self.at.get(&key) else {
            self.push(Item {
                kind: e.kind,
                path: e.path.clone(),
                from: e.from.clone(),
                first_seq: e.seq,
                at_ms: e.at_ms,
                before: match e.kind {
                    ChangeKind::Deleted => e.sha256,
                    _ => e.before,
                },
                sha: e.sha256,
                size: e.size,
            });
            return;
        };
        let Some(it) = self.items[i].as_mut() else {
            return;
        };
        it.at_ms = e.at_ms;
        it.size = e.size;
        match e.kind {
            ChangeKind::Created => {
                // Deleted then created again at the same path: changed.
                it.kind = if it.kind == ChangeKind::Deleted {
                    ChangeKind::Changed
                } else {
                    it.kind
                };
                it.sha = e.sha256;
            }
            ChangeKind::Changed => it.sha = e.sha256,
            ChangeKind::Moved => {
                self.at.remove(&key);
                it.path = e.path.clone();
                it.sha = e.sha256;
                match it.kind {
                    ChangeKind::Created => {}
                    _ => {
                        let origin = it.from.clone().unwrap_or_else(|| key.clone());
                        if origin == e.path {
                            it.kind = ChangeKind::Changed;
                            it.from = None;
                        } else {
                            it.kind = ChangeKind::Moved;
                            it.from = Some(origin);
                        }
                    }
                }
                // Whatever was at the new path before is replaced by this note.
                if let Some(j) = self.at.insert(e.path.clone(), i)
                    && j != i
                {
                    self.items[j] = None;
                    self.live -= 1;
                }
            }
            ChangeKind::Deleted => {
                if it.kind == ChangeKind::Created {
                    self.items[i] = None;
                    self.at.remove(&key);
                    self.live -= 1;
                    return;
                }
                if let Some(origin) = it.from.take() {
                    it.path = origin;
                    self.at.remove(&key);
                    self.at.insert(it.path.clone(), i);
                }
                it.kind = ChangeKind::Deleted;
                it.sha = e.sha256;
            }
        }
    }

    /// The notes, oldest first; a deletion and a creation of the same content are one move.
    fn finish(self) -> Vec<Item> {
        let mut items: Vec<Item> = self.items.into_iter().flatten().collect();
        let mut created: HashMap<Sha, usize> = HashMap::new();
        for (i, it) in items.iter().enumerate() {
            if it.kind == ChangeKind::Created
                && let Some(s) = it.sha
            {
                created.entry(s).or_insert(i);
            }
        }
        let mut merged: Vec<bool> = vec![false; items.len()];
        for i in 0..items.len() {
            if items[i].kind != ChangeKind::Deleted {
                continue;
            }
            let Some(s) = items[i].sha else { continue };
            if let Some(&j) = created.get(&s)
                && !merged[j]
            {
                merged[j] = true;
                merged[i] = true;
                let from = items[i].path.clone();
                let first = items[i].first_seq.min(items[j].first_seq);
                let it = &mut items[j];
                it.kind = ChangeKind::Moved;
                it.from = Some(from);
                it.before = Some(s);
                it.first_seq = first;
            }
        }
        let mut out: Vec<Item> = items
            .into_iter()
            .enumerate()
            .filter(|(i, it)| !(merged[*i] && it.kind == ChangeKind::Deleted))
            .map(|(_, it)| it)
            .collect();
        out.sort_by_key(|it| it.first_seq);
        for it in &mut out {
            if it.kind != ChangeKind::Moved && it.kind != ChangeKind::Deleted {
                it.from = None;
            }
        }
        out
    }
}

/// The diff of a changed or moved note from the version the page began with, when both
/// versions are known and differ; the hidden text of both marked or stripped as `read_note`
/// does.
fn diff_of(engine: &Engine, it: &Item) -> Option<String> {
    if !matches!(it.kind, ChangeKind::Changed | ChangeKind::Moved) {
        return None;
    }
    let (before, after) = (it.before?, it.sha?);
    if before == after {
        return None;
    }
    let log = engine.change_log();
    let old = log.text(&before)?;
    let new = log.text(&after).or_else(|| {
        let text = engine.texts()?.get(&it.path)?.text.into_owned();
        (sha_of(&text) == after).then_some(text)
    })?;
    // What a reader of the note never sees is sent as `read_note` sends it (`--hidden-text`).
    let policy = engine.options().hidden_text;
    let shown = |t: String| {
        if policy == crate::markdown::hidden::Policy::Show {
            return t;
        }
        let spans = crate::markdown::hidden_spans(&t);
        crate::markdown::hidden::apply(&t, 0..t.len(), &spans, policy)
    };
    Some(unified(
        it.from.as_ref().unwrap_or(&it.path),
        &it.path,
        &shown(old),
        &shown(new),
    ))
}

/// A unified diff, at most [`MAX_DIFF`] bytes (cut at a line and marked).
fn unified(from: &VaultPath, to: &VaultPath, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::configure()
        .deadline(Instant::now() + DIFF_TIME)
        .diff_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{from}"), &format!("b/{to}"))
        .to_string();
    if text.len() <= MAX_DIFF {
        return text;
    }
    let mut cut = MAX_DIFF;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').map_or(cut, |i| i + 1);
    format!("{}[diff cut at {} KiB]\n", &text[..cut], MAX_DIFF / 1024)
}

fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `since` as milliseconds since the epoch: an RFC 3339 time, date words as
/// `get_periodic_note` reads them (the start of the day or period: `yesterday`, `this week`,
/// `2026-12-01`; local time, weeks as Obsidian's default locale counts them), a date and time
/// without an offset (local), or an age (`45m`, `24h`, `7d`).
pub fn parse_since(s: &str) -> Result<i64, NoteError> {
    let s = s.trim();
    let bad = || {
        NoteError::invalid(
            "since",
            "`since` must be an RFC 3339 time, a date (`2026-12-01`, `yesterday`, `this week`, \
             `last month`), or an age like `90m`, `24h`, `7d`",
        )
    };
    if s.is_empty() || s.len() > MAX_ARG {
        return Err(bad());
    }
    let now = chrono::Utc::now().timestamp_millis();
    if let Some(unit) = s
        .chars()
        .last()
        .filter(|c| matches!(c, 'm' | 'h' | 'd' | 'w'))
        && let Ok(n) = s[..s.len() - 1].parse::<u32>()
    {
        let mins: i64 = match unit {
            'm' => 1,
            'h' => 60,
            'd' => 24 * 60,
            _ => 7 * 24 * 60,
        };
        return Ok(now.saturating_sub(i64::from(n) * mins * 60_000));
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    use chrono::TimeZone;
    let local = |naive: chrono::NaiveDateTime| {
        chrono::Local
            .from_local_datetime(&naive)
            .earliest()
            .map(|t| t.timestamp_millis())
    };
    // Date words as get_periodic_note reads them: the start of the day or period they name
    // (`yesterday`, `this week`, `last month`, `2026-12-01`, `2026-W48`, `2026-Q4`, `2026-12`).
    let week = periodic::week_rule("");
    let today = chrono::Local::now().date_naive();
    if let Ok(named) = periodic::parse_date_words(s, today, week, true) {
        let start = named
            .period
            .map_or(named.date, |p| p.start(named.date, week));
        return start.and_hms_opt(0, 0, 0).and_then(local).ok_or_else(bad);
    }
    for f in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, f) {
            return local(t).ok_or_else(bad);
        }
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s).unwrap()
    }

    fn e(seq: u64, kind: ChangeKind, path: &str, from: Option<&str>, sha: u8) -> ChangeEntry {
        ChangeEntry {
            seq,
            at_ms: seq as i64,
            kind,
            path: p(path),
            from: from.map(p),
            sha256: Some([sha; 32]),
            before: Some([sha.wrapping_sub(1); 32]),
            size: 1,
        }
    }

    fn fold(entries: &[ChangeEntry]) -> Vec<(ChangeKind, String, Option<String>)> {
        let mut f = Fold::default();
        for x in entries {
            f.add(x);
        }
        f.finish()
            .into_iter()
            .map(|it| (it.kind, it.path.to_string(), it.from.map(|f| f.to_string())))
            .collect()
    }

    use ChangeKind::*;

    #[test]
    fn a_note_created_then_edited_is_one_creation() {
        let got = fold(&[
            e(1, Created, "a.md", None, 1),
            e(2, Changed, "a.md", None, 2),
        ]);
        assert_eq!(got, vec![(Created, "a.md".into(), None)]);
    }

    #[test]
    fn a_note_created_then_deleted_is_nothing() {
        let got = fold(&[
            e(1, Created, "a.md", None, 1),
            e(2, Deleted, "a.md", None, 1),
            e(3, Changed, "b.md", None, 5),
        ]);
        assert_eq!(got, vec![(Changed, "b.md".into(), None)]);
    }

    #[test]
    fn an_edit_then_a_move_is_one_move_from_where_it_was() {
        let got = fold(&[
            e(1, Changed, "a.md", None, 2),
            e(2, Moved, "x/a.md", Some("a.md"), 2),
            e(3, Moved, "y/b.md", Some("x/a.md"), 2),
        ]);
        assert_eq!(got, vec![(Moved, "y/b.md".into(), Some("a.md".into()))]);
        // Moved back where it began: changed.
        let got = fold(&[
            e(1, Moved, "b.md", Some("a.md"), 2),
            e(2, Moved, "a.md", Some("b.md"), 2),
        ]);
        assert_eq!(got, vec![(Changed, "a.md".into(), None)]);
    }

    #[test]
    fn a_deletion_and_a_creation_of_the_same_content_is_a_move() {
        let got = fold(&[
            e(1, Deleted, "Inbox/a.md", None, 7),
            e(2, Created, "Archive/a.md", None, 7),
            e(3, Created, "c.md", None, 8),
        ]);
        assert_eq!(
            got,
            vec![
                (Moved, "Archive/a.md".into(), Some("Inbox/a.md".into())),
                (Created, "c.md".into(), None)
            ]
        );
    }

    #[test]
    fn deleted_then_created_again_is_a_change() {
        let got = fold(&[
            e(1, Deleted, "a.md", None, 3),
            e(2, Created, "a.md", None, 9),
        ]);
        assert_eq!(got, vec![(Changed, "a.md".into(), None)]);
    }

    #[test]
    fn a_moved_note_then_deleted_is_deleted_where_it_was() {
        let got = fold(&[
            e(1, Moved, "b.md", Some("a.md"), 2),
            e(2, Deleted, "b.md", None, 2),
        ]);
        assert_eq!(got, vec![(Deleted, "a.md".into(), None)]);
    }

    #[test]
    fn since_takes_times_dates_and_ages() {
        let now = chrono::Utc::now().timestamp_millis();
        let day = parse_since("1d").unwrap();
        assert!((now - day - 86_400_000).abs() < 5_000);
        assert_eq!(
            parse_since("2026-12-01T10:00:00Z").unwrap(),
            1_796_119_200_000
        );
        assert!(parse_since("2026-12-01").is_ok());
        // Date words: the start of the day or period, local time.
        let yesterday = parse_since("yesterday").unwrap();
        assert!(now - yesterday > 86_400_000 && now - yesterday <= 2 * 86_400_000);
        let month = parse_since("this month").unwrap();
        assert!(month <= now && now - month <= 32 * 86_400_000);
        assert!(parse_since("last week").unwrap() < parse_since("this week").unwrap());
        for bad in ["", "yesterday-ish", "12x", "2026-13-01", &"9".repeat(100)] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_long_diff_is_cut_at_a_line_and_marked() {
        let old: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let new: String = (0..2000).map(|i| format!("changed {i}\n")).collect();
        let d = unified(&p("a.md"), &p("a.md"), &old, &new);
        assert!(d.len() <= MAX_DIFF + 40, "{}", d.len());
        assert!(d.ends_with("[diff cut at 4 KiB]\n"));
        assert!(d.starts_with("--- a/a.md\n+++ b/a.md\n"));
    }
}

//! A deterministic synthetic vault generator for benchmarks.
//!
//! The same seed and note count always give the same vault. Shape, chosen to resemble real
//! vaults: folders up to three levels deep, note sizes skewed (most a few KB, a long tail up to
//! tens of KB), frontmatter on most notes, headings, wikilinks to other notes, inline tags, and
//! words drawn from a Zipf distribution over a pseudo-word vocabulary (so some words are in
//! nearly every note and most are rare). Known markers are planted for the query set:
//! `quokka` in about 0.1% of notes (rare), and nothing ever contains `zzyzx` (no hit).
//!
//! Dataview and Tasks data, from a random stream of their own (so the rest of each note is the
//! same as before they were added): about 20% of notes carry inline fields (`status:: ...`,
//! `[rating:: n]`, `(project:: [[...]])`), and about 30% end with a `## Tasks` section of 1 to
//! 6 tasks: 60% to do, 25% done (with a ✅ date), 7% in progress, 5% cancelled, 3% another
//! symbol; half with a 📅 due date within 60 days either side of [`TASKS_ANCHOR`], some
//! scheduled or starting, a third with a priority, some recurring, some tagged.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Zipf};

/// The day generated task dates centre on (deterministic output whatever the day it runs).
pub const TASKS_ANCHOR: (i32, u32, u32) = (2026, 12, 1);

/// The generated vault's location and size.
pub struct Generated {
    pub root: PathBuf,
    pub notes: usize,
    pub bytes: u64,
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "pa", "ri", "gu", "ne", "sa", "to", "be",
    "la", "mo", "fi", "ze", "an", "or", "el", "is", "un", "ta", "ve", "qu", "ch", "st",
];
/// Common English words mixed into the head of the distribution, so queries look real.
const COMMON: &[&str] = &[
    "the", "and", "of", "to", "a", "in", "is", "that", "for", "it", "with", "as", "on", "project",
    "note", "idea", "meeting", "garden", "review", "plan", "book", "research", "week", "draft",
];

fn vocabulary(rng: &mut StdRng, size: usize) -> Vec<String> {
    let mut words: Vec<String> = COMMON.iter().map(|w| (*w).to_owned()).collect();
    while words.len() < size {
        let n = rng.random_range(2..5);
        let w: String = (0..n)
            .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
            .collect();
        words.push(w);
    }
    words
}

/// Generates (or reuses, when already complete) a vault of `notes` notes under `dir`.
pub fn generate(dir: &Path, notes: usize, seed: u64) -> Generated {
    let root = dir.join(format!("synthetic-{notes}-seed{seed}"));
    // The marker's name changed when tasks and fields were added, so older vaults are rebuilt.
    let done = root.join(".capvault-bench-complete-tasks");
    if let Ok(text) = std::fs::read_to_string(&done)
        && let Ok(bytes) = text.trim().parse()
    {
        return Generated { root, notes, bytes };
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();

    let mut rng = StdRng::seed_from_u64(seed);
    let vocab = vocabulary(&mut rng, 20_000);
    let zipf = Zipf::new(vocab.len() as f64, 1.07).unwrap();
    let size: LogNormal<f64> = LogNormal::new(7.4, 0.9).unwrap(); // median ~1.6 KB, mean ~2.5 KB
    let word = |rng: &mut StdRng| -> &str { &vocab[(zipf.sample(rng) as usize).saturating_sub(1)] };

    // Folders: a few top-level areas, each with sub-folders.
    let mut folders = vec![String::new()];
    for top in 0..(notes / 400).clamp(4, 40) {
        let t = format!("{} {top}", capitalise(word(&mut rng)));
        folders.push(t.clone());
        for sub in 0..rng.random_range(1..6) {
            let s = format!("{t}/{} {sub}", capitalise(word(&mut rng)));
            folders.push(s.clone());
            if rng.random_bool(0.3) {
                folders.push(format!("{s}/{}", capitalise(word(&mut rng))));
            }
        }
    }
    for f in &folders {
        std::fs::create_dir_all(root.join(f)).unwrap();
    }
    let titles: Vec<String> = (0..notes)
        .map(|i| format!("{} {} {i}", capitalise(word(&mut rng)), word(&mut rng)))
        .collect();

    let mut total = 0u64;
    for (i, title) in titles.iter().enumerate() {
        let folder = &folders[rng.random_range(0..folders.len())];
        let mut text = String::new();
        if rng.random_bool(0.7) {
            let _ = writeln!(text, "---");
            let _ = writeln!(text, "tags: [{}, {}]", word(&mut rng), word(&mut rng));
            let _ = writeln!(
                text,
                "created: 2025-{:02}-{:02}",
                rng.random_range(1..13),
                rng.random_range(1..29)
            );
            if rng.random_bool(0.2) {
                let _ = writeln!(text, "aliases: [{} {}]", word(&mut rng), word(&mut rng));
            }
            let _ = writeln!(text, "---");
        }
        let _ = writeln!(text, "# {title}\n");
        let target = size.sample(&mut rng).min(60_000.0) as usize;
        let rare = i % 1000 == 7;
        while text.len() < target {
            if rng.random_bool(0.15) {
                let _ = writeln!(text, "\n## {}\n", capitalise(word(&mut rng)));
            }
            let words = rng.random_range(8..60);
            for w in 0..words {
                if w > 0 {
                    text.push(' ');
                }
                match rng.random_range(0..100) {
                    0..=2 => {
                        let _ = write!(text, "[[{}]]", titles[rng.random_range(0..notes)]);
                    }
                    3 => {
                        let _ = write!(text, "#{}", word(&mut rng));
                    }
                    _ => text.push_str(word(&mut rng)),
                }
            }
            if rare && rng.random_bool(0.5) {
                text.push_str(" the quokka was here");
            }
            text.push_str(".\n");
        }
        if rare {
            text.push_str("A quokka sighting.\n");
        }
        dataview_and_tasks(&mut text, seed, i, &titles, &|r: &mut StdRng| {
            word(r).to_owned()
        });
        let path = if folder.is_empty() {
            root.join(format!("{title}.md"))
        } else {
            root.join(folder).join(format!("{title}.md"))
        };
        total += text.len() as u64;
        std::fs::write(path, text).unwrap();
    }
    std::fs::write(&done, total.to_string()).unwrap();
    Generated {
        root,
        notes,
        bytes: total,
    }
}

/// Appends a note's inline fields and tasks, from a random stream of their own.
fn dataview_and_tasks(
    text: &mut String,
    seed: u64,
    note: usize,
    titles: &[String],
    word: &dyn Fn(&mut StdRng) -> String,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7a5c_0000_0000 ^ note as u64);
    let anchor = chrono::NaiveDate::from_ymd_opt(TASKS_ANCHOR.0, TASKS_ANCHOR.1, TASKS_ANCHOR.2)
        .unwrap_or_default();
    let date = |rng: &mut StdRng| {
        anchor
            .checked_add_signed(chrono::TimeDelta::days(rng.random_range(-60..=60)))
            .unwrap_or(anchor)
    };
    if rng.random_bool(0.2) {
        let _ = writeln!(
            text,
            "\nstatus:: {}",
            ["active", "paused", "done", "idea"][rng.random_range(0..4)]
        );
        let _ = writeln!(
            text,
            "Reviewed [rating:: {}] and (project:: [[{}]]).",
            rng.random_range(1..6),
            titles[rng.random_range(0..titles.len())]
        );
    }
    if !rng.random_bool(0.3) {
        return;
    }
    text.push_str("\n## Tasks\n");
    for _ in 0..rng.random_range(1..7) {
        let status = match rng.random_range(0..100) {
            0..60 => ' ',
            60..85 => 'x',
            85..92 => '/',
            92..97 => '-',
            _ => '?',
        };
        let _ = write!(
            text,
            "- [{status}] {} {}",
            capitalise(&word(&mut rng)),
            word(&mut rng)
        );
        if rng.random_bool(0.15) {
            let _ = write!(text, " #{}", word(&mut rng));
        }
        if rng.random_bool(0.1) {
            text.push_str(" 🔁 every week");
        }
        if rng.random_bool(0.1) {
            let _ = write!(text, " 🛫 {}", date(&mut rng));
        }
        if rng.random_bool(0.15) {
            let _ = write!(text, " ⏳ {}", date(&mut rng));
        }
        if rng.random_bool(0.5) {
            let _ = write!(text, " 📅 {}", date(&mut rng));
        }
        if rng.random_bool(0.33) {
            text.push(' ');
            text.push_str(["🔺", "⏫", "🔼", "🔽", "⏬"][rng.random_range(0..5)]);
        }
        if status == 'x' {
            let _ = write!(text, " ✅ {}", date(&mut rng));
        }
        text.push('\n');
    }
}

fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

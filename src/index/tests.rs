//! Ranking basics, phrases, filters and CJK, on a small in-memory index.

use std::time::{Duration, SystemTime};

use super::*;
use crate::markdown::parse_note;
use crate::vault::FileMeta;

fn index_of(notes: &[(&str, &str)]) -> SearchIndex {
    index_with_threads(notes, 1)
}

/// [`index_of`] for notes made at run time.
fn index_of_owned(notes: &[(String, String)]) -> SearchIndex {
    let refs: Vec<(&str, &str)> = notes
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    index_of(&refs)
}

fn index_with_threads(notes: &[(&str, &str)], threads: usize) -> SearchIndex {
    let ix = SearchIndex::new(threads).unwrap();
    // Every phrase checked by its words' places, however few notes hold them.
    ix.check_phrases_over(0);
    for (i, (path, text)) in notes.iter().enumerate() {
        let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 * (i as u64 + 1));
        stage(&ix, path, text, modified, i as u64);
    }
    ix.commit().unwrap();
    ix
}

/// Stages `text` as note `path` (size from the text, the given mtime and inode).
fn stage(ix: &SearchIndex, path: &str, text: &str, modified: SystemTime, ino: u64) {
    stage_as(ix, Staging::Replace, path, text, modified, ino);
}

/// How a test note is staged: [`SearchIndex::stage`] or [`SearchIndex::stage_new`].
#[derive(Clone, Copy)]
enum Staging {
    Replace,
    New,
}

fn stage_as(
    ix: &SearchIndex,
    how: Staging,
    path: &str,
    text: &str,
    modified: SystemTime,
    ino: u64,
) {
    let path = VaultPath::parse(path).unwrap();
    let parsed = parse_note(text);
    let meta = FileMeta {
        size: text.len() as u64,
        modified,
        ino,
        nlink: 1,
        created: None,
    };
    let note = NoteRead {
        path: &path,
        meta: &meta,
        text,
        parsed: &parsed,
    };
    match how {
        Staging::Replace => ix.stage(note),
        Staging::New => ix.stage_new(note),
    }
    .unwrap();
}

fn paths(ix: &SearchIndex, q: &str, filter: &IndexFilter) -> Vec<String> {
    let q = query::parse(q).unwrap();
    ix.search(&q, filter, 0, 50)
        .unwrap()
        .hits
        .into_iter()
        .map(|(_, p)| p.to_string())
        .collect()
}

fn all(ix: &SearchIndex, q: &str) -> Vec<String> {
    paths(ix, q, &IndexFilter::default())
}

#[test]
fn a_title_match_outranks_body_matches() {
    let ix = index_of(&[
        (
            "a.md",
            "compost compost compost, all about compost and more compost",
        ),
        ("Compost.md", "A short note."),
        ("b.md", "one mention of compost"),
    ]);
    let got = all(&ix, "compost");
    assert_eq!(got[0], "Compost.md", "{got:?}");
    assert_eq!(got.len(), 3);
}

#[test]
fn headings_outrank_body_and_aliases_count_as_title() {
    let ix = index_of(&[
        ("body.md", "# Intro\nwe talk about irrigation here\n"),
        ("head.md", "# Irrigation\nsome text\n"),
        ("alias.md", "---\naliases: [Irrigation plan]\n---\ntext\n"),
    ]);
    let got = all(&ix, "irrigation");
    assert_eq!(got[0], "alias.md", "{got:?}");
    assert_eq!(got[1], "head.md", "{got:?}");
}

#[test]
fn phrases_need_the_words_together_and_in_order() {
    let ix = index_of(&[
        ("apart.md", "the seed was sown; dates later"),
        ("together.md", "remember the sowing dates for spring"),
        ("reversed.md", "dates sowing"),
    ]);
    assert_eq!(all(&ix, r#""sowing dates""#), ["together.md"]);
    let mut both = all(&ix, "sowing dates");
    both.sort();
    assert_eq!(both, ["reversed.md", "together.md"]);
}

#[test]
fn every_word_must_match_unless_no_note_has_them_all() {
    let ix = index_of(&[
        ("a.md", "apple banana"),
        ("b.md", "apple"),
        ("c.md", "cherry"),
    ]);
    assert_eq!(all(&ix, "apple banana"), ["a.md"]);
    let q = query::parse("apple zzz").unwrap();
    let r = ix.search(&q, &IndexFilter::default(), 0, 10).unwrap();
    assert!(!r.matched_all);
    assert_eq!(r.total, 2);
    assert_eq!(all(&ix, "apple -banana"), ["b.md"]);
}

#[test]
fn filters_restrict_by_folder_tag_property_and_time() {
    let ix = index_of(&[
        (
            "Projects/Alpha/plan.md",
            "---\nstatus: Active\ntags: [project/alpha]\n---\nplan it\n",
        ),
        (
            "Projects/beta.md",
            "---\nstatus: done\n---\nplan #project\n",
        ),
        ("Projects.md", "plan"),
        ("Other/plan.md", "plan #projectx"),
    ]);
    let f =
        |folder: Option<&str>, tag: Option<&str>, prop: Option<(&str, Option<&str>)>| IndexFilter {
            folder: folder.map(|f| VaultPath::parse_folder(f).unwrap()),
            tag: tag.map(str::to_owned),
            property: prop.map(|(k, v)| (k.to_owned(), v.map(str::to_owned))),
            ..IndexFilter::default()
        };
    let mut got = paths(&ix, "plan", &f(Some("Projects"), None, None));
    got.sort();
    assert_eq!(got, ["Projects/Alpha/plan.md", "Projects/beta.md"]);
    let mut got = paths(&ix, "plan", &f(None, Some("project"), None));
    got.sort();
    assert_eq!(
        got,
        ["Projects/Alpha/plan.md", "Projects/beta.md"],
        "nested tags count, #projectx does not"
    );
    assert_eq!(
        paths(
            &ix,
            "plan",
            &f(None, None, Some(("status", Some("active"))))
        ),
        ["Projects/Alpha/plan.md"]
    );
    assert_eq!(
        paths(&ix, "plan", &f(None, None, Some(("status", None)))).len(),
        2
    );
    // Notes were given modification times 1000 s apart, in order.
    let since = IndexFilter {
        modified_after: Some(3_000_000),
        ..IndexFilter::default()
    };
    let mut got = paths(&ix, "plan", &since);
    got.sort();
    assert_eq!(got, ["Other/plan.md", "Projects.md"]);
    let before = IndexFilter {
        modified_before: Some(1_000_000),
        ..IndexFilter::default()
    };
    assert_eq!(paths(&ix, "plan", &before), ["Projects/Alpha/plan.md"]);
}

#[test]
fn chinese_japanese_and_korean_text_is_findable() {
    let ix = index_of(&[
        ("zh.md", "# 笔记\n我爱北京天安门\n"),
        ("ja.md", "東京でラーメンを食べた"),
        ("ko.md", "서울에서 비빔밥을 먹었다"),
        ("en.md", "nothing here"),
    ]);
    assert_eq!(all(&ix, "北京"), ["zh.md"]);
    assert_eq!(all(&ix, "天安门"), ["zh.md"]);
    assert_eq!(all(&ix, "ラーメン"), ["ja.md"]);
    assert_eq!(all(&ix, "비빔밥"), ["ko.md"]);
    let mut got = all(&ix, "京");
    got.sort();
    assert_eq!(
        got,
        ["ja.md", "zh.md"],
        "one character finds it inside longer runs"
    );
    assert!(
        all(&ix, "门北").is_empty(),
        "characters not adjacent in any note"
    );
}

#[test]
fn updates_replace_and_removals_remove() {
    let ix = index_of(&[("a.md", "old words")]);
    let path = VaultPath::parse("a.md").unwrap();
    let parsed = parse_note("new words");
    let meta = FileMeta {
        size: 9,
        modified: SystemTime::UNIX_EPOCH,
        ino: 1,
        nlink: 1,
        created: None,
    };
    ix.stage(NoteRead {
        path: &path,
        meta: &meta,
        text: "new words",
        parsed: &parsed,
    })
    .unwrap();
    ix.commit().unwrap();
    assert!(all(&ix, "old").is_empty());
    assert_eq!(all(&ix, "new"), ["a.md"]);
    assert_eq!(ix.num_docs(), 1);
    ix.stage_removal(&path);
    ix.commit().unwrap();
    assert!(all(&ix, "new").is_empty());
    assert_eq!(ix.num_docs(), 0);
}

#[test]
fn a_note_staged_as_new_is_added_once_and_a_later_stage_still_replaces_it() {
    let ix = SearchIndex::new(1).unwrap();
    let t = SystemTime::UNIX_EPOCH;
    stage_as(&ix, Staging::New, "a.md", "first words", t, 1);
    stage_as(&ix, Staging::New, "b.md", "other words", t, 2);
    // A retried first build stages a.md again before any commit: the delete covers the
    // uncommitted version too.
    stage_as(&ix, Staging::Replace, "a.md", "second words", t, 1);
    ix.commit().unwrap();
    assert_eq!(ix.num_docs(), 2);
    assert!(all(&ix, "first").is_empty());
    assert_eq!(all(&ix, "second"), ["a.md"]);
    assert_eq!(all(&ix, "words").len(), 2);
}

#[test]
fn more_notes_than_the_queue_holds_are_all_indexed_and_release_their_places() {
    let ix = SearchIndex::new(2).unwrap();
    let t = SystemTime::UNIX_EPOCH;
    let n = queue::MAX_QUEUED * 3;
    for i in 0..n {
        let text = format!("note number{i} shares queued words");
        stage_as(&ix, Staging::New, &format!("n{i}.md"), &text, t, i as u64);
    }
    ix.commit().unwrap();
    assert_eq!(ix.num_docs(), n as u64);
    assert_eq!(
        all(&ix, &format!("number{}", n - 1)),
        [format!("n{}.md", n - 1)]
    );
    // tantivy dropped every document it indexed, and each gave its place back.
    assert_eq!(ix.queue.in_flight(), 0);
}

#[test]
fn held_merges_leave_every_segment_until_resumed() {
    let ix = SearchIndex::new(1).unwrap();
    ix.hold_merges();
    let t = SystemTime::UNIX_EPOCH;
    // tantivy's default policy merges once 8 segments of a size are there; make 12.
    for i in 0..12u64 {
        stage(&ix, &format!("n{i}.md"), &format!("segment word{i}"), t, i);
        ix.commit().unwrap();
    }
    assert_eq!(ix.segment_count(), 12);
    ix.resume_merges().unwrap();
    // Merges run in the background: wait for them, at most a minute.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while ix.segment_count() >= 12 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        ix.reader.reload().unwrap();
    }
    assert!(ix.segment_count() < 12, "{} segments", ix.segment_count());
    assert_eq!(all(&ix, "segment").len(), 12);
    assert_eq!(all(&ix, "word11"), ["n11.md"]);
}

#[test]
fn paging_is_stable_and_deep_offsets_are_refused() {
    let notes: Vec<(String, String)> = (0..30)
        .map(|i| (format!("n{i:02}.md"), format!("word {}", "word ".repeat(i))))
        .collect();
    let refs: Vec<(&str, &str)> = notes
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let ix = index_of(&refs);
    let q = query::parse("word").unwrap();
    let f = IndexFilter::default();
    let first = ix.search(&q, &f, 0, 10).unwrap();
    let second = ix.search(&q, &f, 10, 10).unwrap();
    assert_eq!(first.total, 30);
    let mut seen: Vec<_> = first
        .hits
        .iter()
        .chain(&second.hits)
        .map(|h| h.1.clone())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 20, "pages do not overlap");
    assert!(ix.search(&q, &f, MAX_OFFSET + 1, 10).is_err());
}

#[test]
fn excluded_phrases_remove_only_notes_with_the_phrase() {
    let ix = index_of(&[
        ("a.md", "# Sowing\nRemember the sowing dates."),
        ("b.md", "Dates for sowing were late."),
        ("c.md", "sowing"),
        ("d.md", "nothing"),
    ]);
    let mut got = all(&ix, "sowing -\"sowing dates\"");
    got.sort();
    assert_eq!(got, ["b.md", "c.md"]);
}

#[test]
fn excluded_phrases_work_with_frontmatter_and_headings() {
    let notes = [
        ("Compost.md", "# Compost\nA short note.\n"),
        (
            "Garden/Beds.md",
            "---\ntags: [garden/beds]\nstatus: Active\n---\n# Beds\n## Soil\nThe compost goes on the beds in autumn.\n",
        ),
        (
            "Garden/Sowing.md",
            "---\nstatus: done\n---\n# Sowing\nRemember the sowing dates. #garden\ncompost compost compost\n",
        ),
        (
            "Journal/2026.md",
            "Dates for sowing were late. #gardening\ncompost\n",
        ),
        ("Notes/中文.md", "# 笔记\n我爱北京天安门\n"),
    ];
    for threads in [1, 2, 3] {
        let ix = index_with_threads(&notes, threads);
        assert_eq!(all(&ix, "sowing -\"sowing dates\""), ["Journal/2026.md"]);
    }
}

#[test]
fn phrases_work_across_segments() {
    let notes: Vec<(String, String)> = (0..300)
        .map(|i| {
            let text = match i % 3 {
                0 => "remember the sowing dates",
                1 => "dates of sowing",
                _ => "sowing",
            };
            (format!("n{i:03}.md"), format!("# H{i}\n{text}\n"))
        })
        .collect();
    let refs: Vec<(&str, &str)> = notes
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    for threads in [1, 3] {
        let ix = index_with_threads(&refs, threads);
        let q = query::parse("\"sowing dates\" sowing").unwrap();
        assert_eq!(
            ix.search(&q, &IndexFilter::default(), 0, 10).unwrap().total,
            100
        );
        let q = query::parse("sowing -\"sowing dates\"").unwrap();
        assert_eq!(
            ix.search(&q, &IndexFilter::default(), 0, 10).unwrap().total,
            200
        );
        let q = query::parse("sowing -dates").unwrap();
        assert_eq!(
            ix.search(&q, &IndexFilter::default(), 0, 10).unwrap().total,
            100
        );
    }
}

mod prefilter {
    use super::*;
    use proptest::prelude::*;

    /// Text made of pieces that stress tokenizing: case, accents, the Kelvin sign and long s (which
    /// fold to ASCII letters), CJK, punctuation, words longer than the indexed maximum,
    /// frontmatter.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9]{1,8}",
            Just(" ".to_owned()),
            Just("\n".to_owned()),
            Just("-".to_owned()),
            Just("_".to_owned()),
            Just("é".to_owned()),
            Just("\u{212A}".to_owned()),
            Just("\u{17F}".to_owned()),
            Just("æ".to_owned()),
            Just("北京".to_owned()),
            Just("---\nk: v\n---\n".to_owned()),
            "[a-z]{60,80}",
        ]
    }

    /// The case proptest found: a word of exactly the token limit is dropped by tantivy, so a
    /// query inside it must still make the note a candidate.
    #[test]
    fn a_word_of_exactly_the_token_limit_keeps_its_note_a_candidate() {
        let word = "aaaaavzaaaaaaaaaaaaaaaaaaaabvxytwchvfqbpzdpbmckjgkqksiyceifqsmaz";
        assert_eq!(word.len(), text::MAX_TOKEN_BYTES);
        let ix = index_of(&[("n0.md", word), ("n1.md", "other words")]);
        let found = ix
            .candidates(&text::Prefilter::of("VZ"), usize::MAX)
            .unwrap()
            .unwrap();
        assert_eq!(
            found.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            ["n0.md"]
        );
    }

    fn candidate_paths(ix: &SearchIndex, query: &str, max: usize) -> Option<Vec<String>> {
        let found = ix.candidates(&text::Prefilter::of(query), max).unwrap()?;
        let mut paths: Vec<String> = found.iter().map(|p| p.as_str().to_owned()).collect();
        paths.sort();
        Some(paths)
    }

    #[test]
    fn candidates_are_the_notes_with_a_word_fitting_each_query_word() {
        let long = format!("x{}", "garden".repeat(11));
        let ix = index_of(&[
            ("veg.md", "a vegetablegarden here"),
            ("ing.md", "Gardening tips"),
            ("plan.md", "my garden plan"),
            ("none.md", "nothing at all"),
            ("Garden log.md", ""),
            ("long.md", long.as_str()),
        ]);
        let got = |q: &str| candidate_paths(&ix, q, usize::MAX).unwrap();
        // Part of a word: anywhere in one; the long word's note is always in.
        assert_eq!(
            got("garden"),
            ["Garden log.md", "ing.md", "long.md", "plan.md", "veg.md"]
        );
        // Whole: only the exact word.
        assert_eq!(got(" garden "), ["Garden log.md", "long.md", "plan.md"]);
        // Starting a word / ending one.
        assert_eq!(
            got(" garden"),
            ["Garden log.md", "ing.md", "long.md", "plan.md"]
        );
        assert_eq!(
            got("garden "),
            ["Garden log.md", "long.md", "plan.md", "veg.md"]
        );
        // Every word must fit.
        assert_eq!(got("garden plan"), ["long.md", "plan.md"]);
        assert_eq!(got("zzyzx"), ["long.md"]);
        // Too many notes: no narrowing.
        assert_eq!(candidate_paths(&ix, "garden", 4), None);
    }

    #[test]
    fn a_query_of_several_words_narrows_to_notes_holding_them_side_by_side_in_order() {
        let ix = index_of(&[
            ("side.md", "my daily notes here"),
            ("parts.md", "xdaily notesy"),
            ("apart.md", "daily life, and notes"),
            ("reversed.md", "notes daily"),
            ("one letter.md", "daily a notes"),
            ("lines.md", "daily\nnotes"),
            ("Daily notes.md", "nothing"),
            ("fm.md", "---\ntopic: daily notes\n---\nbody"),
        ]);
        let got = |q: &str| candidate_paths(&ix, q, usize::MAX).unwrap();
        // The words side by side, in order, in the body, the frontmatter or the name; the first
        // may end a word and the last start one. Across a line break is kept (the prefilter
        // only narrows; the scan decides).
        assert_eq!(
            got("daily notes"),
            ["Daily notes.md", "fm.md", "lines.md", "parts.md", "side.md"]
        );
        // A one-letter word keeps its place between the others.
        assert_eq!(got("daily a notes"), ["one letter.md"]);
        assert_eq!(
            got(" daily notes "),
            ["Daily notes.md", "fm.md", "lines.md", "side.md"]
        );
        assert_eq!(got("notes daily"), ["reversed.md"]);
    }

    #[test]
    fn a_prefilter_over_its_bound_ranks_the_notes_as_the_ranked_path_would_in_the_same_run() {
        let mut notes: Vec<(String, String)> = (0..12)
            .map(|i| {
                let body = "daily notes ".repeat(i % 4 + 1);
                (format!("n{i:02}.md"), format!("{body}\nfiller {i}\n"))
            })
            .collect();
        notes.push(("apart.md".into(), "daily life, and notes".into()));
        notes.push(("Daily notes.md".into(), "title only".into()));
        let ix = index_of_owned(&notes);
        let names = |r: &[(f32, VaultPath)]| -> Vec<(String, u32)> {
            r.iter()
                .map(|(s, p)| (p.to_string(), s.to_bits()))
                .collect()
        };
        for query in ["daily notes", "aily note", "ly no"] {
            let words = text::Prefilter::of(query);
            let filter = IndexFilter::default();
            // 13 notes qualify: over a bound of 5, ranked in the same run.
            let pre = ix.prefilter(&words, &filter, 5, 4).unwrap().unwrap();
            assert!(pre.total > 5, "{query}: {}", pre.total);
            assert!(!pre.listed(), "{query}");
            let (ranked, total) = pre.ranked(&ix).unwrap().expect("ranked in the run");
            let (expected, expected_total) =
                ix.ranked_candidates(&words, &filter, 4).unwrap().unwrap();
            assert_eq!(total, expected_total, "{query}");
            assert_eq!(names(&ranked), names(&expected), "{query}");
            assert_eq!(ranked.len(), 4, "{query}");
            // Under the bound: listed, not ranked.
            let pre = ix.prefilter(&words, &filter, 100, 4).unwrap().unwrap();
            assert!(pre.listed(), "{query}");
            assert!(pre.ranked(&ix).unwrap().is_none(), "{query}");
        }
    }

    #[test]
    fn a_phrase_with_a_word_in_few_notes_is_narrowed_by_its_words_alone() {
        let mut notes: Vec<(String, String)> = (0..40)
            .map(|i| (format!("filler {i}.md"), "nothing here".to_owned()))
            .collect();
        notes.push(("side.md".into(), "my daily notes here".into()));
        notes.push(("apart.md".into(), "daily life, and notes".into()));
        notes.push(("reversed.md".into(), "notes daily".into()));
        let ix = index_of_owned(&notes);
        let got = |ix: &SearchIndex| candidate_paths(ix, "daily notes", usize::MAX).unwrap();
        assert_eq!(got(&ix), ["side.md"]);
        // Each word in 3 notes of 43: over 2, the places are checked; at 3 or more, not.
        ix.check_phrases_over(2);
        assert_eq!(got(&ix), ["side.md"]);
        ix.check_phrases_over(3);
        assert_eq!(got(&ix), ["apart.md", "reversed.md", "side.md"]);
        // An eighth of the notes bounds it too: with 43 notes, at 5 or fewer, not checked.
        ix.check_phrases_over(1_000);
        assert_eq!(got(&ix), ["apart.md", "reversed.md", "side.md"]);
        // Notes to be read in ranked order (an estimate: no bound) are always checked.
        let words = text::Prefilter::of("daily notes");
        let pre = ix
            .prefilter(&words, &IndexFilter::default(), 0, 4)
            .unwrap()
            .unwrap();
        let (ranked, total) = pre.ranked(&ix).unwrap().expect("ranked");
        let ranked: Vec<String> = ranked.iter().map(|(_, p)| p.to_string()).collect();
        assert_eq!((ranked, total), (vec!["side.md".to_owned()], 1));
    }

    #[test]
    fn a_word_standing_for_too_many_indexed_words_gives_up() {
        let many: String = (0..=MAX_PREFILTER_TERMS)
            .map(|i| format!("qq{i} "))
            .collect();
        let ix = index_of(&[("many.md", many.as_str()), ("other.md", "qq")]);
        assert_eq!(candidate_paths(&ix, "qq", usize::MAX), None);
        assert_eq!(
            candidate_paths(&ix, "qq1234", usize::MAX).unwrap(),
            ["many.md"]
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn every_note_containing_an_ascii_query_in_its_text_or_name_is_a_candidate(
            notes in prop::collection::vec(
                ("[a-zA-Z0-9 _\u{212A}\u{17F}-]{1,10}", prop::collection::vec(piece(), 0..12)),
                1..8,
            ),
            query in "[a-zA-Z0-9 _-]{2,12}",
            split in 0usize..8,
        ) {
            let notes: Vec<(String, String)> = notes
                .iter()
                .enumerate()
                .map(|(i, (name, parts))| (format!("{}{i}.md", name.trim()), parts.concat()))
                .collect();
            // Some notes in a second segment: the word lists are kept per segment.
            let ix = SearchIndex::new(1).unwrap();
            for (i, (path, text)) in notes.iter().enumerate() {
                if i == split {
                    ix.commit().unwrap();
                }
                stage(&ix, path, text, SystemTime::UNIX_EPOCH, i as u64);
            }
            ix.commit().unwrap();
            let words = text::Prefilter::of(&query);
            prop_assume!(!words.is_empty());
            let found = ix.candidates(&words, usize::MAX).unwrap().unwrap();
            let re = regex::RegexBuilder::new(&regex::escape(&query))
                .case_insensitive(true)
                .build()
                .unwrap();
            for (path, text) in &notes {
                let stem = path.trim_end_matches(".md");
                if re.is_match(text) || re.is_match(stem) {
                    prop_assert!(
                        found.iter().any(|p| p.as_str() == path),
                        "{path} contains {query:?} but is not a candidate: {text:?}"
                    );
                }
            }
        }
    }
}

/// A vault (for its identity) and a cache folder beside it, both temporary.
fn cache_dir() -> (
    tempfile::TempDir,
    std::sync::Arc<crate::vault::cache::IndexCacheDir>,
) {
    let tmp = tempfile::tempdir().unwrap();
    let vault_root = tmp.path().join("vault");
    #[allow(clippy::disallowed_methods)] // test fixture
    std::fs::create_dir(&vault_root).unwrap();
    let vault = crate::vault::Vault::open(&vault_root, Default::default()).unwrap();
    let dir = crate::vault::cache::IndexCacheDir::open(&tmp.path().join("cache"), &vault).unwrap();
    (tmp, std::sync::Arc::new(dir))
}

fn names_ending(dir: &crate::vault::cache::IndexCacheDir, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = dir
        .names()
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .collect();
    names.sort();
    names
}

#[test]
fn an_index_built_in_a_cache_folder_writes_only_its_positions_there_and_finds_phrases() {
    let (_tmp, dir) = cache_dir();
    let ix = SearchIndex::new_in(std::sync::Arc::clone(&dir), 1).unwrap();
    let t = SystemTime::UNIX_EPOCH;
    stage(&ix, "a.md", "the quick brown fox", t, 1);
    stage(&ix, "b.md", "brown and then quick", t, 2);
    ix.commit().unwrap();
    // Before any save: the positions file is in the folder, the rest of the segment is not.
    let pos = names_ending(&dir, ".pos");
    assert_eq!(pos.len(), 1, "{:?}", dir.names().unwrap());
    assert!(names_ending(&dir, ".idx").is_empty());
    assert!(names_ending(&dir, "manifest.json").is_empty());
    assert_eq!(all(&ix, "\"quick brown\""), ["a.md"]);
    // A save syncs it and names it; a load serves phrases from it.
    let mut saved = Vec::new();
    assert!(ix.save(&dir, &mut saved).unwrap());
    let loaded = SearchIndex::load(&dir, 1).unwrap().unwrap();
    assert_eq!(all(&loaded, "\"quick brown\""), ["a.md"]);
    drop(loaded);
    // Replaced and merged away: the old positions file leaves the folder at the next save.
    stage(&ix, "a.md", "quick brown again", t, 1);
    ix.commit().unwrap();
    let ids = ix.index.searchable_segment_ids().unwrap();
    ix.writer.write().unwrap().merge(&ids).wait().unwrap();
    ix.commit().unwrap();
    assert_eq!(all(&ix, "\"quick brown\""), ["a.md"]);
    assert!(all(&ix, "fox").is_empty());
    assert!(ix.save(&dir, &mut saved).unwrap());
    let now = names_ending(&dir, ".pos");
    assert_eq!(now.len(), 1);
    assert!(!now.contains(&pos[0]));
    let loaded = SearchIndex::load(&dir, 1).unwrap().unwrap();
    assert_eq!(all(&loaded, "\"quick brown\""), ["a.md"]);
    assert_eq!(all(&loaded, "\"then quick\""), ["b.md"]);
}

#[test]
fn a_saved_index_loads_with_its_documents_and_stamps() {
    let ix = index_of(&[("a.md", "alpha words"), ("sub/b.md", "beta words")]);
    let (_tmp, dir) = cache_dir();
    let mut saved = Vec::new();
    assert!(ix.save(&dir, &mut saved).unwrap());
    // Nothing changed since: no second write.
    assert!(!ix.save(&dir, &mut saved).unwrap());
    let loaded = SearchIndex::load(&dir, 1).unwrap().expect("a saved index");
    assert_eq!(loaded.num_docs(), 2);
    assert_eq!(all(&loaded, "beta"), ["sub/b.md"]);
    assert_eq!(loaded.stamps().unwrap(), ix.stamps().unwrap());
    let b = &loaded.stamps().unwrap()[&VaultPath::parse("sub/b.md").unwrap()];
    assert_eq!(
        (b.size, b.mtime_ns, b.ino),
        ("beta words".len() as u64, 2_000_000_000_000, 1)
    );
}

#[test]
fn a_save_keeps_only_the_files_of_the_current_index() {
    let ix = index_of(&[("a.md", "alpha"), ("b.md", "beta")]);
    let (_tmp, dir) = cache_dir();
    let mut saved = Vec::new();
    ix.save(&dir, &mut saved).unwrap();
    let first: std::collections::BTreeSet<String> = dir.names().unwrap().into_iter().collect();
    // Replace everything (new segment, old one fully deleted), merge down, save again.
    for (path, text) in [("a.md", "gamma"), ("b.md", "delta")] {
        stage(&ix, path, text, SystemTime::UNIX_EPOCH, 9);
    }
    ix.commit().unwrap();
    let ids = ix.index.searchable_segment_ids().unwrap();
    ix.writer.write().unwrap().merge(&ids).wait().unwrap();
    ix.commit().unwrap();
    assert!(ix.save(&dir, &mut saved).unwrap());
    let second: std::collections::BTreeSet<String> = dir.names().unwrap().into_iter().collect();
    assert!(
        first.is_disjoint(
            &second
                .iter()
                .filter(|n| *n != "manifest.json")
                .cloned()
                .collect()
        )
    );
    let loaded = SearchIndex::load(&dir, 1).unwrap().unwrap();
    assert_eq!(all(&loaded, "gamma"), ["a.md"]);
    assert!(all(&loaded, "alpha").is_empty());
    // The manifest names every file left, and nothing else is left.
    let manifest: serde_json::Value =
        serde_json::from_slice(&dir.read("manifest.json", 1 << 20).unwrap().unwrap()).unwrap();
    let mut named: std::collections::BTreeSet<String> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    named.insert("manifest.json".to_owned());
    assert_eq!(named, second);
}

#[test]
fn the_cache_format_names_the_analyzers_it_was_built_with() {
    // A tripwire: the cached documents depend on the analyzers. If this fails because tokens
    // changed, bump the number in `cache::FORMAT` (old caches are then rebuilt) and update it.
    let mut a = text::analyzer();
    let words: Vec<String> = text::tokens(&mut a, "Café déjà-vu #Tag/Sub x_y 42")
        .into_iter()
        .map(|t| t.text)
        .collect();
    assert_eq!(
        (cache::FORMAT, words, text::cjk_bigrams("我爱北京")),
        (
            "capvault index 2, tantivy 0.27",
            ["cafe", "deja", "vu", "tag", "sub", "x", "y", "42"]
                .map(String::from)
                .to_vec(),
            "我爱 爱北 北京".to_owned()
        )
    );
}

#[test]
fn a_query_of_punctuation_or_a_page_past_the_ranked_hits_is_refused_by_kind() {
    let ix = index_of(&[("a.md", "apple")]);
    let none = IndexFilter::default();
    let q = query::parse("apple").unwrap();
    let e = ix.search(&q, &none, MAX_OFFSET + 1, 10).unwrap_err();
    assert!(matches!(e, IndexError::PastOffset), "{e}");
    assert!(
        e.to_string()
            .starts_with("cannot page past 10000 ranked hits"),
        "{e}"
    );
    assert!(ix.search(&q, &none, MAX_OFFSET, 10).is_ok());
    let q = query::parse("?!").unwrap();
    let e = ix.search(&q, &none, 0, 10).unwrap_err();
    assert!(matches!(e, IndexError::NoWords), "{e}");
    assert!(e.to_string().contains("no words to search for"), "{e}");
}

#[test]
fn a_search_beside_another_index_scores_as_one_index_holding_both() {
    let notes = [
        ("a.md", "zebra crossing near the park"),
        ("b.md", "the park has a pond and a zebra zebra"),
        ("c.md", "nothing to see here at all"),
    ];
    let pages = [
        ("r.pdf#1", "zebra migration in the park"),
        ("r.pdf#2", "appendix with tables"),
    ];
    let one = index_of(&[&notes[..], &pages[..]].concat());
    let (left, right) = (index_of(&notes), index_of(&pages));
    let q = query::parse("zebra park").unwrap();
    let all = IndexFilter::default();
    let whole = one.search(&q, &all, 0, 10).unwrap();
    let mut split: Vec<(f32, VaultPath)> = left
        .search_beside(&q, &all, 0, 10, Some(&right))
        .unwrap()
        .hits;
    split.extend(
        right
            .search_beside(&q, &all, 0, 10, Some(&left))
            .unwrap()
            .hits,
    );
    split.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    assert_eq!(split.len(), whole.hits.len());
    for ((s1, p1), (s2, p2)) in whole.hits.iter().zip(&split) {
        assert_eq!(p1, p2, "{whole:?} / {split:?}");
        assert!((s1 - s2).abs() < 1e-4, "{p1}: {s1} as one, {s2} beside");
    }
    // Alone, the pages' index counts only its own two pages: another scale.
    let alone = right.search(&q, &all, 0, 10).unwrap().hits;
    let beside = right
        .search_beside(&q, &all, 0, 10, Some(&left))
        .unwrap()
        .hits;
    assert!(
        (alone[0].0 - beside[0].0).abs() > 1e-3,
        "{alone:?} {beside:?}"
    );
}

//! Dataview's documented examples, worked out by hand, and the bounds.

use chrono::{NaiveDate, NaiveDateTime};

use super::fields::{canonical_key, extract_inline_fields};
use super::value::{Date, Duration, parse_inline_value};
use super::*;

fn day(y: i32, m: u32, d: u32) -> Value {
    Value::Date(DvDate {
        date: Date::day(NaiveDate::from_ymd_opt(y, m, d).unwrap()),
        zone: None,
    })
}

fn at(s: &str, zone: Option<Zone>) -> Value {
    let at = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.3f").unwrap();
    Value::Date(DvDate {
        date: Date { at, time: true },
        zone,
    })
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

const H: f64 = 3_600_000.0;
const MIN: f64 = 60_000.0;
const D: f64 = 24.0 * H;

fn dur(months: i64, ms: f64) -> Value {
    Value::Duration(Duration { months, ms })
}

fn link(path: &str, display: Option<&str>) -> Value {
    Value::Link(Link {
        path: path.to_owned(),
        subpath: None,
        display: display.map(str::to_owned),
        embed: false,
    })
}

/// The one field of the note whose raw key is `key`.
fn field<'a>(note: &'a DataviewNote, key: &str) -> &'a InlineField {
    let mut all = note
        .fields
        .iter()
        .chain(note.items.iter().flat_map(|i| &i.fields))
        .filter(|f| f.key == key);
    let f = all
        .next()
        .unwrap_or_else(|| panic!("no field {key:?} in {note:#?}"));
    assert!(all.next().is_none(), "two fields {key:?}");
    f
}

// ---- add-metadata.md ----

#[test]
fn frontmatter_example_types_alias_date_and_object() {
    let note = parse_note(
        "---\nalias: \"document\"\nlast-reviewed: 2021-08-17\nthoughts:\n  rating: 8\n  reviewable: false\n---\n",
    );
    let fm: std::collections::HashMap<_, _> = note.frontmatter.iter().cloned().collect();
    assert_eq!(fm["alias"], text("document"));
    assert_eq!(fm["last-reviewed"], day(2021, 8, 17));
    assert_eq!(
        fm["thoughts"],
        Value::Object(vec![
            ("rating".into(), Value::Number(8.0)),
            ("reviewable".into(), Value::Bool(false)),
        ])
    );
}

#[test]
fn full_line_fields_and_bold_key_with_sanitised_names() {
    let note =
        parse_note("# Markdown Page\n\nBasic Field:: Some random Value\n**Bold Field**:: Nice!\n");
    let basic = field(&note, "Basic Field");
    assert_eq!((basic.line, &*basic.canonical), (2, "basic-field"));
    assert_eq!(basic.value, text("Some random Value"));
    assert_eq!(basic.syntax, FieldSyntax::FullLine);
    let bold = field(&note, "Bold Field");
    assert_eq!((bold.line, &*bold.canonical), (3, "bold-field"));
    assert_eq!(bold.value, text("Nice!"));
}

#[test]
fn bracket_fields_inside_a_sentence() {
    let note = parse_note("I would rate this a [rating:: 9]! It was [mood:: acceptable].\n");
    assert_eq!(field(&note, "rating").value, Value::Number(9.0));
    assert_eq!(field(&note, "rating").canonical, "rating");
    assert_eq!(field(&note, "mood").value, text("acceptable"));
    assert_eq!(field(&note, "mood").syntax, FieldSyntax::Bracket);
}

#[test]
fn task_with_a_bracket_due_field() {
    let note = parse_note("- [ ] Send an mail to David about the deadline [due:: 2022-04-05].\n");
    let item = &note.items[0];
    assert_eq!(item.task.map(|t| t.status), Some(' '));
    assert_eq!(item.due(), Some(&day(2022, 4, 5)));
    assert!(note.fields.is_empty(), "item fields stay on the item");
}

#[test]
fn parenthesis_field_hides_its_key() {
    let note = parse_note("This will not show the (longKeyIDontNeedWhenReading:: key).\n");
    let f = field(&note, "longKeyIDontNeedWhenReading");
    assert_eq!(f.canonical, "longkeyidontneedwhenreading");
    assert_eq!(
        (f.value.clone(), f.syntax),
        (text("key"), FieldSyntax::Paren)
    );
}

#[test]
fn non_latin_and_emoji_keys() {
    let note = parse_note(
        "Noël:: Un jeu de console\nクリスマス:: 家庭用ゲーム機\n[🎅:: a console game]\n[xmas🎄:: a console game]\n",
    );
    assert_eq!(field(&note, "Noël").canonical, "noël");
    assert_eq!(field(&note, "Noël").value, text("Un jeu de console"));
    assert_eq!(field(&note, "クリスマス").value, text("家庭用ゲーム機"));
    assert_eq!(field(&note, "🎅").canonical, "🎅");
    assert_eq!(field(&note, "xmas🎄").canonical, "xmas🎄");
    // Without brackets a leading emoji is dropped from a full-line key (hence the docs'
    // advice to bracket emoji keys).
    let bare = parse_note("🎅x:: gift\n");
    assert_eq!(bare.fields[0].key, "x");
}

#[test]
fn the_sanitised_key_table() {
    assert_eq!(canonical_key("Basic Field"), "basic-field");
    assert_eq!(canonical_key("**Bold Field**"), "bold-field");
    assert_eq!(canonical_key("someMetaData"), "somemetadata");
    assert_eq!(canonical_key("a  b"), "a-b");
    assert_eq!(canonical_key("~~struck~~ _it_"), "struck-_it_");
    assert_eq!(canonical_key("length of travel"), "length-of-travel");
}

// ---- types-of-metadata.md ----

#[test]
fn date_time_with_t_is_a_date_with_a_space_is_text() {
    let note = parse_note("date1:: 2021-02-26T15:15\ndate2:: 2021-04-17 18:00\n");
    assert_eq!(
        field(&note, "date1").value,
        at("2021-02-26 15:15:00.000", None)
    );
    assert_eq!(field(&note, "date2").value, text("2021-04-17 18:00"));
}

#[test]
fn text_numbers_and_booleans() {
    assert_eq!(
        parse_inline_value("This is some normal text."),
        text("This is some normal text.")
    );
    assert_eq!(parse_inline_value("6"), Value::Number(6.0));
    assert_eq!(parse_inline_value("2.4"), Value::Number(2.4));
    assert_eq!(parse_inline_value("-80"), Value::Number(-80.0));
    assert_eq!(parse_inline_value("true"), Value::Bool(true));
    assert_eq!(parse_inline_value("false"), Value::Bool(false));
    assert_eq!(parse_inline_value("False"), Value::Bool(false));
    assert_eq!(parse_inline_value("trueish"), text("trueish"));
    assert_eq!(parse_inline_value("14"), Value::Number(14.0));
    assert_eq!(parse_inline_value("   "), Value::Null);
    assert_eq!(parse_inline_value("null"), Value::Null);
}

#[test]
fn iso_dates_to_the_millisecond_and_zone() {
    let month = Value::Date(DvDate {
        date: Date::day(NaiveDate::from_ymd_opt(2021, 4, 1).unwrap()),
        zone: None,
    });
    assert_eq!(parse_inline_value("2021-04"), month);
    assert_eq!(parse_inline_value("2021-04-18"), day(2021, 4, 18));
    assert_eq!(
        parse_inline_value("2021-04-18T04:19:35.000"),
        at("2021-04-18 04:19:35.000", None)
    );
    assert_eq!(
        parse_inline_value("2021-04-18T04:19:35.000+06:30"),
        at("2021-04-18 04:19:35.000", Some(Zone::Offset(390)))
    );
    assert_eq!(parse_inline_value("2001-06-11"), day(2001, 6, 11));
    assert_eq!(
        parse_inline_value("2021-04-18T04:19:35Z"),
        at("2021-04-18 04:19:35.000", Some(Zone::Offset(0)))
    );
    assert_eq!(
        parse_inline_value("2021-04-18T04:19:35[Europe/Paris]"),
        at(
            "2021-04-18 04:19:35.000",
            Some(Zone::Named("Europe/Paris".into()))
        )
    );
    // A zone only after seconds; an impossible day is text (Luxon would roll it over).
    assert_eq!(
        parse_inline_value("2021-04-18T04:19+06:00"),
        text("2021-04-18T04:19+06:00")
    );
    assert_eq!(parse_inline_value("2021-02-30"), text("2021-02-30"));
    assert_eq!(parse_inline_value("2021-13"), text("2021-13"));
}

#[test]
fn durations_of_the_docs() {
    assert_eq!(parse_inline_value("7 hours"), dur(0, 7.0 * H));
    assert_eq!(parse_inline_value("16days"), dur(0, 16.0 * D));
    assert_eq!(parse_inline_value("4min"), dur(0, 4.0 * MIN));
    assert_eq!(parse_inline_value("6hr7min"), dur(0, 6.0 * H + 7.0 * MIN));
    assert_eq!(
        parse_inline_value("9 years, 8 months, 4 days, 16 hours, 2 minutes"),
        dur(9 * 12 + 8, 4.0 * D + 16.0 * H + 2.0 * MIN)
    );
    assert_eq!(parse_inline_value("9 yrs 8 min"), dur(9 * 12, 8.0 * MIN));
    assert_eq!(parse_inline_value("1 day, 3 hours"), dur(0, D + 3.0 * H));
    assert_eq!(
        parse_inline_value("1s 2m 3h"),
        dur(0, 1000.0 + 2.0 * MIN + 3.0 * H)
    );
    assert_eq!(parse_inline_value("3 wks"), dur(0, 21.0 * D));
    // Units are case-sensitive, and a unit must end the text.
    assert_eq!(parse_inline_value("3 Days"), text("3 Days"));
    assert_eq!(parse_inline_value("5 daysx"), text("5 daysx"));
}

#[test]
fn date_arithmetic_example_fields() {
    let note = parse_note(
        "departure:: 2022-10-07T15:15\nlength of travel:: 1 day, 3 hours\nrelease-date:: 2023-02-14T12:00\n",
    );
    assert_eq!(
        field(&note, "departure").value,
        at("2022-10-07 15:15:00.000", None)
    );
    let travel = field(&note, "length of travel");
    assert_eq!(travel.canonical, "length-of-travel");
    assert_eq!(travel.value, dur(0, D + 3.0 * H));
    assert_eq!(
        field(&note, "release-date").value,
        at("2023-02-14 12:00:00.000", None)
    );
}

#[test]
fn links_with_display_text_and_embeds() {
    assert_eq!(parse_inline_value("[[A Page]]"), link("A Page", None));
    assert_eq!(
        parse_inline_value("[[Some Other Page|Render Text]]"),
        link("Some Other Page", Some("Render Text"))
    );
    assert_eq!(
        parse_inline_value("[[yes, no, and maybe]]"),
        link("yes, no, and maybe", None)
    );
    let Value::Link(embed) = parse_inline_value("![[Note#Part|Shown]]") else {
        panic!()
    };
    assert!(embed.embed);
    assert_eq!(embed.subpath, Some(Subpath::Heading("Part".into())));
    let Value::Link(block) = parse_inline_value("[[Note#^abc]]") else {
        panic!()
    };
    assert_eq!(
        (block.path.as_str(), block.subpath),
        ("Note", Some(Subpath::Block("abc".into())))
    );
}

#[test]
fn frontmatter_links_lists_objects_and_multiline_text() {
    let note = parse_note(
        "---\nparent: \"[[parentPage]]\"\nkey3: [one, two, three]\nkey4:\n - four\n - five\n - six\npoem: |\n  Because I could not stop for Death,\n  He kindly stopped for me;\nauthor: \"[[Emily Dickinson]]\"\nobj:\n  key1: \"Val\"\n  key2: 3\n  key3:\n    - \"List1\"\n    - \"List2\"\nrating: 8\nlong: 3 days\n---\n",
    );
    let fm: std::collections::HashMap<_, _> = note.frontmatter.iter().cloned().collect();
    assert_eq!(fm["parent"], link("parentPage", None));
    assert_eq!(
        fm["key3"],
        Value::List(vec![text("one"), text("two"), text("three")])
    );
    assert_eq!(
        fm["key4"],
        Value::List(vec![text("four"), text("five"), text("six")])
    );
    assert_eq!(
        fm["poem"],
        text("Because I could not stop for Death,\nHe kindly stopped for me;\n")
    );
    assert_eq!(fm["author"], link("Emily Dickinson", None));
    assert_eq!(
        fm["obj"],
        Value::Object(vec![
            ("key1".into(), text("Val")),
            ("key2".into(), Value::Number(3.0)),
            (
                "key3".into(),
                Value::List(vec![text("List1"), text("List2")])
            ),
        ])
    );
    assert_eq!(fm["rating"], Value::Number(8.0));
    assert_eq!(fm["long"], dur(0, 3.0 * D));
}

#[test]
fn inline_lists_need_quoted_text() {
    assert_eq!(
        parse_inline_value("1, 2, 3"),
        Value::List(vec![
            Value::Number(1.0),
            Value::Number(2.0),
            Value::Number(3.0)
        ])
    );
    assert_eq!(
        parse_inline_value("\"yes\", \"or\", \"no\""),
        Value::List(vec![text("yes"), text("or"), text("no")])
    );
    assert_eq!(parse_inline_value("yes, or, no"), text("yes, or, no"));
    assert_eq!(parse_inline_value("\"yes,\""), text("yes,"));
    assert_eq!(
        parse_inline_value("[[test]],"),
        Value::List(vec![link("test", None)])
    );
    assert_eq!(
        parse_inline_value("[[test]], [[test2]]"),
        Value::List(vec![link("test", None), link("test2", None)])
    );
    assert_eq!(
        parse_inline_value("1, 2, 3, \"hello\""),
        Value::List(vec![
            Value::Number(1.0),
            Value::Number(2.0),
            Value::Number(3.0),
            text("hello")
        ])
    );
    assert_eq!(parse_inline_value("1, 2,"), text("1, 2,"));
    assert_eq!(parse_inline_value("#tag"), text("#tag"));
}

#[test]
fn a_key_given_twice_becomes_a_list_on_the_page() {
    let note = parse_note("grocery:: flour\n\nsome text\n\ngrocery:: soap\n");
    let page = note.page_fields();
    let grocery = page.iter().find(|(k, _)| k == "grocery").map(|(_, v)| v);
    assert_eq!(
        grocery,
        Some(&Value::List(vec![text("flour"), text("soap")]))
    );
}

#[test]
fn page_fields_add_sanitised_keys_and_merge_frontmatter() {
    let note = parse_note(
        "---\nRating: 3\n---\nBasic Field:: x\n- [ ] task [due:: 2022-01-01]\n- plain [size:: 2]\n",
    );
    let page: std::collections::HashMap<_, _> = note.page_fields().into_iter().collect();
    assert_eq!(page["Rating"], Value::Number(3.0));
    assert_eq!(page["rating"], Value::Number(3.0));
    assert_eq!(page["basic-field"], text("x"));
    assert_eq!(page["size"], Value::Number(2.0));
    assert!(!page.contains_key("due"), "task fields stay on the task");
}

// ---- metadata-tasks.md ----

#[test]
fn fields_on_tasks_and_capital_x_completes() {
    let note = parse_note(
        "- [ ] Hello, this is some [metadata:: value]!\n- [X] I finished this on [completion:: 2021-08-15].\n",
    );
    assert_eq!(note.items[0].field("metadata"), Some(&text("value")));
    let done = &note.items[1];
    assert_eq!(done.completion(), Some(&day(2021, 8, 15)));
    let t = done.task.unwrap();
    assert!(t.checked && t.completed && t.fully_completed);
}

#[test]
fn emoji_shorthands_of_the_docs() {
    let note = parse_note(concat!(
        "- [ ] Due this Saturday 🗓️2021-08-29\n",
        "- [x] Completed last Saturday ✅2021-08-22\n",
        "- [ ] I made this on ➕1990-06-14\n",
        "- [ ] Task I can start this weekend 🛫2021-08-29\n",
        "- [x] Task I finished ahead of schedule ⏳2021-08-29 ✅2021-08-22\n",
        "- [x] Some Done Task [completion:: 2021-08-22]\n",
    ));
    let i = &note.items;
    assert_eq!(i[0].due(), Some(&day(2021, 8, 29)));
    assert_eq!(i[1].completion(), Some(&day(2021, 8, 22)));
    assert_eq!(i[2].created(), Some(&day(1990, 6, 14)));
    assert_eq!(i[3].start(), Some(&day(2021, 8, 29)));
    assert_eq!(i[4].scheduled(), Some(&day(2021, 8, 29)));
    assert_eq!(i[4].completion(), Some(&day(2021, 8, 22)));
    assert_eq!(i[5].completion(), Some(&day(2021, 8, 22)));
    assert_eq!(i[0].fields[0].syntax, FieldSyntax::Emoji);
    // Dataview's test of the other calendar emoji.
    let other = parse_note("- [ ] testTask 🗓2022-07-14\n");
    assert_eq!(other.items[0].due(), Some(&day(2022, 7, 14)));
}

#[test]
fn custom_status_is_checked_but_not_completed() {
    let note = parse_note("- [-] dropped\n- [/] half\n- [ ] open\n- not a task\n");
    let t = note.items[0].task.unwrap();
    assert_eq!((t.status, t.checked, t.completed), ('-', true, false));
    assert_eq!(note.items[1].task.map(|t| t.status), Some('/'));
    assert!(!note.items[2].task.unwrap().checked);
    assert!(note.items[3].task.is_none());
    assert_eq!(note.items[3].text, "not a task");
}

#[test]
fn implicit_item_fields_line_parent_children_section_tags_links() {
    let text = "# Plan\n\n- [ ] top #work [[Spec]]\n  continued ^blk\n  - [x] sub done\n  - [ ] sub open\n    - note ![[img.png]]\n- [x] other\n  - [x] all done\n\n## Later\n1. numbered\n";
    let note = parse_note(text);
    let lines: Vec<usize> = note.items.iter().map(|i| i.line).collect();
    assert_eq!(lines, [2, 4, 5, 6, 7, 8, 11]);
    let top = &note.items[0];
    assert_eq!(top.text, "top #work [[Spec]]\ncontinued ^blk");
    assert_eq!(top.line_count, 2);
    assert_eq!(top.section.as_deref(), Some("Plan"));
    assert_eq!(top.tags, ["#work"]);
    assert_eq!(
        top.outlinks,
        [Link {
            path: "Spec".into(),
            subpath: None,
            display: None,
            embed: false
        }]
    );
    assert_eq!(top.children, [4, 5]);
    assert_eq!(top.parent, None);
    assert_eq!(top.block_id.as_deref(), Some("blk"));
    assert!(!top.task.unwrap().fully_completed);
    assert_eq!(note.items[1].parent, Some(2));
    assert!(note.items[1].task.unwrap().fully_completed);
    let sub_open = &note.items[2];
    assert_eq!(
        (sub_open.children.as_slice(), sub_open.parent),
        (&[6][..], Some(2))
    );
    assert!(note.items[3].task.is_none());
    assert!(note.items[3].outlinks[0].embed);
    assert!(
        note.items[4].task.unwrap().fully_completed,
        "other: itself and its sub-task done"
    );
    assert_eq!(note.items[6].section.as_deref(), Some("Later"));
    assert_eq!(note.items[6].text, "numbered");
}

#[test]
fn unfinished_task_under_a_plain_item_keeps_the_task_above_unfinished() {
    let note = parse_note("- [x] done\n  - plain\n    - [ ] open\n");
    assert!(!note.items[0].task.unwrap().fully_completed);
    assert!(note.items[0].task.unwrap().completed);
}

#[test]
fn full_line_field_on_a_plain_list_item_only() {
    let note = parse_note("- key:: value\n- [ ] task:: no\n- with [a:: 1] and b:: 2\n");
    assert_eq!(note.items[0].field("key"), Some(&text("value")));
    assert!(note.items[1].fields.is_empty());
    assert_eq!(note.items[2].fields.len(), 1);
}

// ---- Dataview's inline-field tests (parse.inline.test.ts) ----

fn raw(line: &str) -> Vec<(String, String, usize, usize)> {
    extract_inline_fields(line, false)
        .into_iter()
        .map(|f| (f.key, line[f.value.0..f.value.1].to_owned(), f.start, f.end))
        .collect()
}

#[test]
fn inline_edge_cases_of_dataviews_tests() {
    assert!(raw("").is_empty());
    assert!(raw("[]").is_empty());
    assert!(raw("()").is_empty());
    assert!(raw("[key:value]").is_empty());
    assert!(raw("(key:value)").is_empty());
    assert_eq!(raw("[key::value]"), [("key".into(), "value".into(), 0, 12)]);
    assert_eq!(raw("(key::value)"), [("key".into(), "value".into(), 0, 12)]);
    assert_eq!(
        raw("[key:: value] and so thus, [key2:: value2]"),
        [
            ("key".into(), "value".into(), 0, 13),
            ("key2".into(), "value2".into(), 27, 42)
        ]
    );
    assert_eq!(raw("[[[[hello:: 16]]")[0].0, "hello");
    assert_eq!(raw("[[[[hello:: 16]]")[0].1, "16");
    assert_eq!(raw("This is some text. [key:: [value]]")[0].1, "[value]");
    assert_eq!(raw("Hello? [key! :: \\[value]")[0].0, "key!");
    assert_eq!(raw("Hello? [key! :: \\[value]")[0].1, "\\[value");
    assert_eq!(raw("      - [ ] Huh! [p:: 1]")[0].1, "1");
    assert_eq!(
        raw("[link:: <a href=\"Page\">Value</a>]")[0].1,
        "<a href=\"Page\">Value</a>"
    );
    // A field touching the one before it is dropped, as Dataview's filter drops it.
    assert_eq!(raw("[a:: 1][b:: 2]").len(), 1);
    assert_eq!(raw("[a:: 1] [b:: 2]").len(), 2);
    // Parentheses and brackets mixed, and a link in the value.
    assert_eq!(
        raw("(a:: [[Note|x]]) and [b:: (1)]"),
        [
            ("a".into(), "[[Note|x]]".into(), 0, 16),
            ("b".into(), "(1)".into(), 21, 30)
        ]
    );
}

#[test]
fn a_sentence_with_a_colon_pair_is_no_full_line_field() {
    let note = parse_note("This is a sentence, key:: value\n> Quote key:: value\n");
    assert_eq!(note.fields.len(), 1);
    assert_eq!(note.fields[0].key, "Quote key");
}

// ---- Where fields are not read ----

#[test]
fn no_fields_in_code_or_frontmatter() {
    let note = parse_note(concat!(
        "---\nfm:: no\n---\n",
        "```\ncode:: no\n```\n\n",
        "    indented:: no\n\n",
        "Use `[inline:: no]` here [yes:: 1]\n\n",
        "visible:: yes\n",
    ));
    let keys: Vec<&str> = note.fields.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["yes", "visible"]);
    assert_eq!(note.fields[1].line, 11);
}

/// Dataview reads every line of a note's sections but lists, comments included: a field in
/// a `%%` comment is a field. Worked by hand from how Dataview reads a line: a bracket field
/// where one is written, else the line as a full-line field (its key stripped of the leading
/// `%%`, its value running to the end of the line).
#[test]
fn fields_inside_comments_are_read_as_dataview_reads_them() {
    let note = parse_note(concat!(
        "Draft %%[reviewed:: 2024-01-05]%% for now\n",
        "%% hidden:: yes %%\n\n",
        "%%\n",
        "status:: draft\n",
        "\n",
        "    owner:: Ana\n",
        "- [ ] not a task [due:: 2020-01-01]\n",
        "%%\n\n",
        "- item %%[mood:: calm]%%\n",
    ));
    let fields: Vec<(&str, usize, &Value)> = note
        .fields
        .iter()
        .map(|f| (f.key.as_str(), f.line, &f.value))
        .collect();
    let date = |y, m, d| {
        Value::Date(DvDate {
            date: Date::day(NaiveDate::from_ymd_opt(y, m, d).unwrap()),
            zone: None,
        })
    };
    assert_eq!(
        fields,
        [
            ("reviewed", 0, &date(2024, 1, 5)),
            ("hidden", 1, &Value::Text("yes %%".into())),
            ("status", 4, &Value::Text("draft".into())),
            // An indented line after a blank one: code to a markdown parser, the comment's
            // text to Obsidian.
            ("owner", 6, &Value::Text("Ana".into())),
            ("due", 7, &date(2020, 1, 1)),
        ]
    );
    // Obsidian lists no item inside a comment; the item with a comment in its text keeps the
    // field written there.
    assert_eq!(note.items.len(), 1, "{:?}", note.items);
    assert_eq!(note.items[0].fields[0].key, "mood");
    assert_eq!(note.items[0].fields[0].value, Value::Text("calm".into()));
}

#[test]
fn headings_and_callouts_are_read_line_by_line() {
    let note = parse_note("# Topic:: physics\n\n> [!note]\n> mood:: calm\n");
    let keys: Vec<&str> = note.fields.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["Topic", "mood"]);
}

// ---- Tasks plugin emoji (Tasks Emoji Format.md) ----

#[test]
fn tasks_emoji_dates_priorities_and_recurrence() {
    let d = |y, m, dd| NaiveDate::from_ymd_opt(y, m, dd);
    let note = parse_note(concat!(
        "- [ ] #task Has a created date ➕ 2023-04-13\n",
        "- [ ] #task Has a scheduled date ⏳ 2023-04-14\n",
        "- [ ] #task Has a start date 🛫 2023-04-15\n",
        "- [ ] #task Has a due date 📅 2023-04-16\n",
        "- [x] #task Has a done date ✅ 2023-04-17\n",
        "- [-] #task Has a cancelled date ❌ 2023-04-18\n",
        "- [ ] #task Lowest priority ⏬\n",
        "- [ ] #task Low priority 🔽\n",
        "- [ ] #task Normal priority\n",
        "- [ ] #task Medium priority 🔼\n",
        "- [ ] #task High priority ⏫\n",
        "- [ ] #task Highest priority 🔺\n",
        "- [ ] #task Is a recurring task 🔁 every day when done\n",
        "- [ ] #task do this after first 📅 2023-04-16 #tag ⛔ dcf64c,0h17ye ^blk\n",
    ));
    let t: Vec<&TasksFields> = note
        .items
        .iter()
        .map(|i| i.tasks.as_ref().unwrap())
        .collect();
    assert_eq!(t[0].created, d(2023, 4, 13));
    assert_eq!(t[1].scheduled, d(2023, 4, 14));
    assert_eq!(t[2].start, d(2023, 4, 15));
    assert_eq!(t[3].due, d(2023, 4, 16));
    assert_eq!(t[3].description, "#task Has a due date");
    assert_eq!(t[4].done, d(2023, 4, 17));
    assert_eq!(t[5].cancelled, d(2023, 4, 18));
    let p: Vec<Option<Priority>> = t[6..12].iter().map(|x| x.priority).collect();
    use Priority::*;
    assert_eq!(
        p,
        [
            Some(Lowest),
            Some(Low),
            None,
            Some(Medium),
            Some(High),
            Some(Highest)
        ]
    );
    assert_eq!(t[12].recurrence.as_deref(), Some("every day when done"));
    assert_eq!(t[13].due, d(2023, 4, 16));
    assert_eq!(t[13].depends_on, ["dcf64c", "0h17ye"]);
    assert_eq!(t[13].description, "#task do this after first #tag");
    // Dataview reads the same emoji as shorthand fields.
    assert_eq!(note.items[3].due(), Some(&day(2023, 4, 16)));
    // A signifier with words after it is not Tasks'.
    let mid = tasks::parse_tasks_fields("call 📅 2023-04-16 about it");
    assert_eq!(mid.due, None);
}

#[test]
fn tasks_dates_that_are_no_calendar_day_are_kept_as_invalid() {
    let d = |y, m, dd| NaiveDate::from_ymd_opt(y, m, dd);
    let t = tasks::parse_tasks_fields("pay rent 📅 2023-02-30 ⏳ 2023-02-01");
    assert_eq!(t.due, None);
    assert_eq!(t.invalid_dates, ["due"]);
    assert_eq!(t.scheduled, d(2023, 2, 1));
    assert_eq!(t.description, "pay rent");
    let ok = tasks::parse_tasks_fields("pay rent 📅 2023-02-28");
    assert!(ok.invalid_dates.is_empty());
}

// ---- Bounds ----

#[test]
fn fields_per_note_are_capped() {
    let text = "[a:: 1] ".repeat(MAX_FIELDS + 10) + "\n";
    // One line that long is skipped: spread them over lines.
    let text: String = text
        .split("] ")
        .filter(|s| !s.is_empty())
        .map(|s| format!("{s}]\n"))
        .collect();
    let note = parse_note(&text);
    assert_eq!(note.fields.len(), MAX_FIELDS);
    assert_eq!(note.omitted, 10);
}

#[test]
fn hostile_lines_stay_linear() {
    // Scanned the naive way (each bracket looks for the next `::`, then checks the key and
    // looks for the closing bracket by walking to it), a 32 KB line of brackets ending in `::`
    // costs about n²/2 = 5·10⁸ steps, and `(a::` repeated n²/8. Measured unoptimised: such a
    // scan took 74 s on half the 96 lines below (about 150 s on all: 10 times the bound), this
    // one 2.4 s on all.
    let n = MAX_LINE_BYTES - 8;
    let mut text = String::new();
    let shapes = [
        "[".repeat(n) + "::",
        "(".repeat(n) + "::",
        "(a::".repeat(n / 4),
        "[a:: [".repeat(n / 6),
        "::".repeat(n / 2),
        "- [ ] x ".to_owned() + &"[".repeat(n - 10) + "::",
    ];
    for shape in &shapes {
        for _ in 0..16 {
            text.push_str(shape);
            text.push_str("\n\n");
        }
    }
    // Deeply nested list items.
    for depth in 0..200 {
        text.push_str(&"  ".repeat(depth));
        text.push_str("- [ ] t [x:: 1]\n");
    }
    let started = std::time::Instant::now();
    let note = parse_note(&text);
    let took = started.elapsed();
    eprintln!("parsed {} bytes in {took:?}", text.len());
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    assert!(note.items.len() >= 200);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    #[test]
    fn any_text_parses_and_lines_are_inside_the_note(
        text in "(\\[|\\]|\\(|\\)|::|:|-|\\*|> |#|`|%%|\\\\|!|\\|| |\n|  |- \\[.\\] |1\\. |\\[\\[|a|K|📅 2021-01-01|2021-02-03|\"|,|---\n|x){0,80}"
    ) {
        let note = parse_note(&text);
        let lines = text.split('\n').count();
        for f in note.fields.iter().chain(note.items.iter().flat_map(|i| &i.fields)) {
            proptest::prop_assert!(f.line < lines);
        }
        for i in &note.items {
            proptest::prop_assert!(i.line + i.line_count <= lines);
            proptest::prop_assert!(i.parent.is_none_or(|p| p < i.line));
            proptest::prop_assert!(i.children.iter().all(|&c| c > i.line && c < lines));
        }
    }

    #[test]
    fn any_value_text_types_without_panic(s in "\\PC{0,40}") {
        let _ = parse_inline_value(&s);
        let _ = extract_inline_fields(&s, true);
        let _ = fields::extract_full_line_field(&s);
        let _ = tasks::parse_tasks_fields(&s);
    }
}

#[test]
fn items_on_one_line_keep_the_last_without_parent() {
    let note = parse_note("- - [ ] inner\n  - below\n");
    let lines: Vec<usize> = note.items.iter().map(|i| i.line).collect();
    assert_eq!(lines, [0, 1]);
    assert_eq!(note.items[0].task.map(|t| t.status), Some(' '));
    assert_eq!(
        note.items[0].text, "- [ ] inner",
        "Dataview's pattern reads the line"
    );
    assert_eq!(note.items[0].parent, None);
}

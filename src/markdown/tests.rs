//! Test-only module: its parent declares it under `#[cfg(test)]`, so nothing here ships.
//! Behaviour tests of [`parse_note`]: one test per rule, named after what it pins down, then
//! property tests for the invariants every input must keep.

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn tag_names(text: &str) -> Vec<String> {
    parse_note(text)
        .tags
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

fn link_targets(text: &str) -> Vec<String> {
    parse_note(text)
        .links
        .into_iter()
        .map(|l| l.target().into())
        .collect()
}

fn only_link(text: &str) -> Link {
    let mut links = parse_note(text).links;
    assert_eq!(links.len(), 1, "{links:#?}");
    links.remove(0)
}

// ---------------------------------------------------------------- tags

#[test]
fn inline_tags_are_found_in_text_order_with_positions() {
    let text = "Some #alpha text\n#Beta/Gamma and more #δelta";
    let note = parse_note(text);
    let got: Vec<(&str, u32, u32, &str)> = note
        .tags
        .iter()
        .map(|t| (&*t.name, t.pos.line, t.pos.column, &text[t.pos.range()]))
        .collect();
    assert_eq!(
        got,
        [
            ("alpha", 1, 6, "#alpha"),
            ("Beta/Gamma", 2, 1, "#Beta/Gamma"),
            ("δelta", 2, 22, "#δelta"),
        ]
    );
    assert!(note.tags.iter().all(|t| t.source == TagSource::Inline));
}

#[test]
fn tags_in_code_are_not_tags() {
    let text = "`#inline` code\n\n```\n#fenced\n```\n\n    #indented\n\n~~~md\n#tilde\n~~~\n";
    assert!(tag_names(text).is_empty());
}

#[test]
fn tags_in_math_are_not_tags() {
    assert!(tag_names("m $a #ra b$ n\n\nx $$ #rb $$ y\n\n$$\n#qd\n$$\n\n$#pb$").is_empty());
}

#[test]
fn tags_in_html_and_html_comments_are_not_tags() {
    let text =
        "a <!-- #qa --> b\n\n<!--\n#multi\n-->\n\n<div>\nhello #tp\n</div>\n\n<p>x #tr</p>\n";
    assert!(tag_names(text).is_empty());
}

#[test]
fn tags_in_obsidian_comments_are_not_tags() {
    let text = "keep #a %%hide #b%% keep #c\n\n%%\n#d\n\n# Hidden heading #e\n%%\n#f";
    assert_eq!(tag_names(text), ["a", "c", "f"]);
}

#[test]
fn unclosed_comment_hides_the_rest_of_the_note() {
    let note = parse_note("#a\n%% open\n#b [[L]]\n# H\n");
    assert_eq!(note.tags.len(), 1);
    assert!(note.links.is_empty());
    assert!(note.headings.is_empty());
}

#[test]
fn comment_markers_inside_code_are_code() {
    let text = "`%%` #a\n\n```\n%%\n```\n#b";
    assert_eq!(tag_names(text), ["a", "b"]);
}

#[test]
fn tag_after_punctuation_is_not_a_tag() {
    assert!(tag_names("(#pa) \"#pc\" .#pd x\u{2014}#pe a#b http://x.com/#frag").is_empty());
}

#[test]
fn tag_after_any_whitespace_is_a_tag() {
    assert_eq!(
        tag_names("x\t#pf [x #ph] a\u{a0}#qi b\u{3000}#qj"),
        ["pf", "ph", "qi", "qj"]
    );
}

#[test]
fn all_digit_hashtags_are_not_tags() {
    assert_eq!(tag_names("#1984 #y1984 #2024"), ["y1984"]);
}

#[test]
fn headings_are_not_tags() {
    let note = parse_note("# Title\n## Sub #real\n#NotHeading");
    assert_eq!(
        tag_names("# Title\n## Sub #real\n#NotHeading"),
        ["real", "NotHeading"]
    );
    assert_eq!(note.headings.len(), 2);
}

#[test]
fn double_hash_makes_two_tags() {
    // Obsidian's cache reads `#tl#tm` and `#tn/#to` as two tags each: a `#` right after a tag
    // starts another, although it follows a non-space character.
    assert_eq!(tag_names("#tl#tm #tn/#to"), ["tl", "tm", "tn", "to"]);
}

#[test]
fn tags_inside_emphasis_and_after_underscores_count() {
    assert_eq!(
        tag_names("x _#uc_ y **#bold** snake_case_#wc"),
        ["uc", "bold", "wc"]
    );
}

#[test]
fn tags_in_markdown_link_text_count() {
    assert_eq!(
        tag_names("[Discord #tf](https://x.y) and [a #tg][ref]\n\n[ref]: https://z"),
        ["tf", "tg"]
    );
}

#[test]
fn tags_in_wikilink_text_do_not_count() {
    // The inside of `[[...]]` is a link target and display text, not Markdown.
    assert!(tag_names("[[Note|#tag]] [[#Heading]] ![[img.png|#x]]").is_empty());
}

#[test]
fn tags_at_table_cell_start_count() {
    assert_eq!(
        tag_names("|a|b|\n|-|-|\n|#uo|x|\n| #up | y |"),
        ["uo", "up"]
    );
}

#[test]
fn tags_at_quote_and_list_line_start_count() {
    assert_eq!(tag_names(">#q\n\n- #l\n- [ ] #task"), ["q", "l", "task"]);
}

#[test]
fn escaped_hash_is_not_a_tag() {
    assert!(tag_names("\\#notatag").is_empty());
}

#[test]
fn closing_fence_with_info_string_does_not_end_code() {
    let text = "```markdown\n```typescript\nx #tu\n```\nprose #tv\n```\ncode #tw\n```\n";
    assert_eq!(tag_names(text), ["tv"]);
}

#[test]
fn frontmatter_tags_come_first_with_their_positions() {
    let text = "---\ntags:\n  - project/Alpha\n  - \"#quoted\"\n---\nBody #inline\n";
    let note = parse_note(text);
    let got: Vec<(&str, TagSource, &str)> = note
        .tags
        .iter()
        .map(|t| (&*t.name, t.source, &text[t.pos.range()]))
        .collect();
    assert_eq!(
        got,
        [
            ("project/Alpha", TagSource::Frontmatter, "project/Alpha"),
            ("quoted", TagSource::Frontmatter, "#quoted"),
            ("inline", TagSource::Inline, "#inline"),
        ]
    );
    assert_eq!(note.tags[0].pos.line, 3);
}

#[test]
fn frontmatter_tag_string_is_split_on_commas_and_spaces() {
    let text = "---\ntags: one, two three\n---\n";
    assert_eq!(tag_names(text), ["one", "two", "three"]);
    let text = "---\ntags: [a, b]\nTag: legacy\n---\n";
    assert_eq!(tag_names(text), ["a", "b", "legacy"]);
}

#[test]
fn hashtags_in_other_properties_are_not_tags() {
    assert!(tag_names("---\ndescription: about #stuff\n---\n").is_empty());
}

// ---------------------------------------------------------------- aliases

#[test]
fn aliases_come_from_a_list_or_a_comma_separated_string() {
    let note = parse_note("---\naliases: [AI, \"Machine, learning\"]\n---\n");
    assert_eq!(note.aliases, ["AI", "Machine, learning"]);
    let note = parse_note("---\naliases: Internal link, Link to blocks\n---\n");
    assert_eq!(note.aliases, ["Internal link", "Link to blocks"]);
    let note = parse_note("---\nalias: Old\nAliases:\n  - New\n  - Old\n---\n");
    assert_eq!(note.aliases, ["Old", "New"]);
}

// ---------------------------------------------------------------- headings

#[test]
fn atx_and_setext_headings_with_levels_and_lines() {
    let text = "# One\n\ntext\n\nTwo\n===\n\nThree\n---\n\n###### Six ###\n";
    let got: Vec<(u8, String, u32)> = parse_note(text)
        .headings
        .into_iter()
        .map(|h| (h.level, h.text.into(), h.pos.line))
        .collect();
    assert_eq!(
        got,
        [
            (1, "One".into(), 1),
            (1, "Two".into(), 5),
            (2, "Three".into(), 8),
            (6, "Six".into(), 11)
        ]
    );
}

#[test]
fn heading_text_has_inline_markup_stripped() {
    let note = parse_note("## A *b* **c** `d` [e](f.md) [[G|h]] [[I]] ~~j~~ %%k%% {#id}\n");
    assert_eq!(&*note.headings[0].text, "A b c d e h I j  {#id}");
}

#[test]
fn heading_pos_covers_the_heading_line() {
    let text = "intro\n\n## Sec ##\nafter";
    let h = &parse_note(text).headings[0];
    assert_eq!(&text[h.pos.range()], "## Sec ##");
    assert_eq!((h.pos.line, h.pos.column), (3, 1));
}

#[test]
fn headings_in_code_and_comments_are_not_headings() {
    let text = "```\n# code\n```\n%%\n# hidden\n%%\n<div>\n\n# html block ends at blank line\n";
    let texts: Vec<String> = parse_note(text)
        .headings
        .into_iter()
        .map(|h| h.text.into())
        .collect();
    assert_eq!(texts, ["html block ends at blank line"]);
}

// ---------------------------------------------------------------- block ids

#[test]
fn block_id_at_the_end_of_a_paragraph() {
    let text = "Some paragraph ^para-1\n\nline one ^notid\nline two\n";
    let note = parse_note(text);
    let ids: Vec<(&str, &str)> = note
        .block_ids
        .iter()
        .map(|b| (&*b.id, &text[b.pos.range()]))
        .collect();
    assert_eq!(ids, [("para-1", "^para-1")]);
}

#[test]
fn block_ids_on_list_items_nested_or_not() {
    let text = "- a ^x\n  - b ^y\n- c\n\n1. loose\n\n2. item ^v\n";
    let ids: Vec<String> = parse_note(text)
        .block_ids
        .into_iter()
        .map(|b| b.id.into())
        .collect();
    assert_eq!(ids, ["x", "y", "v"]);
}

#[test]
fn block_id_alone_after_a_list_quote_callout_or_table() {
    let text = "- item\n\n^list\n\n> quote\n\n^quote\n\n> [!note]\n> callout\n^callout\n\n| a |\n|---|\n| b |\n^table\n";
    let ids: Vec<String> = parse_note(text)
        .block_ids
        .into_iter()
        .map(|b| b.id.into())
        .collect();
    assert_eq!(ids, ["list", "quote", "callout", "table"]);
}

#[test]
fn block_id_needs_space_and_simple_characters() {
    let ids: Vec<String> =
        parse_note("a^x\n\nb ^under_score\n\nc ^ok\n\n`d ^code`\n\n# Heading ^h")
            .block_ids
            .into_iter()
            .map(|b| b.id.into())
            .collect();
    assert_eq!(ids, ["ok"]);
}

#[test]
fn block_id_in_a_table_cell_is_text() {
    assert!(
        parse_note("| a | b ^x |\n|---|---|\n| c ^y | d |\n")
            .block_ids
            .is_empty()
    );
}

// ---------------------------------------------------------------- wikilinks and embeds

#[test]
fn wikilink_with_heading_and_alias() {
    let l = only_link("See [[Folder/Note#Heading|the alias]] now");
    assert_eq!(l.kind, LinkKind::Wikilink);
    assert_eq!(&*l.raw, "[[Folder/Note#Heading|the alias]]");
    assert_eq!(l.target(), "Folder/Note");
    assert_eq!(
        l.subpath(),
        Some(&Subpath::Heading(vec!["Heading".into()].into()))
    );
    assert_eq!(l.display(), Some("the alias"));
    assert_eq!((l.pos.line, l.pos.column, l.pos.start), (1, 5, 4));
}

#[test]
fn wikilink_forms() {
    let text = "[[Note]] [[Note.md]] [[#Local]] [[Note#H1#H2]] [[Note#^blk-1]] [[ spaced ]]";
    let note = parse_note(text);
    let got: Vec<(&str, Option<Subpath>)> = note
        .links
        .iter()
        .map(|l| (l.target(), l.subpath().cloned()))
        .collect();
    assert_eq!(
        got,
        [
            ("Note", None),
            ("Note.md", None),
            ("", Some(Subpath::Heading(vec!["Local".into()].into()))),
            (
                "Note",
                Some(Subpath::Heading(vec!["H1".into(), "H2".into()].into()))
            ),
            ("Note", Some(Subpath::Block("blk-1".into()))),
            ("spaced", None),
        ]
    );
}

#[test]
fn embeds_with_sizes_and_pages() {
    let text = "![[img.png|640x480]] ![[img.png|100]] ![[doc.pdf#page=3]] ![[Note#Sec]]";
    let note = parse_note(text);
    type Row<'a> = (LinkKind, &'a str, Option<(u32, Option<u32>)>, Option<u32>);
    let got: Vec<Row<'_>> = note
        .links
        .iter()
        .map(|l| (l.kind, &*l.raw, l.size(), l.page()))
        .collect();
    assert_eq!(
        got,
        [
            (
                LinkKind::Embed,
                "![[img.png|640x480]]",
                Some((640, Some(480))),
                None
            ),
            (LinkKind::Embed, "![[img.png|100]]", Some((100, None)), None),
            (LinkKind::Embed, "![[doc.pdf#page=3]]", None, Some(3)),
            (LinkKind::Embed, "![[Note#Sec]]", None, None),
        ]
    );
    assert!(note.links.iter().all(|l| l.display().is_none()));
}

#[test]
fn links_in_code_math_html_and_comments_are_not_links() {
    let text = "`[[a]]` $[[b]]$ <!-- [[c]] --> %%[[d]]%%\n\n```\n[[e]]\n```\n\n<div>\n[[f]]\n</div>\n\n    [[g]]\n\n$$\n[[h]]\n$$\n";
    assert!(parse_note(text).links.is_empty());
}

#[test]
fn wikilinks_do_not_span_lines() {
    assert!(parse_note("[[a\nb]]").links.is_empty());
}

#[test]
fn wikilink_alias_pipe_is_escaped_in_tables() {
    let l = only_link("| a |\n|---|\n| [[Note\\|alias]] |\n");
    assert_eq!(l.target(), "Note");
    assert_eq!(l.display(), Some("alias"));
    assert_eq!(&*l.raw, "[[Note\\|alias]]");
}

#[test]
fn inline_markup_inside_wikilinks_is_literal() {
    assert_eq!(link_targets("[[a_b_c]] [[*x*]]"), ["a_b_c", "*x*"]);
}

// ---------------------------------------------------------------- markdown links

#[test]
fn markdown_links_are_percent_decoded() {
    let l = only_link("[text](Folder/Note%20name.md#Some%20Heading)");
    assert_eq!(l.kind, LinkKind::Markdown);
    assert_eq!(l.target(), "Folder/Note name.md");
    assert_eq!(
        l.subpath(),
        Some(&Subpath::Heading(vec!["Some Heading".into()].into()))
    );
    assert_eq!(l.display(), Some("text"));
    assert_eq!(&*l.raw, "[text](Folder/Note%20name.md#Some%20Heading)");
}

#[test]
fn markdown_links_in_angle_brackets_keep_spaces() {
    let l = only_link("[t](<Folder/Note name.md#^blk>)");
    assert_eq!(l.target(), "Folder/Note name.md");
    assert_eq!(l.subpath(), Some(&Subpath::Block("blk".into())));
}

#[test]
fn external_urls_and_autolinks_are_not_vault_links() {
    let text = "[a](https://x.com) [b](mailto:a@b.c) [c](obsidian://open?x) [d](file:///x) \
                [e](//cdn/x) <https://auto.link> <me@mail.com> ![f](http://img/x.png) [g](Local.md)";
    assert_eq!(link_targets(text), ["Local.md"]);
}

#[test]
fn markdown_image_is_an_embed() {
    let l = only_link("![alt text|200](assets/pic%201.png)");
    assert_eq!(l.kind, LinkKind::Embed);
    assert_eq!(l.target(), "assets/pic 1.png");
    assert_eq!(l.display(), Some("alt text"));
    assert_eq!(l.size(), Some((200, None)));
}

#[test]
fn reference_links_use_their_definition() {
    let l = only_link("[see][ref]\n\n[ref]: Other%20Note.md");
    assert_eq!(l.target(), "Other Note.md");
    assert_eq!(&*l.raw, "[see][ref]");
}

#[test]
fn same_note_markdown_heading_link() {
    let l = only_link("[up](#Top%20part)");
    assert_eq!(l.target(), "");
    assert_eq!(
        l.subpath(),
        Some(&Subpath::Heading(vec!["Top part".into()].into()))
    );
}

// ---------------------------------------------------------------- frontmatter

#[test]
fn frontmatter_is_an_object_with_its_closing_line() {
    let note = parse_note("---\ntitle: Hello\ncount: 3\ndone: false\nlist: [a, 1]\n---\n# Body\n");
    assert_eq!(
        note.frontmatter,
        Frontmatter::Valid {
            value: json!({"title": "Hello", "count": 3, "done": false, "list": ["a", 1]})
                .try_into()
                .unwrap(),
            end_line: 6
        }
    );
    assert_eq!(note.headings[0].pos.line, 7);
}

#[test]
fn empty_frontmatter_is_an_empty_object() {
    assert_eq!(
        parse_note("---\n---\ntext").frontmatter,
        Frontmatter::Valid {
            value: Properties::default(),
            end_line: 2
        }
    );
}

#[test]
fn frontmatter_not_at_line_one_is_not_frontmatter() {
    let note = parse_note("\n---\ntags: [x]\n---\n");
    assert_eq!(note.frontmatter, Frontmatter::None);
    assert!(note.tags.is_empty());
    let note = parse_note("Intro\n---\ntitle: x\n---\n");
    assert_eq!(note.frontmatter, Frontmatter::None);
}

#[test]
fn unclosed_frontmatter_is_body() {
    let note = parse_note("---\n#tag [[Link]]\n");
    assert_eq!(note.frontmatter, Frontmatter::None);
    assert_eq!(note.tags.len(), 1);
    assert_eq!(note.links.len(), 1);
}

#[test]
fn invalid_frontmatter_keeps_body_results() {
    let text = "---\ntitle: a: b\ntags: [x]\n---\n# Head\n[[Link]] #tag ^blk\n";
    let note = parse_note(text);
    let Frontmatter::Invalid { error, end_line } = &note.frontmatter else {
        panic!("{:?}", note.frontmatter);
    };
    assert!(error.starts_with("invalid frontmatter: "), "{error}");
    assert!(error.ends_with("(line 2)"), "{error}");
    assert_eq!(*end_line, 4);
    assert_eq!(tag_names(text), ["tag"]);
    assert_eq!(link_targets(text), ["Link"]);
    assert_eq!(note.headings.len(), 1);
    assert_eq!(note.block_ids.len(), 1);
}

#[test]
fn yaml_alias_bomb_is_refused_fast_and_body_still_parsed() {
    let mut yaml = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let mut prev = 'a';
    for name in 'b'..='j' {
        yaml.push_str(&format!(
            "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
        prev = name;
    }
    let text = format!("---\n{yaml}---\n[[After]]\n");
    let started = std::time::Instant::now();
    let note = parse_note(&text);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    let Frontmatter::Invalid { error, .. } = &note.frontmatter else {
        panic!("{:?}", note.frontmatter);
    };
    assert!(error.contains("alias expansion"), "{error}");
    assert_eq!(link_targets(&text), ["After"]);
}

#[test]
fn deeply_nested_frontmatter_is_refused() {
    let text = format!("---\na: {}{}\n---\n", "[".repeat(5000), "]".repeat(5000));
    let Frontmatter::Invalid { error, .. } = parse_note(&text).frontmatter else {
        panic!("nesting accepted");
    };
    assert!(error.contains("nested deeper than 64"), "{error}");
}

#[test]
fn duplicate_frontmatter_keys_are_invalid() {
    let note = parse_note("---\na: 1\na: 2\n---\n");
    assert!(matches!(note.frontmatter, Frontmatter::Invalid { .. }));
}

#[test]
fn frontmatter_links_point_into_the_frontmatter() {
    let text = "---\nup: \"[[Parent#Sec|p]]\"\nrelated:\n  - \"[[A]]\"\n  - '[[B]]'\n  - plain\nnested: {x: \"see [[C]] and [[D]]\"}\n---\n[[Body]]\n";
    let note = parse_note(text);
    let got: Vec<(LinkKind, &str, &str, u32)> = note
        .links
        .iter()
        .map(|l| (l.kind, l.target(), &text[l.pos.range()], l.pos.line))
        .collect();
    assert_eq!(
        got,
        [
            (LinkKind::Frontmatter, "Parent", "[[Parent#Sec|p]]", 2),
            (LinkKind::Frontmatter, "A", "[[A]]", 4),
            (LinkKind::Frontmatter, "B", "[[B]]", 5),
            (LinkKind::Frontmatter, "C", "[[C]]", 7),
            (LinkKind::Frontmatter, "D", "[[D]]", 7),
            (LinkKind::Wikilink, "Body", "[[Body]]", 9),
        ]
    );
    assert!(note.links.iter().all(|l| text[l.pos.range()] == *l.raw));
}

#[test]
fn unquoted_brackets_in_yaml_are_a_list_not_a_link() {
    let note = parse_note("---\nup: [[Parent]]\n---\n");
    assert!(note.links.is_empty());
    let Frontmatter::Valid { value, .. } = note.frontmatter else {
        panic!()
    };
    assert_eq!(value, json!({"up": [["Parent"]]}));
}

#[test]
fn folded_frontmatter_link_still_points_at_its_source() {
    let text = "---\nnote: >\n  see [[Far\n  Away]] and [[Near]]\n---\n";
    let note = parse_note(text);
    // `[[Far Away]]` only exists after folding: the link is not reported at a wrong place.
    assert!(note.links.iter().all(|l| text[l.pos.range()] == *l.raw));
    assert!(
        note.links
            .iter()
            .any(|l| l.target() == "Near" && &*l.raw == "[[Near]]")
    );
}

#[test]
fn dates_stay_strings_and_keys_keep_their_values() {
    let Frontmatter::Valid { value, .. } =
        parse_note("---\ndate: 2020-08-21\nat: 2020-08-21T10:00\n---\n").frontmatter
    else {
        panic!()
    };
    assert_eq!(
        value,
        json!({"date": "2020-08-21", "at": "2020-08-21T10:00"})
    );
}

#[test]
fn crlf_notes_parse_like_lf_notes() {
    let crlf = "---\r\ntags: [a]\r\n---\r\n# H\r\ntext #b [[L]] ^id\r\n";
    let note = parse_note(crlf);
    assert!(matches!(
        note.frontmatter,
        Frontmatter::Valid { end_line: 3, .. }
    ));
    assert_eq!(tag_names(crlf), ["a", "b"]);
    assert_eq!(&*note.headings[0].text, "H");
    assert_eq!(&*note.block_ids[0].id, "id");
    assert_eq!(link_targets(crlf), ["L"]);
}

// ---------------------------------------------------------------- unicode

#[test]
fn nfd_text_parses_and_columns_count_characters() {
    let nfd = "Cafe\u{301} #cafe\u{301} [[Re\u{301}sume\u{301}]]";
    let note = parse_note(nfd);
    assert_eq!(&*note.tags[0].name, "cafe\u{301}");
    assert_eq!(note.tags[0].pos.column, 7);
    assert_eq!(nfc(note.links[0].target()), "Résumé");
    assert!(tag_matches(&note.tags[0].name, "Café"));
}

#[test]
fn serialized_shape_is_stable() {
    let note = parse_note("---\ntags: [t]\n---\n![[a.png|10]]");
    let v = serde_json::to_value(&note).unwrap();
    assert_eq!(v["frontmatter"]["status"], "valid");
    assert_eq!(v["frontmatter"]["end_line"], 3);
    assert_eq!(v["tags"][0]["source"], "frontmatter");
    assert_eq!(v["links"][0]["kind"], "embed");
    assert_eq!(v["links"][0]["size"], json!([10, null]));
    let v = serde_json::to_value(parse_note("[[a#^b]] [[c#d]]").links).unwrap();
    assert_eq!(v[0]["subpath"], json!({"block": "b"}));
    assert_eq!(v[1]["subpath"], json!({"heading": ["d"]}));
    assert_eq!(
        serde_json::to_value(parse_note("x").frontmatter).unwrap(),
        json!({"status": "none"})
    );
}

#[test]
fn link_targets_serialize_whether_kept_in_raw_or_not() {
    let v =
        serde_json::to_value(parse_note("[[ A#b|c ]] [x](My%20Note.md) [[#Here]]").links).unwrap();
    let mut keys: Vec<&str> = v[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "display", "kind", "page", "pos", "raw", "size", "subpath", "target"
        ]
    );
    assert_eq!(v[0]["target"], "A");
    assert_eq!(v[1]["target"], "My Note.md");
    assert_eq!(v[2]["target"], "");
    assert_eq!(
        v[0]["pos"],
        json!({"line": 1, "column": 1, "start": 0, "end": 11})
    );
}

#[test]
fn a_plain_link_keeps_no_rare_parts_and_stays_small() {
    // The model holds every link of the vault: 1.2 million at 100,000 notes. 56 bytes each
    // (plus the raw text) is what docs/performance.md measures; growing it costs memory at scale.
    assert!(std::mem::size_of::<Link>() <= 56);
    let plain = only_link("see [[Folder/Note]] here");
    let rich = only_link("see [[Folder/Note#Part|shown]] here");
    assert_eq!(
        (plain.target(), plain.subpath(), plain.display()),
        ("Folder/Note", None, None)
    );
    assert_eq!(rich.target(), "Folder/Note");
    assert_eq!(
        rich.subpath(),
        Some(&Subpath::Heading(["Part".into()].into()))
    );
    assert_eq!(rich.display(), Some("shown"));
    assert_ne!(plain, only_link("see [[Folder/Note|shown]] here"));
}

#[test]
fn json_schema_can_be_generated() {
    let schema = schemars::schema_for!(ParsedNote);
    let text = serde_json::to_string(&schema).unwrap();
    assert!(text.contains("block_ids"));
}

// ---------------------------------------------------------------- properties

/// Checks the invariants every parse must keep.
fn check_invariants(text: &str) {
    let note = parse_note(text);
    let check_pos = |pos: &Pos| {
        let range = pos.range();
        assert!(
            range.start <= range.end && range.end <= text.len(),
            "{pos:?}"
        );
        assert!(
            text.is_char_boundary(range.start) && text.is_char_boundary(range.end),
            "{pos:?}"
        );
        let before = &text[..range.start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = text[line_start..range.start].chars().count() + 1;
        assert_eq!(
            (pos.line as usize, pos.column as usize),
            (line, column),
            "{pos:?}"
        );
    };
    for link in &note.links {
        check_pos(&link.pos);
        assert_eq!(&text[link.pos.range()], &*link.raw);
    }
    for tag in &note.tags {
        check_pos(&tag.pos);
        assert!(!tag.name.is_empty());
        if tag.source == TagSource::Inline {
            assert_eq!(&text[tag.pos.range()], format!("#{}", tag.name));
        }
    }
    for heading in &note.headings {
        check_pos(&heading.pos);
        assert!((1..=6).contains(&heading.level));
    }
    for block in &note.block_ids {
        check_pos(&block.pos);
        assert_eq!(&text[block.pos.range()], format!("^{}", block.id));
    }
    if let Frontmatter::Valid { value, .. } = &note.frontmatter {
        for (key, v) in value.iter() {
            assert_eq!(value.get(key), Some(v));
        }
    }
}

/// Markdown-ish fragments to build adversarial notes from.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("[[".to_owned()),
        Just("]]".to_owned()),
        Just("![[".to_owned()),
        Just("#".to_owned()),
        Just("# ".to_owned()),
        Just("%%".to_owned()),
        Just("`".to_owned()),
        Just("```\n".to_owned()),
        Just("$".to_owned()),
        Just("$$".to_owned()),
        Just("---\n".to_owned()),
        Just("...\n".to_owned()),
        Just("|".to_owned()),
        Just("\\|".to_owned()),
        Just("^".to_owned()),
        Just(" ^id".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        Just("\n\n".to_owned()),
        Just("- ".to_owned()),
        Just("> ".to_owned()),
        Just("<!--".to_owned()),
        Just("-->".to_owned()),
        Just("<div>".to_owned()),
        Just("](".to_owned()),
        Just(")".to_owned()),
        Just("[".to_owned()),
        Just("tags: ".to_owned()),
        Just("&a ".to_owned()),
        Just("*a".to_owned()),
        Just(": ".to_owned()),
        Just("\"".to_owned()),
        Just("%20".to_owned()),
        Just("👩\u{200d}💻".to_owned()),
        Just("e\u{301}".to_owned()),
        Just("\u{a0}".to_owned()),
        Just("日本".to_owned()),
        "[a-zA-Z0-9 /._-]{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_arbitrary_text(text in any::<String>()) {
        check_invariants(&text);
    }

    #[test]
    fn parse_keeps_invariants_on_markdown_fragments(
        parts in prop::collection::vec(fragment(), 0..60)
    ) {
        check_invariants(&parts.concat());
    }

    #[test]
    fn parse_keeps_invariants_with_frontmatter(
        yaml in prop::collection::vec(fragment(), 0..30),
        body in prop::collection::vec(fragment(), 0..30),
    ) {
        check_invariants(&format!("---\n{}\n---\n{}", yaml.concat(), body.concat()));
    }
}

#[test]
fn positions_of_the_largest_readable_note_fit_in_a_pos() {
    // Replacing invalid UTF-8 at most triples a note: its positions still fit in a `Pos`.
    assert!(crate::vault::MAX_READ_BYTES_LIMIT * 3 <= u64::from(super::MAX_POSITION));
}

#[test]
fn images_nested_20_000_deep_cost_linear_time_and_memory() {
    // Each image's source is the whole span around the inner ones: kept whole, 20,000 nested
    // images copied 1.2 GB out of 120 KB.
    let n = 20_000;
    let text = "![x ".repeat(n) + &"](a.png)".repeat(n);
    let started = std::time::Instant::now();
    let note = parse_note(&text);
    // A sanity bound (the copies took 4 s at 120 KB, and grow with the square).
    assert!(started.elapsed().as_secs() < 3, "{:?}", started.elapsed());
    let kept: usize = note.links.iter().map(|l| l.raw.len()).sum();
    assert!(kept <= 4 * text.len(), "{kept} bytes of link source kept");
    // Real nesting still reads: a badge image inside a link.
    let note = parse_note("[![badge](img.png)](Note.md) ![[a.png]] [x ![y](b.png)](c.md)\n");
    let targets: Vec<&str> = note.links.iter().map(|l| l.target()).collect();
    assert_eq!(targets, ["Note.md", "img.png", "a.png", "c.md", "b.png"]);
    // A tag inside a link nested past the depth read is still not read as one in alt text.
    let deep = "![a ".repeat(6) + "#t" + &"](x.png)".repeat(6);
    assert!(parse_note(&deep).tags.is_empty());
}

#[test]
fn code_blocks_are_found_by_language_with_their_lines_and_never_in_the_frontmatter() {
    let text = "---\nq: |\n  ```dataview\n  LIST\n  ```\n---\n# A\n\n```dataview\nLIST FROM #x\n```\n\n```js\nno\n```\n\n~~~tasks\nnot done\n~~~\n";
    let blocks = super::code_blocks(text, &["dataview", "tasks"]);
    let got: Vec<(usize, &str, &str)> = blocks
        .iter()
        .map(|b| (b.line, b.language.as_str(), b.body.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (9, "dataview", "LIST FROM #x\n"),
            (17, "tasks", "not done\n")
        ]
    );
    assert!(super::code_blocks(text, &["base"]).is_empty());
}

#[test]
fn inline_code_spans_come_with_their_lines_and_never_from_code_blocks() {
    let text = "---\na: `= x`\n---\nSee `= this.rating` and `plain`.\n\n```\n`= no`\n```\n";
    assert_eq!(
        super::inline_code(text, 10),
        vec![(4, "= this.rating".to_owned()), (4, "plain".to_owned())]
    );
    assert_eq!(super::inline_code(text, 1).len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Keys packed into one string: every key is found with its own value (keys that are
    /// prefixes of others, empty and non-ASCII keys included), absent keys are not, and the
    /// keys come back in byte order with the map's values.
    #[test]
    fn properties_find_every_key_and_only_those(
        keys in prop::collection::btree_set("(|a|ab|b|é|[a-c]{1,3}|Key [A-Z])", 0..12),
        absent in "(|a|ab|b|é|[a-d]{1,4}|Key [A-Z])",
    ) {
        let map: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), json!(i)))
            .collect();
        let props = Properties::from(map.clone());
        prop_assert_eq!(props.len(), keys.len());
        for (k, v) in &map {
            prop_assert_eq!(props.get(k), Some(v));
        }
        prop_assert_eq!(props.get(&absent), map.get(&absent));
        let listed: Vec<(&str, &serde_json::Value)> = props.iter().collect();
        let expected: Vec<(&str, &serde_json::Value)> =
            keys.iter().map(|k| (k.as_str(), &map[k])).collect();
        prop_assert_eq!(listed, expected);
        prop_assert_eq!(
            props.keys_are_plain(),
            keys.iter().all(|k| k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'))
        );
    }
}

//! The evaluator against the examples of Obsidian's Functions and Bases syntax pages, a small
//! table-backed vault, and random input.

use std::sync::Arc;

use chrono::{NaiveDate, NaiveDateTime};
use proptest::prelude::*;
use serde_json::json;

use super::eval::{Budget, Evaluator, PropertyType, Source, SourceLink};
use super::expr::parse;
use super::value::{FileRef, Value};
use super::*;

/// A vault as a table: path, properties, tags, links (targets), embeds.
struct TableVault {
    files: Vec<TestFile>,
}

struct TestFile {
    path: &'static str,
    props: serde_json::Map<String, serde_json::Value>,
    tags: Vec<&'static str>,
    links: Vec<&'static str>,
    embeds: Vec<&'static str>,
    mtime: NaiveDateTime,
}

fn at(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
}

fn file(path: &'static str, props: serde_json::Value) -> TestFile {
    TestFile {
        path,
        props: props.as_object().cloned().unwrap_or_default(),
        tags: Vec::new(),
        links: Vec::new(),
        embeds: Vec::new(),
        mtime: at("2025-05-01 10:00:00"),
    }
}

impl TableVault {
    fn sample() -> TableVault {
        let mut books = file("Categories/Books.md", json!({"tags": ["categories"]}));
        books.tags = vec!["categories"];
        let mut dune = file(
            "Books/Dune.md",
            json!({"categories": ["[[Books]]"], "author": ["[[Frank Herbert]]"], "rating": 5,
                   "year": 1965, "last": "2025-04-20", "price": 9.5, "age": 2,
                   "genre": ["[[Sci-fi]]"], "status": "done"}),
        );
        dune.tags = vec!["book", "scifi/classic"];
        dune.links = vec!["Books", "Frank Herbert", "Sci-fi"];
        dune.embeds = vec!["cover.jpg"];
        let mut hobbit = file(
            "Books/The Hobbit.md",
            json!({"categories": ["[[Books]]"], "author": "[[J. R. R. Tolkien]]", "rating": 4,
                   "year": 1937, "last": "2024-12-01", "price": 12, "age": 0,
                   "status": "reading"}),
        );
        hobbit.tags = vec!["book"];
        hobbit.links = vec!["Books"];
        let mut template = file(
            "Templates/Book Template.md",
            json!({"categories": ["[[Books]]"], "rating": null}),
        );
        template.links = vec!["Books"];
        let mut herbert = file("People/Frank Herbert.md", json!({"born": "1920-10-08"}));
        herbert.links = vec!["Dune"];
        let scifi = file("References/Sci-fi.md", json!({}));
        let cover = file("Attachments/cover.jpg", json!({}));
        TableVault {
            files: vec![books, dune, hobbit, template, herbert, scifi, cover],
        }
    }

    fn refs(&self) -> Vec<FileRef> {
        (0..self.files.len() as u32).map(FileRef).collect()
    }

    fn id(&self, path: &str) -> FileRef {
        FileRef(self.files.iter().position(|f| f.path == path).unwrap() as u32)
    }

    fn get(&self, f: FileRef) -> &TestFile {
        &self.files[f.0 as usize]
    }
}

impl Source for TableVault {
    fn path(&self, f: FileRef) -> &str {
        self.get(f).path
    }
    fn size(&self, f: FileRef) -> u64 {
        self.get(f).path.len() as u64 * 10
    }
    fn mtime(&self, f: FileRef) -> Option<NaiveDateTime> {
        Some(self.get(f).mtime)
    }
    fn ctime(&self, f: FileRef) -> Option<NaiveDateTime> {
        Some(self.get(f).mtime - chrono::TimeDelta::days(30))
    }
    fn property(&self, f: FileRef, key: &str) -> Option<&serde_json::Value> {
        self.get(f).props.get(key)
    }
    fn properties(&self, f: FileRef) -> Vec<(&str, &serde_json::Value)> {
        self.get(f)
            .props
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect()
    }
    fn property_type(&self, key: &str) -> Option<PropertyType> {
        match key {
            "last" => Some(PropertyType::Date),
            "rating" | "year" => Some(PropertyType::Number),
            _ => None,
        }
    }
    fn tags(&self, f: FileRef) -> Vec<Arc<str>> {
        self.get(f).tags.iter().map(|t| Arc::from(*t)).collect()
    }
    fn links(&self, f: FileRef, embeds: bool) -> Vec<SourceLink> {
        let list = if embeds {
            &self.get(f).embeds
        } else {
            &self.get(f).links
        };
        list.iter()
            .map(|t| SourceLink {
                target: (*t).to_owned(),
                display: None,
                file: self.resolve(t, Some(f)),
            })
            .collect()
    }
    fn links_to(&self, f: FileRef, to: FileRef) -> bool {
        let file = self.get(f);
        file.links
            .iter()
            .chain(&file.embeds)
            .any(|t| self.resolve(t, Some(f)) == Some(to))
    }
    fn backlinks(&self, f: FileRef) -> Vec<FileRef> {
        self.refs()
            .into_iter()
            .filter(|&g| self.links_to(g, f))
            .collect()
    }
    fn resolve(&self, target: &str, _from: Option<FileRef>) -> Option<FileRef> {
        let t = target.strip_suffix(".md").unwrap_or(target);
        self.files
            .iter()
            .position(|f| {
                let p = f.path.strip_suffix(".md").unwrap_or(f.path);
                p == t || p.rsplit('/').next() == Some(t)
            })
            .map(|i| FileRef(i as u32))
    }
    fn by_path(&self, path: &str) -> Option<FileRef> {
        self.files
            .iter()
            .position(|f| f.path == path)
            .map(|i| FileRef(i as u32))
    }
    fn now(&self) -> NaiveDateTime {
        at("2025-05-27 15:30:00")
    }
}

/// Evaluates `src` with `row` as `file` (and `this`), printed as JSON.
fn eval_on(v: &TableVault, row: Option<&str>, src: &str) -> Result<serde_json::Value, String> {
    let expr = parse(src).map_err(|e| format!("parse: {e}"))?;
    let budget = Budget::new();
    let formulas = Vec::new();
    let row = row.map(|p| v.id(p));
    let mut ev = Evaluator::new(v, &formulas, &budget, row);
    ev.set_row(row);
    let value = ev.eval(&expr).map_err(|e| e.message)?;
    Ok(value.to_json(&|f| v.path(f).to_owned()))
}

/// Each function of Obsidian's Functions page with its documented input and output (and the
/// examples of the Bases syntax page), as a table.
#[test]
fn functions_page_examples_give_their_documented_results() {
    let table: &[(&str, serde_json::Value)] = &[
        // Global
        (
            "escapeHTML(\"<b>&</b>\")",
            json!("&lt;b&gt;&amp;&lt;/b&gt;"),
        ),
        ("date(\"2025-01-01 12:00:00\").hour", json!(12)),
        ("if(true, \"Modified\", \"Unmodified\")", json!("Modified")),
        ("if(0, \"yes\")", json!(null)),
        ("list(\"value\")", json!(["value"])),
        ("list([1, 2])", json!([1, 2])),
        ("max(1, 5, 3)", json!(5)),
        ("min(4, 2, 8)", json!(2)),
        ("number(\"3.4\")", json!(3.4)),
        ("number(true)", json!(1)),
        ("number(date(\"1970-01-02\"))", json!(86_400_000)),
        ("today()", json!({"type": "date", "value": "2025-05-27"})),
        (
            "now()",
            json!({"type": "date", "value": "2025-05-27 15:30:00"}),
        ),
        (
            "html(\"<i>x</i>\")",
            json!({"type": "html", "html": "<i>x</i>"}),
        ),
        (
            "icon(\"arrow-right\")",
            json!({"type": "icon", "name": "arrow-right"}),
        ),
        ("duration(\"5h\") * 2 == duration(\"10h\")", json!(true)),
        // Any
        ("1.isTruthy()", json!(true)),
        ("\"example\".isType(\"string\")", json!(true)),
        ("true.isType(\"boolean\")", json!(true)),
        ("123.toString()", json!("123")),
        // Date
        (
            "date(\"2025-05-27\").format(\"YYYY-MM-DD\")",
            json!("2025-05-27"),
        ),
        (
            "now().date().format(\"YYYY-MM-DD HH:mm:ss\")",
            json!("2025-05-27 00:00:00"),
        ),
        ("now().time()", json!("15:30:00")),
        (
            "date(\"2025-05-24 15:30:00\").relative()",
            json!("3 days ago"),
        ),
        ("date(\"2025-05-27\").isEmpty()", json!(false)),
        ("date(\"2025-05-27 08:09:10\").minute", json!(9)),
        ("date(\"2025-05-27\").month", json!(5)),
        // String
        ("\"hello\".length", json!(5)),
        ("\"hello\".contains(\"ell\")", json!(true)),
        ("\"hello\".containsAll(\"h\", \"e\")", json!(true)),
        ("\"hello\".containsAny(\"x\", \"y\", \"e\")", json!(true)),
        ("\"hello\".endsWith(\"lo\")", json!(true)),
        ("\"Hello world\".isEmpty()", json!(false)),
        ("\"\".isEmpty()", json!(true)),
        ("\"HeLLo\".lower()", json!("hello")),
        ("\"a:b:c:d\".replace(/:/, \"-\")", json!("a-b:c:d")),
        ("\"a:b:c:d\".replace(/:/g, \"-\")", json!("a-b-c-d")),
        ("\"a:b:c:d\".replace(\":\", \"-\")", json!("a-b-c-d")),
        (
            "\"John Smith\".replace(/(\\w+) (\\w+)/, \"$2, $1\")",
            json!("Smith, John"),
        ),
        ("\"123\".repeat(2)", json!("123123")),
        ("\"hello\".reverse()", json!("olleh")),
        ("\"hello\".slice(1, 4)", json!("ell")),
        ("\"hello\".slice(1)", json!("ello")),
        ("\"a,b,c,d\".split(\",\", 3)", json!(["a", "b", "c"])),
        ("\"a,b,c,d\".split(/,/, 3)", json!(["a", "b", "c"])),
        ("\"hello\".startsWith(\"he\")", json!(true)),
        ("\"hello world\".title()", json!("Hello World")),
        ("\"  hi  \".trim()", json!("hi")),
        // Number
        ("(-5).abs()", json!(5)),
        ("(2.1).ceil()", json!(3)),
        ("(2.9).floor()", json!(2)),
        ("5.isEmpty()", json!(false)),
        ("(2.5).round()", json!(3)),
        ("(2.3333).round(2)", json!(2.33)),
        ("(3.14159).toFixed(2)", json!("3.14")),
        // List
        ("[1,2,3].length", json!(3)),
        ("[1,2,3].contains(2)", json!(true)),
        ("[1,2,3].containsAll(2,3)", json!(true)),
        ("[1,2,3].containsAny(3,4)", json!(true)),
        ("[1,2,3,4].filter(value > 2)", json!([3, 4])),
        ("[1,[2,3]].flat()", json!([1, 2, 3])),
        ("[1,2,3].isEmpty()", json!(false)),
        ("[1,2,3].join(\",\")", json!("1,2,3")),
        ("[1,2,3,4].map(value + 1)", json!([2, 3, 4, 5])),
        ("[1,2,3].reduce(acc + value, 0)", json!(6)),
        (
            "[3, \"x\", 7, 1].filter(value.isType(\"number\")).reduce(if(acc == null || value > acc, value, acc), null)",
            json!(7),
        ),
        ("[1,2,3].reverse()", json!([3, 2, 1])),
        ("[1,2,3,4].slice(1,3)", json!([2, 3])),
        ("[3, 1, 2].sort()", json!([1, 2, 3])),
        ("[\"c\", \"a\", \"b\"].sort()", json!(["a", "b", "c"])),
        ("[1,2,2,3].unique()", json!([1, 2, 3])),
        ("[10, 20].map(index)", json!([0, 1])),
        // Object
        ("{}.isEmpty()", json!(true)),
        ("{\"a\": 1, \"b\": 2}.keys()", json!(["a", "b"])),
        ("{\"a\": 1, \"b\": 2}.values()", json!([1, 2])),
        ("{\"a\": {\"b\": 3}}.a.b", json!(3)),
        ("{\"a\": 1}[\"a\"]", json!(1)),
        // Regular expression
        ("/abc/.matches(\"abcde\")", json!(true)),
        ("/ABC/i.matches(\"xabc\")", json!(true)),
        // Bases syntax page: date arithmetic and operators
        (
            "date(\"2024-12-01\") + \"1M\" + \"4h\" + \"3m\"",
            json!({"type": "date", "value": "2025-01-01 04:03:00"}),
        ),
        (
            "(now() + \"1d\") - now()",
            json!({"type": "duration", "ms": 86_400_000.0}),
        ),
        ("(now() + \"1 day\") > now()", json!(true)),
        (
            "today() + \"7d\"",
            json!({"type": "date", "value": "2025-06-03"}),
        ),
        ("now() - \"2h\" < now()", json!(true)),
        (
            "date(\"2025-03-31\") + \"1M\"",
            json!({"type": "date", "value": "2025-04-30"}),
        ),
        ("radius * (2 * 3.14)", json!(null)),
        ("7 % 3 + 2 * 3 - 1", json!(6)),
        ("1 + 2 * 3 == 7 && !false", json!(true)),
        ("\"a\" + 1 + 2", json!("a12")),
        ("null || \"fallback\"", json!("fallback")),
        ("0 && x", json!(0)),
        // Functions of the first Bases releases.
        ("not(empty(\"x\"))", json!(true)),
        ("empty([])", json!(true)),
    ];
    let mut failures = Vec::new();
    for (src, want) in table {
        let v = TableVault::sample();
        match eval_on(&v, Some("Books/Dune.md"), src) {
            Ok(got) if got == *want => {}
            other => failures.push(format!("{src}: want {want}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn file_fields_and_methods_follow_the_file() {
    let table: &[(&str, serde_json::Value)] = &[
        ("file.name", json!("Dune")),
        ("file(\"Attachments/cover.jpg\").name", json!("cover.jpg")),
        ("file.basename", json!("Dune")),
        ("file.path", json!("Books/Dune.md")),
        ("file.folder", json!("Books")),
        ("file.ext", json!("md")),
        ("file.size", json!(130)),
        (
            "file.mtime",
            json!({"type": "date", "value": "2025-05-01 10:00:00"}),
        ),
        ("file.mtime > now() - \"1 week\"", json!(false)),
        ("file.mtime > now() - \"4 weeks\"", json!(true)),
        ("file.tags", json!(["book", "scifi/classic"])),
        ("file.hasTag(\"scifi\")", json!(true)),
        ("file.hasTag(\"sci\")", json!(false)),
        ("file.hasTag(\"x\", \"book\")", json!(true)),
        ("file.hasLink(\"Frank Herbert\")", json!(true)),
        ("file.hasLink(link(\"Sci-fi\"))", json!(true)),
        ("file.hasLink(\"The Hobbit\")", json!(false)),
        ("file.hasProperty(\"rating\")", json!(true)),
        ("file.hasProperty(\"nope\")", json!(false)),
        ("file.inFolder(\"Books\")", json!(true)),
        ("file.inFolder(\"Boo\")", json!(false)),
        ("file.links.length", json!(3)),
        ("file.embeds[0].containsAny(\"jpg\", \"png\")", json!(true)),
        ("file.backlinks.length", json!(1)),
        (
            "file.backlinks[0].asFile().path",
            json!("People/Frank Herbert.md"),
        ),
        ("file.properties.year", json!(1965)),
        (
            "file.asLink()",
            json!({"type": "link", "target": "Books/Dune", "path": "Books/Dune.md"}),
        ),
        ("file.file == file", json!(true)),
        ("note.rating", json!(5)),
        ("note[\"rating\"] + rating", json!(10)),
        ("rating > 4", json!(true)),
        ("categories.contains(link(\"Books\"))", json!(true)),
        (
            "categories.contains(link(\"Categories/Books\"))",
            json!(true),
        ),
        ("categories.contains(link(\"Movies\"))", json!(false)),
        ("author[0] == link(\"Frank Herbert\")", json!(true)),
        (
            "author[0].asFile().properties.born",
            json!({"type": "date", "value": "1920-10-08"}),
        ),
        ("author[0].linksTo(file)", json!(true)),
        ("last", json!({"type": "date", "value": "2025-04-20"})),
        ("last > now() - \"60d\"", json!(true)),
        ("(now() - last).days.floor()", json!(37)),
        ("last.format(\"MMM D, YYYY\")", json!("Apr 20, 2025")),
        (
            "if(price, price.toFixed(2) + \" dollars\")",
            json!("9.50 dollars"),
        ),
        ("(price / age).toFixed(2)", json!("4.75")),
        ("status != \"done\"", json!(false)),
        ("missing.lower()", json!(null)),
        ("missing > 3", json!(false)),
        ("missing == null", json!(true)),
        ("file(\"Books/The Hobbit.md\").name", json!("The Hobbit")),
        (
            "file(link(\"[[The Hobbit]]\")).basename",
            json!("The Hobbit"),
        ),
        ("this.file.name", json!("Dune")),
        ("(now() - missing).days", json!(null)),
        ("missing + 1", json!(null)),
        ("\"a\" + missing", json!("a")),
        ("this.rating", json!(5)),
        ("file == this", json!(true)),
        ("link(\"Dune\") == this", json!(true)),
        ("link(\"Nowhere\") == link(\"Nowhere\")", json!(true)),
        ("link(\"Nowhere\") == link(\"Elsewhere\")", json!(false)),
        ("link(\"x\", \"shown\").toString()", json!("shown")),
        (
            "image(file.embeds[0])",
            json!({"type": "image", "src": "Attachments/cover.jpg"}),
        ),
    ];
    let mut failures = Vec::new();
    for (src, want) in table {
        let v = TableVault::sample();
        match eval_on(&v, Some("Books/Dune.md"), src) {
            Ok(got) if got == *want => {}
            other => failures.push(format!("{src}: want {want}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn errors_name_the_problem_and_its_position() {
    let v = TableVault::sample();
    let cases: &[(&str, &str)] = &[
        (
            "price +",
            "parse: expected a value, found end of expression (column 8)",
        ),
        ("foo(1)", "unknown function `foo()`"),
        ("if(1)", "if() takes 2 to 3 argument(s), got 1"),
        ("now(1)", "now() takes 0 argument(s), got 1"),
        ("link()", "link() takes 1 to 2 argument(s), got 0"),
        (
            "escapeHTML(1, 2)",
            "escapeHTML() takes 1 argument(s), got 2",
        ),
        ("\"x\".nope()", "a string has no method `nope()`"),
        ("[1] * 2", "cannot apply `*` to a list and a number"),
        ("date(\"someday\")", "cannot read `someday` as a date"),
        ("number(\"abc\")", "cannot read `abc` as a number"),
        ("/(/.matches(\"x\")", "parse: invalid regular expression"),
        ("\"unterminated", "parse: unterminated string (column 1)"),
        ("\"x\".repeat(1000000000)", "string too long"),
    ];
    for (src, want) in cases {
        let got = eval_on(&v, Some("Books/Dune.md"), src).unwrap_err();
        assert!(got.starts_with(want), "{src}: {got}");
    }
}

fn run_base(yaml: &str, view: Option<&str>, this: Option<&str>) -> Output {
    let v = TableVault::sample();
    let base = parse_base(yaml).unwrap();
    let view = base.view(view).unwrap();
    let this = this.map(|p| v.id(p));
    run(
        &base,
        view,
        &v,
        &v.refs(),
        this,
        &Budget::new(),
        0..usize::MAX,
    )
    .unwrap()
}

fn paths(out: &Output) -> Vec<&'static str> {
    let v = TableVault::sample();
    out.rows
        .iter()
        .map(|r| v.files[r.file.0 as usize].path)
        .collect()
}

#[test]
fn filters_combine_and_or_not_and_the_views_own() {
    let yaml = r#"
filters:
  and:
    - categories.contains(link("Books"))
    - '!file.name.contains("Template")'
views:
  - type: table
    name: All
  - type: table
    name: Unread
    filters:
      not:
        - status == "done"
  - type: table
    name: Either
    filters:
      or:
        - rating > 4
        - file.hasTag("nothing")
"#;
    assert_eq!(
        paths(&run_base(yaml, None, None)),
        ["Books/Dune.md", "Books/The Hobbit.md"]
    );
    assert_eq!(
        paths(&run_base(yaml, Some("Unread"), None)),
        ["Books/The Hobbit.md"]
    );
    assert_eq!(
        paths(&run_base(yaml, Some("Either"), None)),
        ["Books/Dune.md"]
    );
}

#[test]
fn views_sort_on_several_keys_limit_and_group_with_summaries() {
    let yaml = r#"
formulas:
  ppu: "(price / age).toFixed(2)"
  double: "formula.single * 2"
  single: rating
properties:
  note.rating:
    displayName: Rating
summaries:
  customAverage: 'values.mean().round(3)'
  total: 'values.reduce(acc + value, 0)'
views:
  - type: table
    name: Sorted
    filters: 'file.inFolder("Books")'
    order: [file.name, rating, formula.double, formula.ppu]
    sort:
      - property: rating
        direction: ASC
    summaries:
      rating: Average
      formula.double: total
      note.year: Range
  - type: table
    name: Grouped
    filters: 'file.ext == "md"'
    groupBy:
      property: note.status
      direction: DESC
    sort:
      - property: file.name
        direction: DESC
    limit: 3
    summaries:
      rating: Sum
"#;
    let out = run_base(yaml, Some("Sorted"), None);
    assert_eq!(paths(&out), ["Books/The Hobbit.md", "Books/Dune.md"]);
    let names = |f: FileRef| TableVault::sample().files[f.0 as usize].path.to_owned();
    let cells: Vec<serde_json::Value> = out.rows[1]
        .cells
        .iter()
        .map(|c| match c {
            Cell::Value(v) => v.to_json(&names),
            Cell::Error(e) => json!({"error": e}),
        })
        .collect();
    assert_eq!(cells, [json!("Dune"), json!(5), json!(10), json!("4.75")]);
    // 12 / 0 is Infinity, printed as JavaScript prints it.
    assert!(matches!(&out.rows[0].cells[3], Cell::Value(Value::String(s)) if &**s == "Infinity"));
    let summary = |out: &Output, id: &str| {
        let s = out
            .summaries
            .iter()
            .find(|s| s.property.id() == id)
            .unwrap();
        match &s.value {
            Cell::Value(v) => v.to_json(&names),
            Cell::Error(e) => json!({"error": e}),
        }
    };
    assert_eq!(summary(&out, "note.rating"), json!(4.5));
    assert_eq!(summary(&out, "formula.double"), json!(18));
    assert_eq!(summary(&out, "note.year"), json!(28));

    let out = run_base(yaml, Some("Grouped"), None);
    // Groups by status, largest first, empty last; three rows at most.
    assert_eq!(out.matched, 6);
    assert_eq!(out.rows.len(), 3);
    let keys: Vec<serde_json::Value> = out.groups.iter().map(|g| g.key.to_json(&names)).collect();
    assert_eq!(keys, [json!("reading"), json!("done"), json!(null)]);
    assert_eq!(
        paths(&out),
        [
            "Books/The Hobbit.md",
            "Books/Dune.md",
            "References/Sci-fi.md"
        ]
    );
    assert_eq!(out.groups[0].len, 1);
    assert!(
        matches!(&out.groups[1].summaries[0].value, Cell::Value(Value::Number(n)) if *n == 5.0)
    );
}

#[test]
fn a_formula_cycle_is_an_error_value_not_a_failed_query() {
    let yaml = r#"
formulas:
  a: formula.b + 1
  b: formula.a + 1
  ok: rating * 2
  broken: "rating +"
views:
  - type: table
    filters: 'file.basename == "Dune"'
    order: [formula.a, formula.ok, formula.broken]
"#;
    let out = run_base(yaml, None, None);
    assert_eq!(out.rows.len(), 1);
    let row = &out.rows[0];
    assert!(
        matches!(&row.cells[0], Cell::Error(e) if e.contains("cycle")),
        "{:?}",
        row.cells[0]
    );
    assert!(matches!(&row.cells[1], Cell::Value(Value::Number(n)) if *n == 10.0));
    let base =
        parse_base("formulas:\n  bad: 'rating * [2]'\nviews:\n  - order: [formula.bad]\n").unwrap();
    let v = TableVault::sample();
    let out = run(
        &base,
        &base.views[0],
        &v,
        &[v.id("Books/Dune.md")],
        None,
        &Budget::new(),
        0..10,
    )
    .unwrap();
    // The formula's name, what failed, and where in the formula.
    assert!(
        matches!(&out.rows[0].cells[0], Cell::Error(e) if e == "in formula `bad`: cannot apply `*` to a number and a list (column 8)"),
        "{:?}",
        out.rows[0].cells[0]
    );
    assert!(
        matches!(&row.cells[2], Cell::Error(e) if e.contains("does not parse") && e.contains("column 9")),
        "{:?}",
        row.cells[2]
    );
}

#[test]
fn a_filter_that_does_not_parse_fails_the_query_with_its_position() {
    let v = TableVault::sample();
    let base = parse_base("filters:\n  and:\n    - 'rating >> 2'\n").unwrap();
    let err = run(
        &base,
        &base.views[0],
        &v,
        &v.refs(),
        None,
        &Budget::new(),
        0..usize::MAX,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "filter `rating >> 2` does not parse: expected a value, found `>` (column 9)"
    );
}

#[test]
fn this_is_the_embedding_note() {
    let yaml = "filters:\n  and:\n    - list(author).contains(this)\n";
    let out = run_base(yaml, None, Some("People/Frank Herbert.md"));
    assert_eq!(paths(&out), ["Books/Dune.md"]);
    let yaml = "filters:\n  or:\n    - file.hasLink(this)\n    - this.file.hasLink(file)\n";
    let out = run_base(yaml, None, Some("Books/Dune.md"));
    assert_eq!(
        paths(&out),
        // Embeds are links too (`cover.jpg`), as in Obsidian's resolved links.
        [
            "Categories/Books.md",
            "People/Frank Herbert.md",
            "References/Sci-fi.md",
            "Attachments/cover.jpg"
        ]
    );
}

#[test]
fn a_runaway_query_stops_within_its_budget() {
    let v = TableVault::sample();
    let base = parse_base(
        "formulas:\n  big: '[1,2,3,4,5,6,7,8,9,10].map([1,2,3,4,5,6,7,8,9,10].map([1,2,3,4,5,6,7,8,9,10].map(value)))'\nviews:\n  - order: [formula.big]\n",
    )
    .unwrap();
    let budget = Budget::with(5_000, std::time::Duration::from_secs(5));
    let err = run(
        &base,
        &base.views[0],
        &v,
        &v.refs(),
        None,
        &budget,
        0..usize::MAX,
    )
    .unwrap_err();
    assert!(matches!(err, BaseError::Budget(..)), "{err}");
}

#[test]
fn a_cancelled_query_stops_inside_a_regex_function_call_and_between_rows() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    // Steps and time to spare (the regex below would run for minutes): only the stop check
    // can end these within a second; past the deadline they would say "took too long".
    let stop = Arc::new(AtomicBool::new(false));
    let marked = Arc::clone(&stop);
    let budget = Budget::with(super::eval::MAX_STEPS, std::time::Duration::from_secs(20))
        .stop_when(move || marked.load(Ordering::Relaxed));
    assert_eq!(eval_with(&budget, "1 + 1").unwrap(), serde_json::json!(2));
    stop.store(true, Ordering::Relaxed);
    let started = std::time::Instant::now();
    // Minutes of regex work (every search reads the rest of the string) if nothing stopped it.
    let e = eval_with(&budget, r#""x".repeat(1000000).replace(/(.*Z)?/gs, "")"#).unwrap_err();
    assert!(e.contains("cancelled"), "{e}");
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    let v = TableVault::sample();
    let base = parse_base(
        "formulas:\n  big: '[1,2,3,4,5,6,7,8,9,10].map([1,2,3,4,5,6,7,8,9,10].map([1,2,3,4,5,6,7,8,9,10].map(value)))'\nviews:\n  - order: [formula.big]\n",
    )
    .unwrap();
    let err = run(
        &base,
        &base.views[0],
        &v,
        &v.refs(),
        None,
        &budget,
        0..usize::MAX,
    )
    .unwrap_err();
    assert!(
        matches!(&err, BaseError::Budget(_, m) if m.contains("cancelled")),
        "{err}"
    );
}

/// Evaluates `src` with no row under `budget`, giving the error message.
fn eval_with(budget: &Budget, src: &str) -> Result<serde_json::Value, String> {
    let v = TableVault::sample();
    let expr = parse(src).map_err(|e| format!("parse: {e}"))?;
    let formulas = Vec::new();
    let mut ev = Evaluator::new(&v, &formulas, budget, None);
    let value = ev.eval(&expr).map_err(|e| e.message)?;
    Ok(value.to_json(&|f| v.path(f).to_owned()))
}

#[test]
fn regex_work_over_a_long_string_is_charged_by_size_and_stops_at_the_deadline() {
    // The pattern matches the empty string at every position and each search for it reads the
    // rest of the string: one `replace` call was 13 s of a single "step".
    let started = std::time::Instant::now();
    let budget = Budget::with(
        super::eval::MAX_STEPS,
        std::time::Duration::from_millis(200),
    );
    let e = eval_with(&budget, r#""x".repeat(1000000).replace(/(.*Z)?/gs, "")"#).unwrap_err();
    assert!(e.contains("took too long"), "{e}");
    let e = eval_with(&budget, r#""x".repeat(1000000).split(/(.*Z)?/s)"#).unwrap_err();
    assert!(e.contains("took too long"), "{e}");
    // A sanity bound: the clock is read between searches.
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    // Steps grow with the bytes handled, not the number of calls.
    for src in [
        r#""ab".repeat(500000).split(/b/).length"#,
        r#""ab".repeat(500000).replace(/b/g, "c").length"#,
        r#""ab".repeat(500000).lower().length"#,
    ] {
        let budget = Budget::with(5_000, std::time::Duration::from_secs(60));
        let e = eval_with(&budget, src).unwrap_err();
        assert!(e.contains("evaluation steps"), "{src}: {e}");
    }
    // A list searched for each of many values is charged for each.
    let many = vec!["\"y\""; 40].join(", ");
    let src = format!(r#""x".repeat(100000).split("").containsAny({many})"#);
    let budget = Budget::with(200_000, std::time::Duration::from_secs(60));
    let e = eval_with(&budget, &src).unwrap_err();
    assert!(e.contains("evaluation steps"), "{e}");
    // The loops give what the regex crate's split and replace_all give.
    let budget = Budget::new();
    for (src, want) in [
        (r#""a1b22c".split(/\d*/)"#, json!(["", "a", "b", "c", ""])),
        (r#""a1b22c".split(/\d+/, 2)"#, json!(["a", "b"])),
        (r#""a1b22c".replace(/\d*/g, "-")"#, json!("-a-b-c-")),
        (r#""a1b22c".replace(/(\d)+/, "<$1>")"#, json!("a<1>b22c")),
        (r#""abc".split(/x/, 0)"#, json!([])),
    ] {
        assert_eq!(eval_with(&budget, src).unwrap(), want, "{src}");
    }
}

#[test]
fn nesting_and_length_limits_refuse_hostile_expressions() {
    let deep = "(".repeat(200) + "1" + &")".repeat(200);
    assert!(parse(&deep).unwrap_err().message.contains("deeper"));
    let long = "1+".repeat(10_000) + "1";
    assert!(parse(&long).unwrap_err().message.contains("longer"));
    let chain = "x".to_owned() + &".a".repeat(100);
    assert!(parse(&chain).is_err());
}

#[test]
fn base_yaml_keeps_unknown_keys_and_reads_legacy_forms() {
    let base = parse_base(
        "display:\n  note.rating: Rating\nviews:\n  - type: cards\n    name: Gallery\n    image: file.file\n    sort:\n      - column: note.rating\n        direction: DESC\n",
    )
    .unwrap();
    let view = &base.views[0];
    assert_eq!(view.kind, "cards");
    assert_eq!(view.options.get("image"), Some(&json!("file.file")));
    assert!(view.sort[0].descending);
    assert_eq!(view.sort[0].property, Property::Note("rating".into()));
    assert_eq!(base.display_name(&Property::parse("rating")), "Rating");
    assert!(parse_base("views: 3").is_err());
    assert!(parse_base("a: &x [*x]").is_err());
}

#[test]
fn required_tags_come_from_top_level_has_tag_calls_only() {
    let req = |yaml: &str| {
        let base = parse_base(yaml).unwrap();
        base.filters.map(|f| f.required_tags()).unwrap_or_default()
    };
    assert_eq!(
        req("filters: 'file.hasTag(\"a\", \"b\")'"),
        [vec!["a", "b"]]
    );
    assert_eq!(
        req(
            "filters:\n  and:\n    - 'file.hasTag(\"a\") && x > 1 && file.hasTag(\"c\")'\n    - y\n"
        ),
        [vec!["a"], vec!["c"]]
    );
    // Not required: under `or`, `not`, `!`, `||`, or with a computed argument.
    for yaml in [
        "filters:\n  or:\n    - 'file.hasTag(\"a\")'\n",
        "filters:\n  not:\n    - 'file.hasTag(\"a\")'\n",
        "filters: '!file.hasTag(\"a\")'",
        "filters: 'file.hasTag(\"a\") || x'",
        "filters: 'file.hasTag(x)'",
        "filters: 'this.file.hasTag(\"a\")'",
    ] {
        assert!(req(yaml).is_empty(), "{yaml}");
    }
}

#[test]
fn summaries_builtins() {
    let nums: Vec<Value> = [3.0, 1.0, 2.0, 10.0]
        .into_iter()
        .map(Value::Number)
        .collect();
    let mut with_null = nums.clone();
    with_null.push(Value::Null);
    let get = |name: &str, values: &[Value]| match query::builtin_summary(name, values) {
        Cell::Value(v) => v.to_json(&|_| String::new()),
        Cell::Error(e) => json!({"error": e}),
    };
    assert_eq!(get("Average", &with_null), json!(4));
    assert_eq!(get("Min", &nums), json!(1));
    assert_eq!(get("Max", &nums), json!(10));
    assert_eq!(get("Sum", &nums), json!(16));
    assert_eq!(get("Range", &nums), json!(9));
    assert_eq!(get("Median", &nums), json!(2.5));
    assert_eq!(get("Empty", &with_null), json!(1));
    assert_eq!(get("Filled", &with_null), json!(4));
    assert_eq!(
        get(
            "Unique",
            &[Value::str("a"), Value::str("a"), Value::str("b")]
        ),
        json!(2)
    );
    assert_eq!(
        get(
            "Checked",
            &[Value::Bool(true), Value::Bool(false), Value::Bool(true)]
        ),
        json!(2)
    );
    assert_eq!(
        get("Unchecked", &[Value::Bool(true), Value::Bool(false)]),
        json!(1)
    );
    let d = |s: &str| {
        Value::Date(value::Date::day(
            NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap(),
        ))
    };
    let dates = [d("2025-01-03"), d("2024-12-30")];
    assert_eq!(
        get("Earliest", &dates),
        json!({"type": "date", "value": "2024-12-30"})
    );
    assert_eq!(
        get("Latest", &dates),
        json!({"type": "date", "value": "2025-01-03"})
    );
    assert_eq!(
        get("Range", &dates),
        json!({"type": "duration", "ms": 345_600_000.0})
    );
    assert!(matches!(
        query::builtin_summary("Nope", &nums),
        Cell::Error(_)
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    /// Random expressions built from the language's pieces never panic, and finish within the
    /// budget.
    #[test]
    fn random_expressions_never_panic(parts in proptest::collection::vec(prop_oneof![
        Just("file"), Just("."), Just("name"), Just("("), Just(")"), Just("["), Just("]"),
        Just("1"), Just("\"a\""), Just("+"), Just("-"), Just("*"), Just("/"), Just("&&"),
        Just("||"), Just("!"), Just("=="), Just(">"), Just(","), Just("map"), Just("filter"),
        Just("value"), Just("list"), Just("now()"), Just("\"1d\""), Just("/x+/g"), Just("reduce"),
        Just("acc"), Just("formula"), Just("this"), Just("hasTag"), Just("{"), Just("}"), Just(":"),
        Just("rating"), Just("repeat"), Just("split"), Just("date"), Just("\"2024-01-01\""),
    ], 0..40)) {
        let src = parts.concat();
        let v = TableVault::sample();
        if let Ok(expr) = parse(&src) {
            let budget = Budget::with(100_000, std::time::Duration::from_secs(2));
            let formulas = Vec::new();
            let mut ev = Evaluator::new(&v, &formulas, &budget, Some(FileRef(1)));
            ev.set_row(Some(FileRef(1)));
            let _ = ev.eval(&expr);
            prop_assert!(budget.used() <= 100_000 + 100_000);
        }
    }

    /// Any text is either a base or a clear error, never a panic.
    #[test]
    fn random_base_yaml_never_panics(src in "[a-z: \\-\\[\\]{}'\"\\n.()!&|=<>0-9]{0,200}") {
        if let Ok(base) = parse_base(&src) {
            let v = TableVault::sample();
            for view in &base.views {
                let _ = run(&base, view, &v, &v.refs(), None, &Budget::with(100_000, std::time::Duration::from_secs(2)), 0..usize::MAX);
            }
        }
    }
}

#[test]
fn a_page_of_a_sorted_view_is_the_same_slice_of_the_full_sort_ties_included() {
    // 200 files, seven sort values: many ties, which keep the files' order.
    let names: Vec<&'static str> = (0..200)
        .map(|i| &*Box::leak(format!("N/{i:03}.md").into_boxed_str()))
        .collect();
    let v = TableVault {
        files: names
            .iter()
            .enumerate()
            .map(|(i, p)| file(p, json!({"rank": (i * 5) % 7})))
            .collect(),
    };
    for (yaml, total) in [
        (
            "views:\n  - sort:\n      - property: rank\n        direction: DESC\n",
            200,
        ),
        (
            "views:\n  - limit: 30\n    sort:\n      - property: rank\n      - property: file.name\n        direction: DESC\n",
            30,
        ),
    ] {
        let base = parse_base(yaml).unwrap();
        let go = |page: std::ops::Range<usize>| {
            let out = run(
                &base,
                &base.views[0],
                &v,
                &v.refs(),
                None,
                &Budget::new(),
                page,
            )
            .unwrap();
            (
                out.total,
                out.rows.iter().map(|r| r.file).collect::<Vec<_>>(),
            )
        };
        let (all_total, all) = go(0..usize::MAX);
        assert_eq!((all_total, all.len()), (total, total));
        for page in [0..10, 10..20, 25..35, 195..205] {
            let (t, rows) = go(page.clone());
            assert_eq!(t, total);
            let want = &all[page.start.min(total)..page.end.min(total)];
            assert_eq!(rows, want, "{yaml} {page:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The budgeted loops of `split` and `replace` give what the regex crate's own `split`,
    /// `replace` and `replace_all` give, empty matches included.
    #[test]
    fn budgeted_split_and_replace_agree_with_the_regex_crate(
        text in "[ab1é ]{0,24}",
        pattern in prop::sample::select(vec![
            "a", "a*", "b?", "\\d*", "(a)(b)?", "é|", "\\b", "a+|b*",
        ]),
        rep in prop::sample::select(vec!["", "-", "<$1>", "$$", "x$2y"]),
        limit in 0usize..6,
        global in any::<bool>(),
    ) {
        let re = regex::Regex::new(pattern).unwrap();
        let lit = |s: &str| serde_json::to_string(s).unwrap();
        let flags = if global { "g" } else { "" };
        let budget = Budget::new();
        let src = format!("{}.split(/{pattern}/, {limit})", lit(&text));
        let want: Vec<&str> = re.split(&text).take(limit).collect();
        prop_assert_eq!(eval_with(&budget, &src).unwrap(), json!(want), "{}", src);
        let src = format!("{}.replace(/{pattern}/{flags}, {})", lit(&text), lit(rep));
        let rep_rs = crate::obsidian::jsregex::replacement(rep);
        let want = if global {
            re.replace_all(&text, rep_rs.as_str())
        } else {
            re.replace(&text, rep_rs.as_str())
        };
        prop_assert_eq!(eval_with(&budget, &src).unwrap(), json!(want), "{}", src);
    }
}

/// `unique()` the slow way: keep a value unless it equals one kept before it.
fn unique_pairwise(values: &[Value]) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if !kept.iter().any(|&j| values[j].equals(v)) {
            kept.push(i);
        }
    }
    kept
}

fn mixed_value() -> impl Strategy<Value = Value> {
    use super::value::{Duration, Link};
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0i32..4).prop_map(|n| Value::Number(f64::from(n))),
        Just(Value::Number(-0.0)),
        Just(Value::Number(f64::NAN)),
        prop::sample::select(vec![
            "0",
            "1",
            " 1",
            "1.0",
            "01",
            "2",
            "a",
            "b",
            "2025-01-02",
            "NaN"
        ])
        .prop_map(Value::str),
        Just(Value::Date(super::value::Date::day(
            NaiveDate::from_ymd_opt(2025, 1, 2).unwrap()
        ))),
        (0i32..3).prop_map(|n| Value::Duration(Duration {
            months: 0,
            ms: f64::from(n)
        })),
        prop::sample::select(vec!["a", "1"]).prop_map(|t| Value::Link(Arc::new(Link {
            target: Arc::from(t),
            display: None,
            file: None,
        }))),
        (0u32..2).prop_map(|f| Value::Link(Arc::new(Link {
            target: Arc::from("x"),
            display: None,
            file: Some(FileRef(f)),
        }))),
        (0u32..2).prop_map(|f| Value::File(FileRef(f))),
        (0u32..2).prop_map(|f| Value::Note(FileRef(f))),
    ];
    scalar.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(|l| Value::List(Arc::new(l))),
            proptest::collection::vec((prop::sample::select(vec!["k", "j"]), inner), 0..3)
                .prop_map(|o| {
                    // Objects have distinct keys (literals keep the last, as JavaScript).
                    let mut fields: Vec<(Arc<str>, Value)> = Vec::new();
                    for (k, v) in o {
                        fields.retain(|(k2, _)| &**k2 != k);
                        fields.push((Arc::from(k), v));
                    }
                    Value::Object(Arc::new(fields))
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The hashed `unique()` keeps exactly what comparing every pair keeps, across the
    /// cross-type equalities (numbers and numeric strings, dates and date strings, durations
    /// and numbers, links and files and unresolved links and their text, nested values).
    #[test]
    fn unique_keeps_what_pairwise_equality_keeps(values in proptest::collection::vec(mixed_value(), 0..24)) {
        prop_assert_eq!(super::value::distinct(&values), unique_pairwise(&values));
    }
}

#[test]
fn unique_of_many_distinct_values_counts_them_all_in_linear_work() {
    // 200,000 distinct values: comparing each with those kept before would be 2e10 equality
    // checks (the summary used to stop counting at 10,001, the list method fell back to
    // comparing printed text past 4,096).
    let n = 200_000;
    let values: Vec<Value> = (0..n)
        .map(|i| match i % 3 {
            0 => Value::Number(f64::from(i)),
            1 => Value::str(format!("note {i}")),
            _ => Value::List(Arc::new(vec![Value::str(format!("x{i}"))])),
        })
        .collect();
    assert_eq!(super::value::distinct(&values).len(), n as usize);
    match super::query::builtin_summary("Unique", &values) {
        super::query::Cell::Value(Value::Number(c)) => assert_eq!(c, f64::from(n)),
        other => panic!("unexpected summary {other:?}"),
    }
    // Look-alike strings of one number are distinct from one another but all equal the number.
    let mut alike: Vec<Value> = (0..50_000)
        .map(|i| Value::str(format!("{}1", "0".repeat(i % 200))))
        .collect();
    alike.push(Value::Number(1.0));
    assert_eq!(super::value::distinct(&alike).len(), 200);
}

/// The table of methods (`eval/methods.rs`'s `METHODS`) and the dispatch agree: every name the
/// table gives a type reaches an arm of that type (any error but "has no method"), and every
/// other method name is refused on it. A link also has the string methods, a duration the
/// number methods.
#[test]
fn every_method_in_the_table_is_dispatched_and_no_other() {
    use super::eval::METHODS;
    let v = TableVault::sample();
    let receivers: &[(&str, &str, &[&str])] = &[
        ("string", "\"abc\"", &[]),
        ("number", "2", &[]),
        ("list", "[1, 2]", &[]),
        ("date", "date(\"2025-01-01\")", &[]),
        ("object", "{\"a\": 1}", &[]),
        ("regular expression", "/a/", &[]),
        ("file", "file", &[]),
        ("link", "link(\"Sci-fi\")", &["string"]),
        ("duration", "duration(\"1d\")", &["number"]),
    ];
    let all: std::collections::BTreeSet<&str> = METHODS
        .iter()
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    for (ty, recv, also) in receivers {
        let has = |name: &str| {
            METHODS
                .iter()
                .any(|(t, names)| (t == ty || also.contains(t)) && names.contains(&name))
        };
        for name in &all {
            let src = format!("{recv}.{name}()");
            let refused = match eval_on(&v, Some("Books/Dune.md"), &src) {
                Ok(_) => false,
                Err(e) => e.contains("has no method"),
            };
            assert_eq!(refused, !has(name), "{src} on a {ty}");
        }
    }
    // A missing value answers every known method with nothing, and refuses the others.
    for name in &all {
        assert_eq!(
            eval_on(&v, Some("Books/Dune.md"), &format!("note.nothing.{name}()")),
            Ok(json!(null))
        );
    }
    let e = eval_on(&v, Some("Books/Dune.md"), "note.nothing.nope()").unwrap_err();
    assert!(e.contains("a null has no method `nope()`"), "{e}");
}

/// A `.base` that is not one is refused with a message saying what is wrong where.
#[test]
fn a_malformed_base_is_refused_with_what_is_wrong() {
    let table: &[(&str, &str)] = &[
        (
            "filters: {x: 1}",
            "filters: a filter object needs `and`, `or` or `not`",
        ),
        ("formulas: [1]", "`formulas` must be a mapping"),
        ("views: 3", "`views` must be a list"),
        ("views: [1]", "view 1 is not a mapping"),
        ("a: 1\na: 2", "invalid YAML: duplicate key `a` (line 2)"),
    ];
    for (yaml, want) in table {
        let e = parse_base(yaml).unwrap_err().to_string();
        assert_eq!(&e, want, "{yaml}");
    }
    let big = format!("a: \"{}\"", "x".repeat(MAX_BASE_BYTES));
    let e = parse_base(&big).unwrap_err();
    assert!(matches!(e, BaseError::TooLarge), "{e}");
    assert_eq!(e.to_string(), "the base is larger than 256 KiB");
}

/// Evaluates `src` with no row under `budget`, with `formulas` (name, source), on this thread:
/// the error, or the value as JSON.
fn eval_formulas(
    budget: &Budget,
    formulas: &[(&str, &str)],
    src: &str,
) -> Result<serde_json::Value, super::eval::EvalError> {
    let v = TableVault::sample();
    let expr = parse(src).unwrap();
    let formulas: Vec<_> = formulas
        .iter()
        .map(|(n, s)| (Arc::<str>::from(*n), parse(s)))
        .collect();
    let mut ev = Evaluator::new(&v, &formulas, budget, None);
    let value = ev.eval(&expr)?;
    Ok(value.to_json(&|f| v.path(f).to_owned()))
}

/// `"a".repeat(100000).replace("a", "b".repeat(100000))` would build ten gigabytes: it aborted
/// the server. Its size is known from its inputs, and refused before anything is built.
#[test]
fn a_replace_that_would_build_gigabytes_is_refused_before_it_is_built() {
    use crate::obsidian::budget::Spent;
    for src in [
        r#""a".repeat(100000).replace("a", "b".repeat(100000))"#,
        r#""a".repeat(100000).replace(/a/g, "b".repeat(100000))"#,
        r#""a".repeat(100000).replace(/(a)/g, "$1".repeat(50000))"#,
        r#""a".repeat(100000).split("").join("b".repeat(100000))"#,
        r#""a".repeat(1000000).repeat(1000000)"#,
    ] {
        let budget = Budget::new();
        let e = eval_formulas(&budget, &[], src).unwrap_err();
        assert_eq!(e.spent, Some(Spent::Bytes(1 << 20)), "{src}: {e:?}");
        assert!(e.message.contains("1 MiB"), "{src}: {}", e.message);
        // What was built on the way (the inputs) is all that was charged.
        assert!(
            budget.bytes_used() < 8 << 20,
            "{src}: {}",
            budget.bytes_used()
        );
    }
    // In a view, the whole query stops with the bound named.
    let base = parse_base(
        "formulas:\n  big: '\"a\".repeat(100000).replace(\"a\", \"b\".repeat(100000))'\nviews:\n  - order: [formula.big]\n",
    )
    .unwrap();
    let v = TableVault::sample();
    let err = run(
        &base,
        &base.views[0],
        &v,
        &v.refs(),
        None,
        &Budget::new(),
        0..usize::MAX,
    )
    .unwrap_err();
    assert!(
        matches!(&err, BaseError::Budget(Spent::Bytes(_), m) if m.contains("1 MiB")),
        "{err}"
    );
}

/// Values each within the string cap but together past the request's bytes are refused at the
/// request's bound, which the error names; building stops there.
#[test]
fn values_past_the_requests_bytes_are_refused_at_its_bound() {
    use crate::obsidian::budget::Spent;
    let budget = Budget::new().max_bytes(8 << 20);
    let e = eval_formulas(
        &budget,
        &[],
        r#""ab".repeat(1000).split("").map("y".repeat(1000000))"#,
    )
    .unwrap_err();
    assert_eq!(e.spent, Some(Spent::Bytes(8 << 20)), "{e:?}");
    assert!(e.message.contains("8 MiB"), "{}", e.message);
    assert!(budget.bytes_used() <= 8 << 20);
    // One long string shared a thousand times costs a thousand slots to build; written out
    // (`join`, `toString`, `+`) it would be a gigabyte, refused before it is written.
    let shared = [
        ("big", r#""y".repeat(1000000)"#),
        ("many", r#""x".repeat(1000).split("").map(formula.big)"#),
    ];
    for src in [
        "formula.many.join(\",\")",
        "formula.many.toString()",
        "formula.many + \"\"",
    ] {
        let budget = Budget::new();
        let e = eval_formulas(&budget, &shared, src).unwrap_err();
        assert_eq!(e.spent, Some(Spent::Bytes(1 << 20)), "{src}: {e:?}");
        assert!(
            budget.bytes_used() < 8 << 20,
            "{src}: {}",
            budget.bytes_used()
        );
    }
    // Sorting them writes each one's key (its text, lower-cased): a gigabyte, built until the
    // request's bytes are spent.
    let budget = Budget::new().max_bytes(32 << 20);
    let e = eval_formulas(&budget, &shared, "formula.many.sort()").unwrap_err();
    assert_eq!(e.spent, Some(Spent::Bytes(32 << 20)), "{e:?}");
    // A view's row costs its width: the list is cheap to build, not to return.
    let base = parse_base(
        "formulas:\n  big: '\"y\".repeat(1000000)'\n  many: '\"x\".repeat(1000).split(\"\").map(formula.big)'\nviews:\n  - order: [formula.many]\n",
    )
    .unwrap();
    let v = TableVault::sample();
    let budget = Budget::new().max_bytes(64 << 20);
    let err = run(
        &base,
        &base.views[0],
        &v,
        &v.refs(),
        None,
        &budget,
        0..usize::MAX,
    )
    .unwrap_err();
    assert!(
        matches!(&err, BaseError::Budget(Spent::Bytes(b), _) if *b == 64 << 20),
        "{err}"
    );
}

/// The heap bytes this thread asks for while evaluating hostile expressions stay within what
/// the budget was charged, plus a small constant (the evaluator's own bookkeeping): every
/// large allocation was charged before it was made.
#[test]
fn hostile_expressions_allocate_no_more_than_they_were_charged() {
    use crate::test_alloc::asked_by_this_thread;
    let v = TableVault::sample();
    let formulas: Vec<_> = [
        ("big", r#""y".repeat(1000000)"#),
        ("many", r#""x".repeat(1000).split("").map(formula.big)"#),
    ]
    .iter()
    .map(|(n, s)| (Arc::<str>::from(*n), parse(s)))
    .collect();
    for src in [
        r#""a".repeat(100000).replace("a", "b".repeat(100000))"#,
        r#""a".repeat(100000).replace(/a/g, "b".repeat(100000))"#,
        r#""ab".repeat(1000).split("").map("y".repeat(1000000))"#,
        r#""ab".repeat(100000).split("b").map(value + "c".repeat(100))"#,
        r#""x".repeat(1000000).split("").map(value)"#,
        r#""x".repeat(1000).split("").map("z".repeat(1000)).join("w".repeat(1000))"#,
        r#""x".repeat(100000).split("").map([value, index, [value]]).flat().reverse()"#,
        r#""x,".repeat(100000).split(/,/).map(value.replace(/(x)/, "$1$1$&").repeat(100))"#,
        r#""x".repeat(100000).split("").map(index).toString().repeat(2)"#,
        "formula.many.join(\",\")",
        "formula.many.sort()",
        "formula.many.unique()",
        r#"formula.big.upper().lower().title().reverse().slice(10).trim()"#,
    ] {
        let expr = parse(src).unwrap();
        let budget = Budget::new().max_bytes(16 << 20);
        let mut ev = Evaluator::new(&v, &formulas, &budget, None);
        let before = asked_by_this_thread();
        let r = ev.eval(&expr);
        let asked = asked_by_this_thread() - before;
        let charged = budget.bytes_used();
        assert!(
            asked <= charged + (64 << 10),
            "{src}: asked for {asked} bytes, charged {charged} ({:?})",
            r.err(),
        );
    }
}

/// What a row's filters and formulas build is given back once the row is done: a query whose
/// rows each build a large string runs within a budget that would not hold all of them.
#[test]
fn what_a_row_builds_is_given_back_once_the_row_is_done() {
    let base = parse_base(
        "formulas:\n  wide: '\"w\".repeat(200000)'\nfilters: 'formula.wide.length > 0'\nviews:\n  - order: [formula.wide.length, file.name]\n",
    )
    .unwrap();
    let v = TableVault::sample();
    // Seven rows of 400 KB charged each (written, then shared): 2.8 MB were they all kept.
    let budget = Budget::new().max_bytes(2 << 20);
    let out = run(
        &base,
        &base.views[0],
        &v,
        &v.refs(),
        None,
        &budget,
        0..usize::MAX,
    )
    .unwrap();
    assert_eq!(out.rows.len(), 7);
    assert!(budget.bytes_used() < 1 << 20, "{}", budget.bytes_used());
}

/// Ordinary formulas give what they gave before the budget counted bytes.
#[test]
fn ordinary_formulas_build_their_values_within_the_budget() {
    let budget = Budget::new();
    for (src, want) in [
        (r#""a-b-c".replace("-", "+")"#, json!("a+b+c")),
        (r#""a1b22".replace(/(\d+)/g, "<$1>")"#, json!("a<1>b<22>")),
        (r#""ab".repeat(3)"#, json!("ababab")),
        (
            r#""x,y,z".split(",").map(value.upper()).join("|")"#,
            json!("X|Y|Z"),
        ),
        (r#""héllo wörld".title()"#, json!("Héllo Wörld")),
        (r#""straße".upper()"#, json!("STRASSE")),
        (r#""abcdef".slice(1, -1)"#, json!("bcde")),
        (r#""añb".split("")"#, json!(["a", "ñ", "b"])),
        (r#""a" + 1 + [2, 3] + true"#, json!("a12, 3true")),
        ("[3, 1, 2].sort().reverse()", json!([3, 2, 1])),
        ("[[1, 2], [3]].flat().slice(1)", json!([2, 3])),
        ("[1, 1, \"1\", 2].unique()", json!([1, 2])),
        ("[1, 2] + [3]", json!([1, 2, 3])),
        ("{\"a\": 1, \"b\": [2]}.keys()", json!(["a", "b"])),
        (
            r#"date("2025-03-01").format("dddd, MMMM Do YYYY")"#,
            json!("Saturday, March 1st 2025"),
        ),
        (
            "escapeHTML(\"<a href='x'>\")",
            json!("&lt;a href=&#39;x&#39;&gt;"),
        ),
        ("(1e21).toString()", json!("1e+21")),
        ("(-1.5e-9).toString()", json!("-1.5e-9")),
    ] {
        assert_eq!(eval_formulas(&budget, &[], src).unwrap(), want, "{src}");
    }
    assert!(budget.bytes_used() > 0);
    assert!(budget.bytes_used() < 64 << 10, "{}", budget.bytes_used());
}

/// `reduce` is the one way to nest values without bound; a value nested a hundred thousand
/// deep would overflow the stack when dropped or written. Past 256 levels it is refused.
#[test]
fn reduce_refuses_to_nest_values_past_256_levels() {
    let budget = Budget::new();
    for src in [
        r#""x".repeat(100000).split("").reduce([acc], [])"#,
        r#""x".repeat(100000).split("").reduce({"a": acc}, 0)"#,
        r#""x".repeat(100000).split("").reduce(link("a", acc), 0)"#,
    ] {
        let e = eval_formulas(&budget, &[], src).unwrap_err();
        assert!(
            e.message.contains("deeper than 256"),
            "{src}: {}",
            e.message
        );
    }
    // A reduce that shares its accumulator twice a level is stopped by the steps it reads.
    let budget = Budget::with(1_000_000, std::time::Duration::from_secs(60));
    let e = eval_formulas(
        &budget,
        &[],
        r#""x".repeat(60).split("").reduce([acc, acc], [])"#,
    )
    .unwrap_err();
    assert!(e.message.contains("evaluation steps"), "{}", e.message);
    // Nesting within the bound, and flat accumulators, are as before.
    let budget = Budget::new();
    assert_eq!(
        eval_formulas(&budget, &[], r#""abc".split("").reduce([acc, value], [])"#).unwrap(),
        json!([[[[], "a"], "b"], "c"])
    );
    assert_eq!(
        eval_formulas(
            &budget,
            &[],
            r#""x".repeat(1000).split("").reduce(acc + [index], []).length"#
        )
        .unwrap(),
        json!(1000)
    );
}

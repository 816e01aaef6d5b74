//! DQL: the docs' queries and expressions worked out by hand over a small table-backed vault.

use chrono::{NaiveDate, NaiveDateTime};

use super::*;
use crate::obsidian::bases::value::Date;
use crate::obsidian::dataview::value::Duration;
use crate::obsidian::dataview::{DataviewNote, DvDate, Link, Value, parse_note};

const DOC_QUERIES: &[&str] = &[
    "    TASK\n    WHERE typeof(due) = \"date\" AND due <= date(today)\n    ",
    "CALENDAR due\nWHERE typeof(due) = \"date\"\n",
    "CALENDAR file.cday\n",
    "CALENDAR file.ctime\n",
    "CALENDAR file.day\nFLATTEN all(map(file.tasks, (x) => x.completed)) AS \"allCompleted\"\nWHERE !allCompleted\n",
    "LIST \"File Path: \" + file.folder + \" _(created: \" + file.cday + \")_\"\nFROM \"Games\"\n",
    "LIST WITHOUT ID length(rows) + \" pages of type \" + key\nGROUP BY type\n",
    "LIST WITHOUT ID next-in-line\nFROM \"30 Hobbies/Games/Dashboard\"\n",
    "LIST WITHOUT ID type\n",
    "LIST WITHOUT ID\n",
    "LIST file.folder\n",
    "LIST rows.c\nWHERE typeof(contacts) = \"array\" AND contains(contacts, [[Mr. L]])\nSORT length(contacts)\nFLATTEN contacts as c\nSORT link(c).age ASC\n",
    "LIST rows.file.link\nGROUP BY type\n",
    "LIST\n",
    "LIST\nFROM \"Books\"\n",
    "LIST\nFROM \"Games\"\nWHERE price > 10\n",
    "LIST\nFROM #assignments\nWHERE status = \"open\"\n",
    "LIST\nFROM #games/mobas OR #games/crpg\n",
    "LIST\nFROM #homework\n",
    "LIST\nFROM #homework\nWHERE status != \"done\"\n",
    "LIST\nFROM #status/open OR #status/wip\n",
    "LIST\nFROM #status/open\nSORT file.ctime DESC\nLIMIT 10\n",
    "LIST\nFROM (#assignment AND \"30 School\") OR (\"30 School/32 Homeworks\" AND outgoing([[School Dashboard Current To Dos]]))\n",
    "LIST\nFROM [[Study MOC]]\n",
    "LIST\nFROM [[]]\n",
    "LIST\nFROM outgoing([[Dashboard]])\n",
    "LIST\nGROUP BY type\n",
    "LIST\nWHERE contains(file.name, \"Math\")\n",
    "LIST\nWHERE contains(file.name, \"WIP\")\n",
    "LIST\nWHERE due AND due < date(today)\n",
    "LIST\nWHERE end - start > dur(2 days)\n",
    "LIST\nWHERE file.day.year = 2022\n",
    "LIST\nWHERE file.name = \"Scribble\"\n",
    "LIST\nWHERE string(file.day.year) = split(this.file.name, \"-W\")[0]\n",
    "TABLE L.text AS \"My lists\"\nFROM \"dailys\"\nFLATTEN file.lists AS L\nWHERE contains(L.author, \"Surname\")\n",
    "TABLE WITHOUT ID\nfile.link AS \"Game\",\nfile.etags AS \"File Tags\"\nFROM #games\n",
    "TABLE WITHOUT ID\nsteamid,\nfile.etags AS \"File Tags\"\nFROM #games\n",
    "TABLE due, file.tags AS \"tags\", average(working-hours)\n",
    "TABLE duedate, class, field-with-space\n",
    "TABLE file.ctime, appointment.type, appointment.time, follow-ups\nFROM \"30 Protocols/32 Management\"\nWHERE follow-ups\nSORT appointment.time\n",
    "TABLE file.ctime, status\nFROM \"projects/brainstorming\"\n",
    "TABLE hrs / 24 AS \"days\"\nFROM \"30 Projects\"\n",
    "TABLE id, episode_metadata.next, aliases[0]\n",
    "TABLE recipe-type AS \"type\", portions, length\nFROM #recipes\n",
    "TABLE start, end, (end - start) - dur(8 h) AS \"Overtime\" \nFROM #work\n",
    "TABLE started, file.folder AS Path, file.etags AS \"File Tags\"\nFROM #games\n",
    "TABLE started, file.folder, file.etags\nFROM #games\n",
    "TABLE\n",
    "TABLE\ndefault(finished, date(today)) - started AS \"Played for\",\nfile.folder AS Path,\nfile.etags AS \"File Tags\"\nFROM #games\n",
    "TASK\n",
    "TASK\nWHERE !completed AND contains(tags, \"#shopping\")\n",
    "TASK\nWHERE !completed AND file.day = date(yesterday)\n",
    "TASK\nWHERE !completed\n",
    "TASK\nWHERE !completed\nGROUP BY file.link\n",
    "TASK\nWHERE !completed\nSORT created ASC\nLIMIT 10\nGROUP BY file.link\nSORT rows.file.ctime ASC\n",
    "TASK\nWHERE due <= date(today)\n",
    "TASK\nWHERE urgent\n",
    "task\nwhere meta(section).subpath = \"Next Actions\"\n",
];

struct Page {
    path: String,
    note: DataviewNote,
    fm: Option<serde_json::Value>,
    tags: Vec<String>,
    links: Vec<Link>,
    mtime: NaiveDateTime,
}

/// A vault of `(path, text)` pages.
struct Vault {
    pages: Vec<Page>,
}

fn dt(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap()
}

impl Vault {
    fn new(files: &[(&str, &str)]) -> Vault {
        let pages = files
            .iter()
            .enumerate()
            .map(|(i, (path, text))| {
                let parsed = crate::markdown::parse_note(text);
                let fm = match &parsed.frontmatter {
                    crate::markdown::Frontmatter::Valid { value, .. } => Some(value.to_value()),
                    _ => None,
                };
                let mut tags: Vec<String> = Vec::new();
                for t in &parsed.tags {
                    let t = format!("#{}", t.name);
                    if !tags.contains(&t) {
                        tags.push(t);
                    }
                }
                let links = parsed
                    .links
                    .iter()
                    .map(|l| Link {
                        path: l.target().to_owned(),
                        subpath: None,
                        display: None,
                        embed: false,
                    })
                    .collect();
                Page {
                    path: (*path).to_owned(),
                    note: parse_note(text),
                    fm,
                    tags,
                    links,
                    mtime: dt(&format!("2024-01-{:02} 10:00", i % 28 + 1)),
                }
            })
            .collect();
        Vault { pages }
    }

    fn id(&self, path: &str) -> PageId {
        self.pages.iter().position(|p| p.path == path).unwrap()
    }
}

impl DvSource for Vault {
    fn pages(&self) -> Vec<PageId> {
        (0..self.pages.len()).collect()
    }
    fn path(&self, p: PageId) -> &str {
        &self.pages[p].path
    }
    fn size(&self, p: PageId) -> u64 {
        100 + p as u64
    }
    fn mtime(&self, p: PageId) -> Option<NaiveDateTime> {
        Some(self.pages[p].mtime)
    }
    fn ctime(&self, p: PageId) -> Option<NaiveDateTime> {
        Some(self.pages[p].mtime)
    }
    fn frontmatter(&self, p: PageId) -> Option<&serde_json::Value> {
        self.pages[p].fm.as_ref()
    }
    fn note(&self, p: PageId) -> Option<&DataviewNote> {
        Some(&self.pages[p].note)
    }
    fn tags(&self, p: PageId) -> Vec<String> {
        self.pages[p].tags.clone()
    }
    fn outlinks(&self, p: PageId) -> Vec<Link> {
        self.pages[p].links.clone()
    }
    fn resolve(&self, target: &str, _from: Option<PageId>) -> Option<PageId> {
        let t = target.strip_suffix(".md").unwrap_or(target);
        self.pages.iter().position(|p| {
            let path = p.path.strip_suffix(".md").unwrap_or(&p.path);
            path == t || path.rsplit('/').next() == Some(t)
        })
    }
    fn inlinks(&self, p: PageId) -> Vec<PageId> {
        (0..self.pages.len())
            .filter(|&q| {
                self.pages[q]
                    .links
                    .iter()
                    .any(|l| self.resolve(&l.path, Some(q)) == Some(p))
            })
            .collect()
    }
}

/// "Now" in every test: Wednesday 2024-05-15 14:30.
fn ctx() -> Context {
    Context::new(dt("2024-05-15 14:30"))
}

fn day(y: i32, m: u32, d: u32) -> Value {
    Value::Date(DvDate {
        date: Date::day(NaiveDate::from_ymd_opt(y, m, d).unwrap()),
        zone: None,
    })
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

fn num(n: f64) -> Value {
    Value::Number(n)
}

fn list(v: Vec<Value>) -> Value {
    Value::List(v)
}

fn plink(path: &str) -> Value {
    Value::Link(Link {
        path: path.into(),
        subpath: None,
        display: None,
        embed: false,
    })
}

fn empty() -> Vault {
    Vault::new(&[])
}

/// Evaluates an expression with no page.
fn ev(expr: &str) -> Value {
    evaluate_inline(expr, None, &empty(), &ctx()).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn ev_err(expr: &str) -> QueryError {
    evaluate_inline(expr, None, &empty(), &ctx()).unwrap_err()
}

fn games() -> Vault {
    Vault::new(&[
        (
            "Games/Elden Ring.md",
            "---\ntype: rpg\nprice: 60\ntags: [games/crpg]\nstarted: 2024-02-01\n---\nrating:: 9\nSee [[Dashboard]].\n- [ ] beat boss\n    - [x] level up\n- [x] buy game ✅ 2024-02-01\n",
        ),
        (
            "Games/Tetris.md",
            "---\ntype: puzzle\nprice: 5\ntags: [games/mobas]\n---\nrating:: 7\n",
        ),
        (
            "Games/Hades.md",
            "---\ntype: rpg\nprice: 25\n---\n#games\nrating:: 8\nCo-op:: no\n- [ ] finish run [due:: 2024-05-10]\n",
        ),
        ("Dashboard.md", "Links: [[Elden Ring]] and [[Tetris]]\n"),
        (
            "Daily/2024-05-14.md",
            "- [ ] call mom #shopping\n- [x] done thing\n",
        ),
    ])
}

fn names(r: &QueryResult) -> Vec<String> {
    match &r.output {
        Output::List { rows, .. } => rows
            .iter()
            .map(|(id, v)| match (id, v) {
                (Some(Value::Link(l)), None) => l.path.clone(),
                (Some(Value::Link(l)), Some(v)) => format!("{}: {v:?}", l.path),
                (_, Some(v)) => format!("{v:?}"),
                (i, _) => format!("{i:?}"),
            })
            .collect(),
        other => panic!("not a list: {other:?}"),
    }
}

fn q(vault: &Vault, query: &str) -> QueryResult {
    execute(query, vault, &ctx()).unwrap_or_else(|e| panic!("{query}: {e}"))
}

fn q_in(vault: &Vault, query: &str, c: &Context) -> QueryResult {
    execute(query, vault, c).unwrap_or_else(|e| panic!("{query}: {e}"))
}

// ---- parsing ----

#[test]
fn every_query_of_the_docs_parses() {
    for text in DOC_QUERIES {
        if let Err(e) = parse_query(text) {
            panic!("{text:?}: {e}");
        }
    }
}

#[test]
fn table_columns_take_their_as_name_or_their_text() {
    let q = parse_query("TABLE\ndefault(finished, date(today)) - started AS \"Played for\",\nfile.folder AS Path,\nfile.etags\nFROM #games").unwrap();
    let Header::Table {
        without_id,
        columns,
    } = &q.header
    else {
        panic!()
    };
    assert!(!without_id);
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Played for", "Path", "file.etags"]);
    assert_eq!(q.source, Some(Source::Tag("#games".into())));
    let q = parse_query("TABLE WITHOUT ID\nsteamid,\nfile.etags AS \"File Tags\"\nFROM #games")
        .unwrap();
    assert!(
        matches!(q.header, Header::Table { without_id: true, ref columns } if columns.len() == 2)
    );
}

#[test]
fn an_empty_table_or_list_reads_the_next_clause() {
    let q = parse_query("TABLE\nFROM \"Books\"").unwrap();
    assert!(matches!(q.header, Header::Table { ref columns, .. } if columns.is_empty()));
    assert_eq!(q.source, Some(Source::Path("Books".into())));
    let q = parse_query("LIST WITHOUT ID\nWHERE x").unwrap();
    assert!(matches!(
        q.header,
        Header::List {
            without_id: true,
            expr: None
        }
    ));
    assert_eq!(q.commands.len(), 1);
}

#[test]
fn sources_combine_left_to_right_with_parentheses_and_negation() {
    let q = parse_query("LIST FROM (#assignment AND \"30 School\") OR (\"30 School/32 Homeworks\" AND outgoing([[School Dashboard Current To Dos]]))").unwrap();
    let expected = Source::Or(
        Box::new(Source::And(
            Box::new(Source::Tag("#assignment".into())),
            Box::new(Source::Path("30 School".into())),
        )),
        Box::new(Source::And(
            Box::new(Source::Path("30 School/32 Homeworks".into())),
            Box::new(Source::Outgoing("School Dashboard Current To Dos".into())),
        )),
    );
    assert_eq!(q.source, Some(expected));
    let q = parse_query("LIST FROM #food and !#fastfood").unwrap();
    assert_eq!(
        q.source,
        Some(Source::And(
            Box::new(Source::Tag("#food".into())),
            Box::new(Source::Not(Box::new(Source::Tag("#fastfood".into()))))
        ))
    );
    let q = parse_query("LIST FROM [[]]").unwrap();
    assert_eq!(q.source, Some(Source::Link(String::new())));
}

#[test]
fn data_commands_keep_their_written_order_and_repeat() {
    let q = parse_query("TASK\nWHERE !completed\nSORT created ASC\nLIMIT 10\nGROUP BY file.link\nSORT rows.file.ctime ASC").unwrap();
    let kinds: Vec<&str> = q
        .commands
        .iter()
        .map(|c| match c {
            Command::Where(_) => "where",
            Command::Sort(_) => "sort",
            Command::Limit(_) => "limit",
            Command::GroupBy(..) => "group",
            Command::Flatten(..) => "flatten",
        })
        .collect();
    assert_eq!(kinds, ["where", "sort", "limit", "group", "sort"]);
    let q = parse_query("LIST SORT a DESC, b, c ascending FLATTEN x AS y GROUP BY z AS w").unwrap();
    let Command::Sort(keys) = &q.commands[0] else {
        panic!()
    };
    assert_eq!(
        keys.iter().map(|k| k.1).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert!(matches!(&q.commands[1], Command::Flatten(_, n) if n == "y"));
    assert!(matches!(&q.commands[2], Command::GroupBy(_, Some(n)) if n == "w"));
}

fn kind(e: &str) -> ExprKind {
    parse_expression(e)
        .unwrap_or_else(|err| panic!("{e}: {err}"))
        .kind
}

fn field(n: &str) -> Expr {
    Expr {
        kind: ExprKind::Field(n.into()),
        pos: 0,
    }
}

/// The shape of an expression, positions left out.
fn shape(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Literal(v) => format!("{v:?}"),
        ExprKind::Field(n) => n.clone(),
        ExprKind::Binary(op, l, r) => format!("({} {} {})", shape(l), op.symbol(), shape(r)),
        ExprKind::Not(i) => format!("!{}", shape(i)),
        ExprKind::Neg(i) => format!("-{}", shape(i)),
        ExprKind::Dot(b, k) => format!("{}.{k}", shape(b)),
        ExprKind::Index(b, i) => format!("{}[{}]", shape(b), shape(i)),
        ExprKind::Call(n, a) => format!(
            "{n}({})",
            a.iter().map(shape).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

fn sh(e: &str) -> String {
    shape(&parse_expression(e).unwrap_or_else(|err| panic!("{e}: {err}")))
}

#[test]
fn operators_bind_as_dataview_binds_them() {
    assert_eq!(sh("a + b * c"), "(a + (b * c))");
    assert_eq!(sh("a - b - c"), "((a - b) - c)");
    assert_eq!(sh("a < b + 1"), "(a < (b + Number(1.0)))");
    // `and` and `or` share one level and read left to right.
    assert_eq!(sh("a or b and c"), "((a or b) and c)");
    assert_eq!(sh("a & b | c"), "((a and b) or c)");
    assert_eq!(
        sh("!completed AND file.day = x"),
        "(!completed and (file.day = x))"
    );
    assert_eq!(
        sh("(end - start) - dur(8 h)"),
        format!(
            "((end - start) - {:?})",
            Value::Duration(Duration {
                months: 0,
                ms: 8.0 * 3_600_000.0
            })
        )
    );
}

#[test]
fn names_may_hold_dashes_and_emoji_but_spaced_minus_subtracts() {
    assert_eq!(
        kind("field-with-space"),
        ExprKind::Field("field-with-space".into())
    );
    assert_eq!(sh("a - b"), "(a - b)");
    assert_eq!(kind("🎉party"), ExprKind::Field("🎉party".into()));
    assert_eq!(sh("5-3"), "(Number(5.0) - Number(3.0))");
}

#[test]
fn postfix_chains_read_left_to_right() {
    assert_eq!(sh("list().parts[0]"), "list().parts[Number(0.0)]");
    assert_eq!(
        sh("episode_metadata[\"previous\"]"),
        "episode_metadata[Text(\"previous\")]"
    );
    assert_eq!(
        sh("split(this.file.name, \"-W\")[0]"),
        "split(this.file.name, Text(\"-W\"))[Number(0.0)]"
    );
}

#[test]
fn literals_read_as_the_literals_page_says() {
    assert_eq!(kind("-200"), ExprKind::Literal(num(-200.0)));
    assert_eq!(
        kind("date(2021-07-14)"),
        ExprKind::Literal(day(2021, 7, 14))
    );
    assert_eq!(
        kind("date(today)"),
        ExprKind::DateKeyword(DateKeyword::Today)
    );
    assert_eq!(
        kind("date(start-of-month)"),
        ExprKind::DateKeyword(DateKeyword::Som)
    );
    let three_h_two_m_one_s = ExprKind::Literal(Value::Duration(Duration {
        months: 0,
        ms: 3.0 * 3_600_000.0 + 2.0 * 60_000.0 + 1000.0,
    }));
    for d in [
        "dur(1 s, 2 m, 3 h)",
        "dur(1 s 2 m 3 h)",
        "dur(1s 2m 3h)",
        "dur(1second 2min 3h)",
    ] {
        assert_eq!(kind(d), three_h_two_m_one_s, "{d}");
    }
    assert_eq!(
        kind("dur(3 yrs)"),
        ExprKind::Literal(Value::Duration(Duration {
            months: 36,
            ms: 0.0
        }))
    );
    assert_eq!(kind("[[Science]]"), ExprKind::Literal(plink("Science")));
    assert_eq!(kind("[[]]"), ExprKind::Literal(plink("")));
    assert!(matches!(kind("[[1, 2],[3, 4]]"), ExprKind::List(ref l) if l.len() == 2));
    assert!(matches!(kind("{ a: 1, b: 2 }"), ExprKind::Object(ref o) if o.len() == 2));
    // A call to date() on text stays a call.
    assert!(matches!(kind("date(\"2020-04-18\")"), ExprKind::Call(ref n, _) if n == "date"));
}

#[test]
fn strings_unescape_quotes_and_backslashes_only() {
    assert_eq!(kind(r#""\w+""#), ExprKind::Literal(text(r"\w+")));
    assert_eq!(
        kind(r#""say \"hi\" \\ now""#),
        ExprKind::Literal(text(r#"say "hi" \ now"#))
    );
}

#[test]
fn lambdas_parse_with_any_number_of_parameters() {
    assert!(matches!(kind("(x1, x2) => x1 + x2"), ExprKind::Lambda(ref p, _) if p.len() == 2));
    assert!(matches!(kind("() => 1"), ExprKind::Lambda(ref p, _) if p.is_empty()));
    // A parenthesised expression is not a lambda.
    assert_eq!(sh("(a) + 1"), "(a + Number(1.0))");
    let _ = field("x");
}

#[test]
fn errors_say_where_and_what_was_expected() {
    let e = parse_query("LIST\nWHERE a +").unwrap_err();
    assert_eq!((e.line, e.column), (2, 10));
    assert!(e.message.contains("expected an expression"), "{e}");
    let e = parse_query("SELECT *").unwrap_err();
    assert_eq!((e.offset, e.line, e.column), (0, 1, 1));
    assert!(e.message.contains("TABLE, LIST, TASK or CALENDAR"), "{e}");
    let e = parse_query("LIST\nFROM #a\nWHERE x\nBOGUS").unwrap_err();
    assert_eq!((e.line, e.column), (4, 1));
    let e = parse_query("LIST WHERE contains(a, \"b\"").unwrap_err();
    assert!(e.message.contains("`,` or `)`"), "{e}");
    let e = parse_query("LIST WHERE from = 1").unwrap_err();
    assert!(e.message.contains("keyword"), "{e}");
}

#[test]
fn javascript_is_refused_never_run() {
    assert_eq!(
        parse_block("dataviewjs", "dv.list([1])").unwrap_err().kind,
        ParseErrorKind::JavaScript
    );
    assert_eq!(
        parse_expression("$= dv.current()").unwrap_err().kind,
        ParseErrorKind::JavaScript
    );
    assert!(parse_block("dataview", "LIST").is_ok());
}

#[test]
fn hostile_queries_end_with_a_bound_error() {
    let long = format!("LIST WHERE {}", "a + ".repeat(5000));
    assert_eq!(
        parse_query(&long).unwrap_err().kind,
        ParseErrorKind::TooLong
    );
    let deep = format!("LIST WHERE {}1{}", "(".repeat(500), ")".repeat(500));
    assert_eq!(
        parse_query(&deep).unwrap_err().kind,
        ParseErrorKind::TooDeep
    );
    let deep = format!("LIST WHERE {}", "[".repeat(3000));
    assert_eq!(
        parse_query(&deep).unwrap_err().kind,
        ParseErrorKind::TooDeep
    );
    let nots = format!("LIST WHERE {}x", "!".repeat(3000));
    assert_eq!(
        parse_query(&nots).unwrap_err().kind,
        ParseErrorKind::TooDeep
    );
    let sources = format!("LIST FROM {}#a", "-".repeat(3000));
    assert_eq!(
        parse_query(&sources).unwrap_err().kind,
        ParseErrorKind::TooDeep
    );
    // A tree deep through left-leaning chains inside parentheses is refused before evaluation.
    let mut chain = "a".to_owned();
    for _ in 0..60 {
        chain = format!("({chain}{})", "+a".repeat(100));
    }
    let e = parse_query(&format!("LIST WHERE {chain}")).unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::TooDeep, "{e}");
    assert_eq!(
        parse_expression(&chain).unwrap_err().kind,
        ParseErrorKind::TooDeep
    );
    assert!(matches!(kind("![1]"), ExprKind::Not(ref i) if matches!(i.kind, ExprKind::List(_))));
    // Many unclosed lambda-looking parentheses stay linear.
    let parens = format!("LIST WHERE {}", "(a, ".repeat(3000));
    assert!(parse_query(&parens).is_err());
}

// ---- evaluation ----

#[test]
fn where_sort_and_limit_pick_and_order_pages() {
    let v = games();
    let r = q(
        &v,
        "LIST\nFROM \"Games\"\nWHERE price > 10\nSORT price DESC",
    );
    assert_eq!(names(&r), ["Games/Elden Ring.md", "Games/Hades.md"]);
    let r = q(&v, "LIST FROM \"Games\" SORT rating ASC LIMIT 2");
    assert_eq!(names(&r), ["Games/Tetris.md", "Games/Hades.md"]);
    assert_eq!(r.count, 2);
}

#[test]
fn sources_select_tags_with_subtags_folders_files_and_links() {
    let v = games();
    assert_eq!(
        names(&q(&v, "LIST FROM #games")),
        ["Games/Elden Ring.md", "Games/Hades.md", "Games/Tetris.md"]
    );
    assert_eq!(
        names(&q(&v, "LIST FROM #games/mobas OR #games/crpg")),
        ["Games/Elden Ring.md", "Games/Tetris.md"]
    );
    assert_eq!(
        names(&q(&v, "LIST FROM #games and -#games/crpg")),
        ["Games/Hades.md", "Games/Tetris.md"]
    );
    assert_eq!(
        names(&q(&v, "LIST FROM \"Games/Tetris\"")),
        ["Games/Tetris.md"]
    );
    assert_eq!(names(&q(&v, "LIST FROM [[Elden Ring]]")), ["Dashboard.md"]);
    assert_eq!(
        names(&q(&v, "LIST FROM outgoing([[Dashboard]])")),
        ["Games/Elden Ring.md", "Games/Tetris.md"]
    );
    let mut c = ctx();
    c.this = Some(v.id("Dashboard.md"));
    let r = execute("LIST FROM [[]]", &v, &c).unwrap();
    assert_eq!(names(&r), ["Games/Elden Ring.md"]);
}

#[test]
fn implicit_file_fields_come_from_the_source() {
    let v = games();
    let r = q(
        &v,
        "TABLE file.name, file.folder, file.ext, file.size, file.mday, file.etags, file.tags, file.inlinks, file.day FROM \"Daily\" or [[Elden Ring]]",
    );
    let Output::Table {
        columns,
        rows,
        id_column,
    } = &r.output
    else {
        panic!()
    };
    assert_eq!(id_column.as_deref(), Some("File"));
    assert_eq!(columns[0], "File");
    assert_eq!(rows.len(), 2);
    let daily = &rows[0];
    assert_eq!(daily[0], plink("Daily/2024-05-14.md"));
    assert_eq!(daily[1], text("2024-05-14"));
    assert_eq!(daily[2], text("Daily"));
    assert_eq!(daily[3], text("md"));
    assert_eq!(daily[4], num(104.0));
    assert_eq!(daily[5], day(2024, 1, 5));
    assert_eq!(daily[6], list(vec![text("#shopping")]));
    assert_eq!(daily[9], day(2024, 5, 14));
    let dash = &rows[1];
    assert_eq!(dash[9], Value::Null);
    // Elden Ring's tags broken down by level; its inlinks.
    let r = q(
        &v,
        "TABLE WITHOUT ID file.tags, file.inlinks, file.outlinks FROM \"Games/Elden Ring\"",
    );
    let Output::Table { rows, .. } = &r.output else {
        panic!()
    };
    assert_eq!(rows[0][0], list(vec![text("#games"), text("#games/crpg")]));
    assert_eq!(rows[0][1], list(vec![plink("Dashboard.md")]));
    assert_eq!(rows[0][2], list(vec![plink("Dashboard.md")]));
}

#[test]
fn page_fields_merge_frontmatter_and_inline_fields_with_sanitised_keys() {
    let v = games();
    let r = q(
        &v,
        "TABLE WITHOUT ID type, rating, Co-op, co-op, started FROM \"Games/Hades\" or \"Games/Elden Ring\" SORT file.name",
    );
    let Output::Table { rows, .. } = &r.output else {
        panic!()
    };
    assert_eq!(
        rows[0],
        vec![
            text("rpg"),
            num(9.0),
            Value::Null,
            Value::Null,
            day(2024, 2, 1)
        ]
    );
    assert_eq!(
        rows[1],
        vec![text("rpg"), num(8.0), text("no"), text("no"), Value::Null]
    );
}

#[test]
fn group_by_makes_rows_with_key_and_rows() {
    let v = games();
    let r = q(
        &v,
        "LIST WITHOUT ID length(rows) + \" pages of type \" + key\nFROM \"Games\"\nGROUP BY type",
    );
    assert_eq!(
        names(&r),
        [
            format!("{:?}", text("1 pages of type puzzle")),
            format!("{:?}", text("2 pages of type rpg"))
        ]
    );
    let r = q(
        &v,
        "TABLE rows.file.name AS names, sum(rows.price) FROM \"Games\" GROUP BY type AS kind SORT kind DESC",
    );
    let Output::Table {
        id_column, rows, ..
    } = &r.output
    else {
        panic!()
    };
    assert_eq!(id_column.as_deref(), Some("Group"));
    assert_eq!(
        rows[0],
        vec![
            text("rpg"),
            list(vec![text("Elden Ring"), text("Hades")]),
            num(85.0)
        ]
    );
    assert_eq!(rows[1][0], text("puzzle"));
}

#[test]
fn flatten_makes_a_row_per_element() {
    let v = Vault::new(&[
        ("a.md", "---\nauthors: [Ann, Bob]\n---\n"),
        ("b.md", "---\nauthors: Cy\n---\n"),
    ]);
    let r = q(&v, "TABLE WITHOUT ID file.name, authors FLATTEN authors");
    let Output::Table { rows, columns, .. } = &r.output else {
        panic!()
    };
    assert_eq!(columns, &["file.name", "authors"]);
    assert_eq!(
        rows,
        &vec![
            vec![text("a"), text("Ann")],
            vec![text("a"), text("Bob")],
            vec![text("b"), text("Cy")],
        ]
    );
    let r = q(
        &v,
        "LIST WITHOUT ID who FLATTEN authors AS who WHERE who != \"Bob\"",
    );
    assert_eq!(r.count, 2);
}

#[test]
fn task_queries_filter_tasks_and_group_them_by_file() {
    let v = games();
    let r = q(&v, "TASK WHERE !completed");
    let Output::Task { groups } = &r.output else {
        panic!()
    };
    let keys: Vec<&Value> = groups.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            &plink("Daily/2024-05-14.md"),
            &plink("Games/Elden Ring.md"),
            &plink("Games/Hades.md")
        ]
    );
    // The open task keeps its completed sub-task below it.
    let elden = &groups[1].1;
    assert_eq!(elden.len(), 1);
    assert_eq!(elden[0].text, "beat boss");
    assert_eq!(elden[0].children[0].status, Some('x'));
    // Task fields, page fields underneath, file.* of the page.
    let r = q(
        &v,
        "TASK WHERE due <= date(today) AND typeof(due) = \"date\"",
    );
    assert_eq!(r.count, 1, "{r:?}");
    let r = q(
        &v,
        "TASK WHERE !completed AND contains(tags, \"#shopping\")",
    );
    assert_eq!(r.count, 1);
    let r = q(&v, "TASK WHERE !completed AND file.day = date(yesterday)");
    assert_eq!(r.count, 1);
    // Page fields reach the tasks; a completed sub-task whose parent is not listed stands alone.
    let r = q(&v, "TASK WHERE type = \"rpg\" AND completed");
    assert_eq!(r.count, 2);
    let md = r.to_markdown(&DataviewSettings::default());
    assert_eq!(
        md,
        "### [[Games/Elden Ring|Elden Ring]]\n\n- [x] level up\n- [x] buy game ✅ 2024-02-01\n\n"
    );
}

#[test]
fn calendar_gives_dates_and_pages() {
    let v = games();
    let r = q(&v, "CALENDAR file.day");
    let Output::Calendar { entries } = &r.output else {
        panic!()
    };
    assert_eq!(entries.len(), 1);
    assert_eq!(Value::Date(entries[0].0.clone()), day(2024, 5, 14));
    assert_eq!(entries[0].1, plink("Daily/2024-05-14.md"));
}

#[test]
fn null_sorts_first_and_compares_below_everything() {
    // The expressions page's warning: a missing `due` is null, and null <= today is true.
    assert_eq!(ev("null <= date(today)"), Value::Bool(true));
    assert_eq!(ev("null = null"), Value::Bool(true));
    assert_eq!(ev("null + 1"), Value::Null);
    assert_eq!(
        ev("1 < \"a\""),
        Value::Bool(true),
        "numbers sort before strings by type name"
    );
    let v = games();
    let r = q(&v, "LIST FROM \"Games\" SORT started");
    assert_eq!(names(&r)[2], "Games/Elden Ring.md");
}

/// `date - date` is Luxon's diff in years, months, days and time, normalised as Dataview
/// normalises durations, worked by hand from Luxon's rules: whole calendar units counted from
/// the earlier date (its day kept within the month), backed off when they overshoot; days
/// roll up into weeks of 7 and weeks into months of 4.
#[test]
fn a_date_minus_a_date_counts_calendar_months_and_days_as_dataview_does() {
    for (expr, want) in [
        // January 1st + 11 months is December 1st, + 6 days December 7th.
        ("date(2026-12-07) - date(2026-01-01)", "11 months, 6 days"),
        // The other way round, every part negative (Luxon's `toHuman`).
        ("date(2026-01-01) - date(2026-12-07)", "-11 months, -6 days"),
        // 20 days: 2 weeks and 6 days.
        ("date(2026-01-21) - date(2026-01-01)", "2 weeks, 6 days"),
        // 28 days are 4 weeks, and 4 weeks are a month to Luxon's casual units.
        ("date(2026-01-29) - date(2026-01-01)", "1 month"),
        // January 31st + 2 months would be March 31st, past March 1st: 1 month (February
        // 28th), then 1 day.
        ("date(2026-03-01) - date(2026-01-31)", "1 month, 1 day"),
        // February 29th + 2 years is February 28th, 2026; then 1 day.
        ("date(2026-03-01) - date(2024-02-29)", "2 years, 1 day"),
        // A day's diff overshoots by an hour: 23 hours, not a day.
        (
            "date(2026-01-02T09:00) - date(2026-01-01T10:00)",
            "23 hours",
        ),
        (
            "date(2026-03-05T12:30:15) - date(2025-01-01T08:00)",
            "1 year, 2 months, 4 days, 4 hours, 30 minutes, 15 seconds",
        ),
        // Zones: midnight at +01:00 is 23:00 UTC, 23 hours after midnight UTC.
        (
            r#"date("2026-01-02T00:00:00+01:00") - date("2026-01-01T00:00:00Z")"#,
            "23 hours",
        ),
    ] {
        assert_eq!(ev(&format!("string({expr})")), text(want), "{expr}");
    }
    // Its parts in one unit: Luxon's casual lengths (a month is 30 days).
    assert_eq!(
        ev("(date(2026-12-07) - date(2026-01-01)).days"),
        Value::Number(336.0)
    );
    assert_eq!(
        ev("(date(2026-12-07) - date(2026-01-01)).months"),
        Value::Number(11.2)
    );
    assert_eq!(
        ev("(date(2026-01-21) - date(2026-01-01)).weeks"),
        Value::Number(20.0 / 7.0)
    );
    // It still compares and adds back: the earlier date plus the difference is the later one.
    assert_eq!(
        ev("date(2026-01-31) + (date(2026-03-01) - date(2026-01-31)) = date(2026-03-01)"),
        Value::Bool(true)
    );
    assert_eq!(
        ev("date(2026-12-07) - date(2026-01-01) > dur(330 days)"),
        Value::Bool(true)
    );
}

#[test]
fn dates_and_durations_combine() {
    assert_eq!(ev("date(2021-01-31) + dur(1 month)"), day(2021, 2, 28));
    assert_eq!(ev("date(2021-03-01) - dur(1 day)"), day(2021, 2, 28));
    assert_eq!(
        ev("date(2021-03-02) - date(2021-03-01) = dur(1 day)"),
        Value::Bool(true)
    );
    assert_eq!(ev("dur(2 days) > dur(47 hours)"), Value::Bool(true));
    assert_eq!(ev("date(today)"), day(2024, 5, 15));
    assert_eq!(ev("date(tomorrow)"), day(2024, 5, 16));
    assert_eq!(ev("date(sow)"), day(2024, 5, 13));
    assert_eq!(ev("date(som)"), day(2024, 5, 1));
    assert_eq!(ev("date(soy)"), day(2024, 1, 1));
    assert_eq!(ev("striptime(date(eom))"), day(2024, 5, 31));
    assert_eq!(ev("striptime(date(eow))"), day(2024, 5, 19));
    assert_eq!(ev("date(now) > date(today)"), Value::Bool(true));
    assert_eq!(ev("date(2021-04-18).year"), num(2021.0));
    assert_eq!(ev("date(2021-04-18).weekday"), num(7.0));
}

#[test]
fn arithmetic_on_text_and_numbers() {
    assert_eq!(ev("1 + 2 * 3"), num(7.0));
    assert_eq!(ev("(1 + 2) * 3"), num(9.0));
    assert_eq!(ev("7 % 4"), num(3.0));
    assert_eq!(ev("\"a\" + 1"), text("a1"));
    assert_eq!(ev("\"ab\" * 3"), text("ababab"));
    assert_eq!(ev("-(2)"), num(-2.0));
    assert_eq!(ev("!true"), Value::Bool(false));
    assert_eq!(ev("list(\"A\", \"B\", \"C\")[0]"), text("A"));
    assert_eq!(ev("{ a: 1, b: { c: 2 } }.b.c"), num(2.0));
    assert_eq!(ev("{ a: 1 }[\"a\"]"), num(1.0));
    assert!(
        matches!(ev_err("date(2021-01-01) * 2"), QueryError::Eval(ref e) if e.message.contains("no implementation of `*`"))
    );
}

#[test]
fn links_index_through_to_their_page() {
    let v = games();
    let val = evaluate_inline("[[Hades]].price + [[Tetris]].file.size", None, &v, &ctx()).unwrap();
    assert_eq!(val, num(25.0 + 101.0));
    let val = evaluate_inline(
        "contains(file.outlinks, [[Elden Ring]])",
        Some(v.id("Dashboard.md")),
        &v,
        &ctx(),
    )
    .unwrap();
    assert_eq!(val, Value::Bool(true));
    let val = evaluate_inline(
        "this.file.name",
        None,
        &v,
        &Context {
            this: Some(v.id("Games/Hades.md")),
            ..ctx()
        },
    )
    .unwrap();
    assert_eq!(val, text("Hades"));
}

// ---- functions (examples of reference/functions.md) ----

#[test]
fn function_examples_of_the_docs() {
    let t = Value::Bool(true);
    let f = Value::Bool(false);
    let cases: &[(&str, Value)] = &[
        ("lower(\"YES\")", text("yes")),
        (
            "lower([\"YES\", \"NO\"])",
            list(vec![text("yes"), text("no")]),
        ),
        ("replace(\"yes\", \"e\", \"a\")", text("yas")),
        (
            "replace([\"yes\", \"ree\"], \"e\", \"a\")",
            list(vec![text("yas"), text("raa")]),
        ),
        ("length(object())", num(0.0)),
        ("object(\"a\", 4, \"c\", \"yes\").c", text("yes")),
        ("list(1, 2, 3)", list(vec![num(1.0), num(2.0), num(3.0)])),
        ("array(\"a\")", list(vec![text("a")])),
        ("date(\"2020-04-18\")", day(2020, 4, 18)),
        (
            "date(\"12/31/2022\", \"MM/dd/yyyy\") = date(2022-12-31)",
            t.clone(),
        ),
        ("date(\"210313\", \"yyMMdd\") = date(2021-03-13)", t.clone()),
        (
            "dur(\"8 minutes, 4 seconds\") = dur(8 minutes) + dur(4 s)",
            t.clone(),
        ),
        ("dur(dur(8 minutes)) = dur(8 minutes)", t.clone()),
        ("number(\"18 years\")", num(18.0)),
        ("number(34)", num(34.0)),
        ("number(\"hmm\")", Value::Null),
        ("string(18)", text("18")),
        ("string(dur(8 hours))", text("8 hours")),
        ("link(\"Hello\", \"Goodbye\").display", Value::Null),
        (
            "meta(link(\"Hello\", \"Goodbye\")).display",
            text("Goodbye"),
        ),
        ("typeof(8)", text("number")),
        ("typeof(\"text\")", text("string")),
        ("typeof([1, 2, 3])", text("array")),
        ("typeof({ a: 1, b: 2 })", text("object")),
        ("typeof(date(2020-01-01))", text("date")),
        ("typeof(dur(8 minutes))", text("duration")),
        ("round(16.555555)", num(17.0)),
        ("round(16.555555, 2)", num(16.56)),
        ("trunc(-93.33333)", num(-93.0)),
        ("floor(-0.837764)", num(-1.0)),
        ("ceil(12.937)", num(13.0)),
        ("min(1, 2, 3)", num(1.0)),
        ("min([1, 2, 3])", num(1.0)),
        ("min(\"a\", \"ab\", \"abc\")", text("a")),
        ("max(1, 2, 3)", num(3.0)),
        ("max(\"a\", \"ab\", \"abc\")", text("abc")),
        ("sum([1, 2, 3])", num(6.0)),
        ("sum([])", Value::Null),
        ("sum(nonnull([null, 1, 8]))", num(9.0)),
        ("product([1,2,3])", num(6.0)),
        ("reduce([100, 20, 3], \"-\")", num(77.0)),
        ("reduce([200, 10, 2], \"/\")", num(10.0)),
        ("reduce([\"⭐\", 3], \"*\")", text("⭐⭐⭐")),
        ("average([1, 2, 3])", num(2.0)),
        ("average([])", Value::Null),
        ("average(nonnull([null, 1, 2]))", num(1.5)),
        ("minby([1, 2, 3], (k) => k)", num(1.0)),
        ("minby([1, 2, 3], (k) => 0 - k)", num(3.0)),
        ("maxby([1, 2, 3], (k) => 0 - k)", num(1.0)),
        ("contains(\"Hello\", \"Lo\")", f.clone()),
        ("contains(\"Hello\", \"lo\")", t.clone()),
        ("icontains(\"Hello\", \"Lo\")", t.clone()),
        ("econtains(\"Hello\", \"Lo\")", f.clone()),
        (
            "econtains([\"this\",\"is\",\"example\"], \"ex\")",
            f.clone(),
        ),
        (
            "econtains([\"this\",\"is\",\"example\"], \"is\")",
            t.clone(),
        ),
        ("contains([\"this\",\"is\",\"example\"], \"ex\")", t.clone()),
        ("contains({ a: 1 }, \"a\")", t.clone()),
        ("contains(list(1, 2, 3), 3)", t.clone()),
        ("contains(list(), 1)", f.clone()),
        ("contains(\"yes\", \"no\")", f.clone()),
        (
            "econtains([\"These\", \"are\", \"words\"], \"word\")",
            f.clone(),
        ),
        (
            "econtains([\"These\", \"are\", \"words\"], \"words\")",
            t.clone(),
        ),
        (
            "sort(list(3, 2, 1))",
            list(vec![num(1.0), num(2.0), num(3.0)]),
        ),
        (
            "sort(list(\"a\", \"b\", \"aa\"))",
            list(vec![text("a"), text("aa"), text("b")]),
        ),
        (
            "reverse(list(\"a\", \"b\", \"c\"))",
            list(vec![text("c"), text("b"), text("a")]),
        ),
        ("length([])", num(0.0)),
        ("length(object(\"hello\", 1, \"goodbye\", 2))", num(2.0)),
        ("nonnull([null, false])", list(vec![f.clone()])),
        ("firstvalue([null, 1, 2])", num(1.0)),
        ("all([1, 2, 3])", t.clone()),
        ("all([true, false])", f.clone()),
        ("all(true, false)", f.clone()),
        ("all([1, 2, 3], (x) => x > 1)", f.clone()),
        (
            "all([\"apple\", \"pie\", 3], (x) => typeof(x) = \"string\")",
            f.clone(),
        ),
        ("any(list(1, 2, 3), (x) => x > 2)", t.clone()),
        ("any(false, false)", f.clone()),
        ("none([])", t.clone()),
        ("none([1, 2, 3], (x) => x = 0)", t.clone()),
        (
            "none([\"Apple\", \"Pi\", \"Banana\"], (x) => startswith(x, \"A\"))",
            f.clone(),
        ),
        ("join(list(1, 2, 3))", text("1, 2, 3")),
        ("join(list(1, 2, 3), \" \")", text("1 2 3")),
        ("join(6)", text("6")),
        ("join(list())", text("")),
        (
            "filter([1, 2, 3], (x) => x >= 2)",
            list(vec![num(2.0), num(3.0)]),
        ),
        (
            "filter([\"yes\", \"no\", \"yas\"], (x) => startswith(x, \"y\"))",
            list(vec![text("yes"), text("yas")]),
        ),
        (
            "unique([1, 3, 7, 3, 1])",
            list(vec![num(1.0), num(3.0), num(7.0)]),
        ),
        (
            "map([1, 2, 3], (x) => x + 2)",
            list(vec![num(3.0), num(4.0), num(5.0)]),
        ),
        (
            "map([\"yes\", \"no\"], (x) => x + \"?\")",
            list(vec![text("yes?"), text("no?")]),
        ),
        (
            "flat(list(1, 2, 3, list(4, 5), 6))",
            list(vec![
                num(1.0),
                num(2.0),
                num(3.0),
                num(4.0),
                num(5.0),
                num(6.0),
            ]),
        ),
        (
            "flat(list(1, list(21, 22), list(list (311, 312, 313))), 4)",
            list(vec![
                num(1.0),
                num(21.0),
                num(22.0),
                num(311.0),
                num(312.0),
                num(313.0),
            ]),
        ),
        ("slice([1, 2, 3, 4, 5], 3)", list(vec![num(4.0), num(5.0)])),
        (
            "slice([\"ant\", \"bison\", \"camel\", \"duck\", \"elephant\"], 0, 2)",
            list(vec![text("ant"), text("bison")]),
        ),
        ("slice([1, 2, 3, 4, 5], -2)", list(vec![num(4.0), num(5.0)])),
        ("regextest(\"\\w+\", \"hello\")", t.clone()),
        ("regextest(\"yes|no\", \"maybe\")", f.clone()),
        ("regextest(\"what\", \"what's up dog?\")", t.clone()),
        ("regexmatch(\"\\w+\", \"hello\")", t.clone()),
        ("regexmatch(\"what\", \"what's up dog?\")", f.clone()),
        ("regexreplace(\"yes\", \"[ys]\", \"a\")", text("aea")),
        (
            "regexreplace(\"Suite 1000\", \"\\d+\", \"-\")",
            text("Suite -"),
        ),
        (
            "replace(\"The big dog chased the big cat.\", \"big\", \"small\")",
            text("The small dog chased the small cat."),
        ),
        ("upper(\"Test\")", text("TEST")),
        (
            "split(\"hello world\", \" \")",
            list(vec![text("hello"), text("world")]),
        ),
        (
            "split(\"hello  world\", \"\\s\", 1)",
            list(vec![text("hello")]),
        ),
        (
            "split(\"hello there world\", \"(t)here\")",
            list(vec![text("hello "), text("t"), text(" world")]),
        ),
        ("startswith(\"yes\", \"ye\")", t.clone()),
        ("endswith(\"yes\", \"ye\")", f.clone()),
        ("padleft(\"hello\", 7)", text("  hello")),
        ("padleft(\"yes\", 5, \"!\")", text("!!yes")),
        ("padright(\"yes\", 5, \"!\")", text("yes!!")),
        ("substring(\"hello\", 0, 2)", text("he")),
        ("substring(\"hello\", 2)", text("llo")),
        ("truncate(\"Hello there!\", 8)", text("Hello...")),
        ("truncate(\"Hello there!\", 8, \"/\")", text("Hello t/")),
        ("truncate(\"Hello there!\", 10, \"\")", text("Hello ther")),
        ("extract(object(\"test\", 1))", Value::Object(vec![])),
        ("default(null, 5)", num(5.0)),
        ("default([null, 1], 5)", list(vec![num(5.0), num(1.0)])),
        ("choice(true, \"yes\", \"no\")", text("yes")),
        ("choice(false, \"yes\", \"no\")", text("no")),
        (
            "dateformat(date(2021-08-15), \"yyyy-MM-dd\")",
            text("2021-08-15"),
        ),
        (
            "dateformat(date(2021-08-15T14:05), \"EEEE d MMMM, h:mm a\")",
            text("Sunday 15 August, 2:05 PM"),
        ),
        (
            "dateformat(date(2021-08-16), \"E EEE EEEE\") + dateformat(date(2021-08-15), \" E\")",
            text("1 Mon Monday 7"),
        ),
        (
            "durationformat(dur(\"3 days 7 hours 43 seconds\"), \"ddd'd' hh'h' ss's'\")",
            text("003d 07h 43s"),
        ),
        ("string(date(2021-08-15))", text("August 15, 2021")),
        ("containsword(\"word\", \"Word\")", t.clone()),
        ("containsword(\"words\", \"Word\")", f.clone()),
        ("containsword(\"Hello there!\", \"HeLLo\")", t.clone()),
        ("containsword(\"Hello there chaps!\", \"chap\")", f.clone()),
        (
            "containsword([\"I have no words.\", \"words\"], \"Word\")",
            list(vec![f.clone(), f.clone()]),
        ),
        (
            "containsword([\"Word\", \"Words in word\"], \"WORD\")",
            list(vec![t.clone(), t.clone()]),
        ),
        ("display(\"**Hello** World\")", text("Hello World")),
        (
            "display(\"[Hello](https://example.com) [[World]]\")",
            text("Hello World"),
        ),
        ("display(link(\"path/to/file.md\"))", text("file")),
        (
            "display(link(\"path/to/file.md\", \"displayname\"))",
            text("displayname"),
        ),
        ("display(date(\"2024-11-18\"))", text("November 18, 2024")),
        ("display(list(\"Hello\", \"World\"))", text("Hello, World")),
        ("currencyformat(123456.789, \"EUR\")", text("€123,456.79")),
        (
            "striptime(date(2021-08-15T14:05)) = date(2021-08-15)",
            t.clone(),
        ),
    ];
    for (expr, want) in cases {
        assert_eq!(&ev(expr), want, "{expr}");
    }
}

#[test]
fn bad_regexes_and_unknown_functions_are_errors() {
    assert!(
        matches!(ev_err("regextest(\"(\", \"a\")"), QueryError::Eval(ref e) if e.message.contains("invalid regular expression"))
    );
    assert!(
        matches!(ev_err("nosuch(1)"), QueryError::Eval(ref e) if e.message.contains("unknown function"))
    );
    // A regex that compiles too large is refused, not run.
    assert!(matches!(
        ev_err("regextest(\"\\w{1000}{1000}\", \"a\")"),
        QueryError::Eval(_)
    ));
}

#[test]
fn hostile_evaluation_ends_with_a_budget_error() {
    let v = Vault::new(&[("a.md", "x:: 1\n")]);
    // Repeated strings are capped.
    let e = execute(
        "LIST WHERE length(\"aaaaaaaaaa\" * 1000000000) > 0",
        &v,
        &ctx(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("exceed"), "{e}");
    // Nested maps spend the step budget.
    let mut c = ctx();
    c.budget = Budget::with(1_000, std::time::Duration::from_secs(5)).into();
    let e = execute(
        "LIST WHERE length(map(flat(map(slice(map([1,2,3,4,5,6,7,8,9,10], (a) => [a,a,a,a,a,a,a,a,a,a]), 0), (b) => map(b, (c) => [c,c,c,c,c,c,c,c,c,c]))), (d) => d)) > 0",
        &v,
        &c,
    )
    .unwrap_err();
    assert!(e.to_string().contains("evaluation steps"), "{e}");
    // FLATTEN cannot multiply rows past the cap.
    let mut c = ctx();
    c.max_rows = 50;
    let e = execute(
        "LIST FLATTEN [1,2,3,4,5,6,7,8,9,10] AS a FLATTEN [1,2,3,4,5,6,7,8,9,10] AS b",
        &v,
        &c,
    )
    .unwrap_err();
    assert!(e.to_string().contains("rows"), "{e}");
    // A cancelled query stops.
    let mut c = ctx();
    c.budget = Budget::new().stop_when(|| true).into();
    let e = execute("LIST WHERE length(map(flat(map(list(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40), (a) => list(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40))), (b) => b)) > 0", &v, &c).unwrap_err();
    assert!(e.to_string().contains("cancelled"), "{e}");
}

#[test]
fn hostile_builders_are_refused_before_they_allocate() {
    use crate::obsidian::budget::Spent;
    let v = Vault::new(&[("a.md", "x:: 1\n")]);
    const MAX: u64 = 32 << 20;
    for expr in [
        // The 70-byte note: 10 GB from one replace.
        "length(replace(\"a\" * 100000, \"a\", \"b\" * 100000))",
        // A join whose separator repeats 600,000 times.
        "length(join(split(\"ab\" * 300000, \"\"), \"x\" * 1000))",
        // Each match written four times over.
        "length(regexreplace(\"a\" * 900000, \"a+\", \"$&$&$&$&\"))",
        // Lists of lists flattened past the element cap.
        "length(flat(map(split(\"a,\" * 200000, \",\"), (x) => [x, x, x, x, x, x, x, x])))",
        // Many mid-sized strings, each within every per-value cap.
        "length(map(split(\"a,\" * 300000, \",\"), (x) => \"y\" * 200))",
        // A list literal of megabyte strings.
        "length([\"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999, \"z\" * 999999])",
    ] {
        let mut c = ctx();
        // Time enough for a debug build: the bytes must be what stops each of them.
        c.budget = Budget::with(u64::MAX, std::time::Duration::from_secs(120))
            .max_bytes(MAX)
            .into();
        let (r, bytes) =
            crate::test_alloc::allocated_during(|| evaluate_inline(expr, None, &v, &c));
        let QueryError::Eval(e) = r.expect_err(expr) else {
            panic!("{expr}: not an evaluation error");
        };
        assert!(
            matches!(e.spent, Some(Spent::Bytes(_))),
            "{expr}: stopped by its bytes, not {:?}: {e}",
            e.spent
        );
        // What it allocated stays within its budget plus a constant.
        assert!(
            bytes <= MAX + (4 << 20),
            "{expr}: allocated {} MiB under a {} MiB budget",
            bytes >> 20,
            MAX >> 20
        );
    }
    // The same builders at an ordinary size still answer.
    assert_eq!(ev("replace(\"abc\" * 3, \"b\", \"-\")"), text("a-ca-ca-c"));
    assert_eq!(
        ev("join(split(\"a,b,c\", \",\"), \" / \")"),
        text("a / b / c")
    );
    assert_eq!(ev("regexreplace(\"aab\", \"a+\", \"$&$&\")"), text("aaaab"));
}

/// Pages, list items, file objects and group rows are charged before they are built: a query
/// that would copy every page's list items into every one of its rows stops at its bytes, and
/// the ordinary count over the same rows answers.
#[test]
fn rows_of_pages_and_their_list_items_are_charged_before_they_are_built() {
    use crate::obsidian::budget::Spent;
    // 30,000 list items, about as many as obsidian-hub has.
    let texts: Vec<(String, String)> = (0..100)
        .map(|i| {
            let items: String = (0..300)
                .map(|j| format!("- item {j} of page {i} #tag/sub [[Other]] [k:: v]\n"))
                .collect();
            (
                format!("p{i}.md"),
                format!("---\ntags: [a, b]\n---\n{items}"),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let v = Vault::new(&files);
    const MAX: u64 = 32 << 20;
    for query in [
        "LIST rows FLATTEN file.lists AS l GROUP BY true",
        "LIST file.lists",
        "TABLE rows.file.lists FLATTEN file.lists AS l GROUP BY l.line",
        "LIST map(file.lists, (x) => x.children) FLATTEN file.lists AS l",
    ] {
        let mut c = ctx();
        c.budget = Budget::with(u64::MAX, std::time::Duration::from_secs(120))
            .max_bytes(MAX)
            .into();
        let (r, bytes) = crate::test_alloc::allocated_during(|| {
            super::run(&parse_query(query).unwrap(), &v, &c)
        });
        let e = r.err().unwrap_or_else(|| panic!("{query}: answered"));
        assert!(
            matches!(e.spent, Some(Spent::Bytes(_))),
            "{query}: stopped by its bytes, not {:?}: {e}",
            e.spent
        );
        assert!(
            bytes <= MAX + (4 << 20),
            "{query}: allocated {} MiB under a {} MiB budget",
            bytes >> 20,
            MAX >> 20
        );
    }
    // Counting the same rows builds none of them.
    let c = ctx();
    let r = q_in(
        &v,
        "LIST length(rows) FLATTEN file.lists AS l GROUP BY true",
        &c,
    );
    let Output::List { rows, .. } = &r.output else {
        panic!("a list")
    };
    assert_eq!(rows[0].1, Some(Value::Number(30_000.0)));
    // What a cell or a sort key builds and drops is given back: counting every page's list
    // items costs what is kept, not the lists counted (192 MiB of lists here, 30,000 items).
    let r = q_in(
        &v,
        "TABLE length(file.lists) SORT length(file.lists) DESC, file.name",
        &ctx(),
    );
    assert_eq!(r.count, 100);
}

#[test]
fn a_pattern_is_compiled_and_charged_once_per_query() {
    use crate::obsidian::jsregex::footprint;
    let v = games();
    let c = ctx();
    let r = q_in(&v, "LIST WHERE regextest(\"^[A-Z]\", file.name)", &c);
    // Every page but the daily note, whose name starts with a digit.
    assert_eq!(names(&r).len(), 4);
    let once = footprint(super::eval::MAX_REGEX_BYTES);
    assert!(
        c.budget.bytes_used() < 2 * once,
        "five pages, one pattern: {} bytes charged",
        c.budget.bytes_used()
    );
    // Distinct patterns each pay before they compile, and the request's bytes end them.
    let mut c = ctx();
    c.budget = Budget::new().max_bytes(10 * once).into();
    let e = execute(
        "LIST WHERE length(filter(list(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), (n) => regextest(\"a\" + string(n), file.name))) >= 0",
        &v,
        &c,
    )
    .unwrap_err();
    assert!(e.to_string().contains("MiB"), "{e}");
}

#[test]
fn flatten_is_refused_by_the_bytes_of_its_copies_before_it_makes_them() {
    let v = Vault::new(&[("a.md", "x:: 1\n")]);
    let mut c = ctx();
    c.budget = Budget::new().max_bytes(64 << 20).into();
    let (r, bytes) = crate::test_alloc::allocated_during(|| {
        execute(
            "LIST FLATTEN \"x\" * 1000000 AS big FLATTEN split(\"a,\" * 10000, \",\") AS i",
            &v,
            &c,
        )
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains("MiB"), "{e}");
    assert!(bytes < 72 << 20, "allocated {} MiB", bytes >> 20);
}

#[test]
fn length_of_rows_counts_a_group_without_building_its_rows() {
    let v = games();
    let flatten = (1..=50)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    // What each allocates (the budget is given back what a cell built and dropped).
    let run = |expr: &str| {
        let c = ctx();
        let (r, bytes) = crate::test_alloc::allocated_during(|| {
            execute(
                &format!("LIST WITHOUT ID {expr} FLATTEN [{flatten}] AS n GROUP BY true"),
                &v,
                &c,
            )
        });
        (names(&r.unwrap()), bytes)
    };
    let (counted, cheap) = run("length(rows)");
    let (built, dear) = run("length(map(rows, (r) => 1))");
    assert_eq!(counted, vec![format!("{:?}", num(250.0))]);
    assert_eq!(built, counted);
    assert!(
        cheap * 10 < dear,
        "length(rows) built its rows: {cheap} bytes against {dear}"
    );
}

// ---- results ----

#[test]
fn a_table_without_id_or_columns_is_still_a_markdown_table() {
    let v = games();
    let r = q(&v, "TABLE WITHOUT ID FROM \"Games/Hades\"");
    let md = r.to_markdown(&DataviewSettings::default());
    // Every line a row of one (empty) column, under a delimiter row Markdown accepts.
    assert_eq!(md, "|  |\n| --- |\n|  |\n");
}

#[test]
fn tables_render_as_markdown_with_the_count_and_null_setting() {
    let v = games();
    let r = q(
        &v,
        "TABLE price, started FROM \"Games\" WHERE type = \"rpg\"",
    );
    let md = r.to_markdown(&DataviewSettings::default());
    assert_eq!(
        md,
        "| File (2) | price | started |\n| --- | --- | --- |\n| [[Games/Elden Ring\\|Elden Ring]] | 60 | February 01, 2024 |\n| [[Games/Hades\\|Hades]] | 25 | \\- |\n"
    );
    let s = DataviewSettings::from_json(br#"{"renderNullAs": "none", "defaultDateFormat": "yyyy-MM-dd", "tableIdColumnName": "Page"}"#).unwrap();
    let mut c = ctx();
    c.settings = s.clone();
    let r = execute(
        "TABLE started FROM \"Games/Hades\" or \"Games/Elden Ring\"",
        &v,
        &c,
    )
    .unwrap();
    let md = r.to_markdown(&s);
    assert!(md.starts_with("| Page (2) | started |"), "{md}");
    assert!(
        md.contains("| 2024-02-01 |") && md.contains("| none |"),
        "{md}"
    );
    let quiet = DataviewSettings::from_json(br#"{"showResultCount": false}"#).unwrap();
    assert!(r.to_markdown(&quiet).starts_with("| Page | started |"));
}

#[test]
fn lists_render_id_and_value() {
    let v = games();
    let r = q(&v, "LIST price FROM \"Games\" WHERE price < 30");
    let md = r.to_markdown(&DataviewSettings::default());
    assert_eq!(
        md,
        "- [[Games/Hades|Hades]]: 25\n- [[Games/Tetris|Tetris]]: 5\n"
    );
    let r = q(&v, "LIST WITHOUT ID type FROM \"Games\" SORT type");
    assert_eq!(
        r.to_markdown(&DataviewSettings::default()),
        "- puzzle\n- rpg\n- rpg\n"
    );
}

#[test]
fn truncate_cuts_rows_and_says_so() {
    let v = games();
    let mut r = q(&v, "LIST");
    assert_eq!(r.count, 5);
    r.truncate(2);
    assert!(r.truncated);
    assert_eq!(names(&r).len(), 2);
}

#[test]
fn settings_keep_defaults_for_missing_or_mistyped_keys() {
    let s = DataviewSettings::from_json(br#"{"taskCompletionTracking": true, "taskCompletionText": "done", "inlineQueryPrefix": 7}"#).unwrap();
    assert!(s.task_completion_tracking);
    assert_eq!(s.task_completion_text, "done");
    assert_eq!(s.inline_query_prefix, "=");
    assert_eq!(s.date_format, "MMMM dd, yyyy");
    assert!(DataviewSettings::from_json(b"[1]").is_err());
}

#[test]
fn grouped_task_queries_show_a_heading_per_key() {
    let v = games();
    let r = q(&v, "TASK\nWHERE !completed\nGROUP BY file.link");
    assert!(r.grouped);
    let Output::Task { groups } = &r.output else {
        panic!()
    };
    assert_eq!(groups.len(), 3);
    let r = q(&v, "TASK GROUP BY completed");
    let Output::Task { groups } = &r.output else {
        panic!()
    };
    let keys: Vec<&Value> = groups.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, [&Value::Bool(false), &Value::Bool(true)]);
    // Three completed tasks: level up, buy game, done thing.
    let done: usize = groups[1].1.len();
    assert_eq!(done, 3);
}

#[test]
fn a_where_that_fails_on_some_rows_drops_them_with_a_warning() {
    let v = Vault::new(&[("a.md", "x:: 2\n"), ("b.md", "x:: [[c]]\n")]);
    let r = q(&v, "LIST WHERE x * 2 = 4");
    assert_eq!(names(&r), ["a.md"]);
    assert_eq!(r.warnings.len(), 1);
    let e = execute(
        "LIST WHERE x * 2 = 4 WHERE x = 2",
        &Vault::new(&[("b.md", "x:: [[c]]\n")]),
        &ctx(),
    )
    .unwrap_err();
    assert!(
        matches!(e, QueryError::Eval(ref e) if e.message.contains("no implementation")),
        "{e}"
    );
}

#[test]
fn flattened_links_are_followed_to_their_pages() {
    // The data-commands example: contacts flattened, sorted by the linked page's age.
    let v = Vault::new(&[
        ("Mr. L.md", "age:: 40\n"),
        ("Ann.md", "age:: 30\n"),
        ("Bob.md", "age:: 20\n"),
        ("Meeting.md", "contacts:: [[Mr. L]], [[Ann]], [[Bob]]\n"),
        ("Lunch.md", "contacts:: [[Ann]]\n"),
    ]);
    let r = q(
        &v,
        "LIST rows.c\nWHERE typeof(contacts) = \"array\" AND contains(contacts, [[Mr. L]])\nSORT length(contacts)\nFLATTEN contacts as c\nSORT link(c).age ASC",
    );
    // No GROUP BY: `rows` is null on each of the three rows, sorted Bob, Ann, Mr. L.
    assert_eq!(r.count, 3);
    let r = q(
        &v,
        "TABLE WITHOUT ID c, c.age FROM \"Meeting\" FLATTEN contacts AS c SORT c.age",
    );
    let Output::Table { rows, .. } = &r.output else {
        panic!()
    };
    let ages: Vec<Value> = rows.iter().map(|r| r[1].clone()).collect();
    assert_eq!(ages, [num(20.0), num(30.0), num(40.0)]);
}

#[test]
fn inline_queries_evaluate_on_this_page() {
    let v = games();
    let hades = Some(v.id("Games/Hades.md"));
    assert_eq!(
        evaluate_inline("price * 2", hades, &v, &ctx()).unwrap(),
        num(50.0)
    );
    assert_eq!(
        evaluate_inline("file.name + \" (\" + type + \")\"", hades, &v, &ctx()).unwrap(),
        text("Hades (rpg)")
    );
    assert_eq!(
        evaluate_inline("length(file.tasks)", hades, &v, &ctx()).unwrap(),
        num(1.0)
    );
    assert_eq!(
        evaluate_inline("file.tasks[0].due", hades, &v, &ctx()).unwrap(),
        day(2024, 5, 10)
    );
    assert!(matches!(
        evaluate_inline("$= dv.current()", hades, &v, &ctx()),
        Err(QueryError::Parse(_))
    ));
}

#[test]
fn file_day_aliases_frontmatter_lists_and_starred() {
    let v = Vault::new(&[(
        "Notes/Trip.md",
        "---\ndate: 2021-03-01\naliases: [Journey, Voyage]\nrating: \"5\"\n---\n- plan\n    - [ ] book hotel\n- [x] pack\n",
    )]);
    let p = Some(0);
    let e = |x: &str| evaluate_inline(x, p, &v, &ctx()).unwrap_or_else(|err| panic!("{x}: {err}"));
    // No date in the name: the `date` field gives file.day.
    assert_eq!(e("file.day"), day(2021, 3, 1));
    assert_eq!(
        e("file.aliases"),
        list(vec![text("Journey"), text("Voyage")])
    );
    // Raw frontmatter keeps the text as written; the page field is typed.
    assert_eq!(e("file.frontmatter.date"), text("2021-03-01"));
    assert_eq!(e("date"), day(2021, 3, 1));
    assert_eq!(e("file.starred"), Value::Null);
    assert_eq!(e("length(file.lists)"), num(3.0));
    assert_eq!(e("length(file.tasks)"), num(2.0));
    assert_eq!(e("file.lists[0].children[0].text"), text("book hotel"));
    assert_eq!(e("file.lists[0].task"), Value::Bool(false));
    assert_eq!(e("file.tasks[1].completed"), Value::Bool(true));
    assert_eq!(
        e("file.tasks.text"),
        list(vec![text("book hotel"), text("pack")])
    );
    assert_eq!(e("file.lists[1].parent"), num(5.0));
}

#[test]
fn list_with_an_expression_shows_the_page_and_the_value() {
    let v = games();
    let r = q(
        &v,
        "LIST file.folder FROM #games SORT file.name DESC LIMIT 1",
    );
    assert_eq!(
        r.to_markdown(&DataviewSettings::default()),
        "- [[Games/Tetris|Tetris]]: Games\n"
    );
    let r = q(
        &v,
        "LIST \"File Path: \" + file.path + \" :)\" FROM \"Games/Hades\"",
    );
    assert_eq!(
        r.to_markdown(&DataviewSettings::default()),
        "- [[Games/Hades|Hades]]: File Path: Games/Hades.md :)\n"
    );
    let r = q(&v, "LIST rows.file.link FROM \"Games\" GROUP BY type");
    assert_eq!(
        r.to_markdown(&DataviewSettings::default()),
        "- puzzle: - [[Games/Tetris|Tetris]]\n- rpg: - [[Games/Elden Ring|Elden Ring]]<br>- [[Games/Hades|Hades]]\n"
    );
}

#[test]
fn a_field_looked_up_alone_equals_the_merged_page_fields() {
    let v = Vault::new(&[(
        "a.md",
        "---\nTitle: Yes\nTags2: [x]\n---\nBasic Field:: one\n**Bold Field**:: two\n- item [Basic Field:: three]\n- [ ] task [Basic Field:: not me]\n\nbasic-field:: four\n",
    )]);
    let note = &v.pages[0].note;
    let c = ctx();
    let ev = super::eval::Ev::new(&v, &c);
    let merged = note.page_fields();
    for (k, want) in &merged {
        assert_eq!(ev.page_field(0, k).as_ref(), Some(want), "{k}");
    }
    // A raw key wins over the sanitised form of the others.
    assert_eq!(ev.page_field(0, "basic-field"), Some(text("four")));
    assert_eq!(
        ev.page_field(0, "Basic Field"),
        Some(list(vec![text("three"), text("one")]))
    );
    assert_eq!(ev.page_field(0, "bold-field"), Some(text("two")));
    assert_eq!(ev.page_field(0, "title"), Some(text("Yes")));
    assert_eq!(ev.page_field(0, "nothing"), None);
}

/// A vault that answers `FROM #tag` from its own index (here: a fixed answer that the page
/// tags would not give, so the test sees which one was used).
struct Indexed(Vault);

impl DvSource for Indexed {
    fn pages(&self) -> Vec<PageId> {
        self.0.pages()
    }
    fn path(&self, p: PageId) -> &str {
        self.0.path(p)
    }
    fn size(&self, p: PageId) -> u64 {
        self.0.size(p)
    }
    fn mtime(&self, p: PageId) -> Option<NaiveDateTime> {
        self.0.mtime(p)
    }
    fn ctime(&self, p: PageId) -> Option<NaiveDateTime> {
        self.0.ctime(p)
    }
    fn frontmatter(&self, p: PageId) -> Option<&serde_json::Value> {
        self.0.frontmatter(p)
    }
    fn note(&self, p: PageId) -> Option<&DataviewNote> {
        self.0.note(p)
    }
    fn tags(&self, p: PageId) -> Vec<String> {
        self.0.tags(p)
    }
    fn outlinks(&self, p: PageId) -> Vec<Link> {
        self.0.outlinks(p)
    }
    fn resolve(&self, target: &str, from: Option<PageId>) -> Option<PageId> {
        self.0.resolve(target, from)
    }
    fn inlinks(&self, p: PageId) -> Vec<PageId> {
        self.0.inlinks(p)
    }
    fn pages_with_tag(&self, tag: &str) -> Option<Vec<PageId>> {
        (tag == "#indexed").then(|| vec![self.0.id("Dashboard.md")])
    }
}

#[test]
fn a_source_with_a_tag_index_answers_from_tag() {
    let v = Indexed(games());
    let r = execute("LIST FROM #indexed", &v, &ctx()).unwrap();
    assert_eq!(names(&r), ["Dashboard.md"]);
}

#[test]
fn display_of_text_full_of_brackets_stays_linear() {
    let t = std::time::Instant::now();
    let v = ev("length(display(\"[a \" * 200000))");
    assert_eq!(v, num(600_000.0));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn sort_then_limit_selects_the_same_rows_as_a_full_stable_sort() {
    // Many ties (three ranks for 40 pages) and pages without the field: the first k rows of a
    // full sort, in the same order, whatever k.
    let files: Vec<(String, String)> = (0..40)
        .map(|i| {
            let body = if i % 7 == 0 {
                "no rating\n".to_owned()
            } else {
                format!("rating:: {}\n", i % 3)
            };
            (format!("N{:02}.md", (i * 17) % 40), body)
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_str()))
        .collect();
    let v = Vault::new(&refs);
    for dir in ["ASC", "DESC"] {
        let full = names(&q(&v, &format!("LIST SORT rating {dir}")));
        assert_eq!(full.len(), 40);
        for k in [0, 1, 5, 13, 39, 40, 41] {
            let limited = names(&q(&v, &format!("LIST SORT rating {dir} LIMIT {k}")));
            assert_eq!(limited, full[..k.min(40)], "{dir} LIMIT {k}");
        }
    }
}

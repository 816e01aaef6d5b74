//! Methods, by the receiver's type: `recv.name(args)` on any value, then on strings, numbers,
//! lists, dates, files, links, objects, regular expressions and durations. Regex `split` and
//! `replace` charge the budget per search; every method that builds a string or a list
//! computes its size from its inputs and charges it before building it.

use std::sync::Arc;

use super::{BYTES_PER_STEP, EvalError, Evaluator, MAX_LIST_LEN, R, check_text_len, relative};
use crate::obsidian::bases::expr::Expr;
use crate::obsidian::bases::value::{
    self, Date, Duration, FileRef, SHARED, SLOT, SortKey, Value, number_text,
};
use crate::obsidian::moment;

impl Evaluator<'_> {
    /// Runs `body` with `value` and `index` bound to each element.
    fn lambda_each(
        &mut self,
        items: &[Value],
        body: &Expr,
        mut f: impl FnMut(&Value, Value) -> bool,
    ) -> Result<(), EvalError> {
        self.charge(items.len() as u64, body.pos)?;
        for (i, item) in items.iter().enumerate() {
            self.locals.push(("value", item.clone()));
            self.locals.push(("index", Value::Number(i as f64)));
            let r = self.eval(body);
            self.locals.truncate(self.locals.len() - 2);
            if !f(item, r?) {
                break;
            }
        }
        Ok(())
    }

    /// A method call `recv.name(args)`.
    pub(super) fn method(&mut self, recv: Value, name: &str, args: &[Expr], pos: u32) -> R {
        // Any type.
        match name {
            "isTruthy" => return Ok(Value::Bool(recv.truthy())),
            "isType" => {
                let t = self.arg(args, 0)?;
                let want = self.text_of(&t, pos)?;
                self.alloc(want.len() as u64 * 3, pos)?;
                let want = want.to_lowercase();
                let is = match (want.as_str(), &recv) {
                    ("string" | "text", Value::String(_)) => true,
                    ("file", Value::File(_) | Value::Note(_)) => true,
                    ("regexp" | "regex", Value::Regex(_)) => true,
                    ("null" | "undefined", Value::Null) => true,
                    ("array", Value::List(_)) => true,
                    (w, v) => w == v.type_name(),
                };
                return Ok(Value::Bool(is));
            }
            "toString" => return Ok(Value::String(self.text_value(&recv, pos)?)),
            "isEmpty" => return Ok(Value::Bool(recv.is_empty())),
            _ => {}
        }
        match recv {
            Value::String(s) => self.string_method(&s, name, args, pos),
            Value::Number(n) => self.number_method(n, name, args, pos),
            Value::List(l) => self.list_method(&l, name, args, pos),
            Value::Date(d) => self.date_method(d, name, args, pos),
            Value::Object(_) if !has_method("object", name) => Err(no_method("object", name, pos)),
            Value::Regex(_) if !has_method("regular expression", name) => {
                Err(no_method("regular expression", name, pos))
            }
            Value::Object(o) => {
                self.alloc_list(o.len() as u64, pos)?;
                match name {
                    "keys" => Ok(Value::List(Arc::new(
                        o.iter().map(|(k, _)| Value::String(k.clone())).collect(),
                    ))),
                    "values" => Ok(Value::List(Arc::new(
                        o.iter().map(|(_, v)| v.clone()).collect(),
                    ))),
                    _ => Err(no_method("object", name, pos)),
                }
            }
            Value::Regex(p) => match name {
                "matches" => {
                    let v = self.arg(args, 0)?;
                    let text = self.text_of(&v, pos)?;
                    self.charge_search(text.len(), pos)?;
                    Ok(Value::Bool(p.regex.is_match(&text)))
                }
                _ => Err(no_method("regular expression", name, pos)),
            },
            Value::File(f) | Value::Note(f) => self.file_method(f, name, args, pos),
            Value::Link(l) if has_method("link", name) => match name {
                "asFile" => Ok(l.file.map_or(Value::Null, Value::File)),
                "linksTo" => {
                    let other = self.arg(args, 0)?;
                    let to = self.target_of(&other);
                    Ok(Value::Bool(match (l.file, to) {
                        (Some(f), Some(t)) => self.src.links_to(f, t),
                        _ => false,
                    }))
                }
                _ => Err(no_method("link", name, pos)),
            },
            // Other methods see the link as its text, as Obsidian's string functions do.
            Value::Link(l) => {
                let s = self.text_value(&Value::Link(l), pos)?;
                self.string_method(&s, name, args, pos)
            }
            Value::Null => match name {
                // Methods on a missing property give nothing, as Obsidian shows an empty cell.
                _ if is_known_method(name) => Ok(Value::Null),
                _ => Err(no_method("null", name, pos)),
            },
            Value::Duration(d) => match name {
                "abs" => Ok(Value::Duration(Duration {
                    months: d.months.abs(),
                    ms: d.ms.abs(),
                })),
                _ => self.number_method(d.total_ms(), name, args, pos),
            },
            other => Err(no_method(other.type_name(), name, pos)),
        }
    }

    fn target_of(&self, v: &Value) -> Option<FileRef> {
        match v {
            Value::String(s) => self.lookup_file(s),
            other => other.file(),
        }
    }

    fn file_method(&mut self, f: FileRef, name: &str, args: &[Expr], pos: u32) -> R {
        check_method("file", name, pos)?;
        match name {
            "asLink" => {
                let display = match args.first() {
                    Some(a) => Some(self.eval(a)?),
                    None => None,
                };
                self.file_link(f, display, pos)
            }
            "hasLink" => {
                let other = self.arg(args, 0)?;
                Ok(Value::Bool(
                    self.target_of(&other)
                        .is_some_and(|t| self.src.links_to(f, t)),
                ))
            }
            "hasProperty" => {
                let k = self.arg(args, 0)?;
                let k = self.text_of(&k, pos)?;
                Ok(Value::Bool(self.src.property(f, &k).is_some()))
            }
            "hasTag" => {
                for v in self.args(args)? {
                    let items = match &v {
                        Value::List(l) => &l[..],
                        other => std::slice::from_ref(other),
                    };
                    for t in items {
                        let tag = self.text_of(t, pos)?;
                        if self.row_has_tag(f, &tag) {
                            return Ok(Value::Bool(true));
                        }
                    }
                }
                Ok(Value::Bool(false))
            }
            "inFolder" => {
                let v = self.arg(args, 0)?;
                let folder = self.text_of(&v, pos)?;
                let folder = folder.trim_matches('/');
                let path = self.src.path(f);
                Ok(Value::Bool(
                    folder.is_empty()
                        || path
                            .strip_prefix(folder)
                            .is_some_and(|rest| rest.starts_with('/')),
                ))
            }
            "linksTo" => {
                let other = self.arg(args, 0)?;
                Ok(Value::Bool(
                    self.target_of(&other)
                        .is_some_and(|t| self.src.links_to(f, t)),
                ))
            }
            _ => Err(no_method("file", name, pos)),
        }
    }

    /// Refuses a value nested deeper than [`MAX_VALUE_DEPTH`] (lists, objects and link
    /// displays inside one another): only `reduce` can nest without bound (`[acc]` a hundred
    /// thousand times), and dropping or writing such a value would recurse past the stack.
    /// The nested values read are charged as steps (a value sharing its parts many times over
    /// is stopped by the budget, not read in full).
    fn check_depth(&mut self, v: &Value, pos: u32) -> Result<(), EvalError> {
        enum Level<'v> {
            Items(std::slice::Iter<'v, Value>),
            Entries(std::slice::Iter<'v, (Arc<str>, Value)>),
        }
        fn enter(v: &Value) -> Option<Level<'_>> {
            match v {
                Value::List(items) => Some(Level::Items(items.iter())),
                Value::Object(o) => Some(Level::Entries(o.iter())),
                Value::Link(l) => l
                    .display
                    .as_ref()
                    .map(|d| Level::Items(std::slice::from_ref(d).iter())),
                _ => None,
            }
        }
        let mut stack: Vec<Level<'_>> = enter(v).into_iter().collect();
        let mut entered = 0u64;
        while let Some(top) = stack.last_mut() {
            let next = match top {
                Level::Items(items) => items.next(),
                Level::Entries(entries) => entries.next().map(|(_, x)| x),
            };
            let Some(x) = next else {
                stack.pop();
                continue;
            };
            if let Some(level) = enter(x) {
                if stack.len() >= MAX_VALUE_DEPTH {
                    return Err(EvalError::at(
                        pos,
                        format!(
                            "reduce() built a value nested deeper than {MAX_VALUE_DEPTH} levels"
                        ),
                    ));
                }
                entered += 1;
                if entered.is_multiple_of(1024) {
                    self.charge(1024, pos)?;
                }
                stack.push(level);
            }
        }
        Ok(())
    }

    /// Counts one regex search (and the bytes it passed over) in a loop over the matches of
    /// `split` or `replace`, and reads the clock: the regex crate bounds each search, not an
    /// iteration (a pattern matching the empty string everywhere may read the rest of the string
    /// at every position), so the deadline is checked between searches.
    fn charge_search(&mut self, bytes: usize, pos: u32) -> Result<(), EvalError> {
        self.charge(1 + bytes as u64 / BYTES_PER_STEP, pos)?;
        self.budget.check().map_err(|e| super::spent(e, pos))
    }

    /// `s.split(re)`, at most `limit` parts, within the budget: each part is charged before it
    /// is copied.
    fn split_regex(&mut self, s: &str, re: &regex::Regex, limit: usize, pos: u32) -> R {
        let mut parts = Vec::new();
        let mut last = 0;
        // A part costs its text and, the list growing by doubling, up to four slots (those
        // of the list outgrown and of the one replacing it, which may be half empty).
        let part_cost = |len: usize| len as u64 + SHARED + 4 * SLOT;
        for m in re.find_iter(s) {
            self.charge_search(m.end().saturating_sub(last), pos)?;
            if parts.len() >= limit {
                break;
            }
            self.alloc(part_cost(m.start() - last), pos)?;
            parts.push(Value::str(&s[last..m.start()]));
            last = m.end();
        }
        if parts.len() < limit {
            self.alloc(part_cost(s.len() - last), pos)?;
            parts.push(Value::str(&s[last..]));
        }
        Ok(Value::List(Arc::new(parts)))
    }

    /// `s.replace(re, rep)` (every match when `global`), within the budget and the string cap:
    /// a first pass over the matches bounds the result's length (each `${n}` of `rep` writes
    /// at most the match it is in), charged before the second writes it.
    fn replace_regex(
        &mut self,
        s: &str,
        re: &regex::Regex,
        rep: &str,
        global: bool,
        pos: u32,
    ) -> Result<String, EvalError> {
        let refs = rep.matches('$').count() as u64;
        let mut len = s.len() as u64;
        let mut last = 0;
        for m in re.find_iter(s) {
            self.charge_search(m.end().saturating_sub(last), pos)?;
            let written = (rep.len() as u64).saturating_add(refs.saturating_mul(m.len() as u64));
            len = len.saturating_add(written).saturating_sub(m.len() as u64);
            last = m.end();
            if !global {
                break;
            }
        }
        self.alloc_text(len, pos)?;
        let mut out = String::with_capacity(len as usize);
        // The groups of each match are read into one set of locations, reused: nothing is
        // allocated per match.
        let parts = replacement_parts(rep);
        // The parts, and the locations of the groups (two offsets each, and their header).
        self.alloc(
            parts.capacity() as u64 * PART + 16 * re.captures_len() as u64 + 64,
            pos,
        )?;
        let mut groups = re.capture_locations();
        let mut last = 0;
        for m in re.find_iter(s) {
            self.charge_search(m.end().saturating_sub(last) + rep.len(), pos)?;
            out.push_str(&s[last..m.start()]);
            if refs == 0 {
                out.push_str(rep);
            } else {
                // The match found again from where it starts, with its groups.
                re.captures_read_at(&mut groups, s, m.start());
                for part in &parts {
                    match part {
                        RepPart::Text(t) => out.push_str(t),
                        RepPart::Group(g) => {
                            if let Some((a, b)) = groups.get(*g) {
                                out.push_str(&s[a..b]);
                            }
                        }
                    }
                }
            }
            last = m.end();
            if !global {
                break;
            }
        }
        out.push_str(&s[last..]);
        Ok(out)
    }

    /// `s.split(sep)` with a text separator (every character when empty), at most `limit`
    /// parts: counted, then charged, then built.
    fn split_text(&mut self, s: &str, sep: &str, limit: usize, pos: u32) -> R {
        if sep.is_empty() {
            let (n, bytes) = s
                .chars()
                .take(limit)
                .fold((0u64, 0u64), |(n, b), c| (n + 1, b + c.len_utf8() as u64));
            self.alloc_list(n, pos)?;
            self.alloc(bytes + n * SHARED, pos)?;
            let mut parts = Vec::with_capacity(n as usize);
            parts.extend(
                s.char_indices()
                    .take(limit)
                    .map(|(i, c)| Value::str(&s[i..i + c.len_utf8()])),
            );
            return Ok(Value::List(Arc::new(parts)));
        }
        let (n, bytes) = s
            .split(sep)
            .take(limit)
            .fold((0u64, 0u64), |(n, b), p| (n + 1, b + p.len() as u64));
        self.charge(s.len() as u64 / BYTES_PER_STEP, pos)?;
        self.alloc_list(n, pos)?;
        self.alloc(bytes + n * SHARED, pos)?;
        let mut parts = Vec::with_capacity(n as usize);
        parts.extend(s.split(sep).take(limit).map(Value::str));
        Ok(Value::List(Arc::new(parts)))
    }

    /// `s.replace(from, rep)` with a text pattern, every occurrence: the result's length from
    /// the number of occurrences, charged before it is written.
    fn replace_text(&mut self, s: &Arc<str>, from: &str, rep: &str, pos: u32) -> R {
        if from.is_empty() {
            return Ok(Value::String(s.clone()));
        }
        let n = s.matches(from).count() as u64;
        self.charge(s.len() as u64 / BYTES_PER_STEP + n / 8, pos)?;
        let len = (s.len() as u64 - n * from.len() as u64)
            .saturating_add(n.saturating_mul(rep.len() as u64));
        self.alloc_text(len, pos)?;
        let mut out = String::with_capacity(len as usize);
        let mut last = 0;
        for (at, m) in s.match_indices(from) {
            out.push_str(&s[last..at]);
            out.push_str(rep);
            last = at + m.len();
        }
        out.push_str(&s[last..]);
        Ok(Value::str(out))
    }

    fn string_method(&mut self, s: &Arc<str>, name: &str, args: &[Expr], pos: u32) -> R {
        // Every string method reads its string (most in full): charged by size.
        self.charge(s.len() as u64 / BYTES_PER_STEP, pos)?;
        check_method("string", name, pos)?;
        Ok(match name {
            "contains" | "containsAll" | "containsAny" | "startsWith" | "endsWith" => {
                let vals = self.args(args)?;
                // `contains`, `startsWith` and `endsWith` look for their first argument only.
                let wanted = match name {
                    "containsAll" | "containsAny" => &vals[..],
                    _ => &vals[..vals.len().min(1)],
                };
                let mut found = Vec::with_capacity(wanted.len());
                for v in wanted {
                    let t = self.text_of(v, pos)?;
                    self.charge(s.len() as u64 / BYTES_PER_STEP, pos)?;
                    found.push(match name {
                        "startsWith" => s.starts_with(&*t),
                        "endsWith" => s.ends_with(&*t),
                        _ => s.contains(&*t),
                    });
                }
                Value::Bool(match name {
                    "containsAny" => found.iter().any(|f| *f),
                    "contains" | "containsAll" => found.iter().all(|f| *f),
                    _ => found.first().copied().unwrap_or(false),
                })
            }
            "lower" | "toLowerCase" | "upper" | "toUpperCase" => {
                let lower = matches!(name, "lower" | "toLowerCase");
                let exact: u64 = s
                    .chars()
                    .map(|c| {
                        if lower {
                            c.to_lowercase().map(char::len_utf8).sum::<usize>()
                        } else {
                            c.to_uppercase().map(char::len_utf8).sum::<usize>()
                        }
                    })
                    .sum::<usize>() as u64;
                check_text_len(exact, pos)?;
                // Written into a string of the input's length that grows by doubling, then
                // copied into the value.
                self.alloc(2 * exact.max(s.len() as u64) + exact + SHARED, pos)?;
                Value::str(if lower {
                    s.to_lowercase()
                } else {
                    s.to_uppercase()
                })
            }
            "trim" => {
                let t = s.trim();
                self.alloc_copy(t.len() as u64, pos)?;
                Value::str(t)
            }
            "title" => {
                let len = title_case_len(s);
                self.alloc_text(len as u64, pos)?;
                Value::str(title_case(s, len))
            }
            "reverse" => {
                self.alloc_text(s.len() as u64, pos)?;
                let mut out = String::with_capacity(s.len());
                out.extend(s.chars().rev());
                Value::str(out)
            }
            "repeat" => {
                let n = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=1e9).contains(&n) {
                    return Err(EvalError::at(pos, "repeat() count must be 0 or more"));
                }
                self.alloc_text((s.len() as u64).saturating_mul(n as u64), pos)?;
                Value::str(s.repeat(n as usize))
            }
            "slice" => {
                let (a, b) = self.slice_bounds(args, s.chars().count())?;
                let byte = |i: usize| s.char_indices().nth(i).map_or(s.len(), |(at, _)| at);
                let (from, to) = (byte(a), byte(b));
                self.alloc_copy((to - from) as u64, pos)?;
                Value::str(&s[from..to])
            }
            "split" => {
                let sep = self.arg(args, 0)?;
                let n = match args.get(1) {
                    Some(a) => self.eval(a)?.as_number().map(|n| n.max(0.0) as usize),
                    None => None,
                };
                let limit = n.unwrap_or(MAX_LIST_LEN).min(MAX_LIST_LEN);
                return match &sep {
                    Value::Regex(p) => self.split_regex(s, &p.regex, limit, pos),
                    other => {
                        let sep = self.text_of(other, pos)?;
                        self.split_text(s, &sep, limit, pos)
                    }
                };
            }
            "replace" => {
                let pat = self.arg(args, 0)?;
                let rep = self.arg(args, 1)?;
                let rep = self.text_of(&rep, pos)?;
                match &pat {
                    Value::Regex(p) => {
                        // `$1` becomes `${1}`: at most twice as long.
                        self.alloc(2 * rep.len() as u64, pos)?;
                        let rep = crate::obsidian::jsregex::replacement(&rep);
                        let out = self.replace_regex(s, &p.regex, &rep, p.global, pos)?;
                        Value::str(out)
                    }
                    other => {
                        let from = self.text_of(other, pos)?;
                        return self.replace_text(s, &from, &rep, pos);
                    }
                }
            }
            _ => return Err(no_method("string", name, pos)),
        })
    }

    fn slice_bounds(&mut self, args: &[Expr], len: usize) -> Result<(usize, usize), EvalError> {
        let norm = |n: f64| -> usize {
            if n < 0.0 {
                (len as f64 + n).max(0.0) as usize
            } else {
                (n as usize).min(len)
            }
        };
        let a = norm(self.arg(args, 0)?.as_number().unwrap_or(0.0).trunc());
        let b = match args.get(1) {
            Some(e) => match self.eval(e)?.as_number() {
                Some(n) => norm(n.trunc()),
                None => len,
            },
            None => len,
        };
        Ok((a, b.max(a)))
    }

    fn number_method(&mut self, n: f64, name: &str, args: &[Expr], pos: u32) -> R {
        check_method("number", name, pos)?;
        Ok(match name {
            "abs" => Value::Number(n.abs()),
            "ceil" => Value::Number(n.ceil()),
            "floor" => Value::Number(n.floor()),
            "round" => {
                let digits = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=20.0).contains(&digits) {
                    return Err(EvalError::at(pos, "round() takes 0 to 20 digits"));
                }
                let f = 10f64.powi(digits as i32);
                // JavaScript's Math.round: halves go up.
                Value::Number((n * f + 0.5).floor() / f)
            }
            "toFixed" => {
                let p = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=100.0).contains(&p) {
                    return Err(EvalError::at(pos, "toFixed() takes 0 to 100 digits"));
                }
                // At most 309 digits before the point, a sign, the point and `p` digits.
                self.alloc_text(312 + p as u64, pos)?;
                if !n.is_finite() {
                    Value::str(number_text(n))
                } else {
                    Value::str(format!("{:.*}", p as usize, n))
                }
            }
            _ => return Err(no_method("number", name, pos)),
        })
    }

    fn list_method(&mut self, l: &Arc<Vec<Value>>, name: &str, args: &[Expr], pos: u32) -> R {
        self.charge(l.len() as u64 / 8, pos)?;
        check_method("list", name, pos)?;
        Ok(match name {
            "contains" => {
                let v = self.arg(args, 0)?;
                Value::Bool(l.iter().any(|x| x.equals(&v)))
            }
            "containsAll" => {
                let vs = self.args(args)?;
                // Each value is looked for in the whole list.
                self.charge((l.len() * vs.len()) as u64 / 8, pos)?;
                Value::Bool(vs.iter().all(|v| l.iter().any(|x| x.equals(v))))
            }
            "containsAny" => {
                let vs = self.args(args)?;
                self.charge((l.len() * vs.len()) as u64 / 8, pos)?;
                Value::Bool(vs.iter().any(|v| l.iter().any(|x| x.equals(v))))
            }
            "filter" | "map" => {
                let Some(body) = args.first() else {
                    return Err(EvalError::at(pos, format!("{name}() needs an expression")));
                };
                // At most one slot per element; what `map` gives is charged where it is built.
                self.alloc_list(l.len() as u64, pos)?;
                let mut out = Vec::with_capacity(l.len());
                let keep = name == "filter";
                self.lambda_each(l, body, |item, r| {
                    if keep {
                        if r.truthy() {
                            out.push(item.clone());
                        }
                    } else {
                        out.push(r);
                    }
                    true
                })?;
                Value::List(Arc::new(out))
            }
            "reduce" => {
                let Some(body) = args.first() else {
                    return Err(EvalError::at(pos, "reduce() needs an expression"));
                };
                let mut acc = self.arg(args, 1)?;
                self.charge(l.len() as u64, pos)?;
                for (i, item) in l.iter().enumerate() {
                    self.locals.push(("value", item.clone()));
                    self.locals.push(("index", Value::Number(i as f64)));
                    self.locals.push(("acc", acc.clone()));
                    let r = self.eval(body);
                    self.locals.truncate(self.locals.len() - 3);
                    acc = r?;
                    self.check_depth(&acc, pos)?;
                }
                acc
            }
            "flat" => {
                let n: u64 = l
                    .iter()
                    .map(|x| match x {
                        Value::List(inner) => inner.len() as u64,
                        _ => 1,
                    })
                    .sum();
                self.charge(n / 8, pos)?;
                self.alloc_list(n, pos)?;
                let mut out = Vec::with_capacity(n as usize);
                for x in l.iter() {
                    match x {
                        Value::List(inner) => out.extend(inner.iter().cloned()),
                        other => out.push(other.clone()),
                    }
                }
                Value::List(Arc::new(out))
            }
            "join" => {
                let sep = match args.first() {
                    Some(a) => self.eval(a)?,
                    None => Value::str(","),
                };
                let sep = self.text_of(&sep, pos)?;
                // The joined text's length, charged before any of it is written.
                let mut len = (sep.len() as u64).saturating_mul(l.len().saturating_sub(1) as u64);
                for v in l.iter() {
                    check_text_len(len, pos)?;
                    len += self.text_len(v, pos)?;
                }
                self.alloc_text(len, pos)?;
                let mut out = String::with_capacity(len as usize);
                let names = |f: FileRef| self.file_name(f);
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&sep);
                    }
                    v.write_text(&names, &mut out);
                }
                Value::str(out)
            }
            "reverse" => {
                self.alloc_list(l.len() as u64, pos)?;
                Value::List(Arc::new(l.iter().rev().cloned().collect()))
            }
            // Not on the Functions page, but the Bases syntax page's custom summary uses
            // `values.mean()`: the numbers of the list (others skipped).
            "mean" | "sum" | "min" | "max" => {
                let nums = l.iter().filter_map(|v| match v {
                    Value::Number(n) => Some(*n),
                    _ => None,
                });
                let r = match name {
                    "sum" => Some(nums.sum()),
                    "mean" => {
                        let (count, total) = nums.fold((0u64, 0.0), |(c, t), n| (c + 1, t + n));
                        (count > 0).then(|| total / count as f64)
                    }
                    "min" => nums.reduce(f64::min),
                    _ => nums.reduce(f64::max),
                };
                r.map_or(Value::Null, Value::Number)
            }
            "slice" => {
                let (a, b) = self.slice_bounds(args, l.len())?;
                self.alloc_list((b - a) as u64, pos)?;
                Value::List(Arc::new(l[a..b].to_vec()))
            }
            "sort" => {
                // Each element's key once (its text charged), then the order of the keys.
                self.alloc_list(l.len() as u64, pos)?;
                // The keys, the order, and the merge sort's buffer (half the order).
                self.alloc(
                    l.len() as u64
                        * (std::mem::size_of::<SortKey>() + 2 * std::mem::size_of::<usize>())
                            as u64,
                    pos,
                )?;
                let mut keys = Vec::with_capacity(l.len());
                for v in l.iter() {
                    keys.push(self.sort_key(v, pos)?);
                }
                let n = l.len() as u64;
                self.charge(n * (64 - n.leading_zeros() as u64) / 8, pos)?;
                let mut order: Vec<usize> = (0..l.len()).collect();
                order.sort_by(|&a, &b| keys[a].cmp_to(&keys[b], false));
                Value::List(Arc::new(order.into_iter().map(|i| l[i].clone()).collect()))
            }
            "unique" => {
                self.charge(l.len() as u64, pos)?;
                // The buckets (up to three keys per element, each with its list of members)
                // and the coarse form of each nested element (at most its width, written in
                // parts and then joined), before they are built.
                self.alloc(l.len() as u64 * UNIQUE_PER_VALUE, pos)?;
                for v in l.iter() {
                    if matches!(v, Value::List(_) | Value::Object(_)) {
                        let width = v.width(self.budget.bytes_max());
                        self.charge(width / 256, pos)?;
                        self.alloc(2 * width, pos)?;
                    }
                }
                let kept = value::distinct(l);
                self.alloc_list(kept.len() as u64, pos)?;
                Value::List(Arc::new(kept.into_iter().map(|i| l[i].clone()).collect()))
            }
            _ => return Err(no_method("list", name, pos)),
        })
    }

    fn date_method(&mut self, d: Date, name: &str, args: &[Expr], pos: u32) -> R {
        check_method("date", name, pos)?;
        Ok(match name {
            "date" => Value::Date(Date::day(d.at.date())),
            "time" => {
                self.alloc_text(8, pos)?;
                Value::str(d.at.format("%H:%M:%S").to_string())
            }
            "format" => {
                let f = self.arg(args, 0)?;
                let f = self.text_of(&f, pos)?;
                // A token writes at most 16 bytes a character of it (`x`: 13 digits of
                // milliseconds); a format longer than Moment's bound is refused unwritten.
                self.alloc_text(
                    (f.len().min(moment::MAX_FORMAT_BYTES + 1) as u64).saturating_mul(16),
                    pos,
                )?;
                // A date without a time formats time tokens as midnight, as Moment does.
                let out = moment::format_datetime(&f, d.at);
                Value::str(out.map_err(|e| EvalError::at(pos, format!("format(): {e}")))?)
            }
            "relative" => {
                self.alloc_text(32, pos)?;
                Value::str(relative(d.at, self.src.now()))
            }
            _ => return Err(no_method("date", name, pos)),
        })
    }
}

/// A part of a replacement as [`crate::obsidian::jsregex::replacement`] writes it.
enum RepPart<'r> {
    /// Text written as it is (`$$` is a `$`).
    Text(&'r str),
    /// `${n}`: group `n` of the match (nothing when the group did not take part).
    Group(usize),
}

/// Bytes of one [`RepPart`].
const PART: u64 = std::mem::size_of::<RepPart<'static>>() as u64;

/// `rep` in parts: text between the `$` references, and the references.
fn replacement_parts(rep: &str) -> Vec<RepPart<'_>> {
    let mut parts = Vec::with_capacity(2 * rep.matches('$').count() + 1);
    let mut rest = rep;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            parts.push(RepPart::Text(&rest[..at]));
        }
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            parts.push(RepPart::Text("$"));
            rest = tail;
        } else if let Some((n, tail)) = after
            .strip_prefix('{')
            .and_then(|x| x.split_once('}'))
            .and_then(|(n, tail)| Some((n.parse::<usize>().ok()?, tail)))
        {
            parts.push(RepPart::Group(n));
            rest = tail;
        } else {
            parts.push(RepPart::Text("$"));
            rest = after;
        }
    }
    if !rest.is_empty() {
        parts.push(RepPart::Text(rest));
    }
    parts
}

/// How deep values may nest (lists, objects and link displays inside one another).
pub const MAX_VALUE_DEPTH: usize = 256;

/// What `unique()` holds for each element of its list at most: three hash buckets (key, list
/// of members, the table's spare room) and its place in the kept list.
pub(in crate::obsidian::bases) const UNIQUE_PER_VALUE: u64 = 512;

fn no_method(ty: &str, name: &str, pos: u32) -> EvalError {
    EvalError::at(pos, format!("a {ty} has no method `{name}()`"))
}

/// The methods of each receiver type, named as its "has no method" error names the type: the
/// one list the dispatch above and [`is_known_method`] read. A link also has the string
/// methods (it is read as its text), a duration `abs` and the number methods. To add a
/// method, add its name here and its arm to the type's match: the dispatch refuses a name this
/// table lacks, and `tests.rs` checks every name here reaches an arm.
pub(in crate::obsidian::bases) const METHODS: &[(&str, &[&str])] = &[
    (
        "string",
        &[
            "contains",
            "containsAll",
            "containsAny",
            "startsWith",
            "endsWith",
            "lower",
            "toLowerCase",
            "upper",
            "toUpperCase",
            "trim",
            "title",
            "reverse",
            "repeat",
            "slice",
            "split",
            "replace",
        ],
    ),
    ("number", &["abs", "ceil", "floor", "round", "toFixed"]),
    (
        "list",
        &[
            "contains",
            "containsAll",
            "containsAny",
            "filter",
            "map",
            "reduce",
            "flat",
            "join",
            "reverse",
            "mean",
            "sum",
            "min",
            "max",
            "slice",
            "sort",
            "unique",
        ],
    ),
    ("date", &["date", "time", "format", "relative"]),
    ("object", &["keys", "values"]),
    ("regular expression", &["matches"]),
    (
        "file",
        &[
            "asLink",
            "hasLink",
            "hasProperty",
            "hasTag",
            "inFolder",
            "linksTo",
        ],
    ),
    ("link", &["asFile", "linksTo"]),
];

/// Does a `ty` (a type named in [`METHODS`]) have the method `name`?
fn has_method(ty: &str, name: &str) -> bool {
    METHODS
        .iter()
        .any(|(t, names)| *t == ty && names.contains(&name))
}

/// `Err` (a "has no method" error) unless a `ty` has the method `name`.
fn check_method(ty: &str, name: &str, pos: u32) -> Result<(), EvalError> {
    if has_method(ty, name) {
        Ok(())
    } else {
        Err(no_method(ty, name, pos))
    }
}

/// Every method name some type has (so `missing.lower()` is empty, not an error).
fn is_known_method(name: &str) -> bool {
    METHODS.iter().any(|(_, names)| names.contains(&name))
}

/// `s` with the first letter of each word upper-cased; `len` is [`title_case_len`] of it.
fn title_case(s: &str, len: usize) -> String {
    let mut out = String::with_capacity(len);
    let mut start = true;
    for c in s.chars() {
        if start && c.is_alphabetic() {
            out.extend(c.to_uppercase());
            start = false;
        } else {
            out.push(c);
            start = c.is_whitespace();
        }
    }
    out
}

/// The length of [`title_case`] of `s`, counted without writing it.
fn title_case_len(s: &str) -> usize {
    let mut len = 0;
    let mut start = true;
    for c in s.chars() {
        if start && c.is_alphabetic() {
            len += c.to_uppercase().map(char::len_utf8).sum::<usize>();
            start = false;
        } else {
            len += c.len_utf8();
            start = c.is_whitespace();
        }
    }
    len
}

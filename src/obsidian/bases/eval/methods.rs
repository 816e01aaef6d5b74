//! Methods, by the receiver's type: `recv.name(args)` on any value, then on strings, numbers,
//! lists, dates, files, links, objects, regular expressions and durations. Regex `split` and
//! `replace` charge the budget per search.

use std::sync::Arc;

use super::{BYTES_PER_STEP, EvalError, Evaluator, MAX_LIST_LEN, MAX_STRING_BYTES, R, relative};
use crate::obsidian::bases::expr::Expr;
use crate::obsidian::bases::value::{self, Date, Duration, FileRef, Value, number_text};
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
                let want = self.text(&t).to_lowercase();
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
            "toString" => return Ok(Value::str(self.text(&recv))),
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
            Value::Object(o) => match name {
                "keys" => Ok(Value::List(Arc::new(
                    o.iter().map(|(k, _)| Value::String(k.clone())).collect(),
                ))),
                "values" => Ok(Value::List(Arc::new(
                    o.iter().map(|(_, v)| v.clone()).collect(),
                ))),
                _ => Err(no_method("object", name, pos)),
            },
            Value::Regex(p) => match name {
                "matches" => {
                    let v = self.arg(args, 0)?;
                    Ok(Value::Bool(p.regex.is_match(&self.text(&v))))
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
                let s: Arc<str> = self.text(&Value::Link(l)).into();
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
                Ok(self.file_link(f, display))
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
                Ok(Value::Bool(self.src.property(f, &self.text(&k)).is_some()))
            }
            "hasTag" => {
                for v in self.args(args)? {
                    let items = match v {
                        Value::List(l) => l.to_vec(),
                        other => vec![other],
                    };
                    for t in items {
                        let tag = self.text(&t);
                        if self.row_has_tag(f, &tag) {
                            return Ok(Value::Bool(true));
                        }
                    }
                }
                Ok(Value::Bool(false))
            }
            "inFolder" => {
                let v = self.arg(args, 0)?;
                let folder = self.text(&v);
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

    /// Counts one regex search (and the bytes it passed over) in a loop over the matches of
    /// `split` or `replace`, and reads the clock: the regex crate bounds each search, not an
    /// iteration (a pattern matching the empty string everywhere may read the rest of the string
    /// at every position), so the deadline is checked between searches.
    fn charge_search(&mut self, bytes: usize, pos: u32) -> Result<(), EvalError> {
        self.charge(1 + bytes as u64 / BYTES_PER_STEP, pos)?;
        self.budget.check().map_err(|e| super::spent(e, pos))
    }

    /// `s.split(re)`, at most `limit` parts, within the budget.
    fn split_regex(&mut self, s: &str, re: &regex::Regex, limit: usize, pos: u32) -> R {
        let mut parts = Vec::new();
        let mut last = 0;
        for m in re.find_iter(s) {
            self.charge_search(m.end().saturating_sub(last), pos)?;
            if parts.len() >= limit {
                break;
            }
            parts.push(Value::str(&s[last..m.start()]));
            last = m.end();
        }
        if parts.len() < limit {
            parts.push(Value::str(&s[last..]));
        }
        Ok(Value::List(Arc::new(parts)))
    }

    /// `s.replace(re, rep)` (every match when `global`), within the budget and the string cap.
    fn replace_regex(
        &mut self,
        s: &str,
        re: &regex::Regex,
        rep: &str,
        global: bool,
        pos: u32,
    ) -> Result<String, EvalError> {
        let mut out = String::new();
        let mut last = 0;
        if !rep.contains('$') {
            // Nothing to expand: no capture groups needed.
            for m in re.find_iter(s) {
                self.charge_search(m.end().saturating_sub(last) + rep.len(), pos)?;
                out.push_str(&s[last..m.start()]);
                out.push_str(rep);
                last = m.end();
                if out.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                if !global {
                    break;
                }
            }
            out.push_str(&s[last..]);
            return Ok(out);
        }
        for caps in re.captures_iter(s) {
            let Some(m) = caps.get(0) else { continue };
            self.charge_search(m.end().saturating_sub(last) + rep.len(), pos)?;
            out.push_str(&s[last..m.start()]);
            caps.expand(rep, &mut out);
            last = m.end();
            if out.len() > MAX_STRING_BYTES {
                return Err(EvalError::at(pos, "string too long"));
            }
            if !global {
                break;
            }
        }
        out.push_str(&s[last..]);
        Ok(out)
    }

    fn string_method(&mut self, s: &Arc<str>, name: &str, args: &[Expr], pos: u32) -> R {
        // Every string method reads its string (most in full): charged by size.
        self.charge(s.len() as u64 / BYTES_PER_STEP, pos)?;
        let texts = |ev: &mut Self| -> Result<Vec<String>, EvalError> {
            let vals = ev.args(args)?;
            Ok(vals.iter().map(|v| ev.text(v)).collect())
        };
        check_method("string", name, pos)?;
        Ok(match name {
            "contains" => Value::Bool(texts(self)?.iter().take(1).all(|t| s.contains(&**t))),
            "containsAll" => Value::Bool(texts(self)?.iter().all(|t| s.contains(&**t))),
            "containsAny" => Value::Bool(texts(self)?.iter().any(|t| s.contains(&**t))),
            "startsWith" => Value::Bool(texts(self)?.first().is_some_and(|t| s.starts_with(&**t))),
            "endsWith" => Value::Bool(texts(self)?.first().is_some_and(|t| s.ends_with(&**t))),
            "lower" | "toLowerCase" => Value::str(s.to_lowercase()),
            "upper" | "toUpperCase" => Value::str(s.to_uppercase()),
            "trim" => Value::str(s.trim()),
            "title" => Value::str(title_case(s)),
            "reverse" => Value::str(s.chars().rev().collect::<String>()),
            "repeat" => {
                let n = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=1e9).contains(&n) {
                    return Err(EvalError::at(pos, "repeat() count must be 0 or more"));
                }
                let n = n as usize;
                if s.len().saturating_mul(n) > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Value::str(s.repeat(n))
            }
            "slice" => {
                let chars: Vec<char> = s.chars().collect();
                let (a, b) = self.slice_bounds(args, chars.len())?;
                Value::str(chars[a..b].iter().collect::<String>())
            }
            "split" => {
                let sep = self.arg(args, 0)?;
                let n = match args.get(1) {
                    Some(a) => self.eval(a)?.as_number().map(|n| n.max(0.0) as usize),
                    None => None,
                };
                let limit = n.unwrap_or(MAX_LIST_LEN).min(MAX_LIST_LEN);
                let parts: Vec<Value> = match &sep {
                    Value::Regex(p) => return self.split_regex(s, &p.regex, limit, pos),
                    other => {
                        let sep = self.text(other);
                        if sep.is_empty() {
                            s.chars()
                                .take(limit)
                                .map(|c| Value::str(c.to_string()))
                                .collect()
                        } else {
                            s.split(&*sep).take(limit).map(Value::str).collect()
                        }
                    }
                };
                Value::List(Arc::new(parts))
            }
            "replace" => {
                let pat = self.arg(args, 0)?;
                let rep = self.arg(args, 1)?;
                let rep = self.text(&rep);
                let out = match &pat {
                    Value::Regex(p) => {
                        let rep = crate::obsidian::jsregex::replacement(&rep);
                        self.replace_regex(s, &p.regex, &rep, p.global, pos)?
                    }
                    other => {
                        let from = self.text(other);
                        if from.is_empty() {
                            s.to_string()
                        } else {
                            s.replace(&*from, &rep)
                        }
                    }
                };
                if out.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Value::str(out)
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
                let mut out = Vec::new();
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
                }
                acc
            }
            "flat" => {
                let mut out = Vec::new();
                for x in l.iter() {
                    match x {
                        Value::List(inner) => out.extend(inner.iter().cloned()),
                        other => out.push(other.clone()),
                    }
                    if out.len() > MAX_LIST_LEN {
                        return Err(EvalError::at(pos, "list too long"));
                    }
                }
                Value::List(Arc::new(out))
            }
            "join" => {
                let sep = match args.first() {
                    Some(a) => {
                        let v = self.eval(a)?;
                        self.text(&v)
                    }
                    None => ",".to_owned(),
                };
                let parts: Vec<String> = l.iter().map(|v| self.text(v)).collect();
                let s = parts.join(&sep);
                if s.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Value::str(s)
            }
            "reverse" => Value::List(Arc::new(l.iter().rev().cloned().collect())),
            // Not on the Functions page, but the Bases syntax page's custom summary uses
            // `values.mean()`: the numbers of the list (others skipped).
            "mean" | "sum" | "min" | "max" => {
                let nums: Vec<f64> = l
                    .iter()
                    .filter(|v| matches!(v, Value::Number(_)))
                    .filter_map(Value::as_number)
                    .collect();
                let r = match name {
                    "sum" => Some(nums.iter().sum()),
                    "mean" => {
                        (!nums.is_empty()).then(|| nums.iter().sum::<f64>() / nums.len() as f64)
                    }
                    "min" => nums.iter().copied().reduce(f64::min),
                    _ => nums.iter().copied().reduce(f64::max),
                };
                r.map_or(Value::Null, Value::Number)
            }
            "slice" => {
                let (a, b) = self.slice_bounds(args, l.len())?;
                Value::List(Arc::new(l[a..b].to_vec()))
            }
            "sort" => {
                let mut out = l.to_vec();
                let names = |f: FileRef| self.file_name(f);
                out.sort_by(|a, b| a.sort_cmp(b, false, &names));
                Value::List(Arc::new(out))
            }
            "unique" => {
                self.charge(l.len() as u64, pos)?;
                let kept = value::distinct(l);
                Value::List(Arc::new(kept.into_iter().map(|i| l[i].clone()).collect()))
            }
            _ => return Err(no_method("list", name, pos)),
        })
    }

    fn date_method(&mut self, d: Date, name: &str, args: &[Expr], pos: u32) -> R {
        check_method("date", name, pos)?;
        Ok(match name {
            "date" => Value::Date(Date::day(d.at.date())),
            "time" => Value::str(d.at.format("%H:%M:%S").to_string()),
            "format" => {
                let f = self.arg(args, 0)?;
                let f = self.text(&f);
                // A date without a time formats time tokens as midnight, as Moment does.
                let out = moment::format_datetime(&f, d.at);
                Value::str(out.map_err(|e| EvalError::at(pos, format!("format(): {e}")))?)
            }
            "relative" => Value::str(relative(d.at, self.src.now())),
            _ => return Err(no_method("date", name, pos)),
        })
    }
}

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

fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
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

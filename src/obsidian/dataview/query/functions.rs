//! Dataview's functions (reference/functions.md).

use std::cmp::Ordering;

use super::ast::{BinOp, Expr, ExprKind};
use super::eval::{
    DvSource, Ev, EvalError, MAX_REGEX_BYTES, Row, SLOT, dv_date, heap_size, text_bound, truthy,
    type_name,
};
use crate::obsidian::dataview::value::{Duration, date as date_at, duration as duration_at};
use crate::obsidian::dataview::{Link, Value};

type R = Result<Value, EvalError>;

/// Most distinct patterns one evaluation keeps compiled.
const KEPT_PATTERNS: usize = 64;

/// The pattern `pat` compiled once per evaluation (a `regextest` over every page compiles it
/// once); each new pattern charges what it may hold before it compiles.
fn regex<S: DvSource + ?Sized>(
    ev: &Ev<'_, S>,
    pat: &str,
    pos: u32,
) -> Result<regex::Regex, EvalError> {
    if let Some(r) = ev.regexes.borrow().get(pat) {
        return Ok(r.clone());
    }
    let cost = crate::obsidian::jsregex::footprint(MAX_REGEX_BYTES);
    ev.alloc(cost, pos)?;
    let r = crate::obsidian::jsregex::compile(pat, "", MAX_REGEX_BYTES)
        .map(|r| r.regex)
        .map_err(|e| {
            // Nothing was kept.
            ev.ctx.budget.release(cost);
            EvalError::new(e.to_string(), pos)
        })?;
    let mut kept = ev.regexes.borrow_mut();
    if kept.len() < KEPT_PATTERNS {
        kept.insert(pat.to_owned(), r.clone());
    }
    Ok(r)
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// Applies `f` to each element when `v` is a list (Dataview's vectorised functions).
fn vectorize(v: &Value, f: &mut dyn FnMut(&Value) -> R) -> R {
    match v {
        Value::List(items) => Ok(Value::List(
            items.iter().map(&mut *f).collect::<Result<_, _>>()?,
        )),
        other => f(other),
    }
}

/// Calls the function `name`.
pub(crate) fn call<S: DvSource + ?Sized>(
    ev: &Ev<'_, S>,
    name: &str,
    args: &[Expr],
    row: &Row,
    pos: u32,
) -> R {
    // Functions taking lambdas see their argument expressions.
    let lambda_at = |i: usize| {
        args.get(i)
            .filter(|e| matches!(e.kind, ExprKind::Lambda(..)))
    };
    // `length(rows)`, the commonest aggregate, counts a group's rows without building them.
    if name.eq_ignore_ascii_case("length")
        && let [arg] = args
        && matches!(&arg.kind, ExprKind::Field(f) if f == "rows")
        && let Some(m) = &row.members
    {
        return Ok(Value::Number(m.len() as f64));
    }
    let mut vals = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        if lambda_at(i).is_some() {
            vals.push(Value::Null);
        } else {
            let v = ev.eval(a, row)?;
            // The function works on copies of its arguments: each is charged once.
            ev.alloc_value(&v, pos)?;
            vals.push(v);
        }
    }
    let arg = |i: usize| vals.get(i).cloned().unwrap_or(Value::Null);
    let text = |v: &Value| ev.to_text(v);
    let bad = |what: &str| Err(EvalError::new(format!("{name}(): {what}"), pos));
    let list_of = |v: Value| match v {
        Value::List(l) => l,
        Value::Null => Vec::new(),
        other => vec![other],
    };
    // A list argument, or all the arguments (`min(1, 2, 3)`).
    let many = || {
        if vals.len() == 1 {
            list_of(arg(0))
        } else {
            vals.clone()
        }
    };
    let charge = |n: usize| ev.charge(n as u64, pos);
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "contains" | "icontains" | "econtains" => {
            let mode = lower.as_str();
            fn has(
                ev_cmp: &dyn Fn(&Value, &Value) -> bool,
                hay: &Value,
                needle: &Value,
                mode: &str,
            ) -> bool {
                match (hay, needle) {
                    (Value::Text(h), Value::Text(n)) => match mode {
                        "icontains" => h.to_lowercase().contains(&n.to_lowercase()),
                        _ => h.contains(n.as_str()),
                    },
                    (Value::List(items), n) => items.iter().any(|i| {
                        if mode == "econtains" {
                            ev_cmp(i, n)
                        } else {
                            ev_cmp(i, n) || has(ev_cmp, i, n, mode)
                        }
                    }),
                    (Value::Object(o), Value::Text(k)) => o
                        .iter()
                        .any(|(key, v)| key == k && !matches!(v, Value::Null)),
                    (h, n) => ev_cmp(h, n),
                }
            }
            let hay = arg(0);
            if let Value::List(l) = &hay {
                charge(l.len())?;
            }
            let eq = |a: &Value, b: &Value| match (a, b) {
                (Value::Text(x), Value::Text(y)) if mode == "icontains" => {
                    x.to_lowercase() == y.to_lowercase()
                }
                _ => ev.compare(a, b) == Ordering::Equal,
            };
            Ok(Value::Bool(has(&eq, &hay, &arg(1), mode)))
        }
        "containsword" => {
            let words = |s: &str| {
                s.split(|c: char| !c.is_alphanumeric())
                    .map(str::to_lowercase)
                    .collect::<Vec<_>>()
            };
            let n = text(&arg(1)).to_lowercase();
            Ok(match arg(0) {
                Value::List(l) => Value::List(
                    l.iter()
                        .map(|i| Value::Bool(words(&text(i)).contains(&n)))
                        .collect(),
                ),
                v => Value::Bool(words(&text(&v)).contains(&n)),
            })
        }
        "length" => Ok(match arg(0) {
            Value::List(l) => Value::Number(l.len() as f64),
            Value::Object(o) => Value::Number(o.len() as f64),
            Value::Text(s) => Value::Number(s.encode_utf16().count() as f64),
            Value::Null => Value::Number(0.0),
            _ => Value::Number(0.0),
        }),
        "default" => {
            let d = arg(1);
            vectorize(&arg(0), &mut |v| {
                Ok(if matches!(v, Value::Null) {
                    d.clone()
                } else {
                    v.clone()
                })
            })
        }
        "ldefault" => Ok(if matches!(arg(0), Value::Null) {
            arg(1)
        } else {
            arg(0)
        }),
        "choice" => Ok(if truthy(&arg(0)) { arg(1) } else { arg(2) }),
        "list" | "array" => {
            ev.alloc(
                vals.iter().map(heap_size).sum::<u64>() + vals.len() as u64 * SLOT,
                pos,
            )?;
            Ok(Value::List(vals.clone()))
        }
        "object" => {
            if vals.len() % 2 != 0 {
                return bad("expects pairs of key and value");
            }
            let mut out: Vec<(String, Value)> = Vec::new();
            for pair in vals.chunks(2) {
                let Value::Text(k) = &pair[0] else {
                    return bad("keys must be strings");
                };
                out.retain(|(key, _)| key != k);
                out.push((k.clone(), pair[1].clone()));
            }
            Ok(Value::Object(out))
        }
        "typeof" => Ok(Value::Text(
            match type_name(&arg(0)) {
                "boolean" => "boolean",
                t => t,
            }
            .to_owned(),
        )),
        "number" => vectorize(&arg(0), &mut |v| {
            Ok(match v {
                Value::Number(n) => Value::Number(*n),
                Value::Text(s) => {
                    let b = s.as_bytes();
                    let start = s.find(|c: char| c == '-' || c.is_ascii_digit());
                    match start {
                        Some(i) => {
                            let mut j = i + 1;
                            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
                                j += 1;
                            }
                            s[i..j]
                                .trim_end_matches('.')
                                .parse()
                                .map_or(Value::Null, Value::Number)
                        }
                        None => Value::Null,
                    }
                }
                _ => Value::Null,
            })
        }),
        "string" => vectorize(&arg(0), &mut |v| Ok(Value::Text(ev.text_of(v, pos)?))),
        "link" => {
            let display = match arg(1) {
                Value::Text(d) => Some(d),
                _ => None,
            };
            vectorize(&arg(0), &mut |v| {
                Ok(match v {
                    Value::Text(p) => Value::Link(Link {
                        path: p.clone(),
                        subpath: None,
                        display: display.clone(),
                        embed: false,
                    }),
                    Value::Link(l) => Value::Link(Link {
                        display: display.clone().or_else(|| l.display.clone()),
                        ..l.clone()
                    }),
                    _ => Value::Null,
                })
            })
        }
        "embed" => vectorize(&arg(0), &mut |v| {
            Ok(match v {
                Value::Link(l) => Value::Link(Link {
                    embed: vals.get(1).is_none_or(truthy),
                    ..l.clone()
                }),
                _ => Value::Null,
            })
        }),
        "elink" => Ok(Value::Text(match arg(1) {
            Value::Text(d) => format!("[{d}]({})", text(&arg(0))),
            _ => text(&arg(0)),
        })),
        "date" => {
            if let (Value::Text(s), Value::Text(f)) = (arg(0), arg(1)) {
                return Ok(parse_with_format(&s, &f).map_or(Value::Null, |at| dv_date(at, true)));
            }
            vectorize(&arg(0), &mut |v| {
                Ok(match v {
                    Value::Date(d) => Value::Date(d.clone()),
                    Value::Text(s) => match date_at(s.trim(), 0) {
                        Some((d, end)) if end == s.trim().len() => d,
                        _ => Value::Null,
                    },
                    Value::Link(l) => match ev.resolve_link(l) {
                        Some(p) => ev.file_field(p, "day", pos)?,
                        None => Value::Null,
                    },
                    _ => Value::Null,
                })
            })
        }
        "dur" => vectorize(&arg(0), &mut |v| {
            Ok(match v {
                Value::Duration(d) => Value::Duration(*d),
                Value::Text(s) => match duration_at(s.trim(), 0) {
                    Some((d, end)) if end == s.trim().len() => d,
                    _ => Value::Null,
                },
                _ => Value::Null,
            })
        }),
        "striptime" => vectorize(&arg(0), &mut |v| {
            Ok(match v {
                Value::Date(d) => dv_date(d.date.at.date().and_time(chrono::NaiveTime::MIN), false),
                _ => Value::Null,
            })
        }),
        "dateformat" => {
            let f = text(&arg(1));
            vectorize(&arg(0), &mut |v| {
                Ok(match v {
                    Value::Date(d) => {
                        // A token writes at most a month's or a weekday's name.
                        ev.alloc((f.len() as u64).saturating_mul(16), pos)?;
                        Value::Text(super::render::format_date(d, &f))
                    }
                    _ => Value::Null,
                })
            })
        }
        "durationformat" => {
            let f = text(&arg(1));
            ev.alloc((f.len() as u64).saturating_mul(24), pos)?;
            Ok(match arg(0) {
                Value::Duration(d) => Value::Text(format_duration(&d, &f)),
                _ => Value::Null,
            })
        }
        "localtime" => Ok(arg(0)),
        "round" | "trunc" | "floor" | "ceil" => {
            let digits = num(&arg(1)).unwrap_or(0.0).clamp(0.0, 15.0);
            vectorize(&arg(0), &mut |v| {
                Ok(match v {
                    Value::Number(n) => Value::Number(match lower.as_str() {
                        "round" => {
                            let m = 10f64.powi(digits as i32);
                            // JavaScript's Math.round: halves go up.
                            (n * m + 0.5).floor() / m
                        }
                        "trunc" => n.trunc(),
                        "floor" => n.floor(),
                        _ => n.ceil(),
                    }),
                    _ => Value::Null,
                })
            })
        }
        "min" | "max" => {
            let items = many();
            charge(items.len())?;
            let want = if lower == "min" {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let mut best: Option<Value> = None;
            for v in items {
                if best.as_ref().is_none_or(|b| ev.compare(&v, b) == want) {
                    best = Some(v);
                }
            }
            Ok(best.unwrap_or(Value::Null))
        }
        "minby" | "maxby" => {
            let Some(f) = lambda_at(1) else {
                return bad("expects a lambda");
            };
            let items = list_of(arg(0));
            let want = if lower == "minby" {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let mut best: Option<(Value, Value)> = None;
            for v in items {
                let k = ev.call_lambda(f, vec![v.clone()], row)?;
                if best
                    .as_ref()
                    .is_none_or(|(bk, _)| ev.compare(&k, bk) == want)
                {
                    best = Some((k, v));
                }
            }
            Ok(best.map_or(Value::Null, |(_, v)| v))
        }
        "sum" | "product" | "average" => {
            let items = list_of(arg(0));
            charge(items.len())?;
            if items.is_empty() {
                return Ok(Value::Null);
            }
            let n = items.len();
            let op = if lower == "product" {
                BinOp::Mul
            } else {
                BinOp::Add
            };
            let mut it = items.into_iter();
            let mut acc = it.next().unwrap_or(Value::Null);
            for v in it {
                acc = ev.binary(op, &acc, &v, pos)?;
            }
            if lower == "average" {
                acc = ev.binary(BinOp::Div, &acc, &Value::Number(n as f64), pos)?;
            }
            Ok(acc)
        }
        "reduce" => {
            let items = list_of(arg(0));
            charge(items.len())?;
            let op = match arg(1) {
                Value::Text(o) => match o.as_str() {
                    "+" => BinOp::Add,
                    "-" => BinOp::Sub,
                    "*" => BinOp::Mul,
                    "/" => BinOp::Div,
                    "&" => BinOp::And,
                    "|" => BinOp::Or,
                    _ => return bad("unknown operator"),
                },
                _ => return bad("expects an operator like \"+\""),
            };
            let mut it = items.into_iter();
            let mut acc = it.next().unwrap_or(Value::Null);
            for v in it {
                acc = ev.binary(op, &acc, &v, pos)?;
            }
            Ok(acc)
        }
        "all" | "any" | "none" => {
            let (items, f) = match lambda_at(1) {
                Some(f) => (list_of(arg(0)), Some(f)),
                None => (many(), None),
            };
            charge(items.len())?;
            let mut results = Vec::with_capacity(items.len());
            for v in items {
                results.push(match f {
                    Some(f) => truthy(&ev.call_lambda(f, vec![v], row)?),
                    None => truthy(&v),
                });
            }
            Ok(Value::Bool(match lower.as_str() {
                "all" => results.iter().all(|b| *b),
                "any" => results.iter().any(|b| *b),
                _ => !results.iter().any(|b| *b),
            }))
        }
        "join" => {
            let sep = match arg(1) {
                Value::Null => ", ".to_owned(),
                v => text(&v),
            };
            Ok(Value::Text(match arg(0) {
                Value::List(l) => {
                    charge(l.len())?;
                    // The joined text's length, charged before any of it is written.
                    let parts: u64 = l.iter().map(text_bound).sum();
                    let seps = (sep.len() as u64).saturating_mul(l.len() as u64);
                    let total = parts.saturating_add(seps);
                    ev.check_len(usize::try_from(total).unwrap_or(usize::MAX), pos)?;
                    ev.alloc(total, pos)?;
                    l.iter().map(text).collect::<Vec<_>>().join(&sep)
                }
                v => ev.text_of(&v, pos)?,
            }))
        }
        "filter" | "map" => {
            let Some(f) = lambda_at(1) else {
                return bad("expects a lambda `(x) => ...`");
            };
            let items = list_of(arg(0));
            charge(items.len())?;
            ev.alloc(items.len() as u64 * SLOT, pos)?;
            let mut out = Vec::with_capacity(items.len());
            for v in items {
                ev.alloc_value(&v, pos)?;
                let r = ev.call_lambda(f, vec![v.clone()], row)?;
                if lower == "map" {
                    out.push(r);
                } else if truthy(&r) {
                    out.push(v);
                }
            }
            Ok(Value::List(out))
        }
        "unique" => {
            // Sorted, then the first of each run of equal values kept, in the list's order.
            let items = list_of(arg(0));
            let n = items.len() as u64;
            ev.charge(n * (64 - n.leading_zeros() as u64), pos)?;
            let mut idx: Vec<usize> = (0..items.len()).collect();
            idx.sort_by(|&a, &b| ev.compare(&items[a], &items[b]).then(a.cmp(&b)));
            let mut keep = vec![false; items.len()];
            for (k, &i) in idx.iter().enumerate() {
                if k == 0 || ev.compare(&items[idx[k - 1]], &items[i]) != Ordering::Equal {
                    keep[i] = true;
                }
            }
            Ok(Value::List(
                items
                    .into_iter()
                    .zip(keep)
                    .filter(|(_, k)| *k)
                    .map(|(v, _)| v)
                    .collect(),
            ))
        }
        "sort" => {
            let mut items = list_of(arg(0));
            let n = items.len() as u64;
            ev.charge(n * (64 - n.leading_zeros() as u64), pos)?;
            match lambda_at(1) {
                Some(f) => {
                    let mut keyed = Vec::with_capacity(items.len());
                    for v in items {
                        keyed.push((ev.call_lambda(f, vec![v.clone()], row)?, v));
                    }
                    keyed.sort_by(|a, b| ev.compare(&a.0, &b.0));
                    items = keyed.into_iter().map(|(_, v)| v).collect();
                }
                None => items.sort_by(|a, b| ev.compare(a, b)),
            }
            Ok(Value::List(items))
        }
        "reverse" => {
            let mut items = list_of(arg(0));
            items.reverse();
            Ok(Value::List(items))
        }
        "flat" => {
            let depth = num(&arg(1)).unwrap_or(1.0).clamp(0.0, 64.0) as usize;
            fn flat(v: Vec<Value>, depth: usize, out: &mut Vec<Value>) {
                for i in v {
                    match i {
                        Value::List(l) if depth > 0 => flat(l, depth - 1, out),
                        other => out.push(other),
                    }
                }
            }
            // The flattened list's slots, counted before it is built.
            fn count(v: &[Value], depth: usize) -> u64 {
                v.iter()
                    .map(|i| match i {
                        Value::List(l) if depth > 0 => count(l, depth - 1),
                        _ => 1,
                    })
                    .sum()
            }
            let items = list_of(arg(0));
            let n = count(&items, depth);
            charge(n as usize)?;
            ev.check_count(usize::try_from(n).unwrap_or(usize::MAX), pos)?;
            ev.alloc(n * SLOT, pos)?;
            let mut out = Vec::new();
            flat(items, depth, &mut out);
            Ok(Value::List(out))
        }
        "slice" => {
            let items = list_of(arg(0));
            let len = items.len() as f64;
            let at = |v: Value, d: f64| {
                let n = num(&v).unwrap_or(d).trunc();
                (if n < 0.0 {
                    (len + n).max(0.0)
                } else {
                    n.min(len)
                }) as usize
            };
            let s = at(arg(1), 0.0);
            let e = at(arg(2), len);
            Ok(Value::List(if s < e {
                items[s..e].to_vec()
            } else {
                Vec::new()
            }))
        }
        "nonnull" => Ok(Value::List(
            many()
                .into_iter()
                .filter(|v| !matches!(v, Value::Null))
                .collect(),
        )),
        "firstvalue" => Ok(list_of(arg(0))
            .into_iter()
            .find(|v| !matches!(v, Value::Null))
            .unwrap_or(Value::Null)),
        "extract" => {
            let Value::Object(o) = arg(0) else {
                return bad("expects an object");
            };
            let mut out = Vec::new();
            for k in &vals[1..] {
                let k = text(k);
                if let Some((_, v)) = o.iter().find(|(key, _)| *key == k) {
                    out.push((k, v.clone()));
                }
            }
            Ok(Value::Object(out))
        }
        "regextest" | "regexmatch" => {
            let p = text(&arg(0));
            let pat = if lower == "regexmatch" {
                format!("^(?:{p})$")
            } else {
                p
            };
            let re = regex(ev, &pat, pos)?;
            vectorize(&arg(1), &mut |v| {
                let s = text(v);
                charge(s.len() / 64)?;
                Ok(Value::Bool(re.is_match(&s)))
            })
        }
        "regexreplace" => {
            let re = regex(ev, &text(&arg(1)), pos)?;
            let rep = crate::obsidian::jsregex::replacement(&text(&arg(2)));
            // Each `$` reference in the replacement writes at most the match it is in.
            let refs = rep.matches('$').count();
            vectorize(&arg(0), &mut |v| {
                let s = text(v);
                charge(s.len() / 64)?;
                let mut total = s.len();
                for m in re.find_iter(&s) {
                    total = total
                        .saturating_add(rep.len().saturating_add(refs.saturating_mul(m.len())));
                    if total > super::eval::MAX_VALUE_LEN {
                        break;
                    }
                }
                ev.check_len(total, pos)?;
                Ok(Value::Text(re.replace_all(&s, rep.as_str()).into_owned()))
            })
        }
        "replace" => {
            let (pat, rep) = (text(&arg(1)), text(&arg(2)));
            vectorize(&arg(0), &mut |v| {
                let s = text(v);
                if pat.is_empty() {
                    return Ok(Value::Text(s));
                }
                // The result's length, from the number of matches, before it is built.
                let n = s.matches(pat.as_str()).count();
                let len = (s.len() - n * pat.len()).saturating_add(n.saturating_mul(rep.len()));
                charge(s.len() / 64 + n)?;
                ev.check_len(len, pos)?;
                Ok(Value::Text(s.replace(&pat, &rep)))
            })
        }
        "lower" | "upper" => vectorize(&arg(0), &mut |v| {
            Ok(match v {
                Value::Text(s) => {
                    // A character's case can take up to three times its bytes.
                    ev.alloc(s.len() as u64 * 3, pos)?;
                    Value::Text(if lower == "lower" {
                        s.to_lowercase()
                    } else {
                        s.to_uppercase()
                    })
                }
                other => other.clone(),
            })
        }),
        "split" => {
            let s = text(&arg(0));
            let re = regex(ev, &text(&arg(1)), pos)?;
            let limit = num(&arg(2)).map(|n| n.max(0.0) as usize);
            // The parts are counted first, and the list and every piece's text charged before
            // the list is built: at most the whole text once per group of the pattern.
            let mut count = 1usize;
            for (i, m) in re.find_iter(&s).enumerate() {
                if !(m.end() == 0 && m.start() == 0) {
                    count = count.saturating_add(re.captures_len());
                }
                if (i + 1).is_multiple_of(1024) {
                    charge(1024)?;
                }
            }
            ev.check_count(count, pos)?;
            ev.alloc(
                count as u64 * SLOT + s.len() as u64 * re.captures_len() as u64,
                pos,
            )?;
            let mut parts: Vec<Value> = Vec::with_capacity(count);
            let mut last = 0;
            let part = |parts: &mut Vec<Value>, piece: &str| -> Result<(), EvalError> {
                parts.push(Value::Text(piece.to_owned()));
                Ok(())
            };
            if re.captures_len() == 1 {
                for m in re.find_iter(&s) {
                    if m.end() == 0 && m.start() == 0 {
                        continue;
                    }
                    part(&mut parts, &s[last..m.start()])?;
                    last = m.end();
                    charge(1)?;
                }
            } else {
                let mut caps = re.capture_locations();
                let mut at = 0;
                while at <= s.len() {
                    charge(1)?;
                    let Some(m) = re.captures_read_at(&mut caps, &s, at) else {
                        break;
                    };
                    // The next search starts past an empty match.
                    at = if m.end() == m.start() {
                        s[m.end()..]
                            .chars()
                            .next()
                            .map_or(s.len() + 1, |c| m.end() + c.len_utf8())
                    } else {
                        m.end()
                    };
                    if m.end() == 0 && m.start() == 0 {
                        continue;
                    }
                    part(&mut parts, &s[last..m.start()])?;
                    for g in 1..caps.len() {
                        if let Some((a, b)) = caps.get(g) {
                            part(&mut parts, &s[a..b])?;
                        }
                    }
                    last = m.end();
                }
            }
            part(&mut parts, &s[last..])?;
            if let Some(l) = limit {
                parts.truncate(l);
            }
            Ok(Value::List(parts))
        }
        "startswith" | "endswith" => {
            let (s, p) = (text(&arg(0)), text(&arg(1)));
            Ok(Value::Bool(if lower == "startswith" {
                s.starts_with(&p)
            } else {
                s.ends_with(&p)
            }))
        }
        "padleft" | "padright" => {
            let s = text(&arg(0));
            let width = num(&arg(1)).unwrap_or(0.0).clamp(0.0, 100_000.0) as usize;
            let pad = match arg(2) {
                Value::Null => " ".to_owned(),
                v => text(&v),
            };
            let have = s.chars().count();
            if have >= width || pad.is_empty() {
                return Ok(Value::Text(s));
            }
            ev.check_len(s.len() + (width - have) * 4, pos)?;
            let fill: String = pad.chars().cycle().take(width - have).collect();
            Ok(Value::Text(if lower == "padleft" {
                format!("{fill}{s}")
            } else {
                format!("{s}{fill}")
            }))
        }
        "substring" => {
            let t = text(&arg(0));
            ev.alloc(t.len() as u64 * 5, pos)?;
            let chars: Vec<char> = t.chars().collect();
            let len = chars.len() as f64;
            let at = |v: Value, d: f64| num(&v).unwrap_or(d).clamp(0.0, len) as usize;
            let (mut s, mut e) = (at(arg(1), 0.0), at(arg(2), len));
            if s > e {
                std::mem::swap(&mut s, &mut e);
            }
            Ok(Value::Text(chars[s..e].iter().collect()))
        }
        "truncate" => {
            let s = text(&arg(0));
            let n = num(&arg(1)).unwrap_or(0.0).max(0.0) as usize;
            let suffix = match arg(2) {
                Value::Null => "...".to_owned(),
                v => text(&v),
            };
            let count = s.chars().count();
            if count <= n {
                return Ok(Value::Text(s));
            }
            let keep = n.saturating_sub(suffix.chars().count());
            Ok(Value::Text(format!(
                "{}{suffix}",
                s.chars().take(keep).collect::<String>()
            )))
        }
        "meta" => Ok(match arg(0) {
            Value::Link(l) => {
                let (kind, subpath) = match &l.subpath {
                    Some(crate::obsidian::dataview::Subpath::Heading(h)) => {
                        ("header", Value::Text(h.clone()))
                    }
                    Some(crate::obsidian::dataview::Subpath::Block(b)) => {
                        ("block", Value::Text(b.clone()))
                    }
                    None => ("file", Value::Null),
                };
                Value::Object(vec![
                    (
                        "display".into(),
                        l.display.clone().map_or(Value::Null, Value::Text),
                    ),
                    ("embed".into(), Value::Bool(l.embed)),
                    ("path".into(), Value::Text(l.path.clone())),
                    ("subpath".into(), subpath),
                    ("type".into(), Value::Text(kind.into())),
                ])
            }
            _ => return bad("expects a link"),
        }),
        "hash" => {
            let mut h: u64 = 0xcbf29ce484222325;
            for v in &vals {
                for b in text(v).bytes() {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x100000001b3);
                }
            }
            Ok(Value::Number((h % 1_000_000_000) as f64))
        }
        "currencyformat" => {
            let Some(n) = num(&arg(0)) else {
                return Ok(Value::Null);
            };
            let code = match arg(1) {
                Value::Text(c) => c.to_uppercase(),
                _ => "USD".to_owned(),
            };
            Ok(Value::Text(currency(n, &code)))
        }
        "display" => {
            let v = arg(0);
            if let Value::Text(t) = &v {
                charge(t.len() / 16)?;
            }
            Ok(Value::Text(display(ev, &v)))
        }
        _ => Err(EvalError::new(format!("unknown function `{name}`"), pos)),
    }
}

/// A number as money in the en-US locale: `€123,456.79`.
fn currency(n: f64, code: &str) -> String {
    let (symbol, digits) = match code {
        "USD" => ("$", 2),
        "EUR" => ("€", 2),
        "GBP" => ("£", 2),
        "JPY" => ("¥", 0),
        "INR" => ("₹", 2),
        _ => ("", 2),
    };
    let fixed = format!("{:.*}", digits, n.abs());
    let (int, frac) = fixed.split_once('.').unwrap_or((&fixed, ""));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let body = if frac.is_empty() {
        grouped
    } else {
        format!("{grouped}.{frac}")
    };
    let sign = if n < 0.0 { "-" } else { "" };
    if symbol.is_empty() {
        format!("{sign}{code}\u{a0}{body}")
    } else {
        format!("{sign}{symbol}{body}")
    }
}

/// `display()`: text without Markdown formatting, links as their display text.
fn display<S: DvSource + ?Sized>(ev: &Ev<'_, S>, v: &Value) -> String {
    match v {
        Value::Text(s) => strip_markdown(s),
        Value::Link(l) => l.display.clone().unwrap_or_else(|| {
            let base = l.path.rsplit('/').next().unwrap_or(&l.path);
            base.strip_suffix(".md").unwrap_or(base).to_owned()
        }),
        Value::List(items) => items
            .iter()
            .map(|i| display(ev, i))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => ev.to_text(other),
    }
}

/// Removes emphasis marks and turns `[text](url)`, `[[a|b]]` and `[[a]]` into their text.
fn strip_markdown(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        // A link's closing marks are looked for in a window, so text full of `[` stays linear.
        let mut w = rest.len().min(2048);
        while !rest.is_char_boundary(w) {
            w -= 1;
        }
        let window = &rest[..w];
        if let Some(inner) = rest.strip_prefix("[[")
            && let Some(end) = window[2.min(window.len())..].find("]]")
        {
            let link = &inner[..end];
            let shown = match link.split_once('|') {
                Some((_, d)) => d,
                None => link.split('#').next().unwrap_or(link),
            };
            out.push_str(shown.rsplit('/').next().unwrap_or(shown));
            rest = &inner[end + 2..];
            continue;
        }
        if c == '['
            && let Some(close) = window.find("](")
            && let Some(paren) = window[close..].find(')')
        {
            out.push_str(&strip_markdown(&rest[1..close]));
            rest = &rest[close + paren + 1..];
            continue;
        }
        if matches!(c, '*' | '_' | '`' | '~' | '=') {
            rest = &rest[1..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `date(text, format)`: Luxon's `yyyy yy MM M dd d HH H mm m ss s x X` tokens.
fn parse_with_format(s: &str, fmt: &str) -> Option<chrono::NaiveDateTime> {
    if fmt == "x" {
        let ms: i64 = s.trim().parse().ok()?;
        return chrono::DateTime::from_timestamp_millis(ms).map(|d| d.naive_utc());
    }
    if fmt == "X" {
        let secs: i64 = s.trim().parse().ok()?;
        return chrono::DateTime::from_timestamp(secs, 0).map(|d| d.naive_utc());
    }
    let (mut y, mut mo, mut d, mut h, mut mi, mut se) = (1970i32, 1u32, 1u32, 0u32, 0u32, 0u32);
    let f: Vec<char> = fmt.chars().collect();
    let b = s.as_bytes();
    let (mut i, mut j) = (0usize, 0usize);
    while i < f.len() {
        let c = f[i];
        let mut n = 1;
        while f.get(i + n) == Some(&c) {
            n += 1;
        }
        if c.is_ascii_alphabetic() {
            let max = if n >= 2 { n } else { 2 };
            let start = j;
            while j < b.len() && j - start < max && b[j].is_ascii_digit() {
                j += 1;
            }
            let v: u32 = s.get(start..j)?.parse().ok()?;
            match c {
                'y' => y = if n == 2 { 2000 + v as i32 } else { v as i32 },
                'M' | 'L' => mo = v,
                'd' => d = v,
                'H' | 'h' => h = v,
                'm' => mi = v,
                's' => se = v,
                _ => return None,
            }
        } else {
            for _ in 0..n {
                if !s[j..].starts_with(c) {
                    return None;
                }
                j += c.len_utf8();
            }
        }
        i += n;
    }
    (j == s.len()).then_some(())?;
    chrono::NaiveDate::from_ymd_opt(y, mo, d)?.and_hms_opt(h, mi, se)
}

/// `durationformat(dur, "d 'days' h 'hours'")`: Luxon's `y M w d h m s S` tokens, each the
/// remainder after the larger units written before it.
fn format_duration(d: &Duration, fmt: &str) -> String {
    let f: Vec<char> = fmt.chars().collect();
    let mut ms = d.total_ms().abs();
    let mut out = String::new();
    let mut i = 0;
    while i < f.len() {
        let c = f[i];
        if c == '\'' {
            let mut j = i + 1;
            while j < f.len() && f[j] != '\'' {
                out.push(f[j]);
                j += 1;
            }
            i = j + 1;
            continue;
        }
        let mut n = 1;
        while f.get(i + n) == Some(&c) {
            n += 1;
        }
        let unit = match c {
            'y' => Some(365.25 * 86_400_000.0),
            'M' => Some(365.25 * 86_400_000.0 / 12.0),
            'w' => Some(7.0 * 86_400_000.0),
            'd' => Some(86_400_000.0),
            'h' => Some(3_600_000.0),
            'm' => Some(60_000.0),
            's' => Some(1000.0),
            'S' => Some(1.0),
            _ => None,
        };
        match unit {
            Some(u) => {
                let v = (ms / u).floor();
                ms -= v * u;
                out.push_str(&format!("{:0width$}", v as u64, width = n));
            }
            None => out.extend(std::iter::repeat_n(c, n)),
        }
        i += n;
    }
    out
}

//! The global functions of Bases expressions (`if(..)`, `date(..)`, `link(..)`...), by family.

use std::sync::Arc;

use super::{EvalError, Evaluator, R};
use crate::obsidian::bases::expr::Expr;
use crate::obsidian::bases::value::{Date, Duration, LINK, Link, SHARED, Value};

impl Evaluator<'_> {
    /// A global function.
    pub(super) fn call(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        match name {
            "if" | "not" | "empty" | "list" => self.value_function(name, args, pos),
            "now" | "today" | "date" | "duration" => self.date_function(name, args, pos),
            "number" | "max" | "min" | "random" => self.number_function(name, args, pos),
            "link" | "file" => self.link_function(name, args, pos),
            "escapeHTML" | "html" | "image" | "icon" => self.text_function(name, args, pos),
            _ => Err(unknown_function(name, pos)),
        }
    }

    /// `if`, `not`, `empty`, `list`: conditions and the list wrapper.
    fn value_function(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        let arity = |min: usize, max: usize| check_arity(name, args.len(), pos, min, max);
        match name {
            "if" => {
                arity(2, 3)?;
                if self.eval(&args[0])?.truthy() {
                    self.eval(&args[1])
                } else {
                    self.arg(args, 2)
                }
            }
            // From Obsidian's first Bases releases, still found in vaults (kepano's Shows.base:
            // `not(empty(note.last))`).
            "not" => {
                arity(1, 1)?;
                Ok(Value::Bool(!self.eval(&args[0])?.truthy()))
            }
            "empty" => {
                arity(1, 1)?;
                Ok(Value::Bool(self.eval(&args[0])?.is_empty()))
            }
            "list" => {
                arity(1, 1)?;
                Ok(match self.eval(&args[0])? {
                    Value::List(l) => Value::List(l),
                    Value::Null => {
                        self.alloc_list(0, pos)?;
                        Value::List(Arc::new(Vec::new()))
                    }
                    v => {
                        self.alloc_list(1, pos)?;
                        Value::List(Arc::new(vec![v]))
                    }
                })
            }
            _ => Err(unknown_function(name, pos)),
        }
    }

    /// `now`, `today`, `date`, `duration`.
    fn date_function(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        let arity = |min: usize, max: usize| check_arity(name, args.len(), pos, min, max);
        match name {
            "now" => {
                arity(0, 0)?;
                Ok(Value::Date(Date {
                    at: self.src.now(),
                    time: true,
                }))
            }
            "today" => {
                arity(0, 0)?;
                Ok(Value::Date(Date::day(self.src.now().date())))
            }
            "date" => {
                arity(1, 1)?;
                match self.eval(&args[0])? {
                    Value::Date(d) => Ok(Value::Date(d)),
                    Value::Number(n) => chrono::DateTime::from_timestamp_millis(n as i64)
                        .map(|t| {
                            Value::Date(Date {
                                at: t.naive_utc(),
                                time: true,
                            })
                        })
                        .ok_or_else(|| EvalError::at(pos, "date out of range")),
                    Value::Null => Ok(Value::Null),
                    v => {
                        let s = self.text_of(&v, pos)?;
                        Date::parse(&s).map(Value::Date).ok_or_else(|| {
                            EvalError::at(pos, format!("cannot read `{}` as a date", short(&s)))
                        })
                    }
                }
            }
            "duration" => {
                arity(1, 1)?;
                match self.eval(&args[0])? {
                    Value::Duration(d) => Ok(Value::Duration(d)),
                    Value::Number(n) => Ok(Value::Duration(Duration { months: 0, ms: n })),
                    v => {
                        let s = self.text_of(&v, pos)?;
                        Duration::parse(&s).map(Value::Duration).ok_or_else(|| {
                            EvalError::at(pos, format!("cannot read `{}` as a duration", short(&s)))
                        })
                    }
                }
            }
            _ => Err(unknown_function(name, pos)),
        }
    }

    /// `number`, `max`, `min`, `random`.
    fn number_function(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        let arity = |min: usize, max: usize| check_arity(name, args.len(), pos, min, max);
        match name {
            "number" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                if let Value::Null = v {
                    return Ok(Value::Null);
                }
                match v.as_number() {
                    Some(n) => Ok(Value::Number(n)),
                    None => {
                        let s = self.text_of(&v, pos)?;
                        Err(EvalError::at(
                            pos,
                            format!("cannot read `{}` as a number", short(&s)),
                        ))
                    }
                }
            }
            "max" | "min" => {
                let mut best: Option<f64> = None;
                for v in self.args(args)? {
                    let items = match &v {
                        Value::List(l) => &l[..],
                        other => std::slice::from_ref(other),
                    };
                    for item in items {
                        if let Value::Null = item {
                            continue;
                        }
                        let Some(n) = item.as_number() else {
                            return Err(EvalError::at(
                                pos,
                                format!("{name}() takes numbers, got a {}", item.type_name()),
                            ));
                        };
                        best = Some(match best {
                            None => n,
                            Some(b) if name == "max" => b.max(n),
                            Some(b) => b.min(n),
                        });
                    }
                }
                Ok(best.map_or(Value::Null, Value::Number))
            }
            "random" => {
                arity(0, 0)?;
                Ok(Value::Number(pseudo_random(
                    self.budget.used() + self.pending,
                )))
            }
            _ => Err(unknown_function(name, pos)),
        }
    }

    /// `link`, `file`: links and files from values.
    fn link_function(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        let arity = |min: usize, max: usize| check_arity(name, args.len(), pos, min, max);
        match name {
            "link" => {
                arity(1, 2)?;
                let target = self.eval(&args[0])?;
                let display = match args.get(1) {
                    Some(a) => Some(self.eval(a)?),
                    None => None,
                };
                match target {
                    Value::File(f) | Value::Note(f) => self.file_link(f, display, pos),
                    Value::Link(l) => {
                        self.alloc(LINK, pos)?;
                        Ok(Value::Link(Arc::new(Link {
                            target: l.target.clone(),
                            display: display.or_else(|| l.display.clone()),
                            file: l.file,
                        })))
                    }
                    Value::Null => Ok(Value::Null),
                    v => {
                        let s = self.text_of(&v, pos)?;
                        let inner = s
                            .trim()
                            .strip_prefix("[[")
                            .and_then(|x| x.strip_suffix("]]"))
                            .unwrap_or(s.trim());
                        // The target and a display written after `|` are copies of it.
                        self.alloc(LINK + inner.len() as u64 + 2 * SHARED, pos)?;
                        Ok(self.make_link(inner, display, self.row.or(self.this)))
                    }
                }
            }
            "file" => {
                arity(1, 1)?;
                Ok(match self.eval(&args[0])? {
                    Value::File(f) | Value::Note(f) => Value::File(f),
                    Value::Link(l) => l.file.map_or(Value::Null, Value::File),
                    Value::Null => Value::Null,
                    v => {
                        let s = self.text_of(&v, pos)?;
                        // Looked for as written and with `.md` added.
                        self.alloc(s.len() as u64 + 3, pos)?;
                        self.lookup_file(&s).map_or(Value::Null, Value::File)
                    }
                })
            }
            _ => Err(unknown_function(name, pos)),
        }
    }

    /// `escapeHTML`, `html`, `image`, `icon`.
    fn text_function(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        let arity = |min: usize, max: usize| check_arity(name, args.len(), pos, min, max);
        match name {
            "escapeHTML" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                let s = self.text_of(&v, pos)?;
                let len = escaped_len(&s);
                self.alloc_text(len as u64, pos)?;
                Ok(Value::str(escape_html(&s, len)))
            }
            "html" | "image" | "icon" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                let s: Arc<str> = match &v {
                    Value::File(f) | Value::Note(f) if name == "image" => {
                        let path = self.src.path(*f);
                        self.alloc_copy(path.len() as u64, pos)?;
                        path.into()
                    }
                    Value::Link(l) if name == "image" => match l.file {
                        Some(f) => {
                            let path = self.src.path(f);
                            self.alloc_copy(path.len() as u64, pos)?;
                            path.into()
                        }
                        None => l.target.clone(),
                    },
                    _ => self.text_value(&v, pos)?,
                };
                Ok(match name {
                    "html" => Value::Html(s),
                    "image" => Value::Image(s),
                    _ => Value::Icon(s),
                })
            }
            _ => Err(unknown_function(name, pos)),
        }
    }
}

/// `name()` is given `got` arguments: an error unless `min..=max` (`usize::MAX`: no upper bound).
fn check_arity(name: &str, got: usize, pos: u32, min: usize, max: usize) -> Result<(), EvalError> {
    if got < min || got > max {
        let want = if min == max {
            format!("{min}")
        } else if max == usize::MAX {
            format!("at least {min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(EvalError::at(
            pos,
            format!("{name}() takes {want} argument(s), got {got}"),
        ));
    }
    Ok(())
}

fn unknown_function(name: &str, pos: u32) -> EvalError {
    EvalError::at(pos, format!("unknown function `{name}()`"))
}

fn short(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_owned()
    }
}

/// `s` with `&`, `<`, `>`, `"` and `'` written as entities; `len` is [`escaped_len`] of it.
fn escape_html(s: &str, len: usize) -> String {
    let mut out = String::with_capacity(len);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The length of [`escape_html`] of `s`, counted without writing it.
fn escaped_len(s: &str) -> usize {
    s.bytes()
        .map(|b| match b {
            b'&' => 5,
            b'<' | b'>' => 4,
            b'"' => 6,
            b'\'' => 5,
            _ => 1,
        })
        .sum()
}

/// A number in [0, 1) that changes between queries and rows (not for security).
fn pseudo_random(salt: u64) -> f64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = t ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

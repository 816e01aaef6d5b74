//! [`Parameters`]: tool arguments read generously, and every argument error naming its
//! parameter.
//!
//! rmcp's own extractor reports `failed to deserialize parameters: invalid type: string "2",
//! expected u32`, naming no parameter, and clients such as the MCP Inspector CLI send every
//! argument as a string. This one first coerces strings to the integer, number or boolean the
//! input schema asks for (`"2"` → `2`, `"true"` → `true`), then deserialises, and on failure
//! names the parameter and what it expects. The `#[tool]` macro recognises the type by its name,
//! so the input schema is still generated from `T`.

use std::sync::Arc;

use rmcp::handler::server::common::{FromContextPart, schema_for_input};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What rmcp's router turns into an `isError` result (and `CapvaultServer::call_tool` into an
/// `invalid_argument` error).
pub const ARGUMENT_ERROR_PREFIX: &str = "failed to deserialize parameters: ";

/// Why tool arguments were refused.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// A parameter of the wrong type or outside its range: what the schema asks, in words.
    #[error("`{name}` must be {expected}")]
    Expected {
        /// The parameter.
        name: String,
        /// What it must be (`a whole number from 1 to 100`, `one of `a`, `b``...).
        expected: String,
    },
    /// Anything else serde refuses (a missing or unknown field...), in its words, after where
    /// it is when that is inside an argument (`` `edits[0]`: missing field `old_text` ``).
    #[error("{}{error}", at.as_deref().map(|a| format!("`{a}`: ")).unwrap_or_default())]
    Other {
        /// The place inside an argument (`edits[0]`); `None` at the top level, where serde's
        /// words name the field.
        at: Option<String>,
        /// What serde said.
        error: serde_json::Error,
    },
}

/// Tool arguments of type `T`, deserialised after schema-guided coercion.
#[derive(Debug, Clone)]
pub struct Parameters<T>(pub T);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T> FromContextPart<ToolCallContext<'_, S>> for Parameters<T>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, rmcp::ErrorData> {
        let args = context.arguments.take().unwrap_or_default();
        let schema = schema_for_input::<T>().unwrap_or_else(|_| Arc::new(JsonObject::new()));
        parse(args, &schema).map(Parameters).map_err(|e| {
            rmcp::ErrorData::invalid_params(format!("{ARGUMENT_ERROR_PREFIX}{e}"), None)
        })
    }
}

/// The top-level parameter an argument error is about, read from its text as [`ArgError`]
/// (or serde, through rmcp's own extractor) writes it: the name it starts with
/// (`` `limit` must be… ``, `` `edits[0]`: … ``, cut to `edits`), else the field serde names
/// (`` missing field `path` ``, `` unknown field `colour`, expected… ``). `None` for an error
/// about the arguments as a whole (not an object).
pub fn param_in(why: &str) -> Option<&str> {
    let named = why
        .strip_prefix('`')
        .and_then(|rest| rest.split_once('`'))
        .map(|(name, _)| name);
    let field = || {
        ["missing field `", "unknown field `"]
            .iter()
            .find_map(|lead| {
                let (_, rest) = why.split_once(lead)?;
                rest.split_once('`').map(|(name, _)| name)
            })
    };
    let name = named.or_else(field)?;
    let top = name.split(['[', '.']).next().unwrap_or(name);
    (!top.is_empty()).then_some(top)
}

/// Coerces `args` by `schema`, then deserialises them; the error names the parameter.
pub fn parse<T: DeserializeOwned>(
    mut args: JsonObject,
    schema: &JsonObject,
) -> Result<T, ArgError> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        for (name, value) in args.iter_mut() {
            if let Some(prop) = props.get(name) {
                coerce(value, prop);
                // A number outside the schema's range is refused, never clamped: one rule for
                // every tool, and the message names the parameter and the range.
                if !in_range(value, prop) {
                    return Err(ArgError::Expected {
                        name: name.clone(),
                        expected: expected(prop),
                    });
                }
            }
        }
    }
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let field = e.path().to_string();
        match props.and_then(|p| p.get(&field)) {
            // What serde says names Rust types (`expected u32`): the schema says it in words.
            Some(prop) if field != "." => ArgError::Expected {
                expected: expected(deref(prop, schema)),
                name: field,
            },
            _ => ArgError::Other {
                at: field
                    .contains(['[', '.'])
                    .then_some(field)
                    .filter(|f| f != "."),
                error: e.into_inner(),
            },
        }
    })
}

/// False when `value` is a number outside `prop`'s `minimum`..=`maximum`.
fn in_range(value: &Value, prop: &Value) -> bool {
    let Some(n) = value.as_f64() else {
        return true;
    };
    let min = prop.get("minimum").and_then(Value::as_f64);
    let max = prop.get("maximum").and_then(Value::as_f64);
    min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m)
}

/// The JSON types a property schema allows (`type` as a string or a list).
fn types(prop: &Value) -> Vec<&str> {
    match prop.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Turns a string into the integer, number or boolean `prop` asks for, when it reads as one;
/// and a number into the string `prop` asks for (`"lines": 5`, what models send, is `"5"`).
fn coerce(value: &mut Value, prop: &Value) {
    let allowed = types(prop);
    if let Value::Number(n) = value {
        if allowed.contains(&"string")
            && !allowed.contains(&"integer")
            && !allowed.contains(&"number")
        {
            *value = Value::String(n.to_string());
        }
        return;
    }
    let Value::String(text) = value else { return };
    if allowed.contains(&"string") {
        return;
    }
    let t = text.trim();
    let new = if allowed.contains(&"integer") {
        t.parse::<i64>()
            .map(Value::from)
            .or_else(|_| t.parse::<u64>().map(Value::from))
            .ok()
    } else if allowed.contains(&"number") {
        t.parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
    } else if allowed.contains(&"boolean") {
        match t.to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        }
    } else {
        None
    };
    if let Some(v) = new {
        *value = v;
    }
}

/// The schema a `{"$ref": "#/$defs/X"}` names within `root` (`prop` itself otherwise), seen
/// through an optional one (`{"anyOf": [{"$ref": …}, {"type": "null"}]}`, an `Option` of an
/// enum), so its choices can be named.
fn deref<'a>(prop: &'a Value, root: &'a JsonObject) -> &'a Value {
    let prop = prop
        .get("anyOf")
        .and_then(Value::as_array)
        .and_then(|alts| {
            let mut some = alts
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"));
            let one = some.next()?;
            some.next().is_none().then_some(one)
        })
        .unwrap_or(prop);
    prop.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| root.get("$defs")?.get(name))
        .unwrap_or(prop)
}

/// What a property expects, in words.
fn expected(prop: &Value) -> String {
    let consts: Option<Vec<&str>> = prop.get("oneOf").and_then(Value::as_array).map(|alts| {
        alts.iter()
            .filter_map(|a| a.get("const").and_then(Value::as_str))
            .collect()
    });
    let choices: Option<Vec<&str>> = prop
        .get("enum")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .or(consts);
    if let Some(choices) = choices.filter(|c| !c.is_empty()) {
        let names: Vec<String> = choices.iter().map(|c| format!("`{c}`")).collect();
        return format!("one of {}", names.join(", "));
    }
    let allowed = types(prop);
    if allowed.contains(&"integer") {
        let min = prop.get("minimum").and_then(Value::as_i64);
        let max = prop.get("maximum").and_then(Value::as_i64);
        match (min, max) {
            (Some(lo), Some(hi)) => format!("a whole number from {lo} to {hi}"),
            (Some(m), None) => format!("a whole number ({m} or more)"),
            (None, Some(hi)) => format!("a whole number up to {hi}"),
            (None, None) => "a whole number".to_owned(),
        }
    } else if allowed.contains(&"number") {
        "a number".to_owned()
    } else if allowed.contains(&"boolean") {
        "true or false".to_owned()
    } else if allowed.contains(&"string") {
        "a string".to_owned()
    } else if allowed.contains(&"array") {
        "a list".to_owned()
    } else {
        "a valid value".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        path: String,
        limit: Option<u32>,
        #[serde(default)]
        recursive: bool,
        ratio: Option<f64>,
        #[serde(default)]
        colour: Option<Colour>,
    }

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Colour {
        Red,
        Blue,
    }

    fn run(v: Value) -> Result<Args, ArgError> {
        let Value::Object(o) = v else { unreachable!() };
        parse(o, &schema_for_input::<Args>().unwrap())
    }

    /// The refusal's text, and the parameter the tool edge reads from it.
    fn refusal(v: Value) -> (String, Option<String>) {
        let text = run(v).unwrap_err().to_string();
        let param = param_in(&text).map(str::to_owned);
        (text, param)
    }

    #[test]
    fn a_number_where_a_string_is_asked_is_read_as_its_text() {
        let got = run(serde_json::json!({"path": 5, "limit": 3})).unwrap();
        assert_eq!((got.path.as_str(), got.limit), ("5", Some(3)));
    }

    #[test]
    fn numeric_and_boolean_strings_are_read_as_the_schema_says() {
        let got = run(serde_json::json!({
            "path": "12", "limit": " 2 ", "recursive": "TRUE", "ratio": "0.5"
        }))
        .unwrap();
        assert_eq!(
            got,
            Args {
                path: "12".into(),
                limit: Some(2),
                recursive: true,
                ratio: Some(0.5),
                colour: None,
            }
        );
    }

    #[test]
    fn an_argument_error_names_the_parameter_and_what_it_expects() {
        let p = |name: &str| Some(name.to_owned());
        let (e, param) = refusal(serde_json::json!({"path": "a", "limit": "two"}));
        assert!(e.starts_with("`limit` must be a whole number"), "{e}");
        assert_eq!(param, p("limit"));
        let (e, param) = refusal(serde_json::json!({"path": "a", "limit": -3}));
        assert!(e.starts_with("`limit` must be a whole number"), "{e}");
        assert!(!e.contains("u32"), "no Rust type names: {e}");
        assert_eq!(param, p("limit"));
        let (e, param) = refusal(serde_json::json!({"path": "a", "recursive": "yes"}));
        assert!(e.starts_with("`recursive` must be true or false"), "{e}");
        assert_eq!(param, p("recursive"));
        let (e, param) = refusal(serde_json::json!({"limit": 2}));
        assert!(e.contains("missing field `path`"), "{e}");
        assert_eq!(param, p("path"));
        let (e, param) = refusal(serde_json::json!({"path": "a", "color": 2}));
        assert!(e.contains("unknown field `color`"), "{e}");
        assert_eq!(param, p("color"));
        // An optional enum names its choices.
        let (e, param) = refusal(serde_json::json!({"path": "a", "colour": "green"}));
        assert!(
            e.starts_with("`colour` must be one of `red`, `blue`"),
            "{e}"
        );
        assert_eq!(param, p("colour"));
    }

    #[test]
    fn an_error_inside_an_argument_says_where_and_names_the_argument() {
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        struct Edit {
            #[allow(dead_code)]
            old_text: String,
        }
        #[derive(Debug, Deserialize, JsonSchema)]
        struct Edits {
            #[allow(dead_code)]
            edits: Vec<Edit>,
        }
        let Value::Object(o) = serde_json::json!({"edits": [{"old_text": "a"}, {}]}) else {
            unreachable!()
        };
        let e = parse::<Edits>(o, &schema_for_input::<Edits>().unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "`edits[1]`: missing field `old_text`");
        assert_eq!(param_in(&e), Some("edits"));
        // An error about the arguments as a whole names none.
        assert_eq!(param_in("invalid type: string \"x\", expected a map"), None);
    }
}

//! `JSON_VALUE(json, path)`: the scalar at JSON path `path` in the JSON text `json`, as a
//! STRING (Flink docs, JSON Functions; `RETURNING` and the `ON EMPTY`/`ON ERROR` clauses are not
//! parsed: their defaults, STRING and NULL, apply).
//!
//! - A path is `$` followed by steps: `.name`, `['name']` (or `["name"]`), `[index]` from 0.
//!   Lax mode, Flink's default: a step that does not apply (a missing key, an index out of
//!   range, a key of an array) gives NULL, not an error.
//! - The result is the value's text: a string without its quotes, a number or boolean as JSON
//!   writes it; NULL for a JSON `null`, an object or an array (not scalars: NULL ON ERROR), for
//!   text that is not JSON, and when an argument is NULL.
//! - A literal path that is not a path in this grammar is refused when the statement is
//!   planned; one in a column gives NULL for that row.

use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::DataType;
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_string_type, num_rows, StrArg};

/// `JSON_VALUE`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonValue {
    signature: Signature,
}

impl JsonValue {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps of `path`, or why it is not a path.
fn parse_path(path: &str) -> std::result::Result<Vec<Step>, String> {
    let path = path.trim();
    // SQL/JSON's mode prefix: lax is the only mode (and the default).
    let lower = path.to_ascii_lowercase();
    let path = if lower.starts_with("lax ") {
        path[4..].trim_start()
    } else if lower.starts_with("strict ") {
        return Err("strict mode is not supported: JSON_VALUE reads paths in lax mode (a missing step is NULL)".into());
    } else {
        path
    };
    let rest = path.strip_prefix('$').ok_or("a JSON path starts with $ (or 'lax $')")?;
    let mut steps = Vec::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                let mut key = String::new();
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    key.push(c);
                    chars.next();
                }
                if key.is_empty() {
                    return Err("a '.' is followed by a key".into());
                }
                steps.push(Step::Key(key));
            }
            '[' => {
                let mut inner = String::new();
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    inner.push(c);
                }
                let inner = inner.trim();
                let quoted = inner
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
                match quoted {
                    Some(key) => steps.push(Step::Key(key.to_string())),
                    None => steps.push(Step::Index(inner.parse().map_err(|_| format!("[{inner}] is neither an index nor a quoted key"))?)),
                }
            }
            c if c.is_whitespace() => {}
            other => return Err(format!("unexpected '{other}'")),
        }
    }
    Ok(steps)
}

/// The text of the scalar at `steps` in `json`, if there is one.
fn value_at(json: &str, steps: &[Step]) -> Option<String> {
    let root: serde_json::Value = serde_json::from_str(json).ok()?;
    let mut at = &root;
    for step in steps {
        at = match step {
            Step::Key(k) => at.as_object()?.get(k)?,
            Step::Index(i) => at.as_array()?.get(*i)?,
        };
    }
    match at {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl ScalarUDFImpl for JsonValue {
    fn name(&self) -> &str {
        "json_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "JSON_VALUE(json, path)";
        let [json, path] = arg_types else {
            return plan_err!("{usage} takes 2 arguments, got {}", arg_types.len());
        };
        match (as_string_type(json), as_string_type(path)) {
            (Some(a), Some(b)) => Ok(vec![a, b]),
            _ => plan_err!("{usage}: both arguments are strings, got {json} and {path}"),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let json = StrArg::new(&args.args[0])?;
        let paths = StrArg::new(&args.args[1])?;
        // A literal path: parsed once, and refused if it is not one.
        let constant = match &args.args[1] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(p))) => match parse_path(p) {
                Ok(steps) => Some(steps),
                Err(why) => return plan_err!("JSON_VALUE: '{p}' is not a JSON path: {why}"),
            },
            _ => None,
        };
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            let steps = match &constant {
                Some(steps) => Some(steps.clone()),
                None => paths.get(i).and_then(|p| parse_path(p).ok()),
            };
            out.append_option(match (json.get(i), steps) {
                (Some(j), Some(steps)) => value_at(j, &steps),
                _ => None,
            });
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_path, value_at};

    /// Scalars by key, quoted key and index, in lax mode: what does not apply is NULL.
    #[test]
    fn paths_find_scalars_and_give_null_for_the_rest() {
        let doc = r#"{"a": {"b": [10, "x", true, null, {"c": 1.5}]}, "k y": "v", "o": {}}"#;
        let at = |p: &str| value_at(doc, &parse_path(p).expect(p));
        assert_eq!(at("$.a.b[0]").as_deref(), Some("10"));
        assert_eq!(at("$.a.b[1]").as_deref(), Some("x"));
        assert_eq!(at("$.a.b[2]").as_deref(), Some("true"));
        assert_eq!(at("$.a.b[3]"), None);
        assert_eq!(at("$.a.b[4].c").as_deref(), Some("1.5"));
        assert_eq!(at("$['k y']").as_deref(), Some("v"));
        assert_eq!(at("$.o"), None, "an object is not a scalar");
        assert_eq!(at("$.a.b[9]"), None);
        assert_eq!(at("$.nope.x"), None);
        assert_eq!(value_at("not json", &parse_path("$.a").expect("path")), None);
        assert!(parse_path("a.b").is_err());
        assert!(parse_path("$.").is_err());
        assert!(parse_path("$[x]").is_err());
    }
}

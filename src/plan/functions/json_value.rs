//! `JSON_VALUE(json, path)`, `JSON_EXISTS(json, path)` and `JSON_QUERY(json, path)` (Flink
//! docs, JSON Functions), with their default clauses: `RETURNING` and the `ON EMPTY`/`ON
//! ERROR` clauses of JSON_VALUE are rewritten before planning ([`crate::sql::json_clauses`]);
//! JSON_EXISTS's and JSON_QUERY's clauses (`WITH ARRAY WRAPPER`, ..) are not parsed.
//!
//! - A path is `$` followed by steps: `.name`, `['name']` (or `["name"]`), `[index]` from 0.
//!   Lax mode, Flink's default: a step that does not apply (a missing key, an index out of
//!   range, a key of an array) finds nothing, not an error.
//! - JSON_VALUE: the value's text as a STRING: a string without its quotes, a number or boolean
//!   as JSON writes it; NULL for a JSON `null`, an object or an array (not scalars: NULL ON
//!   ERROR), for text that is not JSON, and when an argument is NULL.
//! - JSON_EXISTS: BOOLEAN, whether the path finds a value other than a JSON `null` (Calcite's
//!   `jsonExists`, which Flink calls: the value found is not Java's null); FALSE for text that
//!   is not JSON (FALSE ON ERROR).
//! - JSON_QUERY: the object or array the path finds, as compact JSON text (no blanks outside
//!   strings, keys in their order), a STRING; NULL when it finds nothing (NULL ON EMPTY), a
//!   scalar (WITHOUT ARRAY WRAPPER: NULL ON ERROR), or for text that is not JSON.
//! - A literal path that is not a path in this grammar is refused when the statement is
//!   planned; one in a column gives NULL for that row.

use std::sync::Arc;

use std::collections::HashMap;

use arrow::array::{ArrayRef, BooleanBuilder, StringBuilder};
use arrow::datatypes::DataType;
use datafusion::common::{plan_err, ScalarValue};
use serde_json::value::RawValue;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_string_type, num_rows, StrArg};

/// Which JSON function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum JsonFunction {
    Value,
    Exists,
    Query,
}

/// `JSON_VALUE`, `JSON_EXISTS` or `JSON_QUERY`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonValue {
    function: JsonFunction,
    signature: Signature,
}

impl JsonValue {
    pub(super) fn new(function: JsonFunction) -> Self {
        Self { function, signature: Signature::user_defined(Volatility::Immutable) }
    }

    pub(super) fn all() -> [Self; 3] {
        [JsonFunction::Value, JsonFunction::Exists, JsonFunction::Query].map(Self::new)
    }

    fn sql_name(&self) -> &'static str {
        match self.function {
            JsonFunction::Value => "JSON_VALUE",
            JsonFunction::Exists => "JSON_EXISTS",
            JsonFunction::Query => "JSON_QUERY",
        }
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
        return Err("strict mode is not supported: paths are read in lax mode (a missing step finds nothing)".into());
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
                if key.trim() == "*" {
                    return Err("wildcards ('.*', '[*]') are not supported; name the key".into());
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

/// The JSON text at `steps` in `json` as written there, if the path finds a value.
fn raw_at<'a>(json: &'a str, steps: &[Step]) -> Option<&'a RawValue> {
    let mut at: &RawValue = serde_json::from_str(json).ok()?;
    for step in steps {
        at = match step {
            // The last of repeated keys, as Jackson reads them.
            Step::Key(k) => serde_json::from_str::<HashMap<String, &RawValue>>(at.get()).ok()?.remove(k)?,
            Step::Index(i) => serde_json::from_str::<Vec<&RawValue>>(at.get()).ok()?.get(*i).copied()?,
        };
    }
    Some(at)
}

/// JSON_QUERY's result: the object or array at `steps`, compact.
fn query_at(json: &str, steps: &[Step]) -> Option<String> {
    let raw = raw_at(json, steps)?.get();
    if !(raw.starts_with('{') || raw.starts_with('[')) {
        return None;
    }
    // Blanks outside strings dropped, as Jackson writes JSON.
    let mut out = String::with_capacity(raw.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in raw.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !c.is_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    Some(out)
}

impl ScalarUDFImpl for JsonValue {
    fn name(&self) -> &str {
        match self.function {
            JsonFunction::Value => "json_value",
            JsonFunction::Exists => "json_exists",
            JsonFunction::Query => "json_query",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = format!("{}(json, path)", self.sql_name());
        let [json, path] = arg_types else {
            return plan_err!("{usage} takes 2 arguments, got {}", arg_types.len());
        };
        match (as_string_type(json), as_string_type(path)) {
            (Some(a), Some(b)) => Ok(vec![a, b]),
            _ => plan_err!("{usage}: both arguments are strings, got {json} and {path}"),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(if self.function == JsonFunction::Exists { DataType::Boolean } else { DataType::Utf8 })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let json = StrArg::new(&args.args[0])?;
        let paths = StrArg::new(&args.args[1])?;
        // A literal path: parsed once, and refused if it is not one.
        let constant = match &args.args[1] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(p))) => match parse_path(p) {
                Ok(steps) => Some(steps),
                Err(why) => return plan_err!("{}: '{p}' is not a JSON path: {why}", self.sql_name()),
            },
            _ => None,
        };
        // A literal path's steps are borrowed, not copied, for each row.
        let steps = |i: usize| match &constant {
            Some(steps) => Some(std::borrow::Cow::Borrowed(steps.as_slice())),
            None => paths.get(i).and_then(|p| parse_path(p).ok()).map(std::borrow::Cow::Owned),
        };
        let out: ArrayRef = if self.function == JsonFunction::Exists {
            let mut out = BooleanBuilder::with_capacity(n);
            for i in 0..n {
                out.append_option(match (json.get(i), steps(i)) {
                    (Some(j), Some(steps)) => Some(raw_at(j, &steps).is_some_and(|v| v.get().trim() != "null")),
                    // A path in a column that is not one: FALSE ON ERROR.
                    (Some(_), None) if paths.get(i).is_some() => Some(false),
                    _ => None,
                });
            }
            Arc::new(out.finish())
        } else {
            let mut out = StringBuilder::with_capacity(n, 0);
            for i in 0..n {
                out.append_option(match (json.get(i), steps(i)) {
                    (Some(j), Some(steps)) if self.function == JsonFunction::Value => value_at(j, &steps),
                    (Some(j), Some(steps)) => query_at(j, &steps),
                    _ => None,
                });
            }
            Arc::new(out.finish())
        };
        Ok(ColumnarValue::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_path, query_at, raw_at, value_at};

    /// JSON_QUERY gives objects and arrays, compact and in their order; `raw_at` finds a
    /// `null` (which JSON_EXISTS then counts as not there).
    #[test]
    fn queries_give_objects_and_arrays() {
        let doc = r#"{"z": {"b": 1, "a": [1, "x y", {"q": "\" }"}]}, "n": null, "s": "t"}"#;
        let query = |p: &str| query_at(doc, &parse_path(p).expect(p));
        assert_eq!(query("$.z").as_deref(), Some(r#"{"b":1,"a":[1,"x y",{"q":"\" }"}]}"#));
        assert_eq!(query("$.z.a").as_deref(), Some(r#"[1,"x y",{"q":"\" }"}]"#));
        assert_eq!(query("$.s"), None, "a scalar");
        assert_eq!(query("$.nope"), None);
        let exists = |p: &str| raw_at(doc, &parse_path(p).expect(p)).is_some();
        assert!(exists("$.n") && exists("$.z.a[2].q"));
        assert!(!exists("$.z.a[3]") && !exists("$.s.x"));
        assert!(raw_at("not json", &parse_path("$").expect("path")).is_none());
    }

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
        assert!(parse_path("$.*").is_err() && parse_path("$.a.*").is_err(), "a wildcard, not a key named *");
        assert_eq!(value_at(r#"{"*": 1}"#, &parse_path("$['*']").expect("quoted")).as_deref(), Some("1"));
    }
}

/// `weir_is_json(s, kind)`: Flink's `s IS JSON [kind]` (Flink docs, JSON Functions), which
/// [`crate::sql::json_clauses::rewrite_is_json`] rewrites into this call. Whether `s` is JSON
/// text of `kind`: `VALUE` any, `SCALAR` a string, number, boolean or `null`, `ARRAY`, `OBJECT`.
/// FALSE for NULL (not NULL: Flink's `NULL IS JSON` is FALSE).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct IsJson {
    signature: Signature,
}

impl IsJson {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for IsJson {
    fn name(&self) -> &str {
        "weir_is_json"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [value, kind] => match (as_string_type(value), as_string_type(kind)) {
                (Some(v), Some(k)) => Ok(vec![v, k]),
                _ => plan_err!("IS JSON: the value must be a string, got {value}"),
            },
            _ => plan_err!("IS JSON: got {} arguments", arg_types.len()),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let (values, kinds) = (StrArg::new(&args.args[0])?, StrArg::new(&args.args[1])?);
        let mut out = BooleanBuilder::with_capacity(n);
        for i in 0..n {
            let is = match (values.get(i), kinds.get(i)) {
                (Some(v), Some(kind)) => match serde_json::from_str::<serde_json::Value>(v) {
                    Ok(json) => match kind {
                        "SCALAR" => !json.is_array() && !json.is_object(),
                        "ARRAY" => json.is_array(),
                        "OBJECT" => json.is_object(),
                        _ => true,
                    },
                    Err(_) => false,
                },
                _ => false,
            };
            out.append_value(is);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

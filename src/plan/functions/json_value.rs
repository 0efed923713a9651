//! `JSON_VALUE(json, path)`, `JSON_EXISTS(json, path)` and `JSON_QUERY(json, path)` (Flink
//! docs, JSON Functions), with their default clauses: `RETURNING` and the `ON EMPTY`/`ON
//! ERROR` clauses of JSON_VALUE are rewritten before planning ([`crate::sql::json_clauses`]);
//! JSON_QUERY's wrapper and `ON EMPTY`/`ON ERROR` clauses are rewritten into three more
//! arguments ([`crate::sql::json_clauses::rewrite_json_query_clauses`]); JSON_EXISTS's
//! clauses are not parsed.
//!
//! - A path is `$` followed by steps: `.name`, `['name']` (or `["name"]`), `[index]` from 0,
//!   and the wildcards `.*` and `[*]` (every member of an object, every element of an array),
//!   after an optional mode, `lax` or `strict`. Strict is the default, as in Flink (Calcite's
//!   `jsonApiCommonSyntax`): a step that does not apply (a missing key, an index out of range,
//!   a key of an array) before any wildcard is an error, which the `ON ERROR` behaviour
//!   answers (NULL by default; FALSE for JSON_EXISTS); in lax mode it finds nothing, which
//!   `ON EMPTY` answers. After a wildcard, members without the key are skipped in both modes
//!   (Jayway's reading of a path with a wildcard). With the default clauses both modes give
//!   the same results.
//! - A path with a wildcard finds a list of values, as the Jayway JsonPath under Flink's
//!   (Calcite's) JSON functions does: JSON_QUERY gives it as a JSON array
//!   (`JSON_QUERY('{"a":[{"b":1},{"b":2}]}', '$.a[*].b')` is `[1,2]`, `[]` when nothing
//!   matches), JSON_VALUE gives NULL (a list is not a scalar), and JSON_EXISTS TRUE, even for
//!   an empty list, as Calcite's `jsonExists` (a list is not Java's null).
//! - JSON_QUERY's wrapper, as Calcite's `jsonQuery`: `WITHOUT [ARRAY] WRAPPER` (the default)
//!   gives an object or array found, and for a scalar `ON ERROR`'s result (strict) or `ON
//!   EMPTY`'s (lax), for nothing `ON EMPTY`'s;
//!   `WITH [UNCONDITIONAL] [ARRAY] WRAPPER` wraps what it found in an array (`[1]`, `[[1,2]]`);
//!   `WITH CONDITIONAL [ARRAY] WRAPPER` wraps all but an array. `NULL`, `EMPTY ARRAY` or
//!   `EMPTY OBJECT ON EMPTY` (nothing found, or a scalar without a wrapper) and `ON ERROR` (text
//!   that is not JSON) give NULL, `[]` or `{}`.
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
    /// `.*` or `[*]`: every member of an object, every element of an array.
    Any,
    /// The mode prefix `lax`, a path's first step when given; without it the path is strict.
    Lax,
}

/// Why a path found no value: the text is not JSON, or (strict mode) a step did not apply.
#[derive(Debug, PartialEq)]
enum Miss {
    NotJson,
    Step,
}

/// The steps of `path`, or why it is not a path.
fn parse_path(path: &str) -> std::result::Result<Vec<Step>, String> {
    let path = path.trim();
    // SQL/JSON's mode prefix: lax is the only mode (and the default).
    let lower = path.to_ascii_lowercase();
    let mut steps = Vec::new();
    let path = if lower.starts_with("lax ") {
        steps.push(Step::Lax);
        path[4..].trim_start()
    } else if lower.starts_with("strict ") {
        path[7..].trim_start()
    } else {
        path
    };
    let rest = path.strip_prefix('$').ok_or("a JSON path starts with $ (or 'lax $', 'strict $')")?;
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
                steps.push(if key.trim() == "*" { Step::Any } else { Step::Key(key) });
            }
            '[' => {
                let mut inner = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == ']' {
                        closed = true;
                        break;
                    }
                    inner.push(c);
                }
                if !closed {
                    return Err(format!("'[{inner}' is not closed by ']'"));
                }
                let inner = inner.trim();
                let quoted = inner
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
                match quoted {
                    Some(key) => steps.push(Step::Key(key.to_string())),
                    None if inner == "*" => steps.push(Step::Any),
                    None => steps.push(Step::Index(
                        inner.parse().map_err(|_| format!("[{inner}] is neither an index, a quoted key nor *"))?,
                    )),
                }
            }
            c if c.is_whitespace() => {}
            other => return Err(format!("unexpected '{other}'")),
        }
    }
    Ok(steps)
}

/// The text of the scalar at `steps` in `json`, if there is one (a path with a wildcard finds
/// a list, which is not one).
fn value_at(json: &str, steps: &[Step]) -> Option<String> {
    if !is_definite(steps) {
        return None;
    }
    let raw = find_all(json, steps).ok()?.pop()?;
    match serde_json::from_str::<serde_json::Value>(raw.get()).ok()? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether `steps` has no wildcard, so finds one value at most.
fn is_definite(steps: &[Step]) -> bool {
    !steps.contains(&Step::Any)
}

/// An object's members in the order written.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> std::result::Result<Members<'a>, M::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'a RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// Every value `steps` finds in `json`, as written there, in document order (module docs).
///
/// # Errors
/// `NotJson` when `json` is not JSON; `Step` in strict mode when a step before any wildcard
/// does not apply.
fn find_all<'a>(json: &'a str, steps: &[Step]) -> std::result::Result<Vec<&'a RawValue>, Miss> {
    let mut found: Vec<&RawValue> = vec![serde_json::from_str(json).map_err(|_| Miss::NotJson)?];
    let lax = steps.first() == Some(&Step::Lax);
    let mut after_wildcard = false;
    for step in steps {
        let mut next = Vec::with_capacity(found.len());
        for at in found {
            let text = at.get();
            let object = || serde_json::from_str::<Members<'a>>(text).ok().map(|m| m.0);
            let array = || serde_json::from_str::<Vec<&'a RawValue>>(text).ok();
            let before = next.len();
            match step {
                Step::Lax => next.push(at),
                // The last of repeated keys, as Jackson reads them.
                Step::Key(k) if text.starts_with('{') => {
                    next.extend(object().and_then(|m| m.into_iter().rev().find(|(key, _)| key == k)).map(|(_, v)| v))
                }
                Step::Index(i) if text.starts_with('[') => next.extend(array().and_then(|a| a.get(*i).copied())),
                Step::Any if text.starts_with('{') => next.extend(object().into_iter().flatten().map(|(_, v)| v)),
                Step::Any if text.starts_with('[') => next.extend(array().into_iter().flatten()),
                _ => {}
            }
            let applied = next.len() > before || matches!(step, Step::Any) && (text.starts_with('{') || text.starts_with('['));
            if !lax && !after_wildcard && !applied {
                return Err(Miss::Step);
            }
        }
        after_wildcard |= *step == Step::Any;
        found = next;
    }
    Ok(found)
}

/// JSON_QUERY's wrapper clause.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wrapper {
    Without,
    Unconditional,
    Conditional,
}

/// What an `ON EMPTY` or `ON ERROR` clause gives: NULL (`None`), `[]` or `{}`.
fn fallback(clause: &str) -> Option<String> {
    match clause {
        "EMPTY ARRAY" => Some("[]".into()),
        "EMPTY OBJECT" => Some("{}".into()),
        _ => None,
    }
}

/// JSON_QUERY's result (module docs): what `steps` finds in `json`, compact, as `wrapper`
/// wraps it; `on_empty`'s result for nothing or a scalar left unwrapped, `on_error`'s for
/// text that is not JSON.
fn query_with(json: &str, steps: &[Step], wrapper: Wrapper, on_empty: &str, on_error: &str) -> Option<String> {
    let Ok(found) = find_all(json, steps) else { return fallback(on_error) };
    let value = if is_definite(steps) {
        let Some(v) = found.first() else { return fallback(on_empty) };
        let text = compact(v.get());
        let container = text.starts_with('{') || text.starts_with('[');
        match wrapper {
            // A scalar without a wrapper: an error in strict mode, nothing in lax mode.
            Wrapper::Without if !container && steps.first() != Some(&Step::Lax) => return fallback(on_error),
            Wrapper::Without => container.then_some(text),
            Wrapper::Conditional if text.starts_with('[') => Some(text),
            _ => Some(format!("[{text}]")),
        }
    } else {
        let list = format!("[{}]", found.iter().map(|v| compact(v.get())).collect::<Vec<_>>().join(","));
        Some(if wrapper == Wrapper::Unconditional { format!("[{list}]") } else { list })
    };
    value.or_else(|| fallback(on_empty))
}

/// `raw` JSON text without the blanks outside strings, as Jackson writes JSON.
fn compact(raw: &str) -> String {
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
    out
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
        // JSON_QUERY's clauses come as three more strings (wrapper, ON EMPTY, ON ERROR).
        let arities: &[usize] = if self.function == JsonFunction::Query { &[2, 5] } else { &[2] };
        if !arities.contains(&arg_types.len()) {
            return plan_err!("{usage} takes 2 arguments, got {}", arg_types.len());
        }
        arg_types
            .iter()
            .map(|t| match as_string_type(t) {
                Some(s) => Ok(s),
                None => plan_err!("{usage}: its arguments are strings, got {t}"),
            })
            .collect()
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
                    // Calcite's jsonExists: a value other than JSON null, or any list a
                    // wildcard path finds (even empty); FALSE ON ERROR.
                    (Some(j), Some(steps)) => Some(find_all(j, &steps).is_ok_and(|found| {
                        !is_definite(&steps) || found.first().is_some_and(|v| v.get().trim() != "null")
                    })),
                    // A path in a column that is not one: FALSE ON ERROR.
                    (Some(_), None) if paths.get(i).is_some() => Some(false),
                    _ => None,
                });
            }
            Arc::new(out.finish())
        } else {
            // JSON_QUERY's clauses, constants the rewrite put there.
            let clause = |k: usize| match args.args.get(k) {
                Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(c)))) => c.as_str(),
                _ => "",
            };
            let wrapper = match clause(2) {
                "UNCONDITIONAL" => Wrapper::Unconditional,
                "CONDITIONAL" => Wrapper::Conditional,
                _ => Wrapper::Without,
            };
            let (on_empty, on_error) = (clause(3), clause(4));
            let mut out = StringBuilder::with_capacity(n, 0);
            for i in 0..n {
                out.append_option(match (json.get(i), steps(i)) {
                    (Some(j), Some(steps)) if self.function == JsonFunction::Value => value_at(j, &steps),
                    (Some(j), Some(steps)) => query_with(j, &steps, wrapper, on_empty, on_error),
                    _ => None,
                });
            }
            Arc::new(out.finish())
        };
        Ok(ColumnarValue::Array(out))
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

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    use super::{find_all, parse_path, query_with, value_at, Step, Wrapper};

    /// JSON_QUERY with its default clauses.
    fn query_at(json: &str, steps: &[Step]) -> Option<String> {
        query_with(json, steps, Wrapper::Without, "NULL", "NULL")
    }

    /// The one value a path without a wildcard finds.
    fn raw_at<'a>(json: &'a str, steps: &[Step]) -> Option<&'a RawValue> {
        find_all(json, steps).ok()?.pop()
    }

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
        assert_eq!(value_at(r#"{"*": 1}"#, &parse_path("$['*']").expect("quoted")).as_deref(), Some("1"));
        assert_eq!(parse_path("$.a.*").expect("wildcard"), [Step::Key("a".into()), Step::Any]);
    }

    /// Wildcards find lists (Jayway's, which Flink's JSON functions get through Calcite), in
    /// document order; JSON_QUERY's wrappers and ON EMPTY / ON ERROR clauses as Calcite's
    /// `jsonQuery` applies them; each expected text worked out from the document by hand.
    #[test]
    fn wildcards_and_wrappers() {
        let doc = r#"{"items": [{"sku": "a", "n": 1}, {"sku": "b"}, {"n": 3}], "m": {"y": 2, "x": [1]}}"#;
        let steps = |p: &str| parse_path(p).expect(p);
        let query = |p: &str, w| query_with(doc, &steps(p), w, "NULL", "NULL");
        assert_eq!(query("$.items[*].sku", Wrapper::Without).as_deref(), Some(r#"["a","b"]"#));
        assert_eq!(query("$.items[*].n", Wrapper::Unconditional).as_deref(), Some("[[1,3]]"));
        assert_eq!(query("$.items[*].nope", Wrapper::Without).as_deref(), Some("[]"));
        assert_eq!(query("$.m.*", Wrapper::Conditional).as_deref(), Some("[2,[1]]"), "members in the order written");
        assert_eq!(query("$.items[0].sku", Wrapper::Without), None, "a scalar without a wrapper");
        assert_eq!(query("$.items[0].sku", Wrapper::Unconditional).as_deref(), Some(r#"["a"]"#));
        assert_eq!(query("$.m.x", Wrapper::Conditional).as_deref(), Some("[1]"), "an array is not wrapped again");
        assert_eq!(query("$.m.x", Wrapper::Unconditional).as_deref(), Some("[[1]]"));
        assert_eq!(query_with(doc, &steps("lax $.nope"), Wrapper::Without, "EMPTY ARRAY", "NULL").as_deref(), Some("[]"));
        assert_eq!(query_with("not json", &steps("$"), Wrapper::Without, "NULL", "EMPTY OBJECT").as_deref(), Some("{}"));
        assert_eq!(value_at(doc, &steps("$.items[*].sku")), None, "a list is not a scalar");
        assert_eq!(find_all(doc, &steps("$.items[*].n")).map(|f| f.len()), Ok(2));
        // Strict (the default) against lax: a missing step is an error, answered by ON ERROR;
        // in lax mode it finds nothing, answered by ON EMPTY; a scalar without a wrapper alike.
        let clauses = |p: &str| query_with(doc, &steps(p), Wrapper::Without, "EMPTY ARRAY", "EMPTY OBJECT");
        assert_eq!(clauses("$.nope").as_deref(), Some("{}"));
        assert_eq!(clauses("lax $.nope").as_deref(), Some("[]"));
        assert_eq!(clauses("$.m.y").as_deref(), Some("{}"));
        assert_eq!(clauses("lax $.m.y").as_deref(), Some("[]"));
        assert_eq!(clauses("strict $.m.x").as_deref(), Some("[1]"));
        assert_eq!(find_all(doc, &steps("$.nope[*]")).err(), Some(super::Miss::Step));
        assert_eq!(find_all(doc, &steps("lax $.nope[*]")).map(|f| f.len()), Ok(0));
        assert!(parse_path("$.a[*").is_err() && parse_path("$.a[0").is_err());
    }
}

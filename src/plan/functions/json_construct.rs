//! Flink's JSON constructors (Flink docs, JSON Functions), as `sql/` rewrites them
//! ([`crate::sql::query_rewrites`]) into plain calls of the functions here:
//!
//! - `JSON_OBJECT([KEY] k VALUE v, ... [NULL | ABSENT ON NULL])` → `weir_json_object(mode,
//!   kinds, k1, v1, ...)`: a JSON object with the keys in the order written (NULL ON NULL by
//!   default: a NULL value is a JSON `null`; ABSENT ON NULL leaves the key out). A NULL key is an
//!   error.
//! - `JSON_ARRAY(v, ... [NULL | ABSENT ON NULL])` → `weir_json_array(mode, kinds, v1, ...)`: a
//!   JSON array (ABSENT ON NULL by default: NULL values are left out).
//!
//! - `JSON_STRING(v)`: the value as JSON text (`JSON_STRING('a')` is `"a"`, `JSON_STRING(1)` is
//!   `1`); NULL for NULL (Flink's).
//!
//! `mode` is `'NULL'` or `'ABSENT'`; `kinds` has one letter per value, `R` for a value that is
//! itself a `JSON_OBJECT` or `JSON_ARRAY` call, inserted as JSON rather than as a string (Flink's
//! rule), `V` for any other. Values: strings as JSON strings, numbers and booleans as they are,
//! arrays as JSON arrays, rows and maps as JSON objects, other types (dates, timestamps) as
//! strings of their ISO 8601 text. Never NULL: `JSON_OBJECT()` is `{}`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::num_rows;

/// Which function a [`JsonConstruct`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Object,
    Array,
    String,
}

/// `weir_json_object`, `weir_json_array` or `json_string`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonConstruct {
    signature: Signature,
    kind: Kind,
}

impl JsonConstruct {
    pub(super) fn all() -> [Self; 3] {
        [Kind::Object, Kind::Array, Kind::String].map(|kind| Self { signature: Signature::user_defined(Volatility::Immutable), kind })
    }
}

impl ScalarUDFImpl for JsonConstruct {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Object => "weir_json_object",
            Kind::Array => "weir_json_array",
            Kind::String => "json_string",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let fits = match self.kind {
            Kind::Object => arg_types.len() >= 2 && arg_types.len() % 2 == 0,
            Kind::Array => arg_types.len() >= 2,
            Kind::String => arg_types.len() == 1,
        };
        if !fits {
            return plan_err!("{}: write JSON_OBJECT(KEY k VALUE v, ..), JSON_ARRAY(v, ..) or JSON_STRING(v)", self.name());
        }
        Ok(arg_types.to_vec())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        if self.kind == Kind::String {
            let values = args.args[0].to_array(n)?;
            let mut out = StringBuilder::with_capacity(n, n * 8);
            let mut text = String::new();
            for row in 0..n {
                if is_null(values.as_ref(), row) {
                    out.append_null();
                    continue;
                }
                text.clear();
                write_json(&mut text, values.as_ref(), row, false)?;
                out.append_value(&text);
            }
            return Ok(ColumnarValue::Array(Arc::new(out.finish())));
        }
        let literal = |i: usize| match &args.args[i] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(s))) => Ok(s.clone()),
            _ => exec_err!("{}: argument {} must be a literal", self.name(), i + 1),
        };
        let absent_on_null = literal(0)? == "ABSENT";
        let kinds: Vec<bool> = literal(1)?.chars().map(|c| c == 'R').collect();
        let columns = args.args[2..].iter().map(|a| a.to_array(n)).collect::<Result<Vec<ArrayRef>>>()?;
        let mut out = StringBuilder::with_capacity(n, n * 16);
        let mut text = String::new();
        for row in 0..n {
            text.clear();
            if self.kind == Kind::Object {
                text.push('{');
                let mut first = true;
                for (pair, kv) in columns.chunks(2).enumerate() {
                    let [key, value] = kv else { continue };
                    if is_null(key.as_ref(), row) {
                        return exec_err!("JSON_OBJECT: the key of entry {} is NULL", pair + 1);
                    }
                    if is_null(value.as_ref(), row) && absent_on_null {
                        continue;
                    }
                    if !first {
                        text.push(',');
                    }
                    first = false;
                    write_json(&mut text, key.as_ref(), row, false)?;
                    text.push(':');
                    write_json(&mut text, value.as_ref(), row, kinds.get(pair).copied().unwrap_or(false))?;
                }
                text.push('}');
            } else {
                text.push('[');
                let mut first = true;
                for (k, value) in columns.iter().enumerate() {
                    if is_null(value.as_ref(), row) && absent_on_null {
                        continue;
                    }
                    if !first {
                        text.push(',');
                    }
                    first = false;
                    write_json(&mut text, value.as_ref(), row, kinds.get(k).copied().unwrap_or(false))?;
                }
                text.push(']');
            }
            out.append_value(&text);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Whether value `row` of `array` is NULL (a NULL literal's array has no null buffer).
fn is_null(array: &dyn Array, row: usize) -> bool {
    array.data_type() == &DataType::Null || array.is_null(row)
}

/// Appends value `row` of `array` to `out` as JSON; `raw`: a string that is JSON already.
fn write_json(out: &mut String, array: &dyn Array, row: usize, raw: bool) -> Result<()> {
    if is_null(array, row) {
        out.push_str("null");
        return Ok(());
    }
    let string = match array.data_type() {
        DataType::Utf8 => Some(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Some(array.as_string_view().value(row)),
        _ => None,
    };
    if let Some(s) = string {
        if raw {
            out.push_str(s);
        } else {
            out.push_str(&serde_json::Value::String(s.to_string()).to_string());
        }
        return Ok(());
    }
    match array.data_type() {
        DataType::Null => out.push_str("null"),
        DataType::Boolean => out.push_str(if array.as_boolean().value(row) { "true" } else { "false" }),
        t if t.is_numeric() => out.push_str(&ArrayFormatter::try_new(array, &FormatOptions::default())?.value(row).to_string()),
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let elements = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(row),
                DataType::LargeList(_) => array.as_list::<i64>().value(row),
                _ => array.as_fixed_size_list().value(row),
            };
            out.push('[');
            for i in 0..elements.len() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, elements.as_ref(), i, false)?;
            }
            out.push(']');
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            out.push('{');
            for (i, field) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(field.name().clone()).to_string());
                out.push(':');
                write_json(out, s.column(i).as_ref(), row, false)?;
            }
            out.push('}');
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            out.push('{');
            for i in 0..entries.len() {
                if i > 0 {
                    out.push(',');
                }
                let key = ArrayFormatter::try_new(entries.column(0).as_ref(), &FormatOptions::default())?.value(i).to_string();
                out.push_str(&serde_json::Value::String(key).to_string());
                out.push(':');
                write_json(out, entries.column(1).as_ref(), i, false)?;
            }
            out.push('}');
        }
        _ => {
            let text = ArrayFormatter::try_new(array, &FormatOptions::default())?.value(row).to_string();
            out.push_str(&serde_json::Value::String(text).to_string());
        }
    }
    Ok(())
}

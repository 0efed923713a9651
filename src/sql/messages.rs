//! Errors in SQL's words: DataFusion's and Arrow's messages name Arrow's types (`Int32`,
//! `Utf8View`) and their own phrasing ("No field named x"); a SQL user reads Flink's type names
//! (`INT`, `STRING`, [`crate::sql::show::sql_type_name`]) and Postgres's phrasing (`column "x"
//! does not exist`, `invalid input syntax for type INT: "abc"`). Applied to every statement's
//! error by [`crate::sql::Database::execute`]; the SQLSTATE stays.

use std::str::FromStr;

use arrow::datatypes::DataType;

use crate::error::WeirError;
use crate::sql::show::sql_type_name;

/// `e` with its message in SQL's words, where it is one of the messages below.
pub fn in_sql_terms(e: WeirError) -> WeirError {
    e.map_message(rewrite)
}

/// `message` in SQL's words, where it is one of the messages below: for the errors a job met
/// at run time, which `SHOW JOBS` shows (they are no statement's).
pub fn message_in_sql_terms(message: &str) -> String {
    rewrite(message).unwrap_or_else(|| message.to_string())
}

/// The SQL name of Arrow type name `name` (`Int32` -> `INT`), or `name` itself when it is not
/// one.
fn type_name(name: &str) -> String {
    DataType::from_str(name).map(|t| sql_type_name(&t)).unwrap_or_else(|_| name.to_string())
}

/// The rewritten message, for the messages it knows.
fn rewrite(message: &str) -> Option<String> {
    // Arrow's cast of a number that does not fit: "Can't cast value 3000000000 to type Int32".
    if let Some(rest) = message.split("Can't cast value ").nth(1) {
        let (value, t) = rest.split_once(" to type ")?;
        return Some(format!("value {value} is out of range for type {}", type_name(t.trim_end_matches('.'))));
    }
    // Arrow's cast of text that is not a value: "Cannot cast string 'abc' to value of Int32 type".
    if let Some(rest) = message.split("Cannot cast string '").nth(1) {
        let (value, rest) = rest.rsplit_once("' to value of ")?;
        let t = rest.split(" type").next()?;
        return Some(format!("invalid input syntax for type {}: \"{value}\"", type_name(t)));
    }
    // Arrow's parse of text that is no timestamp: "Parser error: Error parsing timestamp from
    // 'abc': ..." (Postgres: invalid input syntax for type timestamp: "abc").
    if let Some(rest) = message.split("Error parsing timestamp from '").nth(1) {
        let (value, _) = rest.rsplit_once("': ")?;
        return Some(format!("invalid input syntax for type timestamp: \"{value}\""));
    }
    // DataFusion's unknown column: "No field named nme. Valid fields are t.id, t.name."
    if let Some(at) = message.find("No field named ") {
        let name = crate::error::missing_column(message)?;
        let after = &message[at + "No field named ".len()..];
        let rest = after.split_once(". ").map(|(_, rest)| rest).unwrap_or("");
        // A plain table's scan for UPDATE and DELETE carries its rows' keys: not a column.
        let listed: Vec<&str> = rest
            .trim_end_matches('.')
            .split(", ")
            .filter(|item| item.rsplit('.').next() != Some(crate::runtime::table::KEY_COLUMN))
            .collect();
        let rest = match rest.ends_with('.') {
            true => format!("{}.", listed.join(", ")),
            false => listed.join(", "),
        };
        return Some(if rest.is_empty() { format!("column \"{name}\" does not exist") } else { format!("column \"{name}\" does not exist. {rest}") });
    }
    // A call no version of the function takes, as `crate::error` words it: "function
    // sum(Utf8View) does not exist: ...".
    if let Some(rest) = message.strip_prefix("function ") {
        let (call, tail) = rest.split_once(") does not exist")?;
        let (name, args) = call.split_once('(')?;
        let args: Vec<String> = args.split(", ").filter(|a| !a.is_empty()).map(type_name).collect();
        return Some(format!("function {name}({}) does not exist{tail}", args.join(", ")));
    }
    // DataFusion's UNNEST of a MAP (or anything but an array) in a select list.
    if message.contains("unnest() can only be applied to array, struct and null") {
        return Some(
            "UNNEST takes an ARRAY, or a MAP with two column names for its keys and values: \
             CROSS JOIN UNNEST(m) AS t (k, v)"
                .into(),
        );
    }
    // DataFusion's "type_coercion: Cannot infer common argument type for comparison operation
    // Int32 > Timestamp(ms, \"UTC\")" (Postgres: operator does not exist: integer > timestamp).
    if let Some(rest) = message.split("Cannot infer common argument type for comparison operation ").nth(1) {
        let (left, op, right) = [" IS NOT DISTINCT FROM ", " IS DISTINCT FROM ", " >= ", " <= ", " <> ", " != ", " = ", " > ", " < "]
            .iter()
            .find_map(|op| rest.split_once(op).map(|(l, r)| (l, op.trim(), r)))?;
        return Some(format!("operator does not exist: {} {op} {}", type_name(left.trim()), type_name(right.trim())));
    }
    // DataFusion's "Cannot coerce arithmetic expression Utf8 + Int64 to valid types".
    if let Some(rest) = message.split("Cannot coerce arithmetic expression ").nth(1) {
        let expr = rest.split(" to valid types").next()?;
        let mut words = expr.split(' ');
        let (left, op, right) = (words.next()?, words.next()?, words.next()?);
        return Some(format!("operator does not exist: {} {op} {}", type_name(left), type_name(right)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    /// Each message DataFusion or Arrow gives, in the words a SQL user reads (Postgres's
    /// phrasing, Flink's type names).
    #[test]
    fn messages_name_sql_types_in_postgres_words() {
        let cases = [
            ("value out of range: Can't cast value 3000000000 to type Int32", "value 3000000000 is out of range for type INT"),
            ("Cast error: Cannot cast string 'abc' to value of Int32 type", "invalid input syntax for type INT: \"abc\""),
            ("Schema error: No field named nocol. Valid fields are t1.a.", "column \"nocol\" does not exist. Valid fields are t1.a."),
            ("No field named t.nme. Did you mean 't.name'?", "column \"nme\" does not exist. Did you mean 't.name'?"),
            (
                "function sum(Utf8View) does not exist: no version of it takes these argument types",
                "function sum(STRING) does not exist: no version of it takes these argument types",
            ),
            ("function hour(Date32) does not exist: HOUR takes a TIMESTAMP", "function hour(DATE) does not exist: HOUR takes a TIMESTAMP"),
            ("Error during planning: Cannot coerce arithmetic expression Utf8 + Int64 to valid types", "operator does not exist: STRING + BIGINT"),
            (
                "type_coercion: Cannot infer common argument type for comparison operation Int32 > Timestamp(ms, \"UTC\")",
                "operator does not exist: INT > TIMESTAMP_LTZ(3)",
            ),
        ];
        for (given, want) in cases {
            assert_eq!(rewrite(given).as_deref(), Some(want), "{given}");
        }
        assert_eq!(rewrite("relation \"x\" does not exist"), None);
    }
}

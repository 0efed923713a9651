//! A catalog relation as the engine and the sources read it: its columns as an Arrow schema,
//! its connector, and how its state table holds its rows.

use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use weir_catalog::{Relation, RelationKind};

use crate::error::{Result, WeirError};
use crate::runtime::table::RowLayout;

/// The Arrow schema of a relation's columns.
///
/// # Errors
/// `Internal` when a stored type string does not parse (a corrupt catalog).
pub fn relation_schema(rel: &Relation) -> Result<SchemaRef> {
    let fields = rel
        .columns
        .iter()
        .map(|c| {
            let t = DataType::from_str(&c.arrow_type).map_err(|e| {
                WeirError::internal(format!("stored type {} of {}.{}: {e}", c.arrow_type, rel.name, c.name))
            })?;
            Ok(Field::new(&c.name, t, c.nullable))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// The connector of a table (`table` for plain tables).
pub fn connector_of(rel: &Relation) -> &str {
    rel.options.get("connector").map(String::as_str).unwrap_or("table")
}

/// How a relation's state table holds its rows.
pub fn layout_of(rel: &Relation) -> RowLayout {
    match (rel.kind, &rel.stream_key) {
        (RelationKind::MaterializedView, None) => RowLayout::Multiset,
        _ => RowLayout::Rows,
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use arrow::datatypes::{DataType, IntervalUnit, TimeUnit};

    #[test]
    fn stored_type_strings_round_trip() {
        for t in [
            DataType::Int64,
            DataType::Decimal128(12, 2),
            DataType::Timestamp(TimeUnit::Millisecond, None),
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            DataType::Utf8,
            DataType::Date32,
            DataType::Interval(IntervalUnit::MonthDayNano),
            DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new("item", DataType::Int32, true))),
            DataType::Struct(
                vec![
                    arrow::datatypes::Field::new("a", DataType::Int32, true),
                    arrow::datatypes::Field::new("B c", DataType::Utf8, true),
                ]
                .into(),
            ),
            DataType::Map(
                std::sync::Arc::new(arrow::datatypes::Field::new(
                    "entries",
                    DataType::Struct(
                        vec![
                            arrow::datatypes::Field::new("key", DataType::Utf8, false),
                            arrow::datatypes::Field::new("value", DataType::Int64, true),
                        ]
                        .into(),
                    ),
                    false,
                )),
                false,
            ),
        ] {
            assert_eq!(DataType::from_str(&t.to_string()).expect("parses"), t, "{t}");
        }
    }
}

/// The session setting and job option that sets a job's parallelism (Flink's key).
pub const PARALLELISM: &str = "parallelism.default";

/// The parallelism in `options` (a view's or job's catalog options), if set.
///
/// # Errors
/// `InvalidOption` for a value that is not a whole number from 1 to
/// [`MAX_PARALLELISM`](crate::state::key_group::MAX_PARALLELISM).
pub fn parallelism_option(options: &std::collections::BTreeMap<String, String>) -> Result<Option<usize>> {
    let Some(v) = options.get(PARALLELISM) else { return Ok(None) };
    let max = crate::state::key_group::MAX_PARALLELISM;
    match v.trim().parse::<usize>() {
        Ok(p) if (1..=max).contains(&p) => Ok(Some(p)),
        _ => Err(WeirError::option(format!("'{PARALLELISM}' = '{v}': expected a whole number from 1 to {max}"))),
    }
}

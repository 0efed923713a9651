//! `maxwell-json` and `canal-json`: MySQL change logs from Maxwell and Canal as changelogs
//! (Flink's formats of the same names). Read only: write `debezium-json` to carry a changelog.
//!
//! - Maxwell: `{"database": .., "table": .., "type": "insert"|"update"|"delete", "data": {row},
//!   "old": {the changed columns' previous values}}`. `bootstrap-insert` is an insert;
//!   `bootstrap-start` and `bootstrap-complete` carry no row.
//! - Canal: `{"data": [{row}, ..], "old": [{changed columns}, ..] | null, "type":
//!   "INSERT"|"UPDATE"|"DELETE", "isDdl": bool, ..}`: one row per element of `data` (`old[i]`
//!   goes with `data[i]`); a DDL event (`isDdl`: true, or another type such as `CREATE`)
//!   carries no row, as Flink skips it.
//!
//! | type | rows |
//! | --- | --- |
//! | insert | `+I data` |
//! | update | `-U data with the "old" columns put back`, `+U data` |
//! | delete | `-D data` |
//!
//! The before image of an update is the row with each column named in `old` set to its value
//! there (also when that value is `null`), the rest from `data`. Values are read as `json`
//! reads them (numbers given as strings, as Canal writes them, are parsed).

use serde_json::{Map, Value};

use super::codec::{DecodeError, Decoded, Decoder, Op};
use super::json::JsonRows;
use crate::ConnectorError;

/// Which change log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeLog {
    Maxwell,
    Canal,
}

impl ChangeLog {
    fn name(self) -> &'static str {
        match self {
            ChangeLog::Maxwell => "maxwell-json",
            ChangeLog::Canal => "canal-json",
        }
    }
}

/// Decodes Maxwell or Canal JSON change events into a changelog of its schema.
#[derive(Debug, Clone)]
pub struct ChangeLogDecoder {
    log: ChangeLog,
    rows: JsonRows,
}

impl ChangeLogDecoder {
    /// A decoder of `log` events producing rows of `schema`; `ignore_parse_errors` reads values
    /// of the wrong type as NULL.
    ///
    /// # Errors
    /// [`ConnectorError::Unsupported`] when Arrow's JSON reader cannot build `schema`.
    pub fn try_new(log: ChangeLog, schema: arrow::datatypes::SchemaRef, ignore_parse_errors: bool) -> Result<Self, ConnectorError> {
        Ok(ChangeLogDecoder { log, rows: JsonRows::try_new(schema, ignore_parse_errors)? })
    }

    /// The row images of one event, with their operations; `Err` names what is wrong.
    fn images(&self, event: &Value) -> Result<Vec<(Map<String, Value>, Op)>, String> {
        let kind = event.get("type").and_then(Value::as_str).ok_or("no \"type\" field")?;
        let object = |v: &Value, what: &str| v.as_object().cloned().ok_or(format!("\"{what}\" is not an object"));
        let change = |data: Map<String, Value>, old: Option<&Value>, kind: &str| -> Result<Vec<(Map<String, Value>, Op)>, String> {
            Ok(match kind {
                "insert" | "bootstrap-insert" => vec![(data, Op::Insert)],
                "delete" => vec![(data, Op::Delete)],
                "update" => {
                    let mut before = data.clone();
                    if let Some(old) = old.filter(|o| !o.is_null()) {
                        before.extend(object(old, "old")?);
                    }
                    vec![(before, Op::UpdateBefore), (data, Op::UpdateAfter)]
                }
                other => return Err(format!("unknown type '{other}'")),
            })
        };
        match self.log {
            ChangeLog::Maxwell => match kind {
                "bootstrap-start" | "bootstrap-complete" => Ok(Vec::new()),
                _ => {
                    let data = object(event.get("data").ok_or("no \"data\" field")?, "data")?;
                    change(data, event.get("old"), kind)
                }
            },
            ChangeLog::Canal => {
                if event.get("isDdl").and_then(Value::as_bool) == Some(true)
                    || !matches!(kind, "INSERT" | "UPDATE" | "DELETE")
                {
                    return Ok(Vec::new());
                }
                let data = event.get("data").and_then(Value::as_array).ok_or("no \"data\" array")?;
                let old = event.get("old").and_then(Value::as_array);
                let mut out = Vec::new();
                for (i, row) in data.iter().enumerate() {
                    out.extend(change(object(row, "data")?, old.and_then(|o| o.get(i)), &kind.to_lowercase())?);
                }
                Ok(out)
            }
        }
    }
}

impl Decoder for ChangeLogDecoder {
    fn decode(&mut self, records: &[&[u8]]) -> Result<Decoded, ConnectorError> {
        let what = self.log.name();
        let mut errors = Vec::new();
        // Each image as a JSON object of the row, with its operation and record.
        let mut images: Vec<Vec<u8>> = Vec::new();
        let mut ops = Vec::new();
        let mut sources = Vec::new();
        for (index, record) in records.iter().enumerate() {
            let event: Value = match serde_json::from_slice(record) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(DecodeError { index, message: format!("{what}: {e}") });
                    continue;
                }
            };
            match self.images(&event) {
                Ok(rows) => {
                    for (row, op) in rows {
                        images.push(serde_json::to_vec(&Value::Object(row)).map_err(|e| ConnectorError::Internal {
                            message: format!("{what}: {e}"),
                        })?);
                        ops.push(op);
                        sources.push(index);
                    }
                }
                Err(message) => errors.push(DecodeError { index, message: format!("{what}: {message}") }),
            }
        }
        let slices: Vec<&[u8]> = images.iter().map(Vec::as_slice).collect();
        let decoded = self.rows.decode(&slices, what)?;
        // A bad image makes its whole record a dead letter: drop its other image too.
        let bad: std::collections::BTreeSet<usize> = decoded.errors.iter().map(|e| sources[e.index]).collect();
        for e in decoded.errors {
            errors.push(DecodeError { index: sources[e.index], message: e.message });
        }
        errors.sort_by_key(|e| e.index);
        errors.dedup_by_key(|e| e.index);
        let keep: Vec<u32> = decoded
            .sources
            .iter()
            .enumerate()
            .filter(|(_, image)| !bad.contains(&sources[**image]))
            .map(|(row, _)| row as u32)
            .collect();
        let batch = arrow::compute::take_record_batch(&decoded.batch, &arrow::array::UInt32Array::from(keep.clone()))
            .map_err(|e| ConnectorError::Internal { message: format!("{what}: {e}") })?;
        let kept_images: Vec<usize> = keep.iter().map(|r| decoded.sources[*r as usize]).collect();
        Ok(Decoded {
            batch,
            ops: Some(kept_images.iter().map(|i| ops[*i]).collect()),
            sources: kept_images.iter().map(|i| sources[*i]).collect(),
            errors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use std::sync::Arc;

    fn schema() -> arrow::datatypes::SchemaRef {
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true), Field::new("name", DataType::Utf8, true)]))
    }

    fn rows(d: &Decoded) -> Vec<(Op, i64, Option<String>)> {
        let ids = d.batch.column(0).as_primitive::<Int64Type>();
        let names = d.batch.column(1).as_string::<i32>();
        (0..d.batch.num_rows())
            .map(|i| {
                let op = d.ops.as_ref().map_or(Op::Insert, |o| o[i]);
                (op, ids.value(i), names.is_valid(i).then(|| names.value(i).to_string()))
            })
            .collect()
    }

    #[test]
    fn maxwell_events_become_a_changelog_and_bad_ones_dead_letters() {
        let mut d = ChangeLogDecoder::try_new(ChangeLog::Maxwell, schema(), false).expect("decoder");
        let records: Vec<&[u8]> = vec![
            br#"{"database":"db","table":"t","type":"insert","data":{"id":1,"name":"a"}}"#,
            br#"{"type":"update","data":{"id":1,"name":"b"},"old":{"name":"a"}}"#,
            br#"{"type":"update","data":{"id":1,"name":"c"},"old":{"name":null}}"#,
            br#"{"type":"bootstrap-start","data":{}}"#,
            br#"{"type":"truncate","data":{"id":2}}"#,
            br#"{"type":"delete","data":{"id":1,"name":"c"}}"#,
            br#"not json"#,
        ];
        let out = d.decode(&records).expect("decode");
        assert_eq!(
            rows(&out),
            vec![
                (Op::Insert, 1, Some("a".into())),
                (Op::UpdateBefore, 1, Some("a".into())),
                (Op::UpdateAfter, 1, Some("b".into())),
                // "old" says the name was NULL before: the before image has NULL, not "c".
                (Op::UpdateBefore, 1, None),
                (Op::UpdateAfter, 1, Some("c".into())),
                (Op::Delete, 1, Some("c".into())),
            ]
        );
        assert_eq!(out.sources, vec![0, 1, 1, 2, 2, 5]);
        assert_eq!(out.errors.iter().map(|e| e.index).collect::<Vec<_>>(), vec![4, 6]);
        assert!(out.errors[0].message.contains("unknown type 'truncate'"), "{}", out.errors[0].message);
    }

    #[test]
    fn canal_events_with_several_rows_and_string_numbers() {
        let mut d = ChangeLogDecoder::try_new(ChangeLog::Canal, schema(), false).expect("decoder");
        let records: Vec<&[u8]> = vec![
            br#"{"data":[{"id":"1","name":"a"},{"id":"2","name":"b"}],"old":null,"type":"INSERT","isDdl":false}"#,
            br#"{"data":[{"id":"2","name":"c"}],"old":[{"name":"b"}],"type":"UPDATE","isDdl":false}"#,
            br#"{"data":null,"old":null,"type":"CREATE","isDdl":true,"sql":"CREATE TABLE t (..)"}"#,
            br#"{"data":[{"id":"1","name":"a"}],"old":null,"type":"DELETE","isDdl":false}"#,
        ];
        let out = d.decode(&records).expect("decode");
        assert_eq!(
            rows(&out),
            vec![
                (Op::Insert, 1, Some("a".into())),
                (Op::Insert, 2, Some("b".into())),
                (Op::UpdateBefore, 2, Some("b".into())),
                (Op::UpdateAfter, 2, Some("c".into())),
                (Op::Delete, 1, Some("a".into())),
            ]
        );
        assert!(out.errors.is_empty(), "{:?}", out.errors);
    }
}

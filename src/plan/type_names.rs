//! The SQL names of Arrow types, as `DESCRIBE`, `SHOW CREATE TABLE` and `TYPEOF` show them.

use arrow::datatypes::{DataType, TimeUnit};

/// The fractional-second digits of a time unit: `TIMESTAMP(p)`'s `p`.
pub fn precision(unit: &TimeUnit) -> u8 {
    match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

/// The SQL name of an Arrow type, in Flink's spelling.
pub fn sql_type_name(t: &DataType) -> String {
    match t {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        // Flink has no unsigned types; these are the types the wire sends them as
        // ([`crate::sql::types::pg_type`]): ROW_NUMBER, RANK and DENSE_RANK are BIGINT, as in Flink.
        DataType::UInt8 => "SMALLINT".into(),
        DataType::UInt16 => "INT".into(),
        DataType::UInt32 | DataType::UInt64 => "BIGINT".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("DECIMAL({p}, {s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BYTES".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(u, None) => format!("TIMESTAMP({})", precision(u)),
        DataType::Timestamp(u, Some(_)) => format!("TIMESTAMP_LTZ({})", precision(u)),
        DataType::Interval(_) => "INTERVAL".into(),
        DataType::List(f) | DataType::LargeList(f) => format!("ARRAY<{}>", sql_type_name(f.data_type())),
        DataType::Struct(fields) => {
            let fields: Vec<String> = fields.iter().map(|f| format!("`{}` {}", f.name(), sql_type_name(f.data_type()))).collect();
            format!("ROW<{}>", fields.join(", "))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!("MAP<{}, {}>", sql_type_name(kv[0].data_type()), sql_type_name(kv[1].data_type()))
            }
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

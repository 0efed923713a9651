//! The `datagen` connector: Flink's DataGen source. Rows of the table's own columns, generated:
//! each column `random` (the default kind) or a `sequence`, per Flink's options:
//!
//! | option | meaning (Flink's) |
//! |---|---|
//! | `rows-per-second` | rows generated per second of wall time (default 10000) |
//! | `number-of-rows` | rows in all (default: unbounded, unless a sequence ends first) |
//! | `fields.<col>.kind` | `random` or `sequence` |
//! | `fields.<col>.min`, `.max` | a random number's bounds, inclusive (default: the type's range) |
//! | `fields.<col>.max-past` | a random DATE or TIMESTAMP lies up to this long before now (default 0: now) |
//! | `fields.<col>.length` | a random string's or byte string's length (default 100) |
//! | `fields.<col>.var-len` | `true`: the length is random, 1 to `length` |
//! | `fields.<col>.start`, `.end` | a sequence's first and last value, inclusive (both required) |
//! | `fields.<col>.null-rate` | the share of NULLs, 0 to 1 (default 0) |
//!
//! A table with a sequence is bounded: it ends after the shortest sequence's last value (or
//! `number-of-rows`, if fewer), as in Flink. Random strings are lower-case hex digits, as
//! Flink's `nextHexString`.
//!
//! Unlike Flink's, the random values are a function of the table, the column and the row's
//! position (a hash, not a stateful random generator), so a job that restarts from a committed
//! position generates the very rows it would have: nothing is lost or repeated. Random dates
//! and timestamps are relative to the moment each row is generated, as in Flink.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array, RecordBatch,
    RecordBatchOptions, StringBuilder, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, SchemaRef};

use crate::ConnectorError;

/// The table options of `datagen` besides the per-column `fields.<col>.*` ones.
pub const OPTIONS: &[&str] = &["rows-per-second", "number-of-rows"];

/// The per-column options, `fields.<col>.<option>`.
pub const FIELD_OPTIONS: &[&str] = &["kind", "min", "max", "max-past", "length", "var-len", "start", "end", "null-rate"];

/// Flink's default `rows-per-second`.
const DEFAULT_ROWS_PER_SECOND: f64 = 10_000.0;
/// Flink's default length of a random string.
const DEFAULT_LENGTH: usize = 100;

/// Whether `key` is one of datagen's per-column options (`fields.<col>.<option>`).
pub fn is_field_option(key: &str) -> bool {
    key.strip_prefix("fields.")
        .and_then(|rest| rest.rsplit_once('.'))
        .is_some_and(|(column, option)| !column.is_empty() && FIELD_OPTIONS.contains(&option))
}

/// How one column is generated.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Values drawn from the row's hash.
    Random {
        /// Inclusive bounds of a number, in the column's unit (an integer, a float, a
        /// decimal's unscaled value).
        min: f64,
        max: f64,
        /// For integers and decimals: the bounds as integers.
        int_min: i128,
        int_max: i128,
        max_past_ms: i64,
        length: usize,
        var_len: bool,
    },
    /// `start + position`, inclusive of `end`.
    Sequence { start: i128, end: i128 },
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    kind: Kind,
    null_rate: f64,
    /// Mixed into every value's hash: the table's and the column's names.
    seed: u64,
}

/// A `datagen` table's generator, at a position (the rows generated so far).
#[derive(Debug, Clone)]
pub struct DatagenGenerator {
    schema: SchemaRef,
    fields: Vec<Field>,
    rows_per_second: f64,
    total: Option<u64>,
    offset: u64,
}

impl DatagenGenerator {
    /// The generator of table `table` whose physical columns are `schema`, per `options`.
    ///
    /// # Errors
    /// [`ConnectorError::InvalidValue`] for an option value out of its range or of the wrong
    /// kind for its column (a `length` on a number, a `sequence` of BOOLEANs), or a
    /// `fields.<col>.*` option naming no column; `MissingOption` for a sequence without
    /// `start` or `end`; `Unsupported` for a column type datagen does not generate.
    pub fn try_new(options: &BTreeMap<String, String>, table: &str, schema: SchemaRef) -> Result<Self, ConnectorError> {
        for key in options.keys().filter(|k| is_field_option(k)) {
            let column = key["fields.".len()..].rsplit_once('.').map(|(c, _)| c).unwrap_or_default();
            if schema.field_with_name(column).is_err() {
                return Err(invalid(key, &options[key], "the name of a column of the table (computed columns are not generated)"));
            }
        }
        let rows_per_second = match options.get("rows-per-second") {
            Some(v) => v.trim().parse::<f64>().ok().filter(|r| *r > 0.0 && r.is_finite()).ok_or_else(|| {
                invalid("rows-per-second", v, "a number of rows greater than 0")
            })?,
            None => DEFAULT_ROWS_PER_SECOND,
        };
        let mut total = match options.get("number-of-rows") {
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| invalid("number-of-rows", v, "an integer >= 0"))?),
            None => None,
        };
        let mut fields = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let field = field_of(options, table, f.name(), f.data_type())?;
            if let Kind::Sequence { start, end } = field.kind {
                let rows = u64::try_from(end - start + 1).unwrap_or(u64::MAX);
                total = Some(total.map_or(rows, |t| t.min(rows)));
            }
            fields.push(field);
        }
        Ok(DatagenGenerator { schema, fields, rows_per_second, total, offset: 0 })
    }

    /// Rows generated per second of wall time.
    pub fn rows_per_second(&self) -> f64 {
        self.rows_per_second
    }

    /// The rows in all, for a bounded table.
    pub fn total_rows(&self) -> Option<u64> {
        self.total
    }

    /// The rows generated so far: the position.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Moves to position `offset` (a committed one).
    pub fn seek(&mut self, offset: u64) {
        self.offset = offset;
    }

    /// Whether a bounded table has generated all its rows.
    pub fn is_finished(&self) -> bool {
        self.total.is_some_and(|t| self.offset >= t)
    }

    /// The next up to `max_rows` rows (none once finished), dates and timestamps relative to
    /// `now_ms` (epoch ms).
    ///
    /// # Errors
    /// Arrow's, casting a generated column to its type.
    pub fn next_batch(&mut self, max_rows: usize, now_ms: i64) -> Result<Option<RecordBatch>, ConnectorError> {
        let left = self.total.map_or(u64::MAX, |t| t.saturating_sub(self.offset));
        let n = (max_rows as u64).min(left) as usize;
        if n == 0 {
            return Ok(None);
        }
        let rows: Vec<u64> = (self.offset..self.offset + n as u64).collect();
        let columns = self
            .schema
            .fields()
            .iter()
            .zip(&self.fields)
            .map(|(f, field)| column(field, f.data_type(), &rows, now_ms))
            .collect::<Result<Vec<_>, _>>()?;
        self.offset += n as u64;
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|e| ConnectorError::Internal { message: format!("datagen: {e}") })?;
        Ok(Some(batch))
    }
}

fn invalid(option: &str, value: &str, valid: &str) -> ConnectorError {
    ConnectorError::InvalidValue { option: option.into(), value: value.into(), valid: valid.into() }
}

/// The generator of column `name` of type `t`, from its `fields.<name>.*` options.
fn field_of(options: &BTreeMap<String, String>, table: &str, name: &str, t: &DataType) -> Result<Field, ConnectorError> {
    let key = |o: &str| format!("fields.{name}.{o}");
    let get = |o: &str| options.get(&key(o)).map(|v| (key(o), v.trim().to_string()));
    let unsupported = || ConnectorError::Unsupported {
        feature: format!(
            "datagen: column {name} of type {t}: datagen generates numbers, DECIMAL, BOOLEAN, strings, BYTES, DATE and TIMESTAMP; give this column a value with a computed column instead"
        ),
    };
    let (int_range, float_range): (Option<(i128, i128)>, Option<(f64, f64)>) = match t {
        DataType::Int8 => (Some((i8::MIN as i128, i8::MAX as i128)), None),
        DataType::Int16 => (Some((i16::MIN as i128, i16::MAX as i128)), None),
        DataType::Int32 => (Some((i32::MIN as i128, i32::MAX as i128)), None),
        DataType::Int64 => (Some((i64::MIN as i128, i64::MAX as i128)), None),
        DataType::Decimal128(p, _) => {
            let max = 10i128.pow(u32::from(*p)) - 1;
            (Some((-max, max)), None)
        }
        DataType::Float32 => (None, Some((f32::MIN as f64, f32::MAX as f64))),
        DataType::Float64 => (None, Some((f64::MIN, f64::MAX))),
        DataType::Boolean
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::Date32
        | DataType::Timestamp(..) => (None, None),
        _ => return Err(unsupported()),
    };
    let numeric = int_range.is_some() || float_range.is_some();
    let stringy = matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Binary);
    let timey = matches!(t, DataType::Date32 | DataType::Timestamp(..));
    let only_for = |o: &str, ok: bool, what: &str| -> Result<(), ConnectorError> {
        match get(o) {
            Some((k, v)) if !ok => Err(invalid(&k, &v, &format!("none: '{o}' is for {what}, and column {name} is {t}"))),
            _ => Ok(()),
        }
    };
    let null_rate = match get("null-rate") {
        Some((k, v)) => v.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r)).ok_or_else(|| invalid(&k, &v, "a number from 0 to 1"))?,
        None => 0.0,
    };
    let seed = fnv(&format!("{table}\u{0}{name}"));
    let kind = match get("kind").map(|(k, v)| (k, v.to_lowercase())) {
        Some((_, v)) if v == "sequence" => {
            if !(int_range.is_some() && !matches!(t, DataType::Decimal128(..)) || stringy && !matches!(t, DataType::Binary)) {
                return Err(invalid(&key("kind"), "sequence", &format!("'random': a sequence is of integers or strings, and column {name} is {t}")));
            }
            for o in ["min", "max", "max-past", "length", "var-len"] {
                only_for(o, false, "a random column")?;
            }
            let bound = |o: &str| -> Result<i128, ConnectorError> {
                let (k, v) = get(o).ok_or_else(|| ConnectorError::MissingOption { connector: "datagen".into(), option: key(o) })?;
                let n = v.parse::<i128>().map_err(|_| invalid(&k, &v, "an integer"))?;
                match int_range {
                    Some((lo, hi)) if n < lo || n > hi => Err(invalid(&k, &v, &format!("an integer from {lo} to {hi} (column {name} is {t})"))),
                    _ => Ok(n),
                }
            };
            let (start, end) = (bound("start")?, bound("end")?);
            if end < start {
                return Err(invalid(&key("end"), &end.to_string(), &format!("an integer >= 'start' ({start})")));
            }
            Kind::Sequence { start, end }
        }
        Some((k, v)) if v != "random" => return Err(invalid(&k, &v, "random, sequence")),
        _ => {
            only_for("start", false, "a sequence")?;
            only_for("end", false, "a sequence")?;
            only_for("min", numeric, "a number")?;
            only_for("max", numeric, "a number")?;
            only_for("length", stringy, "a string or BYTES")?;
            only_for("var-len", stringy, "a string or BYTES")?;
            only_for("max-past", timey, "a DATE or TIMESTAMP")?;
            if matches!(t, DataType::Boolean) {
                only_for("min", false, "a number")?;
            }
            let scale = match t {
                DataType::Decimal128(_, s) => 10f64.powi(i32::from(*s)),
                _ => 1.0,
            };
            let (mut int_min, mut int_max) = int_range.unwrap_or((0, 0));
            let (mut min, mut max) = float_range.unwrap_or((int_min as f64, int_max as f64));
            for (o, is_min) in [("min", true), ("max", false)] {
                let Some((k, v)) = get(o) else { continue };
                let x = v.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| invalid(&k, &v, "a number"))?;
                if let Some((lo, hi)) = int_range {
                    let n = (x * scale).round() as i128;
                    if n < lo || n > hi || (scale == 1.0 && x.fract() != 0.0) {
                        return Err(invalid(&k, &v, &format!("a value of column {name}'s type {t}")));
                    }
                    if is_min { int_min = n } else { int_max = n }
                } else if is_min {
                    min = x;
                } else {
                    max = x;
                }
            }
            if int_min > int_max || min > max {
                return Err(invalid(&key("max"), &get("max").map(|(_, v)| v).unwrap_or_default(), "a value >= 'min'"));
            }
            let max_past_ms = match get("max-past") {
                Some((k, v)) => crate::duration_ms(&v).filter(|d| *d >= 0).ok_or_else(|| invalid(&k, &v, "a duration such as '10 s' or '1 d'"))?,
                None => 0,
            };
            let length = match get("length") {
                Some((k, v)) => v.parse::<usize>().ok().filter(|l| (1..=1 << 20).contains(l)).ok_or_else(|| invalid(&k, &v, "an integer from 1 to 1048576"))?,
                None => DEFAULT_LENGTH,
            };
            let var_len = match get("var-len") {
                Some((k, v)) => v.parse::<bool>().map_err(|_| invalid(&k, &v, "true, false"))?,
                None => false,
            };
            Kind::Random { min, max, int_min, int_max, max_past_ms, length, var_len }
        }
    };
    Ok(Field { kind, null_rate, seed })
}

/// FNV-1a of `s`: a column's seed.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// SplitMix64's output function: a well-mixed 64-bit value of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `draw`-th 64-bit random value of `row` in the column seeded `seed`.
fn draw(seed: u64, row: u64, draw: u64) -> u64 {
    mix(seed ^ mix(row.wrapping_mul(0x100).wrapping_add(draw)))
}

/// A uniform value in `[0, 1)` from `bits`.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A uniform integer in `[lo, hi]` from `bits`.
fn in_range(bits: u64, lo: i128, hi: i128) -> i128 {
    let span = (hi - lo) as u128 + 1;
    lo + ((u128::from(bits) << 64 | u128::from(mix(bits))) % span) as i128
}

/// A random string's length: `length`, or with `var_len` one from 1 to `length` by `bits`.
fn random_len(bits: u64, length: usize, var_len: bool) -> usize {
    if var_len {
        1 + (bits % length as u64) as usize
    } else {
        length
    }
}

/// The column of type `t` for positions `rows`.
fn column(field: &Field, t: &DataType, rows: &[u64], now_ms: i64) -> Result<ArrayRef, ConnectorError> {
    let is_null = |row: u64| field.null_rate > 0.0 && unit(draw(field.seed, row, 1)) < field.null_rate;
    let bits = |row: u64| draw(field.seed, row, 0);
    let cast = |a: ArrayRef| -> Result<ArrayRef, ConnectorError> {
        if a.data_type() == t {
            return Ok(a);
        }
        arrow::compute::cast(&a, t).map_err(|e| ConnectorError::Internal { message: format!("datagen: {e}") })
    };
    let array: ArrayRef = match (&field.kind, t) {
        (Kind::Sequence { start, .. }, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            let mut b = StringBuilder::new();
            for &r in rows {
                if is_null(r) { b.append_null() } else { b.append_value((start + i128::from(r)).to_string()) }
            }
            Arc::new(b.finish())
        }
        (Kind::Sequence { start, .. }, _) => Arc::new(Int64Array::from_iter(
            rows.iter().map(|&r| (!is_null(r)).then(|| (start + i128::from(r)) as i64)),
        )),
        (Kind::Random { int_min, int_max, .. }, DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64) => {
            Arc::new(Int64Array::from_iter(rows.iter().map(|&r| (!is_null(r)).then(|| in_range(bits(r), *int_min, *int_max) as i64))))
        }
        (Kind::Random { int_min, int_max, .. }, DataType::Decimal128(p, s)) => Arc::new(
            Decimal128Array::from_iter(rows.iter().map(|&r| (!is_null(r)).then(|| in_range(bits(r), *int_min, *int_max))))
                .with_precision_and_scale(*p, *s)
                .map_err(|e| ConnectorError::Internal { message: format!("datagen: {e}") })?,
        ),
        (Kind::Random { min, max, .. }, DataType::Float32 | DataType::Float64) => Arc::new(Float64Array::from_iter(
            // Weighted, not `min + u * (max - min)`: the default range, the type's whole one,
            // is wider than the largest double.
            rows.iter().map(|&r| (!is_null(r)).then(|| {
                let u = unit(bits(r));
                min * (1.0 - u) + max * u
            })),
        )),
        (Kind::Random { .. }, DataType::Boolean) => {
            Arc::new(BooleanArray::from_iter(rows.iter().map(|&r| (!is_null(r)).then(|| bits(r) & 1 == 1))))
        }
        (Kind::Random { length, var_len, .. }, DataType::Binary) => {
            let mut b = BinaryBuilder::new();
            for &r in rows {
                if is_null(r) {
                    b.append_null();
                    continue;
                }
                let len = random_len(bits(r), *length, *var_len);
                let bytes: Vec<u8> = (0..len).map(|i| draw(field.seed, r, 2 + (i / 8) as u64).to_le_bytes()[i % 8]).collect();
                b.append_value(bytes);
            }
            Arc::new(b.finish())
        }
        (Kind::Random { length, var_len, .. }, _) if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let mut b = StringBuilder::new();
            let mut s = String::new();
            for &r in rows {
                if is_null(r) {
                    b.append_null();
                    continue;
                }
                let len = random_len(bits(r), *length, *var_len);
                s.clear();
                for i in 0..len {
                    let word = draw(field.seed, r, 2 + (i / 16) as u64);
                    s.push(HEX[((word >> ((i % 16) * 4)) & 0xF) as usize] as char);
                }
                b.append_value(&s);
            }
            Arc::new(b.finish())
        }
        (Kind::Random { max_past_ms, .. }, DataType::Date32) => {
            let days = max_past_ms / 86_400_000;
            Arc::new(Date32Array::from_iter(rows.iter().map(|&r| {
                (!is_null(r)).then(|| (now_ms.div_euclid(86_400_000) - in_range(bits(r), 0, i128::from(days)) as i64) as i32)
            })))
        }
        (Kind::Random { max_past_ms, .. }, DataType::Timestamp(..)) => Arc::new(TimestampMillisecondArray::from_iter(
            rows.iter().map(|&r| (!is_null(r)).then(|| now_ms - in_range(bits(r), 0, i128::from(*max_past_ms)) as i64)),
        )),
        _ => return Err(ConnectorError::Internal { message: format!("datagen: no generator for a column of type {t}") }),
    };
    cast(array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Field as ArrowField, Int32Type, Int64Type, Schema};

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn schema(fields: &[(&str, DataType)]) -> SchemaRef {
        Arc::new(Schema::new(fields.iter().map(|(n, t)| ArrowField::new(*n, t.clone(), true)).collect::<Vec<_>>()))
    }

    /// A sequence bounds the table (Flink): ids 5..=9 then nothing; random INTs stay within
    /// their bounds, strings have their length, and a restart from a position regenerates the
    /// very rows that followed it.
    #[test]
    fn sequences_bound_random_values_stay_in_range_and_repeat_from_a_position() {
        let s = schema(&[("id", DataType::Int64), ("n", DataType::Int32), ("name", DataType::Utf8)]);
        let o = opts(&[
            ("fields.id.kind", "sequence"),
            ("fields.id.start", "5"),
            ("fields.id.end", "9"),
            ("fields.n.min", "-3"),
            ("fields.n.max", "3"),
            ("fields.name.length", "20"),
        ]);
        let mut g = DatagenGenerator::try_new(&o, "t", Arc::clone(&s)).expect("generator");
        assert_eq!(g.total_rows(), Some(5));
        let first = g.next_batch(3, 0).expect("batch").expect("rows");
        let rest = g.next_batch(10, 0).expect("batch").expect("rows");
        assert!(g.is_finished() && g.next_batch(10, 0).expect("batch").is_none());
        let ids: Vec<i64> = [&first, &rest].iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
        assert_eq!(ids, vec![5, 6, 7, 8, 9]);
        for b in [&first, &rest] {
            assert!(b.column(1).as_primitive::<Int32Type>().values().iter().all(|n| (-3..=3).contains(n)));
            let names = b.column(2).as_string::<i32>();
            assert!(names.iter().all(|v| v.is_some_and(|v| v.len() == 20 && v.chars().all(|c| c.is_ascii_hexdigit()))));
        }
        let mut again = DatagenGenerator::try_new(&o, "t", s).expect("generator");
        again.seek(3);
        assert_eq!(again.next_batch(10, 0).expect("batch").expect("rows"), rest);
    }

    /// Over many rows every value of a small range comes up, NULLs come at about their rate,
    /// and timestamps lie within `max-past` before now.
    #[test]
    fn random_values_cover_their_range_nulls_and_the_past() {
        let s = schema(&[("d", DataType::Int64), ("ts", DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None))]);
        let o = opts(&[("fields.d.min", "1"), ("fields.d.max", "6"), ("fields.d.null-rate", "0.25"), ("fields.ts.max-past", "10 s")]);
        let mut g = DatagenGenerator::try_new(&o, "dice", s).expect("generator");
        assert_eq!(g.total_rows(), None);
        let b = g.next_batch(4000, 1_000_000).expect("batch").expect("rows");
        let d = b.column(0).as_primitive::<Int64Type>();
        let mut seen = [0usize; 7];
        for v in d.iter().flatten() {
            seen[v as usize] += 1;
        }
        assert!(seen[1..].iter().all(|n| *n > 300), "{seen:?}");
        assert!((800..1200).contains(&d.null_count()), "{} NULLs of 4000 at 0.25", d.null_count());
        let ts = b.column(1).as_primitive::<arrow::datatypes::TimestampMillisecondType>();
        assert!(ts.values().iter().all(|t| (990_000..=1_000_000).contains(t)));
        // A DOUBLE without bounds ranges over the type's finite values.
        let s = schema(&[("x", DataType::Float64)]);
        let mut g = DatagenGenerator::try_new(&opts(&[]), "t", s).expect("generator");
        let x = g.next_batch(1000, 0).expect("batch").expect("rows");
        let x = x.column(0).as_primitive::<arrow::datatypes::Float64Type>();
        assert!(x.values().iter().all(|v| v.is_finite()) && x.values().iter().any(|v| *v < 0.0) && x.values().iter().any(|v| *v > 0.0));
    }

    /// Options Flink refuses are refused, naming the option.
    #[test]
    fn bad_options_are_refused() {
        let s = schema(&[("id", DataType::Int32), ("b", DataType::Boolean), ("name", DataType::Utf8)]);
        let err = |pairs: &[(&str, &str)]| DatagenGenerator::try_new(&opts(pairs), "t", Arc::clone(&s)).expect_err("refused").to_string();
        assert!(err(&[("fields.id.kind", "sequence"), ("fields.id.start", "1")]).contains("fields.id.end"));
        assert!(err(&[("fields.nosuch.min", "1")]).contains("fields.nosuch.min"));
        assert!(err(&[("fields.id.min", "3000000000")]).contains("fields.id.min"));
        assert!(err(&[("fields.id.length", "3")]).contains("fields.id.length"));
        assert!(err(&[("fields.b.kind", "sequence"), ("fields.b.start", "0"), ("fields.b.end", "1")]).contains("fields.b.kind"));
        assert!(err(&[("rows-per-second", "0")]).contains("rows-per-second"));
        assert!(err(&[("fields.id.min", "5"), ("fields.id.max", "1")]).contains("fields.id.max"));
        let unsupported = DatagenGenerator::try_new(
            &opts(&[]),
            "t",
            schema(&[("l", DataType::List(Arc::new(ArrowField::new("item", DataType::Int32, true))))]),
        );
        assert!(unsupported.is_err());
    }
}

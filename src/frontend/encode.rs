//! Arrow → Postgres: the type of each Arrow column on the wire, and its values in the Postgres
//! text format (as psql shows them) or binary format (as the client asked in Bind).
//!
//! | Arrow                                   | Postgres                                   |
//! |-----------------------------------------|--------------------------------------------|
//! | Boolean                                 | `bool`                                     |
//! | Int8, Int16, UInt8                      | `int2`                                     |
//! | Int32, UInt16                           | `int4`                                     |
//! | Int64, UInt32, UInt64                   | `int8` (a UInt64 above i64's range: an error) |
//! | Decimal32/64/128/256                    | `numeric` (typmod from precision, scale)   |
//! | Float16, Float32                        | `float4`                                   |
//! | Float64                                 | `float8`                                   |
//! | Utf8, LargeUtf8, Utf8View               | `text`                                     |
//! | Binary, LargeBinary, BinaryView, FixedSizeBinary | `bytea`                           |
//! | Date32, Date64                          | `date`                                     |
//! | Time32, Time64                          | `time`                                     |
//! | Timestamp(_, None)                      | `timestamp`                                |
//! | Timestamp(_, Some(tz))                  | `timestamptz` (shown in the zone its type names: the session time zone, `StatementResult::shown_in`) |
//! | Interval, Duration                      | `interval`                                 |
//! | List, LargeList, FixedSizeList of one of the above | its array type (`int8[]`, ...)  |
//! | Dictionary(_, v)                        | as `v`                                     |
//! | anything else (Struct, Map, nested lists, ...) | `text`, Arrow's display of the value |
//!
//! Work is column-wise: [`encode_batch`] downcasts each column once per batch into an
//! `Encoder`, then writes every row's fields into one growing buffer that is split into
//! `DataRow`s, so no value allocates. The text forms are in `encode/text.rs`, the binary
//! forms in `encode/binary.rs`.

mod binary;
mod text;

use std::borrow::Cow;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray, BooleanArray, FixedSizeBinaryArray,
    LargeBinaryArray, LargeStringArray, StringArray, StringViewArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    i256, ArrowPrimitiveType, DataType, Date32Type, Date64Type, Decimal128Type, Decimal256Type,
    Decimal32Type, Decimal64Type, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Float16Type, Float32Type, Float64Type, Int16Type,
    Int32Type, Int64Type, Int8Type, IntervalDayTime, IntervalDayTimeType, IntervalMonthDayNano,
    IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType, Schema, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use bytes::{BufMut, BytesMut};
use chrono::NaiveDate;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;

use super::error::{FrontendError, Result};
pub use crate::sql::types::pg_type;
use crate::plan::time_zone::Zone;
use crate::sql::types::array_type;
use text::StackBuf;

/// Arrow's half-precision float (the `half` crate's, which we do not name).
type F16 = <Float16Type as ArrowPrimitiveType>::Native;

/// Nanoseconds per microsecond, second, day.
const NANOS_PER_MICRO: i64 = 1_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;
/// Milliseconds per day (Date64).
const MILLIS_PER_DAY: i64 = 86_400_000;
/// Days from 0001-01-01 (chrono's day 1) to 1970-01-01.
const UNIX_EPOCH_DAYS_FROM_CE: i64 = 719_163;

/// The RowDescription fields of `schema`, each in the format `formats` gives it (Bind's result
/// format codes: none means all text, one applies to all, else one per column).
///
/// # Errors
/// [`FrontendError::FormatCount`] when there are several format codes but not one per column.
pub fn field_infos(schema: &Schema, formats: &Format) -> Result<Vec<FieldInfo>> {
    let num_fields = schema.fields().len();
    if let Format::Individual(codes) = formats {
        if codes.len() != num_fields {
            return Err(FrontendError::FormatCount {
                what: "result",
                given: codes.len(),
                expected: num_fields,
            });
        }
    }
    let fields = schema.fields().iter().enumerate().map(|(i, field)| {
        let info = FieldInfo::new(
            field.name().clone(),
            None,
            None,
            pg_type(field.data_type()),
            formats.format_for(i),
        );
        match numeric_precision_scale(field.data_type()) {
            // atttypmod of numeric(p, s): ((p << 16) | s) + VARHDRSZ.
            Some((precision, scale)) => {
                info.with_type_modifier(((i32::from(precision) << 16) | i32::from(scale as u8)) + 4)
            }
            None => info,
        }
    });
    Ok(fields.collect())
}

/// Precision and (non-negative) scale of a decimal type.
fn numeric_precision_scale(data_type: &DataType) -> Option<(u8, i8)> {
    match data_type {
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s)
            if *s >= 0 =>
        {
            Some((*p, *s))
        }
        _ => None,
    }
}

/// The `DataRow`s of `batch`, each field in the type and format of `fields` (made by
/// [`field_infos`] from the batch's schema).
///
/// # Errors
/// [`FrontendError::DatetimeOutOfRange`] for a date or time Postgres cannot hold,
/// [`FrontendError::ProgramLimit`] for a value over 2 GiB or more than 32767 columns.
pub fn encode_batch(batch: &RecordBatch, fields: &[FieldInfo]) -> Result<Vec<DataRow>> {
    if batch.num_columns() != fields.len() {
        return Err(FrontendError::Database(crate::error::WeirError::internal(
            format!(
                "a batch of {} columns for a row description of {}",
                batch.num_columns(),
                fields.len()
            ),
        )));
    }
    let num_columns = i16::try_from(fields.len()).map_err(|_| {
        FrontendError::ProgramLimit(format!("{} columns exceed 32767", fields.len()))
    })?;
    let columns = batch
        .columns()
        .iter()
        .map(decode_dictionary)
        .collect::<Result<Vec<_>>>()?;
    let encoders = columns
        .iter()
        .zip(fields)
        .map(|(column, field)| Ok((Encoder::try_new(column.as_ref())?, field.format())))
        .collect::<Result<Vec<_>>>()?;

    let mut out = BytesMut::with_capacity(batch.num_rows() * (8 + 12 * fields.len()));
    let mut rows = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        for (encoder, format) in &encoders {
            encoder.write_field(row, *format, &mut out)?;
        }
        rows.push(DataRow::new(out.split(), num_columns));
    }
    Ok(rows)
}

/// A dictionary-encoded column as plain values (once per batch), anything else as it is.
fn decode_dictionary(column: &ArrayRef) -> Result<Cow<'_, ArrayRef>> {
    match column.data_type() {
        DataType::Dictionary(_, values) => {
            let plain =
                arrow::compute::cast(column, values).map_err(crate::error::WeirError::from)?;
            Ok(Cow::Owned(plain))
        }
        _ => Ok(Cow::Borrowed(column)),
    }
}

/// One column of one batch, downcast once: writes the field of any row.
struct Encoder<'a> {
    /// Which rows are NULL (logical nulls, so a `Null` column is all NULL).
    nulls: Option<NullBuffer>,
    values: Values<'a>,
}

/// The typed values of a column.
enum Values<'a> {
    Null,
    Bool(&'a BooleanArray),
    Int8(&'a [i8]),
    Int16(&'a [i16]),
    Int32(&'a [i32]),
    Int64(&'a [i64]),
    UInt8(&'a [u8]),
    UInt16(&'a [u16]),
    UInt32(&'a [u32]),
    UInt64(&'a [u64]),
    Float16(&'a [F16]),
    Float32(&'a [f32]),
    Float64(&'a [f64]),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    BinaryView(&'a BinaryViewArray),
    FixedSizeBinary(&'a FixedSizeBinaryArray),
    Decimal32(&'a [i32], i8),
    Decimal64(&'a [i64], i8),
    Decimal128(&'a [i128], i8),
    Decimal256(&'a [i256], i8),
    /// Days since 1970-01-01.
    Date32(&'a [i32]),
    /// Milliseconds since 1970-01-01.
    Date64(&'a [i64]),
    /// Since 1970-01-01 00:00:00 UTC in `unit`; for a `timestamptz`, the zone it is shown in
    /// (the session time zone the column's type names).
    Timestamp {
        values: &'a [i64],
        unit: TimeUnit,
        zone: Option<Zone>,
    },
    /// Since midnight in `unit`.
    Time32(&'a [i32], TimeUnit),
    Time64(&'a [i64], TimeUnit),
    Duration(&'a [i64], TimeUnit),
    IntervalYearMonth(&'a [i32]),
    IntervalDayTime(&'a [IntervalDayTime]),
    IntervalMonthDayNano(&'a [IntervalMonthDayNano]),
    /// A list of scalars as a Postgres array.
    List {
        offsets: ListOffsets<'a>,
        elements: Box<Encoder<'a>>,
        element_type: Type,
    },
    /// Anything else, as Arrow displays it.
    Display(ArrayFormatter<'a>),
}

/// Where each list's elements are in its child array.
enum ListOffsets<'a> {
    Small(&'a [i32]),
    Large(&'a [i64]),
    Fixed(usize),
}

impl ListOffsets<'_> {
    /// The element range of list `row`.
    fn range(&self, row: usize) -> std::ops::Range<usize> {
        match self {
            ListOffsets::Small(offsets) => offsets[row] as usize..offsets[row + 1] as usize,
            ListOffsets::Large(offsets) => offsets[row] as usize..offsets[row + 1] as usize,
            ListOffsets::Fixed(size) => row * size..(row + 1) * size,
        }
    }
}

impl<'a> Encoder<'a> {
    /// Downcasts `array` according to its data type (dictionaries already decoded).
    fn try_new(array: &'a dyn Array) -> Result<Self> {
        let values = match array.data_type() {
            DataType::Null => Values::Null,
            DataType::Boolean => Values::Bool(array.as_boolean()),
            DataType::Int8 => Values::Int8(array.as_primitive::<Int8Type>().values()),
            DataType::Int16 => Values::Int16(array.as_primitive::<Int16Type>().values()),
            DataType::Int32 => Values::Int32(array.as_primitive::<Int32Type>().values()),
            DataType::Int64 => Values::Int64(array.as_primitive::<Int64Type>().values()),
            DataType::UInt8 => Values::UInt8(array.as_primitive::<UInt8Type>().values()),
            DataType::UInt16 => Values::UInt16(array.as_primitive::<UInt16Type>().values()),
            DataType::UInt32 => Values::UInt32(array.as_primitive::<UInt32Type>().values()),
            DataType::UInt64 => Values::UInt64(array.as_primitive::<UInt64Type>().values()),
            DataType::Float16 => Values::Float16(array.as_primitive::<Float16Type>().values()),
            DataType::Float32 => Values::Float32(array.as_primitive::<Float32Type>().values()),
            DataType::Float64 => Values::Float64(array.as_primitive::<Float64Type>().values()),
            DataType::Utf8 => Values::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Values::LargeUtf8(array.as_string::<i64>()),
            DataType::Utf8View => Values::Utf8View(array.as_string_view()),
            DataType::Binary => Values::Binary(array.as_binary::<i32>()),
            DataType::LargeBinary => Values::LargeBinary(array.as_binary::<i64>()),
            DataType::BinaryView => Values::BinaryView(array.as_binary_view()),
            DataType::FixedSizeBinary(_) => Values::FixedSizeBinary(array.as_fixed_size_binary()),
            DataType::Decimal32(_, scale) => {
                Values::Decimal32(array.as_primitive::<Decimal32Type>().values(), *scale)
            }
            DataType::Decimal64(_, scale) => {
                Values::Decimal64(array.as_primitive::<Decimal64Type>().values(), *scale)
            }
            DataType::Decimal128(_, scale) => {
                Values::Decimal128(array.as_primitive::<Decimal128Type>().values(), *scale)
            }
            DataType::Decimal256(_, scale) => {
                Values::Decimal256(array.as_primitive::<Decimal256Type>().values(), *scale)
            }
            DataType::Date32 => Values::Date32(array.as_primitive::<Date32Type>().values()),
            DataType::Date64 => Values::Date64(array.as_primitive::<Date64Type>().values()),
            DataType::Timestamp(unit, tz) => Values::Timestamp {
                values: match unit {
                    TimeUnit::Second => array.as_primitive::<TimestampSecondType>().values(),
                    TimeUnit::Millisecond => {
                        array.as_primitive::<TimestampMillisecondType>().values()
                    }
                    TimeUnit::Microsecond => {
                        array.as_primitive::<TimestampMicrosecondType>().values()
                    }
                    TimeUnit::Nanosecond => {
                        array.as_primitive::<TimestampNanosecondType>().values()
                    }
                },
                unit: *unit,
                zone: tz.as_deref().map(|tz| Zone::session(tz).unwrap_or_default()),
            },
            DataType::Time32(unit @ TimeUnit::Second) => {
                Values::Time32(array.as_primitive::<Time32SecondType>().values(), *unit)
            }
            DataType::Time32(unit) => Values::Time32(
                array.as_primitive::<Time32MillisecondType>().values(),
                *unit,
            ),
            DataType::Time64(unit @ TimeUnit::Microsecond) => Values::Time64(
                array.as_primitive::<Time64MicrosecondType>().values(),
                *unit,
            ),
            DataType::Time64(unit) => {
                Values::Time64(array.as_primitive::<Time64NanosecondType>().values(), *unit)
            }
            DataType::Duration(unit) => Values::Duration(
                match unit {
                    TimeUnit::Second => array.as_primitive::<DurationSecondType>().values(),
                    TimeUnit::Millisecond => {
                        array.as_primitive::<DurationMillisecondType>().values()
                    }
                    TimeUnit::Microsecond => {
                        array.as_primitive::<DurationMicrosecondType>().values()
                    }
                    TimeUnit::Nanosecond => array.as_primitive::<DurationNanosecondType>().values(),
                },
                *unit,
            ),
            DataType::Interval(IntervalUnit::YearMonth) => {
                Values::IntervalYearMonth(array.as_primitive::<IntervalYearMonthType>().values())
            }
            DataType::Interval(IntervalUnit::DayTime) => {
                Values::IntervalDayTime(array.as_primitive::<IntervalDayTimeType>().values())
            }
            DataType::Interval(IntervalUnit::MonthDayNano) => Values::IntervalMonthDayNano(
                array.as_primitive::<IntervalMonthDayNanoType>().values(),
            ),
            DataType::List(element) if array_type(element.data_type()).is_some() => {
                let list = array.as_list::<i32>();
                Values::List {
                    offsets: ListOffsets::Small(list.value_offsets()),
                    elements: Box::new(Encoder::try_new(list.values().as_ref())?),
                    element_type: pg_type(element.data_type()),
                }
            }
            DataType::LargeList(element) if array_type(element.data_type()).is_some() => {
                let list = array.as_list::<i64>();
                Values::List {
                    offsets: ListOffsets::Large(list.value_offsets()),
                    elements: Box::new(Encoder::try_new(list.values().as_ref())?),
                    element_type: pg_type(element.data_type()),
                }
            }
            DataType::FixedSizeList(element, size) if array_type(element.data_type()).is_some() => {
                let list = array.as_fixed_size_list();
                Values::List {
                    offsets: ListOffsets::Fixed(usize::try_from(*size).unwrap_or(0)),
                    elements: Box::new(Encoder::try_new(list.values().as_ref())?),
                    element_type: pg_type(element.data_type()),
                }
            }
            _ => Values::Display(
                ArrayFormatter::try_new(array, &FormatOptions::default())
                    .map_err(crate::error::WeirError::from)?,
            ),
        };
        Ok(Self {
            nulls: array.logical_nulls(),
            values,
        })
    }

    fn is_null(&self, row: usize) -> bool {
        matches!(self.values, Values::Null)
            || self.nulls.as_ref().is_some_and(|nulls| nulls.is_null(row))
    }

    /// Writes field `row` as the protocol frames it: its length (-1 for NULL), then its bytes.
    fn write_field(&self, row: usize, format: FieldFormat, out: &mut BytesMut) -> Result<()> {
        if self.is_null(row) {
            out.put_i32(-1);
            return Ok(());
        }
        let length_at = out.len();
        out.put_i32(0);
        match format {
            FieldFormat::Text => self.write_text(row, out)?,
            FieldFormat::Binary => self.write_binary(row, out)?,
        }
        let length = i32::try_from(out.len() - length_at - 4).map_err(|_| {
            FrontendError::ProgramLimit(format!(
                "a value of {} bytes exceeds the protocol's 2 GiB",
                out.len() - length_at - 4
            ))
        })?;
        out[length_at..length_at + 4].copy_from_slice(&length.to_be_bytes());
        Ok(())
    }

    /// Writes the text form of non-NULL value `row`.
    fn write_text(&self, row: usize, out: &mut BytesMut) -> Result<()> {
        match &self.values {
            Values::Null => {}
            Values::Bool(array) => text::write_bool(array.value(row), out),
            Values::Int8(values) => text::write_int(values[row], out),
            Values::Int16(values) => text::write_int(values[row], out),
            Values::Int32(values) => text::write_int(values[row], out),
            Values::Int64(values) => text::write_int(values[row], out),
            Values::UInt8(values) => text::write_int(values[row], out),
            Values::UInt16(values) => text::write_int(values[row], out),
            Values::UInt32(values) => text::write_int(values[row], out),
            Values::UInt64(values) => text::write_int(values[row], out),
            Values::Float16(values) => text::write_f32(values[row].to_f32(), out),
            Values::Float32(values) => text::write_f32(values[row], out),
            Values::Float64(values) => text::write_f64(values[row], out),
            Values::Utf8(array) => out.put_slice(array.value(row).as_bytes()),
            Values::LargeUtf8(array) => out.put_slice(array.value(row).as_bytes()),
            Values::Utf8View(array) => out.put_slice(array.value(row).as_bytes()),
            Values::Binary(array) => text::write_bytea(array.value(row), out),
            Values::LargeBinary(array) => text::write_bytea(array.value(row), out),
            Values::BinaryView(array) => text::write_bytea(array.value(row), out),
            Values::FixedSizeBinary(array) => text::write_bytea(array.value(row), out),
            Values::Decimal32(values, scale) => {
                text::write_decimal(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Decimal64(values, scale) => {
                text::write_decimal(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Decimal128(values, scale) => {
                text::write_decimal(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Decimal256(values, scale) => {
                text::write_decimal(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Date32(values) => text::write_date(date(i64::from(values[row]))?, out),
            Values::Date64(values) => {
                text::write_date(date(values[row].div_euclid(MILLIS_PER_DAY))?, out)
            }
            Values::Timestamp {
                values,
                unit,
                zone,
            } => {
                let (seconds, nanos) = split_seconds(values[row], *unit);
                let offset = zone.map(|z| z.offset_at_seconds(seconds));
                text::write_timestamp(seconds, nanos, offset, out)
                    .ok_or_else(|| out_of_range("timestamp", values[row], *unit))?
            }
            Values::Time32(values, unit) => {
                text::write_time(time_nanos(i64::from(values[row]), *unit)?, out)
            }
            Values::Time64(values, unit) => text::write_time(time_nanos(values[row], *unit)?, out),
            Values::Duration(values, unit) => {
                text::write_interval(0, 0, nanos(values[row], *unit), out)
            }
            Values::IntervalYearMonth(values) => {
                text::write_interval(i64::from(values[row]), 0, 0, out)
            }
            Values::IntervalDayTime(values) => {
                let IntervalDayTime { days, milliseconds } = values[row];
                text::write_interval(0, days.into(), i128::from(milliseconds) * 1_000_000, out)
            }
            Values::IntervalMonthDayNano(values) => {
                let IntervalMonthDayNano {
                    months,
                    days,
                    nanoseconds,
                } = values[row];
                text::write_interval(months.into(), days.into(), nanoseconds.into(), out)
            }
            Values::List {
                offsets, elements, ..
            } => {
                out.put_u8(b'{');
                for (i, element) in offsets.range(row).enumerate() {
                    if i > 0 {
                        out.put_u8(b',');
                    }
                    if elements.is_null(element) {
                        out.put_slice(b"NULL");
                    } else {
                        let start = out.len();
                        elements.write_text(element, out)?;
                        text::quote_array_element(out, start);
                    }
                }
                out.put_u8(b'}');
            }
            Values::Display(formatter) => {
                use std::fmt::Write as _;
                write!(out, "{}", formatter.value(row)).map_err(|_| {
                    crate::error::WeirError::internal(format!("cannot display value {row}"))
                })?
            }
        }
        Ok(())
    }

    /// Writes the binary form of non-NULL value `row`.
    fn write_binary(&self, row: usize, out: &mut BytesMut) -> Result<()> {
        match &self.values {
            Values::Null => {}
            Values::Bool(array) => out.put_u8(u8::from(array.value(row))),
            Values::Int8(values) => out.put_i16(values[row].into()),
            Values::Int16(values) => out.put_i16(values[row]),
            Values::Int32(values) => out.put_i32(values[row]),
            Values::Int64(values) => out.put_i64(values[row]),
            Values::UInt8(values) => out.put_i16(values[row].into()),
            Values::UInt16(values) => out.put_i32(values[row].into()),
            Values::UInt32(values) => out.put_i64(values[row].into()),
            // COUNT, ROW_NUMBER and the like: bigint, as Postgres and Flink type them.
            Values::UInt64(values) => out.put_i64(i64::try_from(values[row]).map_err(|_| {
                crate::error::WeirError::execution(format!("value {} is out of range for type bigint", values[row]))
            })?),
            Values::Float16(values) => out.put_f32(values[row].to_f32()),
            Values::Float32(values) => out.put_f32(values[row]),
            Values::Float64(values) => out.put_f64(values[row]),
            Values::Utf8(array) => out.put_slice(array.value(row).as_bytes()),
            Values::LargeUtf8(array) => out.put_slice(array.value(row).as_bytes()),
            Values::Utf8View(array) => out.put_slice(array.value(row).as_bytes()),
            Values::Binary(array) => out.put_slice(array.value(row)),
            Values::LargeBinary(array) => out.put_slice(array.value(row)),
            Values::BinaryView(array) => out.put_slice(array.value(row)),
            Values::FixedSizeBinary(array) => out.put_slice(array.value(row)),
            Values::Decimal32(values, scale) => {
                binary::write_numeric(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Decimal64(values, scale) => {
                binary::write_numeric(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Decimal128(values, scale) => {
                binary::write_numeric(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Decimal256(values, scale) => {
                binary::write_numeric(StackBuf::display(values[row]).as_str(), *scale, out)
            }
            Values::Date32(values) => binary::write_date(values[row].into(), out)
                .ok_or_else(|| date_out_of_range(values[row].into()))?,
            Values::Date64(values) => {
                let days = values[row].div_euclid(MILLIS_PER_DAY);
                binary::write_date(days, out).ok_or_else(|| date_out_of_range(days))?
            }
            Values::Timestamp { values, unit, .. } => {
                let micros = micros(values[row], *unit)
                    .ok_or_else(|| out_of_range("timestamp", values[row], *unit))?;
                binary::write_timestamp(micros, out)
                    .ok_or_else(|| out_of_range("timestamp", values[row], *unit))?
            }
            Values::Time32(values, unit) => {
                let nanos = time_nanos(i64::from(values[row]), *unit)?;
                out.put_i64((nanos / NANOS_PER_MICRO as u128) as i64)
            }
            Values::Time64(values, unit) => {
                let nanos = time_nanos(values[row], *unit)?;
                out.put_i64((nanos / NANOS_PER_MICRO as u128) as i64)
            }
            Values::Duration(values, unit) => {
                binary::write_interval(0, 0, nanos(values[row], *unit), out)
                    .ok_or_else(|| out_of_range("interval", values[row], *unit))?
            }
            Values::IntervalYearMonth(values) => {
                binary::write_interval(values[row].into(), 0, 0, out)
                    .expect("an i32 month count fits")
            }
            Values::IntervalDayTime(values) => {
                let IntervalDayTime { days, milliseconds } = values[row];
                binary::write_interval(0, days.into(), i128::from(milliseconds) * 1_000_000, out)
                    .expect("i32 days and milliseconds fit")
            }
            Values::IntervalMonthDayNano(values) => {
                let IntervalMonthDayNano {
                    months,
                    days,
                    nanoseconds,
                } = values[row];
                binary::write_interval(months.into(), days.into(), nanoseconds.into(), out)
                    .expect("i32 months and days and i64 microseconds fit")
            }
            Values::List {
                offsets,
                elements,
                element_type,
            } => {
                let range = offsets.range(row);
                let has_null = range.clone().any(|element| elements.is_null(element));
                let num_elements = i32::try_from(range.len()).map_err(|_| {
                    FrontendError::ProgramLimit(format!("an array of {} elements", range.len()))
                })?;
                out.put_i32(if range.is_empty() { 0 } else { 1 }); // dimensions
                out.put_i32(i32::from(has_null));
                out.put_u32(element_type.oid());
                if !range.is_empty() {
                    out.put_i32(num_elements);
                    out.put_i32(1); // lower bound
                }
                for element in range {
                    elements.write_field(element, FieldFormat::Binary, out)?;
                }
            }
            Values::Display(_) => self.write_text(row, out)?,
        }
        Ok(())
    }
}

/// The date `unix_days` after 1970-01-01.
fn date(unix_days: i64) -> Result<NaiveDate> {
    unix_days
        .checked_add(UNIX_EPOCH_DAYS_FROM_CE)
        .and_then(|days| i32::try_from(days).ok())
        .and_then(NaiveDate::from_num_days_from_ce_opt)
        .ok_or_else(|| date_out_of_range(unix_days))
}

fn date_out_of_range(unix_days: i64) -> FrontendError {
    FrontendError::DatetimeOutOfRange(format!(
        "date out of range: {unix_days} days from 1970-01-01"
    ))
}

fn out_of_range(what: &str, value: i64, unit: TimeUnit) -> FrontendError {
    FrontendError::DatetimeOutOfRange(format!("{what} out of range: {value} {unit:?}s"))
}

/// Whole seconds (toward negative infinity) and the nanoseconds after them.
fn split_seconds(value: i64, unit: TimeUnit) -> (i64, u32) {
    let per_second = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => NANOS_PER_SECOND,
    };
    let nanos = value.rem_euclid(per_second) * (NANOS_PER_SECOND / per_second);
    (value.div_euclid(per_second), nanos as u32)
}

/// `value` in microseconds (toward negative infinity); `None` on overflow.
fn micros(value: i64, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Second => value.checked_mul(1_000_000),
        TimeUnit::Millisecond => value.checked_mul(1_000),
        TimeUnit::Microsecond => Some(value),
        TimeUnit::Nanosecond => Some(value.div_euclid(NANOS_PER_MICRO)),
    }
}

/// `value` in nanoseconds, widened so that it cannot overflow.
fn nanos(value: i64, unit: TimeUnit) -> i128 {
    let per_unit: i128 = match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    };
    i128::from(value) * per_unit
}

/// A time of day in nanoseconds since midnight; it must lie within one day.
fn time_nanos(value: i64, unit: TimeUnit) -> Result<u128> {
    let nanos = nanos(value, unit);
    if (0..=i128::from(SECONDS_PER_DAY * NANOS_PER_SECOND)).contains(&nanos) {
        Ok(nanos as u128)
    } else {
        Err(out_of_range("time", value, unit))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        Date32Array, Decimal128Array, DictionaryArray, Float64Array, Int32Array, Int64Array,
        IntervalMonthDayNanoArray, ListArray, NullArray, StringArray, TimestampMicrosecondArray,
        TimestampMillisecondArray,
    };
    use arrow::datatypes::{Field, Int32Type};
    use tokio_postgres::types::{FromSql, Type as ClientType};

    use super::*;

    /// The fields of each row of a one-column batch, `None` for NULL.
    fn fields_of(column: ArrayRef, format: FieldFormat) -> Vec<Option<Vec<u8>>> {
        let schema = Schema::new(vec![Field::new("c", column.data_type().clone(), true)]);
        let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![column]).unwrap();
        let formats = match format {
            FieldFormat::Text => Format::UnifiedText,
            FieldFormat::Binary => Format::UnifiedBinary,
        };
        let infos = field_infos(&schema, &formats).unwrap();
        let rows = encode_batch(&batch, &infos).unwrap();
        rows.into_iter()
            .map(|row| {
                assert_eq!(row.field_count, 1);
                let length = i32::from_be_bytes(row.data[..4].try_into().unwrap());
                (length >= 0).then(|| row.data[4..].to_vec())
            })
            .collect()
    }

    /// The text of each row of a one-column batch, "NULL" for NULL.
    fn texts(column: ArrayRef) -> Vec<String> {
        fields_of(column, FieldFormat::Text)
            .into_iter()
            .map(|field| match field {
                Some(bytes) => String::from_utf8(bytes).unwrap(),
                None => "NULL".to_owned(),
            })
            .collect()
    }

    /// Decodes each binary field of a one-column batch as the client library would.
    fn decoded<T: for<'a> FromSql<'a>>(column: ArrayRef) -> Vec<Option<T>> {
        let ty = ClientType::from_oid(pg_type(column.data_type()).oid()).unwrap();
        fields_of(column, FieldFormat::Binary)
            .into_iter()
            .map(|field| field.map(|bytes| T::from_sql(&ty, &bytes).unwrap()))
            .collect()
    }

    #[test]
    fn types_follow_the_table() {
        let ts_tz = DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into()));
        let cases = [
            (DataType::Boolean, Type::BOOL),
            (DataType::Int8, Type::INT2),
            (DataType::UInt16, Type::INT4),
            (DataType::UInt32, Type::INT8),
            (DataType::UInt64, Type::INT8),
            (DataType::Utf8View, Type::TEXT),
            (DataType::Decimal128(12, 2), Type::NUMERIC),
            (
                DataType::Timestamp(TimeUnit::Millisecond, None),
                Type::TIMESTAMP,
            ),
            (ts_tz, Type::TIMESTAMPTZ),
            (DataType::new_list(DataType::Int64, true), Type::INT8_ARRAY),
            (
                DataType::new_list(DataType::new_list(DataType::Int64, true), true),
                Type::TEXT,
            ),
            (
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                Type::TEXT,
            ),
            (DataType::Struct(Default::default()), Type::TEXT),
        ];
        for (arrow, postgres) in cases {
            assert_eq!(pg_type(&arrow), postgres, "{arrow}");
        }
    }

    #[test]
    fn numeric_fields_carry_their_typmod() {
        let schema = Schema::new(vec![Field::new(
            "amount",
            DataType::Decimal128(12, 2),
            true,
        )]);
        let infos = field_infos(&schema, &Format::UnifiedText).unwrap();
        assert_eq!(infos[0].type_modifier(), (12 << 16 | 2) + 4);
    }

    #[test]
    fn text_values_look_like_psql() {
        assert_eq!(
            texts(Arc::new(Float64Array::from(vec![
                Some(20.0),
                Some(0.1),
                None,
                Some(f64::NAN)
            ]))),
            ["20", "0.1", "NULL", "NaN"]
        );
        let amounts = Decimal128Array::from(vec![1761520, -5]).with_precision_and_scale(12, 3);
        assert_eq!(texts(Arc::new(amounts.unwrap())), ["1761.520", "-0.005"]);
        let ts = TimestampMillisecondArray::from(vec![1_436_918_401_000, 1_436_918_405_500]);
        assert_eq!(
            texts(Arc::new(ts.clone())),
            ["2015-07-15 00:00:01", "2015-07-15 00:00:05.5"]
        );
        assert_eq!(
            texts(Arc::new(ts.with_timezone("UTC"))),
            ["2015-07-15 00:00:01+00", "2015-07-15 00:00:05.5+00"]
        );
        assert_eq!(
            texts(Arc::new(Date32Array::from(vec![16_631]))),
            ["2015-07-15"]
        );
        assert_eq!(texts(Arc::new(NullArray::new(2))), ["NULL", "NULL"]);
        let bytes = arrow::array::BinaryArray::from_vec(vec![&[0x0a, 0x0b]]);
        assert_eq!(texts(Arc::new(bytes)), ["\\x0a0b"]);
        let interval =
            IntervalMonthDayNanoArray::from(vec![IntervalMonthDayNano::new(14, 3, 5_000_000_000)]);
        assert_eq!(texts(Arc::new(interval)), ["1 year 2 mons 3 days 00:00:05"]);
    }

    #[test]
    fn lists_are_postgres_arrays() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None, Some(3)]),
            Some(vec![]),
            None,
        ]);
        assert_eq!(texts(Arc::new(list.clone())), ["{1,NULL,3}", "{}", "NULL"]);
        let strings = ListArray::new(
            Arc::new(Field::new_list_field(DataType::Utf8, true)),
            arrow::buffer::OffsetBuffer::from_lengths([3]),
            Arc::new(StringArray::from(vec!["a", "b c", ""])),
            None,
        );
        assert_eq!(texts(Arc::new(strings)), [r#"{a,"b c",""}"#]);
        let binary: Vec<Option<Vec<Option<i32>>>> = decoded(Arc::new(list));
        assert_eq!(
            binary,
            [Some(vec![Some(1), None, Some(3)]), Some(vec![]), None]
        );
    }

    #[test]
    fn dictionaries_are_their_values() {
        let dictionary: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
        assert_eq!(texts(Arc::new(dictionary)), ["a", "b", "a"]);
    }

    #[test]
    fn binary_values_decode_in_the_client() {
        assert_eq!(
            decoded::<i64>(Arc::new(Int64Array::from(vec![Some(-7), None]))),
            [Some(-7), None]
        );
        assert_eq!(
            decoded::<i32>(Arc::new(Int32Array::from(vec![42]))),
            [Some(42)]
        );
        assert_eq!(
            decoded::<f64>(Arc::new(Float64Array::from(vec![0.1]))),
            [Some(0.1)]
        );
        assert_eq!(
            decoded::<String>(Arc::new(StringArray::from(vec!["héllo"]))),
            [Some("héllo".to_owned())]
        );
        let micros = TimestampMicrosecondArray::from(vec![1_436_918_405_500_000]);
        let expected =
            std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_436_918_405_500_000);
        assert_eq!(
            decoded::<std::time::SystemTime>(Arc::new(micros)),
            [Some(expected)]
        );
    }

    #[test]
    fn several_result_formats_must_match_the_columns() {
        let schema = Schema::new(vec![Field::new("a", DataType::Int64, true)]);
        let err = field_infos(&schema, &Format::Individual(vec![0, 1])).unwrap_err();
        assert_eq!(err.sqlstate(), "08P01");
    }
}

//! The memcomparable row codec: rows of Arrow values to bytes whose byte order is the values'
//! order, and back.
//!
//! Used for RocksDB keys (so range scans return rows in value order: windows, Top-N, MIN/MAX)
//! and for values. Unlike `arrow::row` bytes, this format is ours and stable: it may be persisted.
//! Every row is the concatenation of its fields; a field is one flag byte (`0` NULL, `1`
//! present; NULLs sort first) followed by:
//!
//! | physical kind | bytes |
//! |---|---|
//! | boolean | 1 byte, 0 or 1 |
//! | signed integers, dates, timestamps | 8 bytes big-endian, sign bit flipped |
//! | unsigned integers | 8 bytes big-endian |
//! | floats | 8 bytes of the f64: positive with the sign bit set, negative with all bits flipped |
//! | decimal128 | 16 bytes big-endian, sign bit flipped |
//! | strings, binary | each `0x00` byte as `0x00 0xFF`, then the terminator `0x00 0x00` |
//! | struct (`ROW<...>`) | its fields, each as a field of a row (flag byte and bytes) |
//! | list (`ARRAY<T>`) | each element as `0x01` and the element as a field; then `0x00` |
//! | map (`MAP<K, V>`) | each entry as `0x01`, its key and its value as fields; then `0x00` |
//!
//! Nested values order as Flink and Postgres compare rows and arrays: field by field, element by
//! element, a shorter list before a longer one it starts (`0x00` sorts before `0x01`).
//!
//! The format version is [`CODEC_VERSION`]; changing a layout is a migration (the nested kinds
//! were added without one: no earlier version could store them).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryBuilder, BooleanArray, BooleanBuilder, Decimal128Array,
    Decimal128Builder, Float64Array, Float64Builder, Int64Array, Int64Builder, ListArray, MapArray,
    StringArray, StringBuilder, StructArray, UInt64Array, UInt64Builder,
};
use arrow::array::builder::NullBufferBuilder;
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Fields};

use crate::error::{Result, WeirError};

/// The version of the byte format written by this codec.
pub const CODEC_VERSION: u32 = 1;

/// The physical representation a logical Arrow type is encoded as.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Bool,
    I64,
    U64,
    F64,
    Decimal(u8, i8),
    Str,
    Bin,
    /// A struct: the codec of its fields.
    Struct(Box<RowCodec>),
    /// A list: the codec of one element (one column).
    List(Box<RowCodec>),
    /// A map: the codec of one entry (key and value).
    Map(Box<RowCodec>),
}

/// Encodes and decodes rows of a fixed list of Arrow types.
#[derive(Debug, Clone, PartialEq)]
pub struct RowCodec {
    types: Vec<DataType>,
    kinds: Vec<Kind>,
}

/// One column, cast to its physical representation, ready for per-row encoding.
enum ColRef {
    Bool(BooleanArray),
    I64(Int64Array),
    U64(UInt64Array),
    F64(Float64Array),
    Decimal(Decimal128Array),
    Str(StringArray),
    Bin(BinaryArray),
    /// A struct column: its nulls and its fields.
    Struct(Option<NullBuffer>, PreparedColumns),
    /// A list or map column: its nulls, each row's range of entries, and the entries' columns
    /// (the element; or key and value).
    Entries(Option<NullBuffer>, OffsetBuffer<i32>, PreparedColumns),
}

/// Columns of one batch prepared for encoding; build with [`RowCodec::prepare`].
pub struct PreparedColumns {
    cols: Vec<ColRef>,
}

/// Builders for decoding rows into columns; finish with [`RowDecoder::finish`].
pub struct RowDecoder<'a> {
    codec: &'a RowCodec,
    builders: Vec<Builder<'a>>,
}

enum Builder<'a> {
    Bool(BooleanBuilder),
    I64(Int64Builder),
    U64(UInt64Builder),
    F64(Float64Builder),
    Decimal(Decimal128Builder),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Struct(NullBufferBuilder, RowDecoder<'a>),
    /// A list or map: nulls, offsets into the entries, the entries.
    Entries(NullBufferBuilder, Vec<i32>, RowDecoder<'a>),
}

fn kind_of(t: &DataType) -> Result<Kind> {
    use DataType::*;
    Ok(match t {
        Boolean => Kind::Bool,
        Int8 | Int16 | Int32 | Int64 | Date32 | Date64 | Timestamp(_, _) | Time32(_) | Time64(_)
        | Duration(_) => Kind::I64,
        UInt8 | UInt16 | UInt32 | UInt64 => Kind::U64,
        Float16 | Float32 | Float64 => Kind::F64,
        Decimal128(p, s) => Kind::Decimal(*p, *s),
        Utf8 | LargeUtf8 | Utf8View | Null => Kind::Str,
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => Kind::Bin,
        Struct(fields) => Kind::Struct(Box::new(RowCodec::try_new(fields.iter().map(|f| f.data_type().clone()).collect())?)),
        List(item) => Kind::List(Box::new(RowCodec::try_new(vec![item.data_type().clone()])?)),
        Map(entries, _) => match entries.data_type() {
            Struct(kv) if kv.len() == 2 => {
                Kind::Map(Box::new(RowCodec::try_new(kv.iter().map(|f| f.data_type().clone()).collect())?))
            }
            _ => return Err(WeirError::unsupported(format!("storing values of type {t} in state"))),
        },
        _ => return Err(WeirError::unsupported(format!("storing values of type {t} in state"))),
    })
}

/// The Arrow type an Int64-encoded logical type is first cast to, when the direct cast between
/// Int64 and it is not supported by the cast kernel.
fn int_bridge(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Date32 | DataType::Time32(_) => Some(DataType::Int32),
        _ => None,
    }
}

impl RowCodec {
    /// A codec for rows of these types.
    ///
    /// # Errors
    /// `Unsupported` for a type that cannot be stored yet (intervals, unions, large lists).
    pub fn try_new(types: Vec<DataType>) -> Result<Self> {
        let kinds = types.iter().map(kind_of).collect::<Result<Vec<_>>>()?;
        Ok(Self { types, kinds })
    }

    /// The logical types of the columns.
    pub fn types(&self) -> &[DataType] {
        &self.types
    }

    /// Casts the columns of a batch to their physical form (once per batch).
    ///
    /// # Errors
    /// `Arrow` when a column cannot be cast to its physical form; `Internal` when a nested
    /// column is not of the codec's type.
    pub fn prepare(&self, columns: &[ArrayRef]) -> Result<PreparedColumns> {
        let mut cols = Vec::with_capacity(columns.len());
        for (col, kind) in columns.iter().zip(&self.kinds) {
            cols.push(prepare_column(col, kind)?);
        }
        Ok(PreparedColumns { cols })
    }

    /// Appends the encoding of row `row` of the prepared columns to `out`.
    pub fn encode_row(&self, cols: &PreparedColumns, row: usize, out: &mut Vec<u8>) {
        for col in &cols.cols {
            encode_value(col, row, out);
        }
    }

    /// Encodes every row of a batch's columns, one `Vec<u8>` per row, each allocated once at
    /// its exact length (a row is encoded into one reused buffer first: growing each row's own
    /// vector to fit long strings cost a reallocation and a copy per doubling).
    pub fn encode_rows(&self, columns: &[ArrayRef], num_rows: usize) -> Result<Vec<Vec<u8>>> {
        let prepared = self.prepare(columns)?;
        let mut scratch = Vec::with_capacity(16 * columns.len());
        Ok((0..num_rows)
            .map(|row| {
                scratch.clear();
                self.encode_row(&prepared, row, &mut scratch);
                scratch.as_slice().to_vec()
            })
            .collect())
    }

    /// The number of bytes the encoded row at the front of `bytes` takes, without decoding it;
    /// at most `bytes.len()` (a row cut short counts as the bytes there are). State tables use
    /// it to find the group prefix of a key (join key, partition, group) cheaply.
    pub fn encoded_len(&self, bytes: &[u8]) -> usize {
        encoded_len(&self.kinds, bytes)
    }

    /// [`RowCodec::encoded_len`] as the group prefix of a grouped state table whose keys start
    /// with a row of this codec ([`StateTable::grouped`](super::StateTable::grouped)).
    pub fn group_len(&self) -> super::state_table::GroupLen {
        let kinds = self.kinds.clone();
        Box::new(move |key: &[u8]| encoded_len(&kinds, key))
    }

    /// A decoder that builds columns of this codec's types.
    pub fn decoder(&self, capacity: usize) -> RowDecoder<'_> {
        RowDecoder { codec: self, builders: self.kinds.iter().map(|k| builder_of(k, capacity)).collect() }
    }
}

/// Column `col` in the physical form of `kind`.
fn prepare_column(col: &ArrayRef, kind: &Kind) -> Result<ColRef> {
    let target = match kind {
        Kind::Bool => DataType::Boolean,
        Kind::I64 => DataType::Int64,
        Kind::U64 => DataType::UInt64,
        Kind::F64 => DataType::Float64,
        Kind::Decimal(p, s) => DataType::Decimal128(*p, *s),
        Kind::Str => DataType::Utf8,
        Kind::Bin => DataType::Binary,
        Kind::Struct(fields) => {
            let s = col.as_struct_opt().ok_or_else(|| not_of_type(col, "a struct"))?;
            return Ok(ColRef::Struct(s.nulls().cloned(), fields.prepare(s.columns())?));
        }
        Kind::List(item) => {
            let l = col.as_list_opt::<i32>().ok_or_else(|| not_of_type(col, "a list"))?;
            return Ok(ColRef::Entries(l.nulls().cloned(), l.offsets().clone(), item.prepare(&[Arc::clone(l.values())])?));
        }
        Kind::Map(entry) => {
            let m = col.as_map_opt().ok_or_else(|| not_of_type(col, "a map"))?;
            let kv = [Arc::clone(m.keys()), Arc::clone(m.values())];
            return Ok(ColRef::Entries(m.nulls().cloned(), m.offsets().clone(), entry.prepare(&kv)?));
        }
    };
    let casted = match int_bridge(col.data_type()) {
        Some(bridge) if *kind == Kind::I64 => cast(&cast(col, &bridge)?, &target)?,
        _ => cast(col, &target)?,
    };
    let any = casted.as_any();
    let expect = "cast produced the target type";
    Ok(match kind {
        Kind::Bool => ColRef::Bool(any.downcast_ref::<BooleanArray>().expect(expect).clone()),
        Kind::I64 => ColRef::I64(any.downcast_ref::<Int64Array>().expect(expect).clone()),
        Kind::U64 => ColRef::U64(any.downcast_ref::<UInt64Array>().expect(expect).clone()),
        Kind::F64 => ColRef::F64(any.downcast_ref::<Float64Array>().expect(expect).clone()),
        Kind::Decimal(..) => ColRef::Decimal(any.downcast_ref::<Decimal128Array>().expect(expect).clone()),
        Kind::Str => ColRef::Str(any.downcast_ref::<StringArray>().expect(expect).clone()),
        Kind::Bin => ColRef::Bin(any.downcast_ref::<BinaryArray>().expect(expect).clone()),
        Kind::Struct(_) | Kind::List(_) | Kind::Map(_) => unreachable!("nested kinds return above"),
    })
}

fn not_of_type(col: &ArrayRef, what: &str) -> WeirError {
    WeirError::internal(format!("a column of type {} where state expects {what}", col.data_type()))
}

fn builder_of(kind: &Kind, capacity: usize) -> Builder<'_> {
    match kind {
        Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(capacity)),
        Kind::I64 => Builder::I64(Int64Builder::with_capacity(capacity)),
        Kind::U64 => Builder::U64(UInt64Builder::with_capacity(capacity)),
        Kind::F64 => Builder::F64(Float64Builder::with_capacity(capacity)),
        Kind::Decimal(p, s) => Builder::Decimal(
            Decimal128Builder::with_capacity(capacity)
                .with_precision_and_scale(*p, *s)
                .expect("precision and scale come from a valid type"),
        ),
        Kind::Str => Builder::Str(StringBuilder::with_capacity(capacity, capacity * 8)),
        Kind::Bin => Builder::Bin(BinaryBuilder::with_capacity(capacity, capacity * 8)),
        Kind::Struct(fields) => Builder::Struct(NullBufferBuilder::new(capacity), fields.decoder(capacity)),
        Kind::List(entry) | Kind::Map(entry) => {
            Builder::Entries(NullBufferBuilder::new(capacity), vec![0], entry.decoder(capacity))
        }
    }
}

impl RowDecoder<'_> {
    /// Decodes one row from the front of `bytes`, returning the number of bytes read.
    ///
    /// # Errors
    /// `Storage` when the bytes end early or a flag byte is invalid (corrupt state).
    pub fn append(&mut self, bytes: &[u8]) -> Result<usize> {
        let mut pos = 0;
        for builder in &mut self.builders {
            pos += decode_value(builder, &bytes[pos..])?;
        }
        Ok(pos)
    }

    /// Decodes one stored row, all of `bytes`: its fields, then NULL for each field it does not
    /// have. A column added to a plain table (`ALTER TABLE .. ADD COLUMN`) is NULL in the rows
    /// written before it: no row is rewritten, as Postgres rewrites none for a column without a
    /// default.
    ///
    /// # Errors
    /// `Storage` when a field's bytes end early or a flag byte is invalid (corrupt state).
    pub fn append_row(&mut self, bytes: &[u8]) -> Result<()> {
        let mut pos = 0;
        for builder in &mut self.builders {
            if pos == bytes.len() {
                append_null(builder);
            } else {
                pos += decode_value(builder, &bytes[pos..])?;
            }
        }
        Ok(())
    }

    /// Appends a row of NULLs (the fields of a NULL struct).
    fn append_nulls(&mut self) {
        for builder in &mut self.builders {
            append_null(builder);
        }
    }

    /// The decoded columns, cast back to the codec's logical types.
    ///
    /// # Errors
    /// `Arrow` when a column cannot be cast back (corrupt state).
    pub fn finish(self) -> Result<Vec<ArrayRef>> {
        let mut out = Vec::with_capacity(self.builders.len());
        for (builder, t) in self.builders.into_iter().zip(&self.codec.types) {
            let physical: ArrayRef = match builder {
                Builder::Bool(mut b) => Arc::new(b.finish()),
                Builder::I64(mut b) => Arc::new(b.finish()),
                Builder::U64(mut b) => Arc::new(b.finish()),
                Builder::F64(mut b) => Arc::new(b.finish()),
                Builder::Decimal(mut b) => Arc::new(b.finish()),
                Builder::Str(mut b) => Arc::new(b.finish()),
                Builder::Bin(mut b) => Arc::new(b.finish()),
                Builder::Struct(mut nulls, fields) => {
                    let DataType::Struct(names) = t else { unreachable!("a struct kind has a struct type") };
                    Arc::new(StructArray::try_new(names.clone(), fields.finish()?, nulls.finish())?)
                }
                Builder::Entries(mut nulls, offsets, entries) => {
                    let offsets = OffsetBuffer::new(offsets.into());
                    let mut columns = entries.finish()?;
                    match t {
                        DataType::List(item) => {
                            let values = columns.pop().expect("a list entry has one column");
                            Arc::new(ListArray::try_new(Arc::clone(item), offsets, values, nulls.finish())?)
                        }
                        DataType::Map(entry, sorted) => {
                            let DataType::Struct(kv) = entry.data_type() else { unreachable!("map entries are structs") };
                            let entries = StructArray::try_new(Fields::clone(kv), columns, None)?;
                            Arc::new(MapArray::try_new(Arc::clone(entry), offsets, entries, nulls.finish(), *sorted)?)
                        }
                        _ => unreachable!("an entries kind has a list or map type"),
                    }
                }
            };
            let logical = if physical.data_type() == t {
                physical
            } else if let Some(bridge) = int_bridge(t) {
                cast(&cast(&physical, &bridge)?, t)?
            } else {
                cast(&physical, t)?
            };
            out.push(logical);
        }
        Ok(out)
    }
}

/// The bytes the encoded row of `kinds` at the front of `bytes` takes; see
/// [`RowCodec::encoded_len`].
fn encoded_len(kinds: &[Kind], bytes: &[u8]) -> usize {
    let mut pos = 0;
    for kind in kinds {
        let Some(&flag) = bytes.get(pos) else { return bytes.len() };
        pos += 1;
        if flag != 1 {
            continue;
        }
        let rest = bytes.get(pos..).unwrap_or_default();
        pos += match kind {
            Kind::Bool => 1,
            Kind::I64 | Kind::U64 | Kind::F64 => 8,
            Kind::Decimal(..) => 16,
            Kind::Str | Kind::Bin => {
                let mut i = 0;
                loop {
                    let Some(z) = memchr::memchr(0, &rest[i..]) else { break rest.len() };
                    match rest.get(i + z + 1) {
                        Some(0) => break i + z + 2,
                        Some(_) => i += z + 2,
                        None => break rest.len(),
                    }
                }
            }
            Kind::Struct(fields) => encoded_len(&fields.kinds, rest),
            Kind::List(entry) | Kind::Map(entry) => {
                let mut i = 0;
                loop {
                    match rest.get(i) {
                        Some(1) => i += 1 + encoded_len(&entry.kinds, &rest[i + 1..]),
                        Some(_) => break i + 1,
                        None => break rest.len(),
                    }
                }
            }
        };
    }
    pos.min(bytes.len())
}

fn encode_value(col: &ColRef, row: usize, out: &mut Vec<u8>) {
    let valid = match col {
        ColRef::Bool(a) => a.is_valid(row),
        ColRef::I64(a) => a.is_valid(row),
        ColRef::U64(a) => a.is_valid(row),
        ColRef::F64(a) => a.is_valid(row),
        ColRef::Decimal(a) => a.is_valid(row),
        ColRef::Str(a) => a.is_valid(row),
        ColRef::Bin(a) => a.is_valid(row),
        ColRef::Struct(nulls, _) | ColRef::Entries(nulls, _, _) => nulls.as_ref().is_none_or(|n| n.is_valid(row)),
    };
    if !valid {
        out.push(0);
        return;
    }
    out.push(1);
    match col {
        ColRef::Bool(a) => out.push(a.value(row) as u8),
        ColRef::I64(a) => out.extend_from_slice(&encode_i64(a.value(row))),
        ColRef::U64(a) => out.extend_from_slice(&a.value(row).to_be_bytes()),
        ColRef::F64(a) => out.extend_from_slice(&encode_f64(a.value(row))),
        ColRef::Decimal(a) => {
            out.extend_from_slice(&((a.value(row) as u128) ^ (1u128 << 127)).to_be_bytes())
        }
        ColRef::Str(a) => encode_bytes(a.value(row).as_bytes(), out),
        ColRef::Bin(a) => encode_bytes(a.value(row), out),
        ColRef::Struct(_, fields) => {
            for field in &fields.cols {
                encode_value(field, row, out);
            }
        }
        ColRef::Entries(_, offsets, entries) => {
            for entry in offsets[row] as usize..offsets[row + 1] as usize {
                out.push(1);
                for col in &entries.cols {
                    encode_value(col, entry, out);
                }
            }
            out.push(0);
        }
    }
}

/// Memcomparable bytes of an i64 (big-endian, sign bit flipped).
pub fn encode_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1u64 << 63)).to_be_bytes()
}

/// The i64 of [`encode_i64`]'s bytes.
pub fn decode_i64(b: [u8; 8]) -> i64 {
    (u64::from_be_bytes(b) ^ (1u64 << 63)) as i64
}

/// Appends `v` as a zigzag LEB128 varint: 7 bits a byte, low bits first, the high bit set on
/// every byte but the last; small magnitudes of either sign take few bytes (-1 and 0 one,
/// |v| < 2^13 two, at most 19 for an i128). Not memcomparable: for state values.
pub fn put_varint(out: &mut Vec<u8>, v: i128) {
    let mut z = ((v << 1) ^ (v >> 127)) as u128;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The value of a [`put_varint`] varint at the start of `bytes` and its length in bytes; `None`
/// when `bytes` ends inside it or it is longer than an i128's.
pub fn get_varint(bytes: &[u8]) -> Option<(i128, usize)> {
    let mut z: u128 = 0;
    for (i, b) in bytes.iter().enumerate().take(19) {
        z |= ((b & 0x7f) as u128) << (7 * i);
        if b & 0x80 == 0 {
            return Some((((z >> 1) as i128) ^ -((z & 1) as i128), i + 1));
        }
    }
    None
}

fn encode_f64(v: f64) -> [u8; 8] {
    let bits = v.to_bits();
    let bits = if bits >> 63 == 0 { bits | (1 << 63) } else { !bits };
    bits.to_be_bytes()
}

fn decode_f64(b: [u8; 8]) -> f64 {
    let bits = u64::from_be_bytes(b);
    let bits = if bits >> 63 == 1 { bits & !(1 << 63) } else { !bits };
    f64::from_bits(bits)
}

/// Appends `v` escaped and terminated: each `0x00` as `0x00 0xFF`, then `0x00 0x00` (so the
/// encoding is prefix-free and compares as `v` does). Copies the runs between zeros whole.
fn encode_bytes(v: &[u8], out: &mut Vec<u8>) {
    out.reserve(v.len() + 2);
    let mut rest = v;
    while let Some(z) = memchr::memchr(0, rest) {
        out.extend_from_slice(&rest[..=z]);
        out.push(0xFF);
        rest = &rest[z + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[0, 0]);
}

fn corrupt(what: &str) -> WeirError {
    WeirError::storage(format!("corrupt row encoding: {what}"))
}

fn take<const N: usize>(bytes: &[u8]) -> Result<[u8; N]> {
    bytes
        .get(..N)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupt("value ends early"))
}

/// The bytes [`encode_bytes`] wrote at the front of `bytes`, and how many bytes they took:
/// borrowed when they hold no zero byte (no escape to undo), copied otherwise.
fn decode_bytes(bytes: &[u8]) -> Result<(std::borrow::Cow<'_, [u8]>, usize)> {
    let mut copied: Option<Vec<u8>> = None;
    let mut i = 0;
    loop {
        let z = i + memchr::memchr(0, &bytes[i..]).ok_or_else(|| corrupt("unterminated string"))?;
        match bytes.get(z + 1) {
            Some(0) => {
                let value = match copied {
                    None => std::borrow::Cow::Borrowed(&bytes[..z]),
                    Some(mut v) => {
                        v.extend_from_slice(&bytes[i..z]);
                        std::borrow::Cow::Owned(v)
                    }
                };
                return Ok((value, z + 2));
            }
            Some(0xFF) => {
                copied.get_or_insert_with(|| Vec::with_capacity(z + 16)).extend_from_slice(&bytes[i..=z]);
                i = z + 2;
            }
            _ => return Err(corrupt("bad escape in string")),
        }
    }
}

/// Appends a NULL to `builder`.
fn append_null(builder: &mut Builder<'_>) {
    match builder {
        Builder::Bool(b) => b.append_null(),
        Builder::I64(b) => b.append_null(),
        Builder::U64(b) => b.append_null(),
        Builder::F64(b) => b.append_null(),
        Builder::Decimal(b) => b.append_null(),
        Builder::Str(b) => b.append_null(),
        Builder::Bin(b) => b.append_null(),
        Builder::Struct(nulls, fields) => {
            nulls.append_null();
            fields.append_nulls();
        }
        Builder::Entries(nulls, offsets, _) => {
            nulls.append_null();
            offsets.push(*offsets.last().expect("offsets start with 0"));
        }
    }
}

fn decode_value(builder: &mut Builder<'_>, bytes: &[u8]) -> Result<usize> {
    let flag = *bytes.first().ok_or_else(|| corrupt("missing null flag"))?;
    let rest = &bytes[1..];
    if flag == 0 {
        append_null(builder);
        return Ok(1);
    }
    if flag != 1 {
        return Err(corrupt("bad null flag"));
    }
    let len = match builder {
        Builder::Bool(b) => {
            b.append_value(take::<1>(rest)?[0] != 0);
            1
        }
        Builder::I64(b) => {
            b.append_value(decode_i64(take::<8>(rest)?));
            8
        }
        Builder::U64(b) => {
            b.append_value(u64::from_be_bytes(take::<8>(rest)?));
            8
        }
        Builder::F64(b) => {
            b.append_value(decode_f64(take::<8>(rest)?));
            8
        }
        Builder::Decimal(b) => {
            b.append_value((u128::from_be_bytes(take::<16>(rest)?) ^ (1u128 << 127)) as i128);
            16
        }
        Builder::Str(b) => {
            let (v, n) = decode_bytes(rest)?;
            b.append_value(std::str::from_utf8(&v).map_err(|_| corrupt("string is not UTF-8"))?);
            n
        }
        Builder::Bin(b) => {
            let (v, n) = decode_bytes(rest)?;
            b.append_value(v);
            n
        }
        Builder::Struct(nulls, fields) => {
            nulls.append_non_null();
            fields.append(rest)?
        }
        Builder::Entries(nulls, offsets, entries) => {
            nulls.append_non_null();
            let mut i = 0;
            let mut count = *offsets.last().expect("offsets start with 0");
            let len = loop {
                match rest.get(i) {
                    Some(1) => {
                        i += 1 + entries.append(&rest[i + 1..])?;
                        count += 1;
                    }
                    Some(0) => break i + 1,
                    Some(_) => return Err(corrupt("bad list entry marker")),
                    None => return Err(corrupt("list ends early")),
                }
            };
            offsets.push(count);
            len
        }
    };
    Ok(1 + len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, TimestampMillisecondArray};
    use arrow::datatypes::TimeUnit;

    #[test]
    fn order_and_round_trip() -> Result<()> {
        let codec = RowCodec::try_new(vec![
            DataType::Int32,
            DataType::Utf8,
            DataType::Float64,
            DataType::Timestamp(TimeUnit::Millisecond, None),
        ])?;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(-5), None, Some(3), Some(3)])),
            Arc::new(StringArray::from(vec![Some("b"), Some("a"), Some("a\0b"), Some("a")])),
            Arc::new(Float64Array::from(vec![-1.5, 2.0, 0.0, -0.25])),
            Arc::new(TimestampMillisecondArray::from(vec![1, 2, 3, -4])),
        ];
        let rows = codec.encode_rows(&cols, 4)?;
        // NULL < -5 < 3; for equal ints "a" < "a\0b".
        let mut order: Vec<usize> = (0..4).collect();
        order.sort_by(|a, b| rows[*a].cmp(&rows[*b]));
        assert_eq!(order, vec![1, 0, 3, 2]);
        let mut dec = codec.decoder(4);
        for r in &rows {
            assert_eq!(dec.append(r)?, r.len());
        }
        let back = dec.finish()?;
        for (a, b) in back.iter().zip(&cols) {
            assert_eq!(a.as_ref(), b.as_ref());
        }
        Ok(())
    }

    /// A row written before a column was added reads with NULL for it.
    #[test]
    fn a_row_without_an_added_column_reads_it_as_null() -> Result<()> {
        let before = RowCodec::try_new(vec![DataType::Int32, DataType::Utf8])?;
        let after = RowCodec::try_new(vec![DataType::Int32, DataType::Utf8, DataType::Float64])?;
        let old: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![7])), Arc::new(StringArray::from(vec!["x"]))];
        let new: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![8])),
            Arc::new(StringArray::from(vec!["y"])),
            Arc::new(Float64Array::from(vec![2.5])),
        ];
        let mut dec = after.decoder(2);
        dec.append_row(&before.encode_rows(&old, 1)?[0])?;
        dec.append_row(&after.encode_rows(&new, 1)?[0])?;
        let back = dec.finish()?;
        assert_eq!(back[0].as_ref(), &Int32Array::from(vec![7, 8]) as &dyn Array);
        assert_eq!(back[1].as_ref(), &StringArray::from(vec!["x", "y"]) as &dyn Array);
        assert_eq!(back[2].as_ref(), &Float64Array::from(vec![None, Some(2.5)]) as &dyn Array);
        Ok(())
    }

    /// Strings with zero bytes anywhere (escaped as 0x00 0xFF) come back whole, end where the
    /// next column starts, and order as their bytes do.
    #[test]
    fn strings_with_zero_bytes_round_trip_and_order() -> Result<()> {
        let texts = ["ab\0\0cd", "", "\0", "\0\0", "a\0", "\0a", "a", "a\0\0"];
        let codec = RowCodec::try_new(vec![DataType::Utf8, DataType::Int32])?;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(texts.to_vec())),
            Arc::new(Int32Array::from((0..texts.len() as i32).collect::<Vec<_>>())),
        ];
        let rows = codec.encode_rows(&cols, texts.len())?;
        for r in &rows {
            assert_eq!(codec.encoded_len(r), r.len());
        }
        let mut by_rows: Vec<usize> = (0..texts.len()).collect();
        by_rows.sort_by(|a, b| rows[*a].cmp(&rows[*b]));
        let mut by_text = by_rows.clone();
        by_text.sort_by(|a, b| texts[*a].as_bytes().cmp(texts[*b].as_bytes()));
        assert_eq!(by_rows, by_text);
        let mut dec = codec.decoder(rows.len());
        for r in &rows {
            assert_eq!(dec.append(r)?, r.len());
        }
        let back = dec.finish()?;
        assert_eq!(back[0].as_ref(), cols[0].as_ref());
        assert_eq!(back[1].as_ref(), cols[1].as_ref());
        Ok(())
    }

    /// ROW<a INT, b STRING>, ARRAY<BIGINT> and MAP<STRING, INT> columns, with NULLs at every
    /// level, come back equal, and order as rows and arrays compare.
    #[test]
    fn nested_values_round_trip_and_order() -> Result<()> {
        use arrow::array::{Int32Builder, ListBuilder, MapBuilder, StructBuilder};
        use arrow::datatypes::{Field, Fields};
        let row_type = Fields::from(vec![Field::new("a", DataType::Int32, true), Field::new("b", DataType::Utf8, true)]);
        let mut rows = StructBuilder::from_fields(row_type.clone(), 4);
        for (a, b, valid) in [(Some(1), Some("x"), true), (None, None, false), (Some(1), None, true), (Some(0), Some("z"), true)] {
            rows.field_builder::<Int32Builder>(0).expect("a").append_option(a);
            rows.field_builder::<StringBuilder>(1).expect("b").append_option(b);
            rows.append(valid);
        }
        let rows: ArrayRef = Arc::new(rows.finish());
        let mut lists = ListBuilder::new(Int64Builder::new());
        for list in [Some(vec![Some(1), Some(2)]), Some(vec![]), Some(vec![Some(1)]), None] {
            match list {
                Some(items) => {
                    for item in items {
                        lists.values().append_option(item);
                    }
                    lists.append(true);
                }
                None => lists.append(false),
            }
        }
        let lists: ArrayRef = Arc::new(lists.finish());
        let mut maps = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        for map in [vec![("k", Some(1))], vec![], vec![("a", None), ("b", Some(2))], vec![("k", Some(1))]] {
            for (k, v) in map {
                maps.keys().append_value(k);
                maps.values().append_option(v);
            }
            maps.append(true)?;
        }
        let maps: ArrayRef = Arc::new(maps.finish());
        let cols = vec![rows, lists, maps];
        let codec = RowCodec::try_new(cols.iter().map(|c| c.data_type().clone()).collect())?;
        let encoded = codec.encode_rows(&cols, 4)?;
        for e in &encoded {
            assert_eq!(codec.encoded_len(e), e.len());
            assert_eq!(codec.encoded_len(&[e.as_slice(), b"tail"].concat()), e.len());
        }
        let mut dec = codec.decoder(4);
        for e in &encoded {
            assert_eq!(dec.append(e)?, e.len());
        }
        for (back, col) in dec.finish()?.iter().zip(&cols) {
            assert_eq!(back.as_ref(), col.as_ref());
        }
        // The struct column alone: NULL < (0, z) < (1, NULL) < (1, x).
        let first = RowCodec::try_new(vec![cols[0].data_type().clone()])?.encode_rows(&cols[..1], 4)?;
        let mut order: Vec<usize> = (0..4).collect();
        order.sort_by(|a, b| first[*a].cmp(&first[*b]));
        assert_eq!(order, vec![1, 3, 2, 0]);
        // The list column alone: NULL < [] < [1] < [1, 2].
        let second = RowCodec::try_new(vec![cols[1].data_type().clone()])?.encode_rows(&cols[1..2], 4)?;
        order.sort_by(|a, b| second[*a].cmp(&second[*b]));
        assert_eq!(order, vec![3, 1, 2, 0]);
        Ok(())
    }

    #[test]
    fn float_order() {
        let vals = [-f64::INFINITY, -2.0, -0.5, 0.0, 0.5, 3.0, f64::INFINITY];
        let enc: Vec<_> = vals.iter().map(|v| encode_f64(*v)).collect();
        assert!(enc.windows(2).all(|w| w[0] < w[1]));
        for v in vals {
            assert_eq!(decode_f64(encode_f64(v)), v);
        }
    }

    #[test]
    fn varints_round_trip_and_are_short_for_small_values() {
        let cases = [0i128, 1, -1, 63, -64, 64, 8191, -8192, 8192, i64::MAX as i128, i64::MIN as i128, i128::MAX, i128::MIN];
        for v in cases {
            let mut out = vec![7];
            put_varint(&mut out, v);
            out.push(9);
            assert_eq!(get_varint(&out[1..]), Some((v, out.len() - 2)), "{v}");
        }
        let len = |v: i128| {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            out.len()
        };
        assert_eq!((len(0), len(-1), len(63), len(64), len(-8192), len(8192), len(i128::MIN)), (1, 1, 1, 2, 2, 3, 19));
        // Cut short, or a continuation bit on the 19th byte.
        assert_eq!(get_varint(&[0x80, 0x80]), None);
        assert_eq!(get_varint(&[0xff; 20]), None);
    }
}

/// Appends a NULL field.
pub fn put_null(out: &mut Vec<u8>) {
    out.push(0);
}

/// Appends a present field of an integer kind (any signed integer, date or timestamp type).
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.push(1);
    out.extend_from_slice(&encode_i64(v));
}

/// Appends a present field of an unsigned integer type.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.push(1);
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a present field of a float type.
pub fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.push(1);
    out.extend_from_slice(&encode_f64(v));
}

/// Appends a present field of a string or binary type.
pub fn put_bytes(out: &mut Vec<u8>, v: &[u8]) {
    out.push(1);
    encode_bytes(v, out);
}

/// The value of the string or binary field at the front of `field` ([`put_bytes`]'s layout);
/// `None` for a NULL field.
///
/// # Errors
/// `Storage` when the bytes are not such a field.
pub fn get_bytes(field: &[u8]) -> Result<Option<std::borrow::Cow<'_, [u8]>>> {
    match field.first() {
        Some(0) => Ok(None),
        Some(1) => Ok(Some(decode_bytes(&field[1..])?.0)),
        _ => Err(corrupt("not a string field")),
    }
}

/// Appends a present field of a list type whose elements are `elements`, each a field as the
/// element type's codec encodes it (NULL or present).
pub fn put_list<'a>(out: &mut Vec<u8>, elements: impl IntoIterator<Item = &'a [u8]>) {
    out.push(1);
    for element in elements {
        out.push(1);
        out.extend_from_slice(element);
    }
    out.push(0);
}

/// Appends a present field of a decimal type (the unscaled value).
pub fn put_i128(out: &mut Vec<u8>, v: i128) {
    out.push(1);
    out.extend_from_slice(&((v as u128) ^ (1u128 << 127)).to_be_bytes());
}

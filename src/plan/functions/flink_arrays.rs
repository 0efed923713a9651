//! Flink's collection functions where DataFusion's give other answers or other arguments
//! (Flink docs, Collection Functions; `ArrayRemoveFunction`, `ArrayContainsFunction`,
//! `ArrayPositionFunction`, `ArrayPrependFunction`, `MapUnionFunction`). They replace
//! DataFusion's of the same names.
//!
//! - `ARRAY_REMOVE(array, x)`: the array without every element equal to `x` (DataFusion's
//!   removed the first only); `x` NULL removes the NULL elements. NULL for a NULL array.
//! - `ARRAY_CONTAINS(array, x)`: whether an element equals `x`; `x` NULL asks for a NULL
//!   element (TRUE or FALSE, not NULL). NULL for a NULL array.
//! - `ARRAY_POSITION(array, x)`: the position from 1 of the first element equal to `x`, 0 when
//!   there is none (DataFusion's and Postgres's give NULL). NULL for a NULL array or `x`.
//! - `ARRAY_PREPEND(array, x)` (Flink's order; NULL for a NULL array) and `ARRAY_PREPEND(x,
//!   array)` (Postgres's and DataFusion's; a NULL array gives `{x}`), told apart by the
//!   arguments' types: `x` before the elements.
//! - `MAP_UNION(map1, map2, ..)`: one map of all entries, a later map's value winning for a
//!   key in several; the later map's entries come first (Flink's order). NULL if any map is.
//!
//! The element and the array's elements are taken in their common type, so
//! `ARRAY_CONTAINS(ARRAY[1, 2], 1.5)` is FALSE and `ARRAY_REMOVE` of an ARRAY<INT> and a BIGINT
//! is an ARRAY<BIGINT>. (Flink's `ArrayElementArgumentTypeStrategy` takes an element only by an
//! implicit cast to the array's element type and refuses the others; Weir answers them
//! instead, never by narrowing the element.)
//! Equality is Arrow's ordering of that type (nested types too): NaN equals NaN.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayBuilder, ArrayRef, AsArray, BooleanBuilder, Int64Builder, ListArray, MapArray, UInt32Builder};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::num_rows;

/// Which function a [`FlinkArray`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Remove,
    Contains,
    Position,
    Prepend,
    MapUnion,
}

/// One of the functions of this module.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct FlinkArray {
    signature: Signature,
    kind: Kind,
    aliases: Vec<String>,
}

impl FlinkArray {
    /// Every function of this module, each under DataFusion's names for it.
    pub(super) fn all() -> Vec<Self> {
        let named = |kind, aliases: &[&str]| Self {
            signature: Signature::user_defined(Volatility::Immutable),
            kind,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        };
        vec![
            named(Kind::Remove, &["list_remove"]),
            named(Kind::Contains, &[]),
            named(Kind::Position, &["array_indexof", "list_position", "list_indexof"]),
            named(Kind::Prepend, &["list_prepend", "array_push_front", "list_push_front"]),
            named(Kind::MapUnion, &[]),
        ]
    }
}

/// The element type of a list type.
fn element(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Some(f.data_type()),
        _ => None,
    }
}

/// A list type of `element`, DataFusion's `List`.
fn list_of(element: &DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element.clone(), true)))
}

/// Whether `x` goes into a list of `element`s: the same type, NULL, a number into numbers, a
/// string into strings, an array or ROW whose elements or fields do.
fn fits(x: &DataType, element: &DataType) -> bool {
    let string = |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let nested = match (x, element) {
        (DataType::Struct(a), DataType::Struct(b)) => a.len() == b.len() && a.iter().zip(b.iter()).all(|(a, b)| fits(a.data_type(), b.data_type())),
        _ => matches!((self::element(x), self::element(element)), (Some(a), Some(b)) if fits(a, b)),
    };
    x.equals_datatype(element) || *x == DataType::Null || (x.is_numeric() && element.is_numeric()) || (string(x) && string(element)) || nested
}

impl FlinkArray {
    /// `(array, x)` coerced: the array a `List` of the common type of its elements and `x` (of
    /// `x`'s, for an untyped NULL array), `x` cast to it.
    fn array_and_element(&self, usage: &str, array: &DataType, x: &DataType) -> Result<Vec<DataType>> {
        let common = |e: &DataType| match x {
            DataType::Null => Some(e.clone()),
            _ => datafusion::logical_expr::type_coercion::binary::type_union_resolution(&[e.clone(), x.clone()]),
        };
        match (element(array), array) {
            // Both widened to their common type: an element is never narrowed to the array's
            // element type, nor those to the element's.
            (Some(e), _) if fits(x, e) => match common(e) {
                Some(c) => Ok(vec![list_of(&c), c]),
                None => plan_err!("{usage}: {x} does not go into an array of {e}"),
            },
            (Some(e), _) => plan_err!("{usage}: {x} does not go into an array of {e}"),
            (None, DataType::Null) => Ok(vec![list_of(x), x.clone()]),
            (None, other) => plan_err!("{usage}: the first argument must be an ARRAY, got {other}"),
        }
    }

    /// Whether a prepend's arguments are in Flink's order, `(array, x)`.
    fn array_first(arg_types: &[DataType]) -> bool {
        match arg_types {
            [a, x] => match (element(a), element(x)) {
                (Some(e), Some(xe)) => fits(x, e) && !fits(a, xe),
                (Some(e), None) => fits(x, e),
                _ => false,
            },
            _ => false,
        }
    }
}

impl ScalarUDFImpl for FlinkArray {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Remove => "array_remove",
            Kind::Contains => "array_contains",
            Kind::Position => "array_position",
            Kind::Prepend => "array_prepend",
            Kind::MapUnion => "map_union",
        }
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = match self.kind {
            Kind::Remove => "ARRAY_REMOVE(array, element)",
            Kind::Contains => "ARRAY_CONTAINS(array, element)",
            Kind::Position => "ARRAY_POSITION(array, element)",
            Kind::Prepend => "ARRAY_PREPEND(array, element)",
            Kind::MapUnion => "MAP_UNION(map, map, ..)",
        };
        if self.kind == Kind::MapUnion {
            let Some(first) = arg_types.first() else { return plan_err!("{usage} takes at least one map") };
            if let Some(t) = arg_types.iter().find(|t| !matches!(t, DataType::Map(..))) {
                return plan_err!("{usage}: every argument must be a MAP, got {t}");
            }
            let common = datafusion::logical_expr::type_coercion::binary::type_union_resolution(arg_types);
            return match common {
                Some(common) => Ok(vec![common; arg_types.len()]),
                None => {
                    let other = arg_types.iter().find(|t| !t.equals_datatype(first)).unwrap_or(first);
                    plan_err!("{usage}: the maps must have one type, got {first} and {other}")
                }
            };
        }
        let [a, x] = arg_types else { return plan_err!("{usage} takes 2 arguments, got {}", arg_types.len()) };
        if self.kind == Kind::Prepend && !Self::array_first(arg_types) {
            // Postgres's order, `(element, array)`.
            return Ok(self.array_and_element("ARRAY_PREPEND(element, array)", x, a)?.into_iter().rev().collect());
        }
        self.array_and_element(usage, a, x)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Contains => DataType::Boolean,
            Kind::Position => DataType::Int64,
            Kind::Remove | Kind::MapUnion => arg_types[0].clone(),
            Kind::Prepend if Self::array_first(arg_types) => arg_types[0].clone(),
            Kind::Prepend => arg_types[1].clone(),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = num_rows(&args.args);
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<Vec<ArrayRef>>>()?;
        let types: Vec<DataType> = arrays.iter().map(|a| a.data_type().clone()).collect();
        let out: ArrayRef = match self.kind {
            Kind::MapUnion => map_union(&arrays)?,
            Kind::Prepend if Self::array_first(&types) => prepend(&arrays[0], &arrays[1], false)?,
            Kind::Prepend => prepend(&arrays[1], &arrays[0], true)?,
            kind => {
                let list = arrays[0].as_list::<i32>();
                let matches = element_matches(list, &arrays[1])?;
                match kind {
                    Kind::Remove => remove(list, &matches)?,
                    Kind::Contains => {
                        let mut out = BooleanBuilder::with_capacity(rows);
                        for i in 0..rows {
                            match list.is_null(i) {
                                true => out.append_null(),
                                false => out.append_value(range(list, i).any(|p| matches[p])),
                            }
                        }
                        Arc::new(out.finish())
                    }
                    _ => {
                        let mut out = Int64Builder::with_capacity(rows);
                        for i in 0..rows {
                            match list.is_null(i) || arrays[1].is_null(i) {
                                true => out.append_null(),
                                false => {
                                    let first = range(list, i).position(|p| matches[p]);
                                    out.append_value(first.map_or(0, |k| k as i64 + 1));
                                }
                            }
                        }
                        Arc::new(out.finish())
                    }
                }
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// The positions in `list.values()` of row `i`'s elements.
fn range(list: &ListArray, i: usize) -> std::ops::Range<usize> {
    let offsets = list.value_offsets();
    offsets[i] as usize..offsets[i + 1] as usize
}

/// For each position of `list.values()` from the first row's start: whether the element
/// equals its row's value of `needles` (both NULL counts as equal, Flink's rule for these
/// functions; one NULL does not).
fn element_matches(list: &ListArray, needles: &ArrayRef) -> Result<Vec<bool>> {
    let values = list.values();
    let mut rows = UInt32Builder::new();
    let mut positions = Vec::new();
    for i in 0..list.len() {
        for p in range(list, i) {
            rows.append_value(u32::try_from(i).map_err(|_| DataFusionError::Execution("too many rows".into()))?);
            positions.push(p);
        }
    }
    let expanded = arrow::compute::take(needles, &rows.finish(), None)?;
    let compare = arrow::array::make_comparator(values.as_ref(), expanded.as_ref(), SortOptions::default())?;
    let mut matches = vec![false; values.len()];
    for (k, p) in positions.into_iter().enumerate() {
        matches[p] = match (values.is_null(p), expanded.is_null(k)) {
            (true, true) => true,
            (false, false) => compare(p, k).is_eq(),
            _ => false,
        };
    }
    Ok(matches)
}

/// `list` without the elements `matches` marks.
fn remove(list: &ListArray, matches: &[bool]) -> Result<ArrayRef> {
    let mut keep = UInt32Builder::new();
    let mut offsets = vec![0i32];
    for i in 0..list.len() {
        if !list.is_null(i) {
            for p in range(list, i).filter(|p| !matches[*p]) {
                keep.append_value(p as u32);
            }
        }
        offsets.push(keep.len() as i32);
    }
    let values = arrow::compute::take(list.values(), &keep.finish(), None)?;
    let DataType::List(field) = list.data_type() else { return exec_err!("ARRAY_REMOVE: not a list") };
    Ok(Arc::new(ListArray::try_new(Arc::clone(field), OffsetBuffer::new(offsets.into()), values, list.nulls().cloned())?))
}

/// `x` put before each row's elements of `array`. A NULL array gives NULL (Flink's
/// `ARRAY_PREPEND`) or, with `null_array_empty`, `{x}` (Postgres's `array_prepend`).
fn prepend(array: &ArrayRef, x: &ArrayRef, null_array_empty: bool) -> Result<ArrayRef> {
    let DataType::List(field) = array.data_type() else {
        // An untyped NULL array: a list of x's type.
        let list = new_null_array(&list_of(x.data_type()), array.len());
        return prepend(&list, x, null_array_empty);
    };
    let list = array.as_list::<i32>();
    let values = list.values();
    // Indexes into `values` followed by `x`: position `values.len() + i` is row i's x.
    let both = arrow::compute::concat(&[values.as_ref(), x.as_ref()])?;
    let mut take = UInt32Builder::new();
    let mut offsets = vec![0i32];
    let mut nulls = Vec::with_capacity(list.len());
    for i in 0..list.len() {
        let valid = !list.is_null(i) || null_array_empty;
        if valid {
            take.append_value((values.len() + i) as u32);
            if !list.is_null(i) {
                for p in range(list, i) {
                    take.append_value(p as u32);
                }
            }
        }
        nulls.push(valid);
        offsets.push(take.len() as i32);
    }
    let out = arrow::compute::take(&both, &take.finish(), None)?;
    Ok(Arc::new(ListArray::try_new(Arc::clone(field), OffsetBuffer::new(offsets.into()), out, Some(NullBuffer::from(nulls)))?))
}

/// `MAP_UNION` of `maps` (one type): per row, the last map's entries, then each earlier map's
/// whose key no later map has; NULL where any map is NULL.
fn map_union(maps: &[ArrayRef]) -> Result<ArrayRef> {
    let rows = maps[0].len();
    let maps: Vec<&MapArray> = maps.iter().map(|m| m.as_map()).collect();
    let keys: Vec<&dyn Array> = maps.iter().map(|m| m.keys().as_ref()).collect();
    let values: Vec<&dyn Array> = maps.iter().map(|m| m.values().as_ref()).collect();
    let (all_keys, all_values) = (arrow::compute::concat(&keys)?, arrow::compute::concat(&values)?);
    // Where each map's entries start in the concatenation.
    let mut bases = vec![0usize];
    for m in &maps {
        bases.push(bases.last().copied().unwrap_or(0) + m.keys().len());
    }
    let compare = arrow::array::make_comparator(all_keys.as_ref(), all_keys.as_ref(), SortOptions::default())?;
    let mut take = UInt32Builder::new();
    let mut offsets = vec![0i32];
    let mut nulls = Vec::with_capacity(rows);
    for i in 0..rows {
        let valid = maps.iter().all(|m| !m.is_null(i));
        if valid {
            let mut taken: Vec<usize> = Vec::new();
            for (m, map) in maps.iter().enumerate().rev() {
                let offs = map.value_offsets();
                for p in offs[i] as usize..offs[i + 1] as usize {
                    let at = bases[m] + p;
                    if !taken[..].iter().any(|t| compare(*t, at).is_eq()) {
                        taken.push(at);
                        take.append_value(at as u32);
                    }
                }
            }
        }
        nulls.push(valid);
        offsets.push(take.len() as i32);
    }
    let indexes = take.finish();
    let (k, v) = (arrow::compute::take(&all_keys, &indexes, None)?, arrow::compute::take(&all_values, &indexes, None)?);
    let DataType::Map(entries_field, sorted) = maps[0].data_type() else { return exec_err!("MAP_UNION: not a map") };
    let DataType::Struct(fields) = entries_field.data_type() else { return exec_err!("MAP_UNION: map entries are no struct") };
    let entries = arrow::array::StructArray::try_new(fields.clone(), vec![k, v], None)?;
    Ok(Arc::new(MapArray::try_new(
        Arc::clone(entries_field),
        OffsetBuffer::new(offsets.into()),
        entries,
        Some(NullBuffer::from(nulls)),
        *sorted,
    )?))
}

//! `weir_unnest_rows(n, ordinality, x1, .., xk)`: the rows a lateral `UNNEST` with a column
//! list gives, as one array of ROWs for the one select-list UNNEST a streaming query takes
//! ([`crate::sql::lateral_unnest`] writes the call and reads the fields back, `c1` .. `cn`).
//!
//! - An ARRAY gives its elements, one column; with `n` naming more columns than the arguments
//!   give so, an ARRAY of ROW gives its fields, each a column (Flink's `UNNEST(rows) AS t (a,
//!   b)`).
//! - A MAP gives its entries, two columns: the key and the value (Flink's `UNNEST(map) AS t
//!   (k, v)`), in the map's order.
//! - Several arguments are zipped, as Postgres's `unnest(a, b)`: row `j` holds each argument's
//!   `j`th element, NULL where an argument is shorter, NULL or empty; as many rows as the
//!   longest.
//! - `ordinality` adds a last column, each row's position from 1, a BIGINT (Postgres's and
//!   Flink's `WITH ORDINALITY`).
//!
//! `n` is the number of columns the rows must have (the alias's column list): another count is
//! an error when the statement is planned, naming both. A row of the input whose arguments are
//! all NULL or empty gives an empty array (no rows; one row of NULLs under `LEFT JOIN ..  ON
//! TRUE`, which unnests with `unnest_outer`).

use std::sync::Arc;

use arrow::array::{new_empty_array, Array, ArrayRef, AsArray, Int64Builder, ListArray, StructArray, UInt32Builder};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::num_rows;

/// The function's name, as [`crate::sql::lateral_unnest`] calls it.
pub const NAME: &str = "weir_unnest_rows";

/// See the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct UnnestRows {
    signature: Signature,
}

impl UnnestRows {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// How one argument gives its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// An ARRAY: its elements.
    Elements,
    /// An ARRAY of ROW: its fields.
    Fields(usize),
    /// A MAP: its keys and values.
    Entries,
}

/// The shapes of arguments of `types` for `n` columns (with the ordinality column, if any,
/// already taken out: `ordinality` says, for the error's counts), and the columns' types.
fn shapes(types: &[DataType], n: usize, ordinality: bool) -> Result<(Vec<Shape>, Vec<DataType>)> {
    let plain = |t: &DataType| -> Result<(Shape, Vec<DataType>)> {
        match t {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Ok((Shape::Elements, vec![f.data_type().clone()])),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => Ok((Shape::Entries, vec![kv[0].data_type().clone(), kv[1].data_type().clone()])),
                other => plan_err!("UNNEST: unexpected map entries {other}"),
            },
            DataType::Null => Ok((Shape::Elements, vec![DataType::Null])),
            other => plan_err!("UNNEST takes an ARRAY or a MAP, got {other}"),
        }
    };
    let mut shapes = Vec::new();
    let mut columns = Vec::new();
    for t in types {
        let (shape, cols) = plain(t)?;
        shapes.push(shape);
        columns.extend(cols);
    }
    if columns.len() == n {
        return Ok((shapes, columns));
    }
    // Arrays of ROW give their fields.
    let mut expanded = Vec::new();
    for (shape, t) in shapes.iter_mut().zip(types) {
        match (&*shape, t) {
            (Shape::Elements, DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)) => match f.data_type() {
                DataType::Struct(fields) => {
                    *shape = Shape::Fields(fields.len());
                    expanded.extend(fields.iter().map(|f| f.data_type().clone()));
                }
                other => expanded.push(other.clone()),
            },
            _ => expanded.extend(plain(t)?.1),
        }
    }
    if expanded.len() == n {
        return Ok((shapes, expanded));
    }
    let extra = usize::from(ordinality);
    let gives = match expanded.len() == columns.len() {
        true => format!("{}", columns.len() + extra),
        false => format!("{} (or {}, the fields of its ROWs)", columns.len() + extra, expanded.len() + extra),
    };
    let what = match (ordinality, shapes.contains(&Shape::Entries)) {
        (true, _) => ", the position last",
        (false, true) => ", a MAP its key and value",
        (false, false) => "",
    };
    plan_err!("UNNEST(..) AS t (..) names {} columns, but its input gives {gives}: name as many{what}", n + extra)
}

/// The literal `n` and `ordinality` of a call.
fn spec(scalars: &[Option<&ScalarValue>]) -> Result<(usize, bool)> {
    match (scalars.first().copied().flatten(), scalars.get(1).copied().flatten()) {
        (Some(ScalarValue::Int64(Some(n))), Some(ScalarValue::Boolean(Some(o)))) if *n >= 0 => Ok((*n as usize, *o)),
        _ => plan_err!("{NAME}(n, ordinality, ..): n and ordinality must be literals"),
    }
}

/// The array of ROW of the columns `types` (`c1` .. `cn`).
fn row_type(types: &[DataType]) -> DataType {
    let fields: Fields = types.iter().enumerate().map(|(i, t)| Field::new(format!("c{}", i + 1), t.clone(), true)).collect();
    DataType::List(Arc::new(Field::new_list_field(DataType::Struct(fields), true)))
}

impl ScalarUDFImpl for UnnestRows {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if arg_types.len() < 3 {
            return plan_err!("{NAME}(n, ordinality, x, ..): got {} arguments", arg_types.len());
        }
        let mut out = vec![DataType::Int64, DataType::Boolean];
        out.extend(arg_types[2..].iter().cloned());
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        plan_err!("{NAME}: its type comes from its literal arguments (return_field_from_args)")
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let (n, ordinality) = spec(args.scalar_arguments)?;
        let types: Vec<DataType> = args.arg_fields[2..].iter().map(|f| f.data_type().clone()).collect();
        let wanted = match (ordinality, n) {
            (true, 0) => return plan_err!("UNNEST .. WITH ORDINALITY AS t (..): name the ordinality column too"),
            (true, n) => n - 1,
            (false, n) => n,
        };
        let (_, mut columns) = shapes(&types, wanted, ordinality)?;
        if ordinality {
            columns.push(DataType::Int64);
        }
        Ok(Arc::new(Field::new(NAME, row_type(&columns), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = num_rows(&args.args);
        let scalars: Vec<Option<ScalarValue>> = args.args[..2]
            .iter()
            .map(|a| match a {
                ColumnarValue::Scalar(s) => Some(s.clone()),
                ColumnarValue::Array(_) => None,
            })
            .collect();
        let (n, ordinality) = spec(&scalars.iter().map(Option::as_ref).collect::<Vec<_>>())?;
        let inputs = args.args[2..].iter().map(|a| a.to_array(rows)).collect::<Result<Vec<ArrayRef>>>()?;
        let types: Vec<DataType> = inputs.iter().map(|a| a.data_type().clone()).collect();
        let (shapes, _) = shapes(&types, n - usize::from(ordinality), ordinality)?;
        // Each argument's values (one child array per column it gives) and its per-row ranges.
        let mut sources: Vec<(Vec<ArrayRef>, Vec<(usize, usize)>)> = Vec::with_capacity(inputs.len());
        for (input, shape) in inputs.iter().zip(&shapes) {
            sources.push(values_of(input, *shape)?);
        }
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0i32);
        let mut indices: Vec<UInt32Builder> = sources.iter().map(|_| UInt32Builder::new()).collect();
        let mut positions = Int64Builder::new();
        let mut total = 0usize;
        for row in 0..rows {
            let longest = sources.iter().map(|(_, ranges)| ranges[row].1).max().unwrap_or(0);
            for j in 0..longest {
                for ((_, ranges), out) in sources.iter().zip(indices.iter_mut()) {
                    let (start, len) = ranges[row];
                    match j < len {
                        true => out.append_value(u32::try_from(start + j).map_err(|_| datafusion::error::DataFusionError::Execution("UNNEST: too many elements".into()))?),
                        false => out.append_null(),
                    }
                }
                positions.append_value(j as i64 + 1);
            }
            total += longest;
            let Ok(end) = i32::try_from(total) else { return exec_err!("UNNEST: more than 2^31 rows in one batch") };
            offsets.push(end);
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(n);
        for ((values, _), mut index) in sources.into_iter().zip(indices) {
            let index = index.finish();
            for v in values {
                columns.push(arrow::compute::take(&v, &index, None)?);
            }
        }
        if ordinality {
            columns.push(Arc::new(positions.finish()));
        }
        let DataType::List(item) = row_type(&columns.iter().map(|c| c.data_type().clone()).collect::<Vec<_>>()) else {
            unreachable!("row_type is a list")
        };
        let DataType::Struct(fields) = item.data_type() else { unreachable!("a list of struct") };
        let rows_array = match fields.is_empty() {
            true => new_empty_array(item.data_type()),
            false => Arc::new(StructArray::try_new(fields.clone(), columns, None)?),
        };
        let list = ListArray::try_new(item, OffsetBuffer::new(offsets.into()), rows_array, None)?;
        Ok(ColumnarValue::Array(Arc::new(list)))
    }
}

/// The child arrays of `input` for `shape` (one per column it gives), and each row's `(start,
/// length)` in them (length 0 for a NULL).
fn values_of(input: &ArrayRef, shape: Shape) -> Result<(Vec<ArrayRef>, Vec<(usize, usize)>)> {
    let ranges = |offsets: &[i64], nulls: Option<&arrow::buffer::NullBuffer>| -> Vec<(usize, usize)> {
        (0..offsets.len() - 1)
            .map(|i| match nulls.is_some_and(|n| n.is_null(i)) {
                true => (0, 0),
                false => (offsets[i] as usize, (offsets[i + 1] - offsets[i]) as usize),
            })
            .collect()
    };
    let (values, ranges): (ArrayRef, Vec<(usize, usize)>) = match input.data_type() {
        DataType::Null => return Ok((vec![Arc::new(arrow::array::NullArray::new(0))], vec![(0, 0); input.len()])),
        DataType::List(_) => {
            let list = input.as_list::<i32>();
            let offsets: Vec<i64> = list.offsets().iter().map(|o| i64::from(*o)).collect();
            (Arc::clone(list.values()), ranges(&offsets, list.nulls()))
        }
        DataType::LargeList(_) => {
            let list = input.as_list::<i64>();
            (Arc::clone(list.values()), ranges(list.offsets(), list.nulls()))
        }
        DataType::FixedSizeList(_, size) => {
            let list = input.as_fixed_size_list();
            let (size, first) = (i64::from(*size), i64::from(list.value_offset(0)));
            let offsets: Vec<i64> = (0..=list.len() as i64).map(|i| first + i * size).collect();
            (Arc::clone(list.values()), ranges(&offsets, list.nulls()))
        }
        DataType::Map(..) => {
            let map = input.as_map();
            let offsets: Vec<i64> = map.offsets().iter().map(|o| i64::from(*o)).collect();
            return Ok((vec![Arc::clone(map.keys()), Arc::clone(map.values())], ranges(&offsets, map.nulls())));
        }
        other => return exec_err!("UNNEST takes an ARRAY or a MAP, got {other}"),
    };
    match shape {
        Shape::Fields(_) => {
            let rows = values.as_struct();
            // A NULL ROW element gives NULL fields.
            let columns = rows
                .columns()
                .iter()
                .map(|c| match rows.nulls() {
                    Some(nulls) => arrow::compute::nullif(c, &arrow::array::BooleanArray::new(!nulls.inner(), None)),
                    None => Ok(Arc::clone(c)),
                })
                .collect::<std::result::Result<Vec<ArrayRef>, _>>()?;
            Ok((columns, ranges))
        }
        _ => Ok((vec![values], ranges)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_give_their_columns_and_a_wrong_count_is_named() {
        let ints = DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true)));
        let row = DataType::Struct(vec![Field::new("a", DataType::Int32, true), Field::new("b", DataType::Utf8, true)].into());
        let rows = DataType::List(Arc::new(Field::new_list_field(row, true)));
        let map = DataType::Map(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Int64, true)].into()),
                false,
            )),
            false,
        );
        assert_eq!(shapes(&[ints.clone()], 1, false).unwrap().0, [Shape::Elements]);
        assert_eq!(shapes(&[rows.clone()], 1, false).unwrap().0, [Shape::Elements]);
        assert_eq!(shapes(&[rows.clone()], 2, false).unwrap(), (vec![Shape::Fields(2)], vec![DataType::Int32, DataType::Utf8]));
        assert_eq!(shapes(&[map.clone()], 2, false).unwrap(), (vec![Shape::Entries], vec![DataType::Utf8, DataType::Int64]));
        assert_eq!(shapes(&[ints.clone(), map.clone()], 3, false).unwrap().0, [Shape::Elements, Shape::Entries]);
        let error = shapes(&[map], 1, false).unwrap_err().to_string();
        assert!(error.contains("names 1 columns, but its input gives 2"), "{error}");
        let error = shapes(&[rows], 3, false).unwrap_err().to_string();
        assert!(error.contains("gives 1 (or 2, the fields of its ROWs)"), "{error}");
    }
}

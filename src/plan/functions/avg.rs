//! `AVG(x)` typed as in Flink, replacing DataFusion's `avg` (and its alias `mean`) so that a
//! batch `SELECT` and a streaming view plan the same type.
//!
//! - Integer `x` (TINYINT, SMALLINT, INT, BIGINT, and the unsigned types): the result has `x`'s
//!   type, the sum divided by the count with the quotient truncated toward zero (Flink's
//!   `AvgAggFunction` for integral types: a `long` sum and Java's `/`). `AVG` of 1 and 2 is 1,
//!   of -1 and -2 is -1. The sum is kept as a 128-bit integer, so it does not overflow.
//! - Floating-point `x`: DOUBLE; DECIMAL(p, s): DECIMAL(min(38, p + 4), min(38, s + 4)); an
//!   interval: its type. These are DataFusion's rules and accumulators, used as they are.
//! - NULLs are skipped; no non-NULL value gives NULL. `AVG(DISTINCT x)` averages the distinct
//!   values.
//!
//! The streaming GROUP BY (`runtime/operators/group_agg.rs`) computes the same result from the
//! output type this function plans.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, UInt64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, UInt64Type};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{internal_err, plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::functions_aggregate::average::Avg;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, Signature, Volatility,
};

/// Integer sums and values are held as DECIMAL(38, 0): every integer type casts to it exactly.
const WIDE: DataType = DataType::Decimal128(38, 0);

/// `AVG` with Flink's result type.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct FlinkAvg {
    /// DataFusion's `avg`, for everything but integers.
    inner: Avg,
    signature: Signature,
    aliases: Vec<String>,
}

impl FlinkAvg {
    pub(super) fn new() -> Self {
        Self {
            inner: Avg::new(),
            signature: Signature::user_defined(Volatility::Immutable),
            aliases: vec!["mean".to_string()],
        }
    }
}

impl AggregateUDFImpl for FlinkAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [t] = arg_types else {
            return plan_err!("AVG takes one argument, got {}", arg_types.len());
        };
        let coerced = match t {
            t if t.is_integer() => t.clone(),
            DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Null => DataType::Float64,
            DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
            | DataType::Duration(_) => t.clone(),
            DataType::Dictionary(_, v) => return self.coerce_types(&[v.as_ref().clone()]),
            other => return plan_err!("AVG takes a number or an interval, got {other}"),
        };
        Ok(vec![coerced])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [t] if t.is_integer() => Ok(t.clone()),
            _ => self.inner.return_type(arg_types),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if !args.expr_fields[0].data_type().is_integer() {
            return self.inner.accumulator(args);
        }
        let return_type = args.return_type().clone();
        if args.is_distinct {
            Ok(Box::new(DistinctIntAvg { values: HashSet::new(), return_type }))
        } else {
            Ok(Box::new(IntAvg { sum: 0, count: 0, return_type }))
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        if !args.input_fields[0].data_type().is_integer() {
            return self.inner.state_fields(args);
        }
        if args.is_distinct {
            let list =
                Field::new_list(format_state_name(args.name, "avg distinct"), Field::new_list_field(WIDE, true), false);
            return Ok(vec![Arc::new(list)]);
        }
        Ok(vec![
            Arc::new(Field::new(format_state_name(args.name, "count"), DataType::UInt64, true)),
            Arc::new(Field::new(format_state_name(args.name, "sum"), WIDE, true)),
        ])
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        if args.expr_fields[0].data_type().is_integer() {
            !args.is_distinct
        } else {
            self.inner.groups_accumulator_supported(args)
        }
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        if !args.expr_fields[0].data_type().is_integer() {
            return self.inner.create_groups_accumulator(args);
        }
        Ok(Box::new(IntAvgGroups { sums: Vec::new(), counts: Vec::new(), return_type: args.return_type().clone() }))
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }
}

/// `values` (any integer type) as DECIMAL(38, 0).
fn widen(values: &ArrayRef) -> Result<Decimal128Array> {
    let wide = cast(values, &WIDE)?;
    match wide.as_primitive_opt::<Decimal128Type>() {
        Some(a) => Ok(a.clone()),
        None => internal_err!("AVG: widening {} gave {}", values.data_type(), wide.data_type()),
    }
}

/// `sum / count` truncated toward zero, in `return_type` (an integer type, which always holds
/// the average of its own values); NULL for no values.
fn average(sum: i128, count: u64, return_type: &DataType) -> Result<ScalarValue> {
    let avg = (count > 0).then(|| sum / i128::from(count));
    ScalarValue::Decimal128(avg, 38, 0).cast_to(return_type)
}

/// AVG of one group of integers.
#[derive(Debug)]
struct IntAvg {
    sum: i128,
    count: u64,
    return_type: DataType,
}

impl Accumulator for IntAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = widen(&values[0])?;
        self.count += (values.len() - values.null_count()) as u64;
        self.sum += values.iter().flatten().sum::<i128>();
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = widen(&values[0])?;
        self.count -= (values.len() - values.null_count()) as u64;
        self.sum -= values.iter().flatten().sum::<i128>();
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        average(self.sum, self.count, &self.return_type)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::UInt64(Some(self.count)), ScalarValue::Decimal128(Some(self.sum), 38, 0)])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (counts, sums) = state_arrays(states)?;
        self.count += counts.iter().flatten().sum::<u64>();
        self.sum += sums.iter().flatten().sum::<i128>();
        Ok(())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// The (count, sum) state columns.
fn state_arrays(states: &[ArrayRef]) -> Result<(&UInt64Array, &Decimal128Array)> {
    match (
        states.first().and_then(|a| a.as_primitive_opt::<UInt64Type>()),
        states.get(1).and_then(|a| a.as_primitive_opt::<Decimal128Type>()),
    ) {
        (Some(counts), Some(sums)) => Ok((counts, sums)),
        _ => internal_err!("AVG state is not (UInt64, Decimal128)"),
    }
}

/// AVG(DISTINCT) of one group of integers.
#[derive(Debug)]
struct DistinctIntAvg {
    values: HashSet<i128>,
    return_type: DataType,
}

impl Accumulator for DistinctIntAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values.extend(widen(&values[0])?.iter().flatten());
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        average(self.values.iter().sum(), self.values.len() as u64, &self.return_type)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values = Decimal128Array::from_iter_values(self.values.iter().copied()).with_precision_and_scale(38, 0)?;
        Ok(vec![SingleRowListArrayBuilder::new(Arc::new(values)).build_list_scalar()])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(lists) = states.first().and_then(|a| a.as_list_opt::<i32>()) else {
            return internal_err!("AVG(DISTINCT) state is not a list");
        };
        for list in lists.iter().flatten() {
            let Some(values) = list.as_primitive_opt::<Decimal128Type>() else {
                return internal_err!("AVG(DISTINCT) state holds {}", list.data_type());
            };
            self.values.extend(values.iter().flatten());
        }
        Ok(())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.capacity() * std::mem::size_of::<i128>()
    }
}

/// AVG of integers for many groups at once (DataFusion's hash aggregation).
#[derive(Debug)]
struct IntAvgGroups {
    /// Per group index.
    sums: Vec<i128>,
    /// Per group index: the non-NULL values seen.
    counts: Vec<u64>,
    return_type: DataType,
}

/// Whether row `i` passes the aggregate's FILTER (NULL does not).
fn passes(filter: Option<&BooleanArray>, i: usize) -> bool {
    filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

impl GroupsAccumulator for IntAvgGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let values = widen(&values[0])?;
        self.sums.resize(total_num_groups, 0);
        self.counts.resize(total_num_groups, 0);
        for (i, &g) in group_indices.iter().enumerate() {
            if values.is_valid(i) && passes(opt_filter, i) {
                self.sums[g] += values.value(i);
                self.counts[g] += 1;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        let averages: Decimal128Array =
            sums.into_iter().zip(counts).map(|(sum, count)| (count > 0).then(|| sum / i128::from(count))).collect();
        Ok(cast(&averages.with_precision_and_scale(38, 0)?, &self.return_type)?)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        Ok(vec![
            Arc::new(UInt64Array::from(counts)),
            Arc::new(Decimal128Array::from(sums).with_precision_and_scale(38, 0)?),
        ])
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        let (counts, sums) = state_arrays(values)?;
        self.sums.resize(total_num_groups, 0);
        self.counts.resize(total_num_groups, 0);
        for (i, &g) in group_indices.iter().enumerate() {
            if counts.is_valid(i) && sums.is_valid(i) {
                self.sums[g] += sums.value(i);
                self.counts[g] += counts.value(i);
            }
        }
        Ok(())
    }

    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let values = widen(&values[0])?;
        let keep = |i: usize| values.is_valid(i) && passes(opt_filter, i);
        let counts: UInt64Array = (0..values.len()).map(|i| Some(u64::from(keep(i)))).collect();
        let sums: Decimal128Array =
            (0..values.len()).map(|i| Some(if keep(i) { values.value(i) } else { 0 })).collect();
        Ok(vec![Arc::new(counts), Arc::new(sums.with_precision_and_scale(38, 0)?)])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<i128>() + self.counts.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;

    #[test]
    fn truncates_toward_zero() -> Result<()> {
        let mut acc = IntAvg { sum: 0, count: 0, return_type: DataType::Int32 };
        assert_eq!(acc.evaluate()?, ScalarValue::Int32(None));
        acc.update_batch(&[Arc::new(Int32Array::from(vec![Some(1), None, Some(2)]))])?;
        assert_eq!(acc.evaluate()?, ScalarValue::Int32(Some(1)));
        acc.retract_batch(&[Arc::new(Int32Array::from(vec![1, 2]))])?;
        acc.update_batch(&[Arc::new(Int32Array::from(vec![-1, -2]))])?;
        assert_eq!(acc.evaluate()?, ScalarValue::Int32(Some(-1)));
        Ok(())
    }

    #[test]
    fn groups_with_filter_and_merge() -> Result<()> {
        let mut acc = IntAvgGroups { sums: Vec::new(), counts: Vec::new(), return_type: DataType::Int32 };
        let values: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), Some(2), Some(7), None, Some(100)]));
        let filter = BooleanArray::from(vec![Some(true), Some(true), Some(true), Some(true), None]);
        acc.update_batch(&[Arc::clone(&values)], &[0, 0, 1, 2, 1], Some(&filter), 3)?;
        let state = acc.state(EmitTo::All)?;
        let mut merged = IntAvgGroups { sums: Vec::new(), counts: Vec::new(), return_type: DataType::Int32 };
        merged.merge_batch(&state, &[0, 1, 2], 3)?;
        let out = merged.evaluate(EmitTo::All)?;
        let out = out.as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!(out.iter().collect::<Vec<_>>(), vec![Some(1), Some(7), None]);
        Ok(())
    }
}

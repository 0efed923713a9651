//! A DECIMAL divided by a DECIMAL has Flink's result type and rounding, not Arrow's.
//!
//! Arrow (and so DataFusion) gives `DECIMAL(p1, s1) / DECIMAL(p2, s2)` the scale `s1 + 4`
//! (Postgres's and MySQL's increment), truncated: `CAST(1 AS DECIMAL(10, 2)) / CAST(3 AS
//! DECIMAL(10, 2))` is `0.333333`, a DECIMAL(16, 6). Flink's rule
//! (`LogicalTypeMerging.findDivisionDecimalType`) is the scale `max(6, s1 + p2 + 1)` and the
//! precision `p1 - s1 + s2 + scale`, both brought within 38 digits as its
//! `adjustPrecisionScale` brings them (the integer digits kept, the scale cut to no less than
//! 6), rounded half up (`DecimalData.divide`): DECIMAL(23, 13), `0.3333333333333`.
//!
//! [`DecimalDivision`], an analyzer rule run before DataFusion's type coercion (so an integer
//! side is still an integer, whose DECIMAL is Flink's for its type: `d / 2` divides by an INT,
//! DECIMAL(10, 0); a `CAST(2 AS DECIMAL(20, 0))` is the DECIMAL it names), rewrites `l / r` into
//! `CAST(CAST(l AS DECIMAL(p1 + k, s1 + k)) / CAST(r AS DECIMAL(p2, s2)) AS DECIMAL(P, S))`: the
//! dividend's scale raised so that Arrow's quotient has one digit past Flink's scale (its last
//! digit only truncated), and the cast, which rounds half away from zero, brings it to Flink's
//! type. Where Arrow's division would need more than 38 digits (`p1 + k + s2 + 4`) it runs in
//! DECIMAL256. A view or job created before this rule keeps Arrow's type
//! ([`crate::sql::settings::DECIMAL_DIVISION`]).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::Cast;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule; see the module docs.
#[derive(Debug, Default)]
pub struct DecimalDivision;

/// Arrow's and Flink's largest DECIMAL precision.
const MAX_PRECISION: i32 = 38;
/// The least scale Flink's division keeps (`MINIMUM_ADJUSTED_SCALE`).
const MIN_SCALE: i32 = 6;
/// The digits Arrow's decimal division adds to the dividend's scale.
const ARROW_INCREMENT: i32 = 4;

impl AnalyzerRule for DecimalDivision {
    fn name(&self) -> &str {
        "weir_decimal_division"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let name = names.save(&e);
                e.transform_up(|e| flink_division(e, &schema)).map(|t| t.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }
}

/// Flink's result type of `DECIMAL(p1, s1) / DECIMAL(p2, s2)`, as (precision, scale).
pub fn division_type((p1, s1): (i32, i32), (p2, s2): (i32, i32)) -> (i32, i32) {
    let scale = MIN_SCALE.max(s1 + p2 + 1);
    let precision = p1 - s1 + s2 + scale;
    if precision <= MAX_PRECISION {
        return (precision.max(1), scale);
    }
    let integer_digits = precision - scale;
    (MAX_PRECISION, (MAX_PRECISION - integer_digits).max(scale.min(MIN_SCALE)))
}

/// The DECIMAL type Flink gives operand `e` of type `t` in a division: a DECIMAL's own, an
/// integer's (`TINYINT` DECIMAL(3, 0), `SMALLINT` (5, 0), `INT` (10, 0), `BIGINT` (19, 0)), an
/// integer literal that fits an INT an INT's (DataFusion types every integer literal BIGINT);
/// `None` for another type.
fn flink_decimal(e: &Expr, t: &DataType) -> Option<(i32, i32)> {
    Some(match t {
        DataType::Decimal128(p, s) => (i32::from(*p), i32::from(*s)),
        DataType::Int8 | DataType::UInt8 => (3, 0),
        DataType::Int16 | DataType::UInt16 => (5, 0),
        DataType::Int32 | DataType::UInt32 => (10, 0),
        DataType::Int64 => match e {
            Expr::Literal(datafusion::common::ScalarValue::Int64(Some(v)), _) if i32::try_from(*v).is_ok() => (10, 0),
            _ => (19, 0),
        },
        DataType::UInt64 => (20, 0),
        _ => return None,
    })
}

/// `e` as Flink divides it, when it is a division of a DECIMAL128 by a DECIMAL128 or an
/// integer, or of an integer by a DECIMAL128 (module docs).
fn flink_division(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Divide, right }) = &e else { return Ok(Transformed::no(e)) };
    let (Ok(lt), Ok(rt)) = (left.get_type(schema), right.get_type(schema)) else { return Ok(Transformed::no(e)) };
    if !matches!(lt, DataType::Decimal128(..)) && !matches!(rt, DataType::Decimal128(..)) {
        return Ok(Transformed::no(e));
    }
    let (Some((p1, s1)), Some((p2, s2))) = (flink_decimal(left, &lt), flink_decimal(right, &rt)) else {
        return Ok(Transformed::no(e));
    };
    let (precision, scale) = division_type((p1, s1), (p2, s2));
    // Arrow's quotient has scale s1 + k + 4: one digit past Flink's. Within 38 digits it is
    // computed in DECIMAL128, else in DECIMAL256 (76 digits).
    let raise = (scale + 1 - ARROW_INCREMENT - s1).max(0);
    let wide = p1 + raise + s2 + ARROW_INCREMENT > MAX_PRECISION;
    let decimal = |p: i32, s: i32| match wide {
        true => DataType::Decimal256(p as u8, s as i8),
        false => DataType::Decimal128(p as u8, s as i8),
    };
    let dividend = Expr::Cast(Cast::new(left.clone(), decimal(p1 + raise, s1 + raise)));
    let divisor = Expr::Cast(Cast::new(right.clone(), decimal(p2, s2)));
    let quotient = Expr::BinaryExpr(BinaryExpr::new(Box::new(dividend), Operator::Divide, Box::new(divisor)));
    let typed = DataType::Decimal128(precision as u8, scale as i8);
    Ok(Transformed::yes(Expr::Cast(Cast::new(Box::new(quotient), typed))))
}

#[cfg(test)]
mod tests {
    use super::division_type;

    /// Flink's result types, from its rule by hand: DECIMAL(10, 2) / DECIMAL(10, 2) has scale
    /// max(6, 2 + 10 + 1) = 13 and precision 10 - 2 + 2 + 13 = 23; DECIMAL(2, 1) / DECIMAL(1, 0)
    /// scale max(6, 3) = 6, precision 2 - 1 + 0 + 6 = 7; DECIMAL(38, 10) /
    /// DECIMAL(38, 10) has scale 49 and precision 87, brought to 38 digits keeping its 38
    /// integer digits but a scale of 6.
    #[test]
    fn division_types_are_flinks() {
        assert_eq!(division_type((10, 2), (10, 2)), (23, 13));
        assert_eq!(division_type((2, 1), (1, 0)), (7, 6));
        assert_eq!(division_type((38, 10), (38, 10)), (38, 6));
        assert_eq!(division_type((20, 2), (10, 0)), (31, 13));
    }
}

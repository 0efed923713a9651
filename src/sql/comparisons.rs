//! A string compared with a number is refused when the statement is planned, as Postgres and
//! Flink refuse it, instead of being cast row by row.
//!
//! DataFusion coerces `cat = 1` (cat a STRING column) to `CAST(cat AS BIGINT) = 1`, so the
//! statement fails, or not, depending on the rows it meets ("Cannot cast string 'b' to value
//! of Int64 type"), and a view built on it fails when such a row arrives. Postgres refuses it
//! while planning (`42883 operator does not exist: text = integer`; a string literal is of
//! unknown type there and takes the other side's, so `id = '1'` is fine); Flink refuses an
//! implicit conversion between character strings and numbers in comparisons
//! (FLINK-24492). [`StringNumberComparisons`], an analyzer rule run before DataFusion's type
//! coercion, does what Postgres does for `=`, `<>`, `<`, `<=`, `>`, `>=`, `IS [NOT] DISTINCT
//! FROM`, `IN (..)`, `IN (SELECT ..)`, `BETWEEN` and join keys: a string that is not a literal
//! (a column, a function's result, a cast to text) against a number is refused; a string
//! literal or a parameter is still coerced to the other side's type.
//!
//! [`FloatDecimalComparisons`], run right after it, takes a float meeting a DECIMAL as a
//! DOUBLE (Postgres and Flink do; DataFusion casts the float to DECIMAL(30, 15)), and compares
//! `x = ANY(array)` of two numeric types as their common type (DataFusion refuses it).

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, ExprSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::{Between, Cast, InList, InSubquery};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, Projection, Union};
use datafusion::optimizer::AnalyzerRule;

use crate::error::{ErrorKind, WeirError};
use crate::sql::pg_catalog::format_type;

/// The analyzer rule; see the module docs.
#[derive(Debug, Default)]
pub struct StringNumberComparisons;

impl AnalyzerRule for StringNumberComparisons {
    fn name(&self) -> &str {
        "weir_string_number_comparisons"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.apply_with_subqueries(|node| {
            let schema = inputs_schema(node);
            // A join's equi-keys, if the planner already took them out of its condition.
            if let LogicalPlan::Join(join) = node {
                for (l, r) in &join.on {
                    pair(Side::of(l, &schema), "=", Side::of(r, &schema))?;
                }
            }
            node.apply_expressions(|e| {
                e.apply(|e| {
                    check(e, &schema)?;
                    Ok(TreeNodeRecursion::Continue)
                })
            })
        })?;
        Ok(plan)
    }
}

/// A float (DOUBLE, FLOAT) meeting a DECIMAL in a comparison (`=`, `<`, .., `BETWEEN`, `IN
/// (..)`, `IN (SELECT ..)`, a join's keys, so `INTERSECT` and `EXCEPT`), as one of the values of `CASE`, `COALESCE`, `NULLIF`, `GREATEST` or `LEAST`, or as
/// one of the inputs of a `UNION` is taken as a DOUBLE, as Postgres and Flink take it: `f >
/// 1.5` (a number literal with a point is a DECIMAL, as in Postgres) compares DOUBLEs. DataFusion's type coercion casts the float
/// to DECIMAL(30, 15) instead, which fails on a value of 10^15 or more ("too large to store
/// in a Decimal128 of precision 30"; in a view, on the row that brings one) and takes one
/// below 10^-15 for zero. Run before that coercion, which then has nothing to do.
#[derive(Debug, Default)]
pub struct FloatDecimalComparisons;

impl AnalyzerRule for FloatDecimalComparisons {
    fn name(&self) -> &str {
        "weir_float_decimal_comparisons"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            if let LogicalPlan::Union(union) = &node {
                if let Some(union) = doubles_for_union(union)? {
                    return Ok(Transformed::yes(union));
                }
            }
            // A join's equi-keys (`a.f = b.d`, and the keys of INTERSECT and EXCEPT).
            let (node, keys_changed) = match node {
                LogicalPlan::Join(mut join) => {
                    let (left, right) = (Arc::clone(&join.left), Arc::clone(&join.right));
                    let mut changed = false;
                    for (l, r) in &mut join.on {
                        changed |= unify(vec![(l, left.schema()), (r, right.schema())]);
                    }
                    (LogicalPlan::Join(join), changed)
                }
                other => (other, false),
            };
            let schema = inputs_schema(&node);
            // Each expression keeps its name (as DataFusion's type coercion keeps it), so the
            // nodes above still find its column; the type coercion that runs next recomputes
            // every node's schema (a CASE may have become a DOUBLE).
            let names = NamePreserver::new(&node);
            let rewritten = node.map_expressions(|e| {
                let name = names.save(&e);
                e.transform_up(|e| doubles_for_floats(e, &schema)).map(|t| t.update_data(|e| name.restore(e)))
            })?;
            Ok(if keys_changed { Transformed::yes(rewritten.data) } else { rewritten })
        })
        .map(|t| t.data)
    }
}

/// The columns the expressions of plan node `node` read: its inputs' schemas, merged.
fn inputs_schema(node: &LogicalPlan) -> DFSchema {
    let mut schema = DFSchema::empty();
    for input in node.inputs() {
        schema.merge(input.schema());
    }
    schema
}

/// [`FloatDecimalComparisons`] on a `UNION`: a column that is a float in one input and a
/// DECIMAL in another is cast to DOUBLE in the latter (a projection over it); `None` when no
/// column is.
fn doubles_for_union(union: &Union) -> DfResult<Option<LogicalPlan>> {
    let is_decimal = is_decimal_type;
    let column_types = |c: usize| union.inputs.iter().filter_map(move |i| i.schema().fields().get(c).map(|f| f.data_type().clone()));
    let mixed: Vec<usize> = (0..union.schema.fields().len())
        .filter(|&c| column_types(c).any(|t| t.is_floating()) && column_types(c).any(|t| is_decimal(&t)))
        .collect();
    if mixed.is_empty() {
        return Ok(None);
    }
    let inputs = union
        .inputs
        .iter()
        .map(|input| {
            let schema = input.schema();
            let exprs = (0..schema.fields().len()).map(|c| {
                let (qualifier, field) = schema.qualified_field(c);
                let column = Expr::Column(Column::from((qualifier, field)));
                if mixed.contains(&c) && is_decimal(field.data_type()) {
                    Expr::Cast(Cast::new(Box::new(column), DataType::Float64)).alias_qualified(qualifier.cloned(), field.name())
                } else {
                    column
                }
            });
            Ok(Arc::new(LogicalPlan::Projection(Projection::try_new(exprs.collect(), Arc::clone(input))?)))
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(Some(LogicalPlan::Union(Union::try_new_with_loose_types(inputs)?)))
}

/// Casts the DECIMALs of `values` (each with the schema it reads) to DOUBLE if a float is
/// among them; returns whether it did.
fn unify(values: Vec<(&mut Expr, &DFSchema)>) -> bool {
    let type_of = |e: &Expr, schema: &DFSchema| e.get_type(schema).ok();
    let is_float = |(e, schema): &(&mut Expr, &DFSchema)| type_of(e, schema).is_some_and(|t| t.is_floating());
    let is_decimal = |(e, schema): &(&mut Expr, &DFSchema)| type_of(e, schema).as_ref().is_some_and(is_decimal_type);
    if !values.iter().any(is_float) || !values.iter().any(is_decimal) {
        return false;
    }
    for v in values {
        if is_decimal(&v) {
            cast_in_place(v.0, DataType::Float64);
        }
    }
    true
}

fn is_decimal_type(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
}

/// [`FloatDecimalComparisons`] on one expression (its operands already rewritten).
fn doubles_for_floats(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let all = |values: Vec<&mut Expr>| unify(values.into_iter().map(|v| (v, schema)).collect());
    let mut e = e;
    let changed = match &mut e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(op) => all(vec![left.as_mut(), right.as_mut()]),
        Expr::Between(Between { expr, low, high, .. }) => all(vec![expr.as_mut(), low.as_mut(), high.as_mut()]),
        Expr::InList(InList { expr, list, .. }) => all(std::iter::once(expr.as_mut()).chain(list.iter_mut()).collect()),
        Expr::Case(case) => {
            let results = case.when_then_expr.iter_mut().map(|(_, then)| then.as_mut()).chain(case.else_expr.as_deref_mut());
            all(results.collect())
        }
        Expr::ScalarFunction(f) if ["coalesce", "nullif", "greatest", "least"].contains(&f.func.name()) => {
            all(f.args.iter_mut().collect())
        }
        Expr::ScalarFunction(f) if f.func.name() == "array_has" && f.args.len() == 2 => {
            let (array, value) = f.args.split_at_mut(1);
            array_and_value(&mut array[0], &mut value[0], schema)
        }
        // `f IN (SELECT d ..)`: the subquery's column as a DOUBLE, or the value.
        Expr::InSubquery(InSubquery { expr, subquery, .. }) => {
            let inner = Arc::clone(&subquery.subquery);
            let inner_schema = inner.schema();
            let Some((qualifier, field)) = (!inner_schema.fields().is_empty()).then(|| inner_schema.qualified_field(0)) else {
                return Ok(Transformed::no(e));
            };
            let mut column = Expr::Column(Column::from((qualifier, field)));
            let name = field.name().clone();
            let qualifier = qualifier.cloned();
            let value_schema = schema;
            let pair = vec![(expr.as_mut(), value_schema), (&mut column, inner_schema.as_ref())];
            if !unify(pair) {
                return Ok(Transformed::no(e));
            }
            if matches!(column, Expr::Cast(_)) {
                let projection = Projection::try_new(vec![column.alias_qualified(qualifier, name)], inner)?;
                subquery.subquery = Arc::new(LogicalPlan::Projection(projection));
            }
            true
        }
        _ => false,
    };
    Ok(if changed { Transformed::yes(e) } else { Transformed::no(e) })
}

/// `x = ANY(array)` (DataFusion's `array_has(array, x)`) of two numeric types, `1 = ANY(ARRAY[1.0,
/// 2.5])`, compared as their common type, as Postgres and Flink compare them: DataFusion's
/// coercion of `array_has` refuses an INT beside a list of DECIMALs. The value, the array or
/// both are cast; a float beside a DECIMAL meets it as a DOUBLE, as in the other comparisons.
fn array_and_value(array: &mut Expr, value: &mut Expr, schema: &DFSchema) -> bool {
    let (Ok(list), Ok(value_type)) = (array.get_type(schema), value.get_type(schema)) else { return false };
    let DataType::List(item) = &list else { return false };
    let element = item.data_type();
    if element == &value_type || !element.is_numeric() || !value_type.is_numeric() {
        return false;
    }
    let common = if element.is_floating() || value_type.is_floating() {
        Some(DataType::Float64)
    } else {
        datafusion::logical_expr::type_coercion::binary::comparison_coercion(element, &value_type)
    };
    let Some(common) = common else { return false };
    if &common != element {
        cast_in_place(array, DataType::List(Arc::new(item.as_ref().clone().with_data_type(common.clone()))));
    }
    if common != value_type {
        cast_in_place(value, common);
    }
    true
}

/// Replaces `e` by `CAST(e AS to)`.
fn cast_in_place(e: &mut Expr, to: DataType) {
    let old = std::mem::replace(e, Expr::Literal(ScalarValue::Null, None));
    *e = Expr::Cast(Cast::new(Box::new(old), to));
}

/// Refuses `e` if it compares a string that is not a literal with a number.
fn check(e: &Expr, schema: &dyn ExprSchema) -> DfResult<()> {
    let side = |e: &Expr| Side::of(e, schema);
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(op) => {
            pair(side(left), &op.to_string(), side(right))
        }
        Expr::InList(InList { expr, list, .. }) => list.iter().try_for_each(|item| pair(side(expr), "=", side(item))),
        Expr::Between(Between { expr, low, high, .. }) => {
            pair(side(expr), ">=", side(low))?;
            pair(side(expr), "<=", side(high))
        }
        Expr::InSubquery(InSubquery { expr, subquery, .. }) => {
            let column = subquery.subquery.schema().fields().first().map(|f| f.data_type().clone());
            pair(side(expr), "=", Side { data_type: column, untyped: false })
        }
        _ => Ok(()),
    }
}

/// One operand of a comparison: its type, if it can be read here (not a name resolved later),
/// and whether it is untyped ([`is_untyped`]).
struct Side {
    data_type: Option<DataType>,
    untyped: bool,
}

impl Side {
    fn of(e: &Expr, schema: &dyn ExprSchema) -> Self {
        Side { data_type: e.get_type(schema).ok(), untyped: is_untyped(e) }
    }

    /// A string that is not a literal or a parameter.
    fn typed_string(&self) -> bool {
        !self.untyped && self.data_type.as_ref().is_some_and(is_string)
    }

    /// A number that is not a parameter.
    fn typed_number(&self) -> bool {
        !self.untyped && self.data_type.as_ref().is_some_and(DataType::is_numeric)
    }
}

/// Whether `op` compares its operands.
fn is_comparison(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// Refuses `left op right` if one side is a string that is not a literal and the other a
/// number. Operands whose type cannot be read here pass.
fn pair(left: Side, op: &str, right: Side) -> DfResult<()> {
    let (Some(lt), Some(rt)) = (&left.data_type, &right.data_type) else { return Ok(()) };
    if (left.typed_string() && right.typed_number()) || (left.typed_number() && right.typed_string()) {
        let (lt, rt) = (format_type(lt), format_type(rt));
        return Err(DataFusionError::External(Box::new(WeirError::new(ErrorKind::UndefinedFunction(format!(
            "operator does not exist: {lt} {op} {rt}: a string is not compared with a number; cast one side \
             (CAST(x AS INT), CAST(n AS STRING)) or write the number as a string literal ('1')"
        ))))));
    }
    Ok(())
}

/// Whether `t` is a character string.
fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// A string literal or a parameter: of unknown type in Postgres, taking the other side's.
fn is_untyped(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_), _) | Expr::Placeholder(_)
    )
}

//! Rewrites a DataFusion `LogicalPlan` into a [`StreamPlan`], deriving each node's changelog
//! mode and stream key. Shapes without a stream operator fail here, by name.
//!
//! Supported: table and materialized-view scans, views (inlined), projection, filter, subquery
//! alias, UNION ALL, GROUP BY / DISTINCT (GROUPING SETS, ROLLUP, CUBE: [`crate::plan::grouping_sets`]),
//! INNER/LEFT/RIGHT/FULL joins ([`crate::plan::join`]).
//! deduplication and Top-N (ROW_NUMBER/RANK/DENSE_RANK kept to a rank range, SELECT DISTINCT ON:
//! [`crate::plan::rank`]). Other window functions, ORDER BY and LIMIT are refused with an error
//! naming them.

use std::sync::Arc;

use datafusion::common::{Column, DFSchema, DFSchemaRef};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Distinct, Expr, JoinType, LogicalPlan, LogicalPlanBuilder};

use crate::error::{Result, WeirError};
use crate::plan::stream_plan::{ChangelogMode, StreamNode, StreamPlan};
use crate::plan::window::{WindowKind, WindowTable};
use crate::plan::unalias;

/// What the planner needs to know about a relation it scans.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// The kind of changes the relation emits.
    pub changelog: ChangelogMode,
    /// Column indexes identifying a row (primary key, view stream key), if any.
    pub stream_key: Option<Vec<usize>>,
}

/// Looks up relations by name for the planner.
pub trait SourceCatalog {
    /// Facts about relation `name`.
    ///
    /// # Errors
    /// `UnknownTable`, or `Unsupported` for a relation that cannot feed a stream (yet).
    fn source_info(&self, name: &str) -> Result<SourceInfo>;

    /// The index of relation `name`'s event-time attribute (its `WATERMARK FOR` column), if
    /// it has one.
    ///
    /// # Errors
    /// As [`SourceCatalog::source_info`].
    fn event_time_column(&self, _name: &str) -> Result<Option<usize>> {
        Ok(None)
    }
}

/// Plans `plan` as a stream.
///
/// # Errors
/// `Unsupported` naming the first node that has no stream operator.
pub fn plan_stream(plan: &LogicalPlan, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source)?;
            let window = (provider.as_ref() as &dyn std::any::Any).downcast_ref::<WindowTable>();
            let mut input = match window {
                Some(w) => {
                    let inner = match w.input.get_logical_plan() {
                        Some(view_plan) => plan_stream(&view_plan, catalog)?,
                        None => {
                            let info = catalog.source_info(&w.spec.table)?;
                            StreamPlan::source(
                                w.spec.table.clone(),
                                Arc::new(DFSchema::try_from_qualified_schema(
                                    w.spec.table.as_str(),
                                    w.input.schema().as_ref(),
                                )?),
                                info.changelog,
                                info.stream_key,
                            )
                        }
                    };
                    StreamPlan {
                        schema: Arc::new(DFSchema::try_from_qualified_schema(
                            scan.table_name.clone(),
                            provider.schema().as_ref(),
                        )?),
                        // SESSION's assigner retracts a row's session when a later row
                        // extends or merges it (session_assign.rs): retracting, whatever its input.
                        changelog: if w.spec.kind == WindowKind::Session { ChangelogMode::Retract } else { inner.changelog },
                        stream_key: None,
                        node: StreamNode::WindowAssign { input: Box::new(inner), spec: w.spec.clone() },
                    }
                }
                None => match provider.get_logical_plan() {
                Some(view_plan) => plan_stream(&view_plan, catalog)?,
                None if crate::plan::temporal::as_versioned(provider.as_ref()).is_some() => {
                    let versioned = crate::plan::temporal::as_versioned(provider.as_ref()).expect("checked");
                    plan_stream(&versioned.scan_plan()?, catalog)?
                }
                None => {
                    let relation = scan.table_name.table().to_string();
                    let info = catalog.source_info(&relation)?;
                    let schema = DFSchema::try_from_qualified_schema(
                        scan.table_name.clone(),
                        provider.schema().as_ref(),
                    )?;
                    StreamPlan::source(relation, Arc::new(schema), info.changelog, info.stream_key)
                }
                },
            };
            if !scan.filters.is_empty() {
                let predicate = datafusion::logical_expr::utils::conjunction(scan.filters.clone())
                    .expect("filters are not empty");
                input = StreamPlan {
                    schema: Arc::clone(&input.schema),
                    changelog: input.changelog,
                    stream_key: input.stream_key.clone(),
                    node: StreamNode::Filter { input: Box::new(input), predicate },
                };
            }
            let indices: Vec<usize> = match &scan.projection {
                Some(p) => p.clone(),
                None => (0..input.schema.fields().len()).collect(),
            };
            let exprs: Vec<Expr> = indices
                .iter()
                .map(|i| Expr::Column(Column::from(input.schema.qualified_field(*i))))
                .collect();
            let stream_key = remap_key(&input.stream_key, &exprs, &input.schema);
            Ok(StreamPlan {
                schema: Arc::clone(&scan.projected_schema),
                changelog: input.changelog,
                stream_key,
                node: StreamNode::Project { input: Box::new(input), exprs },
            })
        }
        LogicalPlan::Projection(p) => {
            if let Some(joined) = scalar_subqueries_in_projection(p)? {
                let mut planned = plan_stream(&joined, catalog)?;
                planned.schema = Arc::clone(&p.schema);
                return Ok(planned);
            }
            let input = match crate::plan::rank::plan_top_n(&p.input, Some(&p.expr), catalog)? {
                Some(top_n) => top_n,
                None => plan_stream(&p.input, catalog)?,
            };
            let stream_key = remap_key(&input.stream_key, &p.expr, &input.schema);
            Ok(StreamPlan {
                schema: Arc::clone(&p.schema),
                changelog: input.changelog,
                stream_key,
                node: StreamNode::Project { input: Box::new(input), exprs: p.expr.clone() },
            })
        }
        LogicalPlan::Filter(f) => {
            if let Some(top_n) = crate::plan::rank::plan_top_n(plan, None, catalog)? {
                return Ok(top_n);
            }
            if let Some(joined) = scalar_subqueries_as_joins(f)? {
                return plan_stream(&joined, catalog);
            }
            let input = plan_stream(&f.input, catalog)?;
            Ok(StreamPlan {
                schema: Arc::clone(&input.schema),
                changelog: input.changelog,
                stream_key: input.stream_key.clone(),
                node: StreamNode::Filter { input: Box::new(input), predicate: f.predicate.clone() },
            })
        }
        LogicalPlan::Unnest(u) => plan_unnest(u, catalog),
        LogicalPlan::SubqueryAlias(a) => {
            let mut input = plan_stream(&a.input, catalog)?;
            input.schema = Arc::clone(&a.schema);
            Ok(input)
        }
        LogicalPlan::Aggregate(agg) => {
            if let Some(union) = crate::plan::grouping_sets::expand(agg)? {
                let mut planned = plan_stream(&union, catalog)?;
                planned.schema = Arc::clone(&agg.schema);
                // The grouping columns and `__grouping_id` (grouping_sets.rs).
                planned.stream_key = Some((0..=agg.group_expr_len()?).collect());
                return Ok(planned);
            }
            if let Some(reduced) = crate::plan::reduce_agg::reduce(agg)? {
                return plan_stream(&reduced, catalog);
            }
            if let Some(distinct_on) = crate::plan::rank::plan_distinct_on(agg, catalog)? {
                return Ok(distinct_on);
            }
            let input = plan_stream(&agg.input, catalog)?;
            let window_end = if input.has_window() {
                agg.group_expr.iter().position(|e| matches!(unalias(e), Expr::Column(c) if c.name == "window_end"))
            } else {
                None
            };
            Ok(StreamPlan {
                schema: Arc::clone(&agg.schema),
                changelog: ChangelogMode::Retract,
                stream_key: Some((0..agg.group_expr.len()).collect()),
                node: StreamNode::GroupAggregate {
                    input: Box::new(input),
                    group_exprs: agg.group_expr.clone(),
                    aggr_exprs: agg.aggr_expr.clone(),
                    window_end,
                    emit_on_window_close: false,
                    state_ttl_ms: None,
                    empty_row: true,
                },
            })
        }
        LogicalPlan::Distinct(Distinct::All(inner)) => {
            let input = plan_stream(inner, catalog)?;
            let group_exprs: Vec<Expr> = (0..input.schema.fields().len())
                .map(|i| Expr::Column(Column::from(input.schema.qualified_field(i))))
                .collect();
            Ok(StreamPlan {
                schema: Arc::clone(&input.schema),
                changelog: ChangelogMode::Retract,
                stream_key: Some((0..group_exprs.len()).collect()),
                node: StreamNode::GroupAggregate {
                    input: Box::new(input),
                    group_exprs,
                    aggr_exprs: vec![],
                    window_end: None,
                    emit_on_window_close: false,
                    state_ttl_ms: None,
                    empty_row: true,
                },
            })
        }
        LogicalPlan::Union(u) => {
            let inputs = u.inputs.iter().map(|i| plan_stream(i, catalog)).collect::<Result<Vec<_>>>()?;
            let changelog = inputs.iter().map(|i| i.changelog).max().unwrap_or(ChangelogMode::AppendOnly);
            Ok(StreamPlan {
                schema: Arc::clone(&u.schema),
                changelog,
                stream_key: None,
                node: StreamNode::Union { inputs },
            })
        }
        LogicalPlan::Join(j) => crate::plan::join::plan_join(j, catalog),
        // A constant relation, inserted once when the job is created (Flink's Values).
        LogicalPlan::EmptyRelation(e) => Ok(StreamPlan {
            schema: Arc::clone(&e.schema),
            changelog: ChangelogMode::AppendOnly,
            stream_key: None,
            node: StreamNode::Values { rows: if e.produce_one_row { vec![vec![]] } else { vec![] } },
        }),
        LogicalPlan::Values(v) => Ok(StreamPlan {
            schema: Arc::clone(&v.schema),
            changelog: ChangelogMode::AppendOnly,
            stream_key: None,
            node: StreamNode::Values { rows: v.values.clone() },
        }),
        LogicalPlan::Window(w) => crate::plan::over::plan_over(w, catalog),
        // DISTINCT ON's ORDER BY: a view has no row order.
        LogicalPlan::Sort(s) if s.fetch.is_none() && crate::plan::rank::is_distinct_on(&s.input) => {
            plan_stream(&s.input, catalog)
        }
        LogicalPlan::Sort(_) => Err(WeirError::unsupported(
            "ORDER BY in a materialized view; order the rows when you SELECT from it",
        )),
        LogicalPlan::Limit(_) => Err(WeirError::unsupported("LIMIT in a materialized view")),
        other => Err(WeirError::unsupported(format!(
            "{} in a materialized view",
            other.display().to_string().split(':').next().unwrap_or("this plan node")
        ))),
    }
}

fn join_name(t: JoinType) -> &'static str {
    match t {
        JoinType::Inner => "INNER",
        JoinType::Left => "LEFT OUTER",
        JoinType::Right => "RIGHT OUTER",
        JoinType::Full => "FULL OUTER",
        _ => "SEMI/ANTI",
    }
}

/// The operator that makes `plan`'s output updating (not append-only), if any, described for
/// an error message. `source_changelog` gives each scanned relation's mode.
///
/// Follows Flink's changelog inference: GROUP BY and DISTINCT retract; outer joins retract;
/// window functions (ROW_NUMBER, Top-N) update; an inner join of append-only inputs is
/// append-only; everything else keeps its input's mode.
pub fn updating_operator(plan: &LogicalPlan, catalog: &dyn SourceCatalog) -> Result<Option<String>> {
    updating_below(plan, catalog, false)
}

/// [`updating_operator`]; `final_windows`: `plan` is below a window aggregation, window join
/// or window Top-N, which emits each window once, when it closes, so a SESSION assigner's
/// retractions of open sessions do not reach the sink.
fn updating_below(plan: &LogicalPlan, catalog: &dyn SourceCatalog, final_windows: bool) -> Result<Option<String>> {
    // The same question of an input, and of an input below a window operator that emits final rows.
    let below = |plan: &LogicalPlan| updating_below(plan, catalog, final_windows);
    let below_final = |plan: &LogicalPlan| updating_below(plan, catalog, true);
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source)?;
            if let Some(view_plan) = provider.get_logical_plan() {
                return below(&view_plan);
            }
            if let Some(versioned) = crate::plan::temporal::as_versioned(provider.as_ref()) {
                return below(&versioned.scan_plan()?);
            }
            let window = (provider.as_ref() as &dyn std::any::Any).downcast_ref::<WindowTable>();
            if let Some(w) = window {
                if w.spec.kind == WindowKind::Session && !final_windows {
                    return Ok(Some(
                        "WindowAssign (SESSION), which retracts a session's rows when a later row extends or merges it".into(),
                    ));
                }
                if let Some(view_plan) = w.input.get_logical_plan() {
                    return below(&view_plan);
                }
            }
            let name = window.map(|w| w.spec.table.as_str()).unwrap_or(scan.table_name.table());
            let info = catalog.source_info(name)?;
            Ok((info.changelog != ChangelogMode::AppendOnly)
                .then(|| format!("the source {name}, which emits a {} changelog", info.changelog)))
        }
        LogicalPlan::Aggregate(agg) if matches!(agg.group_expr.as_slice(), [Expr::GroupingSet(_)]) => {
            match crate::plan::grouping_sets::expand(agg)? {
                Some(union) => below(&union),
                None => Ok(None),
            }
        }
        LogicalPlan::Aggregate(agg)
            if agg.group_expr.iter().any(|e| matches!(unalias(e), Expr::Column(c) if c.name == "window_end"))
                && reads_window(&agg.input) =>
        {
            // A window aggregation into an append-only sink emits on window close (Flink).
            below_final(&agg.input)
        }
        LogicalPlan::Aggregate(_) => Ok(Some(
            "GroupAggregate (GROUP BY), which retracts and updates its results".into(),
        )),
        LogicalPlan::Distinct(_) => {
            Ok(Some("GroupAggregate (DISTINCT), which retracts and updates its results".into()))
        }
        // A temporal join emits each probe row once, final, whatever the versioned table does.
        LogicalPlan::Join(j) if crate::plan::temporal::versioned_input(&j.right).is_some() => {
            below(&j.left)
        }
        // A window join and a window Top-N or deduplication emit final rows into a sink (Flink).
        LogicalPlan::Join(j) if is_window_join(j) => match below_final(&j.left)? {
            Some(op) => Ok(Some(op)),
            None => below_final(&j.right),
        },
        LogicalPlan::Window(w) if is_window_rank(w) => below_final(&w.input),
        LogicalPlan::Join(j) if j.join_type != JoinType::Inner => Ok(Some(format!(
            "Join ({} JOIN), which emits a NULL-padded row and retracts it when a match arrives",
            join_name(j.join_type)
        ))),
        // An OVER aggregate emits each row once (its input must be append-only).
        LogicalPlan::Window(w) if crate::plan::over::is_over_aggregate(plan) => below(&w.input),
        LogicalPlan::Window(_) => Ok(Some("Rank (window function), which updates its results".into())),
        other => {
            for input in other.inputs() {
                if let Some(op) = below(input)? {
                    return Ok(Some(op));
                }
            }
            Ok(None)
        }
    }
}

/// Whether join `j` is a window join: both inputs read window TVFs and it equates their
/// `window_end` columns.
fn is_window_join(j: &datafusion::logical_expr::Join) -> bool {
    let window_end = |e: &Expr| matches!(unalias(e), Expr::Column(c) if c.name == "window_end");
    j.on.iter().any(|(l, r)| window_end(l) && window_end(r)) && reads_window(&j.left) && reads_window(&j.right)
}

/// Whether window function node `w` is a window Top-N or deduplication: its one rank function
/// partitions by `window_end` over a window TVF.
fn is_window_rank(w: &datafusion::logical_expr::Window) -> bool {
    let [Expr::WindowFunction(f)] = w.window_expr.iter().map(unalias).collect::<Vec<_>>()[..] else { return false };
    f.params.partition_by.iter().any(|e| matches!(unalias(e), Expr::Column(c) if c.name == "window_end"))
        && reads_window(&w.input)
}

/// A filter comparing with uncorrelated scalar subqueries (`WHERE price > (SELECT AVG(price)
/// FROM bid)`), as a join: the filter's input joined with each subquery's row on the predicate
/// (no equi-keys), projected back to the input's columns. When a subquery's value changes, the
/// join retracts the rows that passed with the old value and emits those that pass with the
/// new one (RisingWave's dynamic filter, here re-evaluating every row); a subquery with no row
/// (SQL: NULL) lets nothing through. `None` when the predicate has no such subquery
/// (DataFusion leaves uncorrelated ones in place for its batch executor).
///
/// # Errors
/// DataFusion's, building the join.
fn scalar_subqueries_as_joins(f: &datafusion::logical_expr::Filter) -> Result<Option<LogicalPlan>> {
    let mut subqueries = Vec::new();
    let predicate = lift_scalar_subqueries(f.predicate.clone(), &mut subqueries)?;
    if subqueries.is_empty() {
        return Ok(None);
    }
    let mut builder = LogicalPlanBuilder::from(f.input.as_ref().clone());
    let last = subqueries.len() - 1;
    for (i, (alias, subquery)) in subqueries.into_iter().enumerate() {
        let right = LogicalPlanBuilder::from(subquery.as_ref().clone()).alias(alias)?.build()?;
        // The predicate is the last join's condition, once every subquery's column is there.
        let on = if i == last { vec![predicate.clone()] } else { vec![] };
        builder = builder.join_on(right, JoinType::Inner, on)?;
    }
    let columns: Vec<Expr> = f.input.schema().columns().into_iter().map(Expr::Column).collect();
    Ok(Some(builder.project(columns)?.build()?))
}

/// A projection with uncorrelated scalar subqueries in its select list (`SELECT price,
/// (SELECT MAX(price) FROM bid) AS top FROM bid`), as a LEFT join of its input with each
/// subquery's row (on TRUE), then the projection over the subqueries' columns: every row
/// carries the current value, and when the value changes each row is retracted and emitted
/// again with the new one; while a subquery has no row, the rows carry NULL (SQL's empty scalar
/// subquery). The planned projection keeps `p`'s schema (the caller sets it). `None` when the
/// select list has no such subquery.
///
/// # Errors
/// DataFusion's, building the join.
fn scalar_subqueries_in_projection(p: &datafusion::logical_expr::Projection) -> Result<Option<LogicalPlan>> {
    let mut subqueries = Vec::new();
    let mut exprs = Vec::with_capacity(p.expr.len());
    for (i, e) in p.expr.iter().enumerate() {
        let lifted = lift_scalar_subqueries(e.clone(), &mut subqueries)?;
        exprs.push(if &lifted == e { lifted } else { lifted.alias(p.schema.field(i).name()) });
    }
    if subqueries.is_empty() {
        return Ok(None);
    }
    let mut builder = LogicalPlanBuilder::from(p.input.as_ref().clone());
    for (alias, subquery) in subqueries {
        let right = LogicalPlanBuilder::from(subquery.as_ref().clone()).alias(alias)?.build()?;
        // DataFusion wants a condition on an outer join: TRUE, every row with the one row.
        builder = builder.join_on(right, JoinType::Left, vec![datafusion::prelude::lit(true)])?;
    }
    Ok(Some(builder.project(exprs)?.build()?))
}

/// `e` with each uncorrelated scalar subquery that gives at most one row replaced by a column
/// of an alias `__weir_scalar_sq_N` of it, the subqueries added to `subqueries` (alias, plan).
/// Others are left in place (and refused by name when the job is built): joined, a subquery
/// of several rows would repeat the outer rows where SQL raises an error.
fn lift_scalar_subqueries(e: Expr, subqueries: &mut Vec<(String, Arc<LogicalPlan>)>) -> Result<Expr> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    Ok(e.transform_up(|e| match e {
        Expr::ScalarSubquery(sq) if sq.outer_ref_columns.is_empty() && at_most_one_row(&sq.subquery) => {
            let alias = format!("__weir_scalar_sq_{}", subqueries.len());
            let name = sq.subquery.schema().field(0).name().clone();
            subqueries.push((alias.clone(), Arc::clone(&sq.subquery)));
            Ok(Transformed::yes(Expr::Column(Column::new(Some(alias), name))))
        }
        other => Ok(Transformed::no(other)),
    })?
    .data)
}

/// Whether `plan` gives at most one row whatever its input: an aggregate without GROUP BY (one
/// row, NULL over no input), under projections, filters, sorts and aliases, or a `LIMIT 1`.
fn at_most_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(a) => a.group_expr.is_empty(),
        LogicalPlan::Limit(l) => {
            matches!(l.get_fetch_type(), Ok(datafusion::logical_expr::FetchType::Literal(Some(n))) if n <= 1)
                || at_most_one_row(&l.input)
        }
        LogicalPlan::Projection(_) | LogicalPlan::Filter(_) | LogicalPlan::Sort(_) | LogicalPlan::SubqueryAlias(_) => {
            plan.inputs().first().is_some_and(|input| at_most_one_row(input))
        }
        _ => false,
    }
}

/// Whether a window TVF feeds `plan`.
fn reads_window(plan: &LogicalPlan) -> bool {
    if let LogicalPlan::TableScan(scan) = plan {
        if let Ok(p) = source_as_provider(&scan.source) {
            return (p.as_ref() as &dyn std::any::Any).downcast_ref::<WindowTable>().is_some();
        }
    }
    plan.inputs().iter().any(|i| reads_window(i))
}

/// The stream key after a projection: each key column must be projected as a bare column.
pub(crate) fn remap_key(key: &Option<Vec<usize>>, exprs: &[Expr], input: &DFSchemaRef) -> Option<Vec<usize>> {
    let key = key.as_ref()?;
    key.iter()
        .map(|k| {
            let (qualifier, field) = input.qualified_field(*k);
            exprs.iter().position(|e| match unalias(e) {
                Expr::Column(c) => {
                    c.name == *field.name()
                        && (c.relation.is_none() || c.relation.as_ref() == qualifier)
                }
                _ => false,
            })
        })
        .collect()
}


/// `UNNEST` of one array column, one level deep (`SELECT id, UNNEST(tags)`): a stateless
/// [`StreamNode::Unnest`]. Its rows have no stream key (an array may repeat an element), and
/// it keeps an append-only input append-only.
///
/// # Errors
/// `Unsupported` for an UNNEST of a ROW, of several arrays in one select list, or of an array
/// of arrays to more than one level.
fn plan_unnest(u: &datafusion::logical_expr::Unnest, catalog: &dyn SourceCatalog) -> Result<StreamPlan> {
    use crate::plan::stream_plan::{UnnestColumn, UnnestSpec};
    if !u.struct_type_columns.is_empty() {
        return Err(WeirError::unsupported("UNNEST of a ROW in a streaming query; select its fields (r.f) instead"));
    }
    let [(list, unnested)] = u.list_type_columns.as_slice() else {
        return Err(WeirError::unsupported("UNNEST of more than one array in one SELECT of a streaming query"));
    };
    if unnested.depth != 1 {
        return Err(WeirError::unsupported("UNNEST of an array of arrays to more than one level in a streaming query"));
    }
    let input = plan_stream(&u.input, catalog)?;
    let columns = u
        .dependency_indices
        .iter()
        .enumerate()
        .map(|(j, &i)| {
            if i == *list && u.schema.field(j).name() == &unnested.output_column.name {
                UnnestColumn::Elements(i)
            } else {
                UnnestColumn::Repeat(i)
            }
        })
        .collect();
    let changelog = match input.changelog {
        ChangelogMode::AppendOnly => ChangelogMode::AppendOnly,
        _ => ChangelogMode::Retract,
    };
    Ok(StreamPlan {
        schema: Arc::clone(&u.schema),
        changelog,
        stream_key: None,
        node: StreamNode::Unnest { input: Box::new(input), spec: UnnestSpec { columns, list: *list, nulls: u.options.null_handling.clone() } },
    })
}

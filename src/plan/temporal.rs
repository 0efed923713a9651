//! `t FOR SYSTEM_TIME AS OF o.ts` (Flink's event-time temporal join, SQL.md "Joins"), as
//! DataFusion and the stream planner see it.
//!
//! The SQL front end rewrites the clause into the table function call `weir_versioned('t',
//! 'o.ts')` ([`crate::sql::temporal`]), which returns a [`VersionedTable`] over `t`. A batch
//! query reads it as `t` itself: the current row per key, the latest version. The stream
//! planner reads it as `t`'s changelog and, when it is the right input of a join, plans a
//! `StreamTemporalJoin` ([`crate::plan::join`]): each probe row of the left input joins the
//! version of `t` valid at its time `o.ts`.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::{provider_as_source, source_as_provider, TableType};
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_plan::ExecutionPlan;

/// The name of the table function the front end rewrites `FOR SYSTEM_TIME AS OF` into.
pub const FUNCTION: &str = "weir_versioned";

/// A versioned table: `table FOR SYSTEM_TIME AS OF as_of`.
#[derive(Debug)]
pub struct VersionedTable {
    /// The versioned table's name.
    pub table: String,
    /// The time of the probe row, a column of the other join input (`o.ts` or `ts`).
    pub as_of: String,
    /// The table's provider.
    pub input: Arc<dyn TableProvider>,
    /// Whether `as_of` is a processing-time attribute (`PROCTIME()`): a lookup join. Set by
    /// [`mark_lookup_joins`] on the plan before optimization, which may prune the column.
    pub processing_time: std::sync::atomic::AtomicBool,
}

impl VersionedTable {
    /// The plan that scans the versioned table itself, for the stream planner.
    ///
    /// # Errors
    /// DataFusion's, when the scan cannot be built.
    pub fn scan_plan(&self) -> datafusion::error::Result<LogicalPlan> {
        LogicalPlanBuilder::scan(self.table.as_str(), provider_as_source(Arc::clone(&self.input)), None)?.build()
    }
}

#[async_trait::async_trait]
impl TableProvider for VersionedTable {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    /// A batch query sees the table's current rows: the latest version per key.
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        self.input.scan(state, projection, filters, limit).await
    }
}

/// `provider` as a versioned table, if it is one.
pub fn as_versioned(provider: &dyn TableProvider) -> Option<&VersionedTable> {
    (provider as &dyn std::any::Any).downcast_ref::<VersionedTable>()
}

/// Marks the versioned tables of `plan` (not yet optimized) whose AS OF column is a
/// processing-time attribute of the other join input ([`VersionedTable::processing_time`]):
/// the optimizer prunes a `PROCTIME()` column the query does not otherwise use, after which
/// the stream planner could no longer tell a lookup join from a temporal one.
pub fn mark_lookup_joins(plan: &LogicalPlan) {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let _ = plan.apply(|node| {
        if let LogicalPlan::Join(j) = node {
            if let Some(provider) = versioned_input(&j.right) {
                if let Some(v) = as_versioned(provider.as_ref()) {
                    let as_of = datafusion::common::Column::from_qualified_name(&v.as_of);
                    if let Some(i) = j.left.schema().maybe_index_of_column(&as_of) {
                        if crate::plan::rank::defines_proctime(&j.left, i) {
                            v.processing_time.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

/// The versioned table a join input reads directly (under aliases, projections and filters).
pub fn versioned_input(plan: &LogicalPlan) -> Option<Arc<dyn TableProvider>> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source).ok()?;
            as_versioned(provider.as_ref()).is_some().then_some(provider)
        }
        LogicalPlan::SubqueryAlias(a) => versioned_input(&a.input),
        LogicalPlan::Projection(p) => versioned_input(&p.input),
        LogicalPlan::Filter(f) => versioned_input(&f.input),
        _ => None,
    }
}

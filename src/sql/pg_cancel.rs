//! `pg_cancel_backend(pid)`: cancels the statement connection `pid` runs, as that client's own
//! cancel request would (psql's Ctrl-C); `pg_stat_activity` lists the pids. Postgres's
//! function: true when the connection exists (the cancel is sent; a connection running no
//! statement is left alone), false otherwise (Postgres also warns then). NULL in, NULL out.

use std::sync::Arc;

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::datatypes::{DataType, Int32Type};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;

use crate::observe::Activities;

/// The function, over the server's connections.
#[derive(Debug)]
struct PgCancelBackend {
    activities: Arc<Activities>,
    signature: Signature,
}

// One function per context: its identity is its name.
impl PartialEq for PgCancelBackend {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PgCancelBackend {}

impl std::hash::Hash for PgCancelBackend {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        "pg_cancel_backend".hash(state);
    }
}

impl ScalarUDFImpl for PgCancelBackend {
    fn name(&self) -> &str {
        "pg_cancel_backend"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let pids = ColumnarValue::values_to_arrays(&args.args)?;
        let pids = arrow::compute::cast(&pids[0], &DataType::Int32)?;
        let pids = pids.as_primitive::<Int32Type>();
        let sent: BooleanArray = pids.iter().map(|pid| pid.map(|pid| self.activities.cancel(pid))).collect();
        Ok(ColumnarValue::Array(Arc::new(sent) as Arc<dyn Array>))
    }
}

/// Registers `pg_cancel_backend` on `ctx`, cancelling among `activities`.
pub fn register(ctx: &SessionContext, activities: Arc<Activities>) {
    let signature = Signature::uniform(1, vec![DataType::Int32, DataType::Int64], Volatility::Volatile);
    ctx.register_udf(ScalarUDF::new_from_impl(PgCancelBackend { activities, signature }));
}

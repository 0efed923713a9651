//! `TYPEOF(x)`: the SQL type of `x` as text, in Flink's spelling with Flink's `NOT NULL` when
//! the argument cannot be NULL (Flink docs, System Functions: "Returns the string
//! representation of the input expression's data type"; `TYPEOF(1)` is `INT NOT NULL` in
//! Flink). Weir's types are its own: an integer literal is a BIGINT, a string one a STRING
//! (Flink's is CHAR(n)), and a table's columns read as nullable, a primary key's too (`DESCRIBE`
//! shows those NOT NULL). The optional second argument, Flink's `force_serializable`, changes
//! nothing.

use arrow::datatypes::DataType;
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// `TYPEOF`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TypeOf {
    signature: Signature,
}

impl TypeOf {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TypeOf {
    fn name(&self) -> &str {
        "typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [_] | [_, DataType::Boolean] => Ok(arg_types.to_vec()),
            _ => plan_err!("TYPEOF(x [, force_serializable BOOLEAN]) takes 1 or 2 arguments, got {}", arg_types.len()),
        }
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(field) = args.arg_fields.first() else { return plan_err!("TYPEOF takes an argument") };
        let name = match field.data_type() {
            DataType::Null => "NULL".to_string(),
            t => crate::plan::type_names::sql_type_name(t),
        };
        let text = if field.is_nullable() { name } else { format!("{name} NOT NULL") };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(text))))
    }
}

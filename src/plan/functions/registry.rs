//! [`register`]: puts Weir's functions on a DataFusion context.

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

use super::at_time_zone::AtTimeZone;
use super::avg::FlinkAvg;
use super::current_watermark::CurrentWatermark;
use super::date_format::DateFormat;
use super::flink_arrays::FlinkArray;
use super::flink_if::{If, IfRewrite};
use super::convert_tz::ConvertTz;
use super::flink_math::FlinkMath;
use super::hashes::Sha;
use super::json_value::{IsJson, JsonValue};
use super::parse_url::ParseUrl;
use super::printf::Printf;
use super::modulo::Mod;
use super::proctime::{CurrentTimestamp, ProcTime};
use super::regexp_extract::{RegexpExtract, RegexpMatches};
use super::split_index::SplitIndex;
use super::time_part::TimePart;
use super::flink_strings::{Base64, Locate, NullIfAnyNull, Substring};
use super::flink_text::FlinkText;
use super::json_construct::JsonConstruct;
use super::time_units::{TimeRound, TimestampAdd, TimestampDiff};
use super::to_timestamp::TimeConversion;
use super::truncate::Truncate;
use super::type_of::TypeOf;
use super::unix_timestamp::{CurrentDate, LocalTime, LocalTimestamp, UnixTimestamp};
use crate::plan::time_zone::Zone;
use super::unnest_rows::UnnestRows;

/// Registers Weir's functions on `ctx`. Names DataFusion already uses are replaced: `avg` (and
/// its alias `mean`) by Flink's typing, `date_format` (DataFusion's alias of `to_char`, with
/// chrono patterns) by Flink's Java patterns, `to_timestamp`, `from_unixtime` and `to_date` by
/// Flink's (Java patterns, Flink's types), `now` (and `current_timestamp`) by Flink's
/// TIMESTAMP_LTZ(3), `sha224`, `sha256`, `sha384` and `sha512` by Flink's (hexadecimal text of a
/// string; Postgres's bytes of BYTES), `to_char` by Postgres's templates. `variance` is added as
/// a name of `var_samp`, `every` as one of `bool_and` (Postgres); Flink's `STARTSWITH`,
/// `ENDSWITH` and `MAP_FROM_ARRAYS` as names of `starts_with`, `ends_with` and `map`;
/// `current_date` by one that reads `zone`. The functions that read a TIMESTAMP_LTZ as a
/// wall-clock time, or a wall-clock time as an instant, do so in `zone`, the session time zone
/// ([`crate::plan::time_zone`]).
pub fn register(ctx: &SessionContext, zone: Zone) {
    ctx.register_udf(ScalarUDF::new_from_impl(ProcTime::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(CurrentTimestamp::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(CurrentWatermark::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(Mod::new()));
    for part in TimePart::all(zone) {
        ctx.register_udf(ScalarUDF::new_from_impl(part));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(RegexpExtract::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(RegexpMatches::new(true)));
    ctx.register_udf(ScalarUDF::new_from_impl(RegexpMatches::new(false)));
    ctx.register_udf(ScalarUDF::new_from_impl(ParseUrl::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(ConvertTz::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(Printf::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(IsJson::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(LocalTime::new(zone)));
    for function in FlinkMath::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(function));
    }
    for function in Sha::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(function));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(SplitIndex::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(UnnestRows::new()));
    for function in FlinkArray::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(function));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(DateFormat::new(zone)));
    ctx.register_udf(ScalarUDF::new_from_impl(DateFormat::to_char(zone)));
    ctx.register_udf(ScalarUDF::new_from_impl(TypeOf::new()));
    ctx.register_udaf(AggregateUDF::new_from_impl(FlinkAvg::new()));
    // Postgres's name for VAR_SAMP, which DataFusion does not know.
    let var_samp = datafusion::functions_aggregate::variance::var_samp_udaf();
    ctx.register_udaf(var_samp.as_ref().clone().with_aliases(["variance"]));
    // Postgres's (and the SQL standard's) name for BOOL_AND.
    let bool_and = datafusion::functions_aggregate::bool_and_or::bool_and_udaf();
    ctx.register_udaf(bool_and.as_ref().clone().with_aliases(["every"]));
    // Flink's GROUPING_ID(a, b, ..): the bits of GROUPING(a), GROUPING(b), .., first argument
    // highest, which is what DataFusion's GROUPING of several arguments gives.
    let grouping = datafusion::functions_aggregate::grouping::grouping_udaf();
    ctx.register_udaf(grouping.as_ref().clone().with_aliases(["grouping_id"]));
    ctx.register_udf(ScalarUDF::new_from_impl(If::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(AtTimeZone::new()));
    for json in JsonValue::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(json));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(TimestampDiff::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(TimestampAdd::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(TimeRound::new(false, zone)));
    ctx.register_udf(ScalarUDF::new_from_impl(TimeRound::new(true, zone)));
    ctx.register_udf(ScalarUDF::new_from_impl(UnixTimestamp::new(zone)));
    ctx.register_udf(ScalarUDF::new_from_impl(LocalTimestamp::new(zone)));
    ctx.register_udf(ScalarUDF::new_from_impl(CurrentDate::new(zone)));
    for conversion in TimeConversion::all(zone) {
        ctx.register_udf(ScalarUDF::new_from_impl(conversion));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(Base64::new(false)));
    ctx.register_udf(ScalarUDF::new_from_impl(Base64::new(true)));
    ctx.register_udf(ScalarUDF::new_from_impl(Locate::new()));
    // Flink's SUBSTRING (the syntax rewritten into `weir_substring`) and CONCAT (in place of
    // DataFusion's, Postgres's).
    ctx.register_udf(ScalarUDF::new_from_impl(Substring::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(NullIfAnyNull::concat()));
    ctx.register_udf(ScalarUDF::new_from_impl(Truncate::new()));
    for function in JsonConstruct::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(function));
    }
    for function in FlinkText::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(function));
    }
    // Flink's names of functions DataFusion has under others.
    for (udf, flink) in [
        (datafusion::functions::string::starts_with(), "startswith"),
        (datafusion::functions::string::ends_with(), "endswith"),
        (datafusion::functions_nested::map::map_udf(), "map_from_arrays"),
    ] {
        ctx.register_udf(udf.as_ref().clone().with_aliases([flink]));
    }
    // `IF` calls become CASE before type coercion.
    let state = ctx.state_ref();
    let mut state = state.write();
    if let Err(e) = datafusion::execution::FunctionRegistry::register_function_rewrite(&mut *state, std::sync::Arc::new(IfRewrite)) {
        tracing::error!("registering the IF rewrite: {e}");
    }
}

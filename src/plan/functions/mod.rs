//! Functions of Flink's dialect that DataFusion lacks or types differently, registered on every
//! DataFusion context Weir creates ([`register`]), so batch `SELECT`s and streaming views plan
//! the same types. One function (or one family) per file; each file states its rule and source.
//!
//! | SQL | file | result |
//! |---|---|---|
//! | `PROCTIME()` | `proctime.rs` | `TIMESTAMP_LTZ(3)` |
//! | `CURRENT_TIMESTAMP`, `NOW()` (replace DataFusion's) | `proctime.rs` | `TIMESTAMP_LTZ(3)` |
//! | `CURRENT_WATERMARK(ts)` | `current_watermark.rs` | the type of `ts` |
//! | `MOD(a, b)` | `modulo.rs` | BIGINT or DOUBLE |
//! | `YEAR`, `QUARTER`, `MONTH`, `WEEK`, `DAYOFYEAR`, `DAYOFMONTH`, `DAYOFWEEK`, `HOUR`, `MINUTE`, `SECOND` | `time_part.rs` | BIGINT |
//! | `REGEXP_EXTRACT(str, regex [, idx])` | `regexp_extract.rs` | STRING |
//! | `SPLIT_INDEX(str, sep, idx)` | `split_index.rs` | STRING |
//! | `DATE_FORMAT(ts, format)` | `date_format.rs` | STRING |
//! | `TYPEOF(x)` | `type_of.rs` | STRING |
//! | `TO_CHAR(ts, template)` (Postgres's templates; replaces DataFusion's) | `date_format.rs`, `pg_to_char.rs` | STRING |
//! | `AVG(x)` (replaces DataFusion's) | `avg.rs` | x's type for integers |
//! | `IF(condition, a, b)` (rewritten into CASE) | `flink_if.rs` | the type a and b widen to |
//! | `JSON_VALUE(json, path)` | `json_value.rs` | STRING |
//! | `JSON_EXISTS(json, path)` | `json_value.rs` | BOOLEAN |
//! | `JSON_QUERY(json, path)` | `json_value.rs` | STRING (JSON text) |
//! | `JSON_OBJECT(k VALUE v, ..)`, `JSON_ARRAY(v, ..)` (rewritten into `weir_json_object`, `weir_json_array`), `JSON_STRING(v)` | `json_construct.rs` | STRING (JSON text) |
//! | `TIMESTAMPDIFF(unit, t1, t2)` | `time_units.rs` | INT |
//! | `TIMESTAMPADD(unit, n, t)` | `time_units.rs` | t's type |
//! | `FLOOR(t TO unit)`, `CEIL(t TO unit)` (rewritten into `time_floor`, `time_ceil`) | `time_units.rs` | t's type |
//! | `UNIX_TIMESTAMP([string [, format]])` | `unix_timestamp.rs` | BIGINT |
//! | `LOCALTIMESTAMP` (rewritten into `localtimestamp()`) | `unix_timestamp.rs` | TIMESTAMP(3) |
//! | `TO_TIMESTAMP(string [, format])` (replaces DataFusion's) | `to_timestamp.rs` | TIMESTAMP(3) |
//! | `TO_TIMESTAMP_LTZ(numeric [, precision])`, `TO_TIMESTAMP_LTZ(string [, format])` | `to_timestamp.rs` | TIMESTAMP_LTZ(3) |
//! | `FROM_UNIXTIME(seconds [, format])` (replaces DataFusion's) | `to_timestamp.rs` | STRING |
//! | `TO_DATE(string [, format])` (replaces DataFusion's) | `to_timestamp.rs` | DATE |
//! | `TO_BASE64(s)`, `FROM_BASE64(s)` | `flink_strings.rs` | STRING |
//! | `LOCATE(needle, haystack [, from])` | `flink_strings.rs` | INT |
//! | `SUBSTRING(s FROM pos [FOR len])`, `SUBSTR(s, pos [, len])` (rewritten into `weir_substring`: Flink's positions) | `flink_strings.rs` | STRING |
//! | `CONCAT(s, ..)` (DataFusion's, NULL when an argument is: Flink's) | `flink_strings.rs` | STRING |
//! | `HEX(n or s)`, `BIN(n)`, `URL_ENCODE(s)`, `URL_DECODE(s)` | `flink_text.rs` | STRING |
//! | `HASH_CODE(s)` | `flink_text.rs` | INT |
//! | `SPLIT(s, delimiter)` | `flink_text.rs` | ARRAY<STRING> |
//! | `STR_TO_MAP(s [, list delimiter, key-value delimiter])` | `flink_text.rs` | MAP<STRING, STRING> |
//! | `ELEMENT(array)` | `flink_text.rs` | the element type |
//! | `TRUNCATE(x [, n])` | `truncate.rs` | x's type |
//! | `REGEXP(s, regex)` | `flink_text.rs` | BOOLEAN |
//! | `STARTSWITH`, `ENDSWITH`, `MAP_FROM_ARRAYS` (DataFusion's `starts_with`, `ends_with`, `map`) | `registry.rs` | theirs |
//! | `IS_ALPHA(s)`, `IS_DIGIT(s)`, `IS_DECIMAL(s)` | `flink_text.rs` | BOOLEAN (FALSE for NULL) |
//! | `JSON_QUOTE(s)`, `JSON_UNQUOTE(s)`, `ELT(index, s, ..)` | `flink_text.rs` | STRING |
//! | `UNHEX(s)` | `flink_text.rs` | BYTES |
//! | `REGEXP_EXTRACT_ALL(s, regex [, idx])` | `regexp_extract.rs` | ARRAY<STRING> |
//! | `REGEXP_SUBSTR(s, regex)` | `regexp_extract.rs` | STRING |
//! | `PARSE_URL(url, part [, key])` | `parse_url.rs` | STRING |
//! | `CONVERT_TZ(datetime, from zone, to zone)` | `convert_tz.rs` | STRING |
//! | `PRINTF(format, arg, ..)` | `printf.rs` | STRING |
//! | `SHA1(s)`, `SHA224(s)`, `SHA256(s)`, `SHA384(s)`, `SHA512(s)`, `SHA2(s, bits)` (the SHA-2 ones replace DataFusion's) | `hashes.rs` | STRING (hex) of a string, BYTES of BYTES |
//! | `SIGN(x)`, `E()`, `RAND_INTEGER(bound)` | `flink_math.rs` | x's type, DOUBLE, INT |
//! | `s IS [NOT] JSON [VALUE \| SCALAR \| ARRAY \| OBJECT]` (rewritten into `weir_is_json`) | `json_value.rs` | BOOLEAN |
//! | `LOCALTIME` (rewritten into `localtime()`) | `unix_timestamp.rs` | TIME(0) |
//! | `CURRENT_ROW_TIMESTAMP()` (a name of `PROCTIME()`) | `proctime.rs` | TIMESTAMP_LTZ(3) |
//!
//! # Conventions
//! - Scalar functions work on whole Arrow arrays; a constant argument is read once, never
//!   expanded to an array (`args.rs`). All-constant calls return a constant.
//! - NULL in, NULL out, as in Flink. Where Flink returns NULL for a bad value in a row (an index
//!   out of range, a regex that does not compile), so do we; a bad *literal* regex or format is
//!   refused when the statement is planned, naming it.

mod args;
mod at_time_zone;
mod avg;
mod convert_tz;
mod date_format;
mod flink_arrays;
mod flink_if;
mod flink_math;
mod flink_strings;
mod flink_text;
mod hashes;
mod json_construct;
mod json_value;
mod modulo;
mod current_watermark;
mod parse_url;
mod pg_to_char;
mod printf;
mod proctime;
mod regexp_extract;
mod registry;
mod split_index;
mod time_part;
mod time_units;
mod to_timestamp;
mod truncate;
mod type_of;
mod unix_timestamp;
pub mod unnest_rows;
pub mod zone_cast;

pub use registry::register;

/// `FLOOR(t TO unit)` of a TIMESTAMP_LTZ in the session time zone `zone` as a function
/// (`time_floor('unit', t)`): what Postgres's `date_trunc` of a `timestamptz` is
/// ([`crate::sql::text_casts`]).
pub fn time_floor(zone: crate::plan::time_zone::Zone) -> datafusion::logical_expr::ScalarUDF {
    datafusion::logical_expr::ScalarUDF::new_from_impl(time_units::TimeRound::new(false, zone))
}

/// `PROCTIME()` as an expression (a connector table's computed column reports it as its
/// default, so the planner knows the column for a processing-time attribute).
pub fn proctime_expr() -> datafusion::logical_expr::Expr {
    let udf = std::sync::Arc::new(datafusion::logical_expr::ScalarUDF::new_from_impl(proctime::ProcTime::new()));
    datafusion::logical_expr::Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(udf, vec![]))
}

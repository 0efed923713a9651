//! `PRINTF(format, arg, ..)`: `format` with Java's `java.util.Formatter` rules, `Locale.US`, as
//! Flink 2.0's `PRINTF` calls it (Flink docs, String Functions): `PRINTF('%s has %d items',
//! name, n)`. NULL when `format` is NULL or when Java would throw on it: an argument missing, a
//! conversion that does not take the argument's type (`%d` of a DOUBLE, `%f` of an INT), flags
//! the conversion does not take. A NULL argument prints `null` (`false` for `%b`), as in Java.
//!
//! Supported: `%s %S %b %B %c %C %d %o %x %X %e %E %f %g %G %% %n`, an argument index (`%2$s`, `%<s`),
//! flags `- # + space 0 , (`, a width and a precision (`%-10s`, `%08.3f`, `%,d`, `%.3s`).
//! Numbers print as Java prints them: `%s` of a DOUBLE is `Double.toString` (`1.0E10`),
//! `%f` and `%e` round half up from the shortest decimal form of the value (`%.1f` of 0.15 is
//! `0.2`), `%g` as Java's (decimal from 10^-4 up to 10^precision, else scientific, `precision`
//! significant digits kept, zeros too), `%x` of a negative INT is its 32-bit two's complement.
//! A malformed format (`%q`, a `%` at the end) is NULL, as Flink returns. A literal format with
//! a conversion Java has and this does not (`%a`, `%h`, `%t`) is refused when planned; one read
//! from a column gives NULL for that row.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type};
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{as_string_type, literal_str, num_rows, StrArg};

/// `PRINTF`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Printf {
    signature: Signature,
}

impl Printf {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Printf {
    fn name(&self) -> &str {
        "printf"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let Some((format, args)) = arg_types.split_first() else { return plan_err!("PRINTF(format, arg, ..) needs a format") };
        let Some(format) = as_string_type(format) else { return plan_err!("PRINTF: the format must be a string, got {format}") };
        let mut out = vec![format];
        for t in args {
            out.push(match t {
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => t.clone(),
                DataType::UInt8 | DataType::UInt16 => DataType::Int32,
                DataType::UInt32 | DataType::UInt64 => DataType::Int64,
                DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Boolean | DataType::Null => t.clone(),
                DataType::Float16 => DataType::Float32,
                DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => DataType::Decimal128(*p, *s),
                _ => DataType::Utf8,
            });
        }
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if let Some(format) = literal_str(args.scalar_arguments, 0) {
            if let Err(Bad::Unsupported(spec)) = parse(format) {
                return plan_err!("PRINTF: the format's {spec} is not supported (%s %b %c %d %o %x %e %f %g %% %n are)");
            }
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let formats = StrArg::new(&args.args[0])?;
        let columns = args.args[1..].iter().map(|a| a.to_array(n)).collect::<Result<Vec<ArrayRef>>>()?;
        let mut out = StringBuilder::with_capacity(n, 0);
        // The last format parsed (a literal one is parsed once per batch).
        let mut parsed: Option<(&str, Option<Vec<Piece>>)> = None;
        for i in 0..n {
            let Some(format) = formats.get(i) else {
                out.append_null();
                continue;
            };
            if parsed.as_ref().is_none_or(|(f, _)| *f != format) {
                parsed = Some((format, parse(format).ok()));
            }
            let pieces = parsed.as_ref().and_then(|(_, p)| p.as_ref());
            let values: Vec<Value> = columns.iter().map(|c| Value::of(c, i)).collect();
            out.append_option(pieces.and_then(|p| render(p, &values)));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// One argument of a row.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    /// An integer and its width in bits (Java's Byte, Short, Integer, Long).
    Int(i64, u32),
    /// A float by the shortest decimal digits that read back as it (Rust's `{:e}` of its own
    /// type, which are Java's `Double.toString` / `Float.toString` digits), or NaN/infinite.
    Float(f64, String),
    /// A DECIMAL's unscaled value and scale.
    Decimal(i128, i8),
    Bool(bool),
    Str(String),
}

impl Value {
    fn of(column: &ArrayRef, i: usize) -> Value {
        if column.is_null(i) {
            return Value::Null;
        }
        match column.data_type() {
            DataType::Int8 => Value::Int(i64::from(column.as_primitive::<Int8Type>().value(i)), 8),
            DataType::Int16 => Value::Int(i64::from(column.as_primitive::<Int16Type>().value(i)), 16),
            DataType::Int32 => Value::Int(i64::from(column.as_primitive::<Int32Type>().value(i)), 32),
            DataType::Int64 => Value::Int(column.as_primitive::<Int64Type>().value(i), 64),
            DataType::Float32 => {
                let v = column.as_primitive::<Float32Type>().value(i);
                Value::Float(f64::from(v), format!("{v:e}"))
            }
            DataType::Float64 => {
                let v = column.as_primitive::<Float64Type>().value(i);
                Value::Float(v, format!("{v:e}"))
            }
            DataType::Decimal128(_, s) => Value::Decimal(column.as_primitive::<Decimal128Type>().value(i), *s),
            DataType::Boolean => Value::Bool(column.as_boolean().value(i)),
            DataType::Utf8 => Value::Str(column.as_string::<i32>().value(i).to_string()),
            _ => Value::Null,
        }
    }
}

/// A piece of a parsed format: text, or a conversion.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Spec(Spec),
}

/// One `%[index$][flags][width][.precision]conversion`.
#[derive(Debug, Clone, PartialEq, Default)]
struct Spec {
    /// `Some(0)`: `<`, the previous argument; `Some(k)`: argument k, from 1.
    index: Option<usize>,
    flags: String,
    width: Option<usize>,
    precision: Option<usize>,
    conversion: char,
}

/// Why a format cannot be used.
#[derive(Debug)]
enum Bad {
    /// A conversion Java has and this does not do (`%t`).
    Unsupported(String),
    /// Not a format Java takes (`%q`, a `%` at the end): Flink's NULL.
    Invalid,
}

/// The pieces of `format`.
fn parse(format: &str) -> std::result::Result<Vec<Piece>, Bad> {
    static SPEC: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"%(?:(\d+)\$|(<))?([-#+ 0,(]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])").expect("a valid regex")
    });
    let mut pieces = Vec::new();
    let mut at = 0;
    while let Some(p) = format[at..].find('%').map(|p| at + p) {
        if p > at {
            pieces.push(Piece::Text(format[at..p].to_string()));
        }
        let Some(c) = SPEC.captures_at(format, p).filter(|c| c.get(0).is_some_and(|m| m.start() == p)) else {
            return Err(Bad::Invalid);
        };
        let whole = c.get(0).expect("the whole match").as_str();
        let conversion = c[6].chars().next().expect("one character");
        if "aAhHtT".contains(conversion) {
            return Err(Bad::Unsupported(whole.to_string()));
        }
        if !"sSbBcCdoxXeEfgG%n".contains(conversion) {
            return Err(Bad::Invalid);
        }
        pieces.push(Piece::Spec(Spec {
            index: c.get(2).map(|_| 0).or_else(|| c.get(1).and_then(|m| m.as_str().parse().ok())),
            flags: c[3].to_string(),
            width: c.get(4).and_then(|m| m.as_str().parse().ok()),
            precision: c.get(5).and_then(|m| m.as_str().parse().ok()),
            conversion,
        }));
        at = p + whole.len();
    }
    if at < format.len() {
        pieces.push(Piece::Text(format[at..].to_string()));
    }
    Ok(pieces)
}

/// `pieces` with `values`; `None` where Java's Formatter throws.
fn render(pieces: &[Piece], values: &[Value]) -> Option<String> {
    let mut out = String::new();
    // The next ordinary argument, and the last one used (for `<`).
    let (mut next, mut last): (usize, Option<usize>) = (0, None);
    for piece in pieces {
        let spec = match piece {
            Piece::Text(t) => {
                out.push_str(t);
                continue;
            }
            Piece::Spec(s) => s,
        };
        match spec.conversion {
            '%' => {
                out.push_str(&pad(spec, "%".to_string(), false)?);
                continue;
            }
            'n' => {
                out.push('\n');
                continue;
            }
            _ => {}
        }
        let at = match spec.index {
            Some(0) => last?,
            Some(k) => k - 1,
            None => {
                next += 1;
                next - 1
            }
        };
        last = Some(at);
        out.push_str(&convert(spec, values.get(at)?)?);
    }
    Some(out)
}

/// One conversion of `value`.
fn convert(spec: &Spec, value: &Value) -> Option<String> {
    let upper = spec.conversion.is_ascii_uppercase();
    let flags = &spec.flags;
    // Java's flag checks: `-` and `0` need a width; `0` with `-` is refused.
    if (flags.contains('-') || flags.contains('0')) && spec.width.is_none() || flags.contains('-') && flags.contains('0') {
        return None;
    }
    let text = match spec.conversion.to_ascii_lowercase() {
        's' | 'b' => {
            if flags.chars().any(|f| f != '-') {
                return None;
            }
            let text = if spec.conversion.eq_ignore_ascii_case(&'b') {
                match value {
                    Value::Null => "false".to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => "true".to_string(),
                }
            } else {
                java_string(value)
            };
            match spec.precision {
                Some(p) => text.chars().take(p).collect(),
                None => text,
            }
        }
        'c' => {
            if spec.precision.is_some() || flags.chars().any(|f| f != '-') {
                return None;
            }
            match value {
                Value::Null => "null".to_string(),
                Value::Int(v, _) => char::from_u32(u32::try_from(*v).ok()?)?.to_string(),
                _ => return None,
            }
        }
        'd' => {
            if spec.precision.is_some() || flags.contains('#') {
                return None;
            }
            match value {
                Value::Null => "null".to_string(),
                Value::Int(v, _) => return signed(spec, *v < 0, &v.unsigned_abs().to_string(), ""),
                _ => return None,
            }
        }
        'o' | 'x' => {
            if spec.precision.is_some() || flags.chars().any(|f| matches!(f, '+' | ' ' | ',' | '(')) {
                return None;
            }
            match value {
                Value::Null => "null".to_string(),
                Value::Int(v, bits) => {
                    // Two's complement in the argument's own width.
                    let unsigned = if *bits == 64 { *v as u64 } else { (*v as u64) & ((1u64 << bits) - 1) };
                    let (digits, prefix) = if spec.conversion.eq_ignore_ascii_case(&'x') {
                        (format!("{unsigned:x}"), "0x")
                    } else {
                        (format!("{unsigned:o}"), "0")
                    };
                    let prefix = if flags.contains('#') { prefix } else { "" };
                    let text = signed(spec, false, &digits, prefix)?;
                    return Some(if upper { text.to_uppercase() } else { text });
                }
                _ => return None,
            }
        }
        'e' | 'f' | 'g' => {
            if flags.contains('#') {
                return None;
            }
            let precision = spec.precision.unwrap_or(6);
            let general = spec.conversion.eq_ignore_ascii_case(&'g');
            let (negative, digits, point) = match value {
                Value::Null => return pad(spec, "null".to_string(), upper),
                Value::Float(v, _) if v.is_nan() => return pad(spec, "NaN".to_string(), false),
                Value::Float(v, _) if v.is_infinite() => {
                    let text = if *v < 0.0 { if flags.contains('(') { "(Infinity)" } else { "-Infinity" } } else if flags.contains('+') { "+Infinity" } else { "Infinity" };
                    return pad(spec, text.to_string(), false);
                }
                Value::Float(v, sci) => {
                    let (digits, point) = sci_digits(sci);
                    (v.is_sign_negative(), digits, point)
                }
                Value::Decimal(v, scale) => {
                    let digits = v.unsigned_abs().to_string();
                    let point = digits.len() as i64 - i64::from(*scale);
                    (*v < 0, digits, point)
                }
                _ => return None,
            };
            if general {
                // Java's %g: `precision` significant digits (at least one), in decimal when the
                // rounded value is from 10^-4 up to 10^precision (and for zero), else scientific.
                let significant = precision.max(1);
                let zero = digits.bytes().all(|d| d == b'0');
                let exponent = rounded_exponent(&digits, point, significant);
                if zero || (-4..significant as i64).contains(&exponent) {
                    let fraction = if zero { significant - 1 } else { usize::try_from(significant as i64 - 1 - exponent).unwrap_or(0) };
                    let (int, frac) = fixed(&digits, point, fraction);
                    let int = if flags.contains(',') { grouped(&int) } else { int };
                    let text = if fraction == 0 { int } else { format!("{int}.{frac}") };
                    return signed(spec, negative, &text, "");
                }
                if flags.contains(',') {
                    return None;
                }
                let text = scientific(&digits, point, significant - 1);
                return signed(spec, negative, &if upper { text.to_uppercase() } else { text }, "");
            }
            if spec.conversion.eq_ignore_ascii_case(&'e') {
                if flags.contains(',') {
                    return None;
                }
                let text = scientific(&digits, point, precision);
                return signed(spec, negative, &if upper { text.to_uppercase() } else { text }, "");
            }
            let (int, frac) = fixed(&digits, point, precision);
            let int = if flags.contains(',') { grouped(&int) } else { int };
            let text = if precision == 0 { int } else { format!("{int}.{frac}") };
            return signed(spec, negative, &text, "");
        }
        _ => return None,
    };
    pad(spec, text, upper)
}

/// `text` padded to the width, left-justified with `-`, upper-cased for an upper-case conversion.
fn pad(spec: &Spec, text: String, upper: bool) -> Option<String> {
    let text = if upper { text.to_uppercase() } else { text };
    let fill = spec.width.unwrap_or(0).saturating_sub(text.chars().count());
    Some(if spec.flags.contains('-') { format!("{text}{}", " ".repeat(fill)) } else { format!("{}{text}", " ".repeat(fill)) })
}

/// A number's text with its sign (`-`, or `+`/space/parentheses as the flags ask), `prefix`
/// (`0x`), grouping of `digits` for `,` (applied by the caller for `%f`) and zero padding.
fn signed(spec: &Spec, negative: bool, digits: &str, prefix: &str) -> Option<String> {
    let flags = &spec.flags;
    if flags.contains('+') && flags.contains(' ') {
        return None;
    }
    let digits = if flags.contains(',') && spec.conversion == 'd' { grouped(digits) } else { digits.to_string() };
    let (lead, trail) = match (negative, flags.contains('(')) {
        (true, true) => ("(", ")"),
        (true, false) => ("-", ""),
        (false, _) if flags.contains('+') => ("+", ""),
        (false, _) if flags.contains(' ') => (" ", ""),
        _ => ("", ""),
    };
    let len = lead.len() + prefix.len() + digits.chars().count() + trail.len();
    let fill = spec.width.unwrap_or(0).saturating_sub(len);
    Some(if flags.contains('0') {
        format!("{lead}{prefix}{}{digits}{trail}", "0".repeat(fill))
    } else if flags.contains('-') {
        format!("{lead}{prefix}{digits}{trail}{}", " ".repeat(fill))
    } else {
        format!("{}{lead}{prefix}{digits}{trail}", " ".repeat(fill))
    })
}

/// Java's `Locale.US` grouping of an integer's digits by three.
fn grouped(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The significant digits of Rust's `{:e}` text `sci` (`-1.25e-3`) and the position of the
/// decimal point after the first of them (the value is `0.digits * 10^point`).
fn sci_digits(sci: &str) -> (String, i64) {
    let (mantissa, exponent) = sci.trim_start_matches('-').split_once('e').unwrap_or((sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exponent.parse::<i64>().unwrap_or(0) + 1)
}

/// `0.digits * 10^point` with `precision` fraction digits, rounded half up: (integer, fraction).
fn fixed(digits: &str, point: i64, precision: usize) -> (String, String) {
    let mut d: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
    let mut point = point;
    if point <= 0 {
        let lead = usize::try_from(1 - point).unwrap_or(0);
        d.splice(0..0, std::iter::repeat_n(0, lead));
        point = 1;
    }
    let keep = usize::try_from(point).unwrap_or(0) + precision;
    if d.len() < keep + 1 {
        d.resize(keep + 1, 0);
    }
    let round_up = d[keep] >= 5;
    d.truncate(keep);
    if round_up && carry(&mut d) {
        d.insert(0, 1);
        point += 1;
    }
    let split = usize::try_from(point).unwrap_or(0);
    let text = |ds: &[u8]| ds.iter().map(|x| char::from(b'0' + x)).collect::<String>();
    let int = text(&d[..split]).trim_start_matches('0').to_string();
    (if int.is_empty() { "0".to_string() } else { int }, text(&d[split..]))
}

/// `0.digits * 10^point` as Java's `%e`: `d.ddddde+XX`, rounded half up.
fn scientific(digits: &str, point: i64, precision: usize) -> String {
    let trimmed = digits.trim_start_matches('0');
    if trimmed.is_empty() {
        return format!("{}e+00", if precision == 0 { "0".to_string() } else { format!("0.{}", "0".repeat(precision)) });
    }
    let mut exponent = point - 1 - (digits.len() - trimmed.len()) as i64;
    let mut d: Vec<u8> = trimmed.bytes().map(|b| b - b'0').collect();
    if d.len() < precision + 2 {
        d.resize(precision + 2, 0);
    }
    let round_up = d[precision + 1] >= 5;
    d.truncate(precision + 1);
    if round_up && carry(&mut d) {
        d.insert(0, 1);
        d.truncate(precision + 1);
        exponent += 1;
    }
    let text: String = d.iter().map(|x| char::from(b'0' + x)).collect();
    let mantissa = if precision == 0 { text } else { format!("{}.{}", &text[..1], &text[1..]) };
    format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs())
}

/// The decimal exponent of `0.digits * 10^point` rounded half up to `significant` digits
/// (`9.9996` to 5 digits is `10.000`: exponent 1); 0 for zero.
fn rounded_exponent(digits: &str, point: i64, significant: usize) -> i64 {
    let trimmed = digits.trim_start_matches('0');
    if trimmed.is_empty() {
        return 0;
    }
    let exponent = point - 1 - (digits.len() - trimmed.len()) as i64;
    let mut d: Vec<u8> = trimmed.bytes().map(|b| b - b'0').collect();
    d.resize(d.len().max(significant + 1), 0);
    let round_up = d[significant] >= 5;
    d.truncate(significant);
    exponent + i64::from(round_up && carry(&mut d))
}

/// Adds one to the last digit of `d`; whether it carried out of the first.
fn carry(d: &mut [u8]) -> bool {
    for x in d.iter_mut().rev() {
        if *x == 9 {
            *x = 0;
        } else {
            *x += 1;
            return false;
        }
    }
    true
}

/// Java's `String.valueOf` of an argument.
fn java_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Int(v, _) => v.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => s.clone(),
        Value::Decimal(v, scale) => {
            let digits = v.unsigned_abs().to_string();
            let sign = if *v < 0 { "-" } else { "" };
            match usize::try_from(*scale).ok().filter(|s| *s > 0) {
                Some(s) if digits.len() > s => format!("{sign}{}.{}", &digits[..digits.len() - s], &digits[digits.len() - s..]),
                Some(s) => format!("{sign}0.{}{digits}", "0".repeat(s - digits.len())),
                None => format!("{sign}{digits}"),
            }
        }
        Value::Float(v, sci) => java_double(*v, sci),
    }
}

/// Java's `Double.toString`: plain from 10^-3 up to 10^7, else `d.dddE[-]n`; always a digit
/// after the point.
fn java_double(v: f64, sci: &str) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-Infinity" } else { "Infinity" }.to_string();
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if v == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, point) = sci_digits(sci);
    if (1e-3..1e7).contains(&v.abs()) {
        let fraction_digits = usize::try_from((digits.len() as i64 - point).max(1)).unwrap_or(1);
        let (int, frac) = fixed(&digits, point, fraction_digits);
        let frac = frac.trim_end_matches('0');
        return format!("{sign}{int}.{}", if frac.is_empty() { "0" } else { frac });
    }
    let frac = if digits.len() > 1 { &digits[1..] } else { "0" };
    format!("{sign}{}.{frac}E{}", &digits[..1], point - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printf(format: &str, values: &[Value]) -> Option<String> {
        render(&parse(format).ok()?, values)
    }

    fn float(v: f64) -> Value {
        Value::Float(v, format!("{v:e}"))
    }

    #[test]
    fn formats_as_java() {
        // Each expected text is what Java's String.format(Locale.US, ..) gives.
        assert_eq!(printf("Hello World %d %s", &[Value::Int(100, 32), Value::Str("days".into())]).as_deref(), Some("Hello World 100 days"));
        assert_eq!(printf("%5d|%-5d|%05d|%+d|% d|%,d|%(d", &[Value::Int(42, 32), Value::Int(42, 32), Value::Int(-42, 32), Value::Int(7, 32), Value::Int(7, 32), Value::Int(1234567, 64), Value::Int(-3, 32)]).as_deref(), Some("   42|42   |-0042|+7| 7|1,234,567|(3)"));
        assert_eq!(printf("%x %X %#x %o", &[Value::Int(-1, 32), Value::Int(255, 64), Value::Int(255, 8), Value::Int(8, 32)]).as_deref(), Some("ffffffff FF 0xff 10"));
        assert_eq!(printf("%.2f %.1f %f %10.3f %,.2f", &[float(3.14159), float(0.15), float(1.0), float(-2.5), float(1234567.891)]).as_deref(), Some("3.14 0.2 1.000000     -2.500 1,234,567.89"));
        assert_eq!(printf("%e %.2E %.0f", &[float(12345.678), float(0.000123), float(2.5)]).as_deref(), Some("1.234568e+04 1.23E-04 3"));
        assert_eq!(printf("%s %s %s %s", &[float(1e10), float(0.001), float(1.5), float(1e-4)]).as_deref(), Some("1.0E10 0.001 1.5 1.0E-4"));
        assert_eq!(printf("%.3s|%S|%b|%b|%c|%%|%2$s %<s", &[Value::Str("abcdef".into()), Value::Str("x".into()), Value::Null, Value::Int(1, 32), Value::Int(65, 32)]).as_deref(), Some("abc|X|false|true|A|%|x x"));
        assert_eq!(printf("%s and %d", &[Value::Null, Value::Null]).as_deref(), Some("null and null"));
        assert_eq!(printf("%.2f", &[Value::Decimal(12345, 3)]).as_deref(), Some("12.35"));
        // Java throws, so NULL.
        assert_eq!(printf("%d", &[float(1.5)]), None);
        assert_eq!(printf("%f", &[Value::Int(1, 32)]), None);
        assert_eq!(printf("%s %s", &[Value::Str("a".into())]), None);
        assert_eq!(printf("%-d", &[Value::Int(1, 32)]), None);
        // %g: decimal from 10^-4 up to 10^precision, else scientific; zeros kept.
        assert_eq!(printf("%g %g %g %.3g %g %G", &[float(0.0001), float(123456.0), float(1234567.0), float(9.9996), float(0.0), float(0.00001)]).as_deref(), Some("0.000100000 123456 1.23457e+06 10.0 0.00000 1.00000E-05"));
        assert!(matches!(parse("%t"), Err(Bad::Unsupported(_))));
        assert!(matches!(parse("%q"), Err(Bad::Invalid)));
        assert!(matches!(parse("abc%"), Err(Bad::Invalid)));
    }
}

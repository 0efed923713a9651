//! `COPY`: Postgres's bulk path, over the wire (psql's `\copy`, drivers' copy APIs).
//!
//! - `COPY t [(columns)] FROM STDIN [WITH (FORMAT text|csv, HEADER, DELIMITER 'c', NULL 's',
//!   QUOTE 'c')]` (and the pre-9.0 form `... CSV HEADER`): the client streams the rows; they
//!   are parsed ([`parse_rows`]) into the table's column types (a value that does not convert
//!   fails the whole COPY, naming the line and column) and inserted as one statement: one
//!   epoch, all or nothing, through every view that reads the table. Columns not listed are
//!   NULL. Plain tables only (a connector table is fed by its connector).
//! - `COPY t TO STDOUT` and `COPY (query) TO STDOUT`, same options: the rows in the text or CSV
//!   format, values in their Postgres text form (encoded by the frontend).
//!
//! Formats, as Postgres's: *text*: one line per row, fields separated by the delimiter (tab),
//! `\N` for NULL, backslash escapes (`\\`, `\t`, `\n`, `\r`, `\b`, `\f`, `\v`); *csv*: fields
//! separated by the delimiter (`,`), quoted with `"` when needed (doubled inside), NULL as an
//! unquoted empty field (or the `NULL` string), an optional header line.
//! A file on the server (`COPY ... FROM '/path'`) is refused: use STDIN/STDOUT.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringBuilder};
use arrow::compute::CastOptions;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement};

use crate::error::{Result, WeirError};
use crate::sql::parser::{ident, object_name};

/// A COPY's format options.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyFormat {
    /// CSV (else text).
    pub csv: bool,
    pub delimiter: u8,
    /// The string that stands for NULL (text `\N`, CSV the empty string).
    pub null: String,
    /// A header line: skipped on input, written on output (text and CSV, as Postgres 15+).
    pub header: bool,
    pub quote: u8,
}

impl CopyFormat {
    /// Postgres's text format: tab-delimited, `\N` for NULL.
    pub fn text() -> Self {
        CopyFormat { csv: false, delimiter: b'\t', null: "\\N".into(), header: false, quote: b'"' }
    }
}

/// What a COPY statement asks.
#[derive(Debug, Clone)]
pub enum CopyPlan {
    /// Rows from the client into `table`'s `columns` (all when empty).
    In { table: String, columns: Vec<String>, format: CopyFormat },
    /// The rows of `query` (SQL text) to the client.
    Out { query: String, format: CopyFormat },
}

/// Reads a COPY statement.
///
/// # Errors
/// `Unsupported` for a server file or program, `FORMAT binary`, or an option Weir does not
/// take; `InvalidOption` for a delimiter or quote that is not one ASCII character.
pub fn plan(stmt: &Statement) -> Result<CopyPlan> {
    let Statement::Copy { source, to, target, options, legacy_options, .. } = stmt else {
        return Err(WeirError::internal("not a COPY"));
    };
    let mut format = CopyFormat::text();
    let ascii = |c: char, what: &str| -> Result<u8> {
        u8::try_from(c).ok().filter(u8::is_ascii).ok_or_else(|| WeirError::option(format!("COPY {what} must be one ASCII character")))
    };
    let mut null = None;
    for option in options {
        match option {
            CopyOption::Format(name) => match name.value.to_lowercase().as_str() {
                "csv" => format.csv = true,
                "text" => format.csv = false,
                other => return Err(WeirError::unsupported(format!("COPY format {other} (Weir reads and writes text and csv)"))),
            },
            CopyOption::Delimiter(c) => format.delimiter = ascii(*c, "delimiter")?,
            CopyOption::Null(s) => null = Some(s.clone()),
            CopyOption::Header(h) => format.header = *h,
            CopyOption::Quote(c) => format.quote = ascii(*c, "quote")?,
            CopyOption::Encoding(e) if e.eq_ignore_ascii_case("utf8") || e.eq_ignore_ascii_case("utf-8") => {}
            other => return Err(WeirError::unsupported(format!("COPY option {other}"))),
        }
    }
    for option in legacy_options {
        match option {
            CopyLegacyOption::Csv(csv) => {
                format.csv = true;
                for o in csv {
                    match o {
                        CopyLegacyCsvOption::Header => format.header = true,
                        CopyLegacyCsvOption::Quote(c) => format.quote = ascii(*c, "quote")?,
                        other => return Err(WeirError::unsupported(format!("COPY option {other}"))),
                    }
                }
            }
            CopyLegacyOption::Delimiter(c) => format.delimiter = ascii(*c, "delimiter")?,
            CopyLegacyOption::Null(s) => null = Some(s.clone()),
            CopyLegacyOption::Header => format.header = true,
            CopyLegacyOption::Binary => return Err(WeirError::unsupported("COPY BINARY (Weir reads and writes text and csv)")),
            other => return Err(WeirError::unsupported(format!("COPY option {other}"))),
        }
    }
    if format.csv {
        if !options.iter().any(|o| matches!(o, CopyOption::Delimiter(_)))
            && !legacy_options.iter().any(|o| matches!(o, CopyLegacyOption::Delimiter(_)))
        {
            format.delimiter = b',';
        }
        format.null = String::new();
    }
    if let Some(null) = null {
        format.null = null;
    }
    match (to, target) {
        (false, CopyTarget::Stdin) => {
            let CopySource::Table { table_name, columns } = source else {
                return Err(WeirError::plan("COPY FROM reads into a table, not a query"));
            };
            Ok(CopyPlan::In { table: object_name(table_name), columns: columns.iter().map(ident).collect(), format })
        }
        (true, CopyTarget::Stdout) => {
            let query = match source {
                CopySource::Table { table_name, columns } if columns.is_empty() => format!("SELECT * FROM {table_name}"),
                CopySource::Table { table_name, columns } => {
                    format!("SELECT {} FROM {table_name}", columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "))
                }
                CopySource::Query(q) => q.to_string(),
            };
            Ok(CopyPlan::Out { query, format })
        }
        _ => Err(WeirError::unsupported(
            "COPY to or from a file or program on the server; use COPY ... FROM STDIN / TO STDOUT (psql: \\copy)",
        )),
    }
}

/// Parses `data` (the whole COPY stream) in `format` into rows of `schema`'s columns, each
/// converted from its text to the column's type.
///
/// # Errors
/// `InvalidText` naming the line and column for a row with the wrong number of fields or a
/// value that does not convert (the whole COPY fails: nothing is inserted).
pub fn parse_rows(data: &[u8], format: &CopyFormat, schema: &SchemaRef) -> Result<RecordBatch> {
    let text = std::str::from_utf8(data).map_err(|e| WeirError::invalid_text(format!("COPY data is not UTF-8: {e}")))?;
    let n = schema.fields().len();
    let mut builders: Vec<StringBuilder> = (0..n).map(|_| StringBuilder::with_capacity(data.len() / 16 / n.max(1), data.len() / n.max(1))).collect();
    let mut line_no = 0usize;
    // The input line of each row, for errors.
    let mut row_lines: Vec<usize> = Vec::new();
    let mut fields: Vec<Option<std::borrow::Cow<'_, str>>> = Vec::with_capacity(n);
    let mut rest = text;
    let mut header_pending = format.header;
    while !rest.is_empty() {
        line_no += 1;
        // `\.` alone on a line ends the data (psql sends it after a script's rows).
        let first_line = rest.split('\n').next().unwrap_or_default();
        if first_line.strip_suffix('\r').unwrap_or(first_line) == "\\." {
            break;
        }
        fields.clear();
        let start_line = line_no;
        rest = if format.csv {
            let (after, lines, closed) = csv_record(rest, format, &mut fields);
            if !closed {
                return Err(WeirError::new(crate::error::ErrorKind::BadCopyData(format!(
                    "unterminated CSV quoted field (COPY line {start_line})"
                ))));
            }
            line_no += lines;
            after
        } else {
            text_record(rest, format, &mut fields)
        };
        if header_pending {
            header_pending = false;
            continue;
        }
        if fields.len() == 1 && fields[0].as_deref() == Some("") && n != 1 {
            continue; // an empty line
        }
        if fields.len() != n {
            let what = if fields.len() < n { "missing data for a column" } else { "extra data after the last expected column" };
            return Err(WeirError::new(crate::error::ErrorKind::BadCopyData(format!(
                "{what} (COPY line {start_line}: {} fields, the COPY takes {n}: {})",
                fields.len(),
                schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            ))));
        }
        row_lines.push(start_line);
        for (b, f) in builders.iter_mut().zip(fields.drain(..)) {
            match f {
                Some(v) => b.append_value(v),
                None => b.append_null(),
            }
        }
    }
    // Values that do not convert come out NULL (`safe`); the first such non-NULL input is
    // the error, named as Postgres names it (line, column, value).
    let lenient = CastOptions { safe: true, ..Default::default() };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(n);
    for (mut b, field) in builders.into_iter().zip(schema.fields()) {
        let strings: ArrayRef = Arc::new(b.finish());
        let converted = match field.data_type() {
            DataType::Utf8 => Arc::clone(&strings),
            DataType::Boolean => bools(&strings)?,
            // A TIMESTAMP_LTZ's text without an offset is a wall-clock time in the session's zone.
            t => crate::plan::functions::zone_cast::cast_in_zone(&strings, t, crate::sql::settings::planning_zone(), lenient.safe)
                .map_err(|e| WeirError::invalid_text(format!("COPY column {}: {e}", field.name())))?,
        };
        if converted.null_count() != strings.null_count() {
            let texts = strings.as_any().downcast_ref::<arrow::array::StringArray>().ok_or_else(|| WeirError::internal("not text"))?;
            if let Some(row) = (0..texts.len()).find(|&r| texts.is_valid(r) && converted.is_null(r)) {
                let type_name = crate::sql::types::format_type_name(&crate::sql::types::pg_type(field.data_type()));
                return Err(WeirError::invalid_text(format!(
                    "invalid input for type {type_name}: \"{}\" (COPY line {}, column {})",
                    texts.value(row),
                    row_lines.get(row).copied().unwrap_or(0),
                    field.name()
                )));
            }
        }
        columns.push(converted);
    }
    let all_text = Arc::new(Schema::new(schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<Field>>()));
    Ok(RecordBatch::try_new(all_text, columns)?)
}

/// Postgres's spellings of booleans (`t`, `f`, `yes`, `on`, `1`, ...) as booleans; NULL for
/// any other text.
fn bools(strings: &ArrayRef) -> Result<ArrayRef> {
    let strings = strings.as_any().downcast_ref::<arrow::array::StringArray>().ok_or_else(|| WeirError::internal("not text"))?;
    let mut out = StringBuilder::new();
    for v in strings.iter() {
        match v.map(|s| s.trim().to_lowercase()) {
            None => out.append_null(),
            Some(s) => match s.as_str() {
                "t" | "true" | "y" | "yes" | "on" | "1" => out.append_value("true"),
                "f" | "false" | "n" | "no" | "off" | "0" => out.append_value("false"),
                _ => out.append_null(), // reported by the caller, with its line
            },
        }
    }
    Ok(arrow::compute::cast(&(Arc::new(out.finish()) as ArrayRef), &DataType::Boolean)?)
}

/// Reads one text-format line from `input` into `fields`; returns the rest.
fn text_record<'a>(input: &'a str, format: &CopyFormat, fields: &mut Vec<Option<std::borrow::Cow<'a, str>>>) -> &'a str {
    let (line, rest) = match input.find('\n') {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (input, ""),
    };
    let line = line.strip_suffix('\r').unwrap_or(line);
    let delimiter = format.delimiter as char;
    for raw in line.split(delimiter) {
        if raw == format.null {
            fields.push(None);
            continue;
        }
        if !raw.contains('\\') {
            fields.push(Some(std::borrow::Cow::Borrowed(raw)));
            continue;
        }
        let mut value = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                value.push(c);
                continue;
            }
            match chars.next() {
                Some('t') => value.push('\t'),
                Some('n') => value.push('\n'),
                Some('r') => value.push('\r'),
                Some('b') => value.push('\u{8}'),
                Some('f') => value.push('\u{c}'),
                Some('v') => value.push('\u{b}'),
                // `\digits`: up to three octal digits; `\xdigits`: up to two hex digits.
                Some(d @ '0'..='7') => {
                    let code = d.to_digit(8).unwrap_or(0);
                    value.push(char::from_u32(escaped_code(&mut chars, code, 8, 2) & 0xff).unwrap_or('?'));
                }
                Some('x') if chars.clone().next().is_some_and(|c| c.is_ascii_hexdigit()) => {
                    value.push(char::from_u32(escaped_code(&mut chars, 0, 16, 2)).unwrap_or('?'));
                }
                Some(other) => value.push(other),
                None => value.push('\\'),
            }
        }
        fields.push(Some(std::borrow::Cow::Owned(value)));
    }
    rest
}

/// Continues the numeric escape whose value so far is `code`: up to `max` more digits of
/// `radix` from `chars` (octal `\101`, hex `\x41`).
fn escaped_code(chars: &mut std::str::Chars<'_>, mut code: u32, radix: u32, max: usize) -> u32 {
    for _ in 0..max {
        match chars.clone().next().and_then(|c| c.to_digit(radix)) {
            Some(v) => {
                code = code * radix + v;
                chars.next();
            }
            None => break,
        }
    }
    code
}

/// Reads one CSV record (quoted fields may span lines) from `input` into `fields`; returns
/// the rest, the newlines inside quoted fields, and whether every quoted field was closed.
fn csv_record<'a>(input: &'a str, format: &CopyFormat, fields: &mut Vec<Option<std::borrow::Cow<'a, str>>>) -> (&'a str, usize, bool) {
    let bytes = input.as_bytes();
    let (delimiter, quote) = (format.delimiter, format.quote);
    let mut i = 0;
    let mut lines = 0;
    loop {
        // One field starting at i.
        if i < bytes.len() && bytes[i] == quote {
            let mut value = Vec::new();
            let mut closed = false;
            i += 1;
            while i < bytes.len() {
                if bytes[i] == quote {
                    if i + 1 < bytes.len() && bytes[i + 1] == quote {
                        value.push(quote);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    closed = true;
                    break;
                }
                lines += usize::from(bytes[i] == b'\n');
                value.push(bytes[i]);
                i += 1;
            }
            if !closed {
                return ("", lines, false);
            }
            // Quoted: never NULL, even when empty.
            fields.push(Some(std::borrow::Cow::Owned(String::from_utf8_lossy(&value).into_owned())));
        } else {
            let start = i;
            while i < bytes.len() && bytes[i] != delimiter && bytes[i] != b'\n' {
                i += 1;
            }
            let raw = input[start..i].strip_suffix('\r').unwrap_or(&input[start..i]);
            fields.push(if raw == format.null { None } else { Some(std::borrow::Cow::Borrowed(raw)) });
        }
        match bytes.get(i) {
            Some(&b) if b == delimiter => i += 1,
            Some(b'\r') if bytes.get(i + 1) == Some(&b'\n') => return (&input[i + 2..], lines, true),
            Some(b'\n') => return (&input[i + 1..], lines, true),
            None => return ("", lines, true),
            Some(_) => {
                // Text after a closing quote: up to the next delimiter or line end.
                while i < bytes.len() && bytes[i] != delimiter && bytes[i] != b'\n' {
                    i += 1;
                }
            }
        }
    }
}

/// Appends `value` as one COPY field in `format` to `out` (`None`: NULL).
pub fn write_field(value: Option<&[u8]>, format: &CopyFormat, out: &mut Vec<u8>) {
    let Some(value) = value else {
        out.extend_from_slice(format.null.as_bytes());
        return;
    };
    if format.csv {
        let needs_quotes = value.is_empty() && format.null.is_empty()
            || value.iter().any(|&b| b == format.delimiter || b == format.quote || b == b'\n' || b == b'\r')
            || value == format.null.as_bytes();
        if needs_quotes {
            out.push(format.quote);
            for &b in value {
                if b == format.quote {
                    out.push(format.quote);
                }
                out.push(b);
            }
            out.push(format.quote);
        } else {
            out.extend_from_slice(value);
        }
        return;
    }
    for &b in value {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ if b == format.delimiter => {
                out.push(b'\\');
                out.push(b);
            }
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("ok", DataType::Boolean, true),
        ]))
    }

    #[test]
    fn reads_text_and_csv() -> Result<()> {
        let text = CopyFormat::text();
        let batch = parse_rows(b"1\tann\tt\n2\t\\N\tf\n3\ttab\\there\\\\\tyes\n", &text, &schema())?;
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().values().to_vec(), vec![1, 2, 3]);
        let names = batch.column(1).as_string::<i32>();
        assert!(names.is_null(1));
        assert_eq!(names.value(2), "tab\there\\");
        let csv = CopyFormat { csv: true, delimiter: b',', null: String::new(), header: true, quote: b'"' };
        let batch = parse_rows(b"id,name,ok\n1,\"a, \"\"b\"\"\nc\",true\n2,,false\r\n3,\"\",on", &csv, &schema())?;
        let names = batch.column(1).as_string::<i32>();
        assert_eq!(names.value(0), "a, \"b\"\nc");
        assert!(names.is_null(1), "an unquoted empty field is NULL");
        assert_eq!(names.value(2), "", "a quoted empty field is the empty string");
        let err = parse_rows(b"1\tann\n", &text, &schema()).expect_err("two fields");
        assert!(err.to_string().contains("missing data for a column (COPY line 1: 2 fields"), "{err}");
        let err = parse_rows(b"1\tann\tt\nx\tann\tt\n", &text, &schema()).expect_err("not a number");
        assert_eq!(err.to_string(), "invalid input for type bigint: \"x\" (COPY line 2, column id)");
        let err = parse_rows(b"1\tann\tmaybe\n", &text, &schema()).expect_err("not a boolean");
        assert_eq!(err.to_string(), "invalid input for type boolean: \"maybe\" (COPY line 1, column ok)");
        // The end-of-data marker, octal and hex escapes, a header in text format.
        let batch = parse_rows(b"1\t\\101\\x42C\tt\n\\.\n2\tafter\tf\n", &text, &schema())?;
        assert_eq!(batch.num_rows(), 1, "nothing after \\.");
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "ABC");
        let with_header = CopyFormat { header: true, ..CopyFormat::text() };
        assert_eq!(parse_rows(b"id\tname\tok\n1\ta\tt\n", &with_header, &schema())?.num_rows(), 1);
        let csv = CopyFormat { csv: true, delimiter: b',', null: String::new(), header: false, quote: b'"' };
        let err = parse_rows(b"1,\"open,t\n", &csv, &schema()).expect_err("unterminated");
        assert!(err.to_string().contains("unterminated CSV quoted field (COPY line 1)"), "{err}");
        Ok(())
    }

    #[test]
    fn writes_fields_as_postgres() {
        let mut out = Vec::new();
        let text = CopyFormat::text();
        write_field(Some(b"a\tb\\c\nd"), &text, &mut out);
        out.push(b'|');
        write_field(None, &text, &mut out);
        assert_eq!(out, b"a\\tb\\\\c\\nd|\\N");
        let csv = CopyFormat { csv: true, delimiter: b',', null: String::new(), header: false, quote: b'"' };
        let mut out = Vec::new();
        for v in [Some(&b"plain"[..]), Some(b"a,\"b\""), Some(b""), None] {
            write_field(v, &csv, &mut out);
            out.push(b'|');
        }
        assert_eq!(String::from_utf8_lossy(&out), "plain|\"a,\"\"b\"\"\"|\"\"||");
    }
}

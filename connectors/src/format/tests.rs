//! Format tests: good records, bad records isolated at the right index, both timestamp forms,
//! Debezium ops, tombstones, round trips. Expected tables are written out by hand.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::util::pretty::pretty_format_batches;

use super::*;
use crate::ConnectorError;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn schema(columns: &[(&str, DataType)]) -> SchemaRef {
    Arc::new(Schema::new(columns.iter().map(|(n, t)| Field::new(*n, t.clone(), true)).collect::<Vec<_>>()))
}

fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The batch as a table, one line per row, with the op (if any) and source index in front.
fn table(decoded: &Decoded) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let text = pretty_format_batches(std::slice::from_ref(&decoded.batch))?.to_string();
    let lines: Vec<&str> = text.lines().collect();
    // Skip the border, header and separator lines and the closing border.
    let rows = &lines[3..lines.len() - 1];
    Ok(rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let op = decoded.ops.as_ref().map_or("+I".to_string(), |ops| {
                match ops[i] {
                    Op::Insert => "+I",
                    Op::Delete => "-D",
                    Op::UpdateBefore => "-U",
                    Op::UpdateAfter => "+U",
                }
                .to_string()
            });
            format!("{op} #{} {}", decoded.sources[i], row.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect())
}

fn error_indices(decoded: &Decoded) -> Vec<usize> {
    decoded.errors.iter().map(|e| e.index).collect()
}

fn orders() -> SchemaRef {
    schema(&[
        ("id", DataType::Int64),
        ("name", DataType::Utf8),
        ("ts", DataType::Timestamp(TimeUnit::Millisecond, None)),
        ("amount", DataType::Decimal128(12, 2)),
    ])
}

#[test]
fn json_isolates_bad_records() -> TestResult {
    let mut decoder = decoder(&opts(&[("format", "json")]), "", orders())?;
    let records: Vec<&[u8]> = vec![
        br#"{"id": 1, "name": "a", "ts": "2024-05-01 12:00:00.123", "amount": 1.5}"#,
        b"not json",
        br#"{"id": 2, "name": "b", "ts": "2024-05-01T12:00:00.123", "amount": "2.25"}"#,
        br#"{"id": "abc", "name": "c"}"#,
        br#"{"id": 4} {"id": 5}"#,
        b"",
        br#"{"id": 6, "name": "#,
        br#"{"id": 7, "extra": [1, 2], "name": 42}"#,
        br#"{"id": 8, "ts": "2024-05-01 12:00:00"}"#,
    ];
    let decoded = decoder.decode(&records)?;
    assert_eq!(error_indices(&decoded), vec![1, 3, 4, 5, 6], "{:?}", decoded.errors);
    assert!(decoded.errors[1].message.contains("abc"), "names the value: {}", decoded.errors[1].message);
    assert!(decoded.errors[2].message.contains("2 JSON values"), "{}", decoded.errors[2].message);
    assert_eq!(
        table(&decoded)?,
        vec![
            "+I #0 | 1 | a | 2024-05-01T12:00:00.123 | 1.50 |",
            "+I #2 | 2 | b | 2024-05-01T12:00:00.123 | 2.25 |",
            "+I #7 | 7 | 42 | | |",
            "+I #8 | 8 | | 2024-05-01T12:00:00 | |",
        ]
    );
    // A slice with only good records goes through in one batch; an empty slice gives nothing.
    assert_eq!(decoder.decode(&records[..1])?.batch.num_rows(), 1);
    assert_eq!(decoder.decode(&[])?.batch.num_rows(), 0);
    Ok(())
}

/// A file's JSON lines read in one pass give what reading them one by one gives; a bad line, or
/// a line of two objects, makes the pass fall back to finding the bad lines.
#[test]
fn json_lines_read_in_one_pass_or_line_by_line() -> TestResult {
    let mut decoder = decoder(&opts(&[("format", "json")]), "", orders())?;
    let lines = |text: &'static [u8]| -> Vec<&'static [u8]> {
        text.split_inclusive(|b| *b == b'\n').map(|l| l.strip_suffix(b"\n").unwrap_or(l)).collect()
    };
    let good: &[u8] = b"{\"id\": 1, \"name\": \"a\", \"amount\": 1.5}\n{\"id\": 2, \"name\": 7}\n";
    let decoded = decoder.decode_lines(good, &lines(good))?;
    assert_eq!(table(&decoded)?, vec!["+I #0 | 1 | a | | 1.50 |", "+I #1 | 2 | 7 | | |"]);
    for bad in [&b"{\"id\": 1}\n{\"id\": \"x\"}\n{\"id\": 3}\n"[..], &b"{\"id\": 1}\n{\"id\": 2} {\"id\": 9}\n{\"id\": 3}\n"[..]] {
        let decoded = decoder.decode_lines(bad, &lines(bad))?;
        assert_eq!(error_indices(&decoded), vec![1], "{:?}", decoded.errors);
        assert_eq!(table(&decoded)?, vec!["+I #0 | 1 | | | |", "+I #2 | 3 | | | |"]);
    }
    Ok(())
}

#[test]
fn json_bisection_finds_type_errors_among_many() -> TestResult {
    let bad = [0, 37, 38, 500, 999];
    let texts: Vec<String> = (0..1000)
        .map(|i| if bad.contains(&i) { format!(r#"{{"id": "x{i}"}}"#) } else { format!(r#"{{"id": {i}}}"#) })
        .collect();
    let records: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let decoded = decoder(&opts(&[("format", "json")]), "", orders())?.decode(&records)?;
    assert_eq!(error_indices(&decoded), bad.to_vec());
    let good: Vec<usize> = (0..1000).filter(|i| !bad.contains(i)).collect();
    assert_eq!(decoded.sources, good);
    let ids = decoded.batch.column(0).as_primitive::<arrow::datatypes::Int64Type>();
    assert!(good.iter().enumerate().all(|(row, &i)| ids.value(row) == i as i64), "rows in input order");
    Ok(())
}

#[test]
fn json_ignore_parse_errors_reads_wrong_types_as_null() -> TestResult {
    let options = opts(&[("format", "json"), ("json.ignore-parse-errors", "true")]);
    let mut decoder = decoder(&options, "", orders())?;
    let decoded = decoder.decode(&[br#"{"id": "abc", "name": "c"}"#, b"{broken"])?;
    assert_eq!(table(&decoded)?, vec!["+I #0 | | c | | |"]);
    assert_eq!(error_indices(&decoded), vec![1], "broken syntax still fails");
    Ok(())
}

#[test]
fn json_timestamp_ltz_and_round_trip() -> TestResult {
    let schema = schema(&[
        ("id", DataType::Int32),
        ("ltz", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))),
        ("ts", DataType::Timestamp(TimeUnit::Millisecond, None)),
        ("day", DataType::Date32),
        ("ok", DataType::Boolean),
        ("bytes", DataType::Binary),
        ("x", DataType::Float64),
    ]);
    let record = br#"{"id": 1, "ltz": "2024-05-01T12:00:00.5Z", "ts": "2024-05-01 12:00:00.5", "day": "2024-05-01", "ok": true, "bytes": "cafe", "x": 0.25}"#;
    let batch = decoder(&opts(&[("format", "json")]), "", Arc::clone(&schema))?.decode(&[record])?.batch;
    let sql = encoder(&opts(&[("format", "json")]), "", Arc::clone(&schema))?.encode(&batch, None)?;
    let sql = String::from_utf8(sql[0].clone().ok_or("a payload")?)?;
    // Flink's TimeFormats: the fraction without trailing zeros, none when it is zero.
    assert_eq!(
        sql,
        r#"{"id":1,"ltz":"2024-05-01 12:00:00.5Z","ts":"2024-05-01 12:00:00.5","day":"2024-05-01","ok":true,"bytes":"cafe","x":0.25}"#
    );
    let iso_options = opts(&[("format", "json"), ("json.timestamp-format.standard", "ISO-8601")]);
    let iso = encoder(&iso_options, "", Arc::clone(&schema))?.encode(&batch, None)?;
    let iso = String::from_utf8(iso[0].clone().ok_or("a payload")?)?;
    assert!(iso.contains(r#""ltz":"2024-05-01T12:00:00.5Z","ts":"2024-05-01T12:00:00.5""#), "{iso}");
    let whole = br#"{"id": 2, "ltz": "1969-12-31T23:59:59.999Z", "ts": "2024-05-01 12:00:07.120"}"#;
    let whole = decoder(&opts(&[("format", "json")]), "", Arc::clone(&schema))?.decode(&[whole])?.batch;
    let written = encoder(&opts(&[("format", "json")]), "", Arc::clone(&schema))?.encode(&whole, None)?;
    let written = String::from_utf8(written[0].clone().ok_or("a payload")?)?;
    assert!(written.contains(r#""ltz":"1969-12-31 23:59:59.999Z","ts":"2024-05-01 12:00:07.12""#), "{written}");
    // Both forms read back to the same batch.
    for text in [&sql, &iso] {
        let again = decoder(&opts(&[("format", "json")]), "", Arc::clone(&schema))?.decode(&[text.as_bytes()])?;
        assert_eq!(again.batch, batch, "{text}");
    }
    Ok(())
}

#[test]
fn json_writes_nulls_explicitly_or_not() -> TestResult {
    let batch = decoder(&opts(&[("format", "json")]), "", orders())?.decode(&[br#"{"id": 1}"#])?.batch;
    let explicit = encoder(&opts(&[("format", "json")]), "", orders())?.encode(&batch, None)?;
    assert_eq!(explicit, vec![Some(br#"{"id":1,"name":null,"ts":null,"amount":null}"#.to_vec())]);
    let options = opts(&[("format", "json"), ("json.encode.ignore-null-fields", "true")]);
    assert_eq!(encoder(&options, "", orders())?.encode(&batch, None)?, vec![Some(br#"{"id":1}"#.to_vec())]);
    Ok(())
}

#[test]
fn csv_reads_dialects_and_isolates_bad_records() -> TestResult {
    let options = opts(&[("format", "csv"), ("csv.field-delimiter", ";"), ("csv.allow-comments", "true")]);
    let mut decoder = decoder(&options, "", orders())?;
    let records: Vec<&[u8]> = vec![
        b"1;a;2024-05-01 12:00:00.123;1.5",
        b"2;\"b;c\";2024-05-01T12:00:00;",
        b"3;only two",
        b"x;d;;",
        b"# a comment",
        b"5;;;\n",
        b"6;\"open;;",
        b"7;e;not a time;1",
        b"8;f;;1.25",
    ];
    let decoded = decoder.decode(&records)?;
    assert_eq!(error_indices(&decoded), vec![2, 3, 6, 7], "{:?}", decoded.errors);
    assert!(decoded.errors[1].message.contains("column 'id'") && decoded.errors[1].message.contains("'x'"));
    assert!(decoded.errors[3].message.contains("column 'ts'"), "{}", decoded.errors[3].message);
    assert_eq!(
        table(&decoded)?,
        vec![
            "+I #0 | 1 | a | 2024-05-01T12:00:00.123 | 1.50 |",
            "+I #1 | 2 | b;c | 2024-05-01T12:00:00 | |",
            "+I #5 | 5 | | | |",
            "+I #8 | 8 | f | | 1.25 |",
        ]
    );
    // The empty STRING field is an empty string, not NULL; the others are NULL.
    let names = decoded.batch.column(1);
    assert!(names.is_valid(2) && decoded.batch.column(0).is_valid(2) && decoded.batch.column(3).is_null(2));
    Ok(())
}

#[test]
fn csv_null_literal_ignore_parse_errors_and_round_trip() -> TestResult {
    let options =
        opts(&[("format", "csv"), ("csv.null-literal", "\\N"), ("csv.ignore-parse-errors", "true")]);
    let mut decoder = decoder(&options, "", orders())?;
    let decoded = decoder.decode(&[b"x,\\N", b"2,\"say \"\"hi\"\", ok\",2024-05-01 00:00:01,3"])?;
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    assert_eq!(
        table(&decoded)?,
        vec!["+I #0 | | | | |", "+I #1 | 2 | say \"hi\", ok | 2024-05-01T00:00:01 | 3.00 |"]
    );
    assert!(decoded.batch.column(1).is_null(0), "the null literal is NULL for strings too");
    let written = encoder(&options, "", orders())?.encode(&decoded.batch, None)?;
    assert_eq!(
        written,
        vec![
            Some(b"\\N,\\N,\\N,\\N".to_vec()),
            // A timestamp as Flink's CSV format writes it: no fraction when it is zero.
            Some(b"2,\"say \"\"hi\"\", ok\",2024-05-01 00:00:01,3.00".to_vec())
        ]
    );
    let again = decoder.decode(&written.iter().flatten().map(Vec::as_slice).collect::<Vec<_>>())?;
    assert_eq!(again.batch, decoded.batch);
    Ok(())
}

#[test]
fn raw_reads_and_writes_payloads() -> TestResult {
    let text = schema(&[("line", DataType::Utf8)]);
    let decoded = decoder(&opts(&[("format", "raw")]), "", Arc::clone(&text))?.decode(&[b"hello", b"\xff\xfe", b""])?;
    assert_eq!(error_indices(&decoded), vec![1]);
    assert_eq!(table(&decoded)?, vec!["+I #0 | hello |", "+I #2 | |"]);
    let bytes = schema(&[("b", DataType::Binary)]);
    let decoded = decoder(&opts(&[("format", "raw")]), "", Arc::clone(&bytes))?.decode(&[b"\xff\xfe"])?;
    assert!(decoded.errors.is_empty());
    let written = encoder(&opts(&[("format", "raw")]), "", bytes)?.encode(&decoded.batch, None)?;
    assert_eq!(written, vec![Some(b"\xff\xfe".to_vec())]);
    let with_null = decoder(&opts(&[("format", "json")]), "", Arc::clone(&text))?.decode(&[b"{}"])?.batch;
    assert_eq!(encoder(&opts(&[("format", "raw")]), "", text)?.encode(&with_null, None)?, vec![None], "a tombstone");
    let two = schema(&[("a", DataType::Utf8), ("b", DataType::Utf8)]);
    assert!(matches!(decoder(&opts(&[("format", "raw")]), "", two), Err(ConnectorError::Unsupported { .. })));
    Ok(())
}

fn users() -> SchemaRef {
    schema(&[("id", DataType::Int64), ("name", DataType::Utf8)])
}

#[test]
fn debezium_ops_become_a_changelog() -> TestResult {
    let mut decoder = decoder(&opts(&[("format", "debezium-json")]), "", users())?;
    let records: Vec<&[u8]> = vec![
        br#"{"before": null, "after": {"id": 1, "name": "a"}, "op": "c", "source": {"db": "x"}, "ts_ms": 1}"#,
        br#"{"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "b"}, "op": "u"}"#,
        br#"{"schema": {"type": "struct"}, "payload": {"before": {"id": 1, "name": "b"}, "after": null, "op": "d"}}"#,
        br#"{"before": null, "after": {"id": 2, "name": "r"}, "op": "r"}"#,
        br#"{"before": null, "after": {"id": 3, "name": "x"}, "op": "u"}"#,
        br#"{"before": null, "after": null, "op": "d"}"#,
        br#"{"after": {"id": 4}, "op": "z"}"#,
        br#"{"after": {"id": 5}}"#,
        b"{",
        br#"{"before": {"id": "x"}, "op": "d"}"#,
    ];
    let decoded = decoder.decode(&records)?;
    assert_eq!(error_indices(&decoded), vec![4, 5, 6, 7, 8, 9], "{:?}", decoded.errors);
    assert!(decoded.errors[0].message.contains("REPLICA IDENTITY to FULL"), "{}", decoded.errors[0].message);
    assert!(decoded.errors[2].message.contains("valid ops: c, r, u, d"), "{}", decoded.errors[2].message);
    assert_eq!(
        table(&decoded)?,
        vec!["+I #0 | 1 | a |", "-U #1 | 1 | a |", "+U #1 | 1 | b |", "-D #2 | 1 | b |", "+I #3 | 2 | r |"]
    );
    // Written as Flink does: +I/+U as "c", -D/-U as "d"; read back, a -D/+I pair per update.
    let ops = decoded.ops.clone().ok_or("debezium rows carry ops")?;
    let written = encoder(&opts(&[("format", "debezium-json")]), "", users())?.encode(&decoded.batch, Some(&ops))?;
    let texts: Vec<String> = written.iter().flatten().map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    assert_eq!(
        texts,
        vec![
            r#"{"before":null,"after":{"id":1,"name":"a"},"op":"c"}"#,
            r#"{"before":{"id":1,"name":"a"},"after":null,"op":"d"}"#,
            r#"{"before":null,"after":{"id":1,"name":"b"},"op":"c"}"#,
            r#"{"before":{"id":1,"name":"b"},"after":null,"op":"d"}"#,
            r#"{"before":null,"after":{"id":2,"name":"r"},"op":"c"}"#,
        ]
    );
    let again = decoder.decode(&written.iter().flatten().map(Vec::as_slice).collect::<Vec<_>>())?;
    let ops: Vec<Op> = again.ops.clone().ok_or("ops")?;
    assert_eq!(ops, vec![Op::Insert, Op::Delete, Op::Insert, Op::Delete, Op::Insert]);
    assert_eq!(again.batch, decoded.batch);
    Ok(())
}

fn upsert_options(fields: &str) -> BTreeMap<String, String> {
    opts(&[
        ("connector", "upsert-kafka"),
        ("key.format", "json"),
        ("value.format", "json"),
        ("value.fields-include", fields),
    ])
}

#[test]
fn upsert_reads_tombstones_as_deletes() -> TestResult {
    let mut decoder = UpsertDecoder::try_new(&upsert_options("ALL"), users(), &[0])?;
    let records: Vec<KeyValue<'_>> = vec![
        (Some(br#"{"id": 1}"#), Some(br#"{"id": 1, "name": "a"}"#)),
        (Some(br#"{"id": 1}"#), None),
        (None, Some(br#"{"id": 9, "name": "no key"}"#)),
        (Some(b"bad key"), Some(br#"{"id": 3, "name": "c"}"#)),
        (Some(br#"{"id": 4}"#), Some(b"bad value")),
        (Some(br#"{"id": 5}"#), Some(br#"{"id": 99, "name": "e"}"#)),
    ];
    let decoded = decoder.decode(&records)?;
    assert_eq!(error_indices(&decoded), vec![2, 3, 4], "{:?}", decoded.errors);
    assert!(decoded.errors[0].message.contains("no key") && decoded.errors[1].message.starts_with("key: "));
    // The key columns come from the Kafka key.
    assert_eq!(table(&decoded)?, vec!["+I #0 | 1 | a |", "-D #1 | 1 | |", "+I #5 | 5 | e |"]);

    let mut except_key = UpsertDecoder::try_new(&upsert_options("EXCEPT_KEY"), users(), &[0])?;
    let decoded = except_key.decode(&[(Some(br#"{"id": 7}"#), Some(br#"{"name": "g"}"#))])?;
    assert_eq!(table(&decoded)?, vec!["+I #0 | 7 | g |"]);
    Ok(())
}

#[test]
fn upsert_writes_keys_values_and_tombstones() -> TestResult {
    let rows: Vec<&[u8]> = vec![
        br#"{"id": 1, "name": "a"}"#,
        br#"{"id": 1, "name": "a"}"#,
        br#"{"id": 1, "name": "b"}"#,
        br#"{"id": 1, "name": "b"}"#,
        br#"{"id": 2, "name": "b"}"#,
        br#"{"id": 2, "name": "b"}"#,
    ];
    let batch = decoder(&opts(&[("format", "json")]), "", users())?.decode(&rows)?.batch;
    let ops = [Op::Insert, Op::UpdateBefore, Op::UpdateAfter, Op::UpdateBefore, Op::UpdateAfter, Op::Delete];
    let mut encoder = UpsertEncoder::try_new(&upsert_options("EXCEPT_KEY"), users(), &[0])?;
    let messages = encoder.encode(&batch, Some(&ops))?;
    let text = |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let got: Vec<(usize, Option<String>, Option<String>)> =
        messages.iter().map(|m| (m.row, text(&m.key), text(&m.value))).collect();
    let key = |id: i64| Some(format!(r#"{{"id":{id}}}"#));
    let value = |name: &str| Some(format!(r#"{{"name":"{name}"}}"#));
    assert_eq!(
        got,
        vec![
            (0, key(1), value("a")),
            (2, key(1), value("b")), // -U/+U of one key: one message
            (3, key(1), None),       // the key changed: the old one is deleted
            (4, key(2), value("b")),
            (5, key(2), None),
        ]
    );
    Ok(())
}

/// A `kafka` table with `'key.fields'` (Flink's "Key and Value Formats"): every record is a new
/// row (no ops), a record without a value makes none; with `ALL` the value's columns are read
/// (Flink sets them after the key's), with `EXCEPT_KEY` the key columns come from the message
/// key (NULL without one); writing, every row is one (key, value) message.
#[test]
fn kafka_key_fields_read_and_write_the_message_key() -> TestResult {
    let options = opts(&[("connector", "kafka"), ("key.format", "json"), ("key.fields", "id"), ("format", "json")]);
    let mut decoder = UpsertDecoder::appending(&options, users(), &[0])?;
    let records: Vec<KeyValue<'_>> = vec![
        (Some(br#"{"id": 1}"#), Some(br#"{"id": 1, "name": "a"}"#)),
        (Some(br#"{"id": 1}"#), None),
        (None, Some(br#"{"id": 9, "name": "no key"}"#)),
        (Some(b"bad key"), Some(br#"{"id": 3, "name": "c"}"#)),
        (Some(br#"{"id": 5}"#), Some(br#"{"id": 99, "name": "e"}"#)),
    ];
    let decoded = decoder.decode(&records)?;
    assert_eq!(error_indices(&decoded), vec![3], "{:?}", decoded.errors);
    assert_eq!(decoded.ops, None, "append-only");
    assert_eq!(table(&decoded)?, vec!["+I #0 | 1 | a |", "+I #2 | 9 | no key |", "+I #4 | 99 | e |"]);
    let mut except_key = options.clone();
    except_key.insert("value.fields-include".into(), "EXCEPT_KEY".into());
    let mut decoder = UpsertDecoder::appending(&except_key, users(), &[0])?;
    let decoded = decoder.decode(&[(Some(br#"{"id": 5}"#), Some(br#"{"name": "e"}"#)), (None, Some(br#"{"name": "f"}"#))])?;
    assert_eq!(table(&decoded)?, vec!["+I #0 | 5 | e |", "+I #1 | | f |"]);

    // A prefix: column k_id is the key's "id"; the value holds the other columns.
    let prefixed = schema(&[("k_id", DataType::Int64), ("name", DataType::Utf8)]);
    let options = opts(&[
        ("connector", "kafka"),
        ("key.format", "json"),
        ("key.fields", "k_id"),
        ("key.fields-prefix", "k_"),
        ("value.format", "json"),
        ("value.fields-include", "EXCEPT_KEY"),
    ]);
    let mut decoder = UpsertDecoder::appending(&options, Arc::clone(&prefixed), &[0])?;
    let decoded = decoder.decode(&[(Some(br#"{"id": 7}"#), Some(br#"{"name": "g"}"#))])?;
    assert_eq!(table(&decoded)?, vec!["+I #0 | 7 | g |"]);
    let mut encoder = UpsertEncoder::appending(&options, Arc::clone(&prefixed), &[0])?;
    let messages = encoder.encode(&decoded.batch, None)?;
    let text = |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let got: Vec<(usize, Option<String>, Option<String>)> =
        messages.iter().map(|m| (m.row, text(&m.key), text(&m.value))).collect();
    assert_eq!(got, vec![(0, Some(r#"{"id":7}"#.to_string()), Some(r#"{"name":"g"}"#.to_string()))]);

    // Flink's rules: a prefix needs EXCEPT_KEY, and every key column carries it.
    let mut all = options.clone();
    all.remove("value.fields-include");
    assert!(matches!(UpsertDecoder::appending(&all, Arc::clone(&prefixed), &[0]), Err(ConnectorError::InvalidValue { .. })));
    assert!(matches!(UpsertDecoder::appending(&options, prefixed, &[1]), Err(ConnectorError::InvalidValue { .. })));
    Ok(())
}

/// At parallelism 2 a batch interleaves the update pairs of several keys (-U y, -U x, +U y,
/// +U x): no update-before is a tombstone while a later row writes its key.
#[test]
fn upsert_pairs_interleaved_updates_by_key() -> TestResult {
    let rows: Vec<&[u8]> = vec![
        br#"{"id": 2, "name": "y1"}"#,
        br#"{"id": 1, "name": "x1"}"#,
        br#"{"id": 2, "name": "y2"}"#,
        br#"{"id": 1, "name": "x2"}"#,
        br#"{"id": 3, "name": "z"}"#,
    ];
    let batch = decoder(&opts(&[("format", "json")]), "", users())?.decode(&rows)?.batch;
    let ops = [Op::UpdateBefore, Op::UpdateBefore, Op::UpdateAfter, Op::UpdateAfter, Op::UpdateBefore];
    let mut encoder = UpsertEncoder::try_new(&upsert_options("EXCEPT_KEY"), users(), &[0])?;
    let got: Vec<(usize, Option<Vec<u8>>)> =
        encoder.encode(&batch, Some(&ops))?.into_iter().map(|m| (m.row, m.value)).collect();
    assert_eq!(
        got,
        vec![
            (2, Some(br#"{"name":"y2"}"#.to_vec())),
            (3, Some(br#"{"name":"x2"}"#.to_vec())),
            // Nothing writes id 3 again: its old image's key is gone.
            (4, None),
        ]
    );
    Ok(())
}

/// A NULL key column fails the write (Flink's NOT NULL enforcer), naming the column.
#[test]
fn upsert_refuses_a_null_key() -> TestResult {
    let rows: Vec<&[u8]> = vec![br#"{"id": 1, "name": "a"}"#, br#"{"name": "no id"}"#];
    let batch = decoder(&opts(&[("format", "json")]), "", users())?.decode(&rows)?.batch;
    let mut encoder = UpsertEncoder::try_new(&upsert_options("ALL"), users(), &[0])?;
    let err = encoder.encode(&batch, None).expect_err("a NULL key").to_string();
    assert!(err.contains("column 'id' is in the PRIMARY KEY (the message key), so it is NOT NULL"), "{err}");
    Ok(())
}

#[test]
fn options_are_checked() {
    let err = |pairs: &[(&str, &str)]| decoder(&opts(pairs), "", orders()).err().map(|e| e.to_string());
    let unknown = err(&[("format", "json"), ("json.timestamp-format", "SQL")]).unwrap_or_default();
    assert!(unknown.contains("json.timestamp-format.standard"), "lists the valid options: {unknown}");
    let standard = err(&[("format", "json"), ("json.timestamp-format.standard", "RFC")]).unwrap_or_default();
    assert!(standard.contains("SQL, ISO-8601"), "{standard}");
    assert!(err(&[("format", "avro-confluent")]).unwrap_or_default().contains("'avro-confluent.url'"));
    let url = err(&[("format", "avro-confluent"), ("avro-confluent.url", "registry:8081")]).unwrap_or_default();
    assert!(url.contains("http://"), "{url}");
    assert!(err(&[("format", "xml")]).unwrap_or_default().contains("json, csv, raw"));
    assert!(err(&[]).unwrap_or_default().contains("'format'"));
    let delimiter = err(&[("format", "csv"), ("csv.field-delimiter", "ab")]).unwrap_or_default();
    assert!(delimiter.contains("one ASCII character"), "{delimiter}");
    let value_prefix = decoder(&opts(&[("value.format", "csv"), ("value.csv.field-delimiter", "\\t")]), "value.", orders());
    assert!(value_prefix.is_ok());
    let list = schema(&[("xs", DataType::List(Arc::new(Field::new("item", DataType::Int64, true))))]);
    assert!(decoder(&opts(&[("format", "json")]), "", Arc::clone(&list)).is_ok(), "ARRAY in json");
    let unsupported = decoder(&opts(&[("format", "csv")]), "", list).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(unsupported.contains("column 'xs'"), "{unsupported}");
    let interval = schema(&[("i", DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano))]);
    let unsupported = decoder(&opts(&[("format", "json")]), "", interval).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(unsupported.contains("column 'i'"), "{unsupported}");
}

#[test]
fn encoders_check_their_input() -> TestResult {
    let batch = RecordBatch::new_empty(users());
    let mut json = encoder(&opts(&[("format", "json")]), "", orders())?;
    assert!(matches!(json.encode(&batch, None), Err(ConnectorError::Internal { .. })));
    let mut json = encoder(&opts(&[("format", "json")]), "", users())?;
    assert!(matches!(json.encode(&batch, Some(&[Op::Insert])), Err(ConnectorError::Internal { .. })));
    Ok(())
}

#[test]
fn avro_confluent_subjects_follow_the_topic_name_strategy() -> TestResult {
    let options = opts(&[
        ("topic", "orders"),
        ("value.format", "avro-confluent"),
        ("value.avro-confluent.url", "http://registry:8081/"),
        ("key.format", "avro-confluent"),
        ("key.avro-confluent.url", "http://registry:8081"),
        ("key.avro-confluent.subject", "custom"),
    ]);
    let value = FormatOptions::from_options(&options, "value.")?.registry.expect("registry");
    assert_eq!((value.url.as_str(), value.subject.as_deref()), ("http://registry:8081", Some("orders-value")));
    let key = FormatOptions::from_options(&options, "key.")?.registry.expect("registry");
    assert_eq!(key.subject.as_deref(), Some("custom"));
    Ok(())
}

#[test]
fn avro_confluent_writer_schema_is_derived_from_the_columns() -> TestResult {
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Decimal128(10, 2), true),
        Field::new("ts", DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None), true),
    ]));
    let json: serde_json::Value = serde_json::from_str(&super::avro_schema_of(&schema)?).expect("json");
    assert_eq!(json["name"], "record");
    assert_eq!(json["namespace"], "org.apache.flink.avro.generated");
    assert_eq!(json["fields"][0]["type"], "long", "NOT NULL: no union");
    assert_eq!(json["fields"][1]["type"][0], "null");
    assert_eq!(json["fields"][1]["type"][1]["logicalType"], "decimal");
    assert_eq!(json["fields"][1]["type"][1]["scale"], 2);
    assert_eq!(json["fields"][2]["type"][1]["logicalType"], "timestamp-millis");
    Ok(())
}

/// ROW, MAP and ARRAY<ROW> columns in `json`: read from objects and arrays, written back as the
/// same JSON; a nested value of the wrong type makes its record alone a dead letter, with the
/// field's path.
#[test]
fn json_reads_and_writes_nested_values() -> TestResult {
    let address = Field::new("address", DataType::Struct(vec![Field::new("zip", DataType::Int32, true)].into()), true);
    let buyer = DataType::Struct(vec![Field::new("name", DataType::Utf8, true), address].into());
    let entries = DataType::Struct(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Int32, true)].into());
    let tags = DataType::Map(Arc::new(Field::new("entries", entries, false)), false);
    let item = DataType::Struct(vec![Field::new("sku", DataType::Utf8, true)].into());
    let items = DataType::List(Arc::new(Field::new("item", item, true)));
    let s = schema(&[("id", DataType::Int64), ("buyer", buyer), ("tags", tags), ("items", items)]);
    let records: Vec<&[u8]> = vec![
        br#"{"id": 1, "buyer": {"name": "ann", "address": {"zip": 150}}, "tags": {"vip": 1}, "items": [{"sku": "a"}, {"sku": "b"}]}"#,
        br#"{"id": 2, "buyer": {"name": "bob", "address": {"zip": "north"}}}"#,
        br#"{"id": 3, "buyer": null, "tags": {}, "items": []}"#,
    ];
    let decoded = decoder(&opts(&[("format", "json")]), "", Arc::clone(&s))?.decode(&records)?;
    assert_eq!(error_indices(&decoded), vec![1]);
    assert_eq!(decoded.errors[0].message, r#"json: field buyer.address.zip: failed to parse "north" as Int32"#);
    assert_eq!(
        table(&decoded)?,
        vec![
            "+I #0 | 1 | {name: ann, address: {zip: 150}} | {vip: 1} | [{sku: a}, {sku: b}] |",
            "+I #2 | 3 | | {} | [] |",
        ]
    );
    let written = encoder(&opts(&[("format", "json")]), "", s)?.encode(&decoded.batch, None)?;
    let texts: Vec<String> = written.into_iter().map(|r| String::from_utf8(r.unwrap_or_default()).unwrap_or_default()).collect();
    assert_eq!(
        texts,
        vec![
            r#"{"id":1,"buyer":{"name":"ann","address":{"zip":150}},"tags":{"vip":1},"items":[{"sku":"a"},{"sku":"b"}]}"#,
            r#"{"id":3,"buyer":null,"tags":{},"items":[]}"#,
        ]
    );
    Ok(())
}

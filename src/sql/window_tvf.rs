//! Flink's window TVF syntax, turned into DataFusion table functions.
//!
//! `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size [, offset]))` (and HOP, CUMULATE) has no place
//! in sqlparser's grammar, so [`rewrite_window_tvfs`] rewrites it, at the token level, into the
//! table function call `tumble('t', 'ts', size [, offset])`; the short form `TUMBLE(t, ts,
//! size)` already is one. The table functions registered by [`register`] validate the
//! arguments and return a [`WindowTable`] over the input table.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionContext;
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Result, WeirError};
use crate::plan::time_zone::Zone;
use crate::plan::window::{WindowKind, WindowSpec, WindowTable};

const FUNCTIONS: &[(&str, WindowKind)] = &[
    ("tumble", WindowKind::Tumble),
    ("hop", WindowKind::Hop),
    ("cumulate", WindowKind::Cumulate),
    ("session", WindowKind::Session),
];

/// Whether `name` (lowercase) is one of the window TVFs.
pub fn is_window_function(name: &str) -> bool {
    FUNCTIONS.iter().any(|(n, _)| *n == name)
}

/// Each window TVF's parameters by name, in their positional order, and how many are required
/// (Flink's window TVFs: `TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SIZE => ..)`).
const PARAMETERS: &[(&str, &[&str], usize)] = &[
    ("tumble", &["DATA", "TIMECOL", "SIZE", "OFFSET"], 3),
    ("hop", &["DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"], 4),
    ("cumulate", &["DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"], 4),
    ("session", &["DATA", "TIMECOL", "GAP"], 3),
];

/// `tokens` with every window TVF call whose arguments are named (`NAME => value`, in any
/// order) turned into the positional call (Calcite's named arguments, which Flink's docs use).
///
/// # Errors
/// `Syntax` for a name the function does not have, one given twice, or a required one missing.
fn named_to_positional(tokens: Vec<Token>) -> Result<Vec<Token>> {
    let sig: Vec<usize> = (0..tokens.len()).filter(|i| !matches!(tokens[*i], Token::Whitespace(_))).collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut next = 0; // the first token not yet copied to `out`
    for k in 0..sig.len() {
        if sig[k] < next {
            continue;
        }
        let Token::Word(w) = &tokens[sig[k]] else { continue };
        let Some((name, params, required)) = PARAMETERS.iter().find(|(n, _, _)| w.quote_style.is_none() && w.value.eq_ignore_ascii_case(n)) else {
            continue;
        };
        let named = |j: usize| sig.get(j + 1).is_some_and(|i| tokens[*i] == Token::RArrow) && sig.get(j).is_some_and(|i| matches!(tokens[*i], Token::Word(_)));
        if !(sig.get(k + 1).is_some_and(|i| tokens[*i] == Token::LParen) && named(k + 2)) {
            continue;
        }
        // The arguments: tokens between the parentheses, split at the commas outside others.
        let mut values: Vec<Option<Vec<Token>>> = vec![None; params.len()];
        let mut depth = 0;
        let mut j = k + 2;
        let mut current: Option<(usize, Vec<Token>)> = None;
        let mut end = None;
        while let Some(&i) = sig.get(j) {
            let token = &tokens[i];
            if depth == 0 && current.is_none() {
                let Token::Word(param) = token else { break };
                if !named(j) {
                    return Err(WeirError::syntax(format!("{}: every argument is named once one is (NAME => value)", name.to_uppercase()), None));
                }
                let Some(at) = params.iter().position(|p| param.value.eq_ignore_ascii_case(p)) else {
                    return Err(WeirError::syntax(
                        format!("{} has no parameter {}; its parameters: {}", name.to_uppercase(), param.value, params.join(", ")),
                        None,
                    ));
                };
                if values[at].is_some() {
                    return Err(WeirError::syntax(format!("{}: parameter {} given twice", name.to_uppercase(), params[at]), None));
                }
                current = Some((at, Vec::new()));
                j += 2;
                continue;
            }
            match token {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => {
                    end = Some(i);
                    break;
                }
                Token::RParen => depth -= 1,
                Token::Comma if depth == 0 => {
                    let (at, value) = current.take().expect("in an argument");
                    values[at] = Some(value);
                    j += 1;
                    continue;
                }
                _ => {}
            }
            if let Some((_, value)) = current.as_mut() {
                // The tokens of the value, with the whitespace between them.
                let from = sig[j - 1] + 1;
                if !value.is_empty() {
                    value.extend(tokens[from..i].iter().cloned());
                }
                value.push(token.clone());
            }
            j += 1;
        }
        let Some(end) = end else { continue };
        if let Some((at, value)) = current.take() {
            values[at] = Some(value);
        }
        if let Some(missing) = params[..*required].iter().zip(&values).find(|(_, v)| v.is_none()) {
            return Err(WeirError::syntax(format!("{} needs its parameter {}", name.to_uppercase(), missing.0), None));
        }
        out.extend(tokens[next..=sig[k + 1]].iter().cloned());
        for (n, value) in values.into_iter().flatten().enumerate() {
            if n > 0 {
                out.push(Token::Comma);
                out.push(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
            }
            out.extend(value);
        }
        next = end;
    }
    out.extend(tokens[next..].iter().cloned());
    Ok(out)
}

/// Rewrites every `TABLE(FN(TABLE t, DESCRIPTOR(col), args...))` in `sql` into
/// `FN('t', 'col', args...)`, its arguments named or not. Text without the pattern comes back
/// unchanged.
pub fn rewrite_window_tvfs(sql: &str) -> Result<String> {
    let upper = sql.to_ascii_uppercase();
    if !FUNCTIONS.iter().any(|(n, _)| upper.contains(&n.to_ascii_uppercase())) {
        return Ok(sql.to_string());
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| WeirError::syntax(e.message.clone(), None))?;
    let tokens = if tokens.contains(&Token::RArrow) { named_to_positional(tokens)? } else { tokens };
    // Indexes of the tokens that are not whitespace.
    let sig: Vec<usize> = (0..tokens.len()).filter(|i| !matches!(tokens[*i], Token::Whitespace(_))).collect();
    let word = |k: usize, w: &str| {
        sig.get(k).is_some_and(|i| matches!(&tokens[*i], Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w)))
    };
    let is = |k: usize, t: &Token| sig.get(k).is_some_and(|i| &tokens[*i] == t);
    let mut out = String::with_capacity(sql.len());
    let mut skip_until = 0usize; // token index up to which tokens were consumed
    let mut k = 0;
    while k < sig.len() {
        let fname = FUNCTIONS.iter().find(|(n, _)| word(k + 2, n));
        if word(k, "TABLE") && is(k + 1, &Token::LParen) && fname.is_some() && is(k + 3, &Token::LParen) && word(k + 4, "TABLE") {
            let (name, _) = fname.expect("checked");
            // TABLE ( FN ( TABLE name , DESCRIPTOR ( col ) rest... ) )
            let mut j = k + 5;
            let mut table = String::new();
            while let Some(i) = sig.get(j) {
                match &tokens[*i] {
                    Token::Word(w) if !(w.quote_style.is_none() && w.value.eq_ignore_ascii_case("PARTITION")) => {
                        table.push_str(&w.value)
                    }
                    // A schema-qualified name (`public.t`): the table's name.
                    Token::Period => table.clear(),
                    _ => break,
                }
                j += 1;
            }
            // SESSION's PARTITION BY k1, k2 (before the comma that precedes DESCRIPTOR).
            let mut partition = Vec::new();
            if word(j, "PARTITION") && word(j + 1, "BY") {
                j += 2;
                while let Some(i) = sig.get(j) {
                    match &tokens[*i] {
                        Token::Word(w) if !w.value.eq_ignore_ascii_case("DESCRIPTOR") => partition.push(w.value.clone()),
                        Token::Comma if !word(j + 1, "DESCRIPTOR") => {}
                        _ => break,
                    }
                    j += 1;
                }
            }
            if !(is(j, &Token::Comma) && word(j + 1, "DESCRIPTOR") && is(j + 2, &Token::LParen) && is(j + 4, &Token::RParen)) {
                return Err(WeirError::syntax(
                    format!("{} needs (TABLE t, DESCRIPTOR(time_column), ...)", name.to_uppercase()),
                    None,
                ));
            }
            let col = match &tokens[sig[j + 3]] {
                Token::Word(w) => w.value.clone(),
                other => return Err(WeirError::syntax(format!("DESCRIPTOR needs a column name, found {other}"), None)),
            };
            // Copy everything before, then the call, then the rest of FN's arguments up to the
            // matching parenthesis, dropping TABLE( and its ).
            for t in &tokens[skip_until..sig[k]] {
                out.push_str(&t.to_string());
            }
            out.push_str(&format!("{name}('{}', '{}'", table.replace('\'', "''"), col.replace('\'', "''")));
            let mut depth = 1; // inside FN(
            let mut i = sig[j + 4] + 1;
            while i < tokens.len() {
                match &tokens[i] {
                    Token::LParen => depth += 1,
                    Token::RParen => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                out.push_str(&tokens[i].to_string());
                i += 1;
            }
            if !partition.is_empty() {
                out.push_str(&format!(", '{}'", partition.join(",").replace('\'', "''")));
            }
            out.push(')');
            // Skip FN's ) and TABLE('s ).
            let mut rest = i + 1;
            while rest < tokens.len() && matches!(tokens[rest], Token::Whitespace(_)) {
                rest += 1;
            }
            if rest < tokens.len() && tokens[rest] == Token::RParen {
                rest += 1;
            }
            skip_until = rest;
            k = sig.iter().position(|x| *x >= rest).unwrap_or(sig.len());
            continue;
        }
        // The short form FN(t, col, ...): DataFusion looks table functions up by their
        // lower-case name.
        if let Some((name, _)) = FUNCTIONS.iter().find(|(n, _)| word(k, n)) {
            if is(k + 1, &Token::LParen) {
                for t in &tokens[skip_until..sig[k]] {
                    out.push_str(&t.to_string());
                }
                out.push_str(name);
                skip_until = sig[k] + 1;
            }
        }
        k += 1;
    }
    for t in &tokens[skip_until..] {
        out.push_str(&t.to_string());
    }
    Ok(out)
}

/// Registers TUMBLE, HOP, CUMULATE and SESSION; `lookup(name)` returns a relation's provider;
/// `zone` is the session time zone.
pub fn register(ctx: &SessionContext, lookup: Arc<dyn Fn(&str) -> Option<Arc<dyn TableProvider>> + Send + Sync>, zone: Zone) {
    for (name, kind) in FUNCTIONS {
        ctx.register_udtf(name, Arc::new(WindowFunction { kind: *kind, lookup: Arc::clone(&lookup), zone }));
    }
}

struct WindowFunction {
    kind: WindowKind,
    lookup: Arc<dyn Fn(&str) -> Option<Arc<dyn TableProvider>> + Send + Sync>,
    zone: Zone,
}

impl std::fmt::Debug for WindowFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WindowFunction({})", self.kind.name())
    }
}

fn df_err(e: WeirError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// A name argument: a string literal or a bare identifier.
fn name_arg(e: &Expr, what: &str, func: &str) -> Result<String> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => Ok(s.clone()),
        Expr::Column(c) => Ok(c.name.clone()),
        other => Err(WeirError::plan(format!("{func} needs the {what} as its argument, got {other}"))),
    }
}

/// An interval argument in whole milliseconds.
fn interval_ms(e: &Expr, func: &str) -> Result<i64> {
    let bad = || WeirError::plan(format!("{func} takes intervals such as INTERVAL '10' MINUTE; got {e}"));
    match e {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) => {
            if v.months != 0 {
                return Err(WeirError::plan(format!(
                    "{func} intervals must be fixed lengths (days, hours, ...), not months: {e}"
                )));
            }
            Ok(v.days as i64 * 86_400_000 + v.nanoseconds / 1_000_000)
        }
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => Ok(v.days as i64 * 86_400_000 + v.milliseconds as i64),
        Expr::Negative(inner) => Ok(-interval_ms(inner, func)?),
        _ => Err(bad()),
    }
}

impl TableFunctionImpl for WindowFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let func = self.kind.name();
        if exprs.len() < 3 {
            return Err(df_err(WeirError::plan(format!(
                "{func} needs (TABLE t, DESCRIPTOR(time_column), intervals...)"
            ))));
        }
        let table = name_arg(&exprs[0], "table", func).map_err(df_err)?.to_lowercase();
        let column = name_arg(&exprs[1], "time column", func).map_err(df_err)?;
        let input = (self.lookup)(&table).ok_or_else(|| df_err(WeirError::unknown_table(&table)))?;
        let schema = input.schema();
        let time_index = schema
            .index_of(&column)
            .or_else(|_| schema.index_of(&column.to_lowercase()))
            .map_err(|_| {
                df_err(WeirError::new(crate::error::ErrorKind::UnknownColumn(format!(
                    "{func}: column \"{column}\" does not exist in {table}; columns: {}",
                    schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
                ))))
            })?;
        if !matches!(schema.field(time_index).data_type(), arrow::datatypes::DataType::Timestamp(..)) {
            return Err(df_err(WeirError::plan(format!(
                "{func}: DESCRIPTOR({column}) must name a TIMESTAMP column (a time attribute); it has type {}",
                crate::sql::show::sql_type_name(schema.field(time_index).data_type())
            ))));
        }
        // The TVF appends these three; an input that has one (an inner window's, in cascading
        // windows) must rename it, as Flink asks ("they need to be aliased to prevent name
        // conflicting with the window start and window end of the outer Window TVF").
        if let Some(taken) = schema
            .fields()
            .iter()
            .map(|f| f.name())
            .find(|n| ["window_start", "window_end", "window_time"].contains(&n.to_lowercase().as_str()))
        {
            return Err(df_err(WeirError::plan(format!(
                "{func}: {table} already has a column {taken}, and the window adds window_start, window_end and \
                 window_time; rename it in {table} (an inner window's: window_start AS inner_start, window_time AS \
                 rowtime, then DESCRIPTOR(rowtime) here)"
            ))));
        }
        // SESSION's PARTITION BY columns arrive as a trailing string 'k1,k2'.
        let mut rest = &exprs[2..];
        let mut partition_by = Vec::new();
        if let Some(Expr::Literal(ScalarValue::Utf8(Some(cols)), _)) = rest.last() {
            if self.kind != WindowKind::Session {
                return Err(df_err(WeirError::plan(format!("{func} has no PARTITION BY"))));
            }
            for c in cols.split(',') {
                let name = c.trim().to_lowercase();
                let i = schema.index_of(&name).map_err(|_| {
                    df_err(WeirError::new(crate::error::ErrorKind::UnknownColumn(format!(
                        "SESSION PARTITION BY: column \"{name}\" does not exist in {table}"
                    ))))
                })?;
                partition_by.push(i);
            }
            rest = &rest[..rest.len() - 1];
        }
        let intervals = rest.iter().map(|e| interval_ms(e, func)).collect::<Result<Vec<_>>>().map_err(df_err)?;
        let column = schema.field(time_index).name().clone();
        let mut spec = WindowSpec::try_new(self.kind, table, column, time_index, &intervals).map_err(df_err)?;
        // Flink aligns the windows of a TIMESTAMP_LTZ to the wall-clock times of the session
        // time zone: a day's start at local midnight. Weir aligns to the epoch in UTC, plus the
        // window's offset: the same when the zone's offsets are whole periods, and the same
        // with the offset moved back by the zone's when the zone keeps one offset.
        // A window whose length the zone's offsets are not whole multiples of would span
        // another length of wall-clock time where the offset changes (a day's window over a
        // daylight-saving change is 23 or 25 hours in Flink), so only a zone that keeps one
        // offset takes it.
        let ltz = matches!(schema.field(time_index).data_type(), arrow::datatypes::DataType::Timestamp(_, Some(_)));
        let period = if self.kind == WindowKind::Hop { spec.slide_ms } else { spec.size_ms };
        let aligned = self.zone.aligns_with(spec.size_ms) && self.zone.aligns_with(spec.slide_ms);
        if ltz && self.kind != WindowKind::Session && !aligned {
            let Some(offset) = self.zone.steady_offset() else {
                return Err(df_err(WeirError::unsupported(format!(
                    "{func} over the TIMESTAMP_LTZ column {} in the session time zone '{}': its windows would start at \
                     local times (as in Flink) that move with the zone's daylight saving time, which Weir does not do yet; \
                     use a window whose size and slide divide the zone's offsets from UTC (an hour, in most zones), a zone \
                     without daylight saving time or UTC (SET 'table.local-time-zone'), or window a TIMESTAMP(3) time \
                     attribute of local time",
                    spec.time_column,
                    self.zone.name()
                ))));
            };
            spec.offset_ms = (spec.offset_ms - i64::from(offset) * 1000).rem_euclid(period);
        }
        spec.partition_by = partition_by;
        Ok(Arc::new(WindowTable::new(spec, input)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_the_flink_form() -> Result<()> {
        let sql = "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)) AS w GROUP BY 1";
        assert_eq!(
            rewrite_window_tvfs(sql)?,
            "SELECT * FROM hop('t', 'ts', INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS w GROUP BY 1"
        );
        let session = "SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY a, b, DESCRIPTOR(ts), INTERVAL '1' MINUTE))";
        assert_eq!(rewrite_window_tvfs(session)?, "SELECT * FROM session('t', 'ts', INTERVAL '1' MINUTE, 'a,b')");
        let plain = "SELECT 1";
        assert_eq!(rewrite_window_tvfs(plain)?, plain);
        Ok(())
    }

    #[test]
    fn named_arguments_in_any_order() -> Result<()> {
        let named = "SELECT * FROM TABLE(HOP(SIZE => INTERVAL '5' MINUTE, DATA => TABLE t, SLIDE => INTERVAL '1' MINUTE,
            TIMECOL => DESCRIPTOR(ts)))";
        assert_eq!(rewrite_window_tvfs(named)?, "SELECT * FROM hop('t', 'ts', INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)");
        let offset = "SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1' HOUR, OFFSET => INTERVAL '5' MINUTE))";
        assert_eq!(rewrite_window_tvfs(offset)?, "SELECT * FROM tumble('t', 'ts', INTERVAL '1' HOUR, INTERVAL '5' MINUTE)");
        let refused = |sql: &str, message: &str| {
            let e = rewrite_window_tvfs(sql).expect_err(sql).to_string();
            assert!(e.contains(message), "{sql}: {e}");
        };
        refused("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts)))", "TUMBLE needs its parameter SIZE");
        refused("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, WIDTH => INTERVAL '1' HOUR))", "TUMBLE has no parameter WIDTH; its parameters: DATA, TIMECOL, SIZE, OFFSET");
        refused("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, DATA => TABLE u))", "parameter DATA given twice");
        Ok(())
    }
}

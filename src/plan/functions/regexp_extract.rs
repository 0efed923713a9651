//! `REGEXP_EXTRACT(str, regex [, idx])`: capture group `idx` of the first match of `regex` in
//! `str`; group 0 is the whole match, and `idx` defaults to 0 (Flink docs, String Functions;
//! Flink's `SqlFunctionUtils.regexpExtract`: `Matcher.find()`, then `group(idx)`).
//!
//! NULL when any argument is NULL, when nothing matches, when `idx` is negative or larger than
//! the number of groups, and when the group took no part in the match (`(a)|b` on `b`, group 1)
//! — each as in Flink, which catches the exception and returns NULL.
//!
//! # Regex dialect
//! Rust's `regex` syntax, which is Java's for the common cases (classes, groups, anchors,
//! alternation, greedy and lazy quantifiers) but has no backreferences or lookaround. A literal
//! pattern that does not compile is refused when the statement is planned, naming the pattern;
//! a pattern read from a column that does not compile gives NULL for that row, as in Flink.

use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use regex::{CaptureLocations, Regex};

use super::args::{as_integer_type, as_string_type, literal_str, num_rows, IntArg, StrArg};

/// `REGEXP_EXTRACT`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct RegexpExtract {
    signature: Signature,
}

impl RegexpExtract {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for RegexpExtract {
    fn name(&self) -> &str {
        "regexp_extract"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = "REGEXP_EXTRACT(string, regex [, group index])";
        if !(2..=3).contains(&arg_types.len()) {
            return plan_err!("{usage} takes 2 or 3 arguments, got {}", arg_types.len());
        }
        let mut out = Vec::with_capacity(arg_types.len());
        for (i, t) in arg_types.iter().enumerate() {
            let coerced = if i < 2 { as_string_type(t) } else { as_integer_type(t) };
            match coerced {
                Some(c) => out.push(c),
                None => {
                    let what = ["the string", "the regex", "the group index"][i];
                    let valid = if i < 2 { "a string" } else { "an integer" };
                    return plan_err!("{usage}: {what} must be {valid}, got {t}");
                }
            }
        }
        Ok(out)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if let Some(pattern) = literal_str(args.scalar_arguments, 1) {
            if let Err(e) = Regex::new(pattern) {
                return plan_err!("REGEXP_EXTRACT: the regex '{pattern}' is invalid: {e}");
            }
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let strings = StrArg::new(&args.args[0])?;
        let patterns = StrArg::new(&args.args[1])?;
        let groups = match args.args.get(2) {
            Some(a) => IntArg::new(a)?,
            None => IntArg::Const(Some(0)),
        };
        let mut cache = RegexCache::default();
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            let (Some(s), Some(pattern), Some(group)) = (strings.get(i), patterns.get(i), groups.get(i)) else {
                out.append_null();
                continue;
            };
            out.append_option(cache.get(pattern).and_then(|(re, locs)| extract(re, locs, s, group)));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Group `group` of the first match of `re` in `s`.
fn extract<'s>(re: &Regex, locs: &mut CaptureLocations, s: &'s str, group: i64) -> Option<&'s str> {
    let group = usize::try_from(group).ok().filter(|g| *g < re.captures_len())?;
    re.captures_read(locs, s)?;
    let (start, end) = locs.get(group)?;
    Some(&s[start..end])
}

/// The last pattern compiled (a literal pattern is compiled once per batch), with its capture
/// buffer; `None` for a pattern that does not compile.
#[derive(Default)]
struct RegexCache {
    last: Option<(String, Option<(Regex, CaptureLocations)>)>,
}

impl RegexCache {
    fn get(&mut self, pattern: &str) -> Option<(&Regex, &mut CaptureLocations)> {
        if self.last.as_ref().is_none_or(|(p, _)| p != pattern) {
            let compiled = Regex::new(pattern).ok().map(|re| {
                let locs = re.capture_locations();
                (re, locs)
            });
            self.last = Some((pattern.to_string(), compiled));
        }
        let (_, compiled) = self.last.as_mut()?;
        compiled.as_mut().map(|(re, locs)| (&*re, locs))
    }
}

/// `REGEXP_EXTRACT_ALL(str, regex [, idx])`: capture group `idx` of every match of `regex` in
/// `str`, an `ARRAY<STRING>`; `idx` defaults to 1 here (Flink docs, String Functions; Flink
/// 2.0's `RegexpExtractAllFunction`: `Matcher.find()` in a loop). A group that took no part in
/// a match is a NULL element; no match is an empty array. NULL when an argument is NULL, the
/// regex does not compile, or `idx` is negative or larger than the number of groups.
///
/// `REGEXP_SUBSTR(str, regex)`: the first substring of `str` that `regex` matches; NULL when
/// none does, an argument is NULL or the regex does not compile (Flink 2.0's
/// `RegexpSubstrFunction`).
///
/// As for REGEXP_EXTRACT, a literal regex that does not compile here (Java's backreferences and
/// lookaround, `\Q..\E`) is refused when the statement is planned, and so is a literal group
/// index past a literal regex's groups; read from a column, each gives NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct RegexpMatches {
    signature: Signature,
    all: bool,
}

impl RegexpMatches {
    /// `REGEXP_EXTRACT_ALL` (`all`) or `REGEXP_SUBSTR`.
    pub(super) fn new(all: bool) -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable), all }
    }
}

impl ScalarUDFImpl for RegexpMatches {
    fn name(&self) -> &str {
        if self.all { "regexp_extract_all" } else { "regexp_substr" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let (usage, arities) = if self.all {
            ("REGEXP_EXTRACT_ALL(string, regex [, group index])", 2..=3)
        } else {
            ("REGEXP_SUBSTR(string, regex)", 2..=2)
        };
        if !arities.contains(&arg_types.len()) {
            return plan_err!("{usage}: wrong number of arguments ({})", arg_types.len());
        }
        arg_types
            .iter()
            .enumerate()
            .map(|(i, t)| match if i < 2 { as_string_type(t) } else { as_integer_type(t) } {
                Some(c) => Ok(c),
                None => plan_err!("{usage}: argument {} must be {}, got {t}", i + 1, if i < 2 { "a string" } else { "an integer" }),
            })
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(if self.all { DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))) } else { DataType::Utf8 })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let function = self.name().to_uppercase();
        if let Some(pattern) = literal_str(args.scalar_arguments, 1) {
            let re = match Regex::new(pattern) {
                Ok(re) => re,
                Err(e) => return plan_err!("{function}: the regex '{pattern}' is invalid: {e}"),
            };
            let group = args.scalar_arguments.get(2).copied().flatten().and_then(|v| match v {
                ScalarValue::Int64(Some(g)) => Some(*g),
                _ => None,
            });
            if let Some(g) = group.filter(|g| usize::try_from(*g).map_or(true, |g| g >= re.captures_len())) {
                return plan_err!("{function}: group {g} of '{pattern}', which has {} groups", re.captures_len() - 1);
            }
        }
        let data_type = self.return_type(&[])?;
        Ok(Arc::new(Field::new(self.name(), data_type, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let strings = StrArg::new(&args.args[0])?;
        let patterns = StrArg::new(&args.args[1])?;
        let mut cache = RegexCache::default();
        if !self.all {
            let mut out = StringBuilder::with_capacity(n, 0);
            for i in 0..n {
                let found = match (strings.get(i), patterns.get(i)) {
                    (Some(s), Some(p)) => cache.get(p).and_then(|(re, _)| re.find(s)).map(|m| m.as_str()),
                    _ => None,
                };
                out.append_option(found);
            }
            return Ok(ColumnarValue::Array(Arc::new(out.finish())));
        }
        let groups = match args.args.get(2) {
            Some(a) => IntArg::new(a)?,
            None => IntArg::Const(Some(1)),
        };
        let mut out = arrow::array::ListBuilder::new(StringBuilder::new());
        for i in 0..n {
            let (Some(s), Some(p), Some(group)) = (strings.get(i), patterns.get(i), groups.get(i)) else {
                out.append(false);
                continue;
            };
            let Some((re, locs)) = cache.get(p) else {
                out.append(false);
                continue;
            };
            let Some(group) = usize::try_from(group).ok().filter(|g| *g < re.captures_len()) else {
                out.append(false);
                continue;
            };
            let mut at = 0;
            // Java's Matcher.find() after an empty match moves on by one character.
            while at <= s.len() {
                let Some(whole) = re.captures_read_at(locs, s, at) else { break };
                out.values().append_option(locs.get(group).map(|(start, end)| &s[start..end]));
                at = if whole.end() > whole.start() {
                    whole.end()
                } else {
                    whole.end() + s[whole.end()..].chars().next().map_or(1, char::len_utf8)
                };
            }
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

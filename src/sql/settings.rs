//! Session settings with meaning to Weir, and their values.
//!
//! | key | value | effect |
//! |---|---|---|
//! | `table.exec.emit.allow-lateness` | a duration | window views created afterwards keep a fired window open that long (Flink) |
//! | `table.exec.state.ttl` | a duration | views and jobs created afterwards let the state of their unbounded operators expire that long after its last write ([`crate::plan::ttl`]) |
//! | `parallelism.default` | 1 to 128 | views and jobs created afterwards run their keyed and stateless operators as that many parallel instances (Flink's key; default: the server's `--workers`, the number of cores) |
//! | `table.local-time-zone`, `TimeZone` | `UTC` | the session time zone (Flink's key and Postgres's, one setting; `SET TIME ZONE 'zone'` too): where a TIMESTAMP_LTZ is shown and read as a wall-clock time ([`crate::plan::time_zone`]); a zone database name (`Asia/Shanghai`), `UTC` or `GMT+08:00` |
//! | `execution.savepoint.path` | a suspended job's id or view's name | views and jobs created afterwards start each source they share with it at its positions (Flink's key, which names a savepoint directory there; see `crate::engine::suspend`) |
//! | `statement_timeout` | a duration (a bare number: ms), 0 for none | Postgres's: a statement running longer is cancelled with 57014 ([`statement_timeout`]); a write or a `CREATE MATERIALIZED VIEW` rolls back whole ([`crate::engine::interrupt`]) |
//!
//! The first four are fixed when the view or `INSERT INTO` job is created: they are kept in its
//! catalog options ([`job_options`]) and a later `SET` does not change a running job (Flink:
//! they are compiled into the job). A statement is planned with its session's settings
//! ([`in_session`]); a job with its own options ([`in_job`]).

use std::collections::BTreeMap;

use sqlparser::ast::{BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Value};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Whitespace};

use crate::error::{Result, WeirError};
use crate::plan::duration::parse_duration_ms;
use crate::plan::time_zone::Zone;
use crate::plan::ttl::StateTtl;
pub use crate::runtime::relation::{parallelism_option, PARALLELISM};

/// The allowed lateness of window views, a duration.
pub const ALLOW_LATENESS: &str = "table.exec.emit.allow-lateness";
/// State time-to-live, a duration.
pub const STATE_TTL: &str = "table.exec.state.ttl";
/// The catalog option that plans a view or job with Flink's null collation, `low` (NULL sorts
/// below every value; [`crate::sql::relations::NullCollation::Low`]). Every view and job created
/// since 2026-12-06 has it; one created before plans with Postgres's at its restart, as it was
/// created, since the state of its Top-N, deduplication or OVER window is ordered that way.
pub const NULL_COLLATION: &str = "weir.null-collation";

/// The catalog option that plans a view's or job's DECIMAL divisions with Flink's result type,
/// `flink` ([`crate::sql::decimal_division`]). Every view and job created since 2026-12-07 has
/// it; one created before plans Arrow's type at its restart, as it was created, since its state
/// holds values of that type. Statements always plan Flink's ([`flink_decimal_division`]).
pub const DECIMAL_DIVISION: &str = "weir.decimal-division";

/// Marks the planning settings of a view or job ([`in_job`]), whose catalog options say how
/// it plans, from those of a statement.
const PLANNING_JOB: &str = "weir.planning-job";

/// Whether what is planned now divides DECIMALs as Flink does: a statement, and a view or job
/// created since [`DECIMAL_DIVISION`] (its catalog options have it).
pub fn flink_decimal_division() -> bool {
    let settings = planning_settings();
    !settings.contains_key(PLANNING_JOB) || settings.get(DECIMAL_DIVISION).is_some_and(|v| v == "flink")
}
/// The suspended job whose source positions new jobs start from.
pub const SAVEPOINT_PATH: &str = "execution.savepoint.path";
/// Postgres's limit on a statement's running time, a duration (a bare number is ms).
pub const STATEMENT_TIMEOUT: &str = "statement_timeout";

/// The session's `statement_timeout`, if it sets one other than 0.
///
/// # Errors
/// `InvalidOption` for a value that is not a duration.
pub fn statement_timeout(settings: &BTreeMap<String, String>) -> Result<Option<std::time::Duration>> {
    let Some(v) = settings.get(STATEMENT_TIMEOUT) else { return Ok(None) };
    let ms = parse_duration_ms(STATEMENT_TIMEOUT, v)?;
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// The settings a view or job created now keeps in its catalog options: those of
/// `settings` (the session's) that Weir interprets and that are not zero, and
/// [`NULL_COLLATION`].
///
/// # Errors
/// `InvalidOption` for a value that is not a duration.
pub fn job_options(settings: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::from([(NULL_COLLATION.to_string(), "low".to_string()), (DECIMAL_DIVISION.to_string(), "flink".to_string())]);
    for key in [ALLOW_LATENESS, STATE_TTL] {
        if let Some(v) = settings.get(key) {
            if parse_duration_ms(key, v)? > 0 {
                out.insert(key.to_string(), v.clone());
            }
        }
    }
    if let Some(v) = settings.get(PARALLELISM) {
        out.insert(PARALLELISM.to_string(), v.trim().to_string());
        parallelism_option(&out)?;
    }
    let zone = session_zone(settings);
    if !zone.is_utc() {
        out.insert(LOCAL_TIME_ZONE.to_string(), zone.name());
    }
    Ok(out)
}

tokio::task_local! {
    /// The settings of the session whose statement is planned, or of the job being planned
    /// (its catalog options).
    static PLANNING: std::sync::Arc<BTreeMap<String, String>>;
}

/// The session time zone of `settings` (UTC unless one is set).
pub fn session_zone(settings: &BTreeMap<String, String>) -> Zone {
    Zone::of_settings(settings)
}

/// The settings of what is planned now: those [`in_session`] or [`in_job`] runs the planning
/// with, else none.
pub fn planning_settings() -> std::sync::Arc<BTreeMap<String, String>> {
    PLANNING.try_with(std::sync::Arc::clone).unwrap_or_default()
}

/// The time zone in which what is planned now reads TIMESTAMP_LTZ values (of
/// [`planning_settings`]; UTC unless set).
pub fn planning_zone() -> Zone {
    session_zone(&planning_settings())
}

/// Runs `work`, a statement of a session with `settings`, with them: in its time zone, and
/// `current_setting` reading them.
pub async fn in_session<T>(settings: &BTreeMap<String, String>, work: impl std::future::Future<Output = T>) -> T {
    PLANNING.scope(std::sync::Arc::new(settings.clone()), work).await
}

/// Runs `work`, the planning of a view or job with catalog `options`, in the time zone it was
/// created in (kept in them by [`job_options`]).
pub async fn in_job<T>(options: &BTreeMap<String, String>, work: impl std::future::Future<Output = T>) -> T {
    let mut planning = options.clone();
    planning.insert(PLANNING_JOB.to_string(), "true".to_string());
    PLANNING.scope(std::sync::Arc::new(planning), work).await
}

/// The value `SHOW key` (`key` lower case), `current_setting` and `pg_settings` give: the
/// session's, else the default of [`crate::sql::show::DEFAULT_SETTINGS`] (`None` for a key
/// that has neither).
pub fn shown_value(settings: &BTreeMap<String, String>, key: &str) -> Option<String> {
    settings
        .get(canonical_key(key))
        .cloned()
        .or_else(|| crate::sql::show::DEFAULT_SETTINGS.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string()))
}

/// The state TTL of a view or job: its `table.exec.state.ttl` option and the `STATE_TTL`
/// query hints of `query` (SQL text), `/*+ STATE_TTL('alias' = '1 d', ...) */`.
///
/// # Errors
/// `InvalidOption` for a duration that does not parse; `Plan` for a hint that is not
/// `STATE_TTL('name' = 'duration', ...)`.
pub fn state_ttl_of(options: &BTreeMap<String, String>, query: &str) -> Result<StateTtl> {
    let default_ms = options.get(STATE_TTL).map(|v| parse_duration_ms(STATE_TTL, v)).transpose()?;
    let mut hints = Vec::new();
    let tokens = Tokenizer::new(&GenericDialect {}, query)
        .tokenize()
        .map_err(|e| WeirError::plan(format!("query hints: {e}")))?;
    for token in tokens {
        let Token::Whitespace(Whitespace::MultiLineComment(comment)) = token else { continue };
        let Some(text) = comment.strip_prefix('+') else { continue };
        hints.extend(parse_state_ttl_hints(text)?);
    }
    Ok(StateTtl { default_ms, hints })
}

/// The (name, ms) pairs of the hints in the text of one `/*+ ... */` comment.
fn parse_state_ttl_hints(text: &str) -> Result<Vec<(String, i64)>> {
    let bad = |what: String| {
        WeirError::plan(format!(
            "query hint /*+{text}*/: {what}; write /*+ STATE_TTL('table or alias' = '1 d', ...) */"
        ))
    };
    let mut parser = Parser::new(&GenericDialect {}).try_with_sql(text).map_err(|e| bad(e.to_string()))?;
    let hints = parser.parse_comma_separated(Parser::parse_expr).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::new();
    for hint in hints {
        let Expr::Function(f) = &hint else { return Err(bad(format!("{hint} is not a hint"))) };
        let name = f.name.to_string();
        if !name.eq_ignore_ascii_case("STATE_TTL") {
            return Err(bad(format!("unknown hint {name}; Weir knows STATE_TTL")));
        }
        let FunctionArguments::List(list) = &f.args else { return Err(bad("STATE_TTL needs arguments".into())) };
        for arg in &list.args {
            let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::BinaryOp { left, op: BinaryOperator::Eq, right })) = arg
            else {
                return Err(bad(format!("{arg} is not 'name' = 'duration'")));
            };
            let string = |e: &Expr| match e {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(s) => Some(s.clone()),
                    _ => None,
                },
                Expr::Identifier(i) => Some(i.value.clone()),
                _ => None,
            };
            let (Some(name), Some(duration)) = (string(left), string(right)) else {
                return Err(bad(format!("{arg} is not 'name' = 'duration'")));
            };
            out.push((name, parse_duration_ms("STATE_TTL", &duration)?));
        }
    }
    Ok(out)
}

/// The session time zone (Flink's key), the key under which it is kept.
pub const LOCAL_TIME_ZONE: &str = crate::plan::time_zone::SETTING;
/// Postgres's name of the session time zone, one setting with [`LOCAL_TIME_ZONE`].
pub const TIME_ZONE: &str = "timezone";

/// The key `key` (lower case) is kept under: [`LOCAL_TIME_ZONE`] for [`TIME_ZONE`], else
/// itself.
pub fn canonical_key(key: &str) -> &str {
    if key == TIME_ZONE {
        LOCAL_TIME_ZONE
    } else {
        key
    }
}

/// Checks a `SET` of a key Weir interprets, returning the value to keep: the zone's name for
/// the session time zone (`Asia/Shanghai` for `asia/shanghai`, `UTC` for `Z`), else `value`.
///
/// # Errors
/// `InvalidOption` for a duration that does not parse, a parallelism out of range, or a time
/// zone that is not one (Flink's message).
pub fn validate(key: &str, value: &str) -> Result<String> {
    if key == ALLOW_LATENESS || key == STATE_TTL || key == STATEMENT_TIMEOUT {
        parse_duration_ms(key, value)?;
    }
    if key == PARALLELISM {
        parallelism_option(&BTreeMap::from([(key.to_string(), value.to_string())]))?;
    }
    if key == LOCAL_TIME_ZONE || key == TIME_ZONE {
        return Zone::session(value).map(|z| z.name()).map_err(WeirError::option);
    }
    if key == CLIENT_MIN_MESSAGES {
        let level = value.to_ascii_lowercase();
        if message_rank(&level).is_none() {
            return Err(WeirError::option(format!(
                "invalid value for parameter \"{CLIENT_MIN_MESSAGES}\": \"{value}\"; available values: {}",
                MESSAGE_LEVELS.iter().map(|(l, _)| *l).collect::<Vec<_>>().join(", ")
            )));
        }
        return Ok(level);
    }
    Ok(value.to_string())
}

/// The dotted keys (Flink's and Weir's) that Weir reads from a session's settings; a `SET` of
/// another dotted key is kept (Flink's SET keeps any key, Postgres's any dotted one) with a
/// NOTICE ([`unread_key_notice`]).
const READ_KEYS: &[&str] = &[PARALLELISM, ALLOW_LATENESS, STATE_TTL, LOCAL_TIME_ZONE, SAVEPOINT_PATH, NULL_COLLATION, DECIMAL_DIVISION];

/// The NOTICE a `SET` of dotted key `key` gets when Weir does not read it, with the key meant
/// when it is a typo of one or Flink's key for what a table option does here; `None` for a key
/// Weir reads and for Postgres's keys (no dot).
pub fn unread_key_notice(key: &str) -> Option<String> {
    if !key.contains('.') || READ_KEYS.contains(&key) {
        return None;
    }
    let hint = match key {
        "table.exec.source.idle-timeout" => format!(
            ": a source's idle timeout is its table's option '{}' (ALTER TABLE t SET ('{}' = '10 s'))",
            crate::source::IDLE_TIMEOUT,
            crate::source::IDLE_TIMEOUT
        ),
        _ => {
            let known: Vec<String> = READ_KEYS.iter().map(|k| k.to_string()).collect();
            weir_connectors::closest(key, &known).map(|k| format!("; did you mean '{k}'?")).unwrap_or_default()
        }
    };
    Some(format!("Weir does not read '{key}': the setting is kept (SHOW shows it) and changes nothing{hint}"))
}

/// Postgres's `client_min_messages`: the least severe message sent to the client (`notice`
/// unless set; errors are always sent).
pub const CLIENT_MIN_MESSAGES: &str = "client_min_messages";

/// The levels of [`CLIENT_MIN_MESSAGES`], least severe first, with their rank (Postgres's
/// `server_message_level_options`; `debug` is `debug2`, `info` is always sent).
const MESSAGE_LEVELS: &[(&str, u8)] =
    &[("debug5", 0), ("debug4", 1), ("debug3", 2), ("debug2", 3), ("debug", 3), ("debug1", 4), ("log", 5), ("notice", 6), ("warning", 7), ("error", 8)];

fn message_rank(level: &str) -> Option<u8> {
    MESSAGE_LEVELS.iter().find(|(l, _)| l.eq_ignore_ascii_case(level)).map(|(_, r)| *r)
}

/// Whether a message of `severity` (`NOTICE`, `WARNING`) goes to a session with `settings`
/// ([`CLIENT_MIN_MESSAGES`]).
pub fn sends_message(settings: &BTreeMap<String, String>, severity: &str) -> bool {
    let least = settings.get(CLIENT_MIN_MESSAGES).and_then(|l| message_rank(l)).unwrap_or(6);
    message_rank(severity).is_none_or(|rank| rank >= least)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_ttl_from_the_option_and_the_hints() -> Result<()> {
        let options = BTreeMap::from([(STATE_TTL.to_string(), "1 h".to_string())]);
        let q = "SELECT /*+ STATE_TTL('o' = '1d', 'p' = '12 h') */ o.id FROM orders o JOIN pay p ON o.id = p.id";
        let ttl = state_ttl_of(&options, q)?;
        assert_eq!(ttl.default_ms, Some(3_600_000));
        assert_eq!(ttl.hints, vec![("o".to_string(), 86_400_000), ("p".to_string(), 43_200_000)]);
        assert_eq!(state_ttl_of(&BTreeMap::new(), "SELECT /* a comment */ 1")?, StateTtl::default());
        assert!(state_ttl_of(&BTreeMap::new(), "SELECT /*+ BROADCAST(o) */ 1").is_err());
        assert!(state_ttl_of(&BTreeMap::new(), "SELECT /*+ STATE_TTL('o' = 'soon') */ 1").is_err());
        Ok(())
    }
}

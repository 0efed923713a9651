//! Weir's SQL dialect: Flink SQL's DDL and commands on top of sqlparser, Postgres habits kept.
//!
//! Statements sqlparser does not know (Flink's `CREATE TABLE` with `WATERMARK FOR`, computed
//! columns and `WITH` options; `CREATE MATERIALIZED VIEW ... [EMIT ON WINDOW CLOSE]`; `FLUSH`;
//! `SHOW JOBS`; `STOP JOB`; Flink's quoted `SET 'k' = 'v'`) are parsed here with sqlparser's
//! token-level parser API; everything else is handed to sqlparser whole.
//!
//! Syntax errors carry the 1-based character position Postgres reports.

use std::collections::BTreeMap;

use sqlparser::ast::{DataType, Expr, Ident, ObjectName, Query, Statement};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{Result, WeirError};

/// One column of `CREATE TABLE`.
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    pub name: String,
    /// The declared type; `None` for a computed column.
    pub data_type: Option<DataType>,
    pub not_null: bool,
    /// `name AS expr`.
    pub computed: Option<Expr>,
    /// `METADATA [FROM 'key'] [VIRTUAL]`: the metadata key (the column name if not given).
    pub metadata: Option<String>,
    /// `VIRTUAL` after `METADATA`: read, never written (Flink's; Weir writes no metadata column).
    pub is_virtual: bool,
}

/// `CREATE TABLE` in Flink's form.
#[derive(Debug, Clone)]
pub struct CreateTable {
    pub name: String,
    pub if_not_exists: bool,
    /// `CREATE TEMPORARY TABLE` (or `TEMP`, or `CREATE TABLE pg_temp.t`): the session's only
    /// ([`crate::sql::temporary_tables`]).
    pub temporary: bool,
    pub columns: Vec<ColumnSpec>,
    pub primary_key: Vec<String>,
    /// `WATERMARK FOR column AS expr`.
    pub watermark: Option<(String, Expr)>,
    /// `WITH ('k' = 'v', ...)`.
    pub options: BTreeMap<String, String>,
    /// `LIKE source ..`: the columns (and more) of another table ([`crate::sql::create_table_like`]).
    pub like: Option<TableLike>,
}

/// A change of a table's schema by Flink's `ALTER TABLE` (Flink 1.17+'s grammar): what `ADD` or
/// `MODIFY` declares is read as `CREATE TABLE` reads its column list (columns, `PRIMARY KEY
/// (..) NOT ENFORCED`, `WATERMARK FOR c AS expr`), one item or a parenthesized list.
#[derive(Debug, Clone)]
pub enum SchemaChange {
    Add(Box<CreateTable>),
    Modify(Box<CreateTable>),
    DropWatermark,
    DropPrimaryKey,
    /// `DROP c`, `DROP (c, d)`, Postgres's `DROP [COLUMN] [IF EXISTS] c [, DROP ..]`: each
    /// column, and whether its absence is skipped (`IF EXISTS`).
    DropColumns(Vec<(String, bool)>),
}

/// `LIKE source` of `CREATE TABLE`: Flink's, after the column list and `WITH` (`LIKE orders
/// (EXCLUDING OPTIONS)`), or Postgres's, in the column list (`(LIKE orders INCLUDING ALL, x INT)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLike {
    pub source: String,
    /// Postgres's form: where in the column list its columns go (the number of columns before
    /// it); `None` for Flink's.
    pub at: Option<usize>,
    /// The like options in order, each a strategy (`INCLUDING`, `EXCLUDING`, `OVERWRITING`) and
    /// a feature (`ALL`, `OPTIONS`, `INDEXES`, ...), in capitals.
    pub options: Vec<(String, String)>,
}

/// `CREATE TABLE .. AS query`: Flink's CTAS (a connector table and the job that writes the
/// query's rows into it) and Postgres's (a plain table filled once with them); executed by
/// [`crate::sql::create_table_as`].
#[derive(Debug, Clone)]
pub struct CreateTableAs {
    /// Its name, `IF NOT EXISTS`, `TEMPORARY`, the `PRIMARY KEY` and `WATERMARK` declared before
    /// `AS` (Flink's), and the `WITH` options; no columns: they are the query's.
    pub table: CreateTable,
    /// Postgres's `CREATE TABLE t (a, b) AS ..`: new names for the query's first columns.
    pub column_names: Vec<String>,
    pub query: Box<Query>,
    /// `false` after Postgres's `WITH NO DATA`: the table is created empty, and no job starts.
    pub with_data: bool,
}

/// What `SHOW` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowList {
    Tables,
    Views,
    MaterializedViews,
    Jobs,
    /// `SHOW FUNCTIONS` (Flink): every function a query can call.
    Functions,
    /// `SHOW USER FUNCTIONS` (Flink): the user-defined ones, of which Weir has none.
    UserFunctions,
    /// `SHOW CATALOGS` (Flink): Weir's one, [`DEFAULT_CATALOG`].
    Catalogs,
    /// `SHOW DATABASES` (Flink): Weir's one, [`DEFAULT_DATABASE`].
    Databases,
    /// `SHOW CURRENT CATALOG`.
    CurrentCatalog,
    /// `SHOW CURRENT DATABASE`.
    CurrentDatabase,
}

/// The name of Weir's one catalog as Flink's statements see it (`SHOW CATALOGS`, `USE CATALOG`):
/// Flink's default catalog's.
pub const DEFAULT_CATALOG: &str = "default_catalog";

/// The name of Weir's one database as Flink's statements see it (`SHOW DATABASES`, `USE`):
/// Flink's default database's. Postgres's schema `public` names it too.
pub const DEFAULT_DATABASE: &str = "default_database";

/// Whether `name` (`[catalog.]database`, as written) names Weir's one database.
fn is_default_database(name: &ObjectName) -> bool {
    let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(ident).collect();
    match parts.as_slice() {
        [db] => db == DEFAULT_DATABASE || db == "public",
        [catalog, db] => catalog == DEFAULT_CATALOG && (db == DEFAULT_DATABASE || db == "public"),
        _ => false,
    }
}

/// `[NOT] LIKE | ILIKE 'pattern'` after `SHOW [USER] FUNCTIONS`, `SHOW TABLES`, `SHOW VIEWS` or
/// `SHOW MATERIALIZED VIEWS` (Flink's filter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowLike {
    pub not: bool,
    /// ILIKE: case-insensitive.
    pub ilike: bool,
    /// SQL's LIKE pattern: `%` any text, `_` one character.
    pub pattern: String,
}

impl ShowLike {
    /// Whether `name` passes the filter.
    pub fn accepts(&self, name: &str) -> bool {
        let (name, pattern) = if self.ilike {
            (name.to_lowercase(), self.pattern.to_lowercase())
        } else {
            (name.to_string(), self.pattern.clone())
        };
        like(&name.chars().collect::<Vec<_>>(), &pattern.chars().collect::<Vec<_>>()) != self.not
    }
}

/// SQL LIKE with Flink's escape character, a backslash (`ShowLikeOperator`): `%` matches any
/// run of characters, `_` one, `\%`, `\_` and `\\` themselves.
fn like(text: &[char], pattern: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some(('%', rest)) => (0..=text.len()).any(|i| like(&text[i..], rest)),
        Some(('_', rest)) => !text.is_empty() && like(&text[1..], rest),
        Some(('\\', [c, rest @ ..])) => text.first() == Some(c) && like(&text[1..], rest),
        Some((c, rest)) => text.first() == Some(c) && like(&text[1..], rest),
    }
}

/// The kind named by `DROP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    Table,
    View,
    /// `DROP TEMPORARY VIEW` (Flink) or `DROP TEMP VIEW`: only a temporary view of the session.
    TemporaryView,
    /// `DROP TEMPORARY TABLE` (Flink) or `DROP TEMP TABLE`: only a temporary table of the
    /// session ([`crate::sql::temporary_tables`]).
    TemporaryTable,
    MaterializedView,
}

/// A running job, as a statement names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRef {
    /// A materialized view's name.
    View(String),
    /// A job id (`SHOW JOBS`), for an `INSERT INTO` job or a view's.
    Id(String),
}

/// `SUBSCRIBE [TO] relation | (query) [WITH (SNAPSHOT = bool, PROGRESS [= bool])]`
/// (Materialize's syntax): the relation's committed changes as they happen
/// ([`crate::sql::subscribe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// The table or materialized view followed; empty for a query.
    pub relation: String,
    /// The query followed (`SUBSCRIBE (SELECT ...)`): it runs as a temporary materialized
    /// view for as long as the subscription lasts.
    pub query: Option<Box<Query>>,
    /// First the relation's rows at the current epoch (default true).
    pub snapshot: bool,
    /// Also a progress row after each epoch (default false).
    pub progress: bool,
}

/// What a cursor reads.
#[derive(Debug, Clone)]
pub enum CursorQuery {
    Select(Box<Query>),
    Subscribe(Subscribe),
}

/// A parsed statement.
#[derive(Debug, Clone)]
pub enum WeirStatement {
    /// `SUBSCRIBE ...`.
    Subscribe(Subscribe),
    /// `COPY (SUBSCRIBE ...) TO STDOUT`: the changes as COPY text, row by row.
    CopySubscribe(Subscribe),
    /// `DECLARE name CURSOR [WITH HOLD | WITHOUT HOLD] FOR query | SUBSCRIBE ...`.
    DeclareCursor { name: String, hold: bool, query: CursorQuery },
    /// `FETCH [FORWARD] [n | ALL | NEXT] [FROM | IN] name [WITH (timeout = 'duration')]`:
    /// `count` none for ALL.
    Fetch { name: String, count: Option<u64>, timeout_ms: Option<u64> },
    /// `CLOSE name` or `CLOSE ALL` (none).
    CloseCursor(Option<String>),
    CreateTable(Box<CreateTable>),
    CreateTableAs(Box<CreateTableAs>),
    /// `ALTER TABLE [IF EXISTS] name SET ('k' = 'v', ...)` or `RESET ('k', ...)` (Flink's):
    /// a connector table's options ([`crate::sql::ddl::alter_table_options`]).
    AlterTableOptions { name: String, if_exists: bool, set: BTreeMap<String, String>, reset: Vec<String> },
    CreateMaterializedView { name: String, if_not_exists: bool, query: Box<Query>, emit_on_window_close: bool },
    Drop { kind: DropKind, names: Vec<String>, if_exists: bool, cascade: bool },
    Flush,
    /// `SHOW ...`, with a list's optional LIKE filter (not `SHOW JOBS`').
    Show(ShowList, Option<ShowLike>),
    ShowCreate(String),
    /// `DESCRIBE t`, or Flink's `SHOW COLUMNS FROM t [[NOT] LIKE 'p']` (its rows filtered by
    /// column name).
    Describe(String, Option<ShowLike>),
    /// Flink's `USE CATALOG c` (`catalog`) or `USE db`: Weir's one catalog and database only.
    Use { catalog: bool, name: String },
    /// `ALTER TABLE | VIEW [IF EXISTS] name RENAME TO to` (Flink's and Postgres's;
    /// [`crate::sql::ddl::rename_relation`]): `view` for ALTER VIEW.
    Rename { view: bool, name: String, if_exists: bool, to: String },
    /// Flink's `ALTER TABLE [IF EXISTS] name ADD | MODIFY | DROP ..` of its schema
    /// ([`crate::sql::ddl::alter_schema`]).
    AlterSchema { name: String, if_exists: bool, change: SchemaChange },
    /// `SET [SESSION | LOCAL] key = value`; the value as text; `local` for `SET LOCAL` (until
    /// the transaction block ends, as in Postgres).
    Set { key: String, value: String, local: bool },
    /// `SHOW key`.
    ShowVariable(String),
    /// `RESET [key]`; `None` resets everything.
    Reset(Option<String>),
    /// `STOP JOB 'id'`; `WITH SAVEPOINT` suspends it instead ([`crate::engine::suspend`]).
    StopJob { id: String, savepoint: bool },
    /// `ALTER MATERIALIZED VIEW name SUSPEND`.
    Suspend(JobRef),
    /// `RESUME JOB 'id'` or `ALTER MATERIALIZED VIEW name RESUME`.
    Resume(JobRef),
    /// `EXPLAIN` of a statement.
    Explain(Box<WeirStatement>),
    /// `EXPLAIN ANALYZE [MATERIALIZED VIEW] name` or `EXPLAIN ANALYZE JOB 'id'`: a running
    /// job's plan with its operators' figures.
    ExplainAnalyze(JobRef),
    /// Anything sqlparser parses: SELECT, INSERT, UPDATE, DELETE, CREATE VIEW, BEGIN, ...
    Sql(Box<Statement>),
}

/// Where the `WITH (...)` options of `CREATE TABLE` text `sql` start (byte offset): its last
/// `WITH` outside parentheses; `None` when it has none.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn create_table_options_at(sql: &str) -> Result<Option<usize>> {
    let (tokens, starts) = located_tokens(sql)?;
    let mut depth = 0i32;
    let mut at = None;
    for (t, start) in tokens.iter().zip(starts) {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if depth == 0 && w.quote_style.is_none() && w.keyword == Keyword::WITH => at = Some(start),
            _ => {}
        }
    }
    Ok(at)
}

/// The tokens of `sql` with the byte offset each starts at.
///
/// # Errors
/// `Syntax` with the position when the text cannot be tokenized.
fn located_tokens(sql: &str) -> Result<(Vec<sqlparser::tokenizer::TokenWithSpan>, Vec<usize>)> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| WeirError::syntax(e.message.clone(), Some(offset_of(sql, e.location.line, e.location.column) + 1)))?;
    let line_starts = line_starts(sql);
    let starts = tokens
        .iter()
        .map(|t| {
            let line = line_starts.get((t.span.start.line as usize).saturating_sub(1)).copied().unwrap_or(sql.len());
            char_offset_to_byte(sql, line, t.span.start.column.saturating_sub(1) as usize)
        })
        .collect();
    Ok((tokens, starts))
}

/// The tokens of `sql`, each with its text as written (a token's `Display` is not: a string
/// literal `'a''b'` prints as `'a'b'`), for the token-level rewrites that copy what they do not
/// change.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized.
pub fn tokens_with_text(sql: &str) -> Result<Vec<(Token, &str)>> {
    let (tokens, starts) = located_tokens(sql)?;
    Ok(tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let end = starts.get(i + 1).copied().unwrap_or(sql.len());
            (t.token, sql.get(starts[i]..end).unwrap_or_default())
        })
        .collect())
}

/// Splits `sql` into statements at top-level semicolons (not inside strings, identifiers or
/// comments). Statements that are only whitespace or comments are dropped.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized (an unterminated string, say).
pub fn split_statements(sql: &str) -> Result<Vec<String>> {
    let (tokens, starts) = located_tokens(sql)?;
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut has_content = false;
    for (t, &end) in tokens.iter().zip(&starts) {
        match &t.token {
            Token::SemiColon => {
                if has_content {
                    out.push(sql[start..end].trim().to_string());
                }
                start = end + 1;
                has_content = false;
            }
            Token::Whitespace(_) | Token::EOF => {}
            _ => has_content = true,
        }
    }
    if has_content {
        out.push(sql[start..].trim().to_string());
    }
    Ok(out)
}

/// How a statement relates to a Flink statement set (`BEGIN STATEMENT SET; INSERT ...;
/// INSERT ...; END;`, or `EXECUTE STATEMENT SET BEGIN INSERT ...; INSERT ...; END;`, which a
/// client splitting at semicolons sends in the same pieces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementSetPart {
    /// `BEGIN STATEMENT SET`, or `EXECUTE STATEMENT SET BEGIN` followed by the set's first
    /// statement (its text), if any.
    Begin(Option<String>),
    /// `END`: runs the set (outside one, Postgres's `END`, a COMMIT).
    End,
    /// Any other statement.
    Other,
}

/// Which [`StatementSetPart`] `sql` is, by its first words (case-insensitive, comments and
/// whitespace skipped).
pub fn statement_set_part(sql: &str) -> StatementSetPart {
    // Every statement comes here: most are told apart by their first word without tokenizing
    // (a long INSERT ... VALUES would be tokenized twice).
    let head = sql.trim_start();
    let starts = |w: &str| head.get(..w.len()).is_some_and(|h| h.eq_ignore_ascii_case(w));
    if !(starts("begin") || starts("execute") || starts("end") || starts("--") || starts("/*")) {
        return StatementSetPart::Other;
    }
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() else { return StatementSetPart::Other };
    let significant: Vec<&TokenWithSpan> =
        tokens.iter().filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF | Token::SemiColon)).collect();
    let word = |i: usize, w: &str| {
        significant.get(i).is_some_and(|t| matches!(&t.token, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w)))
    };
    if word(0, "BEGIN") && word(1, "STATEMENT") && word(2, "SET") && significant.len() == 3 {
        return StatementSetPart::Begin(None);
    }
    if word(0, "EXECUTE") && word(1, "STATEMENT") && word(2, "SET") && word(3, "BEGIN") {
        let first = significant.get(4).map(|t| {
            let start = line_starts(sql).get((t.span.start.line as usize).saturating_sub(1)).copied().unwrap_or(sql.len());
            sql[char_offset_to_byte(sql, start, t.span.start.column.saturating_sub(1) as usize)..].trim().to_string()
        });
        return StatementSetPart::Begin(first);
    }
    if word(0, "END") && significant.len() == 1 {
        return StatementSetPart::End;
    }
    StatementSetPart::Other
}

fn line_starts(sql: &str) -> Vec<usize> {
    std::iter::once(0).chain(sql.match_indices('\n').map(|(i, _)| i + 1)).collect()
}

fn char_offset_to_byte(sql: &str, line_start: usize, chars: usize) -> usize {
    sql[line_start..].char_indices().nth(chars).map(|(i, _)| line_start + i).unwrap_or(sql.len())
}

/// The 0-based character offset of a 1-based line and column.
fn offset_of(sql: &str, line: u64, column: u64) -> usize {
    let starts = line_starts(sql);
    let start = starts.get((line as usize).saturating_sub(1)).copied().unwrap_or(0);
    sql[..start].chars().count() + column.saturating_sub(1) as usize
}

/// The 1-based character position of the first identifier in `sql` that names `name` (an
/// unquoted word folds to lower case, as Postgres folds it; a quoted one must match exactly),
/// outside strings and comments, or of the qualifiers before it (`t.x`, `public.t`): where
/// Postgres points an unknown column's or relation's error, at the start of the whole name.
pub fn position_of_name(sql: &str, name: &str) -> Option<usize> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location().ok()?;
    let mut at = tokens.iter().position(|t| match &t.token {
        Token::Word(w) => {
            (w.quote_style.is_none() && w.value.to_lowercase() == name) || (w.quote_style.is_some() && w.value == name)
        }
        _ => false,
    })?;
    while at >= 2 && tokens[at - 1].token == Token::Period && matches!(tokens[at - 2].token, Token::Word(_)) {
        at -= 2;
    }
    Some(offset_of(sql, tokens[at].span.start.line, tokens[at].span.start.column) + 1)
}

/// Turns a sqlparser error into a syntax error with the position its text names.
pub fn syntax_error(sql: &str, e: ParserError) -> WeirError {
    let msg = match e {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
        ParserError::RecursionLimitExceeded => "statement nested too deeply".to_string(),
    };
    let position = msg.rfind(" at Line: ").and_then(|i| {
        let rest = &msg[i + " at Line: ".len()..];
        let (line, rest) = rest.split_once(", Column: ")?;
        let col: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        Some(offset_of(sql, line.trim().parse().ok()?, col.parse().ok()?) + 1)
    });
    // Errors at the end of the input carry no location; Postgres points just past the end.
    let position = position.or_else(|| msg.contains("found: EOF").then(|| sql.chars().count() + 1));
    let clean = match msg.rfind(" at Line: ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    WeirError::syntax(clean, position)
}

/// Parses one statement.
///
/// # Errors
/// `Syntax` with a position.
pub fn parse_statement(sql: &str) -> Result<WeirStatement> {
    // `EMIT ON WINDOW CLOSE` ends a materialized view's query; sqlparser would take EMIT for an
    // alias, so it is cut off the text first.
    let (body, eowc) = strip_emit_on_window_close(sql);
    let body = crate::sql::time_units::rewrite_time_units(body)?;
    let body = crate::sql::json_clauses::rewrite_json_clauses(&body)?;
    let body = crate::sql::json_clauses::rewrite_json_query_clauses(&body)?;
    let body = crate::sql::json_clauses::strip_json_object_keys(&body)?;
    let body = crate::sql::json_clauses::rewrite_is_json(&body)?;
    let body = crate::sql::window_tvf::rewrite_window_tvfs(&body)?;
    let body = crate::sql::temporal::rewrite_system_time(&body)?;
    let body = crate::sql::types::rewrite_nested_types(&body)?;
    let body = crate::sql::types::rewrite_wide_number_literals(&body)?;
    let dialect = GenericDialect {};
    let mut p = Parser::new(&dialect).try_with_sql(&body).map_err(|e| syntax_error(sql, e))?;
    let mut stmt = parse_weir(&mut p, sql)?;
    if eowc {
        match &mut stmt {
            WeirStatement::CreateMaterializedView { emit_on_window_close, .. } => *emit_on_window_close = true,
            WeirStatement::Explain(inner) => match inner.as_mut() {
                WeirStatement::CreateMaterializedView { emit_on_window_close, .. } => *emit_on_window_close = true,
                _ => return Err(WeirError::syntax("EMIT ON WINDOW CLOSE ends a CREATE MATERIALIZED VIEW", None)),
            },
            _ => return Err(WeirError::syntax("EMIT ON WINDOW CLOSE ends a CREATE MATERIALIZED VIEW", None)),
        }
    }
    // Only a trailing semicolon may follow.
    while p.consume_token(&Token::SemiColon) {}
    let next = p.peek_token();
    if next.token != Token::EOF {
        return Err(WeirError::syntax(
            format!("unexpected '{}' after the end of the statement", next.token),
            Some(offset_of(sql, next.span.start.line, next.span.start.column) + 1),
        ));
    }
    reject_trailing_comma(sql)?;
    fetch_as_limit(&mut stmt)?;
    Ok(stmt)
}

/// Every query of `stmt` with the SQL standard's `[OFFSET n ROWS] FETCH FIRST m ROWS ONLY`
/// (Postgres's and Flink's) as `LIMIT m [OFFSET n]`, which the planners take.
///
/// # Errors
/// `Unsupported` for `WITH TIES` and `PERCENT`; `Syntax` for a query with both `LIMIT` and
/// `FETCH` (Postgres's refusal).
fn fetch_as_limit(stmt: &mut WeirStatement) -> Result<()> {
    use sqlparser::ast::{LimitClause, VisitMut, VisitorMut};
    use std::ops::ControlFlow;
    struct FetchAsLimit;
    impl VisitorMut for FetchAsLimit {
        type Break = WeirError;
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<WeirError> {
            let Some(fetch) = query.fetch.take() else { return ControlFlow::Continue(()) };
            if fetch.with_ties || fetch.percent {
                let what = if fetch.with_ties { "WITH TIES" } else { "PERCENT" };
                return ControlFlow::Break(WeirError::unsupported(format!(
                    "FETCH FIRST .. {what}: use FETCH FIRST n ROWS ONLY (or LIMIT n), or RANK() <= n for ties"
                )));
            }
            // `FETCH FIRST ROW ONLY` is one row.
            let quantity = fetch.quantity.unwrap_or_else(|| Expr::value(sqlparser::ast::Value::Number("1".into(), false)));
            query.limit_clause = match query.limit_clause.take() {
                None => Some(LimitClause::LimitOffset { limit: Some(quantity), offset: None, limit_by: vec![] }),
                Some(LimitClause::LimitOffset { limit: None, offset, limit_by }) => {
                    Some(LimitClause::LimitOffset { limit: Some(quantity), offset, limit_by })
                }
                Some(_) => return ControlFlow::Break(WeirError::syntax("a query takes LIMIT or FETCH FIRST, not both", None)),
            };
            ControlFlow::Continue(())
        }
    }
    let visited = match stmt {
        WeirStatement::Sql(s) => s.visit(&mut FetchAsLimit),
        WeirStatement::CreateMaterializedView { query, .. } | WeirStatement::DeclareCursor { query: CursorQuery::Select(query), .. } => {
            query.visit(&mut FetchAsLimit)
        }
        WeirStatement::CreateTableAs(ctas) => ctas.query.visit(&mut FetchAsLimit),
        WeirStatement::Subscribe(sub) | WeirStatement::CopySubscribe(sub) | WeirStatement::DeclareCursor { query: CursorQuery::Subscribe(sub), .. } => {
            match &mut sub.query {
                Some(query) => query.visit(&mut FetchAsLimit),
                None => ControlFlow::Continue(()),
            }
        }
        WeirStatement::Explain(inner) => return fetch_as_limit(inner),
        _ => ControlFlow::Continue(()),
    };
    match visited {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Refuses a comma that ends a select list (`SELECT id, FROM t`, `SELECT 1,`), which
/// sqlparser's generic dialect accepts and Postgres does not: a syntax error at `FROM` (or at
/// the end) as Postgres gives it.
fn reject_trailing_comma(sql: &str) -> Result<()> {
    // Most statements have no comma before `FROM`, a comment or the end: no need to tokenize.
    let suspect = sql.match_indices(',').any(|(i, _)| {
        let next = sql[i + 1..].trim_start().chars().next();
        matches!(next, None | Some('f' | 'F' | '-' | '/' | ';'))
    });
    if !suspect {
        return Ok(());
    }
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() else { return Ok(()) };
    let mut after_comma = false;
    for t in tokens.iter().filter(|t| !matches!(t.token, Token::Whitespace(_))) {
        let from = matches!(&t.token, Token::Word(w) if w.keyword == Keyword::FROM && w.quote_style.is_none());
        if after_comma && (from || t.token == Token::SemiColon) {
            return Err(WeirError::syntax(
                format!("unexpected '{}' after a comma: a select list does not end with a comma", t.token),
                Some(offset_of(sql, t.span.start.line, t.span.start.column) + 1),
            ));
        }
        after_comma = t.token == Token::Comma;
    }
    if after_comma {
        return Err(WeirError::syntax(
            "unexpected end of input after a comma: a select list does not end with a comma",
            Some(sql.chars().count() + 1),
        ));
    }
    Ok(())
}

fn parse_weir(p: &mut Parser<'_>, sql: &str) -> Result<WeirStatement> {
    let err = |e| syntax_error(sql, e);
    if is_word(p, 0, "EXPLAIN") && is_word(p, 1, "ANALYZE") {
        p.next_token();
        p.next_token();
        if is_word(p, 0, "JOB") {
            p.next_token();
            return Ok(WeirStatement::ExplainAnalyze(JobRef::Id(p.parse_literal_string().map_err(err)?)));
        }
        if is_word(p, 0, "MATERIALIZED") && is_word(p, 1, "VIEW") {
            p.next_token();
            p.next_token();
        } else if is_word(p, 0, "SELECT") || is_word(p, 0, "WITH") || is_word(p, 0, "INSERT") || is_word(p, 0, "CREATE") {
            let at = p.peek_token().span.start;
            return Err(WeirError::syntax(
                "EXPLAIN ANALYZE shows a running job: EXPLAIN ANALYZE MATERIALIZED VIEW name, or EXPLAIN ANALYZE JOB 'id' (SHOW JOBS lists them)",
                Some(offset_of(sql, at.line, at.column) + 1),
            ));
        }
        let name = p.parse_object_name(false).map_err(err)?;
        return Ok(WeirStatement::ExplainAnalyze(JobRef::View(object_name(&name))));
    }
    if is_word(p, 0, "EXPLAIN") && (is_word(p, 1, "CREATE") || is_word(p, 1, "SELECT") || is_word(p, 1, "INSERT") || is_word(p, 1, "WITH")) {
        p.next_token();
        // EXPLAIN of a statement we parse ourselves (CREATE MATERIALIZED VIEW) or a query.
        if is_word(p, 0, "CREATE") {
            return Ok(WeirStatement::Explain(Box::new(parse_weir(p, sql)?)));
        }
        let stmt = p.parse_statement().map_err(err)?;
        return Ok(WeirStatement::Explain(Box::new(WeirStatement::Sql(Box::new(stmt)))));
    }
    // Postgres's `ABORT [WORK | TRANSACTION]`, ROLLBACK's other name.
    if is_word(p, 0, "ABORT") {
        p.next_token();
        if is_word(p, 0, "WORK") || is_word(p, 0, "TRANSACTION") {
            p.next_token();
        }
        p.expect_token(&Token::EOF).map_err(err)?;
        return Ok(WeirStatement::Sql(Box::new(Statement::Rollback { chain: false, savepoint: None })));
    }
    let temporary = is_word(p, 1, "TEMPORARY") || is_word(p, 1, "TEMP");
    if is_word(p, 0, "CREATE") && (is_word(p, 1, "TABLE") || temporary && is_word(p, 2, "TABLE")) {
        p.next_token();
        p.next_token();
        if temporary {
            p.next_token();
        }
        return parse_create_table(p, sql, temporary);
    }
    if is_word(p, 0, "ALTER") && (is_word(p, 1, "TABLE") || is_word(p, 1, "VIEW")) && renames(p) {
        p.next_token();
        let view = p.next_token().to_string().eq_ignore_ascii_case("VIEW");
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = object_name(&p.parse_object_name(false).map_err(err)?);
        p.next_token();
        p.next_token();
        let target = p.parse_object_name(false).map_err(err)?;
        // `db.t2`: only Weir's one database (Postgres refuses a schema there; Flink's has to be
        // the table's).
        if target.0.len() > 1 && !is_default_database(&ObjectName(target.0[..target.0.len() - 1].to_vec())) {
            return Err(WeirError::plan(format!(
                "RENAME TO {target}: a table stays in its database ({DEFAULT_CATALOG}.{DEFAULT_DATABASE})"
            )));
        }
        let to = object_name(&target);
        return Ok(WeirStatement::Rename { view, name, if_exists, to });
    }
    if is_word(p, 0, "ALTER") && is_word(p, 1, "TABLE") && changes_schema(p) {
        p.next_token();
        p.next_token();
        return parse_schema_change(p, sql);
    }
    if is_word(p, 0, "ALTER") && is_word(p, 1, "TABLE") && alters_options(p) {
        p.next_token();
        p.next_token();
        return parse_alter_table_options(p, sql);
    }
    if is_word(p, 0, "CREATE") && is_word(p, 1, "MATERIALIZED") && is_word(p, 2, "VIEW") {
        for _ in 0..3 {
            p.next_token();
        }
        let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        let name = object_name(&p.parse_object_name(false).map_err(err)?);
        // `(a, b)`: the view's column names (Postgres), put into the query.
        let mut columns = Vec::new();
        if p.consume_token(&Token::LParen) {
            columns = p.parse_comma_separated(|p| p.parse_identifier()).map_err(err)?;
            p.expect_token(&Token::RParen).map_err(err)?;
        }
        p.expect_keyword_is(Keyword::AS).map_err(err)?;
        let query = p.parse_query().map_err(err)?;
        let query = Box::new(crate::sql::pg_compat::with_view_column_names(&query, &name, &columns)?);
        return Ok(WeirStatement::CreateMaterializedView { name, if_not_exists, query, emit_on_window_close: false });
    }
    let drop_temporary = is_word(p, 0, "DROP") && (is_word(p, 1, "TEMPORARY") || is_word(p, 1, "TEMP"));
    if is_word(p, 0, "DROP") && (is_word(p, 1, "TABLE") || is_word(p, 1, "VIEW") || is_word(p, 1, "MATERIALIZED") || drop_temporary) {
        p.next_token();
        let kind = if drop_temporary {
            p.next_token();
            match p.parse_keyword(Keyword::TABLE) {
                true => DropKind::TemporaryTable,
                false => {
                    p.expect_keyword_is(Keyword::VIEW).map_err(err)?;
                    DropKind::TemporaryView
                }
            }
        } else if p.parse_keyword(Keyword::TABLE) {
            DropKind::Table
        } else if p.parse_keyword(Keyword::VIEW) {
            DropKind::View
        } else {
            p.expect_keyword_is(Keyword::MATERIALIZED).map_err(err)?;
            p.expect_keyword_is(Keyword::VIEW).map_err(err)?;
            DropKind::MaterializedView
        };
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let names = p
            .parse_comma_separated(|p| p.parse_object_name(false))
            .map_err(err)?
            .iter()
            .map(object_name)
            .collect();
        let cascade = p.parse_keyword(Keyword::CASCADE);
        if !cascade {
            let _ = p.parse_keyword(Keyword::RESTRICT);
        }
        return Ok(WeirStatement::Drop { kind, names, if_exists, cascade });
    }
    if is_word(p, 0, "FLUSH") {
        p.next_token();
        return Ok(WeirStatement::Flush);
    }
    if is_word(p, 0, "EXPLAIN") && is_word(p, 1, "PLAN") && is_word(p, 2, "FOR") {
        // Flink's `EXPLAIN PLAN FOR stmt`: `EXPLAIN stmt`.
        for _ in 0..3 {
            p.next_token();
        }
        return Ok(WeirStatement::Explain(Box::new(parse_weir(p, sql)?)));
    }
    if is_word(p, 0, "USE") {
        p.next_token();
        let catalog = is_word(p, 0, "CATALOG");
        if catalog {
            p.next_token();
        }
        let name = p.parse_object_name(false).map_err(err)?;
        let known = match catalog {
            true => name.0.len() == 1 && object_name(&name) == DEFAULT_CATALOG,
            false => is_default_database(&name),
        };
        if !known {
            // Flink's messages.
            return Err(WeirError::plan(match catalog {
                true => format!("A catalog with name [{name}] does not exist (Weir has one: {DEFAULT_CATALOG})."),
                false => format!(
                    "A database with name [{name}] does not exist in the catalog: [{DEFAULT_CATALOG}] (Weir has one: {DEFAULT_DATABASE})."
                ),
            }));
        }
        return Ok(WeirStatement::Use { catalog, name: object_name(&name) });
    }
    if is_word(p, 0, "SHOW") && is_word(p, 1, "COLUMNS") {
        // Flink's `SHOW COLUMNS FROM | IN t [[NOT] LIKE 'p']`.
        p.next_token();
        p.next_token();
        if !(p.parse_keyword(Keyword::FROM) || p.parse_keyword(Keyword::IN)) {
            return Err(unexpected(p, sql, "FROM or IN"));
        }
        let name = object_name(&p.parse_object_name(false).map_err(err)?);
        let like = parse_show_like(p, sql)?;
        return Ok(WeirStatement::Describe(name, like));
    }
    if is_word(p, 0, "SHOW") && is_word(p, 1, "CATALOGS") || is_word(p, 1, "DATABASES") || is_word(p, 1, "CURRENT") && (is_word(p, 2, "CATALOG") || is_word(p, 2, "DATABASE")) {
        let list = match (is_word(p, 1, "CURRENT"), is_word(p, 1, "CATALOGS") || is_word(p, 2, "CATALOG")) {
            (false, true) => ShowList::Catalogs,
            (false, false) => ShowList::Databases,
            (true, true) => ShowList::CurrentCatalog,
            (true, false) => ShowList::CurrentDatabase,
        };
        let words = if list == ShowList::Catalogs || list == ShowList::Databases { 2 } else { 3 };
        for _ in 0..words {
            p.next_token();
        }
        let like = match words {
            2 => parse_show_like(p, sql)?,
            _ => None,
        };
        return Ok(WeirStatement::Show(list, like));
    }
    if is_word(p, 0, "SHOW") {
        let list = if is_word(p, 1, "TABLES") {
            Some((ShowList::Tables, 2))
        } else if is_word(p, 1, "VIEWS") {
            Some((ShowList::Views, 2))
        } else if is_word(p, 1, "MATERIALIZED") && is_word(p, 2, "VIEWS") {
            Some((ShowList::MaterializedViews, 3))
        } else if is_word(p, 1, "JOBS") {
            Some((ShowList::Jobs, 2))
        } else if is_word(p, 1, "FUNCTIONS") {
            Some((ShowList::Functions, 2))
        } else if is_word(p, 1, "USER") && is_word(p, 2, "FUNCTIONS") {
            Some((ShowList::UserFunctions, 3))
        } else {
            None
        };
        if let Some((list, n)) = list {
            for _ in 0..n {
                p.next_token();
            }
            let mut like = None;
            if list != ShowList::Jobs {
                // Flink's `SHOW TABLES FROM | IN [catalog.]database`: Weir's one database.
                if matches!(list, ShowList::Tables | ShowList::Views | ShowList::MaterializedViews)
                    && (p.parse_keyword(Keyword::FROM) || p.parse_keyword(Keyword::IN))
                {
                    let database = p.parse_object_name(false).map_err(err)?;
                    if !is_default_database(&database) {
                        return Err(WeirError::plan(format!(
                            "Database '{database}' does not exist (Weir has one: {DEFAULT_CATALOG}.{DEFAULT_DATABASE})."
                        )));
                    }
                }
                like = parse_show_like(p, sql)?;
            }
            return Ok(WeirStatement::Show(list, like));
        }
        if is_word(p, 1, "CREATE") {
            p.next_token();
            p.next_token();
            if !(p.parse_keyword(Keyword::TABLE) || p.parse_keyword(Keyword::VIEW) || p.parse_keywords(&[Keyword::MATERIALIZED, Keyword::VIEW])) {
                return Err(unexpected(p, sql, "TABLE, VIEW or MATERIALIZED VIEW"));
            }
            let name = object_name(&p.parse_object_name(false).map_err(err)?);
            return Ok(WeirStatement::ShowCreate(name));
        }
        // Postgres's two-word spellings of settings.
        for (words, key) in [(&["TIME", "ZONE"][..], "timezone"), (&["TRANSACTION", "ISOLATION", "LEVEL"][..], "transaction_isolation")] {
            if words.iter().enumerate().all(|(i, w)| is_word(p, i + 1, w)) {
                for _ in 0..=words.len() {
                    p.next_token();
                }
                return Ok(WeirStatement::ShowVariable(key.into()));
            }
        }
        p.next_token();
        let key = parse_setting_name(p, sql)?;
        return Ok(WeirStatement::ShowVariable(key));
    }
    if is_word(p, 0, "SUBSCRIBE") {
        p.next_token();
        return parse_subscribe(p, sql).map(WeirStatement::Subscribe);
    }
    if is_word(p, 0, "COPY") && p.peek_nth_token(1).token == Token::LParen && is_word(p, 2, "SUBSCRIBE") {
        for _ in 0..3 {
            p.next_token();
        }
        let subscribe = parse_subscribe(p, sql)?;
        p.expect_token(&Token::RParen).map_err(err)?;
        p.expect_keyword_is(Keyword::TO).map_err(err)?;
        if !is_word(p, 0, "STDOUT") {
            return Err(unexpected(p, sql, "STDOUT"));
        }
        p.next_token();
        if p.parse_keyword(Keyword::WITH) || p.peek_token().token == Token::LParen {
            return Err(WeirError::unsupported("COPY (SUBSCRIBE ...) TO STDOUT takes no options: it writes text format"));
        }
        return Ok(WeirStatement::CopySubscribe(subscribe));
    }
    if is_word(p, 0, "DECLARE") {
        p.next_token();
        let name = parse_cursor_name(p, sql)?;
        // Postgres's options: BINARY, ASENSITIVE/INSENSITIVE, [NO] SCROLL; results are sent as
        // FETCH's Bind asks whatever they say.
        while is_word(p, 0, "BINARY") || is_word(p, 0, "INSENSITIVE") || is_word(p, 0, "ASENSITIVE") || is_word(p, 0, "SCROLL")
            || (is_word(p, 0, "NO") && is_word(p, 1, "SCROLL"))
        {
            p.next_token();
        }
        if !p.parse_keyword(Keyword::CURSOR) {
            return Err(unexpected(p, sql, "CURSOR"));
        }
        let hold = if p.parse_keywords(&[Keyword::WITH, Keyword::HOLD]) {
            true
        } else {
            let _ = p.parse_keywords(&[Keyword::WITHOUT, Keyword::HOLD]);
            false
        };
        p.expect_keyword_is(Keyword::FOR).map_err(err)?;
        let query = if is_word(p, 0, "SUBSCRIBE") {
            p.next_token();
            CursorQuery::Subscribe(parse_subscribe(p, sql)?)
        } else {
            CursorQuery::Select(p.parse_query().map_err(err)?)
        };
        return Ok(WeirStatement::DeclareCursor { name, hold, query });
    }
    if is_word(p, 0, "FETCH") {
        p.next_token();
        let _ = p.parse_keyword(Keyword::FORWARD);
        let count = match p.peek_token().token {
            Token::Number(n, _) => {
                p.next_token();
                Some(n.parse::<u64>().map_err(|_| unexpected_prev(p, sql, "a row count"))?)
            }
            _ if p.parse_keyword(Keyword::ALL) => None,
            _ if p.parse_keyword(Keyword::NEXT) => Some(1),
            _ => Some(1),
        };
        let _ = p.parse_keyword(Keyword::FROM) || p.parse_keyword(Keyword::IN);
        let name = parse_cursor_name(p, sql)?;
        let mut timeout_ms = None;
        if p.parse_keyword(Keyword::WITH) {
            p.expect_token(&Token::LParen).map_err(err)?;
            let key = parse_setting_name(p, sql)?;
            if key != "timeout" {
                return Err(WeirError::option(format!("FETCH option \"{key}\": the one option is timeout")));
            }
            let _ = p.consume_token(&Token::Eq);
            let value = parse_setting_value(p, sql)?;
            timeout_ms = Some(crate::plan::duration::parse_duration_ms("timeout", &value)? as u64);
            p.expect_token(&Token::RParen).map_err(err)?;
        }
        return Ok(WeirStatement::Fetch { name, count, timeout_ms });
    }
    if is_word(p, 0, "CLOSE") {
        p.next_token();
        if p.parse_keyword(Keyword::ALL) {
            return Ok(WeirStatement::CloseCursor(None));
        }
        return Ok(WeirStatement::CloseCursor(Some(parse_cursor_name(p, sql)?)));
    }
    if is_word(p, 0, "DESCRIBE") || is_word(p, 0, "DESC") {
        p.next_token();
        let name = object_name(&p.parse_object_name(false).map_err(err)?);
        return Ok(WeirStatement::Describe(name, None));
    }
    // Postgres's scopes: SESSION (the default) and LOCAL (until the block ends).
    let scoped = usize::from(is_word(p, 0, "SET") && (is_word(p, 1, "SESSION") || is_word(p, 1, "LOCAL")));
    let local = scoped == 1 && is_word(p, 1, "LOCAL");
    if is_word(p, 0, "SET") && is_word(p, 1 + scoped, "TIME") && is_word(p, 2 + scoped, "ZONE") {
        // Postgres's `SET TIME ZONE 'zone' | LOCAL | DEFAULT | hours`.
        for _ in 0..3 + scoped {
            p.next_token();
        }
        let value = parse_setting_value(p, sql)?;
        return Ok(WeirStatement::Set { key: "timezone".into(), value, local });
    }
    let others = ["TRANSACTION", "CHARACTERISTICS", "AUTHORIZATION", "ROLE"];
    if is_word(p, 0, "SET") && !others.iter().any(|w| is_word(p, 1 + scoped, w)) {
        for _ in 0..1 + scoped {
            p.next_token();
        }
        let key = parse_setting_name(p, sql)?;
        if !(p.consume_token(&Token::Eq) || p.parse_keyword(Keyword::TO)) {
            return Err(unexpected(p, sql, "= or TO"));
        }
        let value = parse_setting_value(p, sql)?;
        return Ok(WeirStatement::Set { key, value, local });
    }
    if is_word(p, 0, "RESET") {
        p.next_token();
        if p.peek_token().token == Token::EOF || p.peek_token().token == Token::SemiColon {
            return Ok(WeirStatement::Reset(None));
        }
        if p.parse_keyword(Keyword::ALL) {
            return Ok(WeirStatement::Reset(None));
        }
        return Ok(WeirStatement::Reset(Some(parse_setting_name(p, sql)?)));
    }
    if is_word(p, 0, "RESUME") && is_word(p, 1, "JOB") {
        p.next_token();
        p.next_token();
        return Ok(WeirStatement::Resume(JobRef::Id(p.parse_literal_string().map_err(err)?)));
    }
    if is_word(p, 0, "ALTER") && is_word(p, 1, "MATERIALIZED") && is_word(p, 2, "VIEW") {
        p.next_token();
        p.next_token();
        p.next_token();
        let name = JobRef::View(object_name(&p.parse_object_name(false).map_err(err)?));
        if is_word(p, 0, "SUSPEND") {
            p.next_token();
            return Ok(WeirStatement::Suspend(name));
        }
        if is_word(p, 0, "RESUME") {
            p.next_token();
            return Ok(WeirStatement::Resume(name));
        }
        if is_word(p, 0, "RENAME") {
            return Err(WeirError::unsupported(format!(
                "renaming materialized view {}: its job runs under its name; create it again under the new one and drop it",
                match &name {
                    JobRef::View(v) | JobRef::Id(v) => v,
                }
            )));
        }
        return Err(unexpected(p, sql, "SUSPEND or RESUME"));
    }
    if is_word(p, 0, "STOP") && is_word(p, 1, "JOB") {
        p.next_token();
        p.next_token();
        let id = p.parse_literal_string().map_err(err)?;
        let savepoint = p.parse_keywords(&[Keyword::WITH, Keyword::SAVEPOINT]);
        return Ok(WeirStatement::StopJob { id, savepoint });
    }
    let mut stmt = p.parse_statement().map_err(err)?;
    // Postgres's `SELECT .. INTO [TEMP] t FROM ..`: `CREATE TABLE t AS` the query.
    if let Statement::Query(query) = &mut stmt {
        if let sqlparser::ast::SetExpr::Select(select) = query.body.as_mut() {
            if let Some(into) = select.into.take() {
                let table = CreateTable {
                    name: object_name(&into.name),
                    if_not_exists: false,
                    temporary: into.temporary || in_pg_temp(&into.name),
                    columns: Vec::new(),
                    primary_key: Vec::new(),
                    watermark: None,
                    options: BTreeMap::new(),
                    like: None,
                };
                let query = query.clone();
                return Ok(WeirStatement::CreateTableAs(Box::new(CreateTableAs { table, column_names: Vec::new(), query, with_data: true })));
            }
        }
    }
    Ok(WeirStatement::Sql(Box::new(stmt)))
}

/// A type as SQL text (`TIMESTAMP_LTZ(3)`, `ROW<a INT>`), parsed as `CREATE TABLE` reads it.
///
/// # Errors
/// `Syntax` for text that is no type.
pub fn parse_data_type(text: &str) -> Result<DataType> {
    let body = crate::sql::types::rewrite_nested_types(text)?;
    let dialect = GenericDialect {};
    let mut p = Parser::new(&dialect).try_with_sql(&body).map_err(|e| syntax_error(text, e))?;
    p.parse_data_type().map_err(|e| syntax_error(text, e))
}

/// Whether `name` is `pg_temp.t`: Postgres's spelling of a temporary table.
fn in_pg_temp(name: &ObjectName) -> bool {
    name.0.len() == 2 && name.0[0].as_ident().is_some_and(|s| ident(s) == "pg_temp")
}

/// `[NOT] LIKE | ILIKE 'pattern'` ending a `SHOW`, if there is one.
fn parse_show_like(p: &mut Parser<'_>, sql: &str) -> Result<Option<ShowLike>> {
    let not = p.parse_keyword(Keyword::NOT);
    let ilike = p.parse_keyword(Keyword::ILIKE);
    if ilike || p.parse_keyword(Keyword::LIKE) {
        return Ok(Some(ShowLike { not, ilike, pattern: p.parse_literal_string().map_err(|e| syntax_error(sql, e))? }));
    }
    if not {
        return Err(unexpected(p, sql, "LIKE or ILIKE"));
    }
    Ok(None)
}

/// `CREATE TABLE` after its first words: Flink's form, or `.. AS query` (with no columns, or
/// Postgres's column names, or Flink's primary key and watermark).
fn parse_create_table(p: &mut Parser<'_>, sql: &str, temporary: bool) -> Result<WeirStatement> {
    let err = |e| syntax_error(sql, e);
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let qualified = p.parse_object_name(false).map_err(err)?;
    let name = object_name(&qualified);
    let mut table = CreateTable {
        name,
        if_not_exists,
        temporary: temporary || in_pg_temp(&qualified),
        columns: Vec::new(),
        primary_key: Vec::new(),
        watermark: None,
        options: BTreeMap::new(),
        like: None,
    };
    // `CREATE TABLE t (a, b) AS ..`: names without types.
    let mut column_names = Vec::new();
    // Columns declared unquoted with capitals (`UserId`), folded to lower case.
    let mut folded: Vec<String> = Vec::new();
    // `CREATE TABLE t AS ..` and `CREATE TABLE t WITH (..) AS ..` have no column list.
    let listed = p.consume_token(&Token::LParen);
    if !listed && !is_word(p, 0, "WITH") && !is_word(p, 0, "AS") && !is_word(p, 0, "LIKE") {
        p.expect_token(&Token::LParen).map_err(err)?;
    }
    while listed {
        if is_word(p, 0, "LIKE") {
            // Postgres's `LIKE source [INCLUDING | EXCLUDING feature] ..`.
            p.next_token();
            let source = object_name(&p.parse_object_name(false).map_err(err)?);
            let mut options = Vec::new();
            while is_word(p, 0, "INCLUDING") || is_word(p, 0, "EXCLUDING") {
                let strategy = p.next_token().to_string().to_uppercase();
                let feature = ident(&p.parse_identifier().map_err(err)?).to_uppercase();
                options.push((strategy, feature));
            }
            if table.like.is_some() {
                return Err(unexpected_prev(p, sql, "one LIKE"));
            }
            table.like = Some(TableLike { source, at: Some(table.columns.len()), options });
        } else if is_word(p, 0, "WATERMARK") {
            p.next_token();
            p.expect_keyword_is(Keyword::FOR).map_err(err)?;
            let column = ident(&p.parse_identifier().map_err(err)?);
            p.expect_keyword_is(Keyword::AS).map_err(err)?;
            let expr = p.parse_expr().map_err(err)?;
            table.watermark = Some((column, expr));
        } else if p.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) || (is_word(p, 0, "CONSTRAINT") && {
            p.next_token();
            p.parse_identifier().map_err(err)?;
            p.expect_keyword_is(Keyword::PRIMARY).map_err(err)?;
            p.expect_keyword_is(Keyword::KEY).map_err(err)?;
            true
        }) {
            p.expect_token(&Token::LParen).map_err(err)?;
            table.primary_key = p
                .parse_comma_separated(|p| p.parse_identifier())
                .map_err(err)?
                .iter()
                .map(ident)
                .collect();
            p.expect_token(&Token::RParen).map_err(err)?;
            parse_not_enforced(p, sql)?;
        } else {
            let declared = p.parse_identifier().map_err(err)?;
            let name = ident(&declared);
            if declared.quote_style.is_none() && name != declared.value {
                folded.push(declared.value.clone());
            }
            if matches!(p.peek_token().token, Token::Comma | Token::RParen) && table.columns.is_empty() {
                column_names.push(name);
            } else if p.parse_keyword(Keyword::AS) {
                let expr = p.parse_expr().map_err(err)?;
                table.columns.push(ColumnSpec {
                    name,
                    data_type: None,
                    not_null: false,
                    computed: Some(expr),
                    metadata: None,
                    is_virtual: false,
                });
            } else {
                let data_type = p.parse_data_type().map_err(err)?;
                let mut col =
                    ColumnSpec { name, data_type: Some(data_type), not_null: false, computed: None, metadata: None, is_virtual: false };
                loop {
                    if p.parse_keywords(&[Keyword::NOT, Keyword::NULL]) {
                        col.not_null = true;
                    } else if p.parse_keyword(Keyword::NULL) {
                    } else if p.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
                        parse_not_enforced(p, sql)?;
                        table.primary_key = vec![col.name.clone()];
                    } else if p.parse_keyword(Keyword::METADATA) {
                        let key = if p.parse_keyword(Keyword::FROM) {
                            p.parse_literal_string().map_err(err)?
                        } else {
                            col.name.clone()
                        };
                        col.is_virtual = p.parse_keyword(Keyword::VIRTUAL);
                        col.metadata = Some(key);
                    } else {
                        break;
                    }
                }
                table.columns.push(col);
            }
        }
        if p.consume_token(&Token::Comma) {
            continue;
        }
        p.expect_token(&Token::RParen).map_err(err)?;
        break;
    }
    if p.parse_keyword(Keyword::WITH) {
        table.options = parse_option_list(p, sql)?;
    }
    notice_folded_fields(&table, &folded);
    if is_word(p, 0, "LIKE") {
        // Flink's `LIKE source [(INCLUDING | EXCLUDING | OVERWRITING feature ..)]`.
        p.next_token();
        let source = object_name(&p.parse_object_name(false).map_err(err)?);
        let mut options = Vec::new();
        if p.consume_token(&Token::LParen) {
            while !p.consume_token(&Token::RParen) {
                let strategy = ident(&p.parse_identifier().map_err(err)?).to_uppercase();
                let feature = ident(&p.parse_identifier().map_err(err)?).to_uppercase();
                options.push((strategy, feature));
                let _ = p.consume_token(&Token::Comma);
            }
        }
        if table.like.is_some() {
            return Err(unexpected_prev(p, sql, "one LIKE"));
        }
        table.like = Some(TableLike { source, at: None, options });
    }
    let at = p.peek_token().span.start;
    let at = Some(offset_of(sql, at.line, at.column) + 1);
    if !p.parse_keyword(Keyword::AS) {
        if let Some(name) = column_names.first() {
            return Err(WeirError::syntax(format!("column \"{name}\" needs a type (or the table an AS query)"), at));
        }
        return Ok(WeirStatement::CreateTable(Box::new(table)));
    }
    if let Some(like) = &table.like {
        return Err(WeirError::unsupported(format!(
            "CREATE TABLE .. LIKE {} .. AS: a table takes its columns from its query or from another table, not both",
            like.source
        )));
    }
    if let Some(column) = table.columns.first() {
        return Err(WeirError::unsupported(format!(
            "CREATE TABLE .. AS takes its columns and their types from the query (column \"{}\" is declared): name them \
             in a list (CREATE TABLE t (a, b) AS ..) or in the query, and CAST in the query to choose a type",
            column.name
        )));
    }
    let query = p.parse_query().map_err(err)?;
    // Postgres's `WITH [NO] DATA`.
    let mut with_data = true;
    if is_word(p, 0, "WITH") && (is_word(p, 1, "DATA") || is_word(p, 1, "NO") && is_word(p, 2, "DATA")) {
        p.next_token();
        with_data = !p.parse_keyword(Keyword::NO);
        p.next_token();
    }
    Ok(WeirStatement::CreateTableAs(Box::new(CreateTableAs { table, column_names, query, with_data })))
}

/// `('k' = 'v', ...)`, as `CREATE TABLE ... WITH` and `ALTER TABLE ... SET` take it: keys
/// quoted or dotted words, each once.
fn parse_option_list(p: &mut Parser<'_>, sql: &str) -> Result<BTreeMap<String, String>> {
    let err = |e| syntax_error(sql, e);
    let mut options = BTreeMap::new();
    p.expect_token(&Token::LParen).map_err(err)?;
    if p.consume_token(&Token::RParen) {
        return Ok(options);
    }
    loop {
        let key = parse_option_name(p, sql)?;
        p.expect_token(&Token::Eq).map_err(err)?;
        let value = parse_setting_value(p, sql)?;
        if options.contains_key(&key) {
            // Postgres: 22023 parameter "x" specified more than once.
            return Err(WeirError::option(format!("option '{key}' is given more than once")));
        }
        options.insert(key, value);
        if p.consume_token(&Token::Comma) {
            continue;
        }
        p.expect_token(&Token::RParen).map_err(err)?;
        return Ok(options);
    }
}

/// An option's name: `'quoted'`, or words joined by dots (`properties.bootstrap.servers`).
fn parse_option_name(p: &mut Parser<'_>, sql: &str) -> Result<String> {
    match p.next_token().token {
        Token::SingleQuotedString(s) => Ok(s),
        Token::Word(w) => {
            let mut key = w.value;
            while p.consume_token(&Token::Period) {
                match p.next_token().token {
                    Token::Word(w) => {
                        key.push('.');
                        key.push_str(&w.value);
                    }
                    _ => return Err(unexpected_prev(p, sql, "an option name")),
                }
            }
            Ok(key)
        }
        _ => Err(unexpected_prev(p, sql, "an option name in quotes")),
    }
}

/// `ALTER TABLE [IF EXISTS] name SET ('k' = 'v', ...)` or `RESET ('k', ...)` (Flink's), after
/// `ALTER TABLE`.
fn parse_alter_table_options(p: &mut Parser<'_>, sql: &str) -> Result<WeirStatement> {
    let err = |e| syntax_error(sql, e);
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = object_name(&p.parse_object_name(false).map_err(err)?);
    let (set, reset) = if p.parse_keyword(Keyword::SET) {
        let set = parse_option_list(p, sql)?;
        if set.is_empty() {
            return Err(WeirError::syntax("ALTER TABLE .. SET () sets nothing: name an option ('k' = 'v')", None));
        }
        (set, Vec::new())
    } else {
        p.expect_keyword_is(Keyword::RESET).map_err(err)?;
        p.expect_token(&Token::LParen).map_err(err)?;
        let mut keys = vec![parse_option_name(p, sql)?];
        while p.consume_token(&Token::Comma) {
            keys.push(parse_option_name(p, sql)?);
        }
        p.expect_token(&Token::RParen).map_err(err)?;
        (BTreeMap::new(), keys)
    };
    Ok(WeirStatement::AlterTableOptions { name, if_exists, set, reset })
}

fn parse_not_enforced(p: &mut Parser<'_>, sql: &str) -> Result<()> {
    if p.parse_keyword(Keyword::NOT) {
        p.expect_keyword_is(Keyword::ENFORCED).map_err(|e| syntax_error(sql, e))?;
    }
    Ok(())
}

/// A setting name: `'table.exec.state.ttl'`, `table.exec.state.ttl`, or `search_path`.
/// `[TO] relation | (query) [WITH (SNAPSHOT [=] bool, PROGRESS [[=] bool])]`, after SUBSCRIBE.
fn parse_subscribe(p: &mut Parser<'_>, sql: &str) -> Result<Subscribe> {
    let err = |e| syntax_error(sql, e);
    let _ = p.parse_keyword(Keyword::TO);
    let (relation, query) = if p.consume_token(&Token::LParen) {
        let query = p.parse_query().map_err(err)?;
        p.expect_token(&Token::RParen).map_err(err)?;
        (String::new(), Some(query))
    } else {
        (object_name(&p.parse_object_name(false).map_err(err)?), None)
    };
    let mut subscribe = Subscribe { relation, query, snapshot: true, progress: false };
    if p.parse_keyword(Keyword::WITH) {
        p.expect_token(&Token::LParen).map_err(err)?;
        loop {
            let key = parse_setting_name(p, sql)?;
            let value = if p.consume_token(&Token::Eq) || !matches!(p.peek_token().token, Token::Comma | Token::RParen) {
                let v = parse_setting_value(p, sql)?;
                match v.to_lowercase().as_str() {
                    "true" | "on" | "1" => true,
                    "false" | "off" | "0" => false,
                    _ => return Err(WeirError::option(format!("SUBSCRIBE option {key} = '{v}': true or false"))),
                }
            } else {
                true
            };
            match key.as_str() {
                "snapshot" => subscribe.snapshot = value,
                "progress" => subscribe.progress = value,
                other => {
                    return Err(WeirError::option(format!("unknown SUBSCRIBE option \"{other}\"; options: SNAPSHOT, PROGRESS")))
                }
            }
            if !p.consume_token(&Token::Comma) {
                break;
            }
        }
        p.expect_token(&Token::RParen).map_err(err)?;
    }
    Ok(subscribe)
}

/// A cursor's name: an identifier, quoted or not.
fn parse_cursor_name(p: &mut Parser<'_>, sql: &str) -> Result<String> {
    let name = p.parse_identifier().map_err(|e| syntax_error(sql, e))?;
    Ok(ident(&name))
}

fn parse_setting_name(p: &mut Parser<'_>, sql: &str) -> Result<String> {
    match p.next_token().token {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
        Token::Word(w) => {
            let mut key = w.value.to_lowercase();
            while p.consume_token(&Token::Period) {
                match p.next_token().token {
                    Token::Word(w) => {
                        key.push('.');
                        key.push_str(&w.value.to_lowercase());
                    }
                    _ => return Err(unexpected_prev(p, sql, "a setting name")),
                }
            }
            Ok(key)
        }
        _ => Err(unexpected_prev(p, sql, "a setting name")),
    }
}

/// A setting or option value: a string, a number, a word, or a comma list of them.
fn parse_setting_value(p: &mut Parser<'_>, sql: &str) -> Result<String> {
    let one = |p: &mut Parser<'_>| -> Result<String> {
        match p.next_token().token {
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
            Token::Number(n, _) => Ok(n),
            Token::Minus => match p.next_token().token {
                Token::Number(n, _) => Ok(format!("-{n}")),
                _ => Err(unexpected_prev(p, sql, "a number")),
            },
            Token::Word(w) => Ok(w.value),
            _ => Err(unexpected_prev(p, sql, "a value")),
        }
    };
    let mut value = one(p)?;
    // Postgres allows `SET search_path = a, b`; options stop at their comma, so only for SET.
    while p.peek_token().token == Token::Comma && !matches!(p.peek_nth_token(1).token, Token::SingleQuotedString(_)) && matches!(p.peek_nth_token(1).token, Token::Word(_)) && p.peek_nth_token(2).token != Token::Eq && p.peek_nth_token(2).token != Token::Period {
        p.next_token();
        value.push_str(", ");
        value.push_str(&one(p)?);
    }
    Ok(value)
}

/// A NOTICE for the columns of a table whose records name their fields (a `kafka` or
/// `filesystem` table of `json`, `avro-confluent`, ..; not `csv` or `raw`) declared unquoted with capitals: Weir
/// folds them to lower case, as Postgres does (Flink keeps their case), so a field `UserId`
/// would read NULL into column `userid`.
fn notice_folded_fields(table: &CreateTable, folded: &[String]) {
    // CSV and raw records hold their fields by position.
    let by_name = |format: &str| !matches!(format, "csv" | "raw");
    let formats: Vec<&String> = table.options.iter().filter(|(k, _)| k.ends_with("format")).map(|(_, v)| v).collect();
    let named_fields = formats.iter().any(|f| by_name(f))
        || (formats.is_empty() && table.options.get("connector").is_some_and(|c| c == "filesystem"));
    if folded.is_empty() || !named_fields {
        return;
    }
    let (noun, verb, field) = if folded.len() == 1 { ("column", "reads", "field") } else { ("columns", "read", "fields") };
    let names = |f: &dyn Fn(&String) -> String| folded.iter().map(f).collect::<Vec<_>>().join(", ");
    crate::sql::notices::notice(format!(
        "unquoted names fold to lower case, as in Postgres: {noun} {} {verb} the record {field} {}, not {}; quote a name \
         to keep its case (\"{first}\" or `{first}`, as Flink reads it)",
        names(&|f| f.to_lowercase()),
        names(&|f| format!("\"{}\"", f.to_lowercase())),
        names(&|f| format!("\"{f}\"")),
        first = folded[0]
    ));
}

/// Whether an `ALTER TABLE [IF EXISTS] name` goes on with `SET (` or `RESET (` (Flink's option
/// forms; Postgres's `SET SCHEMA`, `SET NOT NULL` and the rest are sqlparser's).
fn alters_options(p: &Parser<'_>) -> bool {
    let n = after_altered_name(p);
    (is_word(p, n, "SET") || is_word(p, n, "RESET")) && p.peek_nth_token(n + 1).token == Token::LParen
}

/// Whether an `ALTER TABLE [IF EXISTS] name` goes on with one of Flink's schema changes: `ADD
/// (` / `ADD WATERMARK` / `ADD PRIMARY KEY`, `MODIFY`, `DROP WATERMARK | PRIMARY KEY | ( | c`
/// (Postgres's `ADD [COLUMN] c T` and `DROP COLUMN c` too, but sqlparser reads the former).
fn changes_schema(p: &Parser<'_>) -> bool {
    let n = after_altered_name(p);
    let add = is_word(p, n, "ADD")
        && (p.peek_nth_token(n + 1).token == Token::LParen || ["WATERMARK", "PRIMARY", "CONSTRAINT"].iter().any(|w| is_word(p, n + 1, w)));
    let drop = is_word(p, n, "DROP") && !["CONSTRAINT"].iter().any(|w| is_word(p, n + 1, w));
    add || drop || is_word(p, n, "MODIFY")
}

/// After `ALTER TABLE`: Flink's schema change ([`changes_schema`]).
fn parse_schema_change(p: &mut Parser<'_>, sql: &str) -> Result<WeirStatement> {
    let err = |e| syntax_error(sql, e);
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = object_name(&p.parse_object_name(false).map_err(err)?);
    let verb = p.next_token().to_string().to_ascii_uppercase();
    if verb == "DROP" {
        let change = if is_word(p, 0, "WATERMARK") {
            p.next_token();
            SchemaChange::DropWatermark
        } else if p.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
            SchemaChange::DropPrimaryKey
        } else if p.consume_token(&Token::LParen) {
            let columns = p.parse_comma_separated(|p| p.parse_identifier()).map_err(err)?;
            p.expect_token(&Token::RParen).map_err(err)?;
            SchemaChange::DropColumns(columns.iter().map(|c| (ident(c), false)).collect())
        } else {
            // Postgres's actions: `DROP [COLUMN] [IF EXISTS] c [RESTRICT | CASCADE]`, comma
            // separated.
            let mut columns = Vec::new();
            loop {
                let _ = p.parse_keyword(Keyword::COLUMN);
                let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
                columns.push((ident(&p.parse_identifier().map_err(err)?), if_exists));
                if p.parse_keyword(Keyword::CASCADE) {
                    return Err(WeirError::unsupported("ALTER TABLE .. DROP COLUMN .. CASCADE: drop the views and jobs that read the column first"));
                }
                let _ = p.parse_keyword(Keyword::RESTRICT);
                if !(p.peek_token().token == Token::Comma && is_word(p, 1, "DROP")) {
                    break;
                }
                p.next_token();
                p.next_token();
            }
            SchemaChange::DropColumns(columns)
        };
        if p.peek_token().token != Token::EOF && p.peek_token().token != Token::SemiColon {
            return Err(unexpected(p, sql, "the end of the statement"));
        }
        return Ok(WeirStatement::AlterSchema { name, if_exists, change });
    }
    // What ADD or MODIFY declares, read as a CREATE TABLE's column list.
    let listed = p.consume_token(&Token::LParen);
    let mut depth = 0usize;
    let mut items = Vec::new();
    loop {
        let token = p.next_token().token;
        match token {
            Token::EOF | Token::SemiColon if !listed => break,
            Token::EOF => return Err(unexpected(p, sql, ")")),
            Token::RParen if listed && depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        items.push(token.to_string());
    }
    if listed && p.peek_token().token != Token::EOF && p.peek_token().token != Token::SemiColon {
        return Err(unexpected(p, sql, "the end of the statement"));
    }
    let declared = match parse_statement(&format!("CREATE TABLE weir_altered ({})", items.join(" ")))? {
        WeirStatement::CreateTable(table) => table,
        _ => return Err(WeirError::internal("a column list reads as a CREATE TABLE")),
    };
    let change = if verb == "ADD" { SchemaChange::Add(declared) } else { SchemaChange::Modify(declared) };
    Ok(WeirStatement::AlterSchema { name, if_exists, change })
}

/// Whether an `ALTER TABLE | VIEW` is `.. name RENAME TO ..`.
fn renames(p: &Parser<'_>) -> bool {
    let n = after_altered_name(p);
    is_word(p, n, "RENAME") && is_word(p, n + 1, "TO")
}

/// The token after `ALTER TABLE [IF EXISTS] name`.
fn after_altered_name(p: &Parser<'_>) -> usize {
    let mut n = 2;
    if is_word(p, n, "IF") && is_word(p, n + 1, "EXISTS") {
        n += 2;
    }
    // The name: words joined by dots.
    n += 1;
    while p.peek_nth_token(n).token == Token::Period {
        n += 2;
    }
    n
}

/// `definition` (a stored `CREATE TABLE | VIEW | MATERIALIZED VIEW` text) with the name it
/// creates replaced by `to` (quoted where it needs quotes); the rest as written.
///
/// # Errors
/// `Syntax` when the text cannot be tokenized; `Internal` when it creates nothing.
pub fn with_created_name(definition: &str, to: &str) -> Result<String> {
    let (tokens, starts) = located_tokens(definition)?;
    // The tokens that are not white space, with their places.
    let words: Vec<(usize, &Token)> =
        tokens.iter().enumerate().filter(|(_, t)| !matches!(t.token, Token::Whitespace(_))).map(|(i, t)| (i, &t.token)).collect();
    let is = |at: usize, word: &str| matches!(words.get(at), Some((_, Token::Word(w))) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word));
    // CREATE [OR REPLACE] [TEMPORARY | TEMP] [MATERIALIZED] TABLE | VIEW [IF NOT EXISTS] name
    let mut at = 1;
    for optional in [&["OR", "REPLACE"][..], &["TEMPORARY"], &["TEMP"], &["MATERIALIZED"]] {
        if optional.iter().enumerate().all(|(k, w)| is(at + k, w)) {
            at += optional.len();
        }
    }
    let missing = || WeirError::internal(format!("no name in the definition {definition}"));
    if !is(0, "CREATE") || !(is(at, "TABLE") || is(at, "VIEW")) {
        return Err(missing());
    }
    at += 1;
    if is(at, "IF") && is(at + 1, "NOT") && is(at + 2, "EXISTS") {
        at += 3;
    }
    // The name: words joined by dots.
    let first = at;
    while matches!(words.get(at + 1), Some((_, Token::Period))) && matches!(words.get(at + 2), Some((_, Token::Word(_)))) {
        at += 2;
    }
    let (Some((first, Token::Word(_))), Some((last, _))) = (words.get(first), words.get(at)) else { return Err(missing()) };
    let (start, end) = (starts[*first], starts.get(last + 1).copied().unwrap_or(definition.len()));
    Ok(format!("{}{}{}", &definition[..start], crate::sql::create_table_as::identifier(to), &definition[end..]))
}

fn is_word(p: &Parser<'_>, n: usize, word: &str) -> bool {
    matches!(p.peek_nth_token(n).token, Token::Word(ref w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// `sql` without a trailing `EMIT ON WINDOW CLOSE` (any case and spacing, before an optional
/// semicolon), and whether it had one.
fn strip_emit_on_window_close(sql: &str) -> (&str, bool) {
    let trimmed = sql.trim_end().trim_end_matches(';').trim_end();
    let mut rest = trimmed;
    for word in ["CLOSE", "WINDOW", "ON", "EMIT"] {
        let r = rest.trim_end();
        let n = word.len();
        // The word's start must be a character boundary (`SELECT '北京'` ends in a character
        // of three bytes), checked before either side of it is sliced.
        let at = r.len().checked_sub(n).filter(|at| r.is_char_boundary(*at));
        let ends_with_word = at.is_some_and(|at| at > 0 && r[at..].eq_ignore_ascii_case(word) && r[..at].ends_with(char::is_whitespace));
        if ends_with_word {
            rest = &r[..r.len() - n];
        } else {
            return (sql, false);
        }
    }
    (rest, true)
}

fn unexpected(p: &Parser<'_>, sql: &str, expected: &str) -> WeirError {
    let t = p.peek_token();
    WeirError::syntax(
        format!("expected {expected}, found '{}'", t.token),
        Some(offset_of(sql, t.span.start.line, t.span.start.column) + 1),
    )
}

fn unexpected_prev(p: &mut Parser<'_>, sql: &str, expected: &str) -> WeirError {
    p.prev_token();
    unexpected(p, sql, expected)
}

/// An identifier as the catalog keeps it: unquoted ones lower-cased (Postgres).
pub fn ident(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// A relation name: the last part of a possibly qualified name (`public.t` is `t`).
pub fn object_name(n: &ObjectName) -> String {
    n.0.last()
        .and_then(|part| part.as_ident())
        .map(ident)
        .unwrap_or_else(|| n.to_string().to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_on_window_close_is_cut_off_multibyte_text_too() {
        assert_eq!(strip_emit_on_window_close("SELECT 1, '北京'"), ("SELECT 1, '北京'", false));
        assert_eq!(strip_emit_on_window_close("SELECT '中' j"), ("SELECT '中' j", false));
        assert_eq!(strip_emit_on_window_close("SELECT '北' emit on  window CLOSE ;"), ("SELECT '北' ", true));
        assert_eq!(strip_emit_on_window_close("CLOSE"), ("CLOSE", false));
    }

    #[test]
    fn splits_at_top_level_semicolons() -> Result<()> {
        let parts = split_statements("SELECT 'a;b'; -- c;\n INSERT INTO t VALUES (1);;")?;
        assert_eq!(parts, vec!["SELECT 'a;b'", "-- c;\n INSERT INTO t VALUES (1)"]);
        Ok(())
    }

    #[test]
    fn parses_flink_create_table() -> Result<()> {
        let sql = "CREATE TABLE orders (
            order_id BIGINT, seller_id STRING, amount DECIMAL(12, 2), event_ts TIMESTAMP(3),
            proc_time AS PROCTIME(),
            WATERMARK FOR event_ts AS event_ts - INTERVAL '5' SECOND,
            PRIMARY KEY (order_id) NOT ENFORCED
        ) WITH ('connector' = 'kafka', 'topic' = 'clean.orders.v1', 'format' = 'json')";
        let WeirStatement::CreateTable(t) = parse_statement(sql)? else { panic!("not a CREATE TABLE") };
        assert_eq!(t.name, "orders");
        assert_eq!(t.columns.len(), 5);
        assert!(t.columns[4].computed.is_some());
        assert_eq!(t.primary_key, vec!["order_id"]);
        assert_eq!(t.watermark.as_ref().map(|w| w.0.as_str()), Some("event_ts"));
        assert_eq!(t.options.get("topic").map(String::as_str), Some("clean.orders.v1"));
        Ok(())
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse_statement("SELECT * FROM t WHERE").expect_err("incomplete");
        assert_eq!(e.sqlstate(), "42601");
        assert!(e.position().is_some());
        let e = parse_statement("SELEC 1").expect_err("typo");
        assert_eq!(e.position(), Some(1));
    }

    #[test]
    fn a_select_list_does_not_end_with_a_comma() {
        let e = parse_statement("SELECT id, FROM t").expect_err("trailing comma");
        assert_eq!((e.sqlstate(), e.position()), ("42601", Some(12)));
        let e = parse_statement("SELECT id, -- last\n from t").expect_err("trailing comma");
        assert_eq!(e.position(), Some(21));
        let e = parse_statement("SELECT 1,").expect_err("trailing comma");
        assert_eq!(e.position(), Some(10));
        for ok in ["SELECT a, f FROM t", "SELECT ',' FROM t", "SELECT trim(',' FROM s), \"from\" FROM t"] {
            assert!(parse_statement(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_name_is_found_as_an_identifier() {
        // Not inside the string or the comment; an unquoted word folds to lower case; a
        // qualified name from its first part.
        let sql = "SELECT 'nme', -- nme\n  t.NME FROM t";
        assert_eq!(position_of_name(sql, "nme"), Some(24));
        assert_eq!(position_of_name("SELECT x FROM weir.public.t", "t"), Some(15));
        assert_eq!(position_of_name("SELECT \"Nme\", nme FROM t", "Nme"), Some(8));
        assert_eq!(position_of_name("SELECT \"Nme\", nme FROM t", "nme"), Some(15));
        assert_eq!(position_of_name("SELECT é, nme FROM t", "nme"), Some(11));
        assert_eq!(position_of_name("SELECT a FROM t", "nme"), None);
    }

    #[test]
    fn parses_commands() -> Result<()> {
        assert!(matches!(parse_statement("FLUSH")?, WeirStatement::Flush));
        assert!(matches!(parse_statement("SHOW MATERIALIZED VIEWS")?, WeirStatement::Show(ShowList::MaterializedViews, None)));
        assert!(matches!(parse_statement("SHOW FUNCTIONS")?, WeirStatement::Show(ShowList::Functions, None)));
        let WeirStatement::Show(ShowList::Functions, Some(like)) = parse_statement("SHOW FUNCTIONS NOT ILIKE 'JSON%'")? else {
            panic!("a filter")
        };
        assert!(like.not && like.ilike && !like.accepts("json_value") && like.accepts("upper"));
        let like = ShowLike { not: false, ilike: false, pattern: "date_f_rm%".into() };
        assert!(like.accepts("date_format") && !like.accepts("DATE_FORMAT") && !like.accepts("date_trunc"));
        assert_eq!(statement_set_part("BEGIN STATEMENT SET;"), StatementSetPart::Begin(None));
        assert_eq!(statement_set_part("begin statement set"), StatementSetPart::Begin(None));
        assert_eq!(
            statement_set_part("EXECUTE STATEMENT SET\n  BEGIN\n  INSERT INTO s SELECT 'é' FROM t"),
            StatementSetPart::Begin(Some("INSERT INTO s SELECT 'é' FROM t".into()))
        );
        assert_eq!(statement_set_part("EXECUTE STATEMENT SET BEGIN"), StatementSetPart::Begin(None));
        assert_eq!(statement_set_part("END;"), StatementSetPart::End);
        assert_eq!(statement_set_part("BEGIN"), StatementSetPart::Other);
        assert_eq!(statement_set_part("-- the set\n  /* of two */ BEGIN STATEMENT SET"), StatementSetPart::Begin(None));
        assert_eq!(statement_set_part("  end"), StatementSetPart::End);
        assert_eq!(statement_set_part("END TRANSACTION"), StatementSetPart::Other);
        assert_eq!(statement_set_part("INSERT INTO s SELECT 1"), StatementSetPart::Other);
        assert!(matches!(parse_statement("show user functions")?, WeirStatement::Show(ShowList::UserFunctions, None)));
        let WeirStatement::Set { key, value, local: false } = parse_statement("SET 'table.exec.state.ttl' = '1 h'")? else { panic!() };
        assert_eq!((key.as_str(), value.as_str()), ("table.exec.state.ttl", "1 h"));
        assert!(matches!(parse_statement("DROP MATERIALIZED VIEW IF EXISTS v CASCADE")?,
            WeirStatement::Drop { kind: DropKind::MaterializedView, if_exists: true, cascade: true, .. }));
        assert!(matches!(parse_statement("DROP TEMPORARY VIEW IF EXISTS v")?,
            WeirStatement::Drop { kind: DropKind::TemporaryView, if_exists: true, .. }));
        assert!(matches!(parse_statement("drop temp view v")?, WeirStatement::Drop { kind: DropKind::TemporaryView, .. }));
        let create = "CREATE TABLE t (a INT, b AS CAST(a AS BIGINT), r ROW<x INT>) with ('k' = 'v')";
        assert_eq!(create_table_options_at(create)?, create.find("with"));
        assert_eq!(create_table_options_at("CREATE TABLE t (a INT)")?, None);
        assert!(matches!(
            parse_statement("ALTER TABLE IF EXISTS s.t SET ('a.b' = 'x', c.d = 'y')")?,
            WeirStatement::AlterTableOptions { if_exists: true, ref set, .. } if set.len() == 2 && set["c.d"] == "y"
        ));
        assert!(matches!(
            parse_statement("alter table t reset ('a', b.c)")?,
            WeirStatement::AlterTableOptions { ref reset, .. } if reset == &["a".to_string(), "b.c".to_string()]
        ));
        assert!(matches!(parse_statement("CREATE MATERIALIZED VIEW v AS SELECT 1 EMIT ON WINDOW CLOSE")?,
            WeirStatement::CreateMaterializedView { emit_on_window_close: true, .. }));
        Ok(())
    }
}

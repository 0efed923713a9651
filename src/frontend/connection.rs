//! One client connection: its [`Session`] and the pgwire handlers that run its statements.
//!
//! pgwire asks [`PgWireServerHandlers`](pgwire::api::PgWireServerHandlers) for its handlers
//! once per socket, so the server makes one [`Connection`] per socket and hands it out as the
//! startup, simple-query and extended-query handler: the `Session` lives exactly as long as the
//! connection. Only one message of a connection runs at a time, so its session lock is never
//! contended; it exists because the handlers take `&self`.
//!
//! - Startup: any user and database, no password, unless the server has users
//!   ([`super::auth`]: SCRAM-SHA-256 or md5, roles); `server_version` is [`SERVER_VERSION`];
//!   the connection registers with the server's `ConnectionManager` so that a CancelRequest
//!   with its key cancels the running statement (pgwire drops the statement's future; a
//!   `SELECT`'s query task is aborted with it), and with the database's activities, which
//!   `pg_stat_activity` shows and `pg_cancel_backend(pid)` cancels through the same handle.
//! - Simple query: the string is split into statements ([`Database::split_statements`]), run
//!   in order; the first error ends it, sent after the earlier results. An empty string (or
//!   only comments) answers EmptyQueryResponse.
//! - Extended query: the prepared statement is its SQL text (one statement). Bind substitutes
//!   the parameters as literals (`params`), Describe asks [`Database::describe`], Execute runs
//!   the bound text; results are in the formats Bind asked for (tokio-postgres asks binary).
//!
//! # Failures
//! A statement that panics is answered with an internal error (XX000) and the connection goes
//! on. A client that disconnects mid-statement makes pgwire's writes fail and the connection
//! task end; the statement itself runs to completion (or is dropped at cancel).

use std::any::Any;
use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use futures::{future, stream, FutureExt, Sink, SinkExt, Stream, StreamExt};
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, AuthOutcome,
    DefaultServerParameterProvider, ServerParameterProvider, StartupHandler,
};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::copy::{send_copy_both_response, send_copy_in_response, send_copy_out_response};
use pgwire::api::query::{
    send_describe_response, send_execution_response, send_query_response, send_ready_for_query, ExtendedQueryHandler,
    SimpleQueryHandler,
};
use pgwire::api::copy::CopyHandler;
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeResponse, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionGuard, ConnectionHandle, PgWireConnectionState, PidSecretKeyGenerator,
    Type, DEFAULT_NAME, METADATA_DATABASE, METADATA_USER,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::{
    Describe, Execute, TARGET_TYPE_BYTE_PORTAL, TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::response::{EmptyQueryResponse, TransactionStatus};
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::Authentication;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use tokio::sync::Mutex;
use tracing::debug;

use super::auth::Role;
use super::encode;
use super::error::{error_info, FrontendError, Result};
use super::params;
use super::server::Shared;
use crate::observe::{instruments, now_ms, Activity, Canceller};
use crate::sql::database::{Database, Session, StatementResult, TransactionState};
use crate::sql::subscribe::Subscription;

/// The `server_version` reported at startup: a Postgres version psql understands (it reads the
/// leading number), then ours.
pub const SERVER_VERSION: &str = concat!("16.0 (Weir ", env!("CARGO_PKG_VERSION"), ")");

/// One client connection's state and handlers.
pub struct Connection {
    /// Server-wide state: the database, the cancel registry.
    shared: Arc<Shared>,
    /// This connection's settings; locked while one of its statements runs.
    session: Mutex<Session>,
    /// Turns Parse's SQL into a prepared statement.
    parser: Arc<StatementParser>,
    /// The pid the connection got at startup (0 before): its `pg_stat_activity` row.
    pid: AtomicI32,
    /// A `COPY ... FROM STDIN` in progress: where its rows go and the data received so far.
    copy_in: std::sync::Mutex<Option<PendingCopy>>,
    /// The client's socket, watched while a subscription streams.
    peer: PeerSocket,
}

/// How often a streaming subscription that has sent nothing checks whether its client left.
const PEER_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// The client's socket (a duplicate of its descriptor, registered with Tokio on its own),
/// watched for the client leaving while a statement streams: pgwire reads nothing from the
/// client until the statement ends (and the extended protocol's Sync waits unread behind its
/// Execute), and a subscription writes only when its relation changes, so without this a
/// subscriber that left would be noticed at the next change, or never (and a `SUBSCRIBE
/// (query)`'s temporary view would run on).
pub struct PeerSocket(Option<tokio::net::TcpStream>);

impl PeerSocket {
    /// Watches `socket` (nothing when its descriptor cannot be duplicated). Called on a Tokio
    /// runtime.
    pub fn of(socket: &tokio::net::TcpStream) -> Self {
        use std::os::fd::AsFd;
        let duplicate = socket.as_fd().try_clone_to_owned().ok().map(std::net::TcpStream::from);
        Self(duplicate.and_then(|s| tokio::net::TcpStream::from_std(s).ok()))
    }

    /// Whether the client has closed its side of the connection, or the connection failed
    /// (epoll's `EPOLLRDHUP` / `EPOLLHUP` / `EPOLLERR`, as Tokio last saw them). Does not wait
    /// and reads nothing.
    fn hung_up(&self) -> bool {
        let Some(socket) = &self.0 else { return false };
        match socket.ready(tokio::io::Interest::READABLE).now_or_never() {
            Some(Ok(ready)) => ready.is_read_closed() || ready.is_error(),
            Some(Err(_)) => true,
            None => false,
        }
    }

    /// `subscription`'s next batch, or an I/O error once the client has left (checked every
    /// [`PEER_CHECK_INTERVAL`] while no batch comes), which ends the connection.
    async fn next_batch(&self, subscription: &mut Subscription) -> PgWireResult<crate::error::Result<RecordBatch>> {
        loop {
            // Subscription::next waits only in its feed's channel, so a timeout loses nothing.
            match tokio::time::timeout(PEER_CHECK_INTERVAL, subscription.next()).await {
                Ok(batch) => return Ok(batch),
                Err(_) if self.hung_up() => {
                    let left = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "the subscriber left");
                    return Err(PgWireError::IoError(left));
                }
                Err(_) => {}
            }
        }
    }
}

/// A `COPY ... FROM STDIN` between its statement and the client's CopyDone.
struct PendingCopy {
    table: String,
    columns: Vec<String>,
    format: crate::sql::copy::CopyFormat,
    data: Vec<u8>,
}

/// Ends a connection's `pg_stat_activity` row and its count in `weir_connections`.
impl Drop for Connection {
    fn drop(&mut self) {
        let pid = *self.pid.get_mut();
        if pid != 0 {
            self.shared.db.activities().close(pid);
            instruments().connections.dec();
        }
    }
}

/// A statement in flight: its connection shows `active` until it is dropped (finished, failed
/// or cancelled), and then the statement is counted in the metrics.
struct InFlight<'a> {
    connection: &'a Connection,
    sql: &'a str,
    start: std::time::Instant,
    ok: bool,
}

impl<'a> InFlight<'a> {
    fn start(connection: &'a Connection, sql: &'a str) -> Self {
        connection.shared.db.activities().started(connection.pid.load(Ordering::Relaxed), sql);
        Self { connection, sql, start: std::time::Instant::now(), ok: false }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.connection.shared.db.activities().finished(self.connection.pid.load(Ordering::Relaxed));
        instruments().statement(self.sql, self.ok, self.start.elapsed());
    }
}

impl Connection {
    /// A new connection with a fresh session.
    pub(crate) fn new(shared: Arc<Shared>, peer: PeerSocket) -> Self {
        Self {
            parser: Arc::new(StatementParser { db: Arc::clone(&shared.db) }),
            shared,
            session: Mutex::new(Session::default()),
            pid: AtomicI32::new(0),
            copy_in: std::sync::Mutex::new(None),
            peer,
        }
    }

    /// Runs one statement and shapes its result, rows in `formats`.
    async fn run(&self, session: &mut Session, sql: &str, formats: &Format) -> Result<Response> {
        debug!(sql, "executing");
        let mut in_flight = InFlight::start(self, sql);
        let execution = AssertUnwindSafe(self.shared.db.execute(session, sql)).catch_unwind();
        let result = execution.await.map_err(|panic| panicked(&*panic))??;
        let response = self.respond(result, formats)?;
        in_flight.ok = true;
        Ok(response)
    }

    /// The wire response of a statement's result; a `COPY FROM STDIN` is set up to receive the
    /// client's rows.
    fn respond(&self, result: StatementResult, formats: &Format) -> Result<Response> {
        match result {
            StatementResult::CopyIn { table, columns, format } => {
                let n = columns.len();
                *self.copy_in.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(PendingCopy { table, columns, format, data: Vec::new() });
                Ok(Response::CopyIn(CopyResponse::new(0, n, stream::empty())))
            }
            result => response(result, formats),
        }
    }

    /// Runs a simple-protocol query string: its statements in order, each one's result sent
    /// as soon as it is done (a `SUBSCRIBE` streams until it ends); the first error ends the
    /// string. An empty string answers EmptyQueryResponse.
    async fn run_query_string<C>(&self, client: &mut C, query: &str) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statements = match split_statements(query) {
            Ok(statements) => statements,
            Err(err) => {
                client.feed(PgWireBackendMessage::ErrorResponse(error_info(&err, 0).into())).await?;
                return Ok(());
            }
        };
        if statements.is_empty() {
            client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?;
            return Ok(());
        }
        let mut session = self.session.lock().await;
        let mut searched = 0;
        for statement in &statements {
            let offset = char_offset(query, statement, &mut searched);
            let mut in_flight = InFlight::start(self, statement);
            let zone = time_zone(&session);
            let execution = AssertUnwindSafe(self.shared.db.execute(&mut session, statement)).catch_unwind();
            let result = match execution.await.map_err(|panic| panicked(&*panic)) {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(e)) => Err(FrontendError::from(e)),
                Err(e) => Err(e),
            };
            report_time_zone(client, &zone, &session).await?;
            send_notices(client, &mut session).await?;
            let sent = match result {
                Ok(StatementResult::Subscribe(subscription)) => {
                    stream_rows(client, &self.peer, *subscription, &Format::UnifiedText, true).await?
                }
                Ok(StatementResult::CopySubscribe(subscription)) => stream_copy(client, &self.peer, *subscription).await?,
                Ok(result) => match self.respond(result, &Format::UnifiedText) {
                    Ok(response) => {
                        let copy_in = matches!(response, Response::CopyIn(_));
                        send_response(client, response).await?;
                        if copy_in {
                            // The client streams the COPY's rows next: nothing after it.
                            in_flight.ok = true;
                            return Ok(());
                        }
                        Ok(())
                    }
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            };
            match sent {
                Ok(()) => in_flight.ok = true,
                Err(err) => {
                    client.feed(PgWireBackendMessage::ErrorResponse(error_info(&err, offset).into())).await?;
                    if let Some(txn) = session.txn.as_mut() {
                        txn.failed = true;
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Execute of a portal that streams (`SUBSCRIBE`, `COPY (SUBSCRIBE ...) TO STDOUT`): its
    /// rows flushed epoch by epoch, as over the simple protocol (pgwire's portal would hold
    /// them until its buffer fills), in the formats Bind asked for; it ends only with an error
    /// (cancel, the subscription's end), which goes the extended protocol's error path.
    async fn execute_streaming<C>(&self, client: &mut C, portal: &Portal<Prepared>) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let sql = bound_sql(portal)?;
        let cancel = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let formats = portal.result_column_format.clone();
        // Wire errors (the client left) end it as pgwire's; the statement's own go back to
        // the client.
        let work = async {
            let mut session = self.session.lock().await;
            let mut in_flight = InFlight::start(self, &sql);
            let execution = AssertUnwindSafe(self.shared.db.execute(&mut session, &sql)).catch_unwind();
            let result = match execution.await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => return Ok(Err(FrontendError::from(e))),
                Err(panic) => return Ok(Err(panicked(&*panic))),
            };
            let sent = match result {
                StatementResult::Subscribe(subscription) => stream_rows(client, &self.peer, *subscription, &formats, false).await?,
                StatementResult::CopySubscribe(subscription) => stream_copy(client, &self.peer, *subscription).await?,
                other => match self.respond(other, &formats) {
                    Ok(response) => {
                        send_response(client, response).await?;
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
            };
            in_flight.ok = sent.is_ok();
            Ok::<Result<()>, PgWireError>(sent)
        };
        let ran = match cancel {
            Some(cancel) => match future::select(Box::pin(work), cancel).await {
                future::Either::Left((ran, _)) => ran,
                future::Either::Right(_) => Err(PgWireError::QueryCanceled),
            },
            None => work.await,
        };
        match ran? {
            Ok(()) => {
                client.set_state(PgWireConnectionState::ReadyForQuery);
                Ok(())
            }
            Err(err) => Err(PgWireError::UserError(Box::new(error_info(&err, 0)))),
        }
    }

    /// After a statement failed outside the database (cancelled, a protocol error): an open
    /// block is aborted, as any error aborts it. Returns the status pgwire's error path turns
    /// into the one it reports (`T` becomes `E`).
    async fn abort_on_error(&self) -> TransactionStatus {
        let mut session = self.session.lock().await;
        match session.txn.as_mut() {
            Some(txn) => {
                txn.failed = true;
                TransactionStatus::Transaction
            }
            None => TransactionStatus::Idle,
        }
    }

    /// The result columns of `sql`, in `formats`; none for a command.
    async fn describe_sql(&self, sql: &str, formats: &Format) -> Result<Vec<FieldInfo>> {
        let session = self.session.lock().await;
        let description = AssertUnwindSafe(self.shared.db.describe(&session, sql)).catch_unwind();
        match description.await.map_err(|panic| panicked(&*panic))?? {
            Some(schema) => encode::field_infos(&schema, formats),
            None => Ok(Vec::new()),
        }
    }

    async fn describe_statement(
        &self,
        statement: &StoredStatement<Prepared>,
    ) -> Result<StatementDescription> {
        let parameters = statement.statement.parameter_types(&statement.parameter_types);
        let fields = self
            .describe_sql(&statement.statement.sql, &Format::UnifiedText)
            .await?;
        Ok(StatementDescription { parameters, fields })
    }

    async fn describe_portal(&self, portal: &Portal<Prepared>) -> Result<DescribePortalResponse> {
        let sql = bound_sql(portal)?;
        let fields = self
            .describe_sql(&sql, &portal.result_column_format)
            .await?;
        Ok(DescribePortalResponse::new(fields))
    }
}

#[async_trait]
impl StartupHandler for Connection {
    /// Without users (trust): the startup completes at once. With users: the password exchange
    /// ([`super::auth`]) runs first, and a wrong password ends the connection with 28P01.
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                let Some(auth) = &self.shared.auth else {
                    return self.complete_startup(client, None).await;
                };
                let begun = auth.driver.begin_authentication(client, auth.mechanism()).await;
                match begun.map_err(|e| refused(client, e))? {
                    AuthOutcome::InProgress => Ok(()),
                    AuthOutcome::Authenticated { final_message, .. } => self.complete_startup(client, final_message).await,
                }
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let Some(auth) = &self.shared.auth else { return Err(PgWireError::NoAuthenticationInProgress) };
                let advanced = auth.driver.advance_authentication(client, message).await;
                match advanced.map_err(|e| refused(client, e))? {
                    AuthOutcome::InProgress => Ok(()),
                    AuthOutcome::Authenticated { final_message, .. } => self.complete_startup(client, final_message).await,
                }
            }
            _ => Ok(()),
        }
    }
}

/// A failed password exchange as Postgres reports it: FATAL 28P01 `password authentication
/// failed for user "name"`, naming the startup's user (SCRAM's own user name is empty in
/// libpq's messages); other failures as pgwire has them. Fatal: the connection closes.
fn refused<C: ClientInfo>(client: &C, error: PgWireError) -> PgWireError {
    match error {
        PgWireError::InvalidPassword(_) => {
            let user = client.metadata().get(METADATA_USER).cloned().unwrap_or_default();
            debug!(user, peer = %client.socket_addr(), "password authentication failed");
            PgWireError::UserError(Box::new(pgwire::error::ErrorInfo::new(
                "FATAL".to_owned(),
                "28P01".to_owned(),
                format!("password authentication failed for user \"{user}\""),
            )))
        }
        other => other,
    }
}

impl Connection {
    /// The end of the startup, once the client is authenticated (or trusted): the password
    /// exchange's last message, the pid and cancel key, the connection's `pg_stat_activity`
    /// row and role, the server parameters, ReadyForQuery.
    async fn complete_startup<C>(&self, client: &mut C, final_message: Option<Authentication>) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // A session time zone the client asks for at startup (libpq's PGTZ or `options=-c
        // TimeZone=..`, pgjdbc's TimeZone) is the session's, reported back, as in Postgres,
        // which refuses the connection for one it does not know.
        let zone = startup_time_zone(client.metadata()).map_err(|value| {
            PgWireError::UserError(Box::new(pgwire::error::ErrorInfo::new(
                "FATAL".to_owned(),
                "22023".to_owned(),
                format!("invalid value for parameter \"TimeZone\": \"{value}\""),
            )))
        })?;
        if let Some(message) = final_message {
            client.send(PgWireBackendMessage::Authentication(message)).await?;
        }
        let (pid, secret_key) = self.shared.pids.generate(&*client);
        client.set_pid_and_secret_key(pid, secret_key.clone());
        let (handle, guard) = self.shared.connections.register(pid, secret_key);
        client
            .session_extensions()
            .insert::<Arc<ConnectionHandle>>(Arc::clone(&handle));
        client.session_extensions().insert::<ConnectionGuard>(guard);
        let parameters = StartupParameters { base: &self.shared.parameters, time_zone: zone.map(|z| z.name()) };
        finish_authentication(client, &parameters).await?;
        if let Some(zone) = zone {
            let mut session = self.session.lock().await;
            session.settings.insert(crate::sql::settings::LOCAL_TIME_ZONE.to_string(), zone.name());
            // What RESET returns to, as in Postgres.
            session.startup_settings = session.settings.clone();
        }
        let metadata = client.metadata();
        let user = metadata.get(METADATA_USER).cloned().unwrap_or_default();
        let now = now_ms();
        // pg_cancel_backend(pid) does what a CancelRequest with this connection's key does:
        // the statement's wait ends, and so does its work under the engine.
        let runtime = tokio::runtime::Handle::current();
        let interrupt = self.session.lock().await.interrupt.clone();
        let cancel: Canceller = Arc::new(move |shutting_down| {
            if shutting_down {
                interrupt.terminate();
            } else {
                interrupt.cancel();
            }
            let handle = Arc::clone(&handle);
            runtime.spawn(async move { handle.cancel().await });
        });
        self.shared.db.activities().open(Activity {
            pid,
            usename: user.clone(),
            datname: metadata.get(METADATA_DATABASE).cloned().unwrap_or_default(),
            application_name: metadata.get("application_name").cloned().unwrap_or_default(),
            client_addr: Some(client.socket_addr().ip().to_string()),
            backend_start: now,
            state: "idle",
            query: String::new(),
            query_start: None,
            state_change: now,
        }, cancel);
        self.pid.store(pid, Ordering::Relaxed);
        {
            let mut session = self.session.lock().await;
            session.pid = pid;
            session.read_only = self.shared.auth.as_ref().and_then(|a| a.users.role_of(&user)) == Some(Role::ReadOnly);
            session.user = user;
        }
        instruments().connections.inc();
        instruments().connections_total.inc();
        debug!(
            pid,
            user = client.metadata().get(METADATA_USER).map(String::as_str),
            database = client.metadata().get(METADATA_DATABASE).map(String::as_str),
            peer = %client.socket_addr(),
            tls = client.is_secure(),
            "connection started"
        );
        Ok(())
    }
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    /// As pgwire's default, but ReadyForQuery reports the session's transaction state (`I`,
    /// `T`, `E`: [`Session::transaction_state`]), which pgwire's status tracking cannot follow
    /// (a `ROLLBACK TO SAVEPOINT` ends a failed block's abort), and a cancelled statement
    /// aborts an open block as Postgres does.
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let cancel = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let ran = match cancel {
            Some(cancel) => match future::select(Box::pin(self.run_query_string(client, &query.query)), cancel).await {
                future::Either::Left((ran, _)) => ran,
                future::Either::Right(_) => Err(PgWireError::QueryCanceled),
            },
            None => self.run_query_string(client, &query.query).await,
        };
        if let Err(err) = ran {
            // pgwire's error path reports the status it holds, turned to `E` in a block.
            let status = self.abort_on_error().await;
            client.set_transaction_status(status);
            return Err(err);
        }
        let status = wire_status(self.session.lock().await.transaction_state());
        client.set_transaction_status(status);
        // During COPY FROM STDIN, ReadyForQuery follows the client's CopyDone.
        if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            client.set_state(PgWireConnectionState::ReadyForQuery);
            send_ready_for_query(client, status).await?;
        }
        Ok(())
    }

    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statements = match split_statements(query) {
            Ok(statements) => statements,
            Err(err) => return Ok(vec![Response::Error(Box::new(error_info(&err, 0)))]),
        };
        if statements.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        let mut session = self.session.lock().await;
        let mut responses = Vec::with_capacity(statements.len());
        let mut searched = 0;
        for statement in &statements {
            let offset = char_offset(query, statement, &mut searched);
            match self
                .run(&mut session, statement, &Format::UnifiedText)
                .await
            {
                // The client streams a COPY's rows next: nothing after it in this query string.
                Ok(response @ Response::CopyIn(_)) => {
                    responses.push(response);
                    break;
                }
                Ok(response) => responses.push(response),
                Err(err) => {
                    responses.push(Response::Error(Box::new(error_info(&err, offset))));
                    break;
                }
            }
        }
        Ok(responses)
    }
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Prepared;
    type QueryParser = StatementParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    /// As pgwire's default, then the session's transaction state as the status the next
    /// ReadyForQuery reports (see the simple protocol's `on_query`).
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let portal_name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let streaming = match client.portal_store().get_portal(portal_name) {
            Some(Entry::Value(portal)) if streams(&portal.statement.statement.sql) => Some(portal),
            _ => None,
        };
        let executed = match streaming {
            Some(portal) => self.execute_streaming(client, &portal).await,
            None => self._on_execute(client, message).await,
        };
        let status = match &executed {
            Ok(()) => wire_status(self.session.lock().await.transaction_state()),
            Err(_) => self.abort_on_error().await,
        };
        if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            client.set_transaction_status(status);
        }
        executed
    }

    /// As pgwire's default, but the description comes from the database, and a statement with
    /// parameters and no result answers NoData (pgwire would send an empty RowDescription).
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => {
                let description = match client.portal_store().get_statement(name) {
                    Some(Entry::Value(statement)) => self.describe_statement(&statement).await?,
                    Some(Entry::Empty) => StatementDescription::no_data(),
                    None => return Err(PgWireError::StatementNotFound(name.to_owned())),
                };
                send_describe_response(client, &description).await
            }
            TARGET_TYPE_BYTE_PORTAL => {
                let description = match client.portal_store().get_portal(name) {
                    Some(Entry::Value(portal)) => self.describe_portal(&portal).await?,
                    Some(Entry::Empty) => DescribePortalResponse::no_data(),
                    // A cursor DECLAREd in SQL is a portal too, as in Postgres (psycopg's
                    // server-side cursors describe it to learn their columns).
                    None => {
                        let cursor = self.session.lock().await.cursors.schema(name).await;
                        match cursor {
                            Ok(schema) => DescribePortalResponse::new(encode::field_infos(&schema, &Format::UnifiedText)?),
                            Err(_) => return Err(PgWireError::PortalNotFound(name.to_owned())),
                        }
                    }
                };
                send_describe_response(client, &description).await
            }
            other => Err(PgWireError::InvalidTargetType(other)),
        }
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // pgwire keeps the rows in the portal and hands out `max_rows` per Execute.
        let sql = bound_sql(portal)?;
        let mut session = self.session.lock().await;
        let zone = time_zone(&session);
        let response = self.run(&mut session, &sql, &portal.result_column_format).await;
        report_time_zone(client, &zone, &session).await?;
        send_notices(client, &mut session).await?;
        Ok(response?)
    }
}

/// A prepared statement: the text of exactly one statement, with the parameter types the
/// database inferred from it (`None` where it could not tell).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub sql: String,
    pub inferred: Vec<Option<Type>>,
}

impl Prepared {
    /// The parameter types: the client's declaration first, then the database's inference,
    /// then what the text around each `$n` says, else text.
    fn parameter_types(&self, declared: &[Option<Type>]) -> Vec<Type> {
        let n = declared.len().max(self.inferred.len());
        let merged: Vec<Option<Type>> = (0..n)
            .map(|i| {
                declared
                    .get(i)
                    .cloned()
                    .flatten()
                    .filter(|t| *t != Type::UNKNOWN)
                    .or_else(|| self.inferred.get(i).cloned().flatten())
            })
            .collect();
        params::parameter_types(&self.sql, &merged)
    }
}

/// Parse: turns a statement's text into a [`Prepared`] (none for an empty query).
pub struct StatementParser {
    db: Arc<Database>,
}

impl std::fmt::Debug for StatementParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatementParser")
    }
}

#[async_trait]
impl QueryParser for StatementParser {
    type Statement = Prepared;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut statements = split_statements(sql)?;
        let sql = match statements.len() {
            0 => return Ok(None),
            1 => statements.pop().expect("one statement"),
            _ => return Err(FrontendError::MultipleStatements.into()),
        };
        // Inference is a hint: a statement it cannot plan is still prepared, its errors come
        // at Describe or Execute.
        let inferred = AssertUnwindSafe(self.db.parameter_types(&sql))
            .catch_unwind()
            .await
            .ok()
            .and_then(|r| r.ok())
            .unwrap_or_default()
            .iter()
            .map(|t| t.as_ref().map(encode::pg_type))
            .collect();
        Ok(Some(Prepared { sql, inferred }))
    }

    fn get_parameter_types(&self, statement: &Prepared) -> PgWireResult<Vec<Type>> {
        Ok(statement.parameter_types(&[]))
    }

    /// Unused: [`Connection`]'s `on_describe` asks the database, which needs the session.
    fn get_result_schema(
        &self,
        _statement: &Prepared,
        _column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(Vec::new())
    }
}

/// Describe of a prepared statement: its parameter types, then its columns or NoData.
struct StatementDescription {
    parameters: Vec<Type>,
    fields: Vec<FieldInfo>,
}

impl DescribeResponse for StatementDescription {
    fn parameters(&self) -> Option<&[Type]> {
        Some(&self.parameters)
    }

    fn fields(&self) -> &[FieldInfo] {
        &self.fields
    }

    fn no_data() -> Self {
        Self {
            parameters: Vec::new(),
            fields: Vec::new(),
        }
    }

    fn is_no_data(&self) -> bool {
        self.fields.is_empty()
    }
}

/// Whether `sql` is a statement whose rows stream until it ends (SUBSCRIBE).
fn streams(sql: &str) -> bool {
    matches!(
        crate::sql::parser::parse_statement(sql),
        Ok(crate::sql::parser::WeirStatement::Subscribe(_) | crate::sql::parser::WeirStatement::CopySubscribe(_))
    )
}

/// The ReadyForQuery status of a session's transaction state.
fn wire_status(state: TransactionState) -> TransactionStatus {
    match state {
        TransactionState::Idle => TransactionStatus::Idle,
        TransactionState::InBlock => TransactionStatus::Transaction,
        TransactionState::Failed => TransactionStatus::Error,
    }
}

/// The portal's statement with its bound parameters substituted.
fn bound_sql(portal: &Portal<Prepared>) -> Result<String> {
    let statement = &portal.statement;
    let types = statement.statement.parameter_types(&statement.parameter_types);
    params::bind(
        &statement.statement.sql,
        &types,
        &portal.parameters,
        &portal.parameter_format,
    )
}

/// The server parameters sent at startup, with the session time zone the client asked for.
struct StartupParameters<'a> {
    base: &'a DefaultServerParameterProvider,
    time_zone: Option<String>,
}

impl ServerParameterProvider for StartupParameters<'_> {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<std::collections::HashMap<String, String>> {
        let mut parameters = self.base.server_parameters(client)?;
        if let Some(zone) = &self.time_zone {
            parameters.insert("TimeZone".to_owned(), zone.clone());
        }
        Some(parameters)
    }
}

/// The time zone a client's startup parameters ask for: `TimeZone` (any case), or `-c
/// TimeZone=..` / `--TimeZone=..` in `options`. A fixed offset is read as Postgres reads it
/// there and as libpq and pgjdbc send it, POSIX's way (`GMT-08:00` is 8 hours east, where
/// `SET TIME ZONE` reads Flink's `GMT-08:00`, 8 hours west). `Ok(None)` when they ask for
/// none; the value asked for when it is no zone.
fn startup_time_zone(metadata: &std::collections::HashMap<String, String>) -> std::result::Result<Option<crate::plan::time_zone::Zone>, String> {
    let mut asked = metadata.iter().find(|(k, _)| k.eq_ignore_ascii_case("timezone")).map(|(_, v)| v.clone());
    if let Some(options) = metadata.get("options") {
        let mut words = options.split_whitespace();
        while let Some(word) = words.next() {
            let setting = match word {
                "-c" => words.next().unwrap_or_default(),
                w => w.strip_prefix("-c").or_else(|| w.strip_prefix("--")).unwrap_or_default(),
            };
            if let Some((key, value)) = setting.split_once('=') {
                if key.eq_ignore_ascii_case("timezone") {
                    asked = Some(value.to_string());
                }
            }
        }
    }
    let Some(asked) = asked else { return Ok(None) };
    let trimmed = asked.trim();
    let posix = ["GMT", "UTC"].iter().find_map(|p| {
        let rest = trimmed.get(..3).filter(|head| head.eq_ignore_ascii_case(p)).map(|_| &trimmed[3..])?;
        let inverted = match rest.chars().next()? {
            '+' => format!("GMT-{}", &rest[1..]),
            '-' => format!("GMT+{}", &rest[1..]),
            _ => return None,
        };
        Some(inverted)
    });
    crate::plan::time_zone::Zone::session(posix.as_deref().unwrap_or(trimmed)).map(Some).map_err(|_| asked.clone())
}

/// The session's time zone, as its `TimeZone` ParameterStatus names it (a SET keeps the
/// zone's name).
fn time_zone(session: &Session) -> String {
    session.settings.get(crate::sql::settings::LOCAL_TIME_ZONE).cloned().unwrap_or_else(|| "UTC".to_owned())
}

/// A ParameterStatus of `TimeZone` when the statement changed the session's from `before`, as
/// Postgres reports a change of it (a `GUC_REPORT` setting) and drivers read it.
async fn report_time_zone<C>(client: &mut C, before: &str, session: &Session) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let now = time_zone(session);
    if now != before {
        let status = pgwire::messages::startup::ParameterStatus::new("TimeZone".into(), now);
        client.feed(PgWireBackendMessage::ParameterStatus(status)).await?;
    }
    Ok(())
}

/// Sends the notices and warnings the session's statements raised ([`crate::sql::notices`]) as
/// NoticeResponse messages, before the statement's result, as Postgres sends them: those at
/// least as severe as the session's `client_min_messages`.
async fn send_notices<C>(client: &mut C, session: &mut Session) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for notice in std::mem::take(&mut session.notices) {
        if !crate::sql::settings::sends_message(&session.settings, notice.severity) {
            continue;
        }
        let info = pgwire::error::ErrorInfo::new(notice.severity.to_owned(), notice.code.to_owned(), notice.message);
        client.feed(PgWireBackendMessage::NoticeResponse(info.into())).await?;
    }
    Ok(())
}

/// [`Database::split_statements`], a panic turned into an error.
fn split_statements(sql: &str) -> Result<Vec<String>> {
    match std::panic::catch_unwind(|| Database::split_statements(sql)) {
        Ok(statements) => Ok(statements?),
        Err(panic) => Err(panicked(&*panic)),
    }
}

/// The wire response of a statement's result: rows encoded lazily, batch by batch, in
/// `formats`; a command as its tag (`INSERT 0 n`, `DELETE n`, `CREATE TABLE`).
fn response(result: StatementResult, formats: &Format) -> Result<Response> {
    Ok(match result {
        StatementResult::Rows { schema, batches } => {
            let fields = Arc::new(encode::field_infos(&schema, formats)?);
            // pgwire counts the rows into the tag: `SELECT n`.
            Response::Query(QueryResponse::new(
                Arc::clone(&fields),
                data_rows(fields, batches),
            ))
        }
        StatementResult::Returned { tag, schema, batches } => {
            let fields = Arc::new(encode::field_infos(&schema, formats)?);
            let mut rows = QueryResponse::new(Arc::clone(&fields), data_rows(fields, batches));
            // pgwire appends the row count: `INSERT 0 n` as Postgres tags it.
            rows.set_command_tag(if tag == "INSERT" { "INSERT 0" } else { &tag });
            Response::Query(rows)
        }
        StatementResult::Command { tag, rows } => Response::Execution(command_tag(&tag, rows)),
        StatementResult::CopyOut { schema, batches, format } => {
            let fields = Arc::new(encode::field_infos(&schema, &Format::UnifiedText)?);
            let header = format.header.then(|| {
                let mut line = Vec::new();
                for (i, f) in schema.fields().iter().enumerate() {
                    if i > 0 {
                        line.push(format.delimiter);
                    }
                    crate::sql::copy::write_field(Some(f.name().as_bytes()), &format, &mut line);
                }
                line.push(b'\n');
                line
            });
            Response::CopyOut(CopyResponse::new(0, schema.fields().len(), copy_rows(fields, batches, format, header)))
        }
        StatementResult::CopyIn { .. } => return Err(FrontendError::from(crate::error::WeirError::internal("COPY FROM STDIN outside a query"))),
        // The extended protocol's Execute: rows as the client fetches them (with a row limit,
        // PortalSuspended flushes each piece; without one they go out as the socket's buffer
        // fills). The simple protocol flushes each epoch (`stream_rows`).
        StatementResult::Subscribe(subscription) => {
            let fields = Arc::new(encode::field_infos(subscription.schema(), formats)?);
            Response::Query(QueryResponse::new(Arc::clone(&fields), subscription_rows(fields, *subscription)))
        }
        StatementResult::CopySubscribe(subscription) => {
            let n = subscription.schema().fields().len();
            let fields = Arc::new(encode::field_infos(subscription.schema(), &Format::UnifiedText)?);
            let format = crate::sql::copy::CopyFormat::text();
            let lines = subscription_rows(Arc::clone(&fields), *subscription).map(move |row| row.map(|row| copy_line(&row, &format)));
            Response::CopyOut(CopyResponse::new(0, n, lines))
        }
    })
}

/// The CopyData messages of `batches` in COPY `format`, one per row (pgwire counts them into
/// the `COPY n` tag); `header` goes before the first row.
fn copy_rows(
    fields: Arc<Vec<FieldInfo>>,
    batches: Vec<RecordBatch>,
    format: crate::sql::copy::CopyFormat,
    header: Option<Vec<u8>>,
) -> impl Stream<Item = PgWireResult<CopyData>> + Send + 'static {
    let mut header = header;
    let no_rows = batches.iter().all(|b| b.num_rows() == 0);
    let lone_header = if no_rows { header.take() } else { None };
    let rows = stream::iter(batches).flat_map(move |batch| {
        let lines: PgWireResult<Vec<CopyData>> = encode::encode_batch(&batch, &fields)
            .map(|rows| {
                rows.iter()
                    .map(|row| {
                        let line = copy_line(row, &format);
                        match header.take() {
                            Some(mut first) => {
                                first.extend_from_slice(&line.data);
                                CopyData::new(first.into())
                            }
                            None => line,
                        }
                    })
                    .collect()
            })
            .map_err(Into::into);
        match lines {
            Ok(lines) => stream::iter(lines).map(Ok).left_stream(),
            Err(err) => stream::once(future::ready(Err(err))).right_stream(),
        }
    });
    stream::iter(lone_header.map(|h| Ok(CopyData::new(h.into())))).chain(rows)
}

/// One row as a line of COPY `format`.
fn copy_line(row: &DataRow, format: &crate::sql::copy::CopyFormat) -> CopyData {
    let mut line = Vec::new();
    for (i, value) in data_row_fields(row).into_iter().enumerate() {
        if i > 0 {
            line.push(format.delimiter);
        }
        crate::sql::copy::write_field(value, format, &mut line);
    }
    line.push(b'\n');
    CopyData::new(line.into())
}

/// A subscription's rows as DataRows, encoded one batch at a time as they come; ends with its
/// error.
fn subscription_rows(
    fields: Arc<Vec<FieldInfo>>,
    subscription: Subscription,
) -> impl Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    stream::unfold(Some(subscription), move |state| {
        let fields = Arc::clone(&fields);
        async move {
            let mut subscription = state?;
            match subscription.next().await {
                Ok(batch) => match encode::encode_batch(&batch, &fields) {
                    Ok(rows) => Some((stream::iter(rows.into_iter().map(Ok)).left_stream(), Some(subscription))),
                    Err(e) => Some((stream::once(future::ready(Err(e.into()))).right_stream(), None)),
                },
                Err(e) => Some((stream::once(future::ready(Err(FrontendError::from(e).into()))).right_stream(), None)),
            }
        }
    })
    .flatten()
}

/// Streams a subscription's rows: RowDescription (the simple protocol: `describe`), then each
/// batch's DataRows in `formats`, flushed, until it ends (its error is returned, for the caller
/// to send) or the client leaves (a write error, or `peer` hung up).
async fn stream_rows<C>(
    client: &mut C,
    peer: &PeerSocket,
    subscription: Subscription,
    formats: &Format,
    describe: bool,
) -> PgWireResult<Result<()>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let fields = match encode::field_infos(subscription.schema(), formats) {
        Ok(fields) => Arc::new(fields),
        Err(e) => return Ok(Err(e)),
    };
    // The extended protocol described the rows at Describe.
    if describe {
        let description = pgwire::messages::data::RowDescription::new(fields.iter().map(Into::into).collect());
        client.send(PgWireBackendMessage::RowDescription(description)).await?;
    }
    send_batches(client, peer, subscription, &fields, PgWireBackendMessage::DataRow).await
}

/// Sends each of `subscription`'s batches as rows encoded by `fields`, each row one message
/// made by `message`, flushed per batch, until the subscription ends (its error returned) or
/// the client leaves (a write error, or `peer` hung up).
async fn send_batches<C>(
    client: &mut C,
    peer: &PeerSocket,
    mut subscription: Subscription,
    fields: &[FieldInfo],
    message: impl Fn(DataRow) -> PgWireBackendMessage,
) -> PgWireResult<Result<()>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    loop {
        let batch = match peer.next_batch(&mut subscription).await? {
            Ok(batch) => batch,
            Err(e) => return Ok(Err(e.into())),
        };
        let rows = match encode::encode_batch(&batch, fields) {
            Ok(rows) => rows,
            Err(e) => return Ok(Err(e)),
        };
        for row in rows {
            client.feed(message(row)).await?;
        }
        client.flush().await?;
    }
}

/// Streams a subscription's rows as `COPY ... TO STDOUT` text, each batch flushed; as
/// [`stream_rows`].
async fn stream_copy<C>(client: &mut C, peer: &PeerSocket, subscription: Subscription) -> PgWireResult<Result<()>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let n = subscription.schema().fields().len();
    let fields = match encode::field_infos(subscription.schema(), &Format::UnifiedText) {
        Ok(fields) => fields,
        Err(e) => return Ok(Err(e)),
    };
    let format = crate::sql::copy::CopyFormat::text();
    let header = pgwire::messages::copy::CopyOutResponse::new(0, n as i16, vec![0; n]);
    client.send(PgWireBackendMessage::CopyOutResponse(header)).await?;
    send_batches(client, peer, subscription, &fields, |row| PgWireBackendMessage::CopyData(copy_line(&row, &format))).await
}

/// Sends one statement's response as pgwire's simple-query loop does.
async fn send_response<C>(client: &mut C, response: Response) -> PgWireResult<()>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    match response {
        Response::EmptyQuery => client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?,
        Response::Query(rows) => send_query_response(client, rows, true).await?,
        Response::Execution(tag) | Response::TransactionStart(tag) | Response::TransactionEnd(tag) => {
            send_execution_response(client, tag).await?;
        }
        Response::Error(e) => client.feed(PgWireBackendMessage::ErrorResponse((*e).into())).await?,
        Response::CopyIn(copy) => {
            send_copy_in_response(client, copy).await?;
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        }
        Response::CopyOut(copy) => send_copy_out_response(client, copy).await?,
        Response::CopyBoth(copy) => {
            send_copy_both_response(client, copy).await?;
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        }
    }
    Ok(())
}

/// The fields of an encoded DataRow (each an i32 length, -1 for NULL, then its bytes).
fn data_row_fields(row: &DataRow) -> Vec<Option<&[u8]>> {
    let mut out = Vec::with_capacity(row.field_count.max(0) as usize);
    let mut rest: &[u8] = &row.data;
    for _ in 0..row.field_count {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else { break };
        let len = i32::from_be_bytes(*len);
        if len < 0 {
            out.push(None);
            rest = tail;
        } else {
            let (value, tail) = tail.split_at((len as usize).min(tail.len()));
            out.push(Some(value));
            rest = tail;
        }
    }
    out
}

#[async_trait]
impl CopyHandler for Connection {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(pending) = self.copy_in.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            pending.data.extend_from_slice(&copy_data.data);
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let pending = self.copy_in.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let Some(PendingCopy { table, columns, format, data }) = pending else { return Ok(()) };
        let sql = format!("COPY {table} FROM STDIN");
        let mut in_flight = InFlight::start(self, &sql);
        let mut session = self.session.lock().await;
        let copied = AssertUnwindSafe(self.shared.db.copy_in(&mut session, &table, &columns, &format, &data)).catch_unwind();
        match copied.await.map_err(|panic| panicked(&*panic)).and_then(|r| r.map_err(FrontendError::from)) {
            Ok(rows) => {
                in_flight.ok = true;
                client.set_transaction_status(wire_status(session.transaction_state()));
                client.send(PgWireBackendMessage::CommandComplete(Tag::new("COPY").with_rows(rows).into())).await?;
                Ok(())
            }
            Err(err) => {
                // pgwire's error path turns `T` into `E`.
                let status = if session.txn.is_some() { TransactionStatus::Transaction } else { TransactionStatus::Idle };
                client.set_transaction_status(status);
                Err(PgWireError::UserError(Box::new(error_info(&err, 0))))
            }
        }
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.copy_in.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let status = self.abort_on_error().await;
        client.set_transaction_status(status);
        PgWireError::UserError(Box::new(pgwire::error::ErrorInfo::new(
            "ERROR".to_owned(),
            "57014".to_owned(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}

/// The `DataRow`s of `batches`, encoded one batch at a time as the client reads them.
fn data_rows(
    fields: Arc<Vec<FieldInfo>>,
    batches: Vec<RecordBatch>,
) -> impl Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    stream::iter(batches).flat_map(move |batch| match encode::encode_batch(&batch, &fields) {
        Ok(rows) => stream::iter(rows).map(Ok).left_stream(),
        Err(err) => stream::once(future::ready(Err(err.into()))).right_stream(),
    })
}

/// The CommandComplete tag: `INSERT 0 n` (the 0 is the OID Postgres no longer assigns),
/// `<TAG> n` when there is a count, else the tag alone.
fn command_tag(tag: &str, rows: Option<usize>) -> Tag {
    match rows {
        Some(rows) if tag == "INSERT" => Tag::new(tag).with_oid(0).with_rows(rows),
        Some(rows) => Tag::new(tag).with_rows(rows),
        None => Tag::new(tag),
    }
}

/// The number of characters of `query` before `statement`, found at or after byte `*searched`
/// (which then moves past it); 0 when the statement is not a verbatim part of the query.
fn char_offset(query: &str, statement: &str, searched: &mut usize) -> usize {
    let statement = statement.trim();
    match query.get(*searched..).and_then(|rest| rest.find(statement)) {
        Some(found) => {
            let start = *searched + found;
            *searched = start + statement.len();
            query[..start].chars().count()
        }
        None => 0,
    }
}

/// The error for a statement that panicked.
fn panicked(panic: &(dyn Any + Send)) -> FrontendError {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "the statement panicked".to_owned());
    tracing::error!("statement panicked: {message}");
    FrontendError::Panic(message)
}

#[cfg(test)]
mod tests {
    use pgwire::messages::response::CommandComplete;

    use super::*;

    fn tag_text(tag: Tag) -> String {
        CommandComplete::from(tag).tag
    }

    #[test]
    fn command_tags_read_like_postgres() {
        assert_eq!(tag_text(command_tag("INSERT", Some(3))), "INSERT 0 3");
        assert_eq!(tag_text(command_tag("DELETE", Some(2))), "DELETE 2");
        assert_eq!(tag_text(command_tag("CREATE TABLE", None)), "CREATE TABLE");
    }

    #[test]
    fn offsets_count_characters_before_each_statement() {
        let query = "SELECT 'é'; SELEC 1";
        let mut searched = 0;
        assert_eq!(char_offset(query, "SELECT 'é'", &mut searched), 0);
        assert_eq!(char_offset(query, "SELEC 1", &mut searched), 12);
        assert_eq!(char_offset(query, "not there", &mut searched), 0);
    }

    #[test]
    fn panics_become_internal_errors() {
        let panic = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
        let err = panicked(&*panic);
        assert_eq!(err.sqlstate(), "XX000");
        assert_eq!(err.to_string(), "internal error: boom");
    }
}

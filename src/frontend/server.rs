//! The accept loop: one task per client socket, each with its own [`Connection`], until
//! shutdown.
//!
//! Server-wide state ([`Shared`]) is the database, the registry that routes a CancelRequest
//! (which arrives on a new socket, with the key the target connection got at startup) to the
//! connection it names, and the parameters reported at startup.
//!
//! # Shutdown
//! When the `shutdown` future completes the listener is closed, the open connections' running
//! statements are cancelled (a write or a backfill under the engine stops at its next check and
//! rolls back: [`crate::engine::interrupt`]), the connections are aborted, and [`serve`]
//! returns.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use pgwire::api::auth::md5pass::Md5PasswordAuth;
use pgwire::api::auth::mechanism::{AuthMechanism, AuthMechanismFactory};
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::{AuthDriver, DefaultServerParameterProvider, StartupHandler};
use async_trait::async_trait;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::{ConnectionManager, PgWireServerHandlers, RandomPidSecretKeyGenerator};
use pgwire::tokio::process_socket;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use super::auth::{AuthMethod, Users, UsersSource};
use super::connection::{Connection, PeerSocket, SERVER_VERSION};
use crate::sql::database::Database;

/// How long to wait after a failed accept (out of file descriptors, ...) before the next.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Who may connect and how: the users (none: trust everyone) and the TLS acceptor (none:
/// plain connections only, an SSLRequest is answered `N`).
#[derive(Default)]
pub struct ServerOptions {
    pub users: Option<Arc<Users>>,
    pub tls: Option<pgwire::tokio::TlsAcceptor>,
}

/// Binds `addr`, logs `listening on <address>`, and serves Postgres clients on it until
/// `shutdown` completes.
///
/// # Errors
/// When `addr` cannot be bound or resolved.
pub async fn serve(
    addr: impl ToSocketAddrs,
    db: Arc<Database>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_listener(listener, db, options, shutdown).await
}

/// Serves Postgres clients on an already bound `listener` (tests bind port 0 and read
/// `listener.local_addr()` first) until `shutdown` completes. Logs `listening on <address>`,
/// and a warning when the address is not a loopback one and every client is trusted.
///
/// # Errors
/// When the listener's address cannot be read; failed accepts are logged and retried.
pub async fn serve_listener(
    listener: TcpListener,
    db: Arc<Database>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let addr = listener.local_addr()?;
    // Alone on its line: tests and scripts read the address from it.
    info!("listening on {addr}");
    let auth = options.users.as_ref().map_or("trust (no users)", |u| match u.method() {
        AuthMethod::ScramSha256 => "scram-sha-256",
        AuthMethod::Md5 => "md5",
    });
    info!("client authentication: {auth}; TLS: {}", if options.tls.is_some() { "on" } else { "off" });
    if options.users.is_none() && !addr.ip().is_loopback() {
        warn!(
            "!!! listening on {addr}, a non-loopback address, WITHOUT AUTHENTICATION: anyone who can reach it can read and change every table. Pass --auth-file or --password (and --tls-cert/--tls-key), or listen on 127.0.0.1 !!!"
        );
    }
    let tls = options.tls.clone();
    let shared = Arc::new(Shared::new(db, options));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let handlers = ConnectionHandlers::new(&shared, PeerSocket::of(&socket));
                    let tls = tls.clone();
                    connections.spawn(async move {
                        if let Err(err) = process_socket(socket, tls, handlers).await {
                            debug!(%peer, "connection ended: {err}");
                        }
                    });
                }
                Err(err) => {
                    warn!("accepting a connection failed: {err}");
                    tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                }
            },
            Some(finished) = connections.join_next(), if !connections.is_empty() => {
                if let Err(err) = finished {
                    if err.is_panic() {
                        error!("a connection task panicked: {err}");
                    }
                }
            }
        }
    }
    drop(listener);
    info!(
        "stopped accepting connections; closing {} open",
        connections.len()
    );
    shared.db.activities().shut_down();
    connections.shutdown().await;
    Ok(())
}

/// State shared by all connections of a server.
pub(crate) struct Shared {
    /// The database every statement runs against.
    pub(crate) db: Arc<Database>,
    /// Cancel keys of the open connections.
    pub(crate) connections: Arc<ConnectionManager>,
    /// Hands each connection a distinct process id and a random secret key.
    pub(crate) pids: RandomPidSecretKeyGenerator,
    /// ParameterStatus values sent at startup.
    pub(crate) parameters: DefaultServerParameterProvider,
    /// Routes CancelRequests through `connections`.
    cancel: Arc<CancelRequests>,
    /// Password authentication, when the server has users.
    pub(crate) auth: Option<Auth>,
}

/// Password authentication: the users, and the driver of pgwire's mechanisms.
pub(crate) struct Auth {
    pub(crate) users: Arc<Users>,
    pub(crate) driver: AuthDriver<DefaultServerParameterProvider>,
    scram: ScramAuth,
    md5: Md5PasswordAuth<UsersSource>,
}

impl Auth {
    fn new(users: Arc<Users>) -> Self {
        let mut scram = ScramAuth::new(Arc::new(UsersSource(Arc::clone(&users))));
        scram.set_iterations(super::auth::SCRAM_ITERATIONS);
        let md5 = Md5PasswordAuth::new(Arc::new(UsersSource(Arc::clone(&users))));
        Self { users, driver: AuthDriver::new(DefaultServerParameterProvider::default()), scram, md5 }
    }

    /// A fresh password exchange of the server's method.
    pub(crate) fn mechanism(&self) -> Box<dyn AuthMechanism> {
        match self.users.method() {
            AuthMethod::ScramSha256 => self.scram.create(),
            AuthMethod::Md5 => self.md5.create(),
        }
    }
}

impl Shared {
    fn new(db: Arc<Database>, options: ServerOptions) -> Self {
        let connections = Arc::new(ConnectionManager::new());
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = SERVER_VERSION.to_owned();
        parameters.date_style = "ISO, MDY".to_owned();
        // The session time zone a session starts in (`SET TIME ZONE` changes it).
        parameters.time_zone = "UTC".to_owned();
        Self {
            cancel: Arc::new(CancelRequests { connections: Arc::clone(&connections), db: Arc::clone(&db) }),
            db,
            connections,
            pids: RandomPidSecretKeyGenerator::default(),
            parameters,
            auth: options.users.map(Auth::new),
        }
    }
}

/// Routes a CancelRequest to the connection it names: pgwire's registry checks the key and
/// ends the statement's wait; the connection's interrupt then stops the statement's work under
/// the engine too ([`crate::observe::Activities::cancel`], as `pg_cancel_backend`).
pub(crate) struct CancelRequests {
    connections: Arc<ConnectionManager>,
    db: Arc<Database>,
}

#[async_trait]
impl CancelHandler for CancelRequests {
    async fn on_cancel_request(&self, request: pgwire::messages::cancel::CancelRequest) {
        if self.connections.cancel(request.pid, &request.secret_key).await {
            self.db.activities().cancel(request.pid);
        }
    }
}

/// The handlers of one socket: pgwire asks for them once, when the socket opens.
struct ConnectionHandlers {
    connection: Arc<Connection>,
    cancel: Arc<CancelRequests>,
}

impl ConnectionHandlers {
    fn new(shared: &Arc<Shared>, peer: PeerSocket) -> Self {
        Self {
            connection: Arc::new(Connection::new(Arc::clone(shared), peer)),
            cancel: Arc::clone(&shared.cancel),
        }
    }
}

impl PgWireServerHandlers for ConnectionHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.connection)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.connection)
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::clone(&self.connection)
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::clone(&self.cancel)
    }

    fn copy_handler(&self) -> Arc<impl pgwire::api::copy::CopyHandler> {
        Arc::clone(&self.connection)
    }
}

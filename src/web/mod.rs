//! The HTTP side of `weir serve` (`--http-listen`, by default 127.0.0.1:5489), read-only:
//!
//! | path | what |
//! |---|---|
//! | `/` | the web page: jobs and views with status, throughput, lag, watermark and freshness, and each job's dataflow graph, refreshed every second (`assets/`, served from the binary) |
//! | `/api/state` | what the page draws, as JSON: [`SystemState`](crate::engine::SystemState) with the server's clock |
//! | `/metrics` | the Prometheus exposition ([`metrics`]) |
//! | `/health` | liveness and readiness: 200 with the last committed epoch once the server serves (the state is loaded before this port opens) |
//!
//! Nothing here holds a lock a job or statement waits for while it writes a response: the
//! figures are copied out under the engine's read lock ([`Database::system_state`]); if a
//! statement holds the engine for longer than
//! [`STATE_WAIT`](crate::sql::database::STATE_WAIT), the page and the metrics show the
//! figures of the last look (marked `stale` in `/api/state`) rather than wait.

pub mod metrics;

use std::future::Future;
use std::io;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;
use tracing::info;

use crate::sql::database::Database;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// What the handlers share.
struct Web {
    db: Arc<Database>,
}

/// The routes, over `db`.
pub fn router(db: Arc<Database>) -> Router {
    let web = Arc::new(Web { db });
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }))
        .route("/metrics", get(metrics_text))
        .route("/health", get(health))
        .route("/api/state", get(api_state))
        .with_state(web)
}

/// Logs `web page and metrics on http://ADDR` and serves [`router`] on `listener` until
/// `shutdown` completes.
///
/// # Errors
/// When the listener's address cannot be read or accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    db: Arc<Database>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    info!("web page and metrics on http://{}", listener.local_addr()?);
    axum::serve(listener, router(db)).with_graceful_shutdown(shutdown).await
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

async fn metrics_text(State(web): State<Arc<Web>>) -> Response {
    let (state, _) = web.db.system_state().await;
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], metrics::render(state)).into_response()
}

async fn health(State(web): State<Arc<Web>>) -> Response {
    let last = web.db.last_commit();
    Json(serde_json::json!({ "status": "up", "epoch": last.epoch, "committed_at_ms": last.committed_at_ms }))
        .into_response()
}

async fn api_state(State(web): State<Arc<Web>>) -> Response {
    let (state, stale) = web.db.system_state().await;
    Json(serde_json::json!({ "now_ms": crate::observe::now_ms(), "stale": stale, "state": *state })).into_response()
}

//! The HTTP API: the router, and the layer every request passes (request id, API key and
//! scope, metrics, the request log).

mod admin;
mod fields;
mod search;
mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::auth::Scope;
use crate::error::ApiError;
use crate::state::App;

/// Every route: method, path and the scope it needs (`None`: public). The OpenAPI document
/// (`docs/openapi.json`) describes exactly these; a test holds the two together.
pub const ROUTES: [(&str, &str, Option<Scope>); 15] = [
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/openapi.json", None),
    ("GET", "/metrics", Some(Scope::Read)),
    ("GET", "/indexes", Some(Scope::Read)),
    ("GET", "/indexes/{name}", Some(Scope::Read)),
    ("POST", "/indexes/{name}/search", Some(Scope::Read)),
    ("POST", "/indexes/{name}/contains", Some(Scope::Read)),
    ("POST", "/indexes/{name}/insert", Some(Scope::Write)),
    ("POST", "/indexes/{name}/upsert", Some(Scope::Write)),
    ("POST", "/indexes/{name}/delete", Some(Scope::Write)),
    ("POST", "/indexes/{name}/merge", Some(Scope::Write)),
    ("GET", "/indexes/{name}/merge", Some(Scope::Read)),
    ("POST", "/indexes/{name}/flush", Some(Scope::Write)),
    ("POST", "/indexes/{name}/verify", Some(Scope::Write)),
];

/// The OpenAPI document served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("../../../../docs/openapi.json");

/// The router of the whole API.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/openapi.json", get(admin::openapi))
        .route("/metrics", get(admin::metrics))
        .route("/indexes", get(admin::list))
        .route("/indexes/{name}", get(admin::info))
        .route("/indexes/{name}/search", post(search::search))
        .route("/indexes/{name}/contains", post(write::contains))
        .route("/indexes/{name}/insert", post(write::insert))
        .route("/indexes/{name}/upsert", post(write::upsert))
        .route("/indexes/{name}/delete", post(write::delete))
        .route(
            "/indexes/{name}/merge",
            post(admin::merge).get(admin::merge_status),
        )
        .route("/indexes/{name}/flush", post(write::flush))
        .route("/indexes/{name}/verify", post(admin::verify))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app)
}

async fn fallback(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint {} {}; the API is described at /openapi.json",
        req.method(),
        req.uri().path()
    ))
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

/// The scope `method path` needs (`None`: public, or no such route).
fn scope_of(method: &Method, route: &str) -> Option<Scope> {
    ROUTES
        .iter()
        .find(|(m, p, _)| *m == method.as_str() && *p == route)
        .and_then(|r| r.2)
}

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(1);

/// The id of a request: the client's `X-Request-Id` when it is short and printable, else a
/// fresh one.
fn request_id(req: &Request) -> String {
    req.headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| {
            format!(
                "{:x}-{:x}",
                std::process::id(),
                REQUEST_SEQ.fetch_add(1, Ordering::Relaxed)
            )
        })
}

/// Every request: its id (echoed in `X-Request-Id`), the API key's scope, the in-flight
/// gauge, the request counter and latency histogram, and one log line.
async fn observe(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let t = Instant::now();
    let id = request_id(&req);
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_string();
    let path = req.uri().path().to_string();
    app.metrics.in_flight.inc();
    // The handler's own events carry the request id at debug level (a span recorded for every
    // request costs an overloaded server time it does not have); the request's log line below
    // carries it at every level.
    let span = tracing::debug_span!("request", id = %id);
    let mut resp = match scope_of(&method, &route) {
        Some(need) => match app.config.keys.check(req.headers(), need) {
            Ok(()) => tracing::Instrument::instrument(next.run(req), span.clone()).await,
            Err(e) => e.into_response(),
        },
        None => tracing::Instrument::instrument(next.run(req), span.clone()).await,
    };
    app.metrics.in_flight.dec();
    let status = resp.status();
    let secs = t.elapsed().as_secs_f64();
    app.metrics
        .requests
        .with_label_values(&[route.as_str(), status.as_str()])
        .inc();
    app.metrics
        .latency
        .with_label_values(&[route.as_str()])
        .observe(secs);
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    let ms = secs * 1e3;
    let probe = route == "/readyz" || route == "/healthz";
    if probe || status == axum::http::StatusCode::TOO_MANY_REQUESTS {
        // Probes poll (a 503 before the indexes are ready is their answer, not a failure),
        // and a 429 is backpressure working (counted in the metrics): an overloaded server
        // must not also write a log line per refusal.
        tracing::debug!(%id, %method, %path, status = status.as_u16(), ms, "request");
    } else if status.is_server_error() {
        tracing::error!(%id, %method, %path, status = status.as_u16(), ms, "request failed");
    } else if status.is_client_error() {
        tracing::info!(%id, %method, %path, status = status.as_u16(), ms, "request refused");
    } else {
        tracing::debug!(%id, %method, %path, status = status.as_u16(), ms, "request");
    }
    resp
}

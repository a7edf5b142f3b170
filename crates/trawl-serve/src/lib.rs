//! trawl's network service (`trawl serve`): search and updates of any index kind over HTTP.
//!
//! - **API** ([`routes`]): `GET /indexes`, `GET /indexes/{name}`, `POST
//!   /indexes/{name}/search | insert | upsert | delete | contains | merge | flush | verify`,
//!   `GET /healthz`, `/readyz`, `/metrics`, `/openapi.json` (the document is
//!   `docs/openapi.json`). Bodies are JSON, or for vectors `.npy` / raw little-endian values.
//! - **Searches** run on search threads of their own ([`sched`]), never on the async runtime,
//!   behind a bounded queue (`429` with `Retry-After` beyond it) that splits batches into
//!   chunks taking turns, so a huge batch cannot starve single queries.
//! - **Writes** are acknowledged once the write-ahead log holds them (synced by default);
//!   merges run in the background, searches and writes going on.
//! - **Security** ([`auth`]): API keys with read and write scopes; TLS with rustls; limits on
//!   body size, vectors per request, k and request time; loopback unless keys are given.
//! - **Observability** ([`metrics`]): Prometheus text; `tracing` logs with a request id.
//! - **Shutdown**: SIGTERM finishes the requests in flight, syncs every log and returns.

pub mod auth;
pub mod body;
pub mod config;
pub mod error;
pub mod metrics;
pub mod routes;
pub mod sched;
mod server;
pub mod state;
mod tls;

pub use config::{IndexSpec, Limits, ServeConfig, TlsFiles};
pub use server::run;

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is wrong (a missing index, a bad key file, a refused address).
    #[error("{0}")]
    Config(String),
    /// The operating system refused (binding the address, threads, syncing a log).
    #[error("{0}")]
    Io(String),
}

/// Sends the service's logs to stderr: one line per event, as text or (`json`) JSON objects;
/// `RUST_LOG` overrides the level (`info` by default).
pub fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // A second call (tests) keeps the first subscriber.
    let _ = if json {
        b.json().try_init()
    } else {
        b.try_init()
    };
}

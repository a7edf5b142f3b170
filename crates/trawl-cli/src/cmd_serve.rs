//! `trawl serve`: the network service over one or many indexes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use trawl_serve::auth::ApiKeys;
use trawl_serve::{IndexSpec, Limits, ServeConfig, TlsFiles};

use crate::cmd_index::SearchOptions;

/// Environment variable holding API keys (`read:KEY,write:KEY`) when no key file is given.
pub const KEYS_ENV: &str = "TRAWL_API_KEYS";

/// Arguments of `trawl serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The indexes: `DIR` (served under its directory's name) or `NAME=DIR`.
    #[arg(required = true)]
    pub indexes: Vec<String>,
    /// Address to listen on (loopback by default; another address needs API keys or
    /// --insecure).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: SocketAddr,
    /// API keys, one `read:KEY` or `write:KEY` per line (else from $TRAWL_API_KEYS; none: every
    /// request is allowed).
    #[arg(long)]
    pub api_keys: Option<PathBuf>,
    /// Serve a non-loopback address without API keys.
    #[arg(long)]
    pub insecure: bool,
    /// TLS certificate chain (PEM); with --tls-key, the service speaks HTTPS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Open every index read-only (else graph indexes take inserts, upserts, deletes and
    /// merges).
    #[arg(long)]
    pub read_only: bool,
    /// Largest request body, in MiB.
    #[arg(long, default_value_t = 64.0)]
    pub max_body_mb: f64,
    /// Most vectors (or ids) in one request.
    #[arg(long, default_value_t = 10_000)]
    pub max_vectors: usize,
    /// Largest k of a search.
    #[arg(long, default_value_t = 1_000)]
    pub max_k: usize,
    /// Longest a search may take, waiting included, in seconds (then 408).
    #[arg(long, default_value_t = 30.0)]
    pub request_timeout: f64,
    /// Search threads (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub search_threads: usize,
    /// Search requests that may wait, not started, for a search thread; beyond, 429 (0: half
    /// the search threads, at least 1: an admitted request then waits about half a search).
    #[arg(long, default_value_t = 0)]
    pub queue: usize,
    /// Queries of a request searched in one turn: larger batches are split and take turns
    /// with other requests.
    #[arg(long, default_value_t = 16)]
    pub chunk: usize,
    /// Writes that may wait at once; beyond, 429.
    #[arg(long, default_value_t = 64)]
    pub max_pending_writes: usize,
    /// Threads of a merge (0: one per core; merges run at a lower priority than searches).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub merge_threads: usize,
    /// Threads answering HTTP (0: one per two cores, at least 1, at most 4).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub io_threads: usize,
    /// Write logs as JSON lines (else text); RUST_LOG sets the level.
    #[arg(long)]
    pub log_json: bool,
    /// Open options of every index and the default search parameters of every request (a
    /// request's `params` override them; --threads is not used: see --search-threads).
    #[command(flatten)]
    pub opts: SearchOptions,
}

/// `NAME=DIR` or `DIR` (named after its last path component).
fn index_spec(s: &str) -> Result<IndexSpec> {
    let (name, dir) = match s.split_once('=') {
        Some((n, d)) if !n.is_empty() && !n.contains('/') => (n.to_string(), PathBuf::from(d)),
        _ => {
            let dir = PathBuf::from(s);
            let name = dir
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .with_context(|| format!("{s}: no such index directory"))?;
            (name, dir)
        }
    };
    trawl_serve::config::check_name(&name).map_err(anyhow::Error::msg)?;
    Ok(IndexSpec { name, dir })
}

fn api_keys(path: Option<&PathBuf>) -> Result<ApiKeys> {
    match (path, std::env::var(KEYS_ENV)) {
        (Some(p), _) => ApiKeys::from_file(p).map_err(anyhow::Error::msg),
        (None, Ok(text)) if !text.trim().is_empty() => {
            ApiKeys::parse(&text, KEYS_ENV).map_err(anyhow::Error::msg)
        }
        _ => Ok(ApiKeys::default()),
    }
}

/// The service's configuration from the flags.
pub fn config(args: &ServeArgs) -> Result<ServeConfig> {
    if args.opts.threads != 1 {
        bail!("trawl serve: --threads is not used; give --search-threads");
    }
    if args.opts.filter.filter.is_some() || args.opts.filter.filters.is_some() {
        bail!("trawl serve: filters are given per request (\"filter\"), not on the command line");
    }
    let indexes = args
        .indexes
        .iter()
        .map(|s| index_spec(s))
        .collect::<Result<Vec<_>>>()?;
    let mut c = ServeConfig::new(indexes, args.listen);
    c.options = args.opts.options(None);
    c.read_only = args.read_only;
    c.keys = api_keys(args.api_keys.as_ref())?;
    c.insecure = args.insecure;
    c.tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    if !(args.max_body_mb.is_finite() && args.max_body_mb > 0.0) {
        bail!("--max-body-mb must be a positive number");
    }
    if !(args.request_timeout.is_finite() && args.request_timeout > 0.0) {
        bail!("--request-timeout must be a positive number of seconds");
    }
    c.limits = Limits {
        max_body_bytes: (args.max_body_mb * 1048576.0) as usize,
        max_vectors: args.max_vectors,
        max_k: args.max_k,
        request_timeout: Duration::from_secs_f64(args.request_timeout),
    };
    if args.search_threads > 0 {
        c.search_threads = args.search_threads;
    }
    c.queue = match args.queue {
        0 => (c.search_threads / 2).max(1),
        q => q,
    };
    c.chunk = args.chunk;
    c.max_pending_writes = args.max_pending_writes;
    c.merge_threads = args.merge_threads;
    if args.io_threads > 0 {
        c.io_threads = args.io_threads;
    }
    Ok(c)
}

/// `trawl serve`.
pub fn run(args: &ServeArgs) -> Result<()> {
    let c = config(args)?;
    trawl_serve::init_logging(args.log_json);
    let scheme = if c.tls.is_some() { "https" } else { "http" };
    let names: Vec<String> = c.indexes.iter().map(|s| s.name.clone()).collect();
    trawl_serve::run(c, |addr| {
        // The one line on stdout: the address (a port of 0 is chosen by the system), for
        // scripts and tests to read.
        println!(
            "listening on {scheme}://{addr} (indexes: {})",
            names.join(", ")
        );
    })?;
    Ok(())
}

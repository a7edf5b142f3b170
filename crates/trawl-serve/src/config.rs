//! [`ServeConfig`]: what the service serves, where, and within which limits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use trawl::kinds::Options;

use crate::auth::ApiKeys;

/// One index served, by name.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    /// The name in the URLs (`/indexes/{name}`).
    pub name: String,
    /// The index directory.
    pub dir: PathBuf,
}

/// The limits every request is held to; each breach is a `4xx` naming the limit.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request body in bytes (`413`).
    pub max_body_bytes: usize,
    /// Most vectors in one request (`413`).
    pub max_vectors: usize,
    /// Largest k (`400`).
    pub max_k: usize,
    /// Longest a search or write may take, queueing included (`408`).
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 64 << 20,
            max_vectors: 10_000,
            max_k: 1_000,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// TLS certificate and key files (PEM).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// Everything the service needs to start.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The indexes, by name (unique).
    pub indexes: Vec<IndexSpec>,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Open options of every index, and the default search parameters of every request
    /// (a request's `params` override them).
    pub options: Options,
    /// Open every index read-only (else graph indexes are opened for writing).
    pub read_only: bool,
    /// API keys; empty: every request is allowed (then only loopback is served unless
    /// `insecure`).
    pub keys: ApiKeys,
    /// Serve a non-loopback address without API keys.
    pub insecure: bool,
    /// TLS; `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Request limits.
    pub limits: Limits,
    /// Search threads (the engine's; the async runtime never searches).
    pub search_threads: usize,
    /// Search requests not yet started beyond which requests get `429` (default: half the
    /// search threads, at least 1: an admitted request waits for about half a search).
    pub queue: usize,
    /// Queries of one request searched in one go; a larger batch is split and its parts take
    /// turns with other requests, so one huge batch cannot starve single queries.
    pub chunk: usize,
    /// Writes (inserts, upserts, deletes) waiting at once beyond which writes get `429`.
    pub max_pending_writes: usize,
    /// Threads of a merge (0: one per core); it runs at a lower priority than searches.
    pub merge_threads: usize,
    /// Threads of the async runtime (requests, parsing, answers).
    pub io_threads: usize,
}

impl ServeConfig {
    /// The default configuration serving `indexes` on `listen`.
    pub fn new(indexes: Vec<IndexSpec>, listen: SocketAddr) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        Self {
            indexes,
            listen,
            options: Options::default(),
            read_only: false,
            keys: ApiKeys::default(),
            insecure: false,
            tls: None,
            limits: Limits::default(),
            search_threads: cores,
            queue: (cores / 2).max(1),
            chunk: 16,
            max_pending_writes: 64,
            merge_threads: 0,
            // HTTP is light beside the searches: one runtime thread per two cores, at most 4
            // (a second runtime thread on 2 cores only added wake-ups).
            io_threads: (cores / 2).clamp(1, 4),
        }
    }

    /// Checks the configuration before anything is opened or bound.
    pub fn validate(&self) -> Result<(), String> {
        if self.indexes.is_empty() {
            return Err("no index to serve".into());
        }
        for (i, s) in self.indexes.iter().enumerate() {
            check_name(&s.name)?;
            if self.indexes[..i].iter().any(|o| o.name == s.name) {
                return Err(format!("the index name {:?} is given twice", s.name));
            }
        }
        if !self.listen.ip().is_loopback() && self.keys.is_empty() && !self.insecure {
            return Err(format!(
                "refusing to serve {} without API keys: give --api-keys FILE (or \
                 TRAWL_API_KEYS), listen on a loopback address, or pass --insecure",
                self.listen
            ));
        }
        let l = &self.limits;
        if l.max_body_bytes == 0 || l.max_vectors == 0 || l.max_k == 0 {
            return Err("the body, vector and k limits must be at least 1".into());
        }
        if l.request_timeout.is_zero() {
            return Err("the request timeout must be longer than 0".into());
        }
        if self.search_threads == 0 || self.queue == 0 || self.chunk == 0 {
            return Err("search threads, queue and chunk must be at least 1".into());
        }
        if self.max_pending_writes == 0 || self.io_threads == 0 {
            return Err("pending writes and runtime threads must be at least 1".into());
        }
        self.options.validate().map_err(|e| e.to_string())
    }
}

/// An index name: 1–64 letters, digits, `-`, `_` or `.` (it is a URL path segment).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "index name {name:?}: use 1 to 64 letters, digits, '-', '_' or '.'"
        ))
    }
}

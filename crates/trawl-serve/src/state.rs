//! The service's state: the indexes served (opening, ready or failed), their merge jobs, the
//! search scheduler, the metrics and the configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use trawl::kinds::graph::updates::live::LiveIndex;
use trawl::kinds::AnyIndex;
use trawl::progress::Watch;

use crate::config::ServeConfig;
use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;
use crate::sched::Scheduler;

/// Where an index is in its life.
#[derive(Debug, Clone)]
pub enum IndexState {
    /// Being opened (and its cache loaded).
    Opening,
    /// Serving.
    Ready(Arc<AnyIndex>),
    /// Opening failed; the message says why.
    Failed(String),
}

/// A merge of one index, as its status reports it.
#[derive(Debug, Clone)]
pub enum MergeJob {
    /// None has run since the service started.
    None,
    /// Running.
    Running {
        /// Its number (1, 2, ... per index).
        id: u64,
        /// When it started.
        started: Instant,
        /// Its phase and progress.
        watch: Arc<Watch>,
    },
    /// Finished: its report.
    Done {
        /// Its number.
        id: u64,
        /// Seconds it took.
        secs: f64,
        /// The merge report.
        report: Value,
    },
    /// Failed (or was cancelled by a shutdown): why.
    Failed {
        /// Its number.
        id: u64,
        /// The error.
        error: String,
    },
}

impl MergeJob {
    /// Its status as JSON (`{"state": "idle" | "running" | "done" | "failed", ...}`).
    pub fn status(&self) -> Value {
        match self {
            Self::None => json!({"state": "idle"}),
            Self::Running { id, started, watch } => {
                let (phase, done, len) = watch.now().unwrap_or_default();
                json!({
                    "state": "running", "id": id, "secs": started.elapsed().as_secs_f64(),
                    "phase": phase, "done": done, "total": len,
                })
            }
            Self::Done { id, secs, report } => {
                json!({"state": "done", "id": id, "secs": secs, "report": report})
            }
            Self::Failed { id, error } => json!({"state": "failed", "id": id, "error": error}),
        }
    }

    /// The current phase's progress, 0 to 1 (0 when no merge runs).
    pub fn progress(&self) -> f64 {
        match self {
            Self::Running { watch, .. } => {
                watch.now().map_or(
                    0.0,
                    |(_, d, l)| if l == 0 { 0.0 } else { d as f64 / l as f64 },
                )
            }
            _ => 0.0,
        }
    }

    /// Its number (0: none yet).
    pub fn id(&self) -> u64 {
        match self {
            Self::None => 0,
            Self::Running { id, .. } | Self::Done { id, .. } | Self::Failed { id, .. } => *id,
        }
    }
}

/// One index served.
#[derive(Debug)]
pub struct Served {
    /// Its name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Opening, ready or failed.
    pub state: RwLock<IndexState>,
    /// Its merge.
    pub merge: Mutex<MergeJob>,
    /// Set to cancel a running merge (at shutdown).
    pub merge_cancel: Arc<AtomicBool>,
    /// The merge thread, joined at shutdown.
    pub merge_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Served {
    /// The index, or `503` while it opens and `500` when opening failed.
    pub fn ready(&self) -> ApiResult<Arc<AnyIndex>> {
        match &*self.state.read() {
            IndexState::Ready(ix) => Ok(ix.clone()),
            IndexState::Opening => Err(ApiError::unavailable(format!(
                "the index {:?} is still opening",
                self.name
            ))),
            IndexState::Failed(e) => Err(ApiError::internal(format!(
                "the index {:?} could not be opened: {e}",
                self.name
            ))),
        }
    }

    /// The live index to write, or why this index takes no writes (`400`).
    pub fn writer<'a>(ix: &'a AnyIndex, name: &str) -> ApiResult<LiveIndexRef<'a>> {
        match ix.graph().and_then(|g| g.live()) {
            Some(l) if l.is_writable() => Ok(LiveIndexRef(l)),
            _ if ix.graph().is_none() => Err(ApiError::invalid(format!(
                "the index {name:?} is a {} index: only graph indexes take inserts, upserts, \
                 deletes and merges",
                ix.kind().label()
            ))),
            _ => Err(ApiError::invalid(format!(
                "the index {name:?} is served read-only (the server was started with \
                 --read-only)"
            ))),
        }
    }
}

/// A writable live index, borrowed from its [`AnyIndex`].
#[derive(Debug, Clone, Copy)]
pub struct LiveIndexRef<'a>(pub &'a LiveIndex);

/// Everything a handler reaches.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: ServeConfig,
    /// The indexes, by name.
    pub indexes: BTreeMap<String, Arc<Served>>,
    /// The search threads.
    pub sched: Arc<Scheduler>,
    /// The metrics.
    pub metrics: Metrics,
    /// Writes waiting or running; none left: `429`.
    pub writes: Arc<Semaphore>,
    /// Set once shutdown starts (`/readyz` then answers 503).
    pub stopping: AtomicBool,
    /// When the service started.
    pub started: Instant,
}

impl App {
    /// The index named `name`, or `404`.
    pub fn served(&self, name: &str) -> ApiResult<&Arc<Served>> {
        self.indexes.get(name).ok_or_else(|| {
            ApiError::not_found(format!(
                "no index named {name:?}; this server serves {}",
                self.indexes
                    .keys()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    /// Whether every index is open and the service is not stopping.
    pub fn ready(&self) -> bool {
        !self.stopping.load(Ordering::Relaxed)
            && self
                .indexes
                .values()
                .all(|s| matches!(*s.state.read(), IndexState::Ready(_)))
    }
}

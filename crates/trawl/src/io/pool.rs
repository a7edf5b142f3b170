//! [`EnginePool`]: I/O engines kept between searches of one query on the calling thread (an
//! io_uring engine with its aligned, registered buffers costs more to set up than a query).
//!
//! An engine goes back to the thread that used it last when it can: an io_uring ring in
//! defer mode belongs to one thread, and an engine taken by another rebuilds its ring (about
//! the cost of a new engine). Callers that search from several threads (the network
//! service's search threads, Python threads) so keep one warm engine each.

use std::sync::Mutex;
use std::thread::ThreadId;

use crate::io::{EngineConfig, EngineKind, IoEngine, IoError, IoFile};

/// Most idle engines a pool keeps.
const MAX_IDLE: usize = 16;

/// Idle engines of one file, by configuration.
#[derive(Default)]
pub struct EnginePool {
    /// Idle engines: configuration, the thread that used each last, the engine.
    #[allow(clippy::type_complexity)]
    idle: Mutex<Vec<(EngineConfig, ThreadId, Box<dyn IoEngine>)>>,
}

impl std::fmt::Debug for EnginePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.idle.lock().map_or(0, |v| v.len());
        f.debug_struct("EnginePool").field("idle", &n).finish()
    }
}

impl EnginePool {
    /// An idle engine of configuration `cfg` — the calling thread's own when there is one —
    /// or a new one of `file`.
    pub fn take(
        &self,
        file: &IoFile,
        kind: EngineKind,
        cfg: EngineConfig,
    ) -> Result<Box<dyn IoEngine>, IoError> {
        let me = std::thread::current().id();
        if let Ok(mut idle) = self.idle.lock() {
            let own = idle.iter().position(|(c, t, _)| *c == cfg && *t == me);
            if let Some(i) = own.or_else(|| idle.iter().position(|(c, _, _)| *c == cfg)) {
                return Ok(idle.swap_remove(i).2);
            }
        }
        file.engine(kind, cfg)
    }

    /// Hands `engine` back after a search that ended cleanly (an engine with reads still in
    /// flight, after a failed search, is dropped instead).
    pub fn give(&self, cfg: EngineConfig, engine: Box<dyn IoEngine>) {
        if engine.in_flight() > 0 {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push((cfg, std::thread::current().id(), engine));
            }
        }
    }
}

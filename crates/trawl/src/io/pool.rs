//! [`EnginePool`]: I/O engines kept between searches of one query on the calling thread (an
//! io_uring engine with its aligned, registered buffers costs more to set up than a query).

use std::sync::Mutex;

use crate::io::{EngineConfig, EngineKind, IoEngine, IoError, IoFile};

/// Most idle engines a pool keeps.
const MAX_IDLE: usize = 16;

/// Idle engines of one file, by configuration.
#[derive(Default)]
pub struct EnginePool {
    idle: Mutex<Vec<(EngineConfig, Box<dyn IoEngine>)>>,
}

impl std::fmt::Debug for EnginePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.idle.lock().map_or(0, |v| v.len());
        f.debug_struct("EnginePool").field("idle", &n).finish()
    }
}

impl EnginePool {
    /// An idle engine of configuration `cfg`, or a new one of `file`.
    pub fn take(
        &self,
        file: &IoFile,
        kind: EngineKind,
        cfg: EngineConfig,
    ) -> Result<Box<dyn IoEngine>, IoError> {
        if let Ok(mut idle) = self.idle.lock() {
            if let Some(i) = idle.iter().position(|(c, _)| *c == cfg) {
                return Ok(idle.swap_remove(i).1);
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
                idle.push((cfg, engine));
            }
        }
    }
}

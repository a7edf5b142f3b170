//! The in-memory engine: the whole file is read into memory once and a "read" hands out its
//! pages without copying. It measures a search with the device taken away (the same code, the
//! same pages, no I/O latency): PipeANN's in-memory baseline over the same graph and PQ.

use std::sync::Arc;

use super::sync_slots::SyncSlots;
use super::{
    AlignedBuf, Completion, EngineConfig, EngineCounters, EngineInfo, IoEngine, IoError, IoFile,
    ReadRequest, Slot, PAGE_BYTES,
};

/// Serves reads from a resident copy of the file ([`IoFile::load_resident`]): a submission
/// completes at once, and the completion's buffer is the file's own pages.
#[derive(Debug)]
pub struct MemEngine {
    data: Arc<AlignedBuf>,
    slots: SyncSlots,
}

impl MemEngine {
    /// An engine over the resident copy of `file` with `cfg.depth` slots. Fails with
    /// [`IoError::BadConfig`] when the file was not loaded into memory.
    pub fn new(file: &IoFile, cfg: EngineConfig) -> Result<Self, IoError> {
        cfg.validate()?;
        let data = file.resident().ok_or_else(|| {
            IoError::BadConfig("the memory engine needs the file loaded into memory".into())
        })?;
        Ok(Self {
            data,
            slots: SyncSlots::new(&cfg, file.pages()),
        })
    }
}

impl IoEngine for MemEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "memory",
            direct: false,
            registered_buffers: false,
            sqpoll: false,
        }
    }

    fn depth(&self) -> usize {
        self.slots.depth()
    }

    fn max_pages_per_read(&self) -> usize {
        self.slots.max_pages()
    }

    fn file_pages(&self) -> u64 {
        self.slots.file_pages()
    }

    fn in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    fn can_submit(&self) -> bool {
        self.slots.can_submit()
    }

    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        let slot = self.slots.check(&req)?;
        self.slots.complete(slot, tag, &req);
        Ok(())
    }

    fn wait(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        Ok(self.slots.wait(out))
    }

    /// The pages of a completed read; empty for a slot that is not held.
    fn buffer(&self, slot: Slot) -> &[u8] {
        match self.slots.held(slot) {
            Some((first, pages)) => {
                let at = first as usize * PAGE_BYTES;
                &self.data.as_slice()[at..at + pages as usize * PAGE_BYTES]
            }
            None => &[],
        }
    }

    fn release(&mut self, slot: Slot) {
        self.slots.release(slot)
    }

    fn counters(&self) -> EngineCounters {
        self.slots.counters()
    }
}

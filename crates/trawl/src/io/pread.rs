//! The synchronous engine: each read is a `pread` done at submission.

use crate::io::file::pread_full;
use crate::io::sync_slots::SyncSlots;
use crate::io::{
    AlignedBuf, Completion, EngineConfig, EngineCounters, EngineInfo, IoEngine, IoError, IoFile,
    ReadRequest, Slot, PAGE_BYTES,
};

/// `pread` on the (O_DIRECT) file: [`IoEngine::submit`] reads at once and queues the
/// completion; [`IoEngine::wait`] hands the queued completions out. No parallelism within one
/// engine (a queue depth above 1 only batches), so it is the fallback where io_uring is missing.
/// A failed read is reported by `submit`, never by `wait`.
#[derive(Debug)]
pub struct PreadEngine {
    file: IoFile,
    bufs: Vec<AlignedBuf>,
    slots: SyncSlots,
}

impl PreadEngine {
    /// An engine reading `file` with `cfg.depth` buffers of `cfg.max_pages_per_read` pages
    /// (the io_uring options are ignored). Fails with [`IoError::BadConfig`] on unusable
    /// parameters.
    pub fn new(file: &IoFile, cfg: EngineConfig) -> Result<Self, IoError> {
        cfg.validate()?;
        let bufs = (0..cfg.depth)
            .map(|_| AlignedBuf::new(cfg.slot_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            file: file.clone(),
            bufs,
            slots: SyncSlots::new(&cfg, file.pages()),
        })
    }
}

impl IoEngine for PreadEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "pread",
            direct: self.file.is_direct(),
            registered_buffers: false,
            sqpoll: false,
            taskrun: Default::default(),
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
        let len = req.pages as usize * PAGE_BYTES;
        let (_, file, offset) = self.file.part(req.first_page, u64::from(req.pages))?;
        let buf = &mut self.bufs[slot as usize].as_mut_slice()[..len];
        // On failure the slot stays free (it was only looked at).
        pread_full(file, buf, offset, self.file.is_direct())?;
        self.slots.complete(slot, tag, &req);
        Ok(())
    }

    fn wait(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        Ok(self.slots.wait(out))
    }

    /// The bytes of a completed read; empty for a slot that is not held (never completed,
    /// already released, or out of range).
    fn buffer(&self, slot: Slot) -> &[u8] {
        match self.slots.held(slot) {
            Some((_, pages)) => {
                &self.bufs[slot.0 as usize].as_slice()[..pages as usize * PAGE_BYTES]
            }
            None => &[],
        }
    }

    /// Hands a held slot back; a slot that is not held is ignored.
    fn release(&mut self, slot: Slot) {
        self.slots.release(slot)
    }

    fn counters(&self) -> EngineCounters {
        self.slots.counters()
    }
}

//! The synchronous engine: each read is a `pread` done at submission.

use std::collections::VecDeque;

use super::file::{check_range, pread_full};
use super::{
    AlignedBuf, Completion, EngineConfig, EngineCounters, EngineInfo, IoEngine, IoError, IoFile,
    ReadRequest, Slot, PAGE_BYTES,
};

/// Where a slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Free for a submission.
    Free,
    /// Read done, completion not yet returned by `wait`.
    Queued { pages: u32 },
    /// Completion returned; the caller holds the bytes until `release`.
    Held { pages: u32 },
}

/// `pread` on the (O_DIRECT) file: [`IoEngine::submit`] reads at once and queues the
/// completion; [`IoEngine::wait`] hands the queued completions out. No parallelism within one
/// engine (a queue depth above 1 only batches), so it is the fallback where io_uring is missing.
/// A failed read is reported by `submit`, never by `wait`.
#[derive(Debug)]
pub struct PreadEngine {
    file: IoFile,
    bufs: Vec<AlignedBuf>,
    state: Vec<State>,
    free: Vec<u32>,
    queue: VecDeque<Completion>,
    max_pages: usize,
    file_pages: u64,
    counters: EngineCounters,
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
            state: vec![State::Free; cfg.depth],
            // Popped from the back: slot 0 is handed out first.
            free: (0..cfg.depth as u32).rev().collect(),
            queue: VecDeque::with_capacity(cfg.depth),
            max_pages: cfg.max_pages_per_read,
            file_pages: file.pages(),
            counters: EngineCounters::default(),
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
        }
    }

    fn depth(&self) -> usize {
        self.bufs.len()
    }

    fn max_pages_per_read(&self) -> usize {
        self.max_pages
    }

    fn file_pages(&self) -> u64 {
        self.file_pages
    }

    fn in_flight(&self) -> usize {
        self.queue.len()
    }

    fn can_submit(&self) -> bool {
        !self.free.is_empty()
    }

    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        let Some(&slot) = self.free.last() else {
            return Err(IoError::QueueFull {
                depth: self.depth(),
            });
        };
        if req.pages == 0 || req.pages as usize > self.max_pages {
            return Err(IoError::BadLength {
                pages: req.pages,
                max: self.max_pages,
            });
        }
        check_range(req.first_page, u64::from(req.pages), self.file_pages)?;
        let len = req.pages as usize * PAGE_BYTES;
        let offset = req.first_page * PAGE_BYTES as u64;
        let buf = &mut self.bufs[slot as usize].as_mut_slice()[..len];
        // On failure the slot stays free (it was only looked at).
        pread_full(self.file.file(), buf, offset, self.file.is_direct())?;
        self.free.pop();
        self.state[slot as usize] = State::Queued { pages: req.pages };
        self.queue.push_back(Completion {
            tag,
            slot: Slot(slot),
        });
        self.counters.requests += 1;
        self.counters.pages += u64::from(req.pages);
        Ok(())
    }

    fn wait(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        let n = self.queue.len();
        out.reserve(n);
        for c in self.queue.drain(..) {
            let i = c.slot.0 as usize;
            if let State::Queued { pages } = self.state[i] {
                self.state[i] = State::Held { pages };
                self.counters.bytes += u64::from(pages) * PAGE_BYTES as u64;
            }
            self.counters.completions += 1;
            out.push(c);
        }
        Ok(n)
    }

    /// The bytes of a completed read; empty for a slot that is not held (never completed,
    /// already released, or out of range).
    fn buffer(&self, slot: Slot) -> &[u8] {
        let i = slot.0 as usize;
        match self.state.get(i) {
            Some(&State::Held { pages }) => &self.bufs[i].as_slice()[..pages as usize * PAGE_BYTES],
            _ => &[],
        }
    }

    /// Hands a held slot back; a slot that is not held is ignored.
    fn release(&mut self, slot: Slot) {
        let i = slot.0 as usize;
        if let Some(s @ State::Held { .. }) = self.state.get_mut(i) {
            *s = State::Free;
            self.free.push(slot.0);
        }
    }

    fn counters(&self) -> EngineCounters {
        self.counters
    }
}

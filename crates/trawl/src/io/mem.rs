//! The in-memory engine: the whole file is read into memory once and a "read" hands out its
//! pages without copying. It measures a search with the device taken away (the same code, the
//! same pages, no I/O latency): PipeANN's in-memory baseline over the same graph and PQ.

use std::collections::VecDeque;
use std::sync::Arc;

use super::file::check_range;
use super::{
    AlignedBuf, Completion, EngineConfig, EngineCounters, EngineInfo, IoEngine, IoError, IoFile,
    ReadRequest, Slot, PAGE_BYTES,
};

/// Where a slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Queued { first: u64, pages: u32 },
    Held { first: u64, pages: u32 },
}

/// Serves reads from a resident copy of the file ([`IoFile::load_resident`]): a submission
/// completes at once, and the completion's buffer is the file's own pages.
#[derive(Debug)]
pub struct MemEngine {
    data: Arc<AlignedBuf>,
    state: Vec<State>,
    free: Vec<u32>,
    queue: VecDeque<Completion>,
    max_pages: usize,
    file_pages: u64,
    counters: EngineCounters,
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
            state: vec![State::Free; cfg.depth],
            free: (0..cfg.depth as u32).rev().collect(),
            queue: VecDeque::with_capacity(cfg.depth),
            max_pages: cfg.max_pages_per_read,
            file_pages: file.pages(),
            counters: EngineCounters::default(),
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
        self.state.len()
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
        self.free.pop();
        self.state[slot as usize] = State::Queued {
            first: req.first_page,
            pages: req.pages,
        };
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
            if let State::Queued { first, pages } = self.state[i] {
                self.state[i] = State::Held { first, pages };
                self.counters.bytes += u64::from(pages) * PAGE_BYTES as u64;
            }
            self.counters.completions += 1;
            out.push(c);
        }
        Ok(n)
    }

    /// The pages of a completed read; empty for a slot that is not held.
    fn buffer(&self, slot: Slot) -> &[u8] {
        match self.state.get(slot.0 as usize) {
            Some(&State::Held { first, pages }) => {
                let at = first as usize * PAGE_BYTES;
                &self.data.as_slice()[at..at + pages as usize * PAGE_BYTES]
            }
            _ => &[],
        }
    }

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

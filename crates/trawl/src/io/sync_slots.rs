//! Slot bookkeeping shared by the synchronous engines ([`crate::io::PreadEngine`],
//! [`crate::io::MemEngine`]): a read is done at submission, its completion waits in a queue until
//! `wait` hands it out, and the caller holds the slot until `release`.

use std::collections::VecDeque;

use crate::io::file::check_request;
use crate::io::{Completion, EngineConfig, EngineCounters, IoError, ReadRequest, Slot, PAGE_BYTES};

/// Where a slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Free for a submission.
    Free,
    /// Read done, completion not yet returned by `wait`.
    Queued { first: u64, pages: u32 },
    /// Completion returned; the caller holds the bytes until `release`.
    Held { first: u64, pages: u32 },
}

/// The slots of a synchronous engine, its completion queue and its counters.
#[derive(Debug)]
pub(super) struct SyncSlots {
    state: Vec<State>,
    free: Vec<u32>,
    queue: VecDeque<Completion>,
    max_pages: usize,
    file_pages: u64,
    counters: EngineCounters,
}

impl SyncSlots {
    /// `cfg.depth` free slots over a file of `file_pages` pages (`cfg` already validated).
    pub fn new(cfg: &EngineConfig, file_pages: u64) -> Self {
        Self {
            state: vec![State::Free; cfg.depth],
            // Popped from the back: slot 0 is handed out first.
            free: (0..cfg.depth as u32).rev().collect(),
            queue: VecDeque::with_capacity(cfg.depth),
            max_pages: cfg.max_pages_per_read,
            file_pages,
            counters: EngineCounters::default(),
        }
    }

    pub fn depth(&self) -> usize {
        self.state.len()
    }

    pub fn max_pages(&self) -> usize {
        self.max_pages
    }

    pub fn file_pages(&self) -> u64 {
        self.file_pages
    }

    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    pub fn can_submit(&self) -> bool {
        !self.free.is_empty()
    }

    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// Checks `req` (a free slot, a valid length, inside the file) and returns the slot it
    /// would use; nothing changes until [`SyncSlots::complete`].
    pub fn check(&self, req: &ReadRequest) -> Result<u32, IoError> {
        check_request(
            &self.free,
            self.depth(),
            req,
            self.max_pages,
            self.file_pages,
        )
    }

    /// Records the finished read of `req` into `slot` (the one [`SyncSlots::check`] returned).
    pub fn complete(&mut self, slot: u32, tag: u64, req: &ReadRequest) {
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
    }

    /// Hands out every queued completion; returns how many.
    pub fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        self.wait_first(self.queue.len(), out)
    }

    /// Hands out the `n` oldest queued completions (all of them when fewer are queued);
    /// returns how many.
    pub fn wait_first(&mut self, n: usize, out: &mut Vec<Completion>) -> usize {
        let n = n.min(self.queue.len());
        out.reserve(n);
        for c in self.queue.drain(..n) {
            let i = c.slot.0 as usize;
            if let State::Queued { first, pages } = self.state[i] {
                self.state[i] = State::Held { first, pages };
                self.counters.bytes += u64::from(pages) * PAGE_BYTES as u64;
            }
            self.counters.completions += 1;
            out.push(c);
        }
        n
    }

    /// `(first page, pages)` of a held slot; `None` for a slot that is not held.
    pub fn held(&self, slot: Slot) -> Option<(u64, u32)> {
        match self.state.get(slot.0 as usize) {
            Some(&State::Held { first, pages }) => Some((first, pages)),
            _ => None,
        }
    }

    /// Hands a held slot back; a slot that is not held is ignored.
    pub fn release(&mut self, slot: Slot) {
        if let Some(s @ State::Held { .. }) = self.state.get_mut(slot.0 as usize) {
            *s = State::Free;
            self.free.push(slot.0);
        }
    }
}

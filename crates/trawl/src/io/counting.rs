//! An engine wrapper that counts what passes through it.

use crate::io::{Completion, EngineCounters, EngineInfo, IoEngine, IoError, ReadRequest, Slot};

/// What a [`CountingEngine`] saw, counted by the wrapper itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountedIo {
    /// Requests accepted by `submit`.
    pub requests: u64,
    /// Pages of the accepted requests.
    pub pages: u64,
    /// Bytes of the delivered completions (the length of each completion's buffer, its
    /// pages × [`PAGE_BYTES`](crate::io::PAGE_BYTES)).
    pub bytes: u64,
    /// Completions delivered by `wait`.
    pub completions: u64,
    /// Most reads outstanding (accepted, not yet delivered or failed) at any time.
    pub max_in_flight: u64,
}

/// Wraps an engine, forwards every call and counts requests, pages, bytes, completions and
/// the largest number of reads outstanding, independently of the engine's own
/// [`IoEngine::counters`] (which it forwards unchanged, as it does [`IoEngine::info`]).
#[derive(Debug)]
pub struct CountingEngine<E: IoEngine> {
    inner: E,
    counts: CountedIo,
    outstanding: u64,
    failed: u64,
}

impl<E: IoEngine> CountingEngine<E> {
    /// Wraps `inner` with all counts at zero.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            counts: CountedIo::default(),
            outstanding: 0,
            failed: 0,
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> CountedIo {
        self.counts
    }

    /// Reads accepted and neither delivered nor failed yet.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// Reads that were accepted by `submit` and then failed in `wait`.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// The wrapped engine.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Unwraps the engine.
    pub fn into_inner(self) -> E {
        self.inner
    }
}

impl<E: IoEngine> IoEngine for CountingEngine<E> {
    fn info(&self) -> EngineInfo {
        self.inner.info()
    }

    fn depth(&self) -> usize {
        self.inner.depth()
    }

    fn max_pages_per_read(&self) -> usize {
        self.inner.max_pages_per_read()
    }

    fn file_pages(&self) -> u64 {
        self.inner.file_pages()
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn can_submit(&self) -> bool {
        self.inner.can_submit()
    }

    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        self.inner.submit(tag, req)?;
        self.counts.requests += 1;
        self.counts.pages += u64::from(req.pages);
        self.outstanding += 1;
        self.counts.max_in_flight = self.counts.max_in_flight.max(self.outstanding);
        Ok(())
    }

    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        let start = out.len();
        match self.inner.wait(min, out) {
            Ok(n) => {
                for c in &out[start..] {
                    self.counts.bytes += self.inner.buffer(c.slot).len() as u64;
                }
                self.counts.completions += n as u64;
                self.outstanding = self.outstanding.saturating_sub(n as u64);
                Ok(n)
            }
            Err(e) => {
                // A failed read leaves the engine; a ring-wide failure leaves none.
                let left = self.inner.in_flight() as u64;
                let gone = self.outstanding.saturating_sub(left);
                self.failed += gone;
                self.outstanding -= gone;
                Err(e)
            }
        }
    }

    fn buffer(&self, slot: Slot) -> &[u8] {
        self.inner.buffer(slot)
    }

    fn release(&mut self, slot: Slot) {
        self.inner.release(slot);
    }

    fn counters(&self) -> EngineCounters {
        self.inner.counters()
    }
}

impl<E: IoEngine + ?Sized> IoEngine for Box<E> {
    fn info(&self) -> EngineInfo {
        (**self).info()
    }

    fn depth(&self) -> usize {
        (**self).depth()
    }

    fn max_pages_per_read(&self) -> usize {
        (**self).max_pages_per_read()
    }

    fn file_pages(&self) -> u64 {
        (**self).file_pages()
    }

    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }

    fn can_submit(&self) -> bool {
        (**self).can_submit()
    }

    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        (**self).submit(tag, req)
    }

    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        (**self).wait(min, out)
    }

    fn buffer(&self, slot: Slot) -> &[u8] {
        (**self).buffer(slot)
    }

    fn release(&mut self, slot: Slot) {
        (**self).release(slot)
    }

    fn counters(&self) -> EngineCounters {
        (**self).counters()
    }
}

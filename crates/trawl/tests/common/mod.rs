//! Helpers shared by the disk-index test files: data, builds, ground truth and [`Tap`], an
//! engine wrapper that counts I/O independently of the engine and of the search.

#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use trawl::data::{GroundTruth, Matrix};
use trawl::exact::{knn, ExactParams};
use trawl::io::{Completion, EngineCounters, EngineInfo, IoEngine, IoError, ReadRequest, Slot};
use trawl::kinds::graph::search::entry::EntryParams;
use trawl::kinds::graph::search::{FlashParams, Grain, SearchParams, Strategy};
use trawl::kinds::graph::{build_index, BatchOutput, DiskIndex, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::search::QueryStats;
use trawl::synth::{generate, SynthParams};
use trawl::vamana::VamanaParams;
use trawl::{Element, Metric};

pub fn data<T: Element>(n: usize, nq: usize, dim: usize, seed: u64) -> (Matrix<T>, Matrix<T>) {
    generate::<T>(&SynthParams::new(n, nq, dim, T::DTYPE, seed)).unwrap()
}

pub fn params(metric: Metric, pq_bytes: usize) -> IndexParams {
    IndexParams {
        metric,
        graph: VamanaParams {
            r: 32,
            l: 64,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: pq_bytes,
            ..PqParams::default()
        },
        quant: Default::default(),
        entry: Some(EntryParams::default()),
        attrs: None,
        label_aware: Default::default(),
    }
}

pub fn build<T: Element>(base: &Matrix<T>, dir: &Path, metric: Metric, pq_bytes: usize) {
    build_index(base, dir, &params(metric, pq_bytes), &Control::silent()).unwrap();
}

pub fn open(dir: &Path) -> DiskIndex {
    DiskIndex::open(dir, OpenOptions::default()).unwrap()
}

pub fn truth<T: Element>(base: &Matrix<T>, q: &Matrix<T>, metric: Metric) -> GroundTruth {
    knn(
        base,
        q,
        10,
        metric,
        &ExactParams::default(),
        &Control::silent(),
    )
    .unwrap()
}

/// What a [`Tap`] saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Requests submitted.
    pub requests: u64,
    /// Pages requested.
    pub pages: u64,
    /// Bytes delivered by completions.
    pub bytes: u64,
    /// Slots submitted and not yet released (in flight or held by the search).
    pub busy: i64,
    /// Most slots busy at once.
    pub max_busy: i64,
}

/// Counts what passes through an engine, independently of the engine and of the search.
pub struct Tap {
    pub inner: Box<dyn IoEngine>,
    pub seen: Arc<Mutex<Seen>>,
}

impl Tap {
    /// Wraps `inner`; the returned handle reads the counts.
    pub fn new(inner: Box<dyn IoEngine>) -> (Self, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        (
            Self {
                inner,
                seen: seen.clone(),
            },
            seen,
        )
    }
}

impl IoEngine for Tap {
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
        let mut s = self.seen.lock().unwrap();
        s.requests += 1;
        s.pages += u64::from(req.pages);
        s.busy += 1;
        s.max_busy = s.max_busy.max(s.busy);
        Ok(())
    }
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        let before = out.len();
        let r = self.inner.wait(min, out);
        for c in &out[before..] {
            self.seen.lock().unwrap().bytes += self.inner.buffer(c.slot).len() as u64;
        }
        r
    }
    fn buffer(&self, slot: Slot) -> &[u8] {
        self.inner.buffer(slot)
    }
    fn release(&mut self, slot: Slot) {
        self.seen.lock().unwrap().busy -= 1;
        self.inner.release(slot)
    }
    fn counters(&self) -> EngineCounters {
        self.inner.counters()
    }
}

/// recall@10 of `got` (10 ids per query) against the exact lists `t`, whose entries are
/// positions in `ids` (the id of each vector the truth was computed over).
pub fn recall_of_ids(got: &[u64], t: &GroundTruth, ids: &[u64]) -> f64 {
    let nq = got.len() / 10;
    let mut hit = 0usize;
    for qi in 0..nq {
        let want: std::collections::HashSet<u64> = t.ids[qi * t.k..qi * t.k + 10]
            .iter()
            .map(|&r| ids[r as usize])
            .collect();
        hit += got[qi * 10..qi * 10 + 10]
            .iter()
            .filter(|i| want.contains(i))
            .count();
    }
    hit as f64 / (10 * nq.max(1)) as f64
}

/// FlashANNS's batch search with `k = 10`.
pub fn flash_params(l: usize, staleness: usize, batch: usize, grain: Grain) -> SearchParams {
    SearchParams {
        k: 10,
        l,
        strategy: Strategy::Flash(FlashParams {
            batch,
            staleness,
            grain,
            ..FlashParams::default()
        }),
        ..SearchParams::default()
    }
}

/// Asserts equal ids and bit-equal distances.
pub fn same_results(a: &BatchOutput, b: &BatchOutput, what: &str) {
    assert_eq!(a.ids, b.ids, "{what}: ids");
    for (x, y) in a.dists.iter().zip(&b.dists) {
        assert_eq!(x.to_bits(), y.to_bits(), "{what}: distances");
    }
}

/// The flash search's counters that do not depend on timing.
pub fn flash_counts(s: &QueryStats) -> [u64; 7] {
    [
        s.flash.steps,
        s.flash.stale_steps,
        s.traversal.nodes_expanded,
        s.traversal.pq_distances,
        s.traversal.exact_distances,
        s.io.io_requests,
        s.io.pages_read,
    ]
}

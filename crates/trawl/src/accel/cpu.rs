//! The CPU backend of the filter stage: the reference every other backend is tested against.

use std::cell::RefCell;
use std::sync::Arc;

use rayon::prelude::*;

use crate::accel::{
    adc_distance, adc_distance2, AccelError, AccelInfo, Accelerator, FilterJob, FilterOutput,
};
use crate::accel::{FilterPending, Ready};
use crate::quant::pq::PqCodes;
use crate::quant::rabitq::fastscan::{BlockLists, FsLut};

/// Filter stage on the host: per query, dedup of the gathered ids (a bit per vector, or a sort
/// above `BITSET_MAX` vectors), PQ-ADC with [`adc_distance`], and a partial select of the
/// top-n by `(distance, id)`. A batch's queries run in parallel on the rayon pool.
#[derive(Debug, Clone)]
pub struct CpuAccel {
    codes: Arc<PqCodes>,
    /// RaBitQ codes in FastScan blocks by list, for jobs that name lists.
    lists: Option<Arc<BlockLists>>,
    /// Most vectors deduplicated with a bit array ([`BITSET_MAX`]; tests lower it).
    bitset_max: usize,
}

#[derive(Default)]
struct Scratch {
    ids: Vec<u32>,
    lut: FsLut,
    scored: Vec<(f32, u32)>,
    /// A bit per vector for the dedup, all zero between queries.
    seen: Vec<u64>,
}

/// Largest number of vectors deduplicated with a bit array (4 MiB per thread); above it the
/// gathered ids are sorted.
const BITSET_MAX: usize = 1 << 25;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl CpuAccel {
    /// The backend over `codes` (shared, not copied).
    pub fn new(codes: Arc<PqCodes>) -> Self {
        Self {
            codes,
            lists: None,
            bitset_max: BITSET_MAX,
        }
    }

    /// The backend over `codes` with their FastScan `lists`: a RaBitQ job that names the
    /// lists it probes ([`FilterJob::lists`]) is scored block by block.
    pub fn with_lists(codes: Arc<PqCodes>, lists: Arc<BlockLists>) -> Self {
        Self {
            codes,
            lists: Some(lists),
            bitset_max: BITSET_MAX,
        }
    }

    /// Whether the backend has FastScan lists.
    pub fn has_lists(&self) -> bool {
        self.lists.is_some()
    }

    /// The backend deduplicating by sorting whatever the number of vectors (tests).
    #[cfg(test)]
    pub(crate) fn sorting(codes: Arc<PqCodes>) -> Self {
        Self {
            codes,
            lists: None,
            bitset_max: 0,
        }
    }

    /// [`CpuAccel::with_lists`] deduplicating by sorting (tests).
    #[cfg(test)]
    pub(crate) fn sorting_with_lists(codes: Arc<PqCodes>, lists: Arc<BlockLists>) -> Self {
        Self {
            codes,
            lists: Some(lists),
            bitset_max: 0,
        }
    }

    /// Scores query `q` of `job` into `ids` / `dists` (`top_n` each); returns its distinct
    /// candidates.
    fn one(&self, job: &FilterJob, q: usize, ids: &mut [u32], dists: &mut [f32]) -> u32 {
        let rbq = job.rbq.get(q);
        if let (Some(rq), Some(lists), false) = (rbq, &self.lists, job.list_offsets.is_empty()) {
            return self.one_fastscan(job, q, rq, lists, ids, dists);
        }
        let table = if rbq.is_some() { &[][..] } else { job.table(q) };
        let cands = job.candidates(q);
        let codes = &*self.codes;
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            s.ids.clear();
            let n = self.codes.n();
            if n <= self.bitset_max {
                // Dedup with a bit per vector (n / 8 bytes, in L1 or L2 for a few million
                // vectors): first sightings in gather order, then the bits are cleared again.
                // The visit order does not change the result, which is ordered by
                // (distance, id).
                let words = n.div_ceil(64);
                if s.seen.len() < words {
                    s.seen.resize(words, 0);
                }
                for &id in cands {
                    let (w, b) = (id as usize / 64, 1u64 << (id % 64));
                    if s.seen[w] & b == 0 {
                        s.seen[w] |= b;
                        s.ids.push(id);
                    }
                }
                for &id in &s.ids {
                    s.seen[id as usize / 64] = 0;
                }
            } else {
                // Dedup by sorting: no bit array of n / 8 bytes touched at random.
                s.ids.extend_from_slice(cands);
                s.ids.sort_unstable();
                s.ids.dedup();
            }
            s.scored.clear();
            const AHEAD: usize = 12;
            for &id in s.ids.iter().take(AHEAD) {
                codes.prefetch(id as usize);
            }
            if let Some(rq) = rbq {
                for (i, &id) in s.ids.iter().enumerate() {
                    if let Some(ahead) = s.ids.get(i + AHEAD) {
                        codes.prefetch(*ahead as usize);
                    }
                    s.scored.push((rq.distance(codes.code(id as usize)), id));
                }
                return Self::keep_top(s, job.top_n, ids, dists);
            }
            // Two codes per step: their additions are independent chains the CPU overlaps.
            let pairs = s.ids.chunks_exact(2);
            let odd = pairs.remainder().first().copied();
            for (i, pair) in pairs.enumerate() {
                for ahead in
                    &s.ids[(2 * i + AHEAD).min(s.ids.len())..(2 * i + AHEAD + 2).min(s.ids.len())]
                {
                    codes.prefetch(*ahead as usize);
                }
                let (x, y) = (pair[0], pair[1]);
                let (dx, dy) = adc_distance2(table, codes.code(x as usize), codes.code(y as usize));
                s.scored.push((dx, x));
                s.scored.push((dy, y));
            }
            if let Some(id) = odd {
                s.scored
                    .push((adc_distance(table, codes.code(id as usize)), id));
            }
            Self::keep_top(s, job.top_n, ids, dists)
        })
    }

    /// Query `q` of a job naming lists: every code of every probed list scored by FastScan,
    /// the first sighting of each id kept (a replicated vector's copies have one estimate).
    fn one_fastscan(
        &self,
        job: &FilterJob,
        q: usize,
        rq: &crate::quant::rabitq::RbqQuery,
        lists: &BlockLists,
        ids: &mut [u32],
        dists: &mut [f32],
    ) -> u32 {
        let probed = &job.lists[job.list_offsets[q] as usize..job.list_offsets[q + 1] as usize];
        let level = crate::quant::rabitq::fastscan::level();
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            s.lut.fill(rq);
            s.scored.clear();
            let n = self.codes.n();
            if n > self.bitset_max {
                // Dedup by sorting: every copy scored, then one per id (copies are equal).
                let Scratch { lut, scored, .. } = s;
                for &l in probed {
                    lists.scan(
                        level,
                        l as usize,
                        rq,
                        lut,
                        |_| true,
                        |id, d| scored.push((d, id)),
                    );
                }
                s.scored.sort_unstable_by_key(|&(_, id)| id);
                s.scored.dedup_by_key(|&mut (_, id)| id);
                return Self::keep_top(s, job.top_n, ids, dists);
            }
            let words = n.div_ceil(64);
            if s.seen.len() < words {
                s.seen.resize(words, 0);
            }
            let Scratch {
                lut, scored, seen, ..
            } = s;
            for &l in probed {
                // The first sighting of an id marks it; its replicas are not estimated.
                let mut want = |id: u32| {
                    let (w, b) = (id as usize / 64, 1u64 << (id % 64));
                    let fresh = seen[w] & b == 0;
                    seen[w] |= b;
                    fresh
                };
                lists.scan(level, l as usize, rq, lut, &mut want, |id, d| {
                    scored.push((d, id))
                });
            }
            for &(_, id) in s.scored.iter() {
                s.seen[id as usize / 64] = 0;
            }
            Self::keep_top(s, job.top_n, ids, dists)
        })
    }

    /// Cuts the scored candidates to the `top_n` by `(distance, id)` into `ids` / `dists`;
    /// returns how many were scored.
    fn keep_top(s: &mut Scratch, top_n: usize, ids: &mut [u32], dists: &mut [f32]) -> u32 {
        {
            let unique = s.scored.len() as u32;
            let order = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            let keep = top_n.min(s.scored.len());
            if s.scored.len() > keep {
                s.scored.select_nth_unstable_by(keep, order);
                s.scored.truncate(keep);
            }
            s.scored.sort_unstable_by(order);
            ids.fill(u32::MAX);
            dists.fill(f32::INFINITY);
            for (k, &(d, id)) in s.scored.iter().enumerate() {
                ids[k] = id;
                dists[k] = d;
            }
            unique
        }
    }

    /// Scores `job` on this thread (or the pool, for several queries).
    pub fn run(&self, job: &FilterJob) -> Result<FilterOutput, AccelError> {
        job.validate(self.codes.n(), self.codes.m())?;
        let (nq, top_n) = (job.queries(), job.top_n);
        let mut out = FilterOutput {
            top_n,
            ids: vec![u32::MAX; nq * top_n],
            dists: vec![f32::INFINITY; nq * top_n],
            unique: vec![0; nq],
        };
        if nq == 1 {
            out.unique[0] = self.one(job, 0, &mut out.ids, &mut out.dists);
        } else {
            out.ids
                .par_chunks_mut(top_n)
                .zip(out.dists.par_chunks_mut(top_n))
                .zip(out.unique.par_iter_mut())
                .enumerate()
                .for_each(|(q, ((ids, dists), u))| *u = self.one(job, q, ids, dists));
        }
        Ok(out)
    }
}

impl Accelerator for CpuAccel {
    fn info(&self) -> AccelInfo {
        AccelInfo {
            backend: "cpu",
            adapter: format!(
                "host CPU ({} threads, {} kernels)",
                rayon::current_num_threads(),
                crate::kernels::dispatch::kernels().name
            ),
            resident_bytes: self.codes.as_bytes().len() as u64,
        }
    }

    fn submit(&self, job: &FilterJob) -> Result<Box<dyn FilterPending>, AccelError> {
        Ok(Box::new(Ready(self.run(job))))
    }
}

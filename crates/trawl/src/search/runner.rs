//! The runner every batch search runs on — beam search, PipeSearch and the flash strategy
//! (through [`crate::kinds::graph::search::Searcher`]), the IVF searcher, the flat scan and the cache's warm-up
//! searches: the threads of a batch (spawned, joined, a panic turned into an error), the
//! shared cursor they take queries from, the polling rule, waiting for completions and
//! draining an engine after an error, and the assembly of every thread's results into one
//! [`BatchOutput`].
//!
//! What runs on a thread is the kind's own loop (a searcher's lanes, the IVF flights, a scan
//! of pages); the runner knows no kind.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::io::{Completion, IoEngine, IoError};
use crate::search::{QueryStats, SearchError};

/// The most threads one batch search takes (each holds an I/O engine).
pub const MAX_SEARCH_THREADS: usize = 1024;

/// Most queries one thread may interleave.
pub const MAX_INTERLEAVE: usize = 256;

/// Polling time of the automatic spin choice ([`spin_for`]): covers most 4 KiB reads on an
/// SSD, so the thread rarely pays a sleep and a wake-up per round trip.
pub const AUTO_SPIN_US: u64 = 200;

/// How long a thread of a batch on `threads` threads polls for completions before blocking:
/// `spin_us` when given, else [`AUTO_SPIN_US`] when the threads do not outnumber the cores
/// (polling a core of its own costs nothing), else 0 (a poller would take a core another
/// search thread needs).
pub fn spin_for(threads: usize, spin_us: Option<u64>) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    Duration::from_micros(spin_us.unwrap_or(if threads <= cores { AUTO_SPIN_US } else { 0 }))
}

/// The threads a batch of `nq` queries uses when `threads` are asked for: at least one, at
/// most one per query; more than [`MAX_SEARCH_THREADS`] is an error.
pub fn batch_threads(threads: usize, nq: usize) -> Result<usize, SearchError> {
    if threads > MAX_SEARCH_THREADS {
        return Err(SearchError::BadBatch(format!(
            "{threads} search threads is more than {MAX_SEARCH_THREADS}"
        )));
    }
    Ok(threads.clamp(1, nq.max(1)))
}

/// The queries of a batch, handed out to its threads in order.
#[derive(Debug)]
pub struct Cursor {
    next: AtomicUsize,
    n: usize,
}

impl Cursor {
    /// A cursor over queries `0..n`.
    pub fn new(n: usize) -> Self {
        Self {
            next: AtomicUsize::new(0),
            n,
        }
    }

    /// The next query, or `None` when every query is taken.
    pub fn next(&self) -> Option<usize> {
        let q = self.next.fetch_add(1, Ordering::Relaxed);
        (q < self.n).then_some(q)
    }

    /// The next `len` queries (fewer at the end), or `None` when every query is taken.
    pub fn next_group(&self, len: usize) -> Option<std::ops::Range<usize>> {
        let start = self.next.fetch_add(len, Ordering::Relaxed);
        (start < self.n).then(|| start..(start + len).min(self.n))
    }
}

/// Runs `work` on `threads` scoped threads and returns what each produced, in thread order,
/// with the wall time from the first spawn to the last join. A thread's error is the batch's
/// (the first in thread order); a panicking thread is [`SearchError::Internal`].
pub fn on_threads<P: Send>(
    threads: usize,
    work: impl Fn(usize) -> Result<P, SearchError> + Sync,
) -> Result<(Vec<P>, f64), SearchError> {
    let t0 = Instant::now();
    let parts: Vec<Result<P, SearchError>> = std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = (0..threads.max(1))
            .map(|t| scope.spawn(move || work(t)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(SearchError::Internal("a search thread panicked".into()))
                })
            })
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    Ok((parts.into_iter().collect::<Result<_, _>>()?, wall))
}

/// Results of a batch: `nq × k` ids and distances (missing results are `u32::MAX` / `+∞`),
/// one [`QueryStats`] per query, and the batch's wall time.
#[derive(Debug, Clone, Default)]
pub struct BatchOutput {
    /// Results per query.
    pub k: usize,
    /// Row-major ids.
    pub ids: Vec<u32>,
    /// Row-major exact distances.
    pub dists: Vec<f32>,
    /// Per-query statistics.
    pub stats: Vec<QueryStats>,
    /// Seconds for the whole batch.
    pub wall_secs: f64,
    /// A range search's results, every one of each query (nearest first); `ids` and
    /// `dists` are then empty and `k` is 0.
    pub ranged: Option<Vec<Vec<(u32, f32)>>>,
}

impl BatchOutput {
    /// An output of `nq` range queries with no results yet ([`BatchOutput::ranged`]).
    pub fn empty_ranged(nq: usize, wall_secs: f64) -> Self {
        Self {
            k: 0,
            ids: Vec::new(),
            dists: Vec::new(),
            stats: vec![QueryStats::default(); nq],
            wall_secs,
            ranged: Some(vec![Vec::new(); nq]),
        }
    }

    /// [`BatchOutput::empty`], or [`BatchOutput::empty_ranged`] when `range` is set.
    pub fn empty_for(nq: usize, k: usize, range: bool, wall_secs: f64) -> Self {
        if range {
            Self::empty_ranged(nq, wall_secs)
        } else {
            Self::empty(nq, k, wall_secs)
        }
    }

    /// Query `q`'s results, nearest first, missing ones left out.
    pub fn hits_of(&self, q: usize) -> Vec<(u32, f32)> {
        match &self.ranged {
            Some(r) => r[q].clone(),
            None => (0..self.k)
                .map(|j| (self.ids[q * self.k + j], self.dists[q * self.k + j]))
                .filter(|h| h.0 != u32::MAX)
                .collect(),
        }
    }

    /// An output of `nq` queries with no results yet.
    pub fn empty(nq: usize, k: usize, wall_secs: f64) -> Self {
        Self {
            k,
            ids: vec![u32::MAX; nq * k],
            dists: vec![f32::INFINITY; nq * k],
            stats: vec![QueryStats::default(); nq],
            wall_secs,
            ranged: None,
        }
    }

    /// Puts query `q`'s results (at most `k` of them, nearest first; every one of a range
    /// search) and statistics in place.
    pub fn put(&mut self, q: usize, hits: impl IntoIterator<Item = (u32, f32)>, st: QueryStats) {
        if let Some(r) = &mut self.ranged {
            r[q] = hits.into_iter().collect();
            self.stats[q] = st;
            return;
        }
        let k = self.k;
        for (j, (id, d)) in hits.into_iter().enumerate().take(k) {
            self.ids[q * k + j] = id;
            self.dists[q * k + j] = d;
        }
        self.stats[q] = st;
    }

    /// The statistics summed over queries.
    pub fn total(&self) -> QueryStats {
        let mut t = QueryStats::default();
        for s in &self.stats {
            t += *s;
        }
        t
    }
}

/// Waits for at least one completion (after polling for `spin`, when not zero), appending
/// them to `out`; returns how many arrived.
pub(crate) fn wait_some(
    engine: &mut dyn IoEngine,
    spin: Duration,
    out: &mut Vec<Completion>,
) -> Result<usize, IoError> {
    wait_some_polled(engine, spin, out).map(|(got, _)| got)
}

/// [`wait_some`], also returning the time spent polling (CPU spent waiting; the rest of the
/// wait, if any, was blocked in the kernel).
pub(crate) fn wait_some_polled(
    engine: &mut dyn IoEngine,
    spin: Duration,
    out: &mut Vec<Completion>,
) -> Result<(usize, Duration), IoError> {
    if spin.is_zero() {
        return Ok((engine.wait(1, out)?, Duration::ZERO));
    }
    let t0 = Instant::now();
    loop {
        let got = engine.wait(0, out)?;
        let polled = t0.elapsed();
        if got > 0 {
            return Ok((got, polled));
        }
        if polled >= spin {
            return Ok((engine.wait(1, out)?, polled));
        }
        std::hint::spin_loop();
    }
}

/// After an error: waits for every read still in flight and releases its slot, so the engine
/// can serve the next query (or go back to a pool). A failing wait ends the drain: the engine
/// is then dropped with the thread.
pub(crate) fn drain_engine(engine: &mut dyn IoEngine, buf: &mut Vec<Completion>) {
    while engine.in_flight() > 0 {
        buf.clear();
        if engine.wait(1, buf).is_err() {
            break;
        }
        for c in buf.iter() {
            engine.release(c.slot);
        }
    }
    buf.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_hands_out_every_query_once_and_groups_end_short() {
        let c = Cursor::new(5);
        assert_eq!(c.next_group(2), Some(0..2));
        assert_eq!(c.next(), Some(2));
        assert_eq!(c.next_group(4), Some(3..5));
        assert_eq!(c.next(), None);
        assert_eq!(c.next_group(1), None);
    }

    #[test]
    fn threads_are_clamped_to_the_queries_and_bounded() {
        assert_eq!(batch_threads(0, 10).unwrap(), 1);
        assert_eq!(batch_threads(8, 3).unwrap(), 3);
        assert_eq!(batch_threads(8, 0).unwrap(), 1);
        assert!(batch_threads(MAX_SEARCH_THREADS + 1, 1 << 20).is_err());
    }

    #[test]
    fn on_threads_keeps_thread_order_and_turns_a_panic_into_an_error() {
        let (parts, _) = on_threads(3, |t| Ok(t * 10)).unwrap();
        assert_eq!(parts, vec![0, 10, 20]);
        let e = on_threads(2, |t| {
            if t == 1 {
                panic!("boom");
            }
            Ok(t)
        })
        .unwrap_err();
        assert!(matches!(e, SearchError::Internal(_)), "{e:?}");
        let e = on_threads(2, |t| {
            if t == 0 {
                Err(SearchError::BadBatch("first".into()))
            } else {
                Ok(t)
            }
        })
        .unwrap_err();
        assert!(matches!(e, SearchError::BadBatch(_)), "{e:?}");
    }

    #[test]
    fn a_batch_output_keeps_holes_where_a_query_found_fewer_than_k() {
        let mut o = BatchOutput::empty(2, 3, 0.0);
        o.put(1, [(7, 0.5), (9, 1.0)], QueryStats::default());
        assert_eq!(o.ids, vec![u32::MAX, u32::MAX, u32::MAX, 7, 9, u32::MAX]);
        assert_eq!(o.dists[3..5], [0.5, 1.0]);
        assert!(o.dists[5].is_infinite());
    }
}

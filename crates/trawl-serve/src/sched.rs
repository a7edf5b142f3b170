//! The search threads and the bounded, fair queue in front of them.
//!
//! A search request becomes a job; the queue holds at most `capacity` jobs no search thread
//! has started (beyond, `429` with `Retry-After`). Search threads (plain OS threads: the engine's own, never the
//! async runtime's) take one chunk of at most `chunk` queries from the job at the front and
//! put the job back at the end while it has queries left, so the requests waiting take turns
//! a chunk at a time: a single query waits behind at most one chunk of each request ahead of
//! it, whatever their sizes. Results go back to the waiting handler through a oneshot channel.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;
use trawl::data::{AnyMatrix, Queries};
use trawl::filter::{Expr, FilterParams, Filters, QueryFilter};
use trawl::kinds::{AnyIndex, Hits, KindParams, Run};
use trawl::search::QueryStats;

use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;

/// The filters of a job, owned.
#[derive(Debug, Clone, Default)]
pub enum OwnedFilters {
    /// None.
    #[default]
    None,
    /// One for every query.
    All(Expr),
    /// One per query (`None`: unfiltered).
    PerQuery(Vec<Option<Expr>>),
}

impl OwnedFilters {
    fn slice(&self, r: Range<usize>) -> Filters<'_> {
        match self {
            Self::None => Filters::None,
            Self::All(e) => Filters::All(e),
            Self::PerQuery(v) => Filters::PerQuery(&v[r]),
        }
    }
}

/// One search request.
#[derive(Debug)]
pub struct SearchJob {
    /// The index's name (for the metrics).
    pub name: String,
    /// The index.
    pub index: Arc<AnyIndex>,
    /// The queries (checked: the index's type and dimension, finite).
    pub queries: AnyMatrix,
    /// The kind's parameters.
    pub params: KindParams,
    /// The filters.
    pub filters: OwnedFilters,
    /// The planner's options.
    pub filter_params: FilterParams,
    /// Queries a search thread keeps in flight.
    pub interleave: usize,
    /// When the request stops waiting for its answer.
    pub deadline: Instant,
}

/// A job's results and where its time went.
#[derive(Debug)]
pub struct Answer {
    /// The results.
    pub hits: Hits,
    /// Seconds from queueing to the first search thread taking it.
    pub queue_secs: f64,
    /// Seconds from then to the last part searched.
    pub search_secs: f64,
}

/// A job being searched: its parts' results, gathered.
#[derive(Debug)]
struct Running {
    job: SearchJob,
    nq: usize,
    k: usize,
    out: Mutex<Partial>,
    tx: Mutex<Option<oneshot::Sender<ApiResult<Answer>>>>,
    cancelled: AtomicBool,
    enqueued: Instant,
    started: Mutex<Option<Instant>>,
}

#[derive(Debug)]
struct Partial {
    ids: Vec<u64>,
    dists: Vec<f32>,
    stats: Vec<QueryStats>,
    left: usize,
}

impl Running {
    fn answer(&self, r: ApiResult<Answer>) {
        if let Some(tx) = self.tx.lock().take() {
            // The handler may have given up (timeout, client gone): nothing to tell.
            let _ = tx.send(r);
        }
    }

    fn abandoned(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
            || self.tx.lock().as_ref().is_none_or(|tx| tx.is_closed())
    }

    /// Searches queries `r` and files their results; the last part answers.
    fn run(&self, r: Range<usize>, metrics: &Metrics) {
        {
            let mut st = self.started.lock();
            if st.is_none() {
                *st = Some(Instant::now());
                metrics
                    .queue_wait
                    .with_label_values(&[&self.job.name])
                    .observe(self.enqueued.elapsed().as_secs_f64());
            }
        }
        if self.abandoned() {
            return;
        }
        if Instant::now() > self.job.deadline {
            self.cancelled.store(true, Ordering::Relaxed);
            return self.answer(Err(timeout()));
        }
        let j = &self.job;
        let filter = QueryFilter {
            filters: j.filters.slice(r.clone()),
            params: j.filter_params,
        };
        let run = Run {
            threads: 1,
            interleave: j.interleave,
        };
        let hits = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (a, b) = (r.start, r.end);
            match &j.queries {
                AnyMatrix::F32(m) => j.index.search(rows(m, a, b), &j.params, run, &filter),
                AnyMatrix::U8(m) => j.index.search(rows(m, a, b), &j.params, run, &filter),
                AnyMatrix::I8(m) => j.index.search(rows(m, a, b), &j.params, run, &filter),
            }
        }));
        let hits = match hits {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                self.cancelled.store(true, Ordering::Relaxed);
                return self.answer(Err(e.into()));
            }
            Err(_) => {
                self.cancelled.store(true, Ordering::Relaxed);
                return self.answer(Err(ApiError::internal("a search thread panicked")));
            }
        };
        metrics.searched(&j.name, r.len(), &hits.total());
        let mut p = self.out.lock();
        let k = self.k;
        p.ids[r.start * k..r.end * k].copy_from_slice(&hits.ids);
        p.dists[r.start * k..r.end * k].copy_from_slice(&hits.dists);
        p.stats[r.clone()].copy_from_slice(&hits.stats);
        p.left -= r.len();
        if p.left == 0 {
            let start = self.started.lock().unwrap_or(self.enqueued);
            let done = Answer {
                hits: Hits {
                    k,
                    ids: std::mem::take(&mut p.ids),
                    dists: std::mem::take(&mut p.dists),
                    stats: std::mem::take(&mut p.stats),
                    wall_secs: self.enqueued.elapsed().as_secs_f64(),
                },
                queue_secs: (start - self.enqueued).as_secs_f64(),
                search_secs: start.elapsed().as_secs_f64(),
            };
            drop(p);
            self.answer(Ok(done));
        }
    }
}

fn rows<T: trawl::Element>(m: &trawl::data::Matrix<T>, a: usize, b: usize) -> Queries<'_, T> {
    let d = m.dim();
    // The range lies within the matrix and rows are whole: `new` cannot refuse them.
    Queries::new(&m.as_slice()[a * d..b * d], d).unwrap_or_else(|| Queries::from(m))
}

fn timeout() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::REQUEST_TIMEOUT,
        "timeout",
        "the request took longer than the server's limit (--request-timeout)",
    )
}

#[derive(Debug, Default)]
struct Queue {
    /// Jobs with queries left, each with its next query.
    ring: VecDeque<(Arc<Running>, usize)>,
    /// Jobs in the ring no search thread has started yet: what `capacity` bounds (a job
    /// being searched, a chunk at a time, is served already, however many chunks it has
    /// left; counting it would let one huge batch refuse every other request).
    waiting: usize,
    queries: usize,
    shutdown: bool,
    /// Seconds per query, averaged over recent chunks (for `Retry-After`).
    query_secs: f64,
    /// Idle search threads, the most recently idle last: work wakes the thread that ran last
    /// (its caches, its CPU and its I/O engine are warm; a FIFO wake-up alternates threads
    /// and measured about 0.3 ms slower per single query here).
    idle: Vec<usize>,
    /// Set when a thread is woken for work (a wake-up without it is spurious).
    woken: Vec<bool>,
}

/// The search threads and their queue.
#[derive(Debug)]
pub struct Scheduler {
    q: Mutex<Queue>,
    /// One per search thread.
    cvs: Vec<Condvar>,
    capacity: usize,
    chunk: usize,
    threads: usize,
    metrics: Metrics,
    handles: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Scheduler {
    /// Starts `threads` search threads behind a queue of `capacity` requests, taking chunks
    /// of `chunk` queries.
    pub fn start(
        threads: usize,
        capacity: usize,
        chunk: usize,
        metrics: Metrics,
    ) -> std::io::Result<Arc<Self>> {
        let s = Arc::new(Self {
            q: Mutex::new(Queue {
                woken: vec![false; threads.max(1)],
                ..Queue::default()
            }),
            cvs: (0..threads.max(1)).map(|_| Condvar::new()).collect(),
            capacity,
            chunk: chunk.max(1),
            threads: threads.max(1),
            metrics,
            handles: Mutex::new(Vec::new()),
        });
        for t in 0..s.threads {
            let me = s.clone();
            let h = std::thread::Builder::new()
                .name(format!("trawl-search-{t}"))
                .spawn(move || me.work(t))?;
            s.handles.lock().push(h);
        }
        Ok(s)
    }

    /// Queues `job`; the receiver gets its results. `429` when the queue is full, `503`
    /// once shutting down.
    pub fn submit(&self, job: SearchJob) -> ApiResult<oneshot::Receiver<ApiResult<Answer>>> {
        let nq = job.queries.n();
        let k = job.params.k();
        let (tx, rx) = oneshot::channel();
        if nq == 0 {
            let _ = tx.send(Ok(Answer {
                hits: Hits {
                    k,
                    ..Hits::default()
                },
                queue_secs: 0.0,
                search_secs: 0.0,
            }));
            return Ok(rx);
        }
        let run = Arc::new(Running {
            job,
            nq,
            k,
            out: Mutex::new(Partial {
                ids: vec![trawl::kinds::HOLE; nq * k],
                dists: vec![f32::INFINITY; nq * k],
                stats: vec![QueryStats::default(); nq],
                left: nq,
            }),
            tx: Mutex::new(Some(tx)),
            cancelled: AtomicBool::new(false),
            enqueued: Instant::now(),
            started: Mutex::new(None),
        });
        let mut q = self.q.lock();
        if q.shutdown {
            return Err(ApiError::unavailable("the server is shutting down"));
        }
        if q.waiting >= self.capacity {
            return Err(self.full(&q));
        }
        q.ring.push_back((run, 0));
        q.waiting += 1;
        q.queries += nq;
        self.gauges(&q);
        // As many threads as the job has chunks, the warmest first.
        for _ in 0..nq.div_ceil(self.chunk) {
            let Some(w) = q.idle.pop() else { break };
            q.woken[w] = true;
            self.cvs[w].notify_one();
        }
        Ok(rx)
    }

    fn gauges(&self, q: &Queue) {
        self.metrics.queue_requests.set(q.waiting as i64);
        self.metrics.queue_queries.set(q.queries as i64);
    }

    /// Requests waiting (not started).
    pub fn waiting(&self) -> usize {
        self.q.lock().waiting
    }

    /// `429` when the queue is full now (checked before a request is decoded, so refusing
    /// costs little; [`Scheduler::submit`] checks again).
    pub fn check_room(&self) -> ApiResult<()> {
        let q = self.q.lock();
        if q.waiting >= self.capacity {
            return Err(self.full(&q));
        }
        Ok(())
    }

    fn full(&self, q: &Queue) -> ApiError {
        let wait = q.queries as f64 * q.query_secs / self.threads as f64;
        ApiError::overloaded(
            format!(
                "the search queue is full ({} requests waiting); retry later",
                q.waiting
            ),
            wait.ceil() as u64,
        )
    }

    fn next(&self, me: usize) -> Option<(Arc<Running>, Range<usize>)> {
        let mut q = self.q.lock();
        loop {
            if let Some((run, start)) = q.ring.pop_front() {
                let end = (start + self.chunk).min(run.nq);
                q.queries -= end - start;
                if start == 0 {
                    q.waiting -= 1;
                }
                if end < run.nq {
                    q.ring.push_back((run.clone(), end));
                }
                self.gauges(&q);
                return Some((run, start..end));
            }
            if q.shutdown {
                return None;
            }
            q.woken[me] = false;
            q.idle.push(me);
            while !q.woken[me] && !q.shutdown {
                self.cvs[me].wait(&mut q);
            }
            if !q.woken[me] {
                // Shut down while idle: not on the idle list any more.
                q.idle.retain(|&w| w != me);
            }
        }
    }

    fn work(&self, me: usize) {
        while let Some((run, r)) = self.next(me) {
            let t = Instant::now();
            let n = r.len();
            run.run(r, &self.metrics);
            let per = t.elapsed().as_secs_f64() / n as f64;
            let mut q = self.q.lock();
            q.query_secs = if q.query_secs == 0.0 {
                per
            } else {
                0.9 * q.query_secs + 0.1 * per
            };
        }
    }

    /// Refuses new jobs, lets the search threads finish every job queued, and joins them
    /// (waiting at most `grace`).
    pub fn shutdown(&self, grace: Duration) {
        self.q.lock().shutdown = true;
        for cv in &self.cvs {
            cv.notify_all();
        }
        let t = Instant::now();
        let handles = std::mem::take(&mut *self.handles.lock());
        for h in handles {
            while !h.is_finished() && t.elapsed() < grace {
                std::thread::sleep(Duration::from_millis(5));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

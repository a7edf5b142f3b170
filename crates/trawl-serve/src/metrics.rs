//! Prometheus metrics (`GET /metrics`, the text format): requests and errors by endpoint and
//! status, latency histograms, the search queue, requests in flight, the searches' I/O
//! counters, the write-ahead log's size and merges.

use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};
use trawl::search::QueryStats;

/// Every metric of the service.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by endpoint (the route) and status code.
    pub requests: IntCounterVec,
    /// Seconds from a request's arrival to its answer, by endpoint.
    pub latency: HistogramVec,
    /// Seconds a search request waited for a search thread.
    pub queue_wait: HistogramVec,
    /// HTTP requests being handled.
    pub in_flight: IntGauge,
    /// Search requests no search thread has started yet (set at every change).
    pub queue_requests: IntGauge,
    /// Queries of the waiting search requests.
    pub queue_queries: IntGauge,
    /// Queries searched, by index.
    pub queries: IntCounterVec,
    /// Pages read from disk by searches, by index.
    pub pages_read: IntCounterVec,
    /// Read requests submitted by searches, by index.
    pub io_requests: IntCounterVec,
    /// Bytes read by searches, by index.
    pub bytes_read: IntCounterVec,
    /// Nodes served from the in-memory cache instead of a read, by index.
    pub cache_hits: IntCounterVec,
    /// Graph hops of searches, by index.
    pub hops: IntCounterVec,
    /// `cache_hits / (cache_hits + pages_read)` since start, by index (set at each scrape).
    pub cache_hit_ratio: GaugeVec,
    /// Vectors written, by index and operation (insert, upsert, delete).
    pub written: IntCounterVec,
    /// Bytes of the write-ahead log, by index (set at each scrape).
    pub wal_bytes: IntGaugeVec,
    /// Vectors inserted since the last merge, held in memory, by index (set at each scrape).
    pub delta_vectors: IntGaugeVec,
    /// Live vectors, by index (set at each scrape).
    pub vectors: IntGaugeVec,
    /// A merge's progress in its current phase (0 to 1; 0 when none runs), by index.
    pub merge_progress: GaugeVec,
    /// 1 while a merge runs, by index.
    pub merge_running: IntGaugeVec,
    /// Merges finished, by index and result (ok, failed).
    pub merges: IntCounterVec,
    /// Seconds since the service started.
    pub uptime: Gauge,
}

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    r.register(Box::new(g.clone())).expect("registered once");
    g
}

fn fgauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let g = GaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    r.register(Box::new(g.clone())).expect("registered once");
    g
}

fn histogram(r: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    // 50 µs to 30 s.
    let buckets = vec![
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
        1.0, 2.5, 5.0, 10.0, 30.0,
    ];
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("a valid metric");
    r.register(Box::new(h.clone())).expect("registered once");
    h
}

impl Metrics {
    /// Every metric, registered (names are fixed and distinct: registering cannot fail).
    #[allow(clippy::expect_used)]
    pub fn new() -> Self {
        let r = Registry::new();
        let ix = &["index"];
        let in_flight = IntGauge::new("trawl_in_flight_requests", "HTTP requests being handled")
            .expect("a valid metric");
        r.register(Box::new(in_flight.clone()))
            .expect("registered once");
        let queue_requests = IntGauge::new(
            "trawl_search_queue_requests",
            "Search requests waiting for a search thread",
        )
        .expect("a valid metric");
        r.register(Box::new(queue_requests.clone()))
            .expect("registered once");
        let queue_queries = IntGauge::new(
            "trawl_search_queue_queries",
            "Queries of the search requests waiting for a search thread",
        )
        .expect("a valid metric");
        r.register(Box::new(queue_queries.clone()))
            .expect("registered once");
        let uptime = Gauge::new("trawl_uptime_seconds", "Seconds since the service started")
            .expect("a valid metric");
        r.register(Box::new(uptime.clone()))
            .expect("registered once");
        Self {
            requests: counter(
                &r,
                "trawl_requests_total",
                "Requests answered, by endpoint and status code",
                &["endpoint", "code"],
            ),
            latency: histogram(
                &r,
                "trawl_request_duration_seconds",
                "Seconds from a request's arrival to its answer",
                &["endpoint"],
            ),
            queue_wait: histogram(
                &r,
                "trawl_search_queue_wait_seconds",
                "Seconds a search request waited for its first search thread",
                ix,
            ),
            in_flight,
            queue_requests,
            queue_queries,
            queries: counter(&r, "trawl_queries_total", "Queries searched", ix),
            pages_read: counter(&r, "trawl_pages_read_total", "Pages read by searches", ix),
            io_requests: counter(
                &r,
                "trawl_io_requests_total",
                "Reads submitted by searches",
                ix,
            ),
            bytes_read: counter(&r, "trawl_read_bytes_total", "Bytes read by searches", ix),
            cache_hits: counter(
                &r,
                "trawl_cache_hits_total",
                "Nodes served from the in-memory cache instead of a read",
                ix,
            ),
            hops: counter(&r, "trawl_hops_total", "Graph hops of searches", ix),
            cache_hit_ratio: fgauge_vec(
                &r,
                "trawl_cache_hit_ratio",
                "cache hits / (cache hits + pages read) since start",
                ix,
            ),
            written: counter(
                &r,
                "trawl_written_vectors_total",
                "Vectors inserted, upserted or deleted",
                &["index", "op"],
            ),
            wal_bytes: gauge_vec(&r, "trawl_wal_bytes", "Bytes of the write-ahead log", ix),
            delta_vectors: gauge_vec(
                &r,
                "trawl_delta_vectors",
                "Vectors inserted since the last merge (in memory)",
                ix,
            ),
            vectors: gauge_vec(&r, "trawl_vectors", "Vectors a search can return", ix),
            merge_progress: fgauge_vec(
                &r,
                "trawl_merge_progress",
                "A running merge's progress in its current phase (0 to 1)",
                ix,
            ),
            merge_running: gauge_vec(&r, "trawl_merge_running", "1 while a merge runs", ix),
            merges: counter(
                &r,
                "trawl_merges_total",
                "Merges finished, by result",
                &["index", "result"],
            ),
            uptime,
            registry: r,
        }
    }

    /// Adds a search's statistics to `index`'s counters.
    pub fn searched(&self, index: &str, queries: usize, t: &QueryStats) {
        self.queries
            .with_label_values(&[index])
            .inc_by(queries as u64);
        self.pages_read
            .with_label_values(&[index])
            .inc_by(t.io.pages_read);
        self.io_requests
            .with_label_values(&[index])
            .inc_by(t.io.io_requests);
        self.bytes_read
            .with_label_values(&[index])
            .inc_by(t.io.bytes_read);
        self.cache_hits
            .with_label_values(&[index])
            .inc_by(t.traversal.cache_hits);
        self.hops
            .with_label_values(&[index])
            .inc_by(t.traversal.hops);
    }

    /// The text format of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail on I/O; a failure would be a bad metric name.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

//! [`QueryStats`]: what one query did, grouped by part — the traversal, the I/O, the re-rank
//! from disk. Every field is an exact count except the times. In JSON the groups are flattened,
//! so the field names are those of the flat record the bench scripts read.

use std::ops::AddAssign;

/// What the traversal of the graph did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TraversalStats {
    /// Beam search: round trips, iterations that expanded at least one node (DiskANN's
    /// "hops"). PipeSearch: times the search had nothing to issue or explore and waited for a
    /// read (its stalls on the device).
    pub hops: u64,
    /// Nodes expanded (records whose neighbours were scored).
    pub nodes_expanded: u64,
    /// Nodes expanded from memory (the static node cache, or the decoupled layout's list
    /// cache) instead of the file.
    pub cache_hits: u64,
    /// Nodes expanded from a page this query had already read (PageSearch), without a read.
    pub page_hits: u64,
    /// PQ (approximate) distance computations.
    pub pq_distances: u64,
    /// Full-precision distance computations (on records read or cached, or on vectors the
    /// re-rank read).
    pub exact_distances: u64,
    /// Full-precision distance computations in the in-memory entry index.
    pub entry_distances: u64,
    /// Decoupled layout: nanoseconds decoding neighbour lists (Elias-Fano).
    pub list_decode_ns: u64,
}

/// What the query read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoStats {
    /// 4 KiB pages read from the file.
    pub pages_read: u64,
    /// Read requests issued (one per distinct page run; a request may carry several pages when
    /// a record spans pages).
    pub io_requests: u64,
    /// Bytes read from the file (`pages_read × 4096`).
    pub bytes_read: u64,
    /// Records (or lists, or vectors) on the pages read: every one a read brought into memory,
    /// whether the search used it or not.
    pub records_read: u64,
    /// Reads none of whose records were used (PipeSearch's speculative reads that turned out
    /// useless, re-rank reads no batch reached; always 0 for beam search on records).
    pub wasted_reads: u64,
    /// Nanoseconds spent blocked waiting for reads.
    pub io_wait_ns: u64,
    /// Σ over the time a read was in flight of (reads in flight × nanoseconds).
    pub inflight_time_ns: u64,
    /// Σ over the same time of (pipeline width × nanoseconds); `inflight_time_ns /
    /// width_time_ns` is the pipeline occupancy (PipeANN's I/O pipeline utilisation).
    pub width_time_ns: u64,
}

/// What the re-rank from a vector file did (decoupled layout; zero elsewhere).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RerankStats {
    /// Reads of the vector file (each one page; included in the I/O counts, the rest of which
    /// are graph reads).
    pub vector_reads: u64,
    /// Vector reads issued during the traversal (phase-1 prefetch).
    pub prefetched: u64,
    /// Re-rank batches processed.
    pub rerank_batches: u64,
    /// Nanoseconds decoding vectors (Huffman, XOR).
    pub vector_decode_ns: u64,
    /// Vectors taken from a vector page this query had read already (no read).
    pub page_reuses: u64,
    /// Vectors that joined a read of their page already in flight (no read of their own).
    pub page_joins: u64,
    /// Re-rank round trips after the traversal: bursts of vector reads issued when none of
    /// the query's vector reads was in flight.
    pub rounds: u64,
    /// Expanded nodes whose re-rank order came from the in-memory refinement codes.
    pub refined: u64,
    /// Nanoseconds computing refinement-code distances.
    pub refine_ns: u64,
    /// Re-rank candidates not read because their RaBitQ lower bound (estimate − ε₀σ) was
    /// beyond the `K`-th exact distance at the time ([`crate::kinds::graph::search::rerank::RerankParams::skip_eps`]).
    pub rerank_skipped: u64,
}

/// What a filter did (zero without one). Each query counts 1 in the field of the plan it
/// took, so summed over a batch they count the queries per plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FilterStats {
    /// 1 when the query was searched by the graph or lists with the filter applied inline.
    pub plan_inline: u64,
    /// 1 when its matches were scored by their codes in memory and the best re-ranked.
    pub plan_scan: u64,
    /// 1 when every match was read and scored exactly.
    pub plan_exact: u64,
    /// Rows matching the filter (the planner's figure: exact when `matches_exact`).
    pub matches: u64,
    /// 1 when `matches` is exact.
    pub matches_exact: u64,
    /// The list size (or candidates re-ranked) the plan ran with.
    pub filter_list: u64,
    /// Candidates scored that the filter rejected.
    pub rejected: u64,
}

/// What the IVF index's stages did (zero for graph indexes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IvfStats {
    /// Posting lists probed.
    pub lists_probed: u64,
    /// Candidate ids gathered from the lists, duplicates included.
    pub candidates: u64,
    /// Distinct candidates after deduplication (each scored once by PQ).
    pub candidates_unique: u64,
    /// Reads saved by merging a mini-batch's vectors on one page into one read.
    pub pages_merged: u64,
    /// Reads saved by the query's page buffer (pages an earlier mini-batch had read).
    pub pages_buffered: u64,
    /// Vectors re-ranked because they share a page with a candidate that was read (page-mate
    /// scoring; they cost no read).
    pub page_mates: u64,
    /// Distances computed in the centroid graph.
    pub centroid_distances: u64,
}

/// What FlashANNS's batch search did (zero for the other strategies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlashStats {
    /// Steps: records expanded (one per read).
    pub steps: u64,
    /// Steps whose node a strict best-first search would not have expanded then: the list
    /// held an unchosen candidate ordered before it (always 0 with staleness 0).
    pub stale_steps: u64,
    /// Times the search thread blocked for reads while this query's next record had not
    /// landed.
    pub waits: u64,
    /// Nanoseconds from each read's submission until the search saw it land (its latency as
    /// the pipeline sees it), summed over the query's reads.
    pub read_ns: u64,
    /// Nanoseconds of the steps this query took part in, each step's time shared equally
    /// among its queries (host expansion, accelerator step, issuing the next reads).
    pub step_ns: u64,
}

/// CPU time by part of the search, taken only where asked (`Searcher::set_time_parts`,
/// `OpenOptions::time_parts`; zero otherwise). Each part is time on the search thread outside
/// the waits for reads; a part shared by the queries interleaved on a thread (an I/O call
/// serves all of them) is split equally among them, so summed over queries each part is the
/// thread time it took. What the parts leave of the thread's CPU time is the traversal's
/// other bookkeeping (candidate list scans, scheduling) and kernel work outside the timed
/// calls (interrupts, wake-ups).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartStats {
    /// Whether this query's parts are timed (set by the searcher; not summed, not serialised).
    #[serde(skip)]
    pub timed: bool,
    /// I/O calls that did not block: submitting the pushed reads (the `io_uring_enter` system
    /// call) and collecting completions.
    pub io_call_ns: u64,
    /// Polling for a completion before blocking (`spin_us`): CPU spent waiting.
    pub poll_ns: u64,
    /// Checking the pages read (checksum, page header).
    pub checksum_ns: u64,
    /// Building the query's PQ distance table.
    pub pq_table_ns: u64,
    /// Visited-set checks of the neighbours of expanded nodes.
    pub visited_ns: u64,
    /// PQ distances of new neighbours (code prefetch, table look-ups) and their insertion
    /// into the candidate list.
    pub pq_score_ns: u64,
    /// Full-precision distances of the records read (and of page mates).
    pub exact_ns: u64,
    /// The entry-index search that seeds the query.
    pub entry_ns: u64,
}

impl PartStats {
    /// A clock for one part: running only when the parts are timed.
    #[inline]
    pub(crate) fn start(&self) -> Option<std::time::Instant> {
        self.timed.then(std::time::Instant::now)
    }
}

/// Adds the time since `t0` (a [`PartStats::start`]) to `ns`.
#[inline]
pub(crate) fn stop(t0: Option<std::time::Instant>, ns: &mut u64) {
    if let Some(t0) = t0 {
        *ns += t0.elapsed().as_nanos() as u64;
    }
}

/// What one query did. Summed over queries with `+=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueryStats {
    /// The graph traversal.
    #[serde(flatten)]
    pub traversal: TraversalStats,
    /// Reads.
    #[serde(flatten)]
    pub io: IoStats,
    /// The re-rank from a vector file.
    #[serde(flatten)]
    pub rerank: RerankStats,
    /// The IVF stages.
    #[serde(flatten)]
    pub ivf: IvfStats,
    /// FlashANNS's batch search.
    #[serde(flatten)]
    pub flash: FlashStats,
    /// The filter.
    #[serde(flatten)]
    pub filter: FilterStats,
    /// CPU time by part (when timed).
    #[serde(flatten)]
    pub parts: PartStats,
    /// Nanoseconds of the whole query (`io.io_wait_ns` included).
    pub total_ns: u64,
}

impl QueryStats {
    /// Nanoseconds not spent waiting for reads.
    pub fn compute_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.io.io_wait_ns)
    }

    /// I/O utilisation `U_io` (OctopusANN Eq. 3) at record level: nodes expanded from read
    /// pages over the records those pages held (0 without reads). Reading a page for one of its
    /// records and ignoring the others lowers it; PageSearch and PageShuffle raise it.
    pub fn io_utilisation(&self) -> f64 {
        if self.io.records_read == 0 {
            0.0
        } else {
            self.traversal
                .nodes_expanded
                .saturating_sub(self.traversal.cache_hits) as f64
                / self.io.records_read as f64
        }
    }

    /// Mean reads in flight over the mean width while reads were in flight (0 without reads).
    pub fn occupancy(&self) -> f64 {
        if self.io.width_time_ns == 0 {
            0.0
        } else {
            self.io.inflight_time_ns as f64 / self.io.width_time_ns as f64
        }
    }

    /// Counts one read request of `pages` pages holding `records` records (or lists, or
    /// vectors).
    #[inline]
    pub fn count_read(&mut self, pages: u32, records: u64) {
        self.io.io_requests += 1;
        self.io.pages_read += u64::from(pages);
        self.io.bytes_read += u64::from(pages) * crate::io::PAGE_BYTES as u64;
        self.io.records_read += records;
    }
}

impl AddAssign for TraversalStats {
    fn add_assign(&mut self, o: Self) {
        self.hops += o.hops;
        self.nodes_expanded += o.nodes_expanded;
        self.cache_hits += o.cache_hits;
        self.page_hits += o.page_hits;
        self.pq_distances += o.pq_distances;
        self.exact_distances += o.exact_distances;
        self.entry_distances += o.entry_distances;
        self.list_decode_ns += o.list_decode_ns;
    }
}

impl AddAssign for IoStats {
    fn add_assign(&mut self, o: Self) {
        self.pages_read += o.pages_read;
        self.io_requests += o.io_requests;
        self.bytes_read += o.bytes_read;
        self.records_read += o.records_read;
        self.wasted_reads += o.wasted_reads;
        self.io_wait_ns += o.io_wait_ns;
        self.inflight_time_ns += o.inflight_time_ns;
        self.width_time_ns += o.width_time_ns;
    }
}

impl AddAssign for RerankStats {
    fn add_assign(&mut self, o: Self) {
        self.vector_reads += o.vector_reads;
        self.prefetched += o.prefetched;
        self.rerank_batches += o.rerank_batches;
        self.vector_decode_ns += o.vector_decode_ns;
        self.page_reuses += o.page_reuses;
        self.page_joins += o.page_joins;
        self.rounds += o.rounds;
        self.refined += o.refined;
        self.rerank_skipped += o.rerank_skipped;
        self.refine_ns += o.refine_ns;
    }
}

impl AddAssign for IvfStats {
    fn add_assign(&mut self, o: Self) {
        self.lists_probed += o.lists_probed;
        self.candidates += o.candidates;
        self.candidates_unique += o.candidates_unique;
        self.pages_merged += o.pages_merged;
        self.pages_buffered += o.pages_buffered;
        self.page_mates += o.page_mates;
        self.centroid_distances += o.centroid_distances;
    }
}

impl AddAssign for FilterStats {
    fn add_assign(&mut self, o: Self) {
        self.plan_inline += o.plan_inline;
        self.plan_scan += o.plan_scan;
        self.plan_exact += o.plan_exact;
        self.matches += o.matches;
        self.matches_exact += o.matches_exact;
        self.filter_list += o.filter_list;
        self.rejected += o.rejected;
    }
}

impl AddAssign for FlashStats {
    fn add_assign(&mut self, o: Self) {
        self.steps += o.steps;
        self.stale_steps += o.stale_steps;
        self.waits += o.waits;
        self.read_ns += o.read_ns;
        self.step_ns += o.step_ns;
    }
}

impl AddAssign for PartStats {
    fn add_assign(&mut self, o: Self) {
        self.io_call_ns += o.io_call_ns;
        self.poll_ns += o.poll_ns;
        self.checksum_ns += o.checksum_ns;
        self.pq_table_ns += o.pq_table_ns;
        self.visited_ns += o.visited_ns;
        self.pq_score_ns += o.pq_score_ns;
        self.exact_ns += o.exact_ns;
        self.entry_ns += o.entry_ns;
    }
}

impl AddAssign for QueryStats {
    fn add_assign(&mut self, o: Self) {
        self.traversal += o.traversal;
        self.io += o.io;
        self.rerank += o.rerank;
        self.ivf += o.ivf;
        self.flash += o.flash;
        self.filter += o.filter;
        self.parts += o.parts;
        self.total_ns += o.total_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_the_flat_names() {
        let mut s = QueryStats::default();
        s.io.pages_read = 3;
        s.traversal.hops = 2;
        s.rerank.vector_reads = 1;
        s.total_ns = 9;
        s.ivf.page_mates = 4;
        let v = serde_json::to_value(s).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o["pages_read"], 3);
        assert_eq!(o["hops"], 2);
        assert_eq!(o["vector_reads"], 1);
        assert_eq!(o["total_ns"], 9);
        assert_eq!(o["page_mates"], 4);
        assert_eq!(o["refined"], 0);
        assert_eq!(o["refine_ns"], 0);
        assert_eq!(o["pq_score_ns"], 0);
        assert!(!o.contains_key("timed"));
        for name in [
            "plan_inline",
            "plan_scan",
            "plan_exact",
            "matches",
            "matches_exact",
        ] {
            assert_eq!(o[name], 0, "{name}");
        }
        assert_eq!(o["filter_list"], 0);
        assert_eq!(o["rejected"], 0);
        // Every field under its own name: no two groups' fields collide when flattened.
        assert_eq!(o["rerank_skipped"], 0);
        assert_eq!(o.len(), 54, "{o:?}");
        let mut t = s;
        t += s;
        assert_eq!(t.io.pages_read, 6);
        assert_eq!(t.total_ns, 18);
        assert_eq!(t.ivf.page_mates, 8);
    }
}

//! Search parameters: what a caller asks for ([`SearchParams`], one [`Strategy`] with its own
//! parameters), and what a batch runs with once checked against the opened index
//! ([`SearchConfig`], made once per batch by [`SearchConfig::new`] from the index's
//! [`Capabilities`] and the engine's queue depth).

use crate::kinds::graph::search::{FlashParams, PipeParams, RerankParams, WidthSchedule};
use crate::search::SearchError;

/// The largest candidate list a search takes (its `L`, and the entry index's list): each
/// query holds lists of this size, and recall saturates far below it.
pub const MAX_LIST: usize = 100_000;

/// Default beam width (reads per round trip), DiskANN's usual setting.
pub const DEFAULT_BEAM_WIDTH: usize = 4;

/// Parameters of beam search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeamParams {
    /// Beam width `W`: records read per round trip, `1 ≤ W ≤` the searcher's queue depth.
    pub width: usize,
    /// Widen the beam by explored position (OctopusANN's DynamicWidth), capped by `width`;
    /// `None` keeps the width fixed.
    pub dynamic_width: Option<WidthSchedule>,
    /// Compute the exact distance of every record on each page read, offer them to the
    /// candidate list and the result set, and expand any of them later from the page already
    /// read, without another read (Starling's in-page search, OctopusANN's PageSearch). Needs a
    /// layout whose pages hold records.
    pub page_search: bool,
}

impl Default for BeamParams {
    fn default() -> Self {
        Self {
            width: DEFAULT_BEAM_WIDTH,
            dynamic_width: None,
            page_search: false,
        }
    }
}

/// How a query walks the graph, with the parameters of that walk. (An index kind with another
/// search — an IVF index's list probing — adds its variant here.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// DiskANN's beam search: rounds of up to `W` reads, each round explored before the next.
    Beam(BeamParams),
    /// PipeANN's pipelined search ([`crate::kinds::graph::search::pipe`]): reads stay in flight while arrived
    /// records are explored.
    Pipe(PipeParams),
    /// FlashANNS's batch search ([`crate::kinds::graph::search::flash`]): a batch of queries per thread, lists and
    /// visited sets on an accelerator, reads chosen `k` steps ahead.
    Flash(FlashParams),
}

impl Default for Strategy {
    fn default() -> Self {
        Self::Beam(BeamParams::default())
    }
}

impl Strategy {
    /// `"beam"`, `"pipe"` or `"flash"`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Beam(_) => "beam",
            Self::Pipe(_) => "pipe",
            Self::Flash(_) => "flash",
        }
    }

    /// The strategy called `name` (`"beam"`, `"pipe"` or `"flash"`) from the flat options
    /// front ends take: beam search with `beam`, PipeSearch with `pipe`, the batch search with
    /// `flash` — PageSearch (`beam.page_search`) applies to beam search and PipeSearch;
    /// DynamicWidth only to beam search (PipeSearch sets its width with its own policy), and
    /// the flash search takes neither.
    pub fn named(
        name: &str,
        beam: BeamParams,
        pipe: PipeParams,
        flash: FlashParams,
    ) -> Result<Self, SearchError> {
        match name {
            "beam" => Ok(Self::Beam(beam)),
            "pipe" | "flash" if beam.dynamic_width.is_some() => Err(SearchError::Unsupported(
                "DynamicWidth is a beam-search option (PipeSearch and the flash search set \
                 their widths with their own policies)"
                    .into(),
            )),
            "flash" if beam.page_search => Err(SearchError::Unsupported(
                "PageSearch is an option of beam search and PipeSearch, not of the flash search"
                    .into(),
            )),
            "pipe" => Ok(Self::Pipe(PipeParams {
                page_search: pipe.page_search || beam.page_search,
                ..pipe
            })),
            "flash" => Ok(Self::Flash(flash)),
            other => Err(SearchError::Unsupported(format!(
                "strategy {other:?}: expected \"beam\", \"pipe\" or \"flash\""
            ))),
        }
    }

    /// The most graph reads one query keeps in flight: the beam width, or PipeSearch's
    /// maximum width.
    pub fn max_reads(&self) -> usize {
        match self {
            Self::Beam(b) => b.width,
            Self::Pipe(p) => p.max_width,
            Self::Flash(f) => f.staleness + 1,
        }
    }
}

/// Parameters of one search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchParams {
    /// Results wanted, `1 ≤ k ≤ l`.
    pub k: usize,
    /// Candidate list size `L`: larger is slower and more accurate.
    pub l: usize,
    /// The strategy (beam search, PipeSearch or the flash batch search), with its parameters.
    pub strategy: Strategy,
    /// List size of the in-memory entry-index search whose results seed the candidate list
    /// (PipeANN uses 10); 0 starts from the medoid alone. Needs an index built with an entry
    /// index.
    pub entry_list: usize,
    /// How the full-precision vectors are read and the result re-ranked, for layouts that keep
    /// them apart from the graph (the decoupled layout, [`crate::kinds::graph::search::rerank`]). Layouts whose
    /// records carry their vectors re-rank every expanded node and do not use these.
    pub rerank: RerankParams,
    /// Range search (`None`: the `k` nearest): every vector within the radius, with no cap;
    /// `k` then only sizes the re-rank's first batches.
    pub range: Option<RangeSpec>,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self {
            k: 10,
            l: 100,
            strategy: Strategy::default(),
            entry_list: 0,
            rerank: RerankParams::default(),
            range: None,
        }
    }
}

impl SearchParams {
    /// Beam search with list size `l` and width `w`, `k` results, everything else default.
    pub fn beam(k: usize, l: usize, w: usize) -> Self {
        Self {
            k,
            l,
            strategy: Strategy::Beam(BeamParams {
                width: w,
                ..BeamParams::default()
            }),
            ..Self::default()
        }
    }
}

/// What an opened index supports, for checking [`SearchParams`] against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Indexed vectors.
    pub n: u64,
    /// Whether the layout's pages hold whole records (PageSearch needs them).
    pub records: bool,
    /// Whether the full-precision vectors are read apart from the graph and re-ranked
    /// ([`SearchParams::rerank`] applies).
    pub rerank_from_disk: bool,
    /// Whether the index has an in-memory entry index.
    pub entry_index: bool,
    /// Whether the PQ codes are in memory (the entry index seeds the list with PQ distances).
    pub pq_in_memory: bool,
    /// Whether a search node is a page of several vectors (the page-node layout): `L` counts
    /// pages, and `k` may exceed it.
    pub page_nodes: bool,
}

/// Range search on a graph: every vector whose exact distance is at most `radius`.
///
/// The traversal works in code space (PQ or RaBitQ distances), whose distances are off by the
/// quantiser's error: a candidate enters the elastic list's range part
/// ([`crate::vamana::queue::CandidateList::set_radius`]) when its code distance is at most the
/// corrected radius `radius + slack · |radius|` ([`RangeSpec::code_radius`]); every result
/// is then checked by its exact distance, so a larger slack costs reads, never precision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeSpec {
    /// The radius, in trawl's distance (squared L2, negated inner product, `1 − cos`).
    pub radius: f32,
    /// Relative widening of the radius in code space (≥ 0).
    pub slack: f32,
    /// Beam search: reads per round trip while the candidates within the radius are expanded
    /// (the second round, whose reads are all needed and independent), at least the beam
    /// width and at most the queue depth; 0 keeps the beam width.
    pub width: usize,
    /// Early stop: a query with no exact distance and no waiting candidate within the
    /// corrected radius, whose nearest exact distance has not improved for this many round
    /// trips in a row (PipeSearch: reads issued), stops
    /// ([`crate::kinds::graph::search::Frontier::stop_early`]); 0 never stops early.
    pub early_stop: usize,
}

/// Default [`RangeSpec::slack`].
pub const DEFAULT_RANGE_SLACK: f32 = 0.15;
/// Default [`RangeSpec::width`].
pub const DEFAULT_RANGE_WIDTH: usize = 16;

impl RangeSpec {
    /// The radius the traversal compares code distances with.
    pub fn code_radius(&self) -> f32 {
        self.radius + self.slack * self.radius.abs()
    }

    /// Checks the radius (finite) and the slack (finite, ≥ 0).
    pub fn validate(&self) -> Result<(), SearchError> {
        if !self.radius.is_finite() {
            return Err(SearchError::Unsupported(format!(
                "range search needs a finite radius, not {}",
                self.radius
            )));
        }
        if !(self.slack.is_finite() && self.slack >= 0.0) {
            return Err(SearchError::Unsupported(format!(
                "the range search's slack must be a finite number ≥ 0, not {}",
                self.slack
            )));
        }
        Ok(())
    }
}

/// Search parameters checked against an index and a queue depth: what a batch runs with.
/// Made only by [`SearchConfig::new`], so a search never sees an invalid combination.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchConfig {
    k: usize,
    /// Results a finished query hands over: `k`, or the whole explored set when the searcher
    /// filters them afterwards ([`crate::kinds::graph::search::LiveFilter`]).
    result_len: usize,
    l: usize,
    strategy: Strategy,
    entry_list: usize,
    rerank: Option<RerankParams>,
    /// Range search ([`SearchConfig::set_range`]).
    range: Option<RangeSpec>,
}

impl SearchConfig {
    /// Checks `p` against what the index supports (`caps`) and the engine's queue `depth`.
    pub fn new(p: &SearchParams, caps: &Capabilities, depth: usize) -> Result<Self, SearchError> {
        if p.k == 0 || (p.k > p.l && !caps.page_nodes) {
            return Err(SearchError::InvalidK { k: p.k, l: p.l });
        }
        if p.k as u64 > caps.n {
            return Err(SearchError::KTooLarge { k: p.k, n: caps.n });
        }
        for (what, value) in [("list size L", p.l), ("entry list size", p.entry_list)] {
            if value > MAX_LIST {
                return Err(SearchError::ListTooLarge {
                    what,
                    value,
                    max: MAX_LIST,
                });
            }
        }
        match &p.strategy {
            Strategy::Beam(b) => {
                if b.width == 0 || b.width > depth {
                    return Err(SearchError::InvalidBeamWidth {
                        beam_width: b.width,
                        max: depth,
                    });
                }
                if b.page_search && !caps.records {
                    return Err(SearchError::Unsupported(
                        "PageSearch scores the other records of a page read, and the decoupled \
                         layout's graph pages hold no vectors"
                            .into(),
                    ));
                }
            }
            Strategy::Pipe(pp) => {
                pp.validate(depth)?;
                if pp.page_search && !caps.records {
                    return Err(SearchError::Unsupported(
                        "PageSearch scores the other records of a page read, and the decoupled \
                         layout's graph pages hold no vectors"
                            .into(),
                    ));
                }
            }
            Strategy::Flash(fp) => {
                if !(caps.records || caps.page_nodes) || !caps.pq_in_memory || caps.rerank_from_disk
                {
                    return Err(SearchError::Unsupported(
                        "the flash strategy reads records (vector and neighbours) or page nodes \
                         and keeps the PQ codes on its accelerator: search the packed, \
                         PageShuffle or page-node layout"
                            .into(),
                    ));
                }
                fp.validate(depth)?;
            }
        }
        let rerank = if caps.rerank_from_disk {
            p.rerank.validate()?;
            Some(p.rerank)
        } else {
            None
        };
        if p.entry_list > 0 && !caps.entry_index {
            return Err(SearchError::NoEntryIndex);
        }
        if p.entry_list > 0 && !caps.pq_in_memory {
            return Err(SearchError::Unsupported(
                "the entry index seeds the list with PQ distances, and the All-in-Storage \
                 layout keeps no PQ codes in memory: search it with entry_list = 0"
                    .into(),
            ));
        }
        Ok(Self {
            k: p.k,
            result_len: p.k,
            l: p.l,
            strategy: p.strategy,
            entry_list: p.entry_list,
            rerank,
            range: None,
        })
        .and_then(|mut c| {
            if let Some(mut r) = p.range {
                r.width = r.width.min(depth);
                c.set_range(r)?;
            }
            Ok(c)
        })
    }

    /// Makes this a range search: every explored node comes back (the searcher keeps those
    /// within the radius) and the candidate list keeps every candidate within the corrected
    /// radius. The flash strategy has no range search.
    pub fn set_range(&mut self, range: RangeSpec) -> Result<(), SearchError> {
        range.validate()?;
        if let Strategy::Flash(_) = self.strategy {
            return Err(SearchError::Unsupported(
                "the flash strategy has no range search: use beam or pipe".into(),
            ));
        }
        self.range = Some(range);
        self.keep_all_results();
        Ok(())
    }

    /// The range search, when this is one.
    pub fn range(&self) -> Option<&RangeSpec> {
        self.range.as_ref()
    }

    /// The radius the candidate list keeps candidates within (`None`: not a range search).
    pub fn code_radius(&self) -> Option<f32> {
        self.range.map(|r| r.code_radius())
    }

    /// Results wanted.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Results a finished query hands over (`k` unless [`SearchConfig::keep_all_results`]).
    pub fn result_len(&self) -> usize {
        self.result_len
    }
    /// Makes finished queries hand over every explored node, nearest first, for a caller
    /// that filters them and keeps `k`.
    pub fn keep_all_results(&mut self) {
        self.result_len = usize::MAX;
    }
    /// Candidate list size.
    pub fn l(&self) -> usize {
        self.l
    }
    /// The strategy and its parameters.
    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }
    /// Entry-index list size (0: start from the medoid).
    pub fn entry_list(&self) -> usize {
        self.entry_list
    }
    /// The re-rank parameters, for an index that re-ranks from a vector file.
    pub fn rerank(&self) -> Option<&RerankParams> {
        self.rerank.as_ref()
    }
    /// Re-rank parameters for the query machines (defaults where the layout does not use them).
    pub(crate) fn rerank_or_default(&self) -> RerankParams {
        self.rerank.unwrap_or_default()
    }

    /// Slots one search thread needs for `interleave` queries (the flash strategy keeps its
    /// own batch of queries and ignores `interleave`).
    pub fn slots_per_thread(&self, interleave: usize) -> usize {
        match &self.strategy {
            Strategy::Flash(fp) => fp.batch * (fp.staleness + 1),
            _ => interleave * self.slots_per_query(),
        }
    }

    /// Slots one query may hold at once: its graph reads (PipeSearch: in flight plus landed and
    /// not yet explored) and, where the layout re-ranks from disk, its vector reads (the
    /// re-rank's depth, at least as many as the graph reads).
    pub fn slots_per_query(&self) -> usize {
        let graph = match &self.strategy {
            Strategy::Beam(b) => b.width.max(self.range.map_or(0, |r| r.width)),
            Strategy::Pipe(pp) => 2 * pp.max_width,
            Strategy::Flash(fp) => fp.staleness + 1,
        };
        graph
            + self.rerank.as_ref().map_or(0, |r| {
                if r.depth == 0 {
                    graph
                } else {
                    r.depth.max(graph)
                }
            })
    }
}

impl crate::kinds::graph::search::WidthPolicy {
    /// `fixed`, `static` or `dynamic`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Static => "static",
            Self::Dynamic => "dynamic",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Capabilities {
        Capabilities {
            n: 100,
            records: true,
            rerank_from_disk: false,
            entry_index: false,
            pq_in_memory: true,
            page_nodes: false,
        }
    }

    #[test]
    fn parameters_are_checked_once_against_the_index() {
        let ok = SearchParams::beam(10, 20, 4);
        let c = SearchConfig::new(&ok, &caps(), 8).unwrap();
        assert_eq!((c.k(), c.l(), c.entry_list()), (10, 20, 0));
        assert!(c.rerank().is_none(), "records carry their vectors");
        assert_eq!(c.slots_per_query(), 4);
        let bad = [
            (SearchParams::beam(0, 20, 4), "invalid k"),
            (SearchParams::beam(30, 20, 4), "invalid k"),
            (SearchParams::beam(200, 300, 4), "larger than"),
            (SearchParams::beam(10, 20, 9), "beam width"),
            (SearchParams::beam(10, 20, 0), "beam width"),
            (
                SearchParams {
                    entry_list: 10,
                    ..SearchParams::beam(10, 20, 4)
                },
                "no entry index",
            ),
        ];
        for (p, msg) in bad {
            let e = SearchConfig::new(&p, &caps(), 8).unwrap_err();
            assert!(e.to_string().contains(msg), "{p:?}: {e}");
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        }
        // L counts pages on the page-node layout: k may exceed it.
        let pages = Capabilities {
            page_nodes: true,
            ..caps()
        };
        let few = SearchConfig::new(&SearchParams::beam(30, 20, 4), &pages, 8).unwrap();
        assert_eq!((few.k(), few.l()), (30, 20));
        assert!(SearchConfig::new(&SearchParams::beam(0, 20, 4), &pages, 8).is_err());
        let lists = Capabilities {
            records: false,
            rerank_from_disk: true,
            ..caps()
        };
        let ps = SearchParams {
            strategy: Strategy::Beam(BeamParams {
                page_search: true,
                ..BeamParams::default()
            }),
            ..SearchParams::default()
        };
        assert!(SearchConfig::new(&ps, &lists, 8).is_err());
        let c = SearchConfig::new(&SearchParams::beam(10, 20, 4), &lists, 8).unwrap();
        assert_eq!(c.rerank(), Some(&RerankParams::default()));
        assert_eq!(c.slots_per_query(), 8);
        let bad_rerank = SearchParams {
            rerank: RerankParams {
                batch: 0,
                ..RerankParams::default()
            },
            ..SearchParams::beam(10, 20, 4)
        };
        assert!(SearchConfig::new(&bad_rerank, &lists, 8).is_err());
        // Where the layout does not re-rank from disk, its parameters are not looked at.
        assert!(SearchConfig::new(&bad_rerank, &caps(), 8).is_ok());
        let pipe = SearchParams {
            strategy: Strategy::Pipe(PipeParams::default()),
            ..SearchParams::beam(10, 20, 4)
        };
        assert!(
            SearchConfig::new(&pipe, &caps(), 16).is_err(),
            "width 32 > depth 16"
        );
        assert_eq!(
            SearchConfig::new(&pipe, &caps(), 64)
                .unwrap()
                .slots_per_query(),
            64
        );
    }
}
